"""Public cases of M05-2 DerivedQuantizationSpec (BiasQuantizer) on the chapter's own models.

Each case quantizes a chapter model with the student's ``BiasQuantizer``, calibrates,
converts, and reads every conv2d / linear back from the converted graph: how its bias is
dequantized (op, dtype, number of scales) and whether the bias scale is s_act · s_w
(rtol 1e-6), its zero points 0, and its dequantized values within half a step of the fp32
bias; plus the bias spec the student wrote (kind, dtype, range, per channel or not, the
edges it derives from, as a sorted set). All of it is the same for any correct solution.
Two cases mislead on purpose: small_cnn after a pass renamed its linear (``head``), and a model
with a ConvTranspose2d and a bilinear upsample (their targets contain conv / linear; the
conv_transpose2d is read back too: the key leaves it alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import describe_annotations, getattr_value, qdq_kind
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "BiasQuantizer：bias 量化成 int32，scale = s_act · s_w"

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
RTOL = 1e-6


def _value(gm: GraphModule, arg: Any) -> Any:
    return getattr_value(gm, arg) if isinstance(arg, Node) and arg.op == "get_attr" else arg


def _scales(gm: GraphModule, dq: Node) -> torch.Tensor:
    return torch.as_tensor(_value(gm, dq.args[1]), dtype=torch.float64).flatten()


def bias_record(gm: GraphModule, node: Node, float_bias: torch.Tensor | None) -> dict[str, Any] | None:
    """How ``node``'s bias reaches it in the converted graph, judged against s_act · s_w."""
    if len(node.args) < 3 or not isinstance(node.args[2], Node):
        return None
    x_dq, w_dq, b_dq = node.args[:3]
    if qdq_kind(b_dq) != "dq":
        return {"dequantize": None}
    source = b_dq.args[0]
    stored = _value(gm, source)
    dtype = next((a for a in b_dq.args if isinstance(a, torch.dtype)), None)
    scales = _scales(gm, b_dq)
    zero_points = torch.as_tensor(_value(gm, b_dq.args[2])).flatten()
    product = None
    relation = "other"
    if qdq_kind(x_dq) == "dq" and qdq_kind(w_dq) == "dq":
        product = _scales(gm, x_dq) * _scales(gm, w_dq)
        relation = scale_relation(scales, _scales(gm, x_dq), _scales(gm, w_dq))
    with torch.no_grad():
        dequantized = b_dq.target(stored, *[_value(gm, a) for a in b_dq.args[1:]]).to(torch.float64)
    step = scales if scales.numel() == dequantized.numel() else scales.expand(dequantized.numel())
    within = float_bias is not None and bool(((dequantized - float_bias).abs() <= step / 2 * (1 + RTOL) + 1e-12).all())
    return {
        "dequantize": str(b_dq.target).split(".")[1],
        "dtype": str(dtype).removeprefix("torch."),
        "stored_dtype": str(stored.dtype).removeprefix("torch.") if isinstance(stored, torch.Tensor) else None,
        "scales": int(scales.numel()),
        "zero_points_all_zero": bool((zero_points == 0).all()),
        "scale_is_product": product is not None
        and product.shape == scales.shape
        and bool(torch.allclose(scales, product, rtol=RTOL, atol=0)),
        "within_half_step": within,
        "scale_equals": relation,
    }


def scale_relation(scales: torch.Tensor, act: torch.Tensor, weight: torch.Tensor) -> str:
    """What the bias scales are made of, in words: ``act_scale * weight_scale`` (right), ``act_scale``,
    ``weight_scale``, ``act_scale + weight_scale``, or ``other``."""
    if act.numel() != 1 or weight.numel() not in (1, scales.numel()):
        return "other"
    weight = weight.expand(scales.numel())
    act = act.expand(scales.numel())
    for words, candidate in (
        ("act_scale * weight_scale", act * weight),
        ("act_scale", act),
        ("weight_scale", weight),
        ("act_scale + weight_scale", act + weight),
    ):
        if candidate.shape == scales.shape and bool(torch.allclose(scales, candidate, rtol=1e-4, atol=0)):
            return words
    return "other"


def bias_spec(annotation: Any, bias: str | None) -> Any:
    """The spec the student put on the bias edge, as canonical data."""
    if bias is None or not isinstance(annotation, dict):
        return None
    spec = next((s for src, s in annotation.get("inputs", []) if src == bias), None)
    if not isinstance(spec, dict):
        return spec
    edges = sorted(
        " → ".join(e["edge"]) if isinstance(e, dict) and "edge" in e else str(e) for e in spec.get("from") or []
    )
    scheme = spec.get("qscheme")
    scheme = scheme.get("qscheme") if isinstance(scheme, dict) else scheme
    dtype = spec.get("dtype")
    return {
        "kind": spec.get("kind"),
        "dtype": dtype.get("dtype") if isinstance(dtype, dict) else dtype,
        "range": [spec.get("qmin"), spec.get("qmax")],
        "per_channel": "channel" in str(scheme),
        "from": edges,
    }


def quantize(
    ns: Namespace,
    model_name: str,
    per_channel: bool,
    seed: int,
    model: torch.nn.Module | None = None,
    around: Callable[[Any], Any] | None = None,
    rename: dict[str, str] | None = None,
    also: tuple[Any, ...] = (),
) -> dict[str, Any]:
    """The chapter's export → prepare (BiasQuantizer) → calibrate → convert, read op by op (``model``: a model
    of this module's own instead of the chapter's ``model_name``, on images; ``around``: the Quantizer that
    prepare gets, made from the student's; ``rename``: node names a pass changed in the exported graph before
    prepare; ``also``: targets read back beside conv2d and linear)."""
    from common.models import IMAGE_SHAPE, INPUT_SHAPES, get_model
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    shape = (4, *INPUT_SHAPES.get(model_name, IMAGE_SHAPE))
    gm = export_module((model or get_model(model_name)).eval(), seeded_inputs(seed, shape))
    if rename:
        renamed_by_a_pass(gm, rename)
    read = (*WEIGHTED, *also)
    student = ns["BiasQuantizer"](per_channel=per_channel)
    prepared = prepare_pt2e(gm, around(student) if around is not None else student)
    annotations = describe_annotations(prepared)
    floats: dict[str, torch.Tensor | None] = {}
    bias_names: dict[str, str | None] = {}
    for node in prepared.graph.nodes:
        if node.op == "call_function" and node.target in read:
            source = node.args[2] if len(node.args) > 2 and isinstance(node.args[2], Node) else None
            while source is not None and source.op == "call_module":  # through the bias observer
                source = source.args[0]
            bias_names[node.name] = source.name if source is not None else None
            floats[node.name] = (
                getattr_value(prepared, source).detach().to(torch.float64).flatten()
                if source is not None and source.op == "get_attr"
                else None
            )
    with torch.no_grad():
        for step in range(3):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    converted = convert_pt2e(prepared)
    ops = {}
    for node in converted.graph.nodes:
        if node.op == "call_function" and node.target in read:
            ops[node.name] = {
                "output_quantized": any(qdq_kind(user) == "q" for user in node.users),
                "bias": bias_record(converted, node, floats.get(node.name)),
                "bias_spec": bias_spec(annotations.get(node.name), bias_names.get(node.name)),
            }
    return ops


def conv_relu_per_tensor(ns: Namespace, seed: int) -> Any:
    return quantize(ns, "conv_relu", False, seed)


def mlp_per_channel(ns: Namespace, seed: int) -> Any:
    return quantize(ns, "mlp", True, seed)


def small_cnn_per_channel(ns: Namespace, seed: int) -> Any:
    return quantize(ns, "small_cnn", True, seed)


def renamed_by_a_pass(gm: GraphModule, names: dict[str, str]) -> None:
    """What a pass that renames nodes leaves: the node called ``old`` is now called ``new`` (target unchanged)."""
    for node in list(gm.graph.nodes):
        if node.name in names:
            node._rename(names[node.name])
    gm.recompile()


def small_cnn_after_pass(ns: Namespace, seed: int) -> Any:
    """small_cnn, per-channel, after a pass renamed its linear ``head``: the same ops as small_cnn_per_channel."""
    return quantize(ns, "small_cnn", True, seed, rename={"linear": "head"})


class UpsampleHead(torch.nn.Module):
    """conv → relu → ConvTranspose2d (``conv_transpose2d``, weight laid out (in, out)) → bilinear upsample
    (``upsample_bilinear2d``) → mean → linear; every layer with a bias. Only the conv2d and the linear are
    BiasQuantizer's."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(4, 6, 2, stride=2)
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.up(torch.relu(self.conv(x)))
        v = torch.nn.functional.interpolate(u, scale_factor=0.5, mode="bilinear")
        return self.fc(v.mean(dim=(2, 3)))


def upsample_per_tensor(ns: Namespace, seed: int) -> Any:
    """UpsampleHead, per-tensor: its conv_transpose2d is read back too (nobody labels it, its bias stays fp32)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = UpsampleHead()
    return quantize(ns, "upsample_head", False, seed, model=model, also=(torch.ops.aten.conv_transpose2d.input,))


class BiaslessHead(torch.nn.Module):
    """conv (with a bias) → relu → flatten → a linear without bias (``bias=False``): its node has two arguments."""

    def __init__(self, channels: int = 4, size: int = 16) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.fc = torch.nn.Linear(channels * size * size, 5, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def biasless_per_tensor(ns: Namespace, seed: int) -> Any:
    """BiaslessHead: the conv has a bias, the linear none (nothing to derive, no ``node.args[2]``)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = BiaslessHead()
    return quantize(ns, "biasless_head", False, seed, model=model)


def between_two(student: Any) -> Any:
    """A Quantizer that runs three in turn, as a composed one does: one that labels the last linear's output
    without claiming it (``_annotated`` left False), the student's, then one that gives every op nobody
    claimed an output label of its own (an int8 [-100, 100] output, claimed), replacing what was there."""
    from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec, Quantizer

    def spec() -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-100,
            quant_max=100,
            qscheme=torch.per_tensor_symmetric,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )

    class Between(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            last = [n for n in model.graph.nodes if n.op == "call_function" and n.target in WEIGHTED][-1]
            last.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec())
            student.annotate(model)
            for node in model.graph.nodes:
                label = node.meta.get(ANNOTATION_KEY)
                if node.op == "call_function" and (label is None or not label._annotated):
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec(), _annotated=True)
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return Between()


def mlp_between_two(ns: Namespace, seed: int) -> Any:
    """mlp, per-tensor, the student's Quantizer between two others (``between_two``): the last linear labelled
    before it, unclaimed; every op left unclaimed after it relabelled."""
    return quantize(ns, "mlp", False, seed, around=between_two)


# --- where the chapter teaches it ----------------------------------------------------------------

PRODUCT = Section("A. int32 bias：scale 是兩個 observer 的乘積")
PLACEMENT = Section("B. `DerivedQuantizationSpec` 要放在哪裡")
PER_CHANNEL = Section("C. per-channel weight：bias 每個 output channel 一個 scale")
RULES = Section("練習：BiasQuantizer（6 分）")
BY_TARGET = Section("A. 依 `node.target` 找 op", notebook="M03-3")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
CLAIMS = Section("練習 1：AddQuantizer（7 分）", notebook="M03-4")
WITH_XNNPACK = Section("和 XNNPACKQuantizer 一起用", notebook="M03-4")

INT32_MAX = 2**31 - 1


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------
# The public evidence is ``{case: {op: {"bias": …, "bias_spec": …, "output_quantized": …}}}``.


def _ops(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(case, the student's op record, the key's) for every op of every public case both have."""
    found = []
    for case in diagnosis.cases(expected):
        mine, theirs = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        for name, want in theirs.items():
            got = mine.get(name)
            if isinstance(got, dict) and isinstance(want, dict):
                found.append((case, got, want))
    return found


def _specs(seen: Any, expected: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(the student's bias spec, the key's) where both label the bias."""
    return [
        (got["bias_spec"], want["bias_spec"])
        for _, got, want in _ops(seen, expected)
        if isinstance(got.get("bias_spec"), dict) and isinstance(want.get("bias_spec"), dict)
    ]


def bias_assumed(seen: Any, expected: Any) -> bool:
    """Only the model whose linear has no bias raised, reading an argument that is not there (``node.args[2]``)."""
    raised = diagnosis.errors(seen)
    message = diagnosis.error_message(seen, "biasless_per_tensor")
    return set(raised) == {"biasless_per_tensor"} and (
        raised["biasless_per_tensor"] == "IndexError" or "out of range" in message or "not enough values" in message
    )


def _bias_kept(evidence: Any) -> list[bool]:
    """For each biased op of the composed case: does its bias still reach it as int32 (the student's label)?"""
    ops = diagnosis.value(evidence, "mlp_between_two")
    if not isinstance(ops, dict):
        return []
    return [
        isinstance(op, dict) and isinstance(op.get("bias"), dict) and op["bias"].get("dtype") == "int32"
        for op in ops.values()
    ]


def _alone_right(seen: Any, expected: Any) -> bool:
    """Every case without other Quantizers around the student's is the key's."""
    return all(
        diagnosis.value(seen, case) == diagnosis.value(expected, case)
        for case in diagnosis.cases(expected)
        if case != "mlp_between_two"
    )


def relabelled_everything(seen: Any, expected: Any) -> bool:
    """Alone, right; between two Quantizers, no bias is int32 any more (the later one relabelled every op)."""
    kept = _bias_kept(seen)
    return bool(kept) and not any(kept) and all(_bias_kept(expected)) and _alone_right(seen, expected)


def skipped_the_labelled(seen: Any, expected: Any) -> bool:
    """Alone, right; between two Quantizers, only some biases are int32 (the op labelled before, unclaimed, was
    skipped)."""
    kept = _bias_kept(seen)
    return any(kept) and not all(kept) and all(_bias_kept(expected)) and _alone_right(seen, expected)


def _others_run(seen: Any, case: str) -> bool:
    """No case raised but ``case`` (it may have)."""
    return not set(diagnosis.errors(seen)) - {case}


def fooled_by_names(seen: Any, expected: Any) -> bool:
    """small_cnn is answered right; the same model after a pass renamed its linear is not (or raised)."""
    same = diagnosis.value(seen, "small_cnn_per_channel") == diagnosis.value(expected, "small_cnn_per_channel")
    renamed = "small_cnn_after_pass"
    if not same or not _others_run(seen, renamed) or renamed not in diagnosis.cases(expected):
        return False
    return diagnosis.error(seen, renamed) is not None or diagnosis.value(seen, renamed) != diagnosis.value(
        expected, renamed
    )


def fooled_by_targets(seen: Any, expected: Any) -> bool:
    """Only the model with a ConvTranspose2d and a bilinear upsample went wrong: it raised (an upsample's
    arguments are not (x, weight, bias)), or an op the key leaves alone (the conv_transpose2d) got a bias label."""
    case = "upsample_per_tensor"
    if case not in diagnosis.cases(expected) or not _others_run(seen, case):
        return False
    if diagnosis.error(seen, case) is not None:
        return True
    mine, theirs = diagnosis.value(seen, case), diagnosis.value(expected, case)
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return False
    return any(
        isinstance(want, dict)
        and want.get("bias_spec") is None
        and isinstance(mine.get(name), dict)
        and mine[name].get("bias_spec") is not None
        for name, want in theirs.items()
    )


def scale_made_of(words: str) -> Any:
    """A detector: some biased op's bias scale is ``words`` (``act_scale``…), never the product."""

    def detector(seen: Any, expected: Any) -> bool:
        found = [
            got["bias"].get("scale_equals")
            for _, got, _ in _ops(seen, expected)
            if isinstance(got.get("bias"), dict) and got["bias"].get("scale_equals")
        ]
        return words in found and "act_scale * weight_scale" not in found

    return detector


def derived_before_sources(seen: Any, expected: Any) -> bool:
    """prepare_pt2e's KeyError on an edge into a conv / linear, ``(x, conv2d)``: the derived spec of its bias was
    built before the observers it reads."""
    for case, error in diagnosis.errors(seen).items():
        message = diagnosis.error_message(seen, case)
        if error != "KeyError" or not message.startswith("(") or ", " not in message:
            continue
        ops = diagnosis.value(expected, case, "ops") or diagnosis.value(expected, case)
        consumer = message.strip("()").split(", ")[-1]
        if isinstance(ops, dict) and consumer in ops:
            return True
    return False


def observed_bias(seen: Any, expected: Any) -> bool:
    return any(got.get("kind") == "spec" for got, _ in _specs(seen, expected))


def _derived(spec: dict[str, Any]) -> bool:
    return spec.get("kind") == "derived"


def bias_int8(seen: Any, expected: Any) -> bool:
    return any(_derived(got) and got.get("dtype") == "int8" for got, _ in _specs(seen, expected))


def _top(spec: dict[str, Any]) -> Any:
    bounds = spec.get("range")
    return bounds[1] if isinstance(bounds, list) and len(bounds) == 2 else None


def small_range(seen: Any, expected: Any) -> bool:
    """An int32 bias squeezed into a small integer range (the weight's or an int8's)."""
    return any(
        _derived(got) and got.get("dtype") == "int32" and isinstance(_top(got), int) and _top(got) < 2**24
        for got, _ in _specs(seen, expected)
    )


def range_without_min(seen: Any, expected: Any) -> bool:
    return any(got.get("range") == [-INT32_MAX, INT32_MAX] for got, _ in _specs(seen, expected))


def zero_point_not_zero(seen: Any, expected: Any) -> bool:
    return any(
        isinstance(got.get("bias"), dict) and got["bias"].get("zero_points_all_zero") is False
        for _, got, _ in _ops(seen, expected)
    )


def _per_channel_but_one_scale(seen: Any, expected: Any, product: bool) -> bool:
    """Where the key's bias is per channel, the student's is per tensor; with ``product`` its scale is still
    s_act · s_w (a per-tensor weight too), without it is not (one scale for many channels)."""
    for _, got, want in _ops(seen, expected):
        spec, bias = got.get("bias_spec"), got.get("bias")
        theirs = want.get("bias_spec")
        if not (isinstance(spec, dict) and isinstance(bias, dict) and isinstance(theirs, dict)):
            continue
        if theirs.get("per_channel") and bias.get("scales") == 1 and bias.get("dequantize") == "dequantize_per_tensor":
            if bool(bias.get("scale_is_product")) == product:
                return True
    return False


def weight_per_tensor(seen: Any, expected: Any) -> bool:
    return _per_channel_but_one_scale(seen, expected, product=True)


def one_scale_for_channels(seen: Any, expected: Any) -> bool:
    return _per_channel_but_one_scale(seen, expected, product=False)


def from_output(seen: Any, expected: Any) -> bool:
    """derived_from names a node's output instead of an edge."""
    return any(
        _derived(got) and any(" → " not in str(edge) for edge in got.get("from") or [])
        for got, _ in _specs(seen, expected)
    )


def from_other_edges(seen: Any, expected: Any) -> bool:
    """derived_from names edges, not the two edges into this op the key names."""
    return any(
        _derived(got)
        and all(" → " in str(edge) for edge in got.get("from") or [])
        and sorted(map(str, got.get("from") or [])) != sorted(map(str, want.get("from") or []))
        for got, want in _specs(seen, expected)
    )


def no_output_label(seen: Any, expected: Any) -> bool:
    return any(
        got.get("output_quantized") is False and want.get("output_quantized") and isinstance(got.get("bias_spec"), dict)
        for _, got, want in _ops(seen, expected)
    )


def one_kind_only(seen: Any, expected: Any) -> bool:
    """Every op of one model left unlabelled (all linears, or all convs) while another model's ops are labelled
    (the student's Quantizer alone: between two others, a later one may replace its labels)."""
    by_case: dict[str, list[bool]] = {}
    for case, got, want in _ops(seen, expected):
        if want.get("bias_spec") is not None and case != "mlp_between_two":
            by_case.setdefault(case, []).append(got.get("bias_spec") is not None)
    return any(not any(marks) for marks in by_case.values()) and any(any(marks) for marks in by_case.values())


# --- practice after a mistake (issue 50): one idea each, on observers, tensors and a graph of their own ----------


def _observers() -> tuple[Any, list[tuple[str, Any]]]:
    """An activation observer (zero point -64) and two weight observers: per-tensor, and per-channel (3 channels)."""
    from common.pt2e import MinMaxObserver, PerChannelMinMaxObserver

    act = MinMaxObserver(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine)
    act(torch.tensor([-1.0, 0.5, 3.0]))
    per_tensor = MinMaxObserver(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_tensor_symmetric)
    per_tensor(torch.tensor([[0.5, -1.27], [0.2, 0.1]]))
    per_channel = PerChannelMinMaxObserver(
        ch_axis=0, dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric
    )
    per_channel(torch.tensor([[0.5, -1.0], [2.54, 0.1], [-0.25, 0.2]]))
    return act, [("per-tensor 的 weight", per_tensor), ("per-channel 的 weight（3 個 channel）", per_channel)]


def _listed(values: Any) -> Any:
    if isinstance(values, torch.Tensor):
        return [float(f"{v:.4g}") for v in values.detach().flatten().tolist()]
    return values


def _check_derive(derive_bias_qparams: Any) -> list[str]:
    act, weights = _observers()
    problems = []
    for title, weight in weights:
        want = (act.calculate_qparams()[0] * weight.calculate_qparams()[0]).to(torch.float32).flatten()
        got = derive_bias_qparams([act, weight])
        if not isinstance(got, tuple | list) or len(got) != 2:
            problems.append(f"{title}：應該回傳 (scale, zero_point) 兩個 tensor，你的是 {got!r}")
            continue
        scale, zero_point = got
        if (
            not isinstance(scale, torch.Tensor)
            or scale.numel() != want.numel()
            or not torch.allclose(scale.detach().flatten().to(torch.float32), want, rtol=1e-5, atol=0)
        ):
            problems.append(f"{title}：scale 應該是 s_act · s_w = {_listed(want)}，你的是 {_listed(scale)}")
        if (
            not isinstance(zero_point, torch.Tensor)
            or zero_point.dtype != torch.int32
            or zero_point.numel() != want.numel()
            or bool((zero_point != 0).any())
        ):
            shown = (
                f"{zero_point.tolist()}（{zero_point.dtype}）" if isinstance(zero_point, torch.Tensor) else zero_point
            )
            problems.append(f"{title}：zero point 應該是 {want.numel()} 個 0（int32），你的是 {shown}")
    return problems


DERIVE = Practice(
    "derive_bias_qparams",
    "寫 derive_bias_qparams(obs_or_fqs)：obs_or_fqs 是 [activation 的 observer, weight 的 observer]（已經看過資料），"
    "回傳 bias 的 (scale, zero_point)。檢查用一個 zero point 不是 0 的 activation observer，"
    "配上一個 per-tensor 與一個 per-channel（3 個 channel）的 weight observer。",
    "import torch\n\n\ndef derive_bias_qparams(obs_or_fqs):\n    act, weight = obs_or_fqs\n    raise NotImplementedError()\n",
    _check_derive,
    "兩個 observer 各自 calculate_qparams() 得到 (scale, zero_point)。int32 累加器的一格是 s_act · s_w（相乘，"
    "per-channel 時每個 channel 一個）；bias 是 symmetric，zero point 全是 0，和 scale 一樣多個，dtype 是 int32。",
    "import torch\n\n\n"
    "def derive_bias_qparams(obs_or_fqs):\n"
    "    act, weight = obs_or_fqs\n"
    "    act_scale, _ = act.calculate_qparams()\n"
    "    weight_scale, _ = weight.calculate_qparams()\n"
    "    scale = (act_scale * weight_scale).to(torch.float32)\n"
    "    return scale, torch.zeros_like(scale, dtype=torch.int32)\n",
    "activation 的 zero point 在累加前就從 q_x 減掉了，累加器裡沒有它：所以 bias 的 zero point 是 0。",
)


_BIAS_CASES = (
    # (title, b, act_scale, weight_scale): the product is 2^-13, so b / scale is exact
    ("b = [0.75, -0.3, 0.01]", torch.tensor([0.75, -0.3, 0.01]), 2**-6, 2**-7),
    ("b = [-1e6, 1e6, 0.5]（float64）", torch.tensor([-1e6, 1e6, 0.5], dtype=torch.float64), 2**-6, 2**-7),
)


def _check_quantize_bias(quantize_bias: Any) -> list[str]:
    problems = []
    for title, b, act_scale, weight_scale in _BIAS_CASES:
        want = torch.round(b.double() / (act_scale * weight_scale)).clamp(-(2**31), 2**31 - 1).to(torch.int32)
        got = quantize_bias(b.clone(), act_scale, weight_scale)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.int32 or not torch.equal(got, want):
            shown = f"{got.tolist()}（{got.dtype}）" if isinstance(got, torch.Tensor) else repr(got)
            problems.append(f"{title}，s_act = 2⁻⁶，s_w = 2⁻⁷：應該是 {want.tolist()}（torch.int32），你的是 {shown}")
    return problems


QUANTIZE_BIAS = Practice(
    "quantize_bias",
    "寫 quantize_bias(b, act_scale, weight_scale)：把 fp32 的 bias b 量化成 int32 的 q_b，scale 是 act_scale * weight_scale，"
    "zero point 是 0，超出整數範圍的停在端點。檢查用 s_act = 2⁻⁶、s_w = 2⁻⁷ 的兩組 bias，一組是一般的值，一組大到超出範圍。",
    "import torch\n\n\ndef quantize_bias(b, act_scale, weight_scale):\n    raise NotImplementedError()\n",
    _check_quantize_bias,
    "先算 b / (act_scale * weight_scale) 再 torch.round：0.75 是 6144 格，遠超過 int8 也超過 weight 的 [-127, 127]。"
    "範圍要用 int32 完整的 [-2³¹, 2³¹ − 1]，下限是 -(2**31)，最後 .to(torch.int32)。",
    "import torch\n\n\n"
    "def quantize_bias(b, act_scale, weight_scale):\n"
    "    q = torch.round(b / (act_scale * weight_scale))\n"
    "    return q.clamp(-(2**31), 2**31 - 1).to(torch.int32)\n",
    "DerivedQuantizationSpec 的 dtype=torch.int32、quant_min=-(2**31)、quant_max=2**31 - 1 說的就是這個範圍。",
)


def _weighted_graph() -> Graph:
    """An input named like a linear; a conv2d and a linear named otherwise; a conv_transpose2d, a bilinear upsample,
    a mean named linear_2 and a relu named conv_relu: only the conv2d and the linear are weighted."""
    aten = torch.ops.aten
    graph = Graph()

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    image = graph.placeholder("linear_in")
    w1, w2, w3 = (graph.create_node("get_attr", f"w{i}", name=f"conv_w{i}") for i in (1, 2, 3))
    stem = op(aten.conv2d.default, "stem", image, w1)
    act = op(aten.relu.default, "conv_relu", stem)
    up = op(aten.conv_transpose2d.input, "up", act, w2)
    resized = op(aten.upsample_bilinear2d.vec, "resize", up, None, False, [2.0, 2.0])
    pooled = op(aten.mean.dim, "linear_2", resized, [2, 3])
    head = op(aten.linear.default, "head", pooled, w3)
    graph.output(head)
    return graph


def _check_is_weighted(is_weighted: Any) -> list[str]:
    problems = []
    for node in _weighted_graph().nodes:
        want = node.op == "call_function" and node.target in WEIGHTED
        got = is_weighted(node)
        if bool(got) is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={node.target}）：應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_WEIGHTED = Practice(
    "is_weighted",
    "寫 is_weighted(node)：node 是不是 BiasQuantizer 要標的 op，也就是 conv2d 或 linear？看 node 做什麼，不看它叫什麼。"
    "檢查用一張手工建的圖：名叫 linear_in 的輸入、改過名字的 conv2d 與 linear、conv_transpose2d、"
    "upsample_bilinear2d，和名字裡有 linear、conv 的別種 op。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\nLINEAR = torch.ops.aten.linear.default\n\n\n"
    "def is_weighted(node):\n    raise NotImplementedError()\n",
    _check_is_weighted,
    'node 做什麼寫在 node.op（"call_function" 才是呼叫 op）和 node.target（哪一個 op）。'
    "直接比對 target 本身是不是 CONV 或 LINEAR，兩種都要；不要比對名稱或 target 的字串。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\nLINEAR = torch.ops.aten.linear.default\n\n\n"
    "def is_weighted(node):\n"
    '    return node.op == "call_function" and node.target in (CONV, LINEAR)\n',
    "conv_transpose2d 的 weight 排法是 (in, out)，upsample_bilinear2d 沒有 weight：字串裡有 conv、linear 不代表引數是 (x, weight, bias)。",
)


def _aten_graph() -> tuple[Graph, Any]:
    """A new graph and a helper that adds a call_function node of a given name."""
    graph = Graph()

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    return graph, op


def _constant(graph: Graph, name: str) -> Node:
    return graph.create_node("get_attr", name, name=name)


def _with_bias_or_not() -> Graph:
    """Two linears and two conv2d, with a bias and without: a linear without one has only (x, weight); a conv2d
    without one has None third, then its stride and padding."""
    aten = torch.ops.aten
    graph, op = _aten_graph()
    x = graph.placeholder("x")
    image = graph.placeholder("image")
    fc = op(aten.linear.default, "fc", x, _constant(graph, "fc_w"), _constant(graph, "fc_b"))
    op(aten.linear.default, "fc_no_bias", fc, _constant(graph, "fc2_w"))
    conv_b = _constant(graph, "conv_b")
    conv = op(aten.conv2d.default, "conv", image, _constant(graph, "conv_w"), conv_b, [1, 1], [1, 1])
    op(aten.conv2d.default, "conv_no_bias", conv, _constant(graph, "conv2_w"), None, [1, 1], [1, 1])
    return graph


def _called(function: Any, *args: Any) -> tuple[Any, str]:
    """What ``function(*args)`` returned, and '' (or None and what it raised, in words); a stub's
    NotImplementedError goes on up."""
    try:
        return function(*args), ""
    except NotImplementedError:
        raise
    except Exception as error:  # the student's code raised on this node: say where
        return None, f"{type(error).__name__}: {error}"


def _check_bias_input(bias_input: Any) -> list[str]:
    problems = []
    for node in _with_bias_or_not().nodes:
        if node.op != "call_function":
            continue
        third = node.args[2] if len(node.args) > 2 else None
        want = third.name if isinstance(third, Node) else None
        got, raised = _called(bias_input, node)
        args = ", ".join(a.name if isinstance(a, Node) else repr(a) for a in node.args)
        if raised:
            problems.append(f"{node.name}（args = ({args})）：你的程式出錯 {raised}；應該回傳 {want}")
            continue
        mine = got.name if isinstance(got, Node) else got
        if mine != want or (want is not None and not isinstance(got, Node)):
            problems.append(
                f"{node.name}（args = ({args})）：應該回傳 {want if want is None else 'node ' + want}，你的是 {got!r}"
            )
    return problems


BIAS_INPUT = Practice(
    "bias_input",
    "寫 bias_input(node)：node 是 conv2d 或 linear，回傳它的 bias 輸入 node；沒有 bias 的回傳 None。"
    "檢查用一張手工建的圖：有 bias 的 linear 與 conv2d，bias=False 的 linear（args 只有 (x, weight)），"
    "和 bias=False 的 conv2d（第三個引數是 None，後面還有 stride、padding）。",
    "from torch.fx import Node\n\n\ndef bias_input(node):\n    raise NotImplementedError()\n",
    _check_bias_input,
    "bias=False 的層，export 出來的 node.args 可能只有兩個（取 node.args[2] 就 IndexError），"
    "也可能第三個是 None、後面還有別的引數。先看 len(node.args) 夠不夠，再看第三個是不是 Node。",
    "from torch.fx import Node\n\n\n"
    "def bias_input(node):\n"
    "    if len(node.args) < 3:  # linear(x, weight)：沒有第三個引數\n"
    "        return None\n"
    "    third = node.args[2]\n"
    "    return third if isinstance(third, Node) else None  # conv2d(x, weight, None, ...)\n",
    "沒有 bias 的層照樣要標 activation、weight 與輸出，只是少了 bias 那一項。",
)


class _Derived:
    """What ``bias_from(edges)`` makes in the practice: a stand-in for a DerivedQuantizationSpec."""

    def __init__(self, edges: Any) -> None:
        self.edges = edges

    def __repr__(self) -> str:
        return f"bias_from({_edges_text(self.edges)})"


def _edge_text(edge: Any) -> str:
    if isinstance(edge, tuple) and len(edge) == 2 and all(isinstance(n, Node) for n in edge):
        return f"({edge[0].name}, {edge[1].name})"
    return edge.name if isinstance(edge, Node) else repr(edge)


def _edges_text(edges: Any) -> str:
    return "[" + ", ".join(map(_edge_text, edges)) + "]" if isinstance(edges, list | tuple) else repr(edges)


def _two_heads_and_a_chain() -> Graph:
    """x read by two linears (fc_a, fc_b); fc_a → relu → fc_c. Every linear is (x, weight, bias)."""
    aten = torch.ops.aten
    graph, op = _aten_graph()
    x = graph.placeholder("x")

    def linear(name: str, source: Node) -> Node:
        return op(aten.linear.default, name, source, _constant(graph, f"{name}_w"), _constant(graph, f"{name}_b"))

    fc_a = linear("fc_a", x)
    linear("fc_b", x)
    linear("fc_c", op(aten.relu.default, "relu", fc_a))
    return graph


def _check_bias_qspec_map(bias_qspec_map: Any) -> list[str]:
    act, weight = "act", "weight"
    problems = []
    for node in _two_heads_and_a_chain().nodes:
        if node.target != torch.ops.aten.linear.default:
            continue
        x, w, b = node.args
        got, raised = _called(bias_qspec_map, node, act, weight, _Derived)
        if raised:
            problems.append(f"{node.name}：你的程式出錯 {raised}")
            continue
        if not isinstance(got, dict):
            problems.append(f"{node.name}：應該回傳 input_qspec_map（一個 dict），你的是 {got!r}")
            continue
        built: list[tuple[Node, Node]] = []
        for source, spec in got.items():
            if isinstance(spec, _Derived) and isinstance(spec.edges, list | tuple):
                missing = [
                    e for e in spec.edges if isinstance(e, tuple) and e in [(x, node), (w, node)] and e not in built
                ]
                if missing:
                    problems.append(
                        f"{node.name}：bias 排在 {'、'.join(_edge_text(e) for e in missing)} 前面，prepare_pt2e 照 dict 的順序"
                        f"建 observer，建到 bias 時它依賴的邊還沒有 observer（KeyError: {_edge_text(missing[0])}）"
                    )
            if isinstance(source, Node):
                built.append((source, node))
        if set(got) != {x, w, b}:
            shown = [getattr(k, "name", k) for k in got]
            problems.append(f"{node.name}：key 應該是它的三個輸入 {x.name}、{w.name}、{b.name}，你的是 {shown}")
            continue
        if got[x] != act or got[w] != weight:
            problems.append(f"{node.name}：{x.name} 要配 act、{w.name} 要配 weight，你的是 {got[x]!r}、{got[w]!r}")
        spec = got[b]
        want = [(x, node), (w, node)]
        if not isinstance(spec, _Derived):
            problems.append(f"{node.name}：bias（{b.name}）的規格要用 bias_from(edges) 做，你的是 {spec!r}")
        elif not isinstance(spec.edges, list | tuple) or list(spec.edges) != want:
            problems.append(
                f"{node.name}：bias 依賴的邊應該是 {_edges_text(want)}（這個 op 自己的 activation 與 weight 輸入邊，"
                f"照這個順序），你的是 {_edges_text(spec.edges)}"
            )
    return problems


BIAS_QSPEC_MAP = Practice(
    "bias_qspec_map",
    "寫 bias_qspec_map(node, act, weight, bias_from)：node 是 linear(x, w, b)，回傳它的 input_qspec_map："
    "x 配 act、w 配 weight，b 配 bias_from(edges) 做出來的規格，edges 是 bias 依賴的兩條邊，依序是 activation 的、weight 的。"
    "prepare_pt2e 照 dict 的順序建 observer。檢查用一張手工建的圖：x 被 fc_a、fc_b 兩個 linear 讀，fc_a → relu → fc_c。",
    "def bias_qspec_map(node, act, weight, bias_from):\n    x, w, b = node.args\n    raise NotImplementedError()\n",
    _check_bias_qspec_map,
    "一條邊是 (上游 node, 讀它的 op)：bias 依賴的是 node 自己的兩條輸入邊 (x, node) 與 (w, node)，不是上游 op 的邊。"
    "bias 的規格建的時候，這兩條邊必須已經有 observer：dict 裡先放 x 與 w，最後才放 b。",
    "def bias_qspec_map(node, act, weight, bias_from):\n"
    "    x, w, b = node.args\n"
    "    qspec_map = {x: act, w: weight}  # bias 依賴的兩條邊先建\n"
    "    qspec_map[b] = bias_from([(x, node), (w, node)])  # 最後才是 bias\n"
    "    return qspec_map\n",
    "同一個 x 被好幾個 op 讀時，每個 op 的 (x, op) 是不同的邊、有各自的 observer：bias 要的是自己這一條。"
    "在 BiasQuantizer 裡，bias_from(edges) 就是 DerivedQuantizationSpec(derived_from=edges, ...)。",
)


def _claimed_relu_and_two_linears() -> tuple[Graph, Any]:
    """image → relu (claimed by another Quantizer: int8 [-60, 60] output) → fc → head; and that Quantizer's spec."""
    from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec

    theirs = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-60,
        quant_max=60,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    aten = torch.ops.aten
    graph, op = _aten_graph()
    relu = op(aten.relu.default, "relu", graph.placeholder("image"))
    relu.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=theirs, _annotated=True)
    fc = op(aten.linear.default, "fc", relu, _constant(graph, "fc_w"))
    graph.output(op(aten.linear.default, "head", fc, _constant(graph, "head_w")))
    return graph, theirs


def _labels(graph: Graph) -> dict[str, Any]:
    """Every node's label, as what it says (the spec objects compared by equality)."""
    from common.pt2e import ANNOTATION_KEY

    found = {}
    for node in graph.nodes:
        label = node.meta.get(ANNOTATION_KEY)
        if label is not None:
            found[node.name] = (dict(label.input_qspec_map), label.output_qspec, label._annotated)
    return found


def _check_label_weighted(label_weighted: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation
    from common.qspecs import act_spec, weight_spec

    graph, _ = _claimed_relu_and_two_linears()
    act, weight = act_spec(), weight_spec(False)
    problems = []
    for node in [n for n in graph.nodes if n.target == torch.ops.aten.linear.default]:
        before = {k: v for k, v in _labels(graph).items() if k != node.name}
        _, raised = _called(label_weighted, node, act, weight)
        if raised:
            problems.append(f"{node.name}：你的程式出錯 {raised}")
            continue
        after = {k: v for k, v in _labels(graph).items() if k != node.name}
        touched = sorted(set(before) | set(after), key=str)
        changed = [k for k in touched if before.get(k) != after.get(k)]
        if changed:
            claimed = [k for k in changed if k in before and before[k][2]]
            problems.append(
                f"標 {node.name} 時改了 {'、'.join(changed)} 的標籤：activation 要標在 {node.name} 自己的輸入邊上"
                f"（input_qspec_map 的 key {node.args[0].name}），不是上游 {node.args[0].name} 的輸出"
                + (f"；{'、'.join(claimed)} 是別的 Quantizer 認領的，不是你的" if claimed else "")
            )
        label = node.meta.get(ANNOTATION_KEY)
        if not isinstance(label, QuantizationAnnotation):
            problems.append(
                f"{node.name}：node.meta[ANNOTATION_KEY] 應該是一個 QuantizationAnnotation，你的是 {label!r}"
            )
            continue
        x, w = node.args[0], node.args[1]
        inputs = dict(label.input_qspec_map)
        if set(inputs) != {x, w} or inputs.get(x) != act or inputs.get(w) != weight:
            shown = ", ".join(
                f"{getattr(k, 'name', k)}: {'act' if v == act else 'weight' if v == weight else v}"
                for k, v in inputs.items()
            )
            problems.append(
                f"{node.name}：input_qspec_map 應該是 {{{x.name}: act, {w.name}: weight}}，你的是 {{{shown}}}"
            )
        if label.output_qspec != act:
            problems.append(f"{node.name}：輸出也要量化，output_qspec 應該是 act，你的是 {label.output_qspec!r}")
    return problems


LABEL_WEIGHTED = Practice(
    "label_weighted",
    "寫 label_weighted(node, act, weight)：替 linear node（args 是 (x, w)）貼標籤：x 與 w 是它的輸入邊，"
    "分別用 act 與 weight；它的輸出也量化，用 act。只改 node 自己的標籤。"
    "檢查用一張手工建的圖：別的 Quantizer 認領的 relu → fc → head。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_weighted(node, act, weight):\n"
    "    x, w = node.args[0], node.args[1]\n"
    "    raise NotImplementedError()\n",
    _check_label_weighted,
    "一張 QuantizationAnnotation 說的是 node 自己的事：input_qspec_map 是讀進來的每條邊（key 是上游 node），"
    "output_qspec 是自己的輸出。上游 relu 的標籤是別人的，不要碰；自己的 output_qspec 也不要留空。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_weighted(node, act, weight):\n"
    "    x, w = node.args[0], node.args[1]\n"
    "    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(\n"
    "        input_qspec_map={x: act, w: weight},  # 自己的兩條輸入邊\n"
    "        output_qspec=act,  # 自己的輸出\n"
    "    )\n",
    "量化的 linear 是 dq → linear → q：輸入邊給 dq、輸出給 q，後端才認得這個 pattern。",
)


def _check_claim_if_free(claim_if_free: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation
    from common.qspecs import act_spec

    graph, theirs = _claimed_relu_and_two_linears()
    relu, fc, head = (n for n in graph.nodes if n.op == "call_function")
    fc.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=theirs)  # a draft nobody claimed
    situations = {
        relu: "已經被別的 Quantizer 認領（_annotated=True）",
        fc: "有一張沒人認領的草稿標籤（_annotated=False）",
        head: "還沒有標籤",
    }
    problems = []
    for node, situation in situations.items():
        before = node.meta.get(ANNOTATION_KEY)
        kept = (before.output_qspec, before._annotated) if before is not None else None
        mine = QuantizationAnnotation(output_qspec=act_spec())
        _, raised = _called(claim_if_free, node, mine)
        if raised:
            problems.append(f"{node.name}（{situation}）：你的程式出錯 {raised}")
            continue
        label = node.meta.get(ANNOTATION_KEY)
        if node is relu:
            if label is not before or (label.output_qspec, label._annotated) != kept:
                problems.append(f"{node.name}（{situation}）：別人認領的 node 不能動，你換掉或改了它的標籤")
            continue
        if not isinstance(label, QuantizationAnnotation) or label.output_qspec != act_spec():
            shown = "還是原本的草稿" if label is before else "沒有標籤" if label is None else f"是 {label!r}"
            problems.append(f"{node.name}（{situation}）：沒人認領就該換成你的 label，它的標籤卻{shown}")
        elif not label._annotated:
            problems.append(
                f"{node.name}（{situation}）：標籤貼了，_annotated 卻還是 False：之後的 Quantizer 會以為沒人負責，把它換掉"
            )
    return problems


CLAIM_IF_FREE = Practice(
    "claim_if_free",
    "寫 claim_if_free(node, label)：node 沒有被認領時，把 label 貼到 node.meta[ANNOTATION_KEY]，並且宣告認領；"
    "已經被別人認領的 node 一點都不動。檢查用三個 node：一個被別的 Quantizer 認領、一個只有沒人認領的草稿標籤、"
    "一個還沒有標籤。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef claim_if_free(node, label):\n    raise NotImplementedError()\n",
    _check_claim_if_free,
    "「有標籤」和「有人認領」是兩回事：認領看的是標籤的 _annotated 是不是 True，草稿（False）照樣換成你的。"
    "貼上之後把 label._annotated 設成 True，後面的 Quantizer 才知道這個 node 有人負責了。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def claim_if_free(node, label):\n"
    "    current = node.meta.get(ANNOTATION_KEY)\n"
    "    if current is not None and current._annotated:\n"
    "        return  # 別人認領了：不動\n"
    "    label._annotated = True  # 宣告：這個 node 由我負責\n"
    "    node.meta[ANNOTATION_KEY] = label\n",
    "BiasQuantizer 在 Quantizer 鏈裡也一樣：跳過的只有 _annotated 為 True 的 node，自己貼的標籤都設 _annotated=True。",
)


_ROWS = torch.tensor([[0.5, -1.27, 0.2, 0.1], [2.54, 0.3, -0.1, 0.0], [-0.127, 0.05, 0.1, 0.02]])
"""A weight of 3 output channels whose largest |w| are 1.27, 2.54 and 0.127."""


def _scales_text(values: Any) -> Any:
    if isinstance(values, torch.Tensor):
        return [float(f"{v:.4g}") for v in values.detach().flatten().tolist()]
    return values


def _check_weight_scales(weight_scales: Any) -> list[str]:
    problems = []
    for per_channel in (True, False):
        want = (_ROWS.abs().amax(dim=1) if per_channel else _ROWS.abs().max().reshape(1)) / 127
        got, raised = _called(lambda flag: weight_scales(flag).scales(_ROWS.clone()), per_channel)
        title = f"WeightScales({per_channel}).scales(w)"
        if raised:
            problems.append(f"{title}：你的程式出錯 {raised}")
            continue
        mine = (
            torch.as_tensor(got, dtype=torch.float32).flatten()
            if isinstance(got, torch.Tensor | float | list)
            else None
        )
        if mine is None or mine.numel() != want.numel() or not torch.allclose(mine, want, rtol=1e-4, atol=0):
            how = "每個 output channel（每一列）一個" if per_channel else "整個 tensor 只有一個"
            problems.append(f"{title}：應該{how}，是 {_scales_text(want)}，你的是 {_scales_text(got)}")
    return problems


WEIGHT_SCALES = Practice(
    "WeightScales",
    "寫 class WeightScales：WeightScales(per_channel) 記下要不要 per-channel；scales(w) 回傳 weight w（形狀 (out, in)）"
    "的 symmetric int8 scale，也就是 max|w| / 127：per_channel=True 時每個 output channel（每一列）一個，"
    "False 時整個 tensor 一個。檢查用同一個 3×4 的 weight，per_channel 分別是 True 與 False。",
    "import torch\n\n\n"
    "class WeightScales:\n"
    "    def __init__(self, per_channel):\n"
    "        raise NotImplementedError()\n\n"
    "    def scales(self, w):\n"
    "        raise NotImplementedError()\n",
    _check_weight_scales,
    "建構時給的 per_channel 要存起來（self.per_channel = per_channel），scales 裡照它決定："
    "True 時對每一列取 w.abs().amax(dim=1)，False 時取整個 tensor 的 w.abs().max()，再除以 127。",
    "import torch\n\n\n"
    "class WeightScales:\n"
    "    def __init__(self, per_channel):\n"
    "        self.per_channel = per_channel  # 記下來，之後每次都照它\n\n"
    "    def scales(self, w):\n"
    "        if self.per_channel:\n"
    "            return w.abs().amax(dim=1) / 127  # 每個 output channel 一個\n"
    "        return w.abs().max().reshape(1) / 127\n",
    "BiasQuantizer 也一樣：__init__ 收到的 per_channel 決定 weight 用哪一種 spec，bias 的 scale 個數也跟著它。",
)


MISCONCEPTIONS = (
    Misconception(
        "derived_before_sources",
        "bias 的規格在它依賴的 observer 之前就建了",
        "prepare_pt2e 照 input_qspec_map 的順序建 observer，建到 DerivedQuantizationSpec 時，derived_from 的兩條邊必須已經有 "
        "observer，不然就是 KeyError: (x, conv2d)。你把 bias 的規格排在最前面（或貼在 bias node 自己的輸出上），"
        "它依賴的邊還沒建好。把 bias 放進 conv / linear 自己的 input_qspec_map，排在 x 與 weight 後面。",
        PLACEMENT,
        public=derived_before_sources,
        practice=BIAS_QSPEC_MAP,
    ),
    Misconception(
        "assumes_bias",
        "以為每個 conv / linear 都有 bias",
        "bias=False 的 conv 與 linear，export 出來的 node.args 只有 (x, weight) 兩個，node.args[2] 不存在，"
        "取它就出錯。先看 len(node.args) > 2 而且它是 Node，才標 bias；沒有 bias 的層照樣標 activation、weight 與輸出。",
        RULES,
        public=bias_assumed,
        practice=BIAS_INPUT,
    ),
    Misconception(
        "by_node_name",
        "用 node 名稱找 conv 與 linear",
        "node 的名字只是標記：pass 改過名字之後，叫 mean 的可能是 linear、叫 linear 的可能是 mean，"
        "名叫 linear 的也可能只是模型的輸入。照名字找，會標到不是 conv / linear 的 node、漏掉真正的那些。"
        '要用 node.op == "call_function" 而且 node.target 是 CONV 或 LINEAR 判斷。',
        BY_TARGET,
        public=fooled_by_names,
        practice=IS_WEIGHTED,
    ),
    Misconception(
        "target_substring",
        "用 target 字串裡有沒有 conv / linear 判斷",
        "str(node.target) 裡有 conv 或 linear 的 op 不只 conv2d 與 linear：conv_transpose2d、upsample_bilinear2d 也有，"
        "它們的引數排法不同，當成 (x, weight, bias) 來標就會標錯或出錯。直接比對 node.target in (CONV, LINEAR)。",
        BY_TARGET,
        public=fooled_by_targets,
        practice=IS_WEIGHTED,
    ),
    Misconception(
        "one_kind_only",
        "只處理了 conv 或只處理了 linear",
        "BiasQuantizer 要標所有 conv2d 與 linear：兩者的輸入順序都是 (x, weight, bias)，規則完全一樣。"
        "你的程式只認得其中一種，另一種的 activation、weight、bias 與輸出都沒有量化。判斷時兩個 target 都要比對。",
        RULES,
        public=one_kind_only,
        practice=IS_WEIGHTED,
    ),
    Misconception(
        "act_on_producer_output",
        "activation 標在上游的輸出，不是輸入邊",
        "annotate_output_qspec(x, ...) 改的是上游 node 的輸出，它的每個 consumer 都會讀到量化後的值，"
        "上游如果已經被別的 Quantizer 認領，你還改了別人的標籤。conv / linear 要的是自己的輸入邊："
        "x 放進自己的 input_qspec_map，derived_from 也寫邊 (x, node)。",
        EDGE_AND_OUTPUT,
        public=from_output,
        practice=LABEL_WEIGHTED,
    ),
    Misconception(
        "derived_from_wrong_edge",
        "derived_from 寫成了別的邊",
        "bias 的 scale 要用同一個 op 的 s_act 與 s_w：derived_from 的兩條邊是 (x, node) 與 (weight, node)，"
        "正好是同一張標籤上另外兩個 key。你寫成了上游 op 的輸入邊，拿到的是別處的 observer，scale 就不是這個 op 的乘積。",
        PLACEMENT,
        public=from_other_edges,
        practice=BIAS_QSPEC_MAP,
    ),
    Misconception(
        "skips_unclaimed",
        "有標籤就跳過，不看 _annotated",
        "有標籤不代表有人認領：_annotated 是 False 的標籤是沒有人負責的草稿，照規則重貼才對。"
        "要跳過的只有 _annotated 是 True 的 node。",
        CLAIMS,
        public=skipped_the_labelled,
        practice=CLAIM_IF_FREE,
    ),
    Misconception(
        "forgets_annotated",
        "標完沒有設 _annotated = True",
        "貼完標籤要設 _annotated=True，這是告訴後面的 Quantizer「這個 node 有人負責了」。"
        "沒有設，之後再跑的 Quantizer 會以為沒人標過，把你的標籤換掉。",
        WITH_XNNPACK,
        public=relabelled_everything,
        practice=CLAIM_IF_FREE,
    ),
    Misconception(
        "no_output_spec",
        "忘了標 conv / linear 的輸出",
        "一個量化的 conv / linear 是 dq → op → q：輸入與 bias 之外，輸出也要量化，後端才認得這個 pattern。"
        "你只標了輸入邊，output_qspec 是空的，輸出就留在 fp32。QuantizationAnnotation 要同時給 output_qspec=act_spec()。",
        RULES,
        public=no_output_label,
        practice=LABEL_WEIGHTED,
    ),
    Misconception(
        "bias_observed",
        "bias 用一般的 QuantizationSpec 自己觀察",
        "你可能以為 bias 和 weight 一樣，讓 observer 看它自己的數值決定 scale。可是 bias 要直接加進單位是 s_act · s_w "
        "的 int32 累加器，scale 只能是這個乘積，不是看 bias 算出來的。改用 DerivedQuantizationSpec，"
        "由 derive_qparams_fn 從 activation 與 weight 的 observer 算出 scale。",
        PRODUCT,
        public=observed_bias,
        practice=DERIVE,
    ),
    Misconception(
        "bias_int8",
        "bias 也量化成 int8",
        "bias 的 scale 是 s_act · s_w，非常小，q_b = round(b / scale) 動輒好幾千，int8 的 [-128, 127] 裝不下。"
        "bias 要加進 int32 的累加器，所以 dtype 是 torch.int32、範圍 [-2³¹, 2³¹ − 1]。",
        PRODUCT,
        public=bias_int8,
        practice=QUANTIZE_BIAS,
    ),
    Misconception(
        "bias_small_range",
        "bias 的整數範圍照抄了 weight 的",
        "dtype 寫了 int32，quant_min / quant_max 卻是 weight 的 [-127, 127]：bias 除以很小的 s_act · s_w 之後遠超過 127，"
        "超出的部分全被截斷，反量化回來和原本的 bias 差很多。bias 的範圍要用 int32 的 [-2³¹, 2³¹ − 1]。",
        PRODUCT,
        public=small_range,
        practice=QUANTIZE_BIAS,
    ),
    Misconception(
        "range_without_min",
        "bias 的範圍少了 -2³¹",
        "你可能照 weight 的 symmetric 習慣，把範圍寫成 [-(2³¹ − 1), 2³¹ − 1]。題目要的是 int32 的完整範圍 "
        "[-2³¹, 2³¹ − 1]，也就是 quant_min=-(2**31)。",
        RULES,
        public=range_without_min,
        practice=QUANTIZE_BIAS,
    ),
    Misconception(
        "bias_zero_point",
        "bias 的 zero point 沿用 activation 的",
        "bias 是 symmetric 的：int32 的 q_b 直接加進累加器，累加器裡沒有 zero point 可以抵銷，所以 bias 的 zero point 一律是 0。"
        "derive_qparams_fn 回傳的 zero point 要是全 0 的 int32 tensor，不要沿用 activation 的 zero point。",
        PRODUCT,
        public=zero_point_not_zero,
        practice=DERIVE,
    ),
    Misconception(
        "weight_always_per_tensor",
        "沒有照 per_channel 量化 weight",
        "per_channel=True 時，weight 要用 weight_spec(per_channel=True)，每個 output channel 一個 scale；bias 也跟著 "
        "per-channel。你的程式不看 per_channel，weight 永遠是 per-tensor。把 self.per_channel 傳給 weight_spec，"
        "bias 的 qscheme 也照它選。",
        PER_CHANNEL,
        public=weight_per_tensor,
        practice=WEIGHT_SCALES,
    ),
    Misconception(
        "one_scale_per_channel",
        "per-channel 的 weight 配了一個 bias scale",
        "weight 是 per-channel 時，第 c 個 output channel 的累加器單位是 s_act · s_w[c]，每個 channel 都不一樣。"
        "你只給 bias 一個 scale（例如取最大的 s_w），大部分 channel 的單位就對不上。bias 也要 per-channel："
        "qscheme=torch.per_channel_symmetric、ch_axis=0，scale 直接用 act_scale * weight_scale。",
        PER_CHANNEL,
        public=one_scale_for_channels,
        practice=DERIVE,
    ),
    Misconception(
        "scale_act_only",
        "bias 的 scale 只用了 s_act",
        "整數累加器的單位是 s_act · s_w：每一項都是 activation 與 weight 的整數相乘。只用 s_act 當 bias 的 scale，"
        "q_b 的單位和累加器差了一個 s_w 倍。scale 要是兩者的乘積 act_scale * weight_scale。",
        PRODUCT,
        public=scale_made_of("act_scale"),
        practice=DERIVE,
    ),
    Misconception(
        "scale_weight_only",
        "bias 的 scale 只用了 s_w",
        "你可能以為 bias 屬於 weight，和 weight 共用 qparams 就好。可是 bias 加進的是 s_act · s_w 單位的累加器，"
        "只用 s_w 差了一個 s_act 倍。scale 要是兩者的乘積 act_scale * weight_scale。",
        PRODUCT,
        public=scale_made_of("weight_scale"),
        practice=DERIVE,
    ),
    Misconception(
        "scale_sum",
        "bias 的 scale 寫成 s_act + s_w",
        "x · w 反量化是 s_act (q_x − z_x) · s_w q_w，兩個 scale 是相乘，不是相加。"
        "bias 的 scale 要是乘積 act_scale * weight_scale。",
        PRODUCT,
        public=scale_made_of("act_scale + weight_scale"),
        practice=DERIVE,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "bias_quantizer",
        TITLE,
        ("BiasQuantizer",),
        {
            "conv_relu_per_tensor": conv_relu_per_tensor,
            "mlp_per_channel": mlp_per_channel,
            "small_cnn_per_channel": small_cnn_per_channel,
            "biasless_per_tensor": biasless_per_tensor,
            "mlp_between_two": mlp_between_two,
            "small_cnn_after_pass": small_cnn_after_pass,
            "upsample_per_tensor": upsample_per_tensor,
        },
        misconceptions=MISCONCEPTIONS,
    ),
)
