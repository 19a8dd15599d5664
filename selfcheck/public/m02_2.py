"""Public cases of M02-2 手插 observer (insert_observer) on the chapter's own models.

Also how a graph with observers is described, shared with the hidden cases: by what it
does, independent of node order and observer names (which observer instances each input
of each node reads through, and every instance's kind and calibrated qparams).
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import is_guard, is_observer_node, observer_record
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m01_1 import export

TITLE = "insert_observer：不用 Quantizer，把 observer 插進圖裡"

# A position: ("edge", producer name, consumer name) or ("node", node name).
Position = tuple[str, ...]


def describe_observed(gm: GraphModule) -> dict[str, Any]:
    """What a graph with observers does, independent of node order and observer names.

    ``edges``: for every node that is not an observer, placeholder or guard, in graph order,
    ``[consumer, source, [instance, ...]]`` per input, the observer instances met walking from
    the source to the consumer. Instances are numbered in order of first appearance along
    ``edges``; ``instances`` holds each one's record (class, range, scheme, qparams).
    """
    numbers: dict[int, int] = {}
    instances: list[dict[str, Any]] = []
    edges: list[list[Any]] = []
    for node in gm.graph.nodes:
        if is_observer_node(gm, node) or node.op == "placeholder" or is_guard(node):
            continue
        for arg in node.all_input_nodes:
            modules = []
            source: Any = arg
            steps = 0
            while is_observer_node(gm, source) and steps < 100:
                modules.append(gm.get_submodule(str(source.target)))
                source = source.args[0] if source.args else None
                steps += 1
            chain = []
            for module in reversed(modules):
                if id(module) not in numbers:
                    numbers[id(module)] = len(numbers)
                    instances.append(observer_record(module))
                chain.append(numbers[id(module)])
            edges.append([node.name, source.name if isinstance(source, Node) else "?", chain])
    return {"edges": edges, "instances": instances}


def position_text(position: Position) -> str:
    return f"邊 {position[1]} → {position[2]}" if position[0] == "edge" else f"node {position[1]}（所有 consumer）"


def insert_all(ns: Namespace, gm: GraphModule, positions: list[tuple[Position, nn.Module]]) -> list[bool]:
    """Call ``insert_observer`` once per position; for each call, whether it returned the new observer node."""
    returned = []
    for position, observer in positions:
        nodes = {n.name: n for n in gm.graph.nodes}
        where: Any = (nodes[position[1]], nodes[position[2]]) if position[0] == "edge" else nodes[position[1]]
        result = ns["insert_observer"](gm, where, observer)
        returned.append(
            type(result) is Node
            and result.graph is gm.graph
            and is_observer_node(gm, result)
            and gm.get_submodule(str(result.target)) is observer
        )
    return returned


def calibrate(gm: GraphModule, shapes: list[tuple[int, ...]], seed: int, steps: int = 4) -> None:
    """Run ``gm`` on ``steps`` seeded batches of the given input shapes."""
    with torch.no_grad():
        for step in range(steps):
            gm(*seeded_inputs(seed * 1000 + step, *shapes))


# --- public cases: the chapter's models -----------------------------------------------------------


def _minmax(qmin: int = -128, qmax: int = 127, qscheme: Any = torch.per_tensor_affine) -> nn.Module:
    from common.pt2e import MinMaxObserver

    return MinMaxObserver(dtype=torch.int8, quant_min=qmin, quant_max=qmax, qscheme=qscheme)


def _run(ns: Namespace, seed: int, name: str, shape: tuple[int, ...], positions: list[tuple[Position, Any]]) -> Any:
    from common.models import get_model

    return _run_graph(ns, seed, export(get_model(name), seeded_inputs(seed, shape)), shape, positions)


def _run_graph(
    ns: Namespace, seed: int, gm: GraphModule, shape: tuple[int, ...], positions: list[tuple[Position, Any]]
) -> dict[str, Any]:
    returned = insert_all(ns, gm, positions)
    calibrate(gm, [shape], seed)
    return {
        "positions": [position_text(p) for p, _ in positions],
        "graph": describe_observed(gm),
        "returned_observer_node": returned,
    }


def conv_relu(ns: Namespace, seed: int) -> Any:
    """The chapter's three positions on conv_relu: x → conv2d, conv_weight → conv2d, the relu's output."""
    positions = [
        (("edge", "x", "conv2d"), _minmax()),
        (("edge", "conv_weight", "conv2d"), _minmax(-127, 127, torch.per_tensor_symmetric)),
        (("node", "relu"), _minmax()),
    ]
    return _run(ns, seed, "conv_relu", (2, 3, 16, 16), positions)


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: only conv2d reads x through the observer; the cat reads conv2d_1 (in a list) through one."""
    positions = [(("edge", "x", "conv2d"), _minmax()), (("edge", "conv2d_1", "cat"), _minmax())]
    return _run(ns, seed, "cat_pool", (2, 3, 16, 16), positions)


def cat_pool_node(ns: Namespace, seed: int) -> Any:
    """cat_pool: the node x, so both convs read x through the same observer node; the node conv2d, which the
    cat reads inside a list."""
    return _run(ns, seed, "cat_pool", (2, 3, 16, 16), [(("node", "x"), _minmax()), (("node", "conv2d"), _minmax())])


def mlp_shared(ns: Namespace, seed: int) -> Any:
    """mlp: one observer instance on the node x and on the node relu (shared, like SharedQuantizationSpec), then
    another instance on the node linear_1 (the shared one already hangs under two names)."""
    shared = _minmax()
    positions = [(("node", "x"), shared), (("node", "relu"), shared), (("node", "linear_1"), _minmax())]
    return _run(ns, seed, "mlp", (4, 16), positions)


class SquareGap(nn.Module):
    """A linear squared (``h * h``: mul reads linear twice) and its gap to the input (``h - x``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc(x)
        return h * h, h - x


def square_gap(ns: Namespace, seed: int) -> Any:
    """SquareGap after a pass rebuilt the sub as ``sub(linear, other=x)`` (x read through a keyword argument):
    two edges from linear (to mul, which reads it twice, and to sub) and the node x."""
    gm = export(SquareGap(), seeded_inputs(seed, (4, 6)))
    sub = next(n for n in gm.graph.nodes if n.name == "sub")
    first, second = sub.args
    sub.args, sub.kwargs = (first,), {"other": second}
    gm.graph.lint()
    gm.recompile()
    positions = [
        (("edge", "linear", "mul"), _minmax()),
        (("edge", "linear", "sub"), _minmax()),
        (("node", "x"), _minmax()),
    ]
    return {**_run_graph(ns, seed, gm, (4, 6), positions), "keyword_reads": [["sub", "x"]]}


# --- reading the evidence: the student's graph beside prepare_pt2e's (the preview and the grader alike) --------

UNBOUND = ("UnboundLocalError", "NameError")
"""What forward raises when a node reads a value computed later in the graph (or its own)."""

PREFILLED = ("prepared",)
"""Cases whose graph already holds observers (prepare_pt2e's) before the student inserts any."""

SHARED_FIRST = ("mlp_shared",)
"""Public cases where one instance already hangs under several names when another observer is inserted."""

NAME_TRAPS = PREFILLED + SHARED_FIRST
"""Cases where counting the observer instances gives a name that is already taken."""


def graph_pairs(
    seen: Any, expected: Any
) -> list[tuple[tuple[Any, ...], list[str], dict[str, Any], dict[str, Any], Any]]:
    """``(place, positions, student's graph, prepare_pt2e's graph, what insert_observer returned)`` at every
    place both evidences describe (``mine`` / ``graph`` beside ``prepare_pt2e`` / ``graph``)."""
    found = []
    for place, got, want in diagnosis.aligned(seen, expected, "positions"):
        mine, theirs = got.get("mine", got.get("graph")), want.get("prepare_pt2e", want.get("graph"))
        if isinstance(mine, dict) and isinstance(theirs, dict) and isinstance(want.get("positions"), list):
            positions = [str(p) for p in want["positions"]]
            found.append((place, positions, mine, theirs, got.get("returned_observer_node")))
    return found


def node_positions(positions: list[str]) -> list[str]:
    """The nodes among the positions (``node relu（所有 consumer）`` → ``relu``)."""
    return [p.removeprefix("node ").split("（")[0] for p in positions if p.startswith("node ")]


def edge_positions(positions: list[str]) -> list[tuple[str, str]]:
    """The edges among the positions (``邊 x → conv2d`` → ``("x", "conv2d")``)."""
    found = []
    for p in positions:
        if p.startswith("邊 ") and " → " in p:
            producer, consumer = p.removeprefix("邊 ").split(" → ", 1)
            found.append((producer, consumer))
    return found


def reads(graph: dict[str, Any]) -> dict[tuple[str, str], list[list[int]]]:
    """``(consumer, source)`` → the observer chain of each time the consumer reads the source."""
    found: dict[tuple[str, str], list[list[int]]] = {}
    for consumer, source, chain in graph.get("edges", []):
        found.setdefault((str(consumer), str(source)), []).append(list(chain))
    return found


def missed(got: dict[str, Any], want: dict[str, Any]) -> set[tuple[str, str]]:
    """Reads that go through an observer in prepare_pt2e's graph and through none in the student's."""
    mine = reads(got)
    return {
        key
        for key, chains in reads(want).items()
        if key in mine and any(chain and not theirs for chain, theirs in zip(chains, mine[key], strict=False))
    }


def observed(graph: dict[str, Any]) -> set[tuple[str, str]]:
    """Reads that go through some observer."""
    return {key for key, chains in reads(graph).items() if any(chains)}


def holds_in_a_list(consumer: str) -> bool:
    """A consumer whose inputs sit inside a list or tuple argument (a cat, the graph's output)."""
    return (
        consumer == "output"
        or re.fullmatch(r"(cat|concat|concatenate|stack|hstack|vstack)(_\d+)?", consumer) is not None
    )


def instance_links(got: dict[str, Any], want: dict[str, Any]) -> list[tuple[int, int]]:
    """(prepare_pt2e's instance, the student's instance) met at the same step of the same read."""
    mine = reads(got)
    links = []
    for key, chains in reads(want).items():
        for theirs, chain in zip(chains, mine.get(key, []), strict=False):
            if theirs and len(theirs) == len(chain):
                links.extend(zip(theirs, chain, strict=True))
    return links


def merged(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """Two of prepare_pt2e's observer instances are one instance in the student's graph."""
    sources: dict[int, set[int]] = {}
    for theirs, mine in instance_links(got, want):
        sources.setdefault(mine, set()).add(theirs)
    return any(len(found) > 1 for found in sources.values())


def split(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """One of prepare_pt2e's observer instances is several instances in the student's graph."""
    copies: dict[int, set[int]] = {}
    for theirs, mine in instance_links(got, want):
        copies.setdefault(theirs, set()).add(mine)
    return any(len(found) > 1 for found in copies.values())


def _case_positions(evidence: Any, case: str) -> list[str]:
    return [
        str(p) for _, found in diagnosis.walk(diagnosis.value(evidence, case), "positions") for p in found["positions"]
    ]


def _edges_only(expected: Any, case: str) -> bool:
    positions = _case_positions(expected, case)
    return bool(positions) and not node_positions(positions)


def _raised_unbound(seen: Any, expected: Any, edges_only: bool) -> bool:
    return any(
        error in UNBOUND and _edges_only(expected, case) == edges_only for case, error in diagnosis.errors(seen).items()
    )


def placed_after_users(seen: Any, expected: Any) -> bool:
    """forward reads an observer before it is computed, even where only edges got observers."""
    return _raised_unbound(seen, expected, edges_only=True)


def reads_itself(seen: Any, expected: Any) -> bool:
    """forward fails only where a node got an observer: the observer reads itself."""
    return _raised_unbound(seen, expected, edges_only=False) and not _raised_unbound(seen, expected, edges_only=True)


def never_called(seen: Any, expected: Any) -> bool:
    """The student's observers saw nothing during calibration."""
    for *_, got, want, _returned in graph_pairs(seen, expected):
        mine, theirs = got.get("instances") or [], want.get("instances") or []
        if mine and not any("scale" in r for r in mine) and any("scale" in r for r in theirs):
            return True
    return False


def _extra_reads(seen: Any, expected: Any) -> list[list[list[int]]]:
    """The student's chains of a read the consumer makes more often than in prepare_pt2e's graph."""
    found = []
    for *_, got, want, _returned in graph_pairs(seen, expected):
        theirs = reads(want)
        for key, chains in reads(got).items():
            if key in theirs and any(theirs[key]) and len(chains) > len(theirs[key]):
                found.append(chains)
    return found


def node_per_argument(seen: Any, expected: Any) -> bool:
    """A consumer reading the producer twice reads it through two observer nodes."""
    return any(all(chains) for chains in _extra_reads(seen, expected))


def first_argument_only(seen: Any, expected: Any) -> bool:
    """A consumer reading the producer twice reads it once through the observer, once without."""
    return any(any(chains) and not all(chains) for chains in _extra_reads(seen, expected))


def copies_observer(seen: Any, expected: Any) -> bool:
    """One instance handed in for several positions became several, and no two instances became one (a name
    taken twice replaces an instance, which splits some reads too)."""
    pairs = graph_pairs(seen, expected)
    return any(split(got, want) for *_, got, want, _ in pairs) and not any(
        merged(got, want) for *_, got, want, _ in pairs
    )


def one_name(seen: Any, expected: Any) -> bool:
    """Observers of separate positions are one instance in a graph that had none before."""
    return any(
        merged(got, want)
        for place, _, got, want, _returned in graph_pairs(seen, expected)
        if place[0] not in NAME_TRAPS
    )


def name_taken(seen: Any, expected: Any) -> bool:
    """Only in a graph that already had observers, a new observer took an existing one's place."""
    pairs = graph_pairs(seen, expected)
    return any(merged(got, want) for place, _, got, want, _ in pairs if place[0] in NAME_TRAPS) and not one_name(
        seen, expected
    )


def edge_to_every_user(seen: Any, expected: Any) -> bool:
    """An edge's observer is read by another consumer of the producer too."""
    for _, positions, got, want, _returned in graph_pairs(seen, expected):
        nodes, theirs = set(node_positions(positions)), observed(want)
        for producer, consumer in edge_positions(positions):
            if producer in nodes:
                continue
            if any(s == producer and c != consumer and (c, s) not in theirs for c, s in observed(got)):
                return True
    return False


def _node_misses(positions: list[str], got: dict[str, Any], want: dict[str, Any]) -> dict[str, tuple[set, set]]:
    """Node position → (the consumers reading it through an observer in the student's graph, those that do
    not though prepare_pt2e's do)."""
    lost, mine, theirs = missed(got, want), observed(got), observed(want)
    found = {}
    for node in node_positions(positions):
        users = {c for c, s in theirs if s == node}
        found[node] = ({c for c in users if (c, node) in mine}, {c for c in users if (c, node) in lost})
    return found


def rebuilds_args(seen: Any, expected: Any) -> bool:
    """The producer was replaced only where it stands directly in ``args``: a cat's list, the output's tuple kept it."""
    for case, error in diagnosis.errors(seen).items():
        if error == "ValueError" and "not in" in diagnosis.error_message(seen, case) and _edges_only(expected, case):
            return True
    for _, positions, got, want, _returned in graph_pairs(seen, expected):
        lost = missed(got, want)
        if any((c, p) in lost and holds_in_a_list(c) for p, c in edge_positions(positions)):
            return True
        for _, missing in _node_misses(positions, got, want).values():
            if missing and all(holds_in_a_list(c) for c in missing) and missing != {"output"}:
                return True
    return False


def keyword_reads_missed(seen: Any, expected: Any) -> bool:
    """Every read that skips an observer prepare_pt2e's graph goes through is one the consumer makes through a
    keyword argument (``keyword_reads``), and there is one: only ``args`` were rewired."""
    found = False
    for _, got, want in diagnosis.aligned(seen, expected, "positions"):
        mine, theirs = got.get("mine", got.get("graph")), want.get("prepare_pt2e", want.get("graph"))
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        lost = missed(mine, theirs)
        keywords = {tuple(pair) for pair in want.get("keyword_reads") or []}
        if not lost <= keywords:
            return False
        found = found or bool(lost)
    return found


def one_user(seen: Any, expected: Any) -> bool:
    """A node's observer reaches at most one of its consumers, and a plain one (not a list holder) is left out."""
    for _, positions, got, want, _returned in graph_pairs(seen, expected):
        for rewired, missing in _node_misses(positions, got, want).values():
            if len(rewired) <= 1 and any(not holds_in_a_list(c) for c in missing):
                return True
    return False


def output_left_out(seen: Any, expected: Any) -> bool:
    """Every consumer a node's observer misses is the graph's output."""
    missing = set()
    for _, positions, got, want, _returned in graph_pairs(seen, expected):
        for _, lost in _node_misses(positions, got, want).values():
            missing |= lost
    return missing == {"output"}


def _false(returned: Any) -> bool:
    return returned is False or (isinstance(returned, list) and False in returned)


def returns_other(seen: Any, expected: Any) -> bool:
    """The graph is right where insert_observer did not return the observer node."""
    pairs = graph_pairs(seen, expected)
    return any(_false(r) and reads(got) == reads(want) for *_, got, want, r in pairs) and not copies_observer(
        seen, expected
    )


# --- where the chapter teaches it ------------------------------------------------------------------

BY_HAND = Section("B. 手插：邊與 node")
RULES = Section("練習 1：insert_observer（6 分）")

# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own -----------------


class _Fan(nn.Module):
    """relu(x) read four ways: r * r, inside cat's list, by keyword, and as a graph output."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return r * r, torch.cat([r, x]), torch.mul(x, other=r), r


class _Times10(nn.Module):
    """Stands in for an observer whose effect can be seen: multiplies by 10."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 10


def _fan() -> GraphModule:
    return torch.fx.symbolic_trace(_Fan())


def _fan_input() -> torch.Tensor:
    return torch.tensor([[-1.0, 0.5], [2.0, -0.25]])


def _fan_node(gm: GraphModule, name: str) -> Node:
    return next(n for n in gm.graph.nodes if n.name == name)


def _check_free_name(free_name: Any) -> list[str]:
    from common.pt2e import MinMaxObserver

    shared, other = MinMaxObserver(), MinMaxObserver()
    problems = []
    for title, registered in (
        ("還沒有 observer", {}),
        (
            "一個 observer 共用，掛成 _0 與 _1",
            {"activation_post_process_0": shared, "activation_post_process_1": shared},
        ),
        ("兩個 observer，掛成 _0 與 _2", {"activation_post_process_0": shared, "activation_post_process_2": other}),
    ):
        gm = _fan()
        for name, module in registered.items():
            gm.add_submodule(name, module)
        got = free_name(gm)
        if not isinstance(got, str) or not re.fullmatch(r"activation_post_process_\d+", got):
            problems.append(f"{title}：要回傳 activation_post_process_N 這樣的名字，你的是 {got!r}")
        elif hasattr(gm, got):
            problems.append(f"{title}：{got} 已經有人用了，add_submodule 會把原本的 observer 換掉")
    return problems


FREE_NAME = Practice(
    "free_name",
    "寫 free_name(gm)：回傳一個 activation_post_process_N 形式、gm 上還沒有人用的名字，"
    "拿它 add_submodule 不會換掉任何已經掛上的模組。檢查用三張小圖：沒有 observer、"
    "一個共用的 observer 掛成 _0 與 _1、兩個 observer 掛成 _0 與 _2。",
    "def free_name(gm):\n    raise NotImplementedError()\n",
    _check_free_name,
    "不要數 observer 有幾個（共用的實例掛在好幾個名字下，gm.modules() 只列一次），也不要每次用同一個名字："
    "從 0 開始往上試，hasattr(gm, name) 是 False 的第一個就是。",
    "def free_name(gm):\n"
    "    index = 0\n"
    '    while hasattr(gm, f"activation_post_process_{index}"):\n'
    "        index += 1\n"
    '    return f"activation_post_process_{index}"\n',
    "名字是不是空的，直接問 gm；數東西推出來的編號，遇到共用或中間有空號就撞名。",
)


def _fan_expected(consumer: str) -> list[torch.Tensor]:
    x = _fan_input()
    r = torch.relu(x)
    seen = {name: r * 10 if name == consumer else r for name in ("mul", "cat", "mul_1", "output")}
    return [seen["mul"] * seen["mul"], torch.cat([seen["cat"], x]), torch.mul(x, other=seen["mul_1"]), seen["output"]]


def _used_before_defined(gm: GraphModule) -> str | None:
    """``times10 排在讀它的 mul 後面`` for the first node read before its place in the graph."""
    order = {node: index for index, node in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        for source in node.all_input_nodes:
            if order.get(source, -1) > order[node]:
                return f"{source.name} 排在讀它的 {node.name} 後面"
    return None


def _check_insert_on_edge(insert_on_edge: Any) -> list[str]:
    problems = []
    for title, consumer in (
        ("relu → mul（r * r，兩個引數是同一條邊）", "mul"),
        ("relu → cat（r 包在 list 裡）", "cat"),
        ("relu → mul_1（r 用 keyword 傳：mul(x, other=r)）", "mul_1"),
    ):
        gm = _fan()
        gm.add_submodule("times10", _Times10())
        try:
            returned = insert_on_edge(gm, _fan_node(gm, "relu"), _fan_node(gm, consumer), "times10")
            late = _used_before_defined(gm)
            if late:
                problems.append(f"{title}：{late}，forward 照圖上的順序執行，讀的時候它還沒算出來")
                continue
            with contextlib.redirect_stderr(io.StringIO()):  # fx prints the generated code on an error
                got = list(gm(_fan_input()))
        except NotImplementedError:
            raise
        except Exception as error:  # one case crashing should not hide the others
            problems.append(f"{title}：插完執行 gm 時出錯（{type(error).__name__}: {error}）")
            continue
        calls = [n for n in gm.graph.nodes if n.op == "call_module" and n.target == "times10"]
        want = _fan_expected(consumer)
        wrong = [
            name
            for name, mine, right in zip(("r * r", "cat", "mul(x, other=r)", "輸出的 r"), got, want, strict=True)
            if not torch.allclose(mine, right)
        ]
        if len(calls) != 1:
            problems.append(f"{title}：這條邊應該只有一個 times10 node，你插了 {len(calls)} 個")
        if wrong:
            problems.append(
                f"{title}：只有 {consumer} 該讀到 ×10 的值；gm(x) 的 {'、'.join(wrong)} 和預期不同"
                "（改了圖卻沒 recompile，或改到了別的 consumer？）"
            )
        if returned is not (calls[0] if calls else object()):
            problems.append(f"{title}：要回傳新插的 node，你回傳的是 {returned!r}")
    return problems


INSERT_ON_EDGE = Practice(
    "insert_on_edge",
    "寫 insert_on_edge(gm, producer, consumer, name)：gm 已經掛好一個叫 name 的模組（它把輸入乘 10），"
    "在邊 producer → consumer 上插一個呼叫它的 call_module node，只讓這個 consumer 改讀它，最後回傳新 node。"
    "檢查在 relu 的三個 consumer 上各試一次：r * r、cat([r, x])、mul(x, other=r)，再執行 gm 看結果。",
    "def insert_on_edge(gm, producer, consumer, name):\n    raise NotImplementedError()\n",
    _check_insert_on_edge,
    "三步：在 consumer 前面建 node（with gm.graph.inserting_before(consumer): ...），"
    "用 consumer.replace_input_with(producer, node) 換掉這個 consumer 讀 producer 的每個地方（list 裡、kwargs 裡都算），"
    "最後 gm.recompile()，forward 才會照新的圖跑。",
    "def insert_on_edge(gm, producer, consumer, name):\n"
    "    with gm.graph.inserting_before(consumer):\n"
    "        node = gm.graph.call_module(name, (producer,))\n"
    "    consumer.replace_input_with(producer, node)\n"
    "    gm.recompile()\n"
    "    return node\n",
    "r * r 只插一個 node：兩個引數是同一條邊，replace_input_with 會把兩個位置一起換掉。",
)


def _check_reroute_users(reroute_users: Any) -> list[str]:
    gm = _fan()
    relu = _fan_node(gm, "relu")
    readers = [user.name for user in relu.users]
    with gm.graph.inserting_after(relu):
        new = gm.graph.call_function(torch.neg, (relu,))
    reroute_users(relu, new)
    problems = []
    if relu in new.all_input_nodes and new in new.all_input_nodes:
        problems.append(f"{new.name} 讀的是它自己：它應該還是讀 relu，其他人才改讀它")
    elif relu not in new.all_input_nodes:
        problems.append(f"{new.name} 應該還是讀 relu，你的程式改了它的輸入：{new.all_input_nodes}")
    still = [name for name in readers if relu in _fan_node(gm, name).all_input_nodes]
    if still:
        problems.append(f"relu 原本的使用者 {readers} 都該改讀 {new.name}，{still} 還在讀 relu")
    return problems


REROUTE_USERS = Practice(
    "reroute_users",
    "寫 reroute_users(producer, new)：new 是剛插在 producer 後面、讀 producer 的 node；"
    "讓 producer 原本的每個使用者都改讀 new，new 自己仍然讀 producer。"
    "檢查用的 relu 有四個使用者：r * r、cat([r, x])、mul(x, other=r) 和圖的輸出。",
    "def reroute_users(producer, new):\n    raise NotImplementedError()\n",
    _check_reroute_users,
    "producer.replace_all_uses_with(new) 會換掉每一個使用者，包括 new 自己（它就變成讀自己）；"
    "它有一個 delete_user_cb 引數，回傳 False 的使用者不換。圖的輸出（output node）也是使用者。",
    "def reroute_users(producer, new):\n"
    "    producer.replace_all_uses_with(new, delete_user_cb=lambda user: user is not new)\n",
    "node 上的 observer 要影響所有 consumer；邊上的 observer 只影響一個，兩者的差別就在這裡。",
)


def _check_hang_observers(hang_observers: Any) -> list[str]:
    from common.pt2e import MinMaxObserver

    shared, alone = MinMaxObserver(), MinMaxObserver(quant_min=0, quant_max=255)
    handed = [shared, alone, shared]
    gm = _fan()
    names = hang_observers(gm, list(handed))
    if not isinstance(names, list | tuple) or len(names) != len(handed) or not all(isinstance(n, str) for n in names):
        return [f"要回傳三個名字（每個 observer 一個），你的是 {names!r}"]
    hung = [getattr(gm, name, None) for name in names]
    problems = [f"gm 上沒有叫 {name!r} 的子模組" for name, module in zip(names, hung, strict=True) if module is None]
    others = [
        name
        for name, module, observer in zip(names, hung, handed, strict=True)
        if module is not None and module is not observer
    ]
    if others:
        problems.append(f"{'、'.join(others)} 掛上去的是新的物件，不是傳進來的那一個 observer")
    if hung[0] is not None and hung[0] is not hung[2]:
        problems.append(
            f"第 0 與第 2 個傳進來的是同一個 observer（兩個位置共用）：{names[0]} 與 {names[2]} 應該是同一個物件，"
            "你的卻是兩個，各算各的 qparams"
        )
    return problems


HANG_OBSERVERS = Practice(
    "hang_observers",
    "寫 hang_observers(gm, observers)：observers 是一個 observer 的串列，第 i 個掛在 gm 的 activation_post_process_i 下"
    "（gm 上原本沒有 observer），回傳這些名字的串列。同一個 observer 物件出現兩次，表示這兩個位置共用它。"
    "檢查傳三個：第 0 個與第 2 個是同一個 MinMaxObserver，第 1 個是另一個。",
    "def hang_observers(gm, observers):\n    raise NotImplementedError()\n",
    _check_hang_observers,
    "傳進來的物件就是要掛的那一個：gm.add_submodule(name, observer) 直接掛它。"
    "copy.deepcopy、copy.copy 或照它的設定重建一個，得到的都是新物件，共用就斷了。",
    "def hang_observers(gm, observers):\n"
    '    names = [f"activation_post_process_{i}" for i in range(len(observers))]\n'
    "    for name, observer in zip(names, observers):\n"
    "        gm.add_submodule(name, observer)\n"
    "    return names\n",
    "同一個物件掛在兩個名字下，兩個 observer node 呼叫的是同一個實例：它看到兩個位置的資料，兩處用同一組 qparams。",
)

MISCONCEPTIONS = (
    Misconception(
        "appended_at_end",
        "observer node 排在讀它的 node 後面",
        "你可能以為新 node 放在圖的哪裡都可以。其實 forward 照圖上的順序執行：沒有用 inserting_before 或 inserting_after 時，"
        "新 node 接在圖的最後（output 之後），插在 consumer 後面也一樣，consumer 要讀它的時候它還沒算出來，所以出錯（UnboundLocalError）。"
        "建 node 時用 with gm.graph.inserting_before(consumer) 或 inserting_after(producer)，讓它排在 producer 之後、consumer 之前。",
        BY_HAND,
        public=placed_after_users,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "node_self_loop",
        "node 的 observer 讀到它自己",
        "producer.replace_all_uses_with(新 node) 會換掉每一個讀 producer 的地方，而新 node 自己也讀 producer，"
        "於是它的輸入變成它自己，forward 就出錯（UnboundLocalError）。"
        "所以只有 node 的位置出問題，邊沒有；換的時候要用 delete_user_cb 把新 node 自己排除在外。",
        BY_HAND,
        public=reads_itself,
        practice=REROUTE_USERS,
    ),
    Misconception(
        "no_recompile",
        "改完圖沒有 recompile",
        "你改的是 gm.graph，但 forward 跑的是從舊的圖產生的程式碼。沒有呼叫 gm.recompile()，observer 雖然在圖上，"
        "卻從來沒被呼叫，校準之後什麼都沒看到。插好 node、接好線之後，呼叫一次 gm.recompile()。",
        BY_HAND,
        public=never_called,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "one_node_per_argument",
        "同一條邊在每個引數位置各插一個 node",
        "r * r 的兩個引數是同一條邊 relu → mul，只該有一個 observer node。你在 producer 出現的每個引數位置各插一個 node，"
        "同一個 observer 每次 forward 被呼叫兩次，統計量就和 prepare_pt2e 的不一樣。"
        "插一個 node 就好，再用 consumer.replace_input_with(producer, 新 node) 一次換掉所有出現的地方。",
        BY_HAND,
        public=node_per_argument,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "first_argument_only",
        "邊只換掉 consumer 裡第一個 producer",
        "同一個 consumer 可能不只一次讀同一個 producer，例如 r * r。你只換了第一個出現的位置，第二個 r 還是讀原值，"
        "沒有經過 observer。consumer.replace_input_with(producer, 新 node) 會換掉 consumer 引數裡所有的 producer，"
        "list 裡的也一樣。",
        BY_HAND,
        public=first_argument_only,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "copies_observer",
        "插之前先複製了 observer",
        "傳進來的 observer 物件就是要掛上去的那一個：同一個物件傳進來三次，代表三個位置共用一個 observer，"
        "和 SharedQuantizationSpec 一樣。你先複製（或照樣重建一個）再掛，共用就消失了，每個位置各算各的 qparams，"
        "回傳的 node 呼叫的也不是傳進來的物件。把傳進來的 observer 直接 add_submodule，不要複製。",
        RULES,
        public=copies_observer,
        practice=HANG_OBSERVERS,
    ),
    Misconception(
        "fixed_name",
        "不同位置的 observer 掛在同一個名字下",
        "add_submodule 遇到已經存在的名字，會直接換掉原本的子模組，先前插的 observer node 也就改呼叫新的那個。"
        "你的名字不會隨著每次插入而不同（固定一個名字，或從 producer 的名字來，同一個 producer 插兩次就撞名），"
        "結果幾個 observer node 呼叫的是同一個實例。取名前用 hasattr(gm, name) 找一個還沒被用掉的 activation_post_process_N。",
        BY_HAND,
        public=one_name,
        practice=FREE_NAME,
    ),
    Misconception(
        "name_by_observer_count",
        "用 observer 的個數當下一個編號",
        "你可能以為圖上有 N 個 observer，activation_post_process_N 就一定沒人用。可是共用的 observer 實例會用好幾個名字掛上去，"
        "gm.modules() 只列一次，算出來的編號會撞到已經有的名字，add_submodule 就把原本的 observer 換掉了。"
        "編號只是候選，要用 hasattr(gm, name) 確認這個名字真的還沒被用掉。",
        BY_HAND,
        public=name_taken,
        practice=FREE_NAME,
    ),
    Misconception(
        "edge_replaces_all_uses",
        "邊的 observer 換掉了 producer 的每個使用",
        "邊 (producer, consumer) 只影響那一個 consumer，producer 的其他 consumer 應該仍讀原值。"
        "你用 replace_all_uses_with（或把每個使用者都改掉），它就成了 node 的 observer。"
        "邊要用 consumer.replace_input_with(producer, 新 node)，只改這一個 consumer。",
        BY_HAND,
        public=edge_to_every_user,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "rebuilds_args",
        "自己重組 args，漏了包在 list 或 tuple 裡的輸入",
        "你可能以為 producer 一定直接出現在 consumer.args 裡。cat 的輸入包在一個 list 裡，圖的輸出（output node）的值也包在 tuple 裡，"
        "只掃 args 最外層的話，這些 producer 沒有換到，那個 consumer 仍讀原值。"
        "交給 replace_input_with（邊）或 replace_all_uses_with（node），它們會找遍巢狀的引數。",
        BY_HAND,
        public=rebuilds_args,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "misses_kwargs",
        "只改了 args，沒改 kwargs 裡的輸入",
        "consumer 讀 producer 不一定寫在 args 裡：別的 pass 建的 node 可能寫成 mul(a, other=b)，b 在 node.kwargs。"
        "你只換了 args 裡的 producer，用 keyword 讀它的 consumer 仍讀原值，沒有經過 observer。"
        "交給 replace_input_with（邊）或 replace_all_uses_with（node），它們 args 與 kwargs 都會換。",
        BY_HAND,
        public=keyword_reads_missed,
        practice=INSERT_ON_EDGE,
    ),
    Misconception(
        "node_first_user_only",
        "node 的 observer 只接到一個 consumer",
        "node 上的 observer 要讓 producer 的所有 consumer 都改讀它，你只改了其中一個（例如 producer.users 的第一個）。"
        "x 的第一個使用者常常是 export 自動加的 _guards_fn，結果連一個 conv 都沒有改讀 observer。"
        "node 要用 producer.replace_all_uses_with(新 node, delete_user_cb=…) 換掉每一個使用，同時排除新 node 自己。",
        BY_HAND,
        public=one_user,
        practice=REROUTE_USERS,
    ),
    Misconception(
        "node_skips_output",
        "圖的輸出沒有改讀 node 的 observer",
        "圖的輸出（output node）也是 consumer，node 上的 observer 要影響所有 consumer，包含它。"
        "你可能只改了 call_function 的使用者，或只在 args 最外層找 producer，而 output 的值包在 tuple 裡，所以沒有換到。"
        "用 producer.replace_all_uses_with(新 node, delete_user_cb=…)，它會換掉每一個使用，output 也在內。",
        BY_HAND,
        public=output_left_out,
        practice=REROUTE_USERS,
    ),
    Misconception(
        "returns_nothing",
        "沒有回傳新的 observer node",
        "練習要 insert_observer 回傳新插進圖裡、呼叫這個 observer 的 call_module node。你的圖插得對，"
        "回傳的卻是別的東西（或什麼都沒回傳），呼叫的人就拿不到這個 node 接著用。函式最後 return 你建的那個 node。",
        RULES,
        public=returns_other,
        practice=INSERT_ON_EDGE,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "insert_observer",
        TITLE,
        ("insert_observer",),
        {
            "conv_relu": conv_relu,
            "cat_pool": cat_pool,
            "cat_pool_node": cat_pool_node,
            "mlp_shared": mlp_shared,
            "square_gap": square_gap,
        },
        misconceptions=MISCONCEPTIONS,
    ),
)
