"""Public cases of M06-1 per-tensor 與 per-channel：SQNR (sqnr, layer_sqnr) on the chapter's own models.

Also the helpers the hidden cases share: reading what the student's functions returned as
decibels (``inf`` as the text ``"inf"``, since evidence is JSON) and naming its type, a
symmetric fake-quantizer for making test tensors, a prepared / converted pair of a model, and
whether a call left the graphs it was handed as they were.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

SQNR_TITLE = "sqnr：整個 tensor 或逐個 channel 的 SQNR（dB）"
LAYER_TITLE = "layer_sqnr：prepared 與 converted 逐層比較的 SQNR 表"


def db(value: Any, what: str) -> float | str:
    """One SQNR the student returned: a float (a one-element tensor is accepted), ``inf`` as ``"inf"``."""
    if type(value) is torch.Tensor and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise EvidenceError(f"{what}應該是 float，看到 {type(value).__name__}")
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def db_list(value: Any, what: str) -> list[float | str]:
    """A list of SQNRs (one per slice): a list / tuple of floats, or a one-dimensional float tensor."""
    if type(value) is torch.Tensor and value.dim() == 1 and value.dtype.is_floating_point:
        value = [float(v) for v in value]
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 float 的 list，看到 {type(value).__name__}")
    if len(value) > 4096:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    return [db(v, f"{what}的第 {i} 項") for i, v in enumerate(value)]


def kind_of(value: Any) -> str:
    """What a student's function returned, in words for a message: ``float``, ``list[float]``, ``tensor（shape [16]）``…

    Read on the grader's side from the recorded answer, so only what a recording keeps counts: a tensor stays a
    tensor, a tuple a tuple; a NumPy scalar arrives as the Python number it holds.
    """
    kind = type(value)
    if kind is float:
        return "float"
    if kind is torch.Tensor:
        return f"tensor（shape {list(value.shape)}）"
    if kind is list:
        inner = [kind_of(item) for item in value[:64]]
        wrong = next((k for k in inner if k != "float"), None)
        return "list[float]" if wrong is None else f"list[{wrong}]"
    if kind is tuple:
        return "tuple"
    return kind.__name__


def graph_state(gm: GraphModule) -> list[Any]:
    """A graph's nodes as text (name, op, target, arguments): equal before and after a call that left it alone."""
    return [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


def fake_quant(t: torch.Tensor, dim: int | None = None, bits: int = 8) -> torch.Tensor:
    """Symmetric fake quantization of ``t``: one scale for the tensor, or one per slice along ``dim``."""
    qmax = 2 ** (bits - 1) - 1
    if dim is None:
        scale = float(t.abs().max()) / qmax
        return torch.fake_quantize_per_tensor_affine(t, scale, 0, -qmax, qmax)
    scales = t.abs().movedim(dim, 0).flatten(1).amax(dim=1) / qmax
    zeros = torch.zeros(len(scales), dtype=torch.int32)
    return torch.fake_quantize_per_channel_affine(t, scales, zeros, dim % t.dim(), -qmax, qmax)


def outlier_weight(seed: int, out_channels: int, in_channels: int, factor: float) -> torch.Tensor:
    """A conv weight ``(out, in, 3, 3)`` whose channel ``seed % out`` is ``factor`` times larger."""
    (weight,) = seeded_inputs(seed, (out_channels, in_channels, 3, 3))
    weight[seed % out_channels] *= factor
    return weight


def quantized_pair(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, seed: int, calibrate: int = 2
) -> tuple[GraphModule, GraphModule]:
    """``(prepared, converted)`` of ``model``: export, prepare, calibrate on seeded batches, convert a copy."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    return prepared, convert_pt2e(copy.deepcopy(prepared))


def node_kinds(gm: GraphModule) -> dict[str, str]:
    """Every node of ``gm`` by name: ``op`` / ``q/dq`` for call_function nodes, else its op."""
    kinds = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            kinds[node.name] = "q/dq" if str(node.target).startswith("quantized_decomposed.") else "op"
        else:
            kinds[node.name] = str(node.op)
    return kinds


def describe_table(
    ns: Namespace, prepared: GraphModule, converted: GraphModule, inputs: tuple, kinds: bool = True
) -> dict[str, Any]:
    """``layer_sqnr(prepared, converted, inputs)`` as ``{"table": {name: dB}}``.

    With ``kinds``, also ``"kinds"``: what every node of ``converted`` is (read before the call),
    so that a check can say what an extra entry of the table was. ``"changed"`` names the graphs the
    call left different (it should only read them).
    """
    described = {"kinds": node_kinds(converted)} if kinds else {}
    before = [graph_state(prepared), graph_state(converted)]
    result = ns["layer_sqnr"](prepared, converted, inputs)
    changed = [
        name
        for name, gm, state in zip(("prepared", "converted"), (prepared, converted), before, strict=True)
        if graph_state(gm) != state
    ]
    if type(result) is not dict:
        raise EvidenceError(f"layer_sqnr 應該回傳 dict，看到 {type(result).__name__}")
    table = {}
    for key, number in result.items():
        if type(key) is Node:  # a node stands for its name
            key = key.name
        if type(key) is not str:
            raise EvidenceError(f"layer_sqnr 的 key 應該是 node 的名字（str），看到 {type(key).__name__}")
        table[safe_text(key, 80)] = db(number, f"layer_sqnr 的 {safe_text(key, 40)} ")
    return {"table": table, "changed": changed, **described}


# --- public cases -------------------------------------------------------------------------------


def sqnr_weight(ns: Namespace, seed: int) -> Any:
    """A conv weight with an outlier channel, quantized per-tensor and per-channel: whole and per channel."""
    weight = outlier_weight(seed, 6, 4, 12.0)
    result = {}
    for name, test in (("per_tensor", fake_quant(weight)), ("per_channel", fake_quant(weight, dim=0))):
        result[name] = {
            "whole": db(ns["sqnr"](weight, test), "sqnr(weight, test) "),
            "per_channel": db_list(ns["sqnr"](weight, test, dim=0), "sqnr(weight, test, dim=0) "),
        }
    return result


def sqnr_activation(ns: Namespace, seed: int) -> Any:
    """A non-negative activation (N, C, H, W) and its 6-bit version, per channel (dim=1); a copy is inf."""
    (x,) = seeded_inputs(seed + 1, (2, 3, 4, 4))
    x = torch.relu(x) + 0.5
    test = fake_quant(x, bits=6)
    return {
        "whole": db(ns["sqnr"](x, test), "sqnr(x, test) "),
        "per_channel": db_list(ns["sqnr"](x, test, dim=1), "sqnr(x, test, dim=1) "),
        "copy": db(ns["sqnr"](x, x.clone()), "sqnr(x, x.clone()) "),
    }


def sqnr_close(ns: Namespace, seed: int) -> Any:
    """Two float64 tensors near 1000 that differ by about 1e-5: float32 cannot tell them apart."""
    (base,) = seeded_inputs(seed + 2, (400,))
    (noise,) = seeded_inputs(seed + 3, (400,))
    reference = 1000.0 + base.double()
    return db(ns["sqnr"](reference, reference + 1e-5 * noise.double()), "sqnr(reference, test) ")


def sqnr_types(ns: Namespace, seed: int) -> Any:
    """What ``sqnr`` returns: a Python float, and with ``dim`` a list of Python floats."""
    (reference,) = seeded_inputs(seed + 4, (3, 5))
    test = fake_quant(reference, bits=4)
    return {"whole": kind_of(ns["sqnr"](reference, test)), "per_slice": kind_of(ns["sqnr"](reference, test, dim=0))}


def layers_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn quantized with the XNNPACKQuantizer (per-tensor weights)."""
    from common.models import get_model
    from common.pt2e import get_xnnpack_quantizer

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=False)
    prepared, converted = quantized_pair(get_model("small_cnn"), inputs, quantizer, seed)
    return describe_table(ns, prepared, converted, inputs, kinds=False)


def layers_residual(ns: Namespace, seed: int) -> Any:
    """residual (BN folded, an add of two tensors) with per-channel weights."""
    from common.models import get_model
    from common.pt2e import get_xnnpack_quantizer

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=True)
    prepared, converted = quantized_pair(get_model("residual"), inputs, quantizer, seed)
    return describe_table(ns, prepared, converted, inputs, kinds=False)


PUBLIC = declare(
    __name__,
    Exercise(
        "sqnr",
        SQNR_TITLE,
        ("sqnr",),
        {"outlier_weight": sqnr_weight, "activation": sqnr_activation, "close": sqnr_close, "types": sqnr_types},
    ),
    Exercise(
        "layer_sqnr",
        LAYER_TITLE,
        ("layer_sqnr",),
        {"small_cnn": layers_small_cnn, "residual": layers_residual},
    ),
)
