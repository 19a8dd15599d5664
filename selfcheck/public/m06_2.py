"""Public cases of M06-2 numeric debugger (layer_drops, worst_layer) on the chapter's own models.

Also what the hidden cases share: ``BitsQuantizer`` (int16 everywhere, fewer weight bits on the
layers it is told, fewer output bits on the ops without weights it is told), the numeric debugger's comparison of a prepared model (the reference: BN
folded, observers only look) with its converted copy, and how the student's answers are read.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.compare import DECIBELS
from selfcheck.evidence import EvidenceError, safe_text

TITLE = "layer_drops 與 worst_layer：numeric debugger 的表裡，SQNR 掉最多的那一層"

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


def _specs(bits: int) -> tuple[Any, Any]:
    """int16 activations (practically lossless) and symmetric per-tensor weights with ``bits`` bits."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    act = QuantizationSpec(
        dtype=torch.int16,
        quant_min=-(2**15),
        quant_max=2**15 - 1,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    top = 2 ** (bits - 1) - 1
    weight = QuantizationSpec(
        dtype=torch.int16 if bits > 8 else torch.int8,
        quant_min=-top,
        quant_max=top,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    return act, weight


def _activation_spec(bits: int) -> Any:
    """An affine per-tensor activation spec with ``bits`` bits (int8 storage below 9 bits)."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    return QuantizationSpec(
        dtype=torch.int8 if bits <= 8 else torch.int16,
        quant_min=-(2 ** (bits - 1)),
        quant_max=2 ** (bits - 1) - 1,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def bits_quantizer(bits: dict[str, int], default: int = 16, outputs: dict[str, int] | None = None) -> Any:
    """A Quantizer for every conv2d / linear (activation, weight, output), and for the ops ``outputs`` names.

    Activations are int16 and weights have ``default`` bits, so a layer loses almost nothing,
    except the layers ``bits`` (node name → weight bits) names: those lose what their bits cost.
    ``outputs`` (node name → bits) quantizes the output of an op without weights (an add, a pool)
    with that few bits, its tensor inputs with int16: a culprit that has no weight.
    Cheap MinMax observers, so the cases stay fast.
    """
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer

    few = dict(outputs or {})

    class BitsQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op == "call_function" and node.target in WEIGHTED:
                    act, weight = _specs(bits.get(node.name, default))
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={node.args[0]: act, node.args[1]: weight},
                        output_qspec=act,
                        _annotated=True,
                    )
                elif node.op == "call_function" and node.name in few:
                    act, _ = _specs(default)
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={a: act for a in node.args if isinstance(a, Node)},
                        output_qspec=_activation_spec(few[node.name]),
                        _annotated=True,
                    )
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return BitsQuantizer()


def comparison_of(
    model: torch.nn.Module, batches: list[tuple[torch.Tensor, ...]], quantizer: Any
) -> tuple[dict[Any, Any], GraphModule]:
    """The numeric debugger on ``model``: ``(compare_results(...), prepared)``.

    export → prepare (the reference: BN folded, observers only look) → calibrate on ``batches``
    → convert a copy; loggers on both, the same ``batches`` through both, results compared.
    Comparing on the calibration batches keeps clipping (values outside the observed range)
    out of the picture: every loss comes from the bits a layer was given.
    """
    from torchao.quantization.pt2e import (
        compare_results,
        extract_results_from_loggers,
        prepare_for_propagation_comparison,
    )

    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), batches[0]), quantizer)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
        converted = convert_pt2e(copy.deepcopy(prepared))
        reference = prepare_for_propagation_comparison(prepared)
        actual = prepare_for_propagation_comparison(converted)
        for batch in batches:
            reference(*batch)
            actual(*batch)
    comparison = compare_results(extract_results_from_loggers(reference), extract_results_from_loggers(actual))
    return comparison, prepared


def seeded_batches(seed: int, shape: tuple[int, ...], count: int = 2, positive: bool = False) -> list[tuple]:
    """``count`` single-input batches from ``seed`` (absolute values when ``positive``)."""
    batches = [seeded_inputs(seed * 1000 + i, shape) for i in range(count)]
    return [tuple(t.abs() for t in b) if positive else b for b in batches]


def mean_sqnr(comparison: dict[Any, Any]) -> dict[str, float]:
    """Each compared node's mean SQNR (nodes whose results are numbers), for messages."""
    table = {}
    for info, summary in comparison.items():
        values = [r.sqnr for r in summary.results]
        if values and all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            table[info.name] = round(sum(float(v) for v in values) / len(values), 4)
    return table


def _name(value: Any, what: str) -> str:
    if type(value) is Node:
        return value.name
    if type(value) is not str:
        raise EvidenceError(f"{what}應該回傳 node 的名字（str），看到 {type(value).__name__}")
    return safe_text(value, 80)


def _number(value: Any, what: str) -> float | str:
    if type(value) is torch.Tensor and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise EvidenceError(f"{what}應該是 float，看到 {type(value).__name__}")
    return value if math.isfinite(value) else str(value)


def graph_state(gm: GraphModule) -> list[Any]:
    """A graph's nodes as text (name, op, target, arguments): equal before and after a call that left it alone."""
    return [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


def describe_answers(ns: Namespace, comparison: dict[Any, Any], gm: GraphModule) -> dict[str, Any]:
    """``layer_drops`` and ``worst_layer`` on one comparison, as names and numbers; ``changed`` is True
    when a call left ``gm`` different (the functions should only read it)."""
    before = graph_state(gm)
    drops = ns["layer_drops"](comparison, gm)
    if type(drops) is not dict:
        raise EvidenceError(f"layer_drops 應該回傳 dict，看到 {type(drops).__name__}")
    table = {}
    for key, number in drops.items():
        name = _name(key, "layer_drops 的 key ")
        table[name] = _number(number, f"layer_drops 的 {name} ")
    worst = _name(ns["worst_layer"](comparison, gm), "worst_layer ")
    return {"drops": table, "worst": worst, "changed": graph_state(gm) != before}


# --- public cases -------------------------------------------------------------------------------


def small_cnn_bad_conv(ns: Namespace, seed: int) -> Any:
    """small_cnn with its second conv at 3-bit weights."""
    from common.models import get_model

    batches = seeded_batches(seed, (2, 3, 16, 16))
    comparison, prepared = comparison_of(get_model("small_cnn"), batches, bits_quantizer({"conv2d_1": 3}))
    return describe_answers(ns, comparison, prepared)


def residual_bad_first(ns: Namespace, seed: int) -> Any:
    """residual (BN folded into the convs) with its second conv at 3-bit weights: the add reads it and x."""
    from common.models import get_model

    batches = seeded_batches(seed, (2, 3, 16, 16))
    comparison, prepared = comparison_of(get_model("residual"), batches, bits_quantizer({"conv2d_1": 3}))
    return describe_answers(ns, comparison, prepared)


PUBLIC = declare(
    __name__,
    Exercise(
        "worst_layer",
        TITLE,
        ("layer_drops", "worst_layer"),
        {"small_cnn": small_cnn_bad_conv, "residual": residual_bad_first},
        tolerances={"drops": DECIBELS},
    ),
)
