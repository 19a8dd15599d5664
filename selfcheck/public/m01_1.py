"""Public cases of M01-1 讀懂 export 出來的圖 (op_targets, neighbors) on the chapter's own models.

Also the helpers that describe what a student's function returned, shared with the hidden
cases: a node becomes its name only when it is a live node of the graph that was asked
about, and a returned target is text plus whether it is the very target object of an op.
Nothing here calls a method of a value the student returned except through ``safe_text``
on exact strings: other objects are described by their type only.
"""

from __future__ import annotations

import copy
import functools
import operator
from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TARGETS_TITLE = "op_targets：依圖上順序列出每個 op 的 target"
NEIGHBORS_TITLE = "neighbors：一個 node 的 producers 與 consumers"


def export(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``export_module`` of ``model`` in eval mode."""
    from common.pt2e import export_module

    return export_module(model.eval(), inputs)


def as_list(value: Any, what: str) -> list[Any]:
    """A student's list (or tuple), refused when it is anything else."""
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 list，看到 {type(value).__name__}")
    if len(value) > 1000:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    return list(value)


def item_text(item: Any) -> str:
    """A returned value that is not what was asked for, in words (never calls the student's methods)."""
    if type(item) is str:
        return f"（字串 {safe_text(item, 60)!r}）"
    return f"（不是 Node：{type(item).__name__}）"


def node_label(gm: GraphModule, item: Any) -> str:
    """The name of ``item`` when it is a live node of ``gm``; otherwise what it is, in words."""
    if type(item) is Node:
        if item.graph is gm.graph and not getattr(item, "_erased", False):
            return item.name
        return f"（別張圖的 node {safe_text(item.name, 60)}）"
    return item_text(item)


def node_labels(gm: GraphModule, value: Any, what: str) -> list[str]:
    return [node_label(gm, item) for item in as_list(value, what)]


def node_kinds(gm: GraphModule) -> dict[str, str]:
    """``{name: op}`` of every node, for messages (``placeholder``, ``get_attr``…)."""
    return {n.name: str(n.op) for n in gm.graph.nodes}


# --- a graph that a reading exercise must leave as it was ------------------------------------------


def graph_state(gm: GraphModule) -> dict[str, Any]:
    """What a function that only reads ``gm`` must leave as it was: every node and every annotation.

    ``nodes``: ``{name: "op target(args, kwargs)"}`` in graph order; ``labels``: the
    ``describe_annotations`` of the graph. Both are what the grader's replay reproduces of a
    call (``autograder.sandboxed.record``), so they compare the same on both sides.
    """
    from selfcheck.evidence import describe_annotations

    nodes = {
        n.name: f"{n.op} {safe_text(n.target, 80)}({safe_text(n.args, 300)}, {n.kwargs!r})" for n in gm.graph.nodes
    }
    return {"nodes": nodes, "labels": describe_annotations(gm)}


def graph_changes(before: dict[str, Any], gm: GraphModule) -> list[str]:
    """How ``gm`` differs from ``before`` (a ``graph_state``), in words; empty when it was left alone."""
    after = graph_state(gm)
    changes: list[str] = []
    added = [n for n in after["nodes"] if n not in before["nodes"]]
    removed = [n for n in before["nodes"] if n not in after["nodes"]]
    if added:
        changes.append(f"多了 node {added[:4]}")
    if removed:
        changes.append(f"少了 node {removed[:4]}")
    edited = [n for n, text in after["nodes"].items() if n in before["nodes"] and before["nodes"][n] != text]
    if edited:
        changes.append(f"改了 node {edited[:4]} 的 target 或輸入")
    if not added and not removed and list(after["nodes"]) != list(before["nodes"]):
        changes.append("改了 node 的順序")
    relabelled = sorted(
        n for n in set(before["labels"]) | set(after["labels"]) if before["labels"].get(n) != after["labels"].get(n)
    )
    if relabelled:
        changes.append(f"改了 {relabelled[:4]} 的標籤")
    return changes


# --- op_targets -----------------------------------------------------------------------------------


def describe_targets(gm: GraphModule, value: Any) -> dict[str, Any]:
    """The returned targets as text, and whether each is the very target object of an op node.

    ``other_targets`` are the targets of the nodes that are not ``call_function`` (sorted), so
    a check can say "you listed a placeholder" without the answer key's help.
    """
    items = as_list(value, "op_targets 的回傳值")
    genuine = {id(n.target): n.target for n in gm.graph.nodes if n.op == "call_function"}
    texts, objects = [], []
    for item in items:
        is_target = id(item) in genuine and genuine[id(item)] is item
        objects.append(is_target)
        if is_target:
            texts.append(str(item))
        elif type(item) is str:
            texts.append(safe_text(item, 80))
        else:
            texts.append(f"（{type(item).__name__}，不是圖上 node 的 target）")
    others = sorted({safe_text(n.target) for n in gm.graph.nodes if n.op != "call_function"})
    return {"targets": texts, "objects": objects, "other_targets": others}


# --- neighbors ------------------------------------------------------------------------------------


def describe_neighbors(ns: Namespace, gm: GraphModule, names: tuple[str, ...]) -> dict[str, Any]:
    """``neighbors(gm, name)`` for each name: producers and consumers as node names."""
    answers: dict[str, Any] = {}
    for name in names:
        value = ns["neighbors"](gm, name)
        if type(value) not in (list, tuple) or len(value) != 2:
            raise EvidenceError(f"neighbors(gm, {name!r}) 應該回傳 (producers, consumers) 兩個 list")
        producers, consumers = value
        answers[name] = {
            "producers": node_labels(gm, producers, "producers "),
            "consumers": node_labels(gm, consumers, "consumers "),
        }
    return answers


# --- public cases: the chapter's models -----------------------------------------------------------


class MaxGate(nn.Module):
    """relu(x) squared times the row maximum of a linear: ``torch.max(..., dim)`` gives max then getitem.

    The linear module is called ``linear``, so its constants ``linear_weight`` and ``linear_bias`` come
    before the op node ``linear`` in the graph; ``a * a`` is a mul reading relu twice.
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x)
        b = torch.max(self.linear(x), dim=1, keepdim=True).values
        return b * (a * a)


def max_gate_graph(seed: int) -> GraphModule:
    return export(MaxGate(), seeded_inputs(seed, (3, 6)))


@functools.lru_cache(maxsize=8)
def _exported(name: str, seed: int) -> GraphModule:
    from common.models import get_model

    return export(get_model(name), seeded_inputs(seed, (2, 3, 16, 16)))


def _chapter_graph(name: str, seed: int) -> GraphModule:
    """A fresh copy of the chapter model ``name`` exported (one export per model and seed, a copy per case)."""
    return copy.deepcopy(_exported(name, seed))


def gated_residual_graph(seed: int) -> GraphModule:
    """residual after a pass gated relu's output with the input before conv2: ``mul(relu, other=x)``.

    The pass inserts ``mul_tensor`` before ``conv2d_1`` and makes ``conv2d_1`` read it, so x's users list
    conv2d, add, mul_tensor (the order the uses were made) while the graph runs conv2d, mul_tensor, add;
    mul_tensor reads x through a keyword argument.
    """
    gm = _chapter_graph("residual", seed)
    nodes = {n.name: n for n in gm.graph.nodes}
    with gm.graph.inserting_before(nodes["conv2d_1"]):
        gate = gm.graph.call_function(torch.ops.aten.mul.Tensor, (nodes["relu"],), {"other": nodes["x"]})
    nodes["conv2d_1"].replace_input_with(nodes["relu"], gate)
    gm.graph.lint()
    gm.recompile()
    return gm


def _targets_of(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    """``op_targets(gm)`` described, and how the call changed ``gm`` (it must not)."""
    before = graph_state(gm)
    return {**describe_targets(gm, ns["op_targets"](gm)), "changed": graph_changes(before, gm)}


def targets_chapter(ns: Namespace, seed: int) -> Any:
    """op_targets on conv_relu, residual (relu twice), cat_pool (cat reads a list) and a max.dim → getitem."""
    result = {name: _targets_of(ns, _chapter_graph(name, seed)) for name in ("conv_relu", "residual", "cat_pool")}
    result["max_gate"] = _targets_of(ns, max_gate_graph(seed))
    return result


def _neighbors_of(ns: Namespace, gm: GraphModule, names: tuple[str, ...]) -> dict[str, Any]:
    """``neighbors`` of each name, and how the calls changed ``gm`` (they must not)."""
    before = graph_state(gm)
    return {**describe_neighbors(ns, gm, names), "changed": graph_changes(before, gm)}


def neighbors_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: x (two convs and _guards_fn read it), a conv, the cat of a list, the pool, output."""
    gm = _chapter_graph("cat_pool", seed)
    return _neighbors_of(ns, gm, ("x", "conv2d_1", "cat", "max_pool2d", "output"))


def neighbors_residual(ns: Namespace, seed: int) -> Any:
    """residual: the add of two tensors, the first relu (read by a conv) and x (read twice)."""
    gm = _chapter_graph("residual", seed)
    return _neighbors_of(ns, gm, ("x", "relu", "add"))


def neighbors_gated_residual(ns: Namespace, seed: int) -> Any:
    """residual edited by a pass: x read by conv2d, mul_tensor (inserted, keyword argument) and add."""
    return _neighbors_of(ns, gated_residual_graph(seed), ("x", "mul_tensor", "conv2d_1"))


def neighbors_max_gate(ns: Namespace, seed: int) -> Any:
    """max(linear(x)) * relu(x)²: x read by relu, linear and _guards_fn; the constants linear_weight and
    linear_bias come before the op linear; getitem reads max (not a tensor op); mul reads relu twice."""
    return _neighbors_of(ns, max_gate_graph(seed), ("x", "linear", "getitem", "mul"))


# --- where the chapter teaches it ----------------------------------------------------------------

FOUR_KINDS = Section("A. 四種 node")
TARGET = Section("B. `node.target`：op 的身分")
TARGETS_RULES = Section("練習 1：op_targets（3 分）")
ARGS_AND_USERS = Section("C. `node.args` 與 `node.users`：同一條邊的兩個方向")
NEIGHBORS_RULES = Section("練習 2：neighbors（4 分）")
DELETING = Section("D. 刪除：只有沒有 consumer 的 node 刪得掉", notebook="M01-3")


# --- reading the evidence (the public cases' and the hidden ones' alike) ---------------------------
# op_targets: every record holding "targets" (one per graph); neighbors: every answer holding
# "producers" (one per node asked about), its path ending with the node's name.


def target_records(seen: Any, expected: Any) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """``(place, got, want)`` for each graph's op_targets record in both evidences."""
    return [
        (place, got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "targets")
        if isinstance(got.get("targets"), list) and isinstance(want.get("targets"), list)
    ]


def _objects(record: dict[str, Any]) -> list[bool]:
    found = record.get("objects")
    return [bool(x) for x in found] if isinstance(found, list) else []


def described(text: Any, kind: str = "") -> bool:
    """A returned item the evidence describes instead of showing (``（Node，不是…）``, ``（不是 Node：int）``…)."""
    return isinstance(text, str) and text.startswith("（") and kind in text


def op_word(text: str) -> str:
    """The op's name in a target's text: ``aten.max_pool2d.default`` → ``max_pool2d``, ``<built-in function
    getitem>`` → ``getitem``; anything else as it is."""
    if text.startswith("aten."):
        return text.split(".")[1] if text.count(".") >= 1 else text
    if text.startswith("<built-in function "):
        return text.removeprefix("<built-in function ").rstrip(">")
    return text


def graph_came_back_changed(seen: Any, expected: Any) -> bool:
    """Some graph came back changed where the key's came back as it was."""
    return any(
        isinstance(got.get("changed"), list) and got["changed"] and want.get("changed") == []
        for _, got, want in diagnosis.aligned(seen, expected, "changed")
    )


def _returns_described(seen: Any, expected: Any, kind: str) -> bool:
    return any(any(described(t, kind) for t in got["targets"]) for _, got, _ in target_records(seen, expected))


def _returns_nodes(seen: Any, expected: Any) -> bool:
    return _returns_described(seen, expected, "（Node，")


def _returns_packets(seen: Any, expected: Any) -> bool:
    return _returns_described(seen, expected, "（OpOverloadPacket，")


def _returns_node_names(seen: Any, expected: Any) -> bool:
    """Strings that are node names: identifiers, all different in one graph (a name is unique, a target repeats)."""
    found = False
    for _, got, want in target_records(seen, expected):
        texts = got["targets"]
        if not texts:
            continue
        if any(_objects(got)) or not all(isinstance(t, str) and t.isidentifier() for t in texts):
            return False
        if len(set(texts)) != len(texts) or set(texts) & set(want["targets"]):
            return False
        found = True
    return found


def _returns_strings(seen: Any, expected: Any) -> bool:
    """Text about each target (``str(node.target)``, its name…) instead of the object itself."""
    records = [got for _, got, _ in target_records(seen, expected) if got["targets"]]
    return bool(records) and all(
        not any(_objects(got)) and all(isinstance(t, str) and not described(t) for t in got["targets"])
        for got in records
    )


def _foreign(got: dict[str, Any], want: dict[str, Any]) -> set[str]:
    others = want.get("other_targets") if isinstance(want.get("other_targets"), list) else []
    return {t for t in got["targets"] if t in set(others)}


def _lists_every_node(seen: Any, expected: Any) -> bool:
    """Targets of placeholders, get_attr constants or the output beside real op targets."""
    return any(
        _foreign(got, want) - {"_guards_fn"} and any(_objects(got)) for _, got, want in target_records(seen, expected)
    )


def _keeps_guards(seen: Any, expected: Any) -> bool:
    records = target_records(seen, expected)
    return any("_guards_fn" in _foreign(got, want) for _, got, want in records) and not any(
        _foreign(got, want) - {"_guards_fn"} for _, got, want in records
    )


def _aten_only(seen: Any, expected: Any) -> bool:
    """Every aten op listed, every other call_function (``operator.getitem``) left out."""
    for _, got, want in target_records(seen, expected):
        kept = [t for t in want["targets"] if str(t).startswith("aten.")]
        if len(kept) < len(want["targets"]) and Counter(got["targets"]) == Counter(kept) and any(_objects(got)):
            return True
    return False


def _each_once(seen: Any, expected: Any) -> bool:
    """Wherever an op repeats, the student lists each op once."""
    repeating = [
        (got["targets"], want["targets"])
        for _, got, want in target_records(seen, expected)
        if len(set(want["targets"])) < len(want["targets"])
    ]
    return bool(repeating) and all(
        len(set(texts)) == len(texts) and set(texts) == set(wanted) for texts, wanted in repeating
    )


def _is_sorted(texts: list[str]) -> bool:
    return texts == sorted(texts) or [op_word(t) for t in texts] == sorted(op_word(t) for t in texts)


def _sorted(seen: Any, expected: Any) -> bool:
    """The right targets, sorted (by the text or by the op's name) instead of in graph order."""
    return any(
        got["targets"] != want["targets"]
        and Counter(got["targets"]) == Counter(want["targets"])
        and _is_sorted([str(t) for t in got["targets"]])
        for _, got, want in target_records(seen, expected)
    )


def _subsequence(part: list[Any], whole: list[Any]) -> bool:
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


def _other_order(seen: Any, expected: Any) -> bool:
    """Targets of the graph (some perhaps missing) in an order that is not the graph's."""
    return any(
        len(got["targets"]) >= 2
        and all(_objects(got))
        and not Counter(got["targets"]) - Counter(want["targets"])
        and not _subsequence(got["targets"], want["targets"])
        for _, got, want in target_records(seen, expected)
    )


def answers(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(node asked about, got, want)`` for each neighbors answer in both evidences."""
    found = []
    for place, got, want in diagnosis.aligned(seen, expected, "producers"):
        parts = [got.get("producers"), got.get("consumers"), want.get("producers"), want.get("consumers")]
        if all(isinstance(part, list) for part in parts):
            found.append((str(place[-1]), got, want))
    return found


def _plain(items: list[Any]) -> list[str]:
    """The node names in a returned list (what the evidence describes instead of naming is left out)."""
    return [item for item in items if isinstance(item, str) and not described(item)]


def _neighbor_strings(seen: Any, expected: Any) -> bool:
    return any(
        any(described(item, "（字串") for item in got["producers"] + got["consumers"])
        for _, got, _ in answers(seen, expected)
    )


def _swapped(seen: Any, expected: Any) -> bool:
    """Producers where consumers belong and the other way round, on every node where the two differ."""
    found = [(got, want) for _, got, want in answers(seen, expected) if want["producers"] != want["consumers"]]
    return bool(found) and all(
        set(got["producers"]) == set(want["consumers"]) and set(got["consumers"]) == set(want["producers"])
        for got, want in found
    )


def _another_node(seen: Any, expected: Any) -> bool:
    """Some answer shares nothing with the right one, producers nor consumers: it is another node's."""
    for _, got, want in answers(seen, expected):
        producers, consumers = _plain(got["producers"]), _plain(got["consumers"])
        if len(producers) + len(consumers) != len(got["producers"]) + len(got["consumers"]):
            continue
        if (producers or consumers) and not set(producers) & set(want["producers"]):
            if not set(consumers) & set(want["consumers"]) and (producers, consumers) != (
                want["producers"],
                want["consumers"],
            ):
                return True
    return False


def _scalars(seen: Any, expected: Any) -> bool:
    return any(
        any(described(item, "（不是 Node") for item in got["producers"]) and _plain(got["producers"])
        for _, got, _ in answers(seen, expected)
    )


LIST_READERS = ("cat", "output")
"""Nodes of the cases whose inputs sit in a list or a tuple (``cat([...])``, the output's tuple)."""


def _top_level_args(seen: Any, expected: Any) -> bool:
    """A node that reads a list (cat, the output) misses producers the list holds."""
    return any(
        name in LIST_READERS and set(_plain(got["producers"])) < set(want["producers"])
        for name, got, want in answers(seen, expected)
    )


def _repeats(seen: Any, expected: Any) -> bool:
    return any(
        len(_plain(got["producers"])) > len(set(_plain(got["producers"]))) for _, got, _ in answers(seen, expected)
    )


def missing_producers(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The producers the key lists and the student does not (when the student lists nothing else)."""
    if set(_plain(got["producers"])) - set(want["producers"]):
        return []
    return [p for p in want["producers"] if p not in got["producers"]]


def _misses_keyword_producer(seen: Any, expected: Any) -> bool:
    """A computed producer missing (in the public cases: x, which mul_tensor reads as ``other=x``) while the
    inputs a list holds are all there."""
    return not _top_level_args(seen, expected) and any(
        (lost := missing_producers(got, want)) and not any(p.endswith(("_weight", "_bias")) for p in lost)
        for _, got, want in answers(seen, expected)
    )


def _no_constants(seen: Any, expected: Any) -> bool:
    """Producers missing are model constants (public cases: their names, conv_b_weight, linear_bias)."""
    return any(
        (lost := missing_producers(got, want)) and all(p.endswith(("_weight", "_bias")) for p in lost)
        for _, got, want in answers(seen, expected)
    )


def _producer_order(seen: Any, expected: Any) -> bool:
    return any(
        got["producers"] != want["producers"] and Counter(got["producers"]) == Counter(want["producers"])
        for _, got, want in answers(seen, expected)
    )


def _guards_consumer(seen: Any, expected: Any) -> bool:
    return any("_guards_fn" in got["consumers"] for _, got, _ in answers(seen, expected))


def missing_consumers(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The consumers the key lists and the student does not (when the student lists nothing else)."""
    if set(got["consumers"]) - set(want["consumers"]):
        return []
    return [c for c in want["consumers"] if c not in got["consumers"]]


def _direct_args_consumers(seen: Any, expected: Any) -> bool:
    """Consumers missing besides the output: the ones that read the node inside a list or a keyword argument."""
    return any(set(missing_consumers(got, want)) - {"output"} for _, got, want in answers(seen, expected))


def _output_not_consumer(seen: Any, expected: Any) -> bool:
    return any(missing_consumers(got, want) == ["output"] for _, got, want in answers(seen, expected))


def _consumer_order(seen: Any, expected: Any) -> bool:
    return any(
        got["consumers"] != want["consumers"] and Counter(got["consumers"]) == Counter(want["consumers"])
        for _, got, want in answers(seen, expected)
    )


# --- practice after a mistake (issue 50): one idea each, on a graph of their own built by hand (never run) -----


def _hand_built() -> Graph:
    """A graph like an exported one, built by hand: an input called relu (named like an op), two constants, the
    _guards_fn check, conv2d(x, w, b), relu, mul(relu, relu), cat([mul, x]), sub(cat, other=relu) (a keyword),
    max.dim then operator.getitem, a second relu, and ``scaled = x * 2.0`` inserted by a later pass before cat
    (so x.users lists it after cat, the graph runs it before); the output returns (relu_1, relu, scaled)."""
    aten = torch.ops.aten
    graph = Graph()

    def op(target: Any, name: str, *args: Any, **kwargs: Any) -> Node:
        return graph.create_node("call_function", target, args, kwargs, name=name)

    x = graph.placeholder("x")
    graph.placeholder("relu_in")
    weight = graph.create_node("get_attr", "conv.weight", name="conv_weight")
    bias = graph.create_node("get_attr", "conv.bias", name="conv_bias")
    graph.create_node("call_module", "_guards_fn", (x,), name="_guards_fn")
    conv = op(aten.conv2d.default, "conv2d", x, weight, bias)
    relu = op(aten.relu.default, "relu", conv)
    square = op(aten.mul.Tensor, "mul", relu, relu)
    cat = op(aten.cat.default, "cat", [square, x], 1)
    sub = op(aten.sub.Tensor, "sub", cat, other=relu)
    peak = op(aten.max.dim, "max_1", sub, 1, True)
    top = op(operator.getitem, "getitem", peak, 0)
    again = op(aten.relu.default, "relu_1", top)
    with graph.inserting_before(cat):
        scaled = op(aten.mul.Tensor, "mul_1", x, 2.0)
    graph.output((again, relu, scaled))
    return graph


def _shown(value: Any) -> str:
    """``args`` as the chapter's table shows them: nodes by name, lists and tuples with their brackets."""
    if isinstance(value, Node):
        return value.name
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_shown(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _names(value: Any) -> Any:
    """A returned list of nodes as their names (anything else as it is, for the message)."""
    if isinstance(value, list | tuple):
        return [item.name if isinstance(item, Node) else f"{item!r}（不是 Node）" for item in value]
    return value


def _check_is_op(is_op: Any) -> list[str]:
    problems = []
    for node in _hand_built().nodes:
        want = node.op == "call_function"
        got = is_op(node)
        if not isinstance(got, bool) or got is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={safe_text(node.target, 40)}）："
                f"應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_OP = Practice(
    "is_op",
    "寫 is_op(node)：node 是不是一個運算（op）？回傳 True 或 False。"
    "檢查用一張手工建的圖：輸入（其中一個叫 relu_in）、weight 與 bias 常數、_guards_fn、conv2d、relu、mul、cat、sub、"
    "max.dim 之後的 operator.getitem，以及 output。",
    "def is_op(node):\n    raise NotImplementedError()\n",
    _check_is_op,
    "一個 node 是哪一種，看 node.op：placeholder（輸入）、get_attr（常數）、call_module（export 的圖裡只有 _guards_fn）、"
    "output 都不是運算。與其列出要排除哪幾種，不如直接問它是不是那一種運算的 node；target 是什麼型別不用管。",
    'def is_op(node):\n    return node.op == "call_function"\n',
    "operator.getitem 不是 aten 的 OpOverload，但它也是 call_function：op_targets 也要列它。",
)


def _op_text(target: Any) -> str:
    """How a student writes the op: ``torch.ops.aten.relu.default``, ``operator.getitem``."""
    if target is operator.getitem:
        return "operator.getitem"
    return f"torch.ops.{target}" if isinstance(target, torch._ops.OpOverload) else safe_text(target, 40)


def _check_op_counts(op_counts: Any) -> list[str]:
    nodes = [n for n in _hand_built().nodes if n.op == "call_function"]
    want = Counter(n.target for n in nodes)
    got = op_counts(list(nodes))
    if not isinstance(got, dict):
        return [f"op_counts 要回傳 dict，你的是 {type(got).__name__}"]
    wrong = [target for target, count in want.items() if got.get(target) != count]
    if len(wrong) == len(want):
        problems = [f"用 op 物件查（例如 counts[torch.ops.aten.relu.default]），{len(want)} 個 op 一個都查不到"]
    else:
        problems = [f"counts[{_op_text(t)}]：應該是 {want[t]}，你的是 {got.get(t)!r}" for t in wrong]
    if problems or len(got) != len(want):
        keys = [f"{safe_text(k, 40)}（{type(k).__name__}）" for k in list(got)[:6]]
        more = "…" if len(got) > 6 else ""
        problems.append(f"應該剛好有 {len(want)} 個 key，都是 node.target 物件；你的 {len(got)} 個 key 是 {keys}{more}")
    return problems


OP_COUNTS = Practice(
    "op_counts",
    "寫 op_counts(nodes)：nodes 是一張圖上所有 call_function node 的 list，回傳 dict {op: 出現幾次}，"
    "key 要是 op 本身，呼叫的人才能用 counts[torch.ops.aten.relu.default] 查。"
    "檢查用一張手工建的圖：relu 和 mul 各出現兩次，還有 conv2d、cat、sub、max.dim 與 operator.getitem。",
    "def op_counts(nodes):\n    raise NotImplementedError()\n",
    _check_op_counts,
    "op 的身分是 node.target 這個物件（例如 torch.ops.aten.relu.default），不是 node.name（relu、relu_1 各不相同），"
    "也不是 str(node.target) 這段文字（字串不等於物件），也不是 .overloadpacket（aten.relu 不等於 aten.relu.default）。"
    "拿 node.target 本身當 key。",
    "def op_counts(nodes):\n"
    "    counts = {}\n"
    "    for node in nodes:\n"
    "        counts[node.target] = counts.get(node.target, 0) + 1\n"
    "    return counts\n",
    "同一個 op 的兩個 node 名字不同（relu、relu_1），target 卻是同一個物件：所以才數得到 2。",
)


def _check_producers_of(producers_of: Any) -> list[str]:
    problems = []
    for node in _hand_built().nodes:
        if node.op in ("get_attr", "call_module"):
            continue
        want = [n.name for n in node.all_input_nodes]
        got = _names(producers_of(node))
        if got != want:
            args = _shown(node.args) + (f"，kwargs = {_shown(node.kwargs)}" if node.kwargs else "")
            problems.append(f"{node.name}（args = {args}）：應該是 {want}，你的是 {got}")
    return problems


PRODUCERS_OF = Practice(
    "producers_of",
    "寫 producers_of(node)：回傳 node 讀的每一個上游 node（producer）的 list，元素是 Node；"
    "同一個 node 只列一次，照它第一次出現在引數裡的順序。"
    "檢查用一張手工建的圖：conv2d(x, weight, bias)、mul(relu, relu)、cat([mul, x], 1)、sub(cat, other=relu)、"
    "max.dim(sub, 1, True) 和回傳 tuple 的 output。",
    "def producers_of(node):\n    raise NotImplementedError()\n",
    _check_producers_of,
    "producer 是上游，在 node 的引數裡；node.users 是反方向（讀它的下游）。引數裡的 node 可能包在 list（cat）、"
    "tuple（output）或 keyword 引數（other=relu）裡，也可能重複（mul(relu, relu)），1、True 這些值則不是 node。"
    "FX 的 Node 有一個屬性已經把這些都處理好了。",
    "def producers_of(node):\n    return list(node.all_input_nodes)\n",
    "weight 與 bias 是 get_attr node，conv 讀它們，所以它們也是 producer。",
)


def _check_consumers_of(consumers_of: Any) -> list[str]:
    graph = _hand_built()
    order = list(graph.nodes)
    problems = []
    for node in graph.nodes:
        if node.op in ("output", "call_module"):
            continue
        want = [n.name for n in order if n in node.users and not (n.op == "call_module" and n.target == "_guards_fn")]
        got = _names(consumers_of(node))
        if got != want:
            users = [u.name for u in node.users]
            problems.append(f"{node.name}（node.users = {users}）：應該是 {want}，你的是 {got}")
    return problems


CONSUMERS_OF = Practice(
    "consumers_of",
    "寫 consumers_of(node)：回傳讀 node 的值的每一個下游 node（consumer），元素是 Node，依圖上的順序；"
    'output node 也算，_guards_fn（op 是 call_module、target 是 "_guards_fn"）不算。'
    "檢查用一張手工建的圖：x 被 _guards_fn、conv2d、cat 的 list 讀，還有一個 pass 後來插在 cat 前面的 mul_1；"
    "relu 被 mul（讀兩次）、sub（keyword 引數）和 output 讀。",
    "def consumers_of(node):\n    raise NotImplementedError()\n",
    _check_consumers_of,
    "讀 node 的每一個 node 都記在 node.users 裡（list 裡、keyword 引數裡、output 的 tuple 裡讀它的都在），"
    "但它的順序是「使用被建立的先後」，不是圖上的順序。依 node.graph.nodes 的順序走一遍，留下在 node.users 裡、"
    "又不是 _guards_fn 的 node。",
    "def consumers_of(node):\n"
    "    def is_guard(user):\n"
    '        return user.op == "call_module" and user.target == "_guards_fn"\n\n'
    "    return [n for n in node.graph.nodes if n in node.users and not is_guard(n)]\n",
    "mul_1 是後來插進圖裡的：x.users 把它列在 cat 後面，圖上它卻排在 cat 前面。",
)


TARGETS_MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "讀圖的函式把圖改掉了",
        "op_targets 只該回答圖上有哪些 op，圖是呼叫的人的。你的程式在回答之前改了圖（例如用 eliminate_dead_code() "
        "把沒有 consumer 的 getitem 刪掉），呼叫的人拿回來的圖就少了 node。只讀 gm.graph.nodes，不要呼叫會改圖的方法。",
        DELETING,
        public=graph_came_back_changed,
    ),
    Misconception(
        "node_names",
        "回傳 node 的名字，不是 node.target",
        "node.name 只是 export 取的標籤（relu_1、max_1），不是 op 的身分；同一種 op 的每個 node 名字都不一樣。"
        "要回傳 node.target 這個物件本身，例如 torch.ops.aten.relu.default。",
        TARGET,
        public=_returns_node_names,
        practice=OP_COUNTS,
    ),
    Misconception(
        "returns_nodes",
        "回傳 node 本身，不是它的 target",
        "練習要的是每個 op 的身分，也就是 node.target，不是 Node 物件。"
        "Node 是圖上的一個位置，target 才說它做什麼運算：把每個 node 換成 node.target。",
        TARGET,
        public=_returns_nodes,
        practice=OP_COUNTS,
    ),
    Misconception(
        "overload_packets",
        "回傳 OpOverloadPacket，不是 node.target",
        "node.target 是 OpOverload（aten.conv2d.default），它的 .overloadpacket（aten.conv2d）是整個 op 的總稱，"
        "不等於圖上的 target，拿去和 torch.ops.aten.conv2d.default 比較會不相等。直接回傳 node.target。",
        TARGET,
        public=_returns_packets,
        practice=OP_COUNTS,
    ),
    Misconception(
        "target_strings",
        "把 target 轉成字串",
        "str(node.target) 看起來和 target 一樣，但它是字串，不是 OpOverload 物件："
        "拿去和 torch.ops.aten.relu.default 比較永遠不相等。回傳 node.target 本身，不要轉成文字。",
        TARGET,
        public=_returns_strings,
        practice=OP_COUNTS,
    ),
    Misconception(
        "every_node",
        "把每個 node 都當成 op",
        "placeholder（輸入）、get_attr（常數）與 output 也是 node，但它們的 target 是名字或屬性路徑，不是運算。"
        '只有 node.op == "call_function" 的 node 是 op，名字像 op 的輸入或常數也一樣不算。',
        FOUR_KINDS,
        public=_lists_every_node,
        practice=IS_OP,
    ),
    Misconception(
        "keeps_guards_fn",
        "_guards_fn 也當成 op 列出來",
        "你排除了 placeholder、get_attr 與 output，卻留下了 call_module 的 _guards_fn。它只檢查輸入的形狀，不是運算；"
        '與其列出要排除哪幾種，不如只留 node.op == "call_function" 的 node。',
        FOUR_KINDS,
        public=_keeps_guards,
        practice=IS_OP,
    ),
    Misconception(
        "aten_only",
        "只列 aten 的 op，漏了 operator.getitem",
        "call_function 的 target 不一定是 aten 的 OpOverload：max.dim 之後取值的 operator.getitem 也是圖上的運算。"
        '只要 node.op == "call_function" 就要列，不要再看 target 的型別。',
        TARGETS_RULES,
        public=_aten_only,
        practice=IS_OP,
    ),
    Misconception(
        "each_op_once",
        "同一種 op 只列一次",
        "圖記錄的是執行過的每一次運算：relu 用了兩次，圖上就有 relu 與 relu_1 兩個 node。"
        "op_targets 要每個 node 列一次，不要用 set 或 dict.fromkeys 去掉重複。",
        TARGET,
        public=_each_once,
    ),
    Misconception(
        "sorted_targets",
        "把 target 排序，不是照圖上的順序",
        "圖上的順序就是執行的順序，gm.graph.nodes 依序走過一遍就是答案。依名字或 target 的文字排序，會打亂 op 的先後。",
        TARGETS_RULES,
        public=_sorted,
    ),
    Misconception(
        "walks_from_output",
        "以為依賴關係排出來的順序就是圖上的順序",
        "從 output 沿著輸入往回走，得到的是一種「上游在前」的順序，但圖上的順序是 node 實際排列的順序，"
        "被 pass 插入的 node 可能排在別的位置；沒有人用的 node（例如沒用到的 getitem）也走不到。"
        "直接依 gm.graph.nodes 的順序列出。",
        TARGETS_RULES,
        public=_other_order,
    ),
)

NEIGHBORS_MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "讀圖的函式把圖改掉了",
        "neighbors 只該回答問題，圖是呼叫的人的。你的程式改了圖（例如把 _guards_fn 刪掉），答案也許對了，"
        "呼叫的人的圖卻少了輸入形狀的檢查。要排除 _guards_fn，是在回傳的 consumers 裡不列它，不是把它從圖上刪掉。",
        FOUR_KINDS,
        public=graph_came_back_changed,
    ),
    Misconception(
        "returns_names",
        "回傳 node 的名字，不是 Node",
        "練習要的是圖上的 Node 物件，之後的章節要拿它們改圖、貼標籤；名字只是文字，做不到這些事。"
        "producers 與 consumers 都放 Node 本身，要看名字時再讀 .name。",
        NEIGHBORS_RULES,
        public=_neighbor_strings,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "swapped_directions",
        "producers 與 consumers 對調了",
        "producer 是這個 node 讀的上游（node.all_input_nodes），consumer 是讀它的下游（node.users）。"
        "你回傳的兩個 list 位置對調了：要回傳 (producers, consumers)，上游在前。",
        ARGS_AND_USERS,
        public=_swapped,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "found_by_partial_name",
        "用名字的一部分找 node",
        "名字包含或開頭是 name 的 node 不只一個：問 relu，可能先碰到常數 relu_weight。"
        "node 的名字在圖上是唯一的，要找的是 n.name == name 的那一個。",
        TARGET,
        public=_another_node,
    ),
    Misconception(
        "scalars_as_producers",
        "把 args 裡的純量也當成 producer",
        "node.args 裡除了 node，還有 stride、dim、2.0 這些普通的值，它們不是圖上的 node，也不是 producer。"
        "producer 只算 Node，node.all_input_nodes 已經替你挑好了。",
        ARGS_AND_USERS,
        public=_scalars,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "top_level_args_only",
        "只看 node.args 的最外層",
        "cat 的輸入在 node.args[0] 這個 list 裡，output 回傳的值在一個 tuple 裡，只看 args 的最外層會漏掉它們。"
        "node.all_input_nodes 會攤平 list、tuple 與 keyword 引數，每個 node 只列一次。",
        ARGS_AND_USERS,
        public=_top_level_args,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "repeats_producer",
        "同一個 producer 列了兩次",
        "add(r, r) 讀了 r 兩次，但 r 只是一個 producer。自己攤平 args 時要去掉重複、保留第一次出現的順序；"
        "node.all_input_nodes 本來就是這樣。",
        NEIGHBORS_RULES,
        public=_repeats,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "ignores_kwargs",
        "沒看 keyword 引數裡的 node",
        "node 也可以用 keyword 引數讀上游，例如 sub(y, other=conv2d)：conv2d 在 node.kwargs 裡，不在 node.args 裡。"
        "只攤平 args 會漏掉它；node.all_input_nodes 兩邊都看。",
        ARGS_AND_USERS,
        public=_misses_keyword_producer,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "constants_not_producers",
        "以為 get_attr 常數不是 producer",
        "conv 的 weight 與 bias 是 get_attr node，conv 讀它們，所以它們也是 producer。"
        "練習要的是這個 node 讀的每個 node，不要把常數濾掉。",
        NEIGHBORS_RULES,
        public=_no_constants,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "producers_in_graph_order",
        "producers 依圖上的順序排",
        "producers 的順序是它們第一次出現在 args、kwargs 的順序（和 node.all_input_nodes 相同），"
        "cat 的 list 順序、conv 的 (x, weight, bias) 順序都有意義。依圖上的順序重排，這個資訊就不見了。",
        NEIGHBORS_RULES,
        public=_producer_order,
        practice=PRODUCERS_OF,
    ),
    Misconception(
        "guards_as_consumer",
        "_guards_fn 也算成 consumer",
        "placeholder 的 users 裡有 _guards_fn，可是它讀輸入只為了檢查形狀，不是資料的 consumer。"
        '列 consumers 時排除 op == "call_module" 而且 target == "_guards_fn" 的 node。',
        ARGS_AND_USERS,
        public=_guards_consumer,
        practice=CONSUMERS_OF,
    ),
    Misconception(
        "consumers_from_direct_args",
        "只認得在 args 最外層讀它的 consumer",
        "你掃過每個 node，只看它的 args 裡有沒有直接出現這個 node：在 list、tuple 或 keyword 引數裡讀它的 node"
        "（cat、output）都被漏掉。FX 已經在 node.users 裡記好了每個讀它的 node，從那裡開始就好。",
        ARGS_AND_USERS,
        public=_direct_args_consumers,
        practice=CONSUMERS_OF,
    ),
    Misconception(
        "output_not_consumer",
        "以為 output node 不是 consumer",
        "output node 把值回傳出去，它讀了這個值，所以也是 consumer。"
        '只排除 _guards_fn 就好，不要只留 op == "call_function" 的 node。',
        ARGS_AND_USERS,
        public=_output_not_consumer,
        practice=CONSUMERS_OF,
    ),
    Misconception(
        "users_order",
        "以為 node.users 就是圖上的順序",
        "node.users 記的是「使用被建立的先後」，被 pass 改過的圖上，新插入的 node 可能排在前面，順序就不一樣了。"
        "consumers 要依圖上的順序排，例如用 node 在 gm.graph.nodes 裡的位置排序。",
        NEIGHBORS_RULES,
        public=_consumer_order,
        practice=CONSUMERS_OF,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "op_targets",
        TARGETS_TITLE,
        ("op_targets",),
        {"chapter_models": targets_chapter},
        misconceptions=TARGETS_MISCONCEPTIONS,
    ),
    Exercise(
        "neighbors",
        NEIGHBORS_TITLE,
        ("neighbors",),
        {
            "cat_pool": neighbors_cat_pool,
            "residual": neighbors_residual,
            "gated_residual": neighbors_gated_residual,
            "max_gate": neighbors_max_gate,
        },
        misconceptions=NEIGHBORS_MISCONCEPTIONS,
    ),
)
