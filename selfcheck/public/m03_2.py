"""Public cases of M03-2 讀懂 XNNPACKQuantizer 的標籤 (label_positions, fused_patterns) on the chapter's own models.

The graphs are labelled by torchao's XNNPACKQuantizer (per-channel) and copied right after
``annotate``, as in the chapter. The answers are compared sorted: their order does not matter.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import EvidenceError, plain
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.probes import CaptureLabels
from selfcheck.public.m01_1 import graph_changes, graph_state
from selfcheck.public.m03_1 import export


def labelled(name: str) -> GraphModule:
    """A chapter model as XNNPACKQuantizer (per-channel) labelled it, copied after annotate."""
    from common.pt2e import get_xnnpack_quantizer, prepare_pt2e

    capture = CaptureLabels(get_xnnpack_quantizer(is_per_channel=True)[0])
    prepare_pt2e(export(name), capture)
    assert capture.annotated is not None
    return capture.annotated


class Branches(nn.Module):
    """Five short branches from x, for labels written by hand (see ``hand_labelled``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = self.conv(x)
        c = torch.abs(x)
        b = torch.tanh(a)
        d = torch.relu(c)
        e = torch.sigmoid(x - 1)
        f = torch.relu(x * 3)
        k = self.conv2(x)
        return (
            b,
            d,
            e,
            f,
            torch.relu(k),
            k,
            torch.exp(-x),
            torch.relu(torch.cos(x)),
            torch.sigmoid(torch.sin(x)),
            (
                torch.tan(x) + x,
                x + torch.atan(x),
            ),
        )


def hand_labelled() -> GraphModule:
    """Branches with labels written by hand, copied like the chapter's graphs.

    conv2d → tanh: fused (tanh's label nobody claimed); abs → relu: not fused (the edge is
    quantized); sub → sigmoid: fused (the edge's spec is None); mul → relu_1: not fused (mul's
    input spec is None); conv2d_1 has two users; neg → exp: exp has no label; cos → relu_3: fused
    (cos's input shares x's spec); sin → sigmoid_1: fused (sin's label nobody claimed); tan → add: fused
    though add's other input edge (from x) is quantized; atan → add_1: not fused (atan is add_1's second
    argument, and that edge is quantized). x's own output is labelled too, sub shares its input's spec as
    well, and the constant conv2_weight has an output label.
    """
    from common.models import example_inputs
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, SharedQuantizationSpec, export_module
    from common.qspecs import act_spec, weight_spec

    gm = export_module(Branches().eval(), example_inputs(2))
    n = {node.name: node for node in gm.graph.nodes}

    def label(name: str, inputs: dict[str, Any], output: Any = None, claimed: bool = True) -> None:
        n[name].meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={n[k]: v for k, v in inputs.items()}, output_qspec=output, _annotated=claimed
        )

    label("x", {}, act_spec())
    label("conv2d", {"x": act_spec(), "conv_weight": weight_spec(), "conv_bias": None})
    label("tanh", {}, act_spec(), claimed=False)
    label("abs_1", {"x": act_spec()})
    label("relu", {"abs_1": act_spec()}, act_spec())
    label("sub", {"x": SharedQuantizationSpec(n["x"])}, claimed=False)
    label("sigmoid", {"sub": None}, act_spec())
    label("mul", {"x": None})
    label("relu_1", {}, act_spec())
    label("conv2d_1", {"x": act_spec(), "conv2_weight": weight_spec()})
    label("relu_2", {}, act_spec())
    label("neg", {"x": act_spec()})
    label("cos", {"x": SharedQuantizationSpec(n["x"])})
    label("relu_3", {}, act_spec())
    label("sin", {"x": act_spec()}, claimed=False)
    label("sigmoid_1", {}, act_spec())
    label("tan", {"x": act_spec()})
    label("add", {"x": act_spec()}, act_spec())
    label("atan", {"x": act_spec()})
    label("add_1", {"atan": act_spec()}, act_spec())
    label("conv2_weight", {}, weight_spec())
    return copy.deepcopy(gm)


def _positions(ns: Namespace, name: str) -> dict[str, Any]:
    gm = hand_labelled() if name == "hand" else labelled(name)
    before = graph_state(gm)
    got = plain(ns["label_positions"](gm))
    if not isinstance(got, dict) or set(got) != {"edges", "outputs"}:
        raise EvidenceError('label_positions 應該回傳 {"edges": [...], "outputs": [...]} 這樣的 dict')
    if not isinstance(got["edges"], list) or not all(isinstance(e, list) and len(e) == 2 for e in got["edges"]):
        raise EvidenceError("edges 應該是 (上游名稱, consumer 名稱) 的 list")
    if not isinstance(got["outputs"], list):
        raise EvidenceError("outputs 應該是 node 名稱的 list")
    found = {"edges": sorted(got["edges"], key=str), "outputs": sorted(got["outputs"], key=str)}
    return {**found, "changed": graph_changes(before, gm)} if name == "hand" else found


def _pairs(ns: Namespace, name: str) -> Any:
    """The pairs, sorted; on the hand-labelled graph with ``changed``: how the call changed the graph."""
    gm = hand_labelled() if name == "hand" else labelled(name)
    before = graph_state(gm)
    got = plain(ns["fused_patterns"](gm))
    if not isinstance(got, list) or not all(isinstance(p, list) and len(p) == 2 for p in got):
        raise EvidenceError("fused_patterns 應該回傳 (第一個 op, 最後一個 op) 的 list")
    pairs = sorted(got, key=str)
    return {"pairs": pairs, "changed": graph_changes(before, gm)} if name == "hand" else pairs


def positions_residual(ns: Namespace, seed: int) -> Any:
    """residual: the add's two input edges, bias labels that are None, and empty labels on constants."""
    return _positions(ns, "residual")


def positions_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: two convs that read x, a cat nobody labelled."""
    return _positions(ns, "cat_pool")


def positions_by_hand(ns: Namespace, seed: int) -> Any:
    """Labels written by hand: some nobody claimed, one on the model input x, a shared spec, None specs."""
    return _positions(ns, "hand")


def fused_by_hand(ns: Namespace, seed: int) -> Any:
    """Labels written by hand (see ``hand_labelled``): what fuses is read from the labels, not the ops."""
    return _pairs(ns, "hand")


def fused_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn (two conv → relu) and conv_bn_relu (BN folded into the conv)."""
    return {name: _pairs(ns, name) for name in ("small_cnn", "conv_bn_relu")}


def fused_mlp_cat(ns: Namespace, seed: int) -> Any:
    """mlp (linear → relu) and cat_pool (nothing fused)."""
    return {name: _pairs(ns, name) for name in ("mlp", "cat_pool")}


# --- where the chapter teaches it ----------------------------------------------------------------

CONV_RELU = Section("A. conv → relu：conv 和 relu 之間沒有量化點")
POSITIONS_RULES = Section("練習 1：label_positions（3 分）")
FUSED_RULES = Section("練習 2：fused_patterns（3 分）")
LABEL_FIELDS = Section("A. 標籤長什麼樣", notebook="M03-1")
ROLES = Section("B. 三個角色的分工", notebook="M03-1")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
USERS = Section("C. `node.args` 與 `node.users`：同一條邊的兩個方向", notebook="M01-1")


# --- reading the evidence (shared with the hidden detectors, autograder/checks/test_m03_2.py) ----------

Edge = tuple[str, str]


def _edge_set(items: Any) -> set[Edge] | None:
    """A returned list of (a, b) pairs as a set of name pairs; None when it is not such a list."""
    if not isinstance(items, list) or not all(isinstance(e, list) and len(e) == 2 for e in items):
        return None
    return {(str(a), str(b)) for a, b in items}


def _name_set(items: Any) -> set[str] | None:
    return {str(n) for n in items} if isinstance(items, list) else None


class Positions:
    """One labelled graph's answer and the key's: ``edges`` and ``outputs`` as sets, what is missing and extra."""

    def __init__(self, place: tuple[Any, ...], got: dict[str, Any], want: dict[str, Any]) -> None:
        self.place, self.model = place, str(place[-1])
        self.edges, self.want_edges = _edge_set(got.get("edges")), _edge_set(want.get("edges"))
        self.outputs, self.want_outputs = _name_set(got.get("outputs")), _name_set(want.get("outputs"))
        self.changed = got.get("changed")

    @property
    def whole(self) -> bool:
        return None not in (self.edges, self.want_edges, self.outputs, self.want_outputs)

    def missing(self) -> set[tuple[str, ...]]:
        """Positions the key lists and the student does not: ``("edge", a, b)``, ``("out", n)``."""
        return {("edge", *e) for e in self.want_edges - self.edges} | {
            ("out", n) for n in self.want_outputs - self.outputs
        }

    def extra(self) -> set[tuple[str, ...]]:
        return {("edge", *e) for e in self.edges - self.want_edges} | {
            ("out", n) for n in self.outputs - self.want_outputs
        }


def position_records(seen: Any, expected: Any) -> list[Positions]:
    """Every label_positions answer in both evidences (one per graph), whole ones only."""
    found = [Positions(place, got, want) for place, got, want in diagnosis.aligned(seen, expected, "edges")]
    return [record for record in found if record.whole]


def owner(position: tuple[str, ...]) -> str:
    """The node that carries a position's label: the consumer of an edge, the node of an output."""
    return position[2] if position[0] == "edge" else position[1]


def reversed_edges(seen: Any, expected: Any) -> bool:
    """Some graph's edges come back as (consumer, producer): more of them reversed than right."""
    for record in position_records(seen, expected):
        backwards = {(b, a) for a, b in record.edges} & record.want_edges
        if backwards and len(backwards) > len(record.edges & record.want_edges):
            return True
    return False


def no_edges(seen: Any, expected: Any) -> bool:
    """Not one edge listed on any graph, while the outputs are there."""
    records = [r for r in position_records(seen, expected) if r.want_edges]
    return bool(records) and all(not r.edges for r in records) and any(r.outputs for r in records)


def no_outputs(seen: Any, expected: Any) -> bool:
    """Not one output listed on any graph, while the edges are there."""
    records = [r for r in position_records(seen, expected) if r.want_outputs]
    return bool(records) and all(not r.outputs for r in records) and any(r.edges for r in records)


def more_edges(seen: Any, expected: Any) -> bool:
    """Every edge of the key and more (not reversed ones): edges whose spec is None listed too."""
    records = position_records(seen, expected)
    return (
        any(r.want_edges <= r.edges and r.edges - r.want_edges for r in records)
        and all(r.want_edges <= r.edges for r in records)
        and not reversed_edges(seen, expected)
    )


def more_outputs(seen: Any, expected: Any) -> bool:
    """Every output of the key and more: nodes whose label has no output spec listed too."""
    records = position_records(seen, expected)
    return any(r.outputs - r.want_outputs for r in records) and all(r.want_outputs <= r.outputs for r in records)


def only_missing(seen: Any, expected: Any) -> list[Positions]:
    """The graphs where positions are missing, when nothing extra was listed anywhere (else empty)."""
    records = position_records(seen, expected)
    if any(r.extra() for r in records):
        return []
    return [r for r in records if r.missing()]


def missing_within(seen: Any, expected: Any, hand: str, allowed: Any, *, elsewhere: bool = False) -> bool:
    """Only positions are missing, and on the hand-labelled graph ``hand`` each is ``allowed(position)``;
    ``elsewhere``: a graph labelled by XNNPACKQuantizer may lose positions too (else it must be whole)."""
    lost = only_missing(seen, expected)
    on_hand = [r for r in lost if r.model == hand]
    if any(r.model != hand for r in lost) and not elsewhere:
        return False
    return bool(lost) and all(allowed(p) for r in on_hand for p in r.missing())


def _public_changed(seen: Any, expected: Any) -> bool:
    """The call changed the graph it was asked to read (nodes or labels)."""
    return any(
        isinstance(r.changed, list) and r.changed
        for r in [*position_records(seen, expected), *pair_records(seen, expected)]
    )


# what the public hand-labelled graph holds (hand_labelled): labels nobody claimed, a shared spec, x's output
BY_HAND_UNCLAIMED = {"tanh", "sub", "sin"}
BY_HAND_SHARED = {("edge", "x", "sub"), ("edge", "x", "cos")}
PLACEHOLDERS = {"x"}
CONSTANTS = {"conv2_weight"}


def _public_unclaimed(seen: Any, expected: Any) -> bool:
    return missing_within(seen, expected, "by_hand", lambda p: owner(p) in BY_HAND_UNCLAIMED) and not (
        _public_plain_specs(seen, expected)
    )


def _public_plain_specs(seen: Any, expected: Any) -> bool:
    return missing_within(seen, expected, "by_hand", lambda p: p in BY_HAND_SHARED, elsewhere=True)


def _public_constants(seen: Any, expected: Any) -> bool:
    """Only the output label of a constant (get_attr) is missing."""
    return missing_within(seen, expected, "by_hand", lambda p: p[0] == "out" and p[1] in CONSTANTS)


def _public_placeholders(seen: Any, expected: Any) -> bool:
    """The output label of the model input x is missing (a constant's may be too: neither is a call_function)."""
    lost = [p for r in only_missing(seen, expected) if r.model == "by_hand" for p in r.missing()]
    return any(p[0] == "out" and p[1] in PLACEHOLDERS for p in lost) and missing_within(
        seen, expected, "by_hand", lambda p: p[0] == "out" and p[1] in PLACEHOLDERS | CONSTANTS
    )


# --- practice after a mistake (issue 50): one idea each, checked on tiny hand-labelled graphs of its own ------


def _spec() -> Any:
    from common.pt2e import MinMaxObserver, QuantizationSpec

    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def _labelled_linear() -> dict[str, Any]:
    """x, w (get_attr) → linear → sigmoid, relu(x); each node labelled its own way (relu not at all)."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, SharedQuantizationSpec

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    w = graph.get_attr("w")
    linear = graph.call_function(torch.nn.functional.linear, (x, w))
    sigmoid = graph.call_function(torch.sigmoid, (linear,))
    relu = graph.call_function(torch.relu, (x,))
    graph.output((sigmoid, relu))
    spec = _spec()
    x.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec, _annotated=True)
    w.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=SharedQuantizationSpec(x), _annotated=True)
    linear.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: spec, w: None}, _annotated=False)
    sigmoid.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={linear: SharedQuantizationSpec((x, linear))}, _annotated=True
    )
    return {node.name: node for node in graph.nodes}


def _label_state(nodes: dict[str, Any]) -> list[Any]:
    from common.pt2e import ANNOTATION_KEY

    state = []
    for node in nodes.values():
        annotation = node.meta.get(ANNOTATION_KEY)
        if annotation is not None:
            state.append((node.name, dict(annotation.input_qspec_map), annotation.output_qspec, annotation._annotated))
    return state


def _check_node_positions(node_positions: Any) -> list[str]:
    nodes = _labelled_linear()
    before = _label_state(nodes)
    want = {
        "x": ([], True),
        "w": ([], True),
        "linear": ([("x", "linear")], False),
        "sigmoid": ([("linear", "sigmoid")], False),
        "relu": ([], False),
    }
    problems = []
    for name, (edges, output) in want.items():
        got = node_positions(nodes[name])
        right = {"edges": edges, "output": output}
        if not isinstance(got, dict) or list(got.get("edges", ())) != edges or got.get("output") is not output:
            problems.append(f"{name}（op={nodes[name].op}）：應該是 {right}，你的是 {got!r}")
    if _label_state(nodes) != before:
        problems.append("你的程式改了標籤：只該讀 node.meta，不要刪或改它")
    return problems


NODE_POSITIONS = Practice(
    "node_positions",
    '寫 node_positions(node)：讀 node 的標籤，回傳 {"edges": [(上游的名字, node 的名字), …], "output": True/False}，'
    '也就是這張標籤讓 prepare_pt2e 量化哪些輸入邊、量不量化 node 的輸出；沒有標籤就是 {"edges": [], "output": False}。'
    "檢查用的小圖有模型輸入 x、常數 w、linear、sigmoid 與沒有標籤的 relu，規格有 QuantizationSpec、SharedQuantizationSpec 和 None。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef node_positions(node):\n    raise NotImplementedError()\n",
    _check_node_positions,
    "node.meta.get(ANNOTATION_KEY) 是 None 就沒有位置。有標籤時：input_qspec_map 裡規格不是 None 的才是邊"
    "（key 是上游，寫在前面）；output_qspec 不是 None 才是輸出。什麼規格都算，_annotated 與 node.op 都不用看。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def node_positions(node):\n"
    "    annotation = node.meta.get(ANNOTATION_KEY)\n"
    "    if annotation is None:\n"
    '        return {"edges": [], "output": False}\n'
    "    edges = [(producer.name, node.name) for producer, spec in annotation.input_qspec_map.items() if spec is not None]\n"
    '    return {"edges": edges, "output": annotation.output_qspec is not None}\n',
    "規格是 None 的邊（像 w → linear）是「不量化」；常數 w、輸入 x 的輸出標籤照樣算。",
)


def _copied_cat() -> dict[str, Any]:
    """a = sin(x), b = cos(y), cat([a, b, x]), mul(a, y): labelled with keys from another copy of the graph (as after
    annotate's deepcopy); sin has no label."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation

    def build() -> dict[str, Any]:
        graph = torch.fx.Graph()
        x, y = graph.placeholder("x"), graph.placeholder("y")
        a = graph.call_function(torch.sin, (x,))
        b = graph.call_function(torch.cos, (y,))
        cat = graph.call_function(torch.cat, ([a, b, x],))
        mul = graph.call_function(torch.mul, (a, y))
        graph.output((cat, mul))
        return {node.name: node for node in graph.nodes}

    original, copied = build(), build()
    spec = _spec()
    copied["cat"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={original["sin"]: spec, original["cos"]: spec, original["x"]: None}, output_qspec=spec
    )
    copied["mul"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={original["sin"]: None, original["y"]: spec}
    )
    return copied


def _check_labelled_edges(labelled_edges: Any) -> list[str]:
    nodes = _copied_cat()
    problems = []
    for name, want, why in (
        ("cat", [("cos", "cat"), ("sin", "cat")], "標籤有 sin、cos 兩條有規格的邊，x 那條是 None"),
        ("mul", [("y", "mul")], "標籤有 y 那條有規格的邊，sin 那條是 None"),
        ("sin", [], "沒有標籤"),
    ):
        got = labelled_edges(nodes[name])
        if isinstance(got, str) or not isinstance(got, list | tuple | set):
            problems.append(f"{name}：要回傳 (上游名字, {name}) 的 list，你的是 {got!r}")
            continue
        mine = sorted(tuple(edge) if isinstance(edge, list | tuple) else (edge,) for edge in got)
        if mine != want:
            lost = (
                "（一條都沒留下：key 是原圖的 node，拿這張圖上的 node 去比對，in、get 全都落空）"
                if want and not mine
                else ""
            )
            problems.append(f"{name}（{why}）：應該是 {want}，你的是 {mine}{lost}")
    return problems


LABELLED_EDGES = Practice(
    "labelled_edges",
    "寫 labelled_edges(node)：回傳 node 的標籤裡規格不是 None 的邊，[(上游的名字, node 的名字), …]；沒有標籤就是 []。"
    "檢查用的圖和 label_positions 的一樣，是 annotate 之後複製出來的：input_qspec_map 的 key 是原圖的 node，"
    "不是你在這張圖上拿到的 node。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef labelled_edges(node):\n    raise NotImplementedError()\n",
    _check_labelled_edges,
    "複製圖上的 node 和 key 不是同一個物件，in node.all_input_nodes、in node.args、.get(輸入) 全都比不到。"
    "不必比對：input_qspec_map 的每個 key 就是一條邊的上游，直接拿 key.name。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def labelled_edges(node):\n"
    "    annotation = node.meta.get(ANNOTATION_KEY)\n"
    "    if annotation is None:\n"
    "        return []\n"
    "    return [(key.name, node.name) for key, spec in annotation.input_qspec_map.items() if spec is not None]\n",
    "名字在複製前後都一樣，物件不一樣：要認一個 node，用它的 name。",
)


POSITIONS_MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "讀標籤的函式把標籤改掉了",
        "label_positions 只該讀標籤、列出位置，圖和上面的標籤都是呼叫的人的。你的程式在讀的時候順手改了標籤"
        "（例如把規格是 None 的邊從 input_qspec_map 刪掉），之後的 prepare_pt2e 讀到的就不是 Quantizer 原本貼的。"
        "只讀 node.meta 裡的標籤，不要改它。",
        ROLES,
        public=_public_changed,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "edges_reversed",
        "邊寫成了 (consumer, 上游)",
        "input_qspec_map 貼在 consumer 身上，key 是上游的 producer，所以一條邊 (上游, consumer) 的第二個名字才是標籤所在的 node。"
        "你把兩個名字對調了，每條邊的方向都反過來。照 (producer.name, node.name) 的順序寫。",
        LABEL_FIELDS,
        public=reversed_edges,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "identity_filter",
        "用 node 物件比對複製出來的圖，一條邊都沒留下",
        "這些圖是在 annotate 結束時複製的：input_qspec_map 的 key 仍是原圖的 node 物件，和複製圖上的 node 不是同一個。"
        "你用 in node.all_input_nodes 這類物件比對過濾，全都比不到，所以一條邊也沒列。直接用 key 的 .name，不必再比對物件。",
        POSITIONS_RULES,
        public=no_edges,
        practice=LABELLED_EDGES,
    ),
    Misconception(
        "no_outputs",
        "忘了輸出標籤",
        "一張標籤有兩種位置：input_qspec_map 標輸入邊，output_qspec 標這個 node 的輸出。"
        "你只讀了 input_qspec_map，outputs 是空的；output_qspec 不是 None 的 node 也要列進 outputs。",
        LABEL_FIELDS,
        public=no_outputs,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "none_is_quantized",
        "規格是 None 的邊也當成要量化",
        "input_qspec_map 裡的 None 是「這條邊不量化」，例如 bias 的邊保持 fp32，不會插 observer。"
        "你把 input_qspec_map 的每個 key 都列成邊了；只列規格不是 None 的。",
        CONV_RELU,
        public=more_edges,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "any_label_is_output",
        "有標籤就當成輸出被量化",
        "node 有標籤，不代表它的輸出要量化：XNNPACKQuantizer 會在 weight、bias 這類常數上留下空的標籤，"
        "融合 pattern 的第一個 op 也只有輸入邊的標籤。outputs 只列 output_qspec 不是 None 的 node。",
        POSITIONS_RULES,
        public=more_outputs,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "plain_specs_only",
        "只算 QuantizationSpec，共用這類規格沒列",
        "SharedQuantizationSpec、FixedQParamsQuantizationSpec、DerivedQuantizationSpec 也都是規格，"
        "prepare_pt2e 一樣會在那些位置量化（共用的位置用同一個 observer）。你只認 QuantizationSpec，這些位置就漏了；"
        "判斷條件應該是「規格不是 None」，不是規格的類別。",
        POSITIONS_RULES,
        public=_public_plain_specs,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "claimed_only",
        "只讀 _annotated 為 True 的標籤",
        "_annotated 是 Quantizer 之間分工用的記號，prepare_pt2e 插 observer 時不看它：沒人認領的標籤照樣會插 observer。"
        "你跳過了 _annotated 為 False 的標籤，那些位置就沒列出來；每張標籤都要讀。",
        ROLES,
        public=_public_unclaimed,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "skips_constants",
        "常數（get_attr）上的標籤一律跳過",
        "XNNPACKQuantizer 在 weight、bias 上留的空標籤不列，是因為它們的 output_qspec 是 None，不是因為它們是常數。"
        "別的 Quantizer 可以在常數的輸出貼標籤，這時它就該列進 outputs。不要用 node.op 過濾，照 output_qspec 是不是 None 判斷。",
        POSITIONS_RULES,
        public=_public_constants,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "ops_only",
        "只看 call_function node，模型輸入上的標籤沒列",
        "標籤不只貼在 op 上：模型輸入（placeholder）x 也可以有輸出標籤，讓讀 x 的每個 consumer 都吃量化後的值。"
        "你先過濾成只看 call_function，x 的輸出就漏了；每個 node 的標籤都要讀。",
        EDGE_AND_OUTPUT,
        public=_public_placeholders,
        practice=NODE_POSITIONS,
    ),
)


# --- fused_patterns: the pairs of each graph ------------------------------------------------------------

Pair = tuple[str, str]


class Pairs:
    """One labelled graph's pairs and the key's, as sets; ``error`` when that answer raised instead."""

    def __init__(self, place: tuple[str, ...], got: Any, want: set[Pair], changed: Any = None) -> None:
        self.place, self.model = place, place[-1] if place else ""
        self.pairs, self.want, self.changed = _edge_set(got), want, changed

    def missing(self) -> set[Pair]:
        return self.want - self.pairs if self.pairs is not None else set()

    def extra(self) -> set[Pair]:
        return self.pairs - self.want if self.pairs is not None else set()


def pair_records(seen: Any, expected: Any) -> list[Pairs]:
    """Every fused_patterns answer in both evidences: ``{"pairs": [...]}`` (hidden) or the bare list
    (public), one per graph; the place is the case and the graph."""
    found: list[Pairs] = []

    def visit(got: Any, want: Any, place: tuple[str, ...]) -> None:
        wanted = _edge_set(want.get("pairs") if isinstance(want, dict) else want)
        if wanted is not None:
            if isinstance(want, dict):
                got_dict = got if isinstance(got, dict) else {}
                found.append(Pairs(place, got_dict.get("pairs"), wanted, got_dict.get("changed")))
            else:
                found.append(Pairs(place, got, wanted))
            return
        if isinstance(want, dict) and isinstance(got, dict):
            for key, item in want.items():
                if key in got:
                    visit(got[key], item, (*place, str(key)))

    for case, record in diagnosis.cases(expected).items():
        if isinstance(record, dict) and "value" in record and case in diagnosis.cases(seen):
            mine = diagnosis.cases(seen)[case]
            if isinstance(mine, dict) and "value" in mine:
                visit(mine["value"], record["value"], (str(case),))
    return [r for r in found if r.pairs is not None]


def pairs_reversed(seen: Any, expected: Any) -> bool:
    """Pairs come back as (last, first): more of them reversed than right."""
    for record in pair_records(seen, expected):
        backwards = {(b, a) for a, b in record.pairs} & record.want
        if backwards and len(backwards) > len(record.pairs & record.want):
            return True
    return False


def is_relu(name: str) -> bool:
    """A node named like aten.relu (relu, relu_1), not relu6 or leaky_relu."""
    return name == "relu" or (name.startswith("relu_") and name[5:].isdigit())


def lost_and_found(seen: Any, expected: Any) -> tuple[set[tuple[str, Pair]], set[tuple[str, Pair]]]:
    """The (graph, pair) the key finds and the student does not, and the other way round."""
    records = [r for r in pair_records(seen, expected) if not pairs_reversed(seen, expected)]
    missing = {(r.model, p) for r in records for p in r.missing()}
    extra = {(r.model, p) for r in records for p in r.extra()}
    return missing, extra


def missing_only(seen: Any, expected: Any, allowed: Any, *, every: Any = None) -> bool:
    """Pairs are missing and none extra; each missing one is ``allowed(graph, pair)``; ``every``: each key
    pair with that property is among the missing ones."""
    missing, extra = lost_and_found(seen, expected)
    if not missing or extra or not all(allowed(model, pair) for model, pair in missing):
        return False
    if every is not None:
        wanted = {(r.model, p) for r in pair_records(seen, expected) for p in r.want if every(r.model, p)}
        return wanted <= missing
    return True


def extra_only(seen: Any, expected: Any, allowed: Any) -> bool:
    """Pairs are extra and none missing; each extra one is ``allowed(graph, pair)``."""
    missing, extra = lost_and_found(seen, expected)
    return bool(extra) and not missing and all(allowed(model, pair) for model, pair in extra)


def both_ways(seen: Any, expected: Any) -> bool:
    """Pairs the labels fuse are missing and pairs they do not fuse are listed: the labels were not read."""
    missing, extra = lost_and_found(seen, expected)
    return bool(missing) and bool(extra)


def crashed_on_unlabelled(seen: Any, case: str) -> bool:
    """``case`` raised reading the label of a node that has none (``None.input_qspec_map``, ``None.output_qspec``)."""
    return diagnosis.error(seen, case) in ("AttributeError", "TypeError") and "NoneType" in diagnosis.error_message(
        seen, case
    )


# what the public hand-labelled graph holds (hand_labelled, Branches)
BY_HAND_TRAPS: dict[Pair, set[str]] = {
    ("conv2d", "tanh"): {"apart", "unclaimed"},  # tanh's label: nobody claimed it; a node lies between them
    ("sub", "sigmoid"): {"unclaimed", "first_unclaimed", "none_edge", "shared"},  # sub: unclaimed, shared spec
    ("sin", "sigmoid_1"): {"unclaimed", "first_unclaimed"},  # sin's label: nobody claimed it
    ("cos", "relu_3"): {"shared"},
    ("tan", "add"): {"other_input_quantized"},  # add's edge from x is quantized, the edge tan → add is not
    ("atan", "add_1"): {
        "edge_quantized",
        "second_argument",
    },  # atan is add_1's second argument  # cos's input spec is a SharedQuantizationSpec
    ("abs_1", "relu"): {"edge_quantized"},
    ("mul", "relu_1"): {"inputs_unquantized"},
    ("conv2d_1", "relu_2"): {"two_users"},
    ("neg", "exp"): {"last_unlabelled"},
}


def by_hand(tag: str) -> Any:
    return lambda model, pair: model == "by_hand" and tag in BY_HAND_TRAPS.get(pair, set())


def _public_relu_only(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, lambda _, p: not is_relu(p[1]), every=lambda _, p: not is_relu(p[1]))


def _public_op_kind(seen: Any, expected: Any) -> bool:
    missing, _ = lost_and_found(seen, expected)
    found_some = any(r.pairs & r.want for r in pair_records(seen, expected))
    return found_some and (
        both_ways(seen, expected)
        or (any(is_relu(p[1]) for _, p in missing) and any(not is_relu(p[1]) for _, p in missing))
    )


def _public_unlabelled_first(seen: Any, expected: Any) -> bool:
    _, extra = lost_and_found(seen, expected)
    return {("by_hand", ("abs_1", "relu")), ("by_hand", ("mul", "relu_1"))} <= extra


def _public_apart(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, by_hand("apart"), every=by_hand("apart"))


def _public_unclaimed_pairs(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, by_hand("unclaimed"), every=by_hand("first_unclaimed"))


def _public_other_input(seen: Any, expected: Any) -> bool:
    """Only pairs whose last op has another quantized input edge are missing."""
    return missing_only(seen, expected, by_hand("other_input_quantized"))


def _public_first_argument(seen: Any, expected: Any) -> bool:
    """Only pairs whose first op is the last op's second argument are extra (its first argument's edge was read)."""
    return extra_only(seen, expected, by_hand("second_argument"))


def _public_shared_unseen(seen: Any, expected: Any) -> bool:
    """Every pair whose labels use a SharedQuantizationSpec is missing, and only those."""
    return missing_only(seen, expected, by_hand("shared"), every=by_hand("shared"))


def _public_none_edge(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, by_hand("none_edge"))


def _public_two_users(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, by_hand("two_users"))


def _public_edge_quantized(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, by_hand("edge_quantized"))


def _public_inputs_unquantized(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, by_hand("inputs_unquantized"))


def _public_ignores_last(seen: Any, expected: Any) -> bool:
    return crashed_on_unlabelled(seen, "by_hand") or extra_only(seen, expected, by_hand("last_unlabelled"))


def _twin_adds() -> dict[str, Any]:
    """a = sin(x), b = cos(x), add(a, b), mul(b, 2): labelled with keys from a copy of the graph."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation

    def build() -> dict[str, Any]:
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        a = graph.call_function(torch.sin, (x,))
        b = graph.call_function(torch.cos, (x,))
        add = graph.call_function(torch.add, (a, b))
        mul = graph.call_function(torch.mul, (b, 2.0))
        graph.output((add, mul))
        return {node.name: node for node in graph.nodes}

    original, copied = build(), build()
    copied["add"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={original["sin"]: _spec(), original["cos"]: None}, output_qspec=_spec()
    )
    copied["mul"].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_spec())
    return copied


def _check_middle_quantized(middle_quantized: Any) -> list[str]:
    nodes = _twin_adds()
    problems = []
    for first, last, want, why in (
        ("sin", "add", True, "add 的標籤裡 sin 那條邊有規格"),
        ("cos", "add", False, "add 的標籤裡 cos 那條邊的規格是 None"),
        ("cos", "mul", False, "mul 的標籤沒有任何邊"),
    ):
        got = middle_quantized(nodes[first], nodes[last])
        if got is not want:
            problems.append(f"({first}, {last})：{why}，應該回傳 {want}，你的是 {got!r}")
    return problems


MIDDLE_QUANTIZED = Practice(
    "middle_quantized",
    "寫 middle_quantized(first, last)：last 的標籤有沒有量化 first → last 這條邊？回傳 True 或 False。"
    "檢查用的圖和 fused_patterns 的一樣是複製出來的：input_qspec_map 的 key 是原圖的 node，不是你拿到的 first；"
    "add(sin, cos) 的兩條邊一條有規格、一條是 None。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef middle_quantized(first, last):\n    raise NotImplementedError()\n",
    _check_middle_quantized,
    "在 last 的 input_qspec_map 裡找名字等於 first.name 的那一條（用名字比，物件比不到），"
    "再看它的規格是不是 None；不要只看 args[0]、第一條邊，或別條邊有沒有規格。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def middle_quantized(first, last):\n"
    "    annotation = last.meta.get(ANNOTATION_KEY)\n"
    "    if annotation is None:\n"
    "        return False\n"
    "    return any(p.name == first.name and s is not None for p, s in annotation.input_qspec_map.items())\n",
    "邊在 input_qspec_map 裡、規格卻是 None，就是「不量化」：中間沒有 observer，仍然可以是融合。",
)


def _starts_graph() -> dict[str, Any]:
    """x, w (get_attr) and eight ops that read x, each labelled its own way (sin not at all)."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, SharedQuantizationSpec

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    w = graph.get_attr("w")
    made = [graph.call_function(op, (x,)) for op in (torch.sin, torch.cos, torch.tanh, torch.exp, torch.neg, torch.abs)]
    conv = graph.call_function(torch.conv2d, (x, w))
    relu = graph.call_function(torch.relu, (x,))
    graph.output((*made, conv, relu))
    sin, cos, tanh, exp, neg, absolute = made
    spec = _spec()

    def label(node: Any, inputs: dict[Any, Any], output: Any = None, claimed: bool = True) -> None:
        node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=inputs, output_qspec=output, _annotated=claimed
        )

    label(cos, {x: None})
    label(tanh, {x: spec})
    label(exp, {x: SharedQuantizationSpec(x)})
    label(neg, {x: spec}, SharedQuantizationSpec((x, neg)))
    label(absolute, {x: spec}, claimed=False)
    label(conv, {x: spec, w: spec}, spec)
    label(relu, {x: spec}, spec)
    return {node.name: node for node in (sin, cos, tanh, exp, neg, absolute, conv, relu)}


def _check_starts_pattern(starts_pattern: Any) -> list[str]:
    why = {
        "sin": "沒有標籤",
        "cos": "有標籤，輸入邊的規格是 None",
        "tanh": "輸入邊有規格，沒有輸出標籤",
        "exp": "輸入邊是 SharedQuantizationSpec，沒有輸出標籤",
        "neg": "輸入邊有規格，輸出標籤是 SharedQuantizationSpec",
        "abs_1": "輸入邊有規格，沒有輸出標籤，_annotated=False",
        "conv2d": "輸入邊與輸出都有規格",
        "relu": "輸入邊與輸出都有規格",
    }
    nodes = _starts_graph()
    problems = []
    for name, node in nodes.items():
        want = name in ("tanh", "exp", "abs_1")
        got = starts_pattern(node)
        if got is not want:
            problems.append(f"{name}（{why[name]}）：應該回傳 {want}，你的是 {got!r}")
    return problems


STARTS_PATTERN = Practice(
    "starts_pattern",
    "寫 starts_pattern(node)：node 能不能當融合 pattern 的第一個 op？條件只讀它自己的標籤："
    "有標籤、output_qspec 是 None、至少一條輸入邊的規格不是 None。回傳 True 或 False（先不看 consumer）。"
    "檢查用的小圖有 8 個讀 x 的 op：沒有標籤的、輸入規格是 None 的、用 SharedQuantizationSpec 的、沒人認領的，和 conv、relu。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef starts_pattern(node):\n    raise NotImplementedError()\n",
    _check_starts_pattern,
    "三件事依序問：node.meta.get(ANNOTATION_KEY) 是不是 None（沒有標籤就不是）；output_qspec 是不是 None"
    "（任何規格都算有，SharedQuantizationSpec 也是）；input_qspec_map.values() 裡有沒有不是 None 的。op 的種類與 _annotated 都不用看。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def starts_pattern(node):\n"
    "    annotation = node.meta.get(ANNOTATION_KEY)\n"
    "    if annotation is None or annotation.output_qspec is not None:\n"
    "        return False\n"
    "    return any(spec is not None for spec in annotation.input_qspec_map.values())\n",
    "沒有標籤的 sin 輸出也沒被量化，但那是「沒人量化」，不是「融進下一個 op」：輸入有量化，輸出才是被融合掉的。",
)


def _pair_graph() -> dict[str, Any]:
    """Six first ops that read x, each with quantized input and no output label, and their consumers labelled
    every way: after another node, none, two, a label without output, a shared output, a relu."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, SharedQuantizationSpec

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    sin = graph.call_function(torch.sin, (x,))
    cos = graph.call_function(torch.cos, (x,))
    tanh = graph.call_function(torch.tanh, (sin,))
    exp = graph.call_function(torch.exp, (cos,))
    mul = graph.call_function(torch.mul, (x, 2.0))
    relu = graph.call_function(torch.relu, (mul,))
    neg = graph.call_function(torch.neg, (mul,))
    atan = graph.call_function(torch.atan, (x,))
    relu_1 = graph.call_function(torch.relu, (atan,))
    tan = graph.call_function(torch.tan, (x,))
    hardtanh = graph.call_function(torch.nn.functional.hardtanh, (tan,))
    absolute = graph.call_function(torch.abs, (x,))
    relu_2 = graph.call_function(torch.relu, (absolute,))
    graph.output((tanh, exp, relu, neg, relu_1, hardtanh, relu_2))
    spec = _spec()
    for first in (sin, cos, mul, atan, tan, absolute):
        first.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: spec})
    for last in (tanh, relu, neg, relu_2):
        last.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec)
    relu_1.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={atan: None})
    hardtanh.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=SharedQuantizationSpec((tan, hardtanh)))
    return {node.name: node for node in graph.nodes}


def _check_fused_pair(fused_pair: Any) -> list[str]:
    nodes = _pair_graph()
    problems = []
    for first, want, why in (
        ("sin", ("sin", "tanh"), "唯一的 consumer 是 tanh（圖上隔著 cos），它有輸出標籤"),
        ("cos", None, "唯一的 consumer exp 沒有標籤"),
        ("mul", None, "有兩個 consumer（relu、neg）"),
        ("atan", None, "唯一的 consumer relu_1 有標籤，但沒有輸出標籤"),
        ("tan", ("tan", "hardtanh"), "唯一的 consumer hardtanh 的輸出標籤是 SharedQuantizationSpec"),
        ("abs_1", ("abs_1", "relu_2"), "唯一的 consumer relu_2 有輸出標籤"),
    ):
        got = fused_pair(nodes[first])
        shown = tuple(got) if isinstance(got, list) else got
        if shown != want:
            problems.append(f"{first}（{why}）：應該回傳 {want!r}，你的是 {got!r}")
    return problems


FUSED_PAIR = Practice(
    "fused_pair",
    "寫 fused_pair(first)：first 已經是能當 pattern 開頭的 op（輸入有量化、沒有輸出標籤）。"
    "它只有一個 consumer、而且那個 consumer 有輸出標籤時，回傳 (first 的名字, consumer 的名字)；否則回傳 None。"
    "檢查用的小圖裡，中間的邊都沒有量化（先不用查）；consumer 有 tanh、hardtanh、relu，也有沒標籤的、兩個 consumer 的。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef fused_pair(first):\n    raise NotImplementedError()\n",
    _check_fused_pair,
    "consumer 從 first.users 拿，不是 first.next；len(first.users) 不是 1 就回傳 None。"
    "再用 meta.get 拿 consumer 的標籤：是 None、或 output_qspec 是 None，都不是融合；什麼規格、什麼 op 都算。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def fused_pair(first):\n"
    "    if len(first.users) != 1:\n"
    "        return None\n"
    "    last = next(iter(first.users))\n"
    "    annotation = last.meta.get(ANNOTATION_KEY)\n"
    "    if annotation is None or annotation.output_qspec is None:\n"
    "        return None\n"
    "    return (first.name, last.name)\n",
    "pair 的順序是 (第一個 op, 最後一個 op)：最後一個 op 是 first 唯一的 consumer，它的輸出標籤就是整個 pattern 的輸出。",
)


FUSED_MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "找 pattern 的函式把標籤改掉了",
        "fused_patterns 只該讀標籤、回答哪些 op 融合在一起，圖和標籤都是呼叫的人的。你的程式在找的時候拿掉或改了標籤"
        "（例如把用過的標籤 pop 掉），呼叫的人之後再 prepare_pt2e，observer 就插錯了。只讀 node.meta，不要改它。",
        ROLES,
        public=_public_changed,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "pairs_reversed",
        "pair 寫成了 (最後一個 op, 第一個 op)",
        "練習要的是 (第一個 op, 最後一個 op)：先是輸出沒有標籤的那個 op，再是它唯一的 consumer。"
        "你把兩個名字對調了，每個 pair 都反過來；照 (node.name, last.name) 的順序寫。",
        FUSED_RULES,
        public=pairs_reversed,
        practice=FUSED_PAIR,
    ),
    Misconception(
        "last_any_input",
        "最後一個 op 有任何量化的輸入就不算融合",
        "第 3 點只問「第一個 op → 最後一個 op」這一條邊有沒有量化。最後一個 op 可以有好幾個輸入（例如 add），"
        "別的輸入邊有標籤，不影響中間這條邊有沒有量化點。只看 input_qspec_map 裡名字是第一個 op 的那一條邊。",
        FUSED_RULES,
        public=_public_other_input,
        practice=MIDDLE_QUANTIZED,
    ),
    Misconception(
        "wrong_edge",
        "查的不是第一個 op 過來的那條邊",
        "最後一個 op 有兩個輸入時，第一個 op 不一定是它的第一個引數，也不一定是 input_qspec_map 裡的第一條。"
        "你只看了 args[0] 或第一條邊，中間真正的那條邊有量化也沒發現。要在 input_qspec_map 裡找名字等於第一個 op 的那一條，看它的規格是不是 None。",
        FUSED_RULES,
        public=_public_first_argument,
        practice=MIDDLE_QUANTIZED,
    ),
    Misconception(
        "fused_plain_specs",
        "只把 QuantizationSpec 當成有標籤",
        "SharedQuantizationSpec 也是規格：輸出標籤是共用規格的 op，輸出一樣會被量化，只是和別的位置共用 observer。"
        "你只認 QuantizationSpec，共用輸出的最後一個 op 被當成沒有輸出標籤，共用輸出的 op 反而被當成 pattern 的開頭。"
        "有沒有標籤，看規格是不是 None，不是看它的類別。",
        FUSED_RULES,
        public=_public_shared_unseen,
        practice=STARTS_PATTERN,
    ),
    Misconception(
        "by_op_kind",
        "看 op 的種類，不是看標籤",
        "fusion 在 PT2E 裡不是 op 的種類決定的，而是 Quantizer 決定不在中間貼標籤：同樣是 conv 接 relu，"
        "標籤在中間量化、或 relu 沒有輸出標籤，就不是融合；conv 接 sigmoid，標籤說是，就是。"
        "每個條件都要從 node.meta 的標籤讀出來，不要比對 op 的名字或 target。",
        CONV_RELU,
        public=_public_op_kind,
        practice=STARTS_PATTERN,
    ),
    Misconception(
        "next_node",
        "用圖上的下一個 node 當最後一個 op",
        "node.next 只是圖上排在後面的 node，不一定讀這個 op 的輸出；pattern 的兩個 op 之間可以隔著別的 node。"
        "最後一個 op 要從 node.users 拿：只有一個 consumer 時，它就是那一個。",
        USERS,
        public=_public_apart,
        practice=FUSED_PAIR,
    ),
    Misconception(
        "relu_last_only",
        "以為最後一個 op 一定是 relu",
        "conv → relu、add → relu 只是最常見的融合；標籤才是定義：第一個 op 沒有輸出標籤、唯一的 consumer 有輸出標籤、"
        "中間的邊不量化，最後一個 op 是 sigmoid、hardtanh 也一樣是融合。不要檢查最後一個 op 的種類。",
        FUSED_RULES,
        public=_public_relu_only,
        practice=FUSED_PAIR,
    ),
    Misconception(
        "claimed_only",
        "只看 _annotated 為 True 的標籤",
        "_annotated 是 Quantizer 之間分工用的記號，prepare_pt2e 插 observer 時不看它：沒人認領的標籤一樣決定哪裡有 observer、"
        "哪裡沒有。你跳過了這些標籤，它們構成的融合就沒列出來；每張標籤都要讀。",
        ROLES,
        public=_public_unclaimed_pairs,
        practice=NODE_POSITIONS,
    ),
    Misconception(
        "edge_present",
        "中間的邊出現在 input_qspec_map 就當成有量化",
        "input_qspec_map 裡有這條邊、規格卻是 None，意思是「這條邊不量化」，中間沒有 observer，仍然是融合。"
        "判斷中間有沒有量化點，要看那條邊的規格是不是 None，不是看 key 在不在。",
        CONV_RELU,
        public=_public_none_edge,
        practice=MIDDLE_QUANTIZED,
    ),
    Misconception(
        "ignores_last_label",
        "沒檢查最後一個 op 有沒有輸出標籤",
        "融合的意思是輸出標籤搬到 pattern 的最後一個 op：最後一個 op 沒有標籤、或沒有輸出標籤時，它的輸出根本沒被量化，"
        "不算融合（沒有標籤的 node，node.meta.get 拿到的是 None，直接讀它的欄位會出錯）。先確認最後一個 op 有標籤、output_qspec 不是 None。",
        FUSED_RULES,
        public=_public_ignores_last,
        practice=FUSED_PAIR,
    ),
    Misconception(
        "unlabelled_first_op",
        "沒有標籤的 op 也當成 pattern 的開頭",
        "第一個 op 的輸出沒有標籤，可能只是因為整個 op 都沒人標（例如 sigmoid、slice 這類 Quantizer 不管的 op），"
        "那不是融合。第一個 op 要有標籤、至少一條輸入邊的規格不是 None，輸出才是「被融合掉」而不是「沒人量化」。",
        FUSED_RULES,
        public=_public_unlabelled_first,
        practice=STARTS_PATTERN,
    ),
    Misconception(
        "any_user",
        "沒檢查第一個 op 只有一個 consumer",
        "第一個 op 有兩個 consumer 時，它的輸出沒有標籤，另一個 consumer 讀到的就是沒量化的值，後端不能把它融進其中一個 op。"
        "要先確認 len(node.users) == 1，唯一的那個 consumer 才是最後一個 op。",
        EDGE_AND_OUTPUT,
        public=_public_two_users,
        practice=FUSED_PAIR,
    ),
    Misconception(
        "identity_edge",
        "用 node 物件查中間的邊，複製的圖上永遠查不到",
        "這些圖是在 annotate 結束時複製的：input_qspec_map 的 key 是原圖的 node 物件，用複製圖上的 node 去查（in、get）永遠查不到，"
        "中間明明有量化的邊也被當成沒有。和練習 1 一樣，要用名字比：p.name == node.name。",
        POSITIONS_RULES,
        public=_public_edge_quantized,
        practice=MIDDLE_QUANTIZED,
    ),
    Misconception(
        "first_inputs_unquantized",
        "第一個 op 有標籤就好，沒看輸入有沒有量化",
        "第一個 op 的輸入邊規格全是 None 時，它自己就沒有被量化，輸出沒有標籤也不是「融進下一個 op」。"
        "除了有標籤，還要至少一條輸入邊的規格不是 None。",
        FUSED_RULES,
        public=_public_inputs_unquantized,
        practice=STARTS_PATTERN,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "label_positions",
        "label_positions：列出會被量化的邊與輸出",
        ("label_positions",),
        {"residual": positions_residual, "cat_pool": positions_cat_pool, "by_hand": positions_by_hand},
        misconceptions=POSITIONS_MISCONCEPTIONS,
    ),
    Exercise(
        "fused_patterns",
        "fused_patterns：從標籤找出融合的 pattern",
        ("fused_patterns",),
        {"small_cnn": fused_small_cnn, "mlp_cat_pool": fused_mlp_cat, "by_hand": fused_by_hand},
        misconceptions=FUSED_MISCONCEPTIONS,
    ),
)
