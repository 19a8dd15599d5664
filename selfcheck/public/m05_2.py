"""Public cases of M05-2 DerivedQuantizationSpec (BiasQuantizer) on the chapter's own models.

Each case quantizes a chapter model with the student's ``BiasQuantizer``, calibrates,
converts, and reads every conv2d / linear back from the converted graph: how its bias is
dequantized (op, dtype, number of scales) and whether the bias scale is s_act · s_w
(rtol 1e-6), its zero points 0, and its dequantized values within half a step of the fp32
bias; plus the bias spec the student wrote (kind, dtype, range, per channel or not, the
edges it derives from, as a sorted set). All of it is the same for any correct solution.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import describe_annotations, getattr_value, qdq_kind

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
    if qdq_kind(x_dq) == "dq" and qdq_kind(w_dq) == "dq":
        product = _scales(gm, x_dq) * _scales(gm, w_dq)
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
    }


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


def quantize(ns: Namespace, model_name: str, per_channel: bool, seed: int) -> dict[str, Any]:
    """The chapter's export → prepare (BiasQuantizer) → calibrate → convert, read op by op."""
    from common.models import IMAGE_SHAPE, INPUT_SHAPES, get_model
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    shape = (4, *INPUT_SHAPES.get(model_name, IMAGE_SHAPE))
    gm = export_module(get_model(model_name).eval(), seeded_inputs(seed, shape))
    prepared = prepare_pt2e(gm, ns["BiasQuantizer"](per_channel=per_channel))
    annotations = describe_annotations(prepared)
    floats: dict[str, torch.Tensor | None] = {}
    bias_names: dict[str, str | None] = {}
    for node in prepared.graph.nodes:
        if node.op == "call_function" and node.target in WEIGHTED:
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
        if node.op == "call_function" and node.target in WEIGHTED:
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
        },
    ),
)
