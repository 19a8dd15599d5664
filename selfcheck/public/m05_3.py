"""Public cases of M05-3 FixedQParams 與整數運算 (int8_linear) on the chapter's own layer.

The layer is section B's ``Linear(16, 6)`` quantized with activations, a per-tensor weight
and the output (bias kept fp32), calibrated and converted. The student's ``int8_linear``
gets int8 inputs and is compared with torchao's reference representation of that quantized
linear (what ``convert_pt2e(..., use_reference_representation=True)`` puts in the graph).
Correct solutions may round differently (1 LSB is allowed), so the evidence is canonical:
dtype, shape, and how many outputs are more than 1 LSB away (0 when right).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError

LINEAR = torch.ops.aten.linear.default


def linear_quantizer() -> Any:
    """Activations int8 affine, weights int8 per-tensor symmetric, bias left fp32 (what the rewrite expects)."""
    from common.pt2e import Quantizer, annotate_input_qspec_map, annotate_output_qspec
    from common.qspecs import act_spec, weight_spec

    class LinearQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op == "call_function" and node.target == LINEAR:
                    annotate_input_qspec_map(node, node.args[0], act_spec())
                    annotate_input_qspec_map(node, node.args[1], weight_spec(per_channel=False))
                    annotate_output_qspec(node, act_spec())
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return LinearQuantizer()


def quantized_layer(seed: int) -> dict[str, Any]:
    """Section B's layer, quantized and converted: its qparams, int8 weight, fp32 bias and int32 bias."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    layer = torch.nn.Linear(16, 6).eval()
    with torch.no_grad():
        layer.bias.add_(0.5)
    prepared = prepare_pt2e(export_module(layer, seeded_inputs(seed, (32, 16))), linear_quantizer())
    with torch.no_grad():
        for step in range(4):
            prepared(*seeded_inputs(seed * 1000 + step, (32, 16)))
    converted = convert_pt2e(prepared)
    linear = next(n for n in converted.graph.nodes if n.op == "call_function" and n.target == LINEAR)
    x_dq, w_dq, bias_node = linear.args
    out_q = next(iter(linear.users))
    params = {
        "x_scale": float(x_dq.args[1]),
        "x_zp": int(x_dq.args[2]),
        "w_scale": float(w_dq.args[1]),
        "out_scale": float(out_q.args[1]),
        "out_zp": int(out_q.args[2]),
    }
    bias = converted.get_parameter(bias_node.target).detach().clone()
    return {
        "params": params,
        "w_q": getattr(converted, w_dq.args[0].target).clone(),
        "bias": bias,
        "b_q": torch.round(bias / (params["x_scale"] * params["w_scale"])).to(torch.int32),
    }


def reference(layer: dict[str, Any], x_q: torch.Tensor) -> torch.Tensor:
    """torchao's reference representation of the quantized linear, on ``x_q``."""
    from torchao.quantization.pt2e.reference_representation_rewrite import _reference_quantized_linear

    p = layer["params"]
    with torch.no_grad():
        out = _reference_quantized_linear(
            x_q,
            torch.tensor(p["x_scale"]),
            torch.tensor(p["x_zp"]),
            -128,
            127,
            layer["w_q"],
            torch.tensor(p["w_scale"]),
            torch.tensor(0),
            -127,
            127,
            layer["bias"],
            torch.tensor(p["out_scale"]),
            torch.tensor(p["out_zp"]),
            -128,
            127,
        )
    return out.to(torch.int32)


def call_int8_linear(ns: Namespace, layer: dict[str, Any], x_q: torch.Tensor) -> Any:
    """The student's ``int8_linear`` on ``layer``'s int8 weight and int32 bias and its qparams (copies of
    the tensors: an answer that writes into them changes nothing else)."""
    p = layer["params"]
    return ns["int8_linear"](
        x_q.clone(),
        layer["w_q"].clone(),
        layer["b_q"].clone(),
        p["x_scale"],
        p["x_zp"],
        p["w_scale"],
        p["out_scale"],
        p["out_zp"],
    )


def judge(ns: Namespace, layer: dict[str, Any], x_q: torch.Tensor) -> dict[str, Any]:
    """dtype, shape, and the number of outputs more than 1 LSB from the reference."""
    out = call_int8_linear(ns, layer, x_q)
    if type(out) is not torch.Tensor:
        raise EvidenceError(f"int8_linear 應該回傳 torch.Tensor，看到 {type(out).__name__}")
    want = reference(layer, x_q)
    record: dict[str, Any] = {"dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape)}
    if tuple(out.shape) == tuple(want.shape):
        record["more_than_1_lsb_off"] = int(((out.detach().to(torch.int64) - want.to(torch.int64)).abs() > 1).sum())
    return record


def typical_inputs(ns: Namespace, seed: int) -> Any:
    """Inputs like the calibration data, quantized with the layer's own input qparams."""
    layer = quantized_layer(seed)
    p = layer["params"]
    data = seeded_inputs(seed + 1, (32, 16))[0]
    x_q = torch.ops.quantized_decomposed.quantize_per_tensor(data, p["x_scale"], p["x_zp"], -128, 127, torch.int8)
    return judge(ns, layer, x_q)


def full_range_inputs(ns: Namespace, seed: int) -> Any:
    """Random int8 inputs over all of [-128, 127] (the chapter's last table): some outputs saturate."""
    layer = quantized_layer(seed)
    generator = torch.Generator().manual_seed(seed)
    return judge(ns, layer, torch.randint(-128, 128, (32, 16), generator=generator, dtype=torch.int8))


PUBLIC = declare(
    __name__,
    Exercise(
        "int8_linear",
        "int8_linear：只用整數運算的 int8 linear",
        ("int8_linear",),
        {"typical_inputs": typical_inputs, "full_range_inputs": full_range_inputs},
    ),
)
