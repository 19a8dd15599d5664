"""Public cases of M08-1 兩個 XNNPACKQuantizer (quantizer_report) on the chapter's own models.

Also what the chapter and the hidden cases share: reading what ``quantizer_report`` returned
(names only, compared sorted), the two Quantizers by name, ``KeepFp32`` (empty claimed labels
that keep ops out of a Quantizer's reach). ExecuTorch is imported only inside the functions
that need it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.explain import failure_head
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "quantizer_report：沒標到的 op 與共用的 observer 實例"

QUANTIZERS = ("torchao", "executorch")
"""torchao's testing XNNPACKQuantizer and ExecuTorch's, both per-channel by default."""


def make_quantizer(which: str, is_per_channel: bool = True) -> Any:
    """A fresh XNNPACKQuantizer: ``"torchao"`` (its testing copy) or ``"executorch"``, with the symmetric config.

    ExecuTorch's without its QAT-only conv → BN patterns (``qat_patterns=False``): by the time
    ``prepare_pt2e`` annotates, BN is folded into its conv and they match nothing, so the cases'
    copy gets the same labels in a fraction of the time.
    """
    if which == "torchao":
        from common.pt2e import get_xnnpack_quantizer

        return get_xnnpack_quantizer(is_per_channel=is_per_channel)[0]
    from common.backends import executorch_xnnpack_quantizer

    return executorch_xnnpack_quantizer(is_per_channel=is_per_channel, qat_patterns=False)


class KeepFp32(Quantizer):
    """Runs ``inner``, after putting an empty claimed label (``_annotated=True``, no spec) on the ``keep`` nodes.

    Both XNNPACKQuantizers skip nodes that are already claimed, so those ops stay in fp32.
    """

    def __init__(self, inner: Quantizer, keep: Iterable[str]) -> None:
        self.inner, self.keep = inner, set(keep)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.name in self.keep:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
        self.inner.annotate(model)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


def _names(value: Any, what: str) -> list[str]:
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 node 名稱（str）的 list，看到 {type(value).__name__}")
    if len(value) > 2000:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    for item in value:
        if type(item) is not str:
            raise EvidenceError(f"{what}的每一項應該是 node 的名稱（str），看到 {type(item).__name__}")
    return sorted(safe_text(item, 80) for item in value)


def report(ns: Namespace, model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any) -> dict[str, Any]:
    """``quantizer_report(model, inputs, quantizer)`` as sorted names: the order does not matter."""
    got = ns["quantizer_report"](model.eval(), inputs, quantizer)
    if type(got) is not dict or set(got) != {"unannotated", "shared"}:
        raise EvidenceError('quantizer_report 應該回傳 {"unannotated": [...], "shared": [[...], ...]} 這樣的 dict')
    groups = got["shared"]
    if type(groups) not in (list, tuple):
        raise EvidenceError(f"shared 應該是 list（每個共用的 observer 實例一組），看到 {type(groups).__name__}")
    if len(groups) > 500:
        raise EvidenceError(f"shared 太長（{len(groups)} 組）")
    return {
        "unannotated": _names(got["unannotated"], "unannotated "),
        "shared": sorted(_names(group, "shared 的每一組") for group in groups),
    }


def both(ns: Namespace, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """The report of each XNNPACKQuantizer (per-channel) on ``model``."""
    return {which: report(ns, model, inputs, make_quantizer(which)) for which in QUANTIZERS}


# --- public cases -------------------------------------------------------------------------------


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool (x → two convs → cat → max_pool2d) with each XNNPACKQuantizer."""
    from common.models import get_model

    torch.manual_seed(seed)
    return both(ns, get_model("cat_pool"), seeded_inputs(seed, (2, 3, 16, 16)))


def cat_pool_keep_cat(ns: Namespace, seed: int) -> Any:
    """cat_pool with ExecuTorch's Quantizer, cat kept in fp32 by an empty claimed label."""
    from common.models import get_model

    torch.manual_seed(seed)
    quantizer = KeepFp32(make_quantizer("executorch"), ["cat"])
    return report(ns, get_model("cat_pool"), seeded_inputs(seed, (2, 3, 16, 16)), quantizer)


class _HandLabelled(nn.Module):
    """abs → conv → BN → relu → split (two getitems) → mul → flatten → linear → add of the linear with itself."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(2 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(torch.abs(x))))
        a, b = torch.split(y, 2, dim=1)
        z = self.fc(torch.flatten(a * b, 1))
        return z + z


class HandQuantizer(Quantizer):
    """Labels written by hand, by op (``node.target``), one kind of label each: conv2d its input edges only (the
    edge from abs and the weight), relu its output only, mul an input edge and its output without
    ``_annotated``, linear its weight only, add an edge whose spec is None (claimed)."""

    def annotate(self, model: GraphModule) -> GraphModule:
        from common.qspecs import act_spec, weight_spec

        aten = torch.ops.aten
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            if node.target == aten.conv2d.default:
                specs = {node.args[0]: act_spec(), node.args[1]: weight_spec()}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=specs, _annotated=True)
            elif node.target == aten.relu.default:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=act_spec(), _annotated=True)
            elif node.target == aten.mul.Tensor:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                    input_qspec_map={node.args[0]: act_spec()}, output_qspec=act_spec()
                )
            elif node.target == aten.linear.default:
                specs = {node.args[1]: weight_spec()}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=specs, _annotated=True)
            elif node.target == aten.add.Tensor:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                    input_qspec_map={node.args[0]: None}, _annotated=True
                )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def hand_labels(ns: Namespace, seed: int) -> Any:
    """A small model of this case file labelled by ``HandQuantizer`` (one kind of label per op, BN folded into
    the conv by prepare_pt2e)."""
    torch.manual_seed(seed)
    return report(ns, _HandLabelled(), seeded_inputs(seed, (2, 3, 8, 8)), HandQuantizer())


# --- where the chapter teaches it ----------------------------------------------------------------

WHICH_OPS = Section("A. 標了哪些 op")
EMPTY_LABEL = Section("空標籤：讓一個 op 留在 fp32")
INSTANCES = Section("B. 共用的 observer 實例")
RULES = Section("練習：quantizer_report（8 分）")
NODE_KINDS = Section("A. 四種 node", notebook="M01-1")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
REAL_LABELS = Section("拿到 Quantizer 真正標過的圖", notebook="M03-2")
FUSION = Section("A. conv → relu：conv 和 relu 之間沒有量化點", notebook="M03-2")


# --- reading the evidence (the public detectors here; the hidden ones in autograder/checks/test_m08_1.py) ----


def reports(seen: Any, expected: Any) -> list[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]]:
    """``(place, got, want)`` for every report (``{"unannotated", "shared"}``) at the same place in both evidences."""
    return [
        (place, got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "unannotated")
        if all(isinstance(report.get(part), list) for report in (got, want) for part in ("unannotated", "shared"))
    ]


def unannotated_diff(got: dict[str, Any], want: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The ops the student lists that the key does not (extra), and those the key lists that the student misses."""
    mine, key = set(map(str, got["unannotated"])), set(map(str, want["unannotated"]))
    return mine - key, key - mine


def groups(report: dict[str, Any]) -> list[frozenset[str]]:
    """A report's sharing groups, each as a set of names."""
    return [frozenset(map(str, group)) for group in report["shared"] if isinstance(group, list | tuple)]


def not_an_op(name: str) -> bool:
    """A name that is not a ``call_function`` node's: the model's input, a weight or bias, an observer, the output."""
    return (
        name in ("x", "output", "_guards_fn")
        or name.startswith(("activation_post_process", "_tensor_constant", "_frozen_param"))
        or name.endswith(("_weight", "_bias"))
    )


def _lists_non_ops(seen: Any, expected: Any) -> bool:
    return any(any(map(not_an_op, unannotated_diff(got, want)[0])) for _, got, want in reports(seen, expected))


def _misses_empty_label(seen: Any, expected: Any) -> bool:
    """The public case keeps cat in fp32 with an empty claimed label: the key lists cat, the student does not."""
    got, want = diagnosis.value(seen, "cat_pool_keep_cat"), diagnosis.value(expected, "cat_pool_keep_cat")
    return isinstance(got, dict) and isinstance(want, dict) and "cat" in unannotated_diff(got, want)[1]


def consumer_names(seen: Any, expected: Any) -> bool:
    """A group names the graph's output node: only a consumer (a user of an observer) can be called that."""
    return any("output" in group for _, got, _ in reports(seen, expected) for group in groups(got))


def lists_every_instance(seen: Any, expected: Any) -> bool:
    """Every group of the key is there, and so are groups of one name: instances that no two observer nodes call."""
    found = False
    for _, got, want in reports(seen, expected):
        mine, key = groups(got), groups(want)
        extra = [group for group in mine if group not in key]
        if not set(key) <= set(mine) or any(len(group) != 1 for group in extra):
            return False
        found = found or bool(extra)
    return found


def single_names(seen: Any, expected: Any) -> bool:
    """A group of one name (one observer node whose output several ops read), while the key's groups are missing."""
    return any(
        any(len(group) == 1 for group in groups(got)) and not set(groups(want)) <= set(groups(got))
        for _, got, want in reports(seen, expected)
    )


def merges_groups(seen: Any, expected: Any) -> bool:
    """A group holds a weight with other names (weights' observers are never shared), or the names of two of
    the key's groups."""
    for _, got, want in reports(seen, expected):
        key = groups(want)
        for group in groups(got):
            if len(group) >= 2 and any(name.endswith("_weight") for name in group):
                return True
            if sum(1 for shared in key if shared <= group) >= 2:
                return True
    return False


def pieces_of_groups(seen: Any, expected: Any) -> bool:
    """Every group is part of one of the key's groups, and some key group is only there in pieces."""
    cut = False
    for _, got, want in reports(seen, expected):
        mine, key = groups(got), groups(want)
        if any(len(group) < 2 or not any(group <= shared for shared in key) for group in mine):
            return False
        cut = cut or any(shared not in mine and any(group < shared for group in mine) for shared in key)
    return cut


def no_groups(seen: Any, expected: Any) -> bool:
    """No group anywhere, while the key has some."""
    places = reports(seen, expected)
    return bool(places) and all(not groups(got) for _, got, _ in places) and any(groups(want) for _, _, want in places)


def _hand(seen: Any, expected: Any) -> tuple[set[str], set[str]] | None:
    """``(extra, missing)`` of the hand-labelled model's unannotated ops, names without their ``_N`` suffix."""
    got, want = diagnosis.value(seen, "hand_labels"), diagnosis.value(expected, "hand_labels")
    if not (isinstance(got, dict) and isinstance(want, dict) and isinstance(got.get("unannotated"), list)):
        return None
    if not isinstance(want.get("unannotated"), list):
        return None
    extra, missing = unannotated_diff(got, want)
    return {_op(name) for name in extra}, {_op(name) for name in missing}


def _op(name: str) -> str:
    head, _, tail = name.rpartition("_")
    return head if head and tail.isdigit() else name


def _hand_test(
    extra: frozenset[str] = frozenset(),
    missing: frozenset[str] = frozenset(),
    not_extra: frozenset[str] = frozenset(),
    not_missing: frozenset[str] = frozenset(),
) -> Any:
    """A detector: the hand-labelled model lists these ops extra (missing) and not those."""

    def detector(seen: Any, expected: Any) -> bool:
        found = _hand(seen, expected)
        return (
            found is not None
            and extra <= found[0]
            and missing <= found[1]
            and not not_extra & found[0]
            and not not_missing & found[1]
        )

    return detector


def _unfolded_bn(seen: Any, expected: Any) -> bool:
    """A batch_norm listed: BN is folded into the conv on the graph prepare_pt2e returns."""
    found = _hand(seen, expected)
    return found is not None and any("batch_norm" in name for name in found[0])


_lists_getitem = _hand_test(extra=frozenset({"getitem"}))
_unclaimed_spec_unlabelled = _hand_test(extra=frozenset({"mul"}))
_none_edge_labelled = _hand_test(missing=frozenset({"add"}), not_extra=frozenset({"mul"}))
_weight_only_unlabelled = _hand_test(extra=frozenset({"linear"}), not_extra=frozenset({"conv2d"}))
_observed_labelled = _hand_test(extra=frozenset({"conv2d"}), missing=frozenset({"abs"}))
_input_only_unlabelled = _hand_test(extra=frozenset({"conv2d", "linear"}), not_missing=frozenset({"abs"}))
_output_only_unlabelled = _hand_test(extra=frozenset({"relu"}))
_edge_labels_producer = _hand_test(missing=frozenset({"abs"}), not_extra=frozenset({"conv2d"}))


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------


def _check_who_shares(who_shares: Any) -> list[str]:
    from common.pt2e import HistogramObserver, MinMaxObserver

    one, two, three, four = MinMaxObserver(), MinMaxObserver(), MinMaxObserver(), HistogramObserver()
    problems = []
    for watched in (
        {"conv": one, "cat": two, "max_pool2d": two, "relu": three},
        {"x": one, "add": one, "add_1": one, "linear": four},
        {"conv": one, "conv_1": two},
    ):
        by_object: dict[int, set[str]] = {}
        for name, observer in watched.items():
            by_object.setdefault(id(observer), set()).add(name)
        want = sorted(sorted(group) for group in by_object.values() if len(group) > 1)
        got = who_shares(dict(watched))
        if not isinstance(got, list | tuple) or not all(isinstance(g, list | tuple | set) for g in got):
            problems.append(f"應該回傳名稱的組（串列的串列），你的是 {got!r}")
            continue
        mine = sorted(sorted(map(str, group)) for group in got)
        if mine != want:
            shown = "、".join(
                f"{name}→{type(o).__name__}#{[one, two, three, four].index(o) + 1}" for name, o in watched.items()
            )
            problems.append(f"{shown}：應該回傳 {want}，你的是 {mine}")
    return problems


WHO_SHARES = Practice(
    "who_shares",
    "寫 who_shares(watched)：watched 是一個 dict，key 是被觀察的 node 名稱，值是觀察它的 observer 物件"
    "（prepare 之後，一個 observer 實例可能觀察好幾個 node）。回傳共用的組：同一個 observer 物件觀察的名稱放成一組（一個串列），"
    "只列有兩個以上名稱的組，組的順序不拘。檢查裡有好幾個同一類別、卻是不同物件的 MinMaxObserver。",
    "def who_shares(watched):\n    raise NotImplementedError()\n",
    _check_who_shares,
    "用物件本身分組：id(observer) 當 dict 的 key（不是 type(observer)，也不是名字），把名稱一個個放進它的串列；"
    "最後只留下 len 至少 2 的串列。",
    "def who_shares(watched):\n"
    "    groups = {}\n"
    "    for name, observer in watched.items():\n"
    "        groups.setdefault(id(observer), []).append(name)\n"
    "    return [names for names in groups.values() if len(names) >= 2]\n",
    "只被觀察一次的實例不和誰共用；兩個 MinMaxObserver 是同一個類別，卻各有各的統計。",
)


def _op_kinds_graph() -> torch.fx.Graph:
    """x (placeholder), w (get_attr), an observer (call_module), split → two getitems renamed left / right, an add, the
    output."""
    import operator

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    w = graph.get_attr("w")
    observed = graph.call_module("activation_post_process_0", (x,))
    split = graph.call_function(torch.ops.aten.split.Tensor, (observed, 2, 1))
    left = graph.call_function(operator.getitem, (split, 0))
    right = graph.call_function(operator.getitem, (split, 1))
    left._rename("left")
    right._rename("right")
    total = graph.call_function(torch.ops.aten.add.Tensor, (left, right))
    graph.output(graph.call_function(torch.ops.aten.mul.Tensor, (total, w)))
    return graph


def _check_reported_op(reported_op: Any) -> list[str]:
    import operator

    problems = []
    for node in _op_kinds_graph().nodes:
        want = node.op == "call_function" and node.target is not operator.getitem
        got = reported_op(node)
        if bool(got) is not want:
            what = getattr(node.target, "__name__", node.target) if node.op == "call_function" else node.target
            problems.append(f"{node.name}（op={node.op}，target={what}）：應該回傳 {want}，你的是 {got!r}")
    return problems


REPORTED_OP = Practice(
    "reported_op",
    "寫 reported_op(node)：這個 node 是不是「沒標到的 op」清單該看的 op？只有呼叫一個運算的 node 才算；"
    "從 split 的結果取出一份的 getitem 只是取值，不算。"
    "檢查用的小圖有模型的輸入、weight 常數、一個 observer、split 之後的兩個 getitem（被改名成 left、right）、add、mul 和 output。",
    "import operator\n\n\ndef reported_op(node):\n    raise NotImplementedError()\n",
    _check_reported_op,
    "node.op 分出四種 node：placeholder（輸入）、get_attr（常數）、call_module（observer）、call_function（op）。"
    "只看 call_function；其中 target 是 operator.getitem（Python 的函式，用 is 比）的不算。",
    "import operator\n\n\n"
    "def reported_op(node):\n"
    '    if node.op != "call_function":\n'
    "        return False\n"
    "    return node.target is not operator.getitem\n",
    "名字不可靠（getitem 可以被改名），target 才說明它做什麼。",
)


def _labelled_graph() -> dict[Node, tuple[str, bool]]:
    """The ops of an only-annotated graph (no observers yet), one label of each shape: op → (its label in words,
    whether its own label holds a spec)."""
    from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec, SharedQuantizationSpec

    from common.qspecs import act_spec, weight_spec

    aten = torch.ops.aten
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    w = graph.get_attr("w")
    a = graph.call_function(aten.neg.default, (x,))
    c = graph.call_function(aten.conv2d.default, (a, w))
    r = graph.call_function(aten.relu.default, (c,))
    m = graph.call_function(aten.mul.Tensor, (r, r))
    k = graph.call_function(aten.cat.default, ([m, r],))
    s = graph.call_function(aten.add.Tensor, (k, k))
    g = graph.call_function(aten.sigmoid.default, (s,))
    v = graph.call_function(aten.view.default, (g, [-1]))
    li = graph.call_function(aten.linear.default, (v, w))
    ge = graph.call_function(aten.gelu.default, (li,))
    t = graph.call_function(aten.tanh.default, (ge,))
    graph.output(t)
    names = ("neg", "conv2d", "relu", "mul", "cat", "add", "sigmoid", "view", "linear", "gelu", "tanh")
    for node, name in zip((a, c, r, m, k, s, g, v, li, ge, t), names, strict=True):
        node._rename(name)
    fixed = FixedQParamsQuantizationSpec(
        dtype=torch.int8, scale=1.0 / 256, zero_point=-128, quant_min=-128, quant_max=127
    )
    labels: list[tuple[Node, str, Any, bool]] = [
        (a, "沒有標籤（conv2d 的輸入邊標籤以它為 key）", ..., False),
        (c, "只有輸入邊的規格", QuantizationAnnotation({a: act_spec(), w: weight_spec()}, None, _annotated=True), True),
        (r, "只有 output_qspec", QuantizationAnnotation(output_qspec=act_spec(), _annotated=True), True),
        (m, "有規格、_annotated 沒設", QuantizationAnnotation({r: act_spec()}, act_spec()), True),
        (k, "空標籤：_annotated=True，沒有規格", QuantizationAnnotation(_annotated=True), False),
        (s, f"input_qspec_map 是 {{{k.name}: None}}", QuantizationAnnotation({k: None}, None, _annotated=True), False),
        (g, "輸出是 FixedQParamsQuantizationSpec", QuantizationAnnotation(output_qspec=fixed, _annotated=True), True),
        (v, "輸出是 SharedQuantizationSpec", QuantizationAnnotation(output_qspec=SharedQuantizationSpec(g)), True),
        (li, "只有 weight 那條邊的規格", QuantizationAnnotation({w: weight_spec()}, None, _annotated=True), True),
        (ge, "ANNOTATION_KEY 底下是 None", None, False),
        (t, "沒有標籤", ..., False),
    ]
    wanted = {}
    for node, words, label, want in labels:
        if label is not ...:
            node.meta[ANNOTATION_KEY] = label
        wanted[node] = (words, want)
    return wanted


def _check_has_spec(has_spec: Any) -> list[str]:
    problems = []
    for node, (words, want) in _labelled_graph().items():
        try:
            got = has_spec(node)
        except NotImplementedError:
            raise
        except Exception as error:  # said for the node it happened on (a label that is None, say)
            problems.append(
                f"{node.name}（{words}）：{failure_head(error, crashed='執行你的程式時出錯').removeprefix('✗ ')}"
            )
            continue
        if bool(got) is not want:
            problems.append(f"{node.name}（{words}）：應該回傳 {want}，你的是 {got!r}")
    return problems


HAS_SPEC = Practice(
    "has_spec",
    "寫 has_spec(node)：node 是一個 op，它自己的標籤（node.meta 裡 ANNOTATION_KEY 的值）裡，有沒有至少一份規格？有就回傳 True。"
    "檢查用一張只 annotate、還沒 prepare（一個 observer 都沒有）的小圖，標籤有各種樣子：只有輸入邊、只有輸出、空標籤、"
    "邊的規格是 None、固定 qparams、共用的規格、沒設 _annotated、只有 weight，和 ANNOTATION_KEY 底下是 None 的。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef has_spec(node):\n    raise NotImplementedError()\n",
    _check_has_spec,
    "先用 node.meta.get(ANNOTATION_KEY) 取出標籤，是 None 就是沒有。有標籤時，把 input_qspec_map 的每個值和 output_qspec 放在一起，"
    "只要有一個不是 None 就是 True；_annotated、map 有沒有 key、規格是哪一個類別都不用看。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def has_spec(node):\n"
    "    label = node.meta.get(ANNOTATION_KEY)\n"
    "    if label is None:\n"
    "        return False\n"
    "    return label.output_qspec is not None or any(s is not None for s in label.input_qspec_map.values())\n",
    "_annotated 只說「有人認領」；規格才決定 prepare 插不插 observer。別人邊標籤上的 key 是那條邊，不是你的標籤。",
)


MISCONCEPTIONS = (
    Misconception(
        "lists_every_node",
        "把不是 op 的 node 也列進來",
        "圖上除了 op（call_function），還有模型的輸入（placeholder）、weight 與 bias（get_attr）、"
        "observer（call_module）和 output，它們本來就沒有標籤。沒標到的 op 只從 node.op 是 call_function 的 node 裡找。",
        NODE_KINDS,
        public=_lists_non_ops,
        practice=REPORTED_OP,
    ),
    Misconception(
        "reads_unprepared_graph",
        "在 export 出來的圖上直接讀標籤",
        "你可能以為對 export 出來的圖呼叫 quantizer.annotate，和 prepare_pt2e 裡標的是同一張圖。"
        "其實 prepare_pt2e 在 annotate 之前先把 BN 折進 conv，你那張圖還留著 batch_norm，它就被當成沒標到的 op。"
        "標籤要從 prepare_pt2e 回傳的圖上讀。",
        REAL_LABELS,
        public=_unfolded_bn,
    ),
    Misconception(
        "getitem_counted",
        "把 getitem 也算成沒標到的 op",
        "operator.getitem 只是從 split 這類 op 的輸出裡取出一個 tensor，不是運算，本來就沒有標籤。"
        "它是 Python 的函式，不是 OpOverload，也不是字串：用 node.target is operator.getitem 認出來再跳過。",
        RULES,
        public=_lists_getitem,
        practice=REPORTED_OP,
    ),
    Misconception(
        "annotated_flag_means_labelled",
        "用 _annotated 判斷有沒有標到",
        "_annotated 只是「已經有 Quantizer 認領」的記號，和有沒有規格無關：空標籤的 _annotated 是 True，卻一份規格也沒有，"
        "那個 op 留在 fp32；反過來，沒設 _annotated 的標籤只要有規格，prepare_pt2e 照樣插 observer。"
        "有沒有標到只看規格：至少一份不是 None。",
        EMPTY_LABEL,
        public=_unclaimed_spec_unlabelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "label_object_means_labelled",
        "node 上有標籤物件就算標到",
        "你可能像 unannotated_ops 一樣，只看 node.meta 裡有沒有標籤物件。"
        "空標籤（_annotated=True、沒有任何規格）也是一個標籤物件，prepare_pt2e 卻不會替它插 observer，那個 op 留在 fp32。"
        "要看標籤裡的規格：input_qspec_map 的值與 output_qspec 至少一份不是 None，才算標到。",
        EMPTY_LABEL,
        public=_misses_empty_label,
        practice=HAS_SPEC,
    ),
    Misconception(
        "none_spec_counts",
        "input_qspec_map 列了邊就算標到",
        "input_qspec_map 裡的值是 None，意思是「這條邊不量化」，不是一份規格。"
        "一張只把每條邊標成 None 的標籤和空標籤一樣，那個 op 還是留在 fp32；要數的是不是 None 的規格。",
        EMPTY_LABEL,
        public=_none_edge_labelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "weight_spec_ignored",
        "weight 的規格不算標到",
        "你可能以為只有 activation 的邊（或輸出）有規格才算標到，跳過了 input_qspec_map 裡 weight 那條邊。"
        "只量化 weight 的標籤（weight-only）也是一份不是 None 的規格，prepare_pt2e 會替 weight 插 observer，那個 op 算標到。"
        "input_qspec_map 的每一個值都要看，不管那條邊來自哪種 node。",
        RULES,
        public=_weight_only_unlabelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "observed_means_labelled",
        "輸出後面有 observer 就算標到",
        "observer 插在哪裡，和哪個 op 有標籤不是同一件事：abs → conv 的 abs 沒有規格，它的輸出卻因為 conv 的輸入邊標籤而被觀察；"
        "conv → relu 的 conv 有輸入規格，輸出卻沒有 observer（融合）。要讀的是每個 op 自己的標籤裡的規格。",
        RULES,
        public=_observed_labelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "output_spec_only",
        "只看 output_qspec",
        "融合的 pattern 只在最後一個 op 貼輸出標籤：conv → relu 的 conv、add → relu 的 add 只有輸入邊的規格，沒有輸出規格，"
        "但它們確實被標到、也會被量化。input_qspec_map 的規格和 output_qspec 一樣算數。",
        FUSION,
        public=_input_only_unlabelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "input_specs_only",
        "只看 input_qspec_map",
        "融合的 pattern 把輸出標籤貼在最後一個 op：conv → relu 的 relu 沒有輸入邊的規格，只有 output_qspec，"
        "但它確實被標到了。output_qspec 也是一份規格，要和 input_qspec_map 的值一起看。",
        FUSION,
        public=_output_only_unlabelled,
        practice=HAS_SPEC,
    ),
    Misconception(
        "edge_label_counts_for_producer",
        "consumer 標了那條邊，就當 producer 有標到",
        "consumer 的 input_qspec_map 裡以某個 node 為 key 的規格，是貼在 consumer 身上的邊標籤，只說「這條邊要量化」。"
        "producer 自己沒有規格（像 abs → conv 的 abs），還是算沒標到；只看每個 node 自己的標籤。",
        EDGE_AND_OUTPUT,
        public=_edge_labels_producer,
        practice=HAS_SPEC,
    ),
    Misconception(
        "groups_consumers",
        "組裡放了讀 observer 的 op",
        "一組裡要放的是 observer 觀察的 node（observer node 的 args[0]），不是使用 observer 輸出的 node（node.users）。"
        "同一個實例的每個 observer node，各記下它的 args[0] 的名稱。",
        INSTANCES,
        public=consumer_names,
    ),
    Misconception(
        "lists_unshared_instances",
        "只有一個 observer node 的實例也列了",
        "shared 只列被兩個以上 observer node 呼叫的實例，那才是共用。"
        "只被一個 observer node 呼叫的實例不共用任何東西，分好組之後要把它們濾掉。",
        RULES,
        public=lists_every_instance,
        practice=WHO_SHARES,
    ),
    Misconception(
        "many_users_as_sharing",
        "把一個 observer 給好幾個 op 讀當成共用",
        "一個 observer node 的輸出給兩個 op 讀，只是一個值有兩個 consumer，量化的還是同一條值。"
        "共用是指同一個 observer 實例被兩個以上的 observer node 呼叫，好幾個不同的值進同一份統計、用同一組 scale。"
        "要數的是每個實例（id(module)）被幾個 observer node 呼叫。",
        INSTANCES,
        public=single_names,
    ),
    Misconception(
        "same_class_as_same_instance",
        "同一種 observer 當成同一個實例",
        "兩個 HistogramObserver 是同一個類別的兩個物件，各有各的統計、各算各的 scale；共用是同一個物件。"
        "分組要用物件本身（id(module)），不是 type(module) 或它的設定。",
        INSTANCES,
        public=merges_groups,
        practice=WHO_SHARES,
    ),
    Misconception(
        "shared_spec_as_group",
        "從 SharedQuantizationSpec 讀共用，沒有串起來",
        "共用可以一個接一個串起來：max_pool2d 共用 cat 的輸出，cat 又共用它的第一條輸入邊，最後全部是同一個實例。"
        "從標籤一張一張讀，只會得到一段一段的組。prepare_pt2e 已經把它們合成一個 observer 實例，從圖上的 observer 分組就好。",
        INSTANCES,
        public=pieces_of_groups,
    ),
    Misconception(
        "instance_by_name",
        "用名字認 observer 實例",
        "一個共用的實例掛在好幾個名字下（activation_post_process_N），每個 observer node 的 target 都不一樣，"
        "named_modules() 又只列每個實例的第一個名字，用名字分組永遠找不到共用。要從圖上的 observer node 出發，用 id(module) 分組。",
        INSTANCES,
        public=no_groups,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "quantizer_report",
        TITLE,
        ("quantizer_report",),
        {"cat_pool": cat_pool, "cat_pool_keep_cat": cat_pool_keep_cat, "hand_labels": hand_labels},
        case_seconds=90,  # the first case imports ExecuTorch (seconds, more on a busy machine)
        misconceptions=MISCONCEPTIONS,
    ),
)
