"""Public cases of M07-3 4-bit weight (Int4WeightQuantizer) on the chapter's own models.

Also what the hidden cases share: the labels the student's Quantizer wrote (read as data by
``describe_annotations``), the observers prepare inserted, and the quantize / dequantize ops
of the converted graph with their integer ranges and axes (read by the case itself).
``annotate`` labels the graph it is handed (prepare_pt2e ignores what it returns): another
GraphModule coming back (a labelled copy) is refused with a sentence that says so, and a
label prepare cannot turn into an observer (say, ``dtype=torch.int4``) is reported as such,
with the labels still judged. The graph reaches ``annotate`` without export's ``_guards_fn``
module, so that a copy can be told apart in the grader's replay too.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import CaseTimeout, EvidenceError, describe_annotations, describe_prepared, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "Int4WeightQuantizer：4-bit per-channel weight、int8 activation"


def qdq_ranges(gm: GraphModule) -> dict[str, list[Any]]:
    """For every conv2d / linear of a converted graph: the dequantize on each input, as
    ``[source, op, quant_min, quant_max, dtype, axis or None]`` (``None`` when the input has none)."""
    out: dict[str, list[Any]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in (
            torch.ops.aten.conv2d.default,
            torch.ops.aten.linear.default,
        ):
            continue
        edges = []
        for arg in node.args[:3]:
            if not isinstance(arg, Node):
                continue
            if arg.op == "call_function" and str(arg.target).startswith("quantized_decomposed.dequantize"):
                name = str(arg.target).split(".")[1]
                channel = name.endswith("per_channel")
                axis = arg.args[3] if channel else None
                qmin, qmax, dtype = (arg.args[4], arg.args[5], arg.args[6]) if channel else arg.args[3:6]
                source = arg.args[0]
                edges.append(
                    [
                        source.name if isinstance(source, Node) else "?",
                        name,
                        int(qmin),
                        int(qmax),
                        str(dtype).removeprefix("torch."),
                        axis,
                    ]
                )
            else:
                edges.append([arg.name, None, None, None, None, None])
        out[node.name] = edges
    return out


def annotate_in_place(quantizer: Any, model: GraphModule) -> None:
    """``quantizer.annotate(model)``; an nn.Module other than ``model`` coming back is refused in one sentence."""
    returned = quantizer.annotate(model)
    if isinstance(returned, torch.nn.Module) and returned is not model:
        raise EvidenceError(
            f"annotate 要在傳進來的 model 上貼標籤、回傳同一個 model：你回傳了另一個 {type(returned).__name__}"
            "（例如貼了標籤的複本），但 prepare_pt2e 不看回傳值，只照傳進去的那張圖上的標籤插 observer"
        )


def quantize_with(
    quantizer: Any, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], seed: int
) -> dict[str, Any]:
    """export → prepare with ``quantizer`` (its labels captured right after annotate) → calibrate → convert."""
    from common.pt2e import Quantizer, convert_pt2e, export_module, prepare_pt2e
    from selfcheck.public.m07_2 import without_guards

    captured: dict[str, Any] = {}

    class CaptureLabels(Quantizer):
        """Forwards to ``quantizer``; keeps the labels as data the moment annotate returns."""

        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return without_guards(model)

        def annotate(self, model: GraphModule) -> GraphModule:
            annotate_in_place(quantizer, model)
            captured["labels"] = describe_annotations(model)
            return model

        def validate(self, model: GraphModule) -> None:
            quantizer.validate(model)

    result: dict[str, Any] = {"observers": None, "instances": None, "ranges": {}, "prepare_error": None}
    try:
        prepared = prepare_pt2e(export_module(model.eval(), inputs), CaptureLabels())
        shapes = [tuple(t.shape) for t in inputs]
        with torch.no_grad():
            for step in range(2):
                prepared(*seeded_inputs(seed * 1000 + step, *shapes))
        description = describe_prepared(prepared)
        result["observers"] = len(description["observers"])
        result["instances"] = description["instances"]
        result["ranges"] = qdq_ranges(convert_pt2e(copy.deepcopy(prepared)))
    except (EvidenceError, CaseTimeout):
        raise
    except Exception as exc:
        if "labels" not in captured:  # the student's annotate itself raised: that is the answer
            raise
        # labelled, but prepare / calibrate / convert cannot follow the labels (an observer refused a spec)
        result["prepare_error"] = f"{type(exc).__name__}: {safe_text(exc, 200)}"
    return {"labels": captured["labels"], **result}


# --- public cases -------------------------------------------------------------------------------


def public_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn: two convs and a linear, all with bias."""
    from common.models import get_model

    return quantize_with(ns["Int4WeightQuantizer"](), get_model("small_cnn"), seeded_inputs(seed, (2, 3, 16, 16)), seed)


def public_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: two linears."""
    from common.models import get_model

    return quantize_with(ns["Int4WeightQuantizer"](), get_model("mlp"), seeded_inputs(seed, (2, 16)), seed)


WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


class Decoder(nn.Module):
    """An input named ``linear_features``; linear → a 2×2 map → conv_transpose2d (its target also says conv,
    yet it is no conv2d: no label) → relu → conv2d."""

    def __init__(self, features: int = 6, channels: int = 3) -> None:
        super().__init__()
        self.channels = channels
        self.fc = nn.Linear(features, channels * 4)
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.conv = nn.Conv2d(channels, 2, 3, padding=1)

    def forward(self, linear_features: torch.Tensor) -> torch.Tensor:
        grid = self.fc(linear_features).view(-1, self.channels, 2, 2)
        return self.conv(torch.relu(self.up(grid)))


class Reserver(Quantizer):
    """Runs before the student's Quantizer: claims the first conv (int8, ``_annotated=True``) and leaves a draft
    label nobody claimed (``_annotated=False``) on the last linear: a spec on its bias and its output, and
    ``allow_implicit_sharing=False``. Replacing the draft keeps none of it; editing it keeps the bias spec and
    the flag."""

    def annotate(self, model: GraphModule) -> GraphModule:
        from common.qspecs import act_spec, weight_spec

        weighted = [n for n in model.graph.nodes if n.op == "call_function" and n.target in WEIGHTED]
        first, last = weighted[0], weighted[-1]
        self.claimed = [first.name]
        first.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={first.args[0]: act_spec(), first.args[1]: weight_spec(True)},
            output_qspec=act_spec(),
            _annotated=True,
        )
        last.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={last.args[2]: act_spec()},
            output_qspec=act_spec(),
            allow_implicit_sharing=False,
            _annotated=False,
        )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class Finisher(Quantizer):
    """Runs after the student's Quantizer: int8 per-tensor weights on every conv2d / linear nobody claimed."""

    def annotate(self, model: GraphModule) -> GraphModule:
        from common.qspecs import act_spec, weight_spec

        unclaimed = [
            n
            for n in model.graph.nodes
            if n.op == "call_function"
            and n.target in WEIGHTED
            and not getattr(n.meta.get(ANNOTATION_KEY), "_annotated", False)
        ]
        for node in unclaimed:
            node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={node.args[0]: act_spec(), node.args[1]: weight_spec(False)},
                output_qspec=act_spec(),
                _annotated=True,
            )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class Chain(Quantizer):
    """Quantizers one after another, as ComposableQuantizer runs them."""

    def __init__(self, *quantizers: Any) -> None:
        self.quantizers = quantizers

    def annotate(self, model: GraphModule) -> GraphModule:
        for quantizer in self.quantizers:
            annotate_in_place(quantizer, model)
        return model

    def validate(self, model: GraphModule) -> None:
        for quantizer in self.quantizers:
            quantizer.validate(model)


def public_decoder(ns: Namespace, seed: int) -> Any:
    """Decoder: an input whose name starts with linear, a conv_transpose2d that is no conv2d."""
    torch.manual_seed(seed)
    return quantize_with(ns["Int4WeightQuantizer"](), Decoder(), seeded_inputs(seed, (2, 6)), seed)


def public_in_between(ns: Namespace, seed: int) -> Any:
    """small_cnn with a Quantizer before the student's (a claimed conv, a draft label on the linear) and one after
    it (int8 on whatever nobody claimed)."""
    from common.models import get_model

    reserver = Reserver()
    quantizer = Chain(reserver, ns["Int4WeightQuantizer"](), Finisher())
    result = quantize_with(quantizer, get_model("small_cnn"), seeded_inputs(seed, (2, 3, 16, 16)), seed)
    result["claimed"] = getattr(reserver, "claimed", [])
    return result


# --- where the chapter teaches it ----------------------------------------------------------------

FOUR_BITS = Section("A. 4 bit 怎麼表示、有多粗")
RULES = Section("練習：Int4WeightQuantizer（5 分）")
BY_TARGET = Section("A. 依 `node.target` 找 op", notebook="M03-3")
WITH_OTHERS = Section("和 XNNPACKQuantizer 一起用", notebook="M03-4")
PER_CHANNEL = Section("B. 一個 outlier channel：per-tensor 與 per-channel weight", notebook="M06-1")
OBSERVERS = Section("A. 四個 observer 看同一批資料", notebook="M02-1")


# --- reading the evidence (the public detectors here, the hidden ones in autograder/checks/test_m07_3.py) ---


def labels(evidence: Any, case: str) -> dict[str, Any]:
    """One case's labels, node → label (empty when the case raised)."""
    found = diagnosis.value(evidence, case, "labels")
    return found if isinstance(found, dict) else {}


def claimed(expected: Any, case: str) -> list[str]:
    """The nodes another Quantizer claimed before the student's (the key's evidence says which)."""
    found = diagnosis.value(expected, case, "claimed")
    return found if isinstance(found, list) else []


def edges(label: Any) -> dict[str, Any]:
    """A label's input edges, source → spec."""
    if not isinstance(label, dict) or not isinstance(label.get("inputs"), list):
        return {}
    return {str(pair[0]): pair[1] for pair in label["inputs"] if isinstance(pair, list) and len(pair) == 2}


def field(spec: Any, name: str) -> Any:
    """A field of a recorded spec, unwrapped (``dtype``, ``qscheme``, ``observer`` → its class's last name)."""
    if not isinstance(spec, dict):
        return None
    found = spec.get(name)
    if name in ("dtype", "qscheme") and isinstance(found, dict):
        return found.get(name)
    if name == "observer" and isinstance(found, dict):
        return str(found.get("class", "")).rsplit(".", 1)[-1]
    return found


def weight_pairs(seen: Any, expected: Any, *cases: str, owned: bool = True) -> list[tuple[str, Any, Any]]:
    """``(node, got, want)`` weight specs at the same node (the key's weight edge), where the student labelled the
    node; ``owned``: only nodes nobody claimed before the student's Quantizer, else only claimed ones."""
    found = []
    for case in cases:
        mine, key, taken = labels(seen, case), labels(expected, case), claimed(expected, case)
        for node, want_label in key.items():
            if (node in taken) == owned or node not in mine:
                continue
            want_edges = edges(want_label)
            source = next((s for s in want_edges if s.endswith("weight")), None)
            if source is not None:
                found.append((node, edges(mine[node]).get(source), want_edges[source]))
    return found


def weights_differ(seen: Any, expected: Any, cases: tuple[str, ...], test: Any) -> bool:
    """``test(got, want)`` holds for some weight spec the student wrote on a node it owns."""
    try:
        return any(test(got, want) for _, got, want in weight_pairs(seen, expected, *cases) if got != want)
    except Exception:
        return False


def storage_differs(got: Any, want: Any) -> bool:
    return field(got, "dtype") != field(want, "dtype")


def wider_range(got: Any, want: Any) -> bool:
    return field(got, "dtype") == field(want, "dtype") and (field(got, "qmax") or 0) > field(want, "qmax")


def narrowed_range(got: Any, want: Any) -> bool:
    low, high = field(got, "qmin"), field(got, "qmax")
    return high == field(want, "qmax") and low == -high and field(want, "qmin") == -high - 1


def per_tensor_instead(got: Any, want: Any) -> bool:
    return "per_tensor" in str(field(got, "qscheme")) and "per_channel" in str(field(want, "qscheme"))


def other_axis(got: Any, want: Any) -> bool:
    return field(got, "qscheme") == field(want, "qscheme") and field(got, "ch_axis") != field(want, "ch_axis")


def other_observer(got: Any, want: Any) -> bool:
    same_numbers = all(field(got, k) == field(want, k) for k in ("dtype", "qmin", "qmax", "qscheme", "ch_axis"))
    return same_numbers and field(got, "observer") != field(want, "observer")


def extra_edges(seen: Any, expected: Any, *cases: str) -> bool:
    """A node the student owns has an input edge labelled that the key leaves alone (the bias)."""
    for case in cases:
        mine, key, taken = labels(seen, case), labels(expected, case), claimed(expected, case)
        for node, want_label in key.items():
            if node not in taken and node in mine and set(edges(mine[node])) - set(edges(want_label)):
                return True
    return False


def unmarked(seen: Any, expected: Any, *cases: str) -> bool:
    """A label the student wrote (on a node nobody claimed) is not marked ``_annotated``."""
    return any(
        want.get("annotated") is True
        and isinstance(labels(seen, case).get(node), dict)
        and labels(seen, case)[node].get("annotated") is False
        for case in cases
        for node, want in labels(expected, case).items()
        if node not in claimed(expected, case)
    )


def returned_a_copy(seen: Any, expected: Any) -> bool:
    return any("回傳了另一個" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen))


PUBLIC_CASES = ("small_cnn", "mlp", "decoder")
"""The public cases where the student's Quantizer is alone: its specs show there, nobody else's."""
IN_BETWEEN = "in_between"


def _public_found_by_name(seen: Any, expected: Any) -> bool:
    """Decoder, whose input is named linear_features, raised; small_cnn went through."""
    return diagnosis.error(seen, "decoder") in ("IndexError", "AttributeError", "TypeError", "KeyError") and bool(
        labels(seen, "small_cnn")
    )


def _public_target_substring(seen: Any, expected: Any) -> bool:
    """Alone, every node the key labels is labelled as the key does, plus other ops whose target also says conv
    (conv_transpose2d) or linear."""
    extra = [node for case in PUBLIC_CASES for node in labels(seen, case) if node not in labels(expected, case)]
    return (
        bool(extra)
        and all("conv" in node or "linear" in node for node in extra)
        and all(got == want for _, got, want in weight_pairs(seen, expected, *PUBLIC_CASES))
    )


def _own_specs_right(seen: Any, expected: Any) -> bool:
    """Alone, the student's Quantizer labels every weight as the key does, and no more."""
    pairs = weight_pairs(seen, expected, *PUBLIC_CASES)
    return bool(pairs) and all(got == want for _, got, want in pairs) and not extra_edges(seen, expected, *PUBLIC_CASES)


def _public_ignores_claimed(seen: Any, expected: Any) -> bool:
    """The conv the Quantizer before the student's claimed does not keep its label."""
    return any(got != want for _, got, want in weight_pairs(seen, expected, IN_BETWEEN, owned=False))


def _public_skips_any_label(seen: Any, expected: Any) -> bool:
    """Alone, right; in between, the node with an unclaimed draft label ends with the later Quantizer's weight spec,
    while the other unclaimed node carries the student's."""
    if not _own_specs_right(seen, expected) or unmarked(seen, expected, *PUBLIC_CASES):
        return False
    between = weight_pairs(seen, expected, IN_BETWEEN)
    wrong = [node for node, got, want in between if got != want]
    return bool(wrong) and len(wrong) < len(between)


def _public_updates_in_place(seen: Any, expected: Any) -> bool:
    """Alone, right; in between, a node keeps what the earlier Quantizer wrote on its draft label (the bias edge,
    allow_implicit_sharing=False)."""
    if not _own_specs_right(seen, expected):
        return False
    mine, key, taken = labels(seen, IN_BETWEEN), labels(expected, IN_BETWEEN), claimed(expected, IN_BETWEEN)
    for node, want in key.items():
        got = mine.get(node)
        if node in taken or not isinstance(got, dict) or not isinstance(want, dict):
            continue
        if got.get("implicit_sharing") != want.get("implicit_sharing") or extra_edges(seen, expected, IN_BETWEEN):
            return True
    return False


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------


def _chain_graph() -> tuple[torch.fx.Graph, Node]:
    """x → relu → sigmoid → output, built by hand; the sigmoid."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(torch.ops.aten.relu.default, (x,))
    sigmoid = graph.call_function(torch.ops.aten.sigmoid.default, (relu,))
    graph.output(sigmoid)
    return graph, sigmoid


def _later_quantizer(graph: torch.fx.Graph, spec: Any) -> None:
    """What a Quantizer that runs after yours does: labels every op nobody claimed with its own ``spec``."""
    for node in graph.nodes:
        label = node.meta.get(ANNOTATION_KEY)
        if node.op == "call_function" and not (label is not None and label._annotated):
            node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec, _annotated=True)


def _check_claim_output(claim_output: Any) -> list[str]:
    from common.pt2e import MinMaxObserver, QuantizationSpec

    def spec(low: int, high: int) -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=low,
            quant_max=high,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )

    mine, theirs, draft = spec(-128, 127), spec(-100, 100), spec(-64, 63)
    problems = []
    for title, before in (
        ("沒有標籤的 sigmoid", None),
        ("有一張沒人認領的草稿標籤（_annotated=False）的 sigmoid", draft),
    ):
        graph, sigmoid = _chain_graph()
        if before is not None:
            sigmoid.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=before, _annotated=False)
        claim_output(sigmoid, mine)
        label = sigmoid.meta.get(ANNOTATION_KEY)
        if not isinstance(label, QuantizationAnnotation) or label.output_qspec is not mine:
            got = getattr(label, "output_qspec", None)
            problems.append(f"{title}：claim_output 之後，它的 output_qspec 應該是傳進來的 spec，你的是 {got!r}")
            continue
        _later_quantizer(graph, theirs)
        if sigmoid.meta[ANNOTATION_KEY].output_qspec is not mine:
            problems.append(
                f"{title}：後面的 Quantizer 把你貼的標籤換掉了（它只跳過 _annotated 是 True 的 node），"
                f"你的標籤 _annotated 是 {label._annotated!r}"
            )
    return problems


CLAIM_OUTPUT = Practice(
    "claim_output",
    "寫 claim_output(node, spec)：替 node 的輸出貼上 spec，並認領這個 node，讓後面的 Quantizer 知道它已經有人負責、不再改它。"
    "檢查會在 x → relu → sigmoid 的小圖上對 sigmoid 呼叫你的函式（一次沒有標籤、一次有一張沒人認領的草稿），"
    "接著跑一個只跳過已認領 node 的 Quantizer，看 sigmoid 最後的輸出規格是不是你的。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\ndef claim_output(node, spec):\n"
    "    raise NotImplementedError()\n",
    _check_claim_output,
    "「有人負責」寫在標籤上：QuantizationAnnotation 的 _annotated。annotate_output_qspec 只放規格、不會設它；"
    "貼一張新的 QuantizationAnnotation(output_qspec=spec, _annotated=True) 放進 node.meta[ANNOTATION_KEY]。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def claim_output(node, spec):\n"
    "    label = QuantizationAnnotation(output_qspec=spec, _annotated=True)\n"
    "    node.meta[ANNOTATION_KEY] = label\n",
    "ComposableQuantizer 依序跑每個 Quantizer：誰先設了 _annotated=True，那個 node 就是誰的。",
)


def _check_limit_bits(limit_bits: Any) -> list[str]:
    from common.qspecs import act_spec, weight_spec

    problems = []
    for title, base, bits in (
        ("per-channel 的 weight_spec()", weight_spec(True), 4),
        ("per-channel 的 weight_spec()", weight_spec(True), 2),
        ("act_spec()", act_spec(), 6),
    ):
        low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        got = limit_bits(base, bits)
        where = f"{title}、bits={bits}"
        if type(got) is not type(base):
            problems.append(f"{where}：應該回傳一個 {type(base).__name__}，你的是 {type(got).__name__}")
            continue
        if got.dtype != torch.int8:
            problems.append(
                f"{where}：dtype 應該還是 torch.int8，你的是 {got.dtype}：PT2E 的 {bits} bit 是 int8 儲存、範圍縮小，"
                f"torch.int{bits} 這類 dtype 沒有 kernel，observer 也不收"
            )
        if (got.quant_min, got.quant_max) != (low, high):
            count = (got.quant_max - got.quant_min + 1) if isinstance(got.quant_max, int) else "?"
            problems.append(
                f"{where}：範圍應該是 [{low}, {high}]（{2**bits} 個整數），你的是 [{got.quant_min}, {got.quant_max}]"
                f"（{count} 個整數）" + ("：signed 的範圍在 0 的兩邊，負的那邊多一個" if got.quant_min == 0 else "")
            )
        changed = [
            name
            for name in ("qscheme", "ch_axis", "observer_or_fake_quant_ctr", "is_dynamic")
            if getattr(got, name) != getattr(base, name)
        ]
        if changed:
            problems.append(f"{where}：只改範圍，其他欄位照原樣；你的 {'、'.join(changed)} 變了")
    return problems


LIMIT_BITS = Practice(
    "limit_bits",
    "寫 limit_bits(spec, bits)：spec 是一份 int8 的 QuantizationSpec，回傳一份新的，讓它只用 bits 個 bit 的 signed 整數"
    "（例如 4 bit），其他欄位（qscheme、ch_axis、observer）照原樣。"
    "檢查用 per-channel 的 weight_spec() 配 4 bit 和 2 bit，act_spec() 配 6 bit。",
    "import dataclasses\n\nimport torch\n\n\ndef limit_bits(spec, bits):\n    raise NotImplementedError()\n",
    _check_limit_bits,
    "b bit 的 signed 整數有 2**b 個：從 -2**(b-1) 到 2**(b-1) - 1（4 bit 是 [-8, 7]，負的那邊多一個）。"
    "dtype 還是 torch.int8，只換 quant_min、quant_max：dataclasses.replace(spec, quant_min=…, quant_max=…)。",
    "import dataclasses\n\nimport torch\n\n\n"
    "def limit_bits(spec, bits):\n"
    "    half = 2 ** (bits - 1)\n"
    "    return dataclasses.replace(spec, quant_min=-half, quant_max=half - 1)\n",
    "QuantizationSpec 是 frozen 的 dataclass：不能改它的欄位，要用 replace 做一份新的。",
)


MISCONCEPTIONS = (
    Misconception(
        "labels_a_copy",
        "在複本上貼標籤，再回傳複本",
        "prepare_pt2e 不看 annotate 的回傳值，只照傳進去的那張圖上的標籤插 observer。"
        "你在 copy.deepcopy(model) 上貼標籤，原本的圖上一張標籤都沒有，模型就完全沒量化。"
        "直接在傳進來的 model 上貼，再回傳同一個 model。",
        RULES,
        public=returned_a_copy,
    ),
    Misconception(
        "found_by_name",
        "用名字找 conv 與 linear",
        "node 的名字只是標記：模型的輸入也可以叫 linear，它沒有 args[1]，貼標籤就出錯。"
        '要用 node.op == "call_function" 而且 node.target in (CONV, LINEAR) 判斷。',
        BY_TARGET,
        public=_public_found_by_name,
    ),
    Misconception(
        "target_substring",
        "用子字串比對 target 找 conv",
        "conv_transpose2d 的 target 裡也有 conv 這幾個字，但它不是 conv2d：它的 weight 第 0 維是輸入 channel，"
        "這個練習也只標 conv2d 與 linear。你用子字串比對 str(node.target)，它也被貼上了 4-bit 的標籤。"
        "直接比較 node.target 是不是 CONV 或 LINEAR 這兩個 op。",
        BY_TARGET,
        public=_public_target_substring,
    ),
    Misconception(
        "int4_dtype",
        "4 bit 用了 torch.int4",
        "torch.int4 雖然存在，卻幾乎只是名字：沒有運算的 kernel，torchao 的 observer 也不收它，prepare 就出錯了。"
        "PT2E 的 4 bit 是用 int8 儲存、把範圍限制在 [-8, 7]：dtype=torch.int8、quant_min=-8、quant_max=7。",
        FOUR_BITS,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, storage_differs),
        practice=LIMIT_BITS,
    ),
    Misconception(
        "int8_range",
        "weight 的範圍還是 int8 的",
        "weight_spec(True) 是 int8 的 [-127, 127]；4 bit 要把整數範圍縮到 [-8, 7]，每個 channel 只用 16 個整數。"
        "dtype 仍是 torch.int8，只是 quant_min=-8、quant_max=7（例如 dataclasses.replace(spec, quant_min=-8, quant_max=7)）。",
        FOUR_BITS,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, wider_range),
        practice=LIMIT_BITS,
    ),
    Misconception(
        "narrow_range",
        "範圍用了 [-7, 7]",
        "你可能照 int8 的 [-127, 127] 類推成 [-7, 7]。4 bit 有 16 個整數，signed 的範圍是 [-8, 7]，"
        "後端（例如 ExecuTorch 的 XNNPACK）正是看 qmin == -8、qmax == 7 才認出 4-bit weight。用 quant_min=-8、quant_max=7。",
        FOUR_BITS,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, narrowed_range),
        practice=LIMIT_BITS,
    ),
    Misconception(
        "per_tensor_weight",
        "weight 用了 per-tensor",
        "4 bit 只有 16 個整數，整個 weight 共用一個 scale 時，大的 channel 決定 scale，小的 channel 只分到一兩個整數。"
        "練習要的是 per-channel：qscheme=torch.per_channel_symmetric、ch_axis=0、PerChannelMinMaxObserver，每個 output channel 一個 scale。",
        PER_CHANNEL,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, per_tensor_instead),
    ),
    Misconception(
        "input_channel_axis",
        "per-channel 的 ch_axis 不是 0",
        "conv 與 linear 的 weight 第 0 維是 output channel：每個 output channel 算出一個輸出，一個 scale 正好跟著它。"
        "ch_axis=1 是沿 input channel 切，scale 的個數與意義都不對，convert 之後的 dequantize 也沿錯的軸。用 ch_axis=0。",
        PER_CHANNEL,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, other_axis),
    ),
    Misconception(
        "wrong_observer",
        "per-channel 的 spec 配了 MinMaxObserver",
        "spec 的 qscheme 寫 per_channel_symmetric，observer 卻是 MinMaxObserver：它只會算一個 scale，"
        "prepare 時就出錯（MinMaxObserver 不支援 per-channel）。per-channel 的 weight 要配 PerChannelMinMaxObserver。",
        OBSERVERS,
        public=lambda seen, expected: weights_differ(seen, expected, PUBLIC_CASES, other_observer),
    ),
    Misconception(
        "quantizes_bias",
        "bias 也貼了標籤",
        "這個 Quantizer 只量化 activation 與 weight，bias 留在浮點數。你把 bias（node.args[2]）也放進 input_qspec_map，"
        "它就多了一個 observer；用 weight 的 per-channel spec 量化一維的 bias 還會在 prepare 時出錯。"
        "input_qspec_map 只放 args[0] 與 args[1]。",
        RULES,
        public=lambda seen, expected: extra_edges(seen, expected, *PUBLIC_CASES),
    ),
    Misconception(
        "ignores_claimed",
        "別的 Quantizer 認領過的 node 又被你改寫",
        "_annotated=True 表示這個 node 已經有 Quantizer 負責，它的標籤要原封不動。你的程式照樣貼上 4-bit 的標籤，"
        "覆蓋了別人的決定。先看 node.meta.get(ANNOTATION_KEY)，是 _annotated=True 的就跳過。",
        WITH_OTHERS,
        public=_public_ignores_claimed,
    ),
    Misconception(
        "forgets_mark",
        "標完沒有設 _annotated = True",
        "_annotated=True 是告訴後面的 Quantizer「這個 node 有人負責了」。你的標籤沒有設，後面的 Quantizer 以為沒人標過，"
        "把你的 4-bit 標籤換成了它自己的。新的 QuantizationAnnotation 要寫 _annotated=True。",
        WITH_OTHERS,
        public=lambda seen, expected: unmarked(seen, expected, *PUBLIC_CASES),
        practice=CLAIM_OUTPUT,
    ),
    Misconception(
        "skips_any_label",
        "有標籤就跳過，不看 _annotated",
        "有標籤不代表有人認領：_annotated=False 的標籤是沒有人負責的草稿，照規則要換成你的。"
        "你跳過了它，最後被後面的 Quantizer 標成別的 spec。要跳過的只有 _annotated 是 True 的 node。",
        RULES,
        public=_public_skips_any_label,
    ),
    Misconception(
        "updates_in_place",
        "在沒人認領的舊標籤上補 spec",
        "沒人認領的標籤要整張換掉。你在舊標籤上改 input_qspec_map、output_qspec、_annotated，"
        "前一個 Quantizer 寫在上面的東西（bias 的 spec、allow_implicit_sharing=False）就留了下來。"
        "直接寫 node.meta[ANNOTATION_KEY] = QuantizationAnnotation(...)，貼一張全新的標籤。",
        RULES,
        public=_public_updates_in_place,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "int4_quantizer",
        TITLE,
        ("Int4WeightQuantizer",),
        {
            "small_cnn": public_small_cnn,
            "mlp": public_mlp,
            "decoder": public_decoder,
            "in_between": public_in_between,
        },
        misconceptions=MISCONCEPTIONS,
    ),
)
