"""Public cases of M01-2 為什麼 annotator 靜默失效 (find_nodes) on the chapter's own models."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m01_1 import (
    _chapter_graph,
    described,
    export,
    graph_came_back_changed,
    graph_changes,
    graph_state,
    node_labels,
)

TITLE = "find_nodes：依 node.target 找 op（OpOverloadPacket 與 OpOverload）"


def find_all(ns: Namespace, gm: GraphModule, queries: dict[str, Any]) -> dict[str, list[str]]:
    """``find_nodes(gm, op)`` for each query (text → op): the names of the nodes found, in the order returned."""
    found = {}
    for text, op in queries.items():
        found[text] = node_labels(gm, ns["find_nodes"](gm, op), f"find_nodes(gm, {text}) 的回傳值")
    return found


def searched(ns: Namespace, gm: GraphModule, queries: dict[str, Any]) -> dict[str, Any]:
    """``find_all`` on ``gm``, and under ``changed`` how the calls changed it (they must not)."""
    before = graph_state(gm)
    return {**find_all(ns, gm, queries), "changed": graph_changes(before, gm)}


class TwoConvs(torch.nn.Module):
    """The chapter's two convs: padding="same" exports to conv2d.padding, padding=1 to conv2d.default."""

    def __init__(self) -> None:
        super().__init__()
        self.same = torch.nn.Conv2d(3, 4, 3, padding="same")
        self.pad = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.same(x) + self.pad(x)


def two_convs(ns: Namespace, seed: int) -> Any:
    """The chapter's TwoConvs: the packet finds both overloads, an overload only itself."""
    aten = torch.ops.aten
    gm = export(TwoConvs(), seeded_inputs(seed, (2, 3, 16, 16)))
    return searched(
        ns,
        gm,
        {
            "aten.conv2d": aten.conv2d,
            "aten.conv2d.default": aten.conv2d.default,
            "aten.conv2d.padding": aten.conv2d.padding,
            "aten.add.Tensor": aten.add.Tensor,
        },
    )


def max_and_pool(ns: Namespace, seed: int) -> Any:
    """torch.max(x, dim) (max.dim then getitem) beside max_pool2d: aten.max is not aten.max_pool2d."""
    aten = torch.ops.aten

    class MaxPool(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            peak = torch.max(x, dim=1, keepdim=True).values
            return torch.max_pool2d(x - peak, 2)

    gm = export(MaxPool(), seeded_inputs(seed, (2, 3, 8, 8)))
    return searched(
        ns,
        gm,
        {"aten.max": aten.max, "aten.max_pool2d": aten.max_pool2d, "aten.sub.Tensor": aten.sub.Tensor},
    )


def chapter_models(ns: Namespace, seed: int) -> Any:
    """cat_pool (cat, two convs) and residual (relu twice, batch_norm, add) by packet and by overload."""
    aten = torch.ops.aten
    cat_pool = searched(
        ns,
        _chapter_graph("cat_pool", seed),
        {"aten.cat": aten.cat, "aten.conv2d": aten.conv2d, "aten.max_pool2d.default": aten.max_pool2d.default},
    )
    residual = searched(
        ns,
        _chapter_graph("residual", seed),
        {
            "aten.relu": aten.relu,
            "aten.relu.default": aten.relu.default,
            "aten.add.Tensor": aten.add.Tensor,
            "aten.add": aten.add,
            "aten.cat": aten.cat,
        },
    )
    return {"cat_pool": cat_pool, "residual": residual}


def edited_residual_graph(seed: int) -> tuple[GraphModule, list[str]]:
    """residual after two passes, and the name of the node left without consumers.

    One pass rebuilt ``relu`` as ``relu_2`` (inserted before it), made conv2d_1 read the new node and has not
    erased the old one yet: ``relu`` is still on the graph, without consumers, and ``relu_2`` comes first.
    Another pass made ``add`` a ``mul.Tensor`` in place: the node keeps its name ``add``.
    """
    aten = torch.ops.aten
    gm = _chapter_graph("residual", seed)
    nodes = {n.name: n for n in gm.graph.nodes}
    old = nodes["relu"]
    with gm.graph.inserting_before(old):
        new = gm.graph.create_node("call_function", aten.relu.default, (nodes["batch_norm"],), name="relu_2")
    old.replace_all_uses_with(new)
    nodes["add"].target = aten.mul.Tensor
    gm.graph.lint()
    gm.recompile()
    return gm, [old.name]


def edited_residual(ns: Namespace, seed: int) -> Any:
    """residual after passes: a relu rebuilt before the old one (left without consumers), add turned into mul."""
    aten = torch.ops.aten
    gm, unused = edited_residual_graph(seed)
    queries = {
        "aten.relu": aten.relu,
        "aten.relu.default": aten.relu.default,
        "aten.mul": aten.mul,
        "aten.mul.Tensor": aten.mul.Tensor,
        "aten.add": aten.add,
    }
    return {**searched(ns, gm, queries), "unused": unused}


class RoundTrip(torch.nn.Module):
    """relu, then rounded to uint8 and back twice: by quantized_decomposed, then by aten.

    ``quantized_decomposed.quantize_per_tensor.default`` and ``aten.quantize_per_tensor.default`` are both
    called ``quantize_per_tensor.default``: only the namespace tells them apart.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        aten = torch.ops.aten
        h = torch.relu(x)
        q = qd.quantize_per_tensor.default(h, 0.05, 0, 0, 255, torch.uint8)
        h = qd.dequantize_per_tensor.default(q, 0.05, 0, 0, 255, torch.uint8)
        return aten.dequantize.self(aten.quantize_per_tensor.default(h, 0.05, 0, torch.quint8))


def round_trip(ns: Namespace, seed: int) -> Any:
    """Ops of two namespaces with the same name: quantized_decomposed's and aten's quantize_per_tensor."""
    qd = torch.ops.quantized_decomposed
    gm = export(RoundTrip(), seeded_inputs(seed, (2, 5)))
    return searched(
        ns,
        gm,
        {
            "quantized_decomposed.quantize_per_tensor": qd.quantize_per_tensor,
            "quantized_decomposed.dequantize_per_tensor.default": qd.dequantize_per_tensor.default,
            "aten.quantize_per_tensor.default": torch.ops.aten.quantize_per_tensor.default,
        },
    )


# --- where the chapter teaches it ----------------------------------------------------------------

BY_TARGET = Section("D. 改用 `node.target` 找")
RULES = Section("練習：find_nodes（4 分）")
NAME_IS_NO_IDENTITY = Section("B. `node.target`：op 的身分", notebook="M01-1")
DELETING = Section("D. 刪除：只有沒有 consumer 的 node 刪得掉", notebook="M01-3")


# --- reading the evidence (the public cases' and the hidden ones' alike) ---------------------------
# Each graph's answers are a dict query → the names found; a query is the op's text:
# "aten.conv2d" (an OpOverloadPacket: namespace.op) or "aten.conv2d.default" (an OpOverload).


def query_parts(query: str) -> tuple[str, str, str]:
    """``"aten.conv2d.default"`` → ``("aten", "conv2d", "default")``; a packet has no overload (``""``)."""
    namespace, _, rest = query.partition(".")
    op, _, overload = rest.partition(".")
    return namespace, op, overload


def _graphs(evidence: Any) -> dict[str, dict[str, Any]]:
    """Graph name → its answers (query → list), over every case (a graph asked in several cases: merged)."""
    found: dict[str, dict[str, Any]] = {}

    def visit(data: Any, name: str) -> None:
        if not isinstance(data, dict):
            return
        lists = {k: v for k, v in data.items() if isinstance(v, list) and "." in str(k)}
        if lists:
            found.setdefault(name, {}).update(lists)
        for key, item in data.items():
            if key != "changed" and isinstance(item, dict):
                visit(item, str(key))

    for case, record in diagnosis.cases(evidence).items():
        if isinstance(record, dict) and "value" in record:
            visit(record["value"], str(case))
    return found


def pairs(seen: Any, expected: Any) -> list[tuple[str, str, list[Any], list[Any]]]:
    """``(graph, query, got, want)`` for every query both evidences answered, case by case."""
    found = []
    for place, got, want in _aligned_answers(seen, expected):
        for query, wanted in want.items():
            if "." in str(query) and isinstance(wanted, list) and isinstance(got.get(query), list):
                found.append((place, str(query), got[query], wanted))
    return found


def _aligned_answers(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = []

    def visit(got: Any, want: Any, name: str) -> None:
        if not isinstance(want, dict) or not isinstance(got, dict):
            return
        if any(isinstance(v, list) and "." in str(k) for k, v in want.items()):
            found.append((name, got, want))
        for key, item in want.items():
            if key != "changed" and isinstance(item, dict):
                visit(got.get(key), item, str(key))

    for case in diagnosis.cases(expected):
        visit(diagnosis.value(seen, case), diagnosis.value(expected, case), case)
    return found


def _packet(query: str) -> bool:
    return not query_parts(query)[2]


def _identities(expected: Any) -> dict[str, dict[str, set[tuple[str, str]]]]:
    """Graph → node name → the (namespace, op) of the queries whose key answer holds it."""
    found: dict[str, dict[str, set[tuple[str, str]]]] = {}
    for graph, answers in _graphs(expected).items():
        for query, names in answers.items():
            namespace, op, _ = query_parts(query)
            for name in names:
                found.setdefault(graph, {}).setdefault(str(name), set()).add((namespace, op))
    return found


def _strings(seen: Any, expected: Any) -> bool:
    return any(any(described(item, "（字串") for item in got) for _, _, got, _ in pairs(seen, expected))


def _crashes_on_other_targets(seen: Any, expected: Any) -> bool:
    """A case stopped on a target that is not an OpOverload (``operator.getitem``: a builtin)."""
    return any(
        error in ("AttributeError", "TypeError") and "builtin_function_or_method" in diagnosis.error_message(seen, case)
        for case, error in diagnosis.errors(seen).items()
    )


def _packets_find_nothing(seen: Any, expected: Any) -> bool:
    """Every packet finds nothing where the key finds nodes; every overload is right."""
    found = pairs(seen, expected)
    packets = [(got, want) for _, query, got, want in found if _packet(query) and want]
    return (
        bool(packets)
        and all(not got for got, _ in packets)
        and all(got == want for _, query, got, want in found if not _packet(query))
    )


def _packet_finds_some(seen: Any, expected: Any) -> bool:
    """A packet finds part of its overloads (one of them, ``.default``), never another op; overloads are right."""
    found = pairs(seen, expected)
    packets = [(got, want) for _, query, got, want in found if _packet(query)]
    return (
        all(set(got) <= set(want) for got, want in packets)
        and any(got and set(got) < set(want) for got, want in packets)
        and all(got == want for _, query, got, want in found if not _packet(query))
    )


def _aten_only(seen: Any, expected: Any) -> bool:
    """No node found outside the aten namespace (where the key finds nodes: at most the aten op of the same
    name, which a query rebuilt on torch.ops.aten finds); every aten query right."""
    found = pairs(seen, expected)
    others = [(got, want) for _, query, got, want in found if query_parts(query)[0] != "aten" and want]
    return (
        bool(others)
        and all(not set(got) & set(want) for got, want in others)
        and all(got == want for _, query, got, want in found if query_parts(query)[0] == "aten")
    )


def _whole_packet(seen: Any, expected: Any) -> bool:
    """An overload finds every overload of its op (what the key finds for the packet); packets find no other op."""
    packets: dict[tuple[str, str, str], list[Any]] = {}
    for graph, answers in _graphs(expected).items():
        for query, names in answers.items():
            namespace, op, overload = query_parts(query)
            if not overload:
                packets[(graph, namespace, op)] = names
    found = pairs(seen, expected)
    if any(_packet(query) and set(got) - set(want) for _, query, got, want in found):
        return False
    for graph, query, got, want in found:
        namespace, op, overload = query_parts(query)
        whole = packets.get((graph, namespace, op))
        if overload and whole is not None and set(got) > set(want) and set(got) == set(whole):
            return True
    return False


def _extras(seen: Any, expected: Any) -> list[tuple[str, str, str, set[tuple[str, str]]]]:
    """``(graph, query, node, what the key finds it as)`` for each node found that the key does not find there."""
    identities = _identities(expected)
    return [
        (graph, query, str(node), identities.get(graph, {}).get(str(node), set()))
        for graph, query, got, want in pairs(seen, expected)
        for node in got
        if node not in want and not described(node)
    ]


def _same_name_other_namespace(seen: Any, expected: Any) -> bool:
    return any(
        any(op == query_parts(query)[1] and namespace != query_parts(query)[0] for namespace, op in what)
        for _, query, _, what in _extras(seen, expected)
    )


def _longer_name(seen: Any, expected: Any) -> bool:
    """A packet finds another op whose name starts with (or holds) its own: aten.max → max_pool2d."""
    return any(
        _packet(query) and any(op != query_parts(query)[1] and query_parts(query)[1] in op for _, op in what)
        for _, query, _, what in _extras(seen, expected)
    )


def _by_node_name(seen: Any, expected: Any) -> bool:
    """Names lie: a node the key finds is missed although nothing else is (its name is not its op's, a pass
    retargeted it), or a node found is no op the key finds anywhere on that graph (a constant, an input)."""
    for _, query, got, want in pairs(seen, expected):
        op = query_parts(query)[1]
        if set(got) <= set(want) and any(node not in got and op not in str(node) for node in want):
            return True
    return any(not what for _, _, _, what in _extras(seen, expected))


def _unused(expected: Any) -> set[str]:
    """The nodes the cases say are left without consumers (``unused`` lists)."""
    found: set[str] = set()
    for case in diagnosis.cases(expected):
        for _, record in diagnosis.walk(diagnosis.value(expected, case), "unused"):
            if isinstance(record.get("unused"), list):
                found |= {str(name) for name in record["unused"]}
    return found


def _skips_unused(seen: Any, expected: Any) -> bool:
    """Every answer is the key's without the nodes no one reads, and one misses such a node."""
    unused = _unused(expected)
    if not unused:
        return False
    missed = False
    for _, _, got, want in pairs(seen, expected):
        if got == want:
            continue
        if got != [node for node in want if node not in unused]:
            return False
        missed = True
    return missed


def _order(seen: Any, expected: Any) -> bool:
    return any(
        got != want and sorted(map(str, got)) == sorted(map(str, want)) for _, _, got, want in pairs(seen, expected)
    )


# --- practice after a mistake (issue 50): one idea each, on targets and a graph of their own --------------------


def _belongs_cases() -> list[tuple[Any, Any, bool]]:
    """(target, packet, whether target is an overload of packet): other overloads than .default, names that start
    alike or contain each other, an operator.getitem, and the same name in two namespaces."""
    import common.pt2e  # noqa: F401  (registers torch.ops.quantized_decomposed)

    aten, qd = torch.ops.aten, torch.ops.quantized_decomposed
    return [
        (aten.conv2d.default, aten.conv2d, True),
        (aten.conv2d.padding, aten.conv2d, True),
        (aten.max.dim, aten.max, True),
        (aten.max_pool2d.default, aten.max, False),
        (aten.add.Tensor, aten.add, True),
        (aten.addmm.default, aten.add, False),
        (aten.mean.dim, aten.mean, True),
        (operator.getitem, aten.max, False),
        (qd.quantize_per_tensor.default, qd.quantize_per_tensor, True),
        (qd.quantize_per_tensor.default, aten.quantize_per_tensor, False),
        (aten.quantize_per_tensor.default, aten.quantize_per_tensor, True),
    ]


def _op_text(op: Any) -> str:
    return "operator.getitem" if op is operator.getitem else f"torch.ops.{op}"


def _check_belongs_to(belongs_to: Any) -> list[str]:
    problems = []
    for target, packet, want in _belongs_cases():
        title = f"belongs_to({_op_text(target)}, {_op_text(packet)})"
        try:
            got = belongs_to(target, packet)
        except NotImplementedError:
            raise
        except Exception as error:  # one target crashing should not hide the others
            problems.append(f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 80)}），應該回傳 {want}")
            continue
        if not isinstance(got, bool) or got is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


BELONGS_TO = Practice(
    "belongs_to",
    "寫 belongs_to(target, packet)：target 是圖上某個 call_function node 的 node.target，packet 是一個 "
    "OpOverloadPacket（例如 torch.ops.aten.conv2d）。target 是這個 op 的任何一個 overload 時回傳 True，否則 False。"
    "檢查用 conv2d.padding、max.dim、max_pool2d、addmm、operator.getitem，還有 aten 與 quantized_decomposed "
    "兩個命名空間裡同名的 quantize_per_tensor。",
    "from torch._ops import OpOverload\n\n\ndef belongs_to(target, packet):\n    raise NotImplementedError()\n",
    _check_belongs_to,
    "OpOverload 與 OpOverloadPacket 永遠不相等，packet 也不只 .default 一個 overload。每個 OpOverload 都有 "
    ".overloadpacket，就是它所屬的那個 packet 物件：比物件本身（is），不要比名字或文字，命名空間就不會混在一起。"
    "但 operator.getitem 不是 OpOverload，沒有 .overloadpacket：先用 isinstance 確認。",
    "from torch._ops import OpOverload\n\n\n"
    "def belongs_to(target, packet):\n"
    "    if not isinstance(target, OpOverload):\n"
    "        return False\n"
    "    return target.overloadpacket is packet\n",
    'padding="same" 的 conv 是 conv2d.padding，torch.max(x, dim) 是 max.dim：它們都屬於自己的 packet，都不是 .default。',
)


def _named_graph() -> Graph:
    """Names that lie: an input called relu, a constant called relu_scale, a relu named act, a relu named sigmoid
    and a hardtanh named relu_1 (passes retargeted them in place), a real relu named relu_2."""
    aten = torch.ops.aten
    graph = Graph()

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    x = graph.placeholder("relu")
    scale = graph.create_node("get_attr", "relu_scale", name="relu_scale")
    graph.create_node("call_module", "_guards_fn", (x,), name="_guards_fn")
    act = op(aten.relu.default, "act", x)
    sigmoid = op(aten.relu.default, "sigmoid", act)
    clipped = op(aten.hardtanh.default, "relu_1", sigmoid, 0.0, 6.0)
    scaled = op(aten.mul.Tensor, "mul", clipped, scale)
    graph.output((op(aten.relu.default, "relu_2", scaled),))
    return graph


def _check_is_relu(is_relu: Any) -> list[str]:
    problems = []
    for node in _named_graph().nodes:
        want = node.op == "call_function" and node.target == torch.ops.aten.relu.default
        got = is_relu(node)
        if not isinstance(got, bool) or got is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={safe_text(node.target, 40)}）："
                f"應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_RELU = Practice(
    "is_relu",
    "寫 is_relu(node)：node 做的運算是不是 relu（torch.ops.aten.relu.default）？回傳 True 或 False。"
    "檢查用的圖上，名字都不可靠：輸入叫 relu、常數叫 relu_scale，pass 原地改過 target 之後，"
    "叫 sigmoid 的 node 在算 relu，叫 relu_1 的卻是 hardtanh。",
    "import torch\n\nRELU = torch.ops.aten.relu.default\n\n\ndef is_relu(node):\n    raise NotImplementedError()\n",
    _check_is_relu,
    'node 的名字只是 export（或 pass）取的標籤。node 做什麼寫在兩個屬性：node.op（"call_function" 才是運算）'
    "和 node.target（是哪一個 op）。",
    "import torch\n\nRELU = torch.ops.aten.relu.default\n\n\n"
    "def is_relu(node):\n"
    '    return node.op == "call_function" and node.target == RELU\n',
    "pass 改 node.target 時不會改名字：所以 find_nodes 只看 target。",
)


MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "找 op 的函式把圖改掉了",
        "find_nodes 只該找出 node，圖是呼叫的人的。你在找之前先整理了圖（例如 eliminate_dead_code() 刪掉沒人用的 getitem），"
        "呼叫的人拿回來的圖就少了 node。只讀 gm.graph.nodes，不要呼叫會改圖的方法。",
        DELETING,
        public=graph_came_back_changed,
    ),
    Misconception(
        "returns_names",
        "回傳 node 的名字，不是 Node",
        "練習要的是圖上的 Node 物件：之後的 Quantizer 要拿它們貼標籤，名字做不到。"
        "找到的 node 直接放進 list，不要換成 node.name。",
        RULES,
        public=_strings,
    ),
    Misconception(
        "crashes_on_getitem",
        "以為每個 target 都有 overloadpacket",
        "不是每個 call_function 的 target 都是 OpOverload：torch.max(x, dim) 之後取值的 operator.getitem 是 Python 的內建函式，"
        "沒有 overloadpacket，讀它就出錯。先用 isinstance(node.target, OpOverload) 確認，再讀 .overloadpacket。",
        BY_TARGET,
        public=_crashes_on_other_targets,
        practice=BELONGS_TO,
    ),
    Misconception(
        "packet_equals_overload",
        "以為 OpOverloadPacket 會等於它的 overload",
        "node.target 是 OpOverload（aten.conv2d.default），torch.ops.aten.conv2d 是 OpOverloadPacket，兩者永遠不相等："
        "直接比 node.target == op（或用 graph.find_nodes）傳 packet 時一個都找不到，也不會出錯。"
        "op 是 packet 時，要比 node.target.overloadpacket is op。",
        BY_TARGET,
        public=_packets_find_nothing,
        practice=BELONGS_TO,
    ),
    Misconception(
        "packet_as_default",
        "把 OpOverloadPacket 當成它的 .default",
        '一個 op 可以有好幾個 overload：padding="same" 的 conv 是 conv2d.padding，mean(dim=…) 是 mean.dim，a + b 是 add.Tensor，'
        "它們都不是 .default。傳 packet 要找的是這個 op 的每一種 overload：比 node.target.overloadpacket is op。",
        BY_TARGET,
        public=_packet_finds_some,
        practice=BELONGS_TO,
    ),
    Misconception(
        "aten_only",
        "以為 op 都在 torch.ops.aten 底下",
        "op 有不同的命名空間：quantize_per_tensor 這類 op 在 torch.ops.quantized_decomposed 底下，換回 aten 的同名 op 就找不到。"
        "直接拿傳進來的 op 和 node.target（或它的 overloadpacket）比，不要自己重新組出 op。",
        RULES,
        public=_aten_only,
        practice=BELONGS_TO,
    ),
    Misconception(
        "by_node_name",
        "用 node 的名字找 op",
        "node 的名字只是標籤：名叫 relu_scale 的常數、名叫 sigmoid 的輸入都不是 op，pass 把 relu_1 換成 hardtanh 之後名字也不會變。"
        "只有 node.target 說得出這個 node 做什麼運算，要比的是它。",
        NAME_IS_NO_IDENTITY,
        public=_by_node_name,
        practice=IS_RELU,
    ),
    Misconception(
        "overload_finds_packet",
        "傳 OpOverload 也找出整個 op",
        "OpOverload（aten.conv2d.default）指的是一種 overload，只該找 node.target == op 的 node；"
        "一律比 overloadpacket 的話，conv2d.padding 也被找進來。先用 isinstance 分辨傳進來的是 packet 還是 overload。",
        RULES,
        public=_whole_packet,
    ),
    Misconception(
        "by_target_string",
        "把 target 轉成字串比開頭或包含",
        '"aten.max_pool2d.default".startswith("aten.max") 是 True，"aten.add" 也在 "aten.addmm.default" 裡：'
        "字串比對會把名字相近的 op 一起找進來。比物件本身：node.target == op，或 node.target.overloadpacket is op。",
        RULES,
        public=_longer_name,
        practice=BELONGS_TO,
    ),
    Misconception(
        "ignores_namespace",
        "只比 op 的名字，不比命名空間",
        "aten.quantize_per_tensor 與 quantized_decomposed.quantize_per_tensor 名字一樣，卻是兩個不同的 op；"
        "__name__ 只有 op 和 overload 的名字（quantize_per_tensor.default），沒有命名空間。"
        "比名字字串會把它們混在一起；比物件本身（node.target == op，或 node.target.overloadpacket is op），命名空間自然就分開了。",
        RULES,
        public=_same_name_other_namespace,
        practice=BELONGS_TO,
    ),
    Misconception(
        "skips_unused",
        "以為沒有 consumer 的 node 不算",
        "pass 改接了 consumer 卻還沒刪掉的舊 node、還沒跑 eliminate_dead_code 的 node，都還在圖上，target 也還是那個 op。"
        "你跳過了沒有 users 的 node（或只從 output 往回找），它們就被漏掉了。"
        "依 gm.graph.nodes 走過每一個 call_function node，只看 node.target，不看有沒有人讀它。",
        DELETING,
        public=_skips_unused,
    ),
    Misconception(
        "sorted_by_name",
        "把找到的 node 依名字排序",
        "名字是字串，排序時 relu_10 會排在 relu_2 前面，和圖上的順序不同。"
        "依 gm.graph.nodes 的順序走一遍，找到就加進 list，結果自然是圖上的順序。",
        RULES,
        public=_order,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "find_nodes",
        TITLE,
        ("find_nodes",),
        {
            "chapter_models": chapter_models,
            "two_convs": two_convs,
            "max_and_pool": max_and_pool,
            "edited_residual": edited_residual,
            "round_trip": round_trip,
        },
        misconceptions=MISCONCEPTIONS,
    ),
)
