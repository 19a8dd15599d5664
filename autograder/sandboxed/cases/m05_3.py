"""M05-3 FixedQParams 與整數運算: int8_linear against the reference representation on hidden layers."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.fx import Node

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.evidence import EvidenceError, getattr_value, plain
from selfcheck.public.m05_3 import LINEAR, PUBLIC, call_int8_linear, linear_quantizer, reference

KINDS = ("typical", "saturating", "zero_point", "batched")


class FourLinears(nn.Module):
    """One hidden nn.Linear per kind of case, each on its own input (one convert serves all four)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(in_features, out_features) for _ in KINDS)
        with torch.no_grad():  # a bias large enough to matter, and outputs off-centre (output zero point far from 0)
            for layer in self.layers:
                layer.bias.mul_(3).add_(1.0)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(layer(x) for layer, x in zip(self.layers, inputs, strict=True))


def _calibration(kind: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    data = seeded_inputs(seed, shape)[0]
    if kind == "zero_point":  # non-negative data: the input zero point is -128
        return data.abs() + 1.0
    if kind == "saturating":  # small values with two outliers: a wide input scale, a narrow output range
        data = data * 0.2
        data[0, 0], data[1, 1] = 3.0, -3.0
    return data


def reference_output(layer: dict[str, Any]) -> torch.Tensor:
    """The int8 output of torchao's reference representation of a quantized linear on ``layer``.

    ``convert_pt2e(..., use_reference_representation=True)`` replaces ``dq → linear → q`` with
    exactly this function (torchao's ``_reference_quantized_linear``); calling it directly gives the
    same integers without the seconds the graph rewrite takes.
    """
    return reference(layer, layer["x_q"])


@functools.cache
def hidden_layers(seed: int) -> dict[str, dict[str, Any]]:
    """Four hidden linear layers, quantized (q/dq) and converted; the reference representation's output.

    Per kind: the qparams, the int8 input ``x_q``, weight ``w_q``, int32 bias ``b_q``, the fp32 bias and
    the int8 output of the reference representation. ``typical``: inputs like the calibration data;
    ``saturating``: calibration data with two outliers, then full-range int8 inputs, so the outputs
    leave the calibrated range; ``zero_point``: non-negative calibration data (input zero point
    -128) and full-range inputs; ``batched``: a 3-d input. Built once per seed and process.
    Weights come from the global RNG (seeded by the collector).
    """
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    in_features = seed_size(seed, 5, 12)
    model = FourLinears(in_features, in_features - 2).eval()
    shapes = {kind: (2, 3, in_features) if kind == "batched" else (6, in_features) for kind in KINDS}

    def calibration(step: int) -> tuple[torch.Tensor, ...]:
        return tuple(_calibration(kind, shapes[kind], seed * 1000 + 10 * step + i) for i, kind in enumerate(KINDS))

    prepared = prepare_pt2e(export_module(model, calibration(0)), linear_quantizer())
    with torch.no_grad():
        for step in range(3):
            prepared(*calibration(step))
    converted = convert_pt2e(prepared)

    linears = [n for n in converted.graph.nodes if n.op == "call_function" and n.target == LINEAR]
    layers: dict[str, dict[str, Any]] = {}
    generator = torch.Generator().manual_seed(seed + 17)
    for kind, linear in zip(KINDS, linears, strict=True):
        x_dq, w_dq, bias_node = linear.args
        out_q = next(iter(linear.users))
        assert isinstance(x_dq, Node) and isinstance(w_dq, Node) and isinstance(bias_node, Node)
        params = {
            "x_scale": float(x_dq.args[1]),
            "x_zp": int(x_dq.args[2]),
            "w_scale": float(w_dq.args[1]),
            "out_scale": float(out_q.args[1]),
            "out_zp": int(out_q.args[2]),
        }
        bias = getattr_value(converted, bias_node).detach().clone()
        if kind in ("typical", "batched"):
            data = torch.randn(shapes[kind], generator=generator)
            x_q = torch.ops.quantized_decomposed.quantize_per_tensor(
                data, params["x_scale"], params["x_zp"], -128, 127, torch.int8
            )
        else:
            x_q = torch.randint(-128, 128, shapes[kind], generator=generator, dtype=torch.int8)
        w_q = getattr_value(converted, w_dq.args[0]).clone()
        if kind == "saturating":  # two rows aligned with the largest output's weights: it saturates at both ends
            row = w_q[int(w_q.to(torch.int32).abs().sum(dim=1).argmax())]
            x_q[0], x_q[1] = (
                torch.where(row >= 0, 127, -128).to(torch.int8),
                torch.where(row >= 0, -128, 127).to(torch.int8),
            )
        layers[kind] = {
            "params": params,
            "x_q": x_q,
            "w_q": w_q,
            "b_q": torch.round(bias / (params["x_scale"] * params["w_scale"])).to(torch.int32),
            "bias": bias,
        }
        layers[kind]["reference"] = reference_output(layers[kind])
    return layers


def unclamped_output(layer: dict[str, Any]) -> list[float]:
    """The key's output before it is clamped to int8: (x − z_x) · W · s_x s_w + bias, over s_out, + z_out
    (float64). Where it lies more than an LSB beyond [-128, 127], every correct rounding saturates exactly."""
    p = layer["params"]
    x = layer["x_q"].to(torch.float64) - p["x_zp"]
    acc = x @ layer["w_q"].to(torch.float64).T * (p["x_scale"] * p["w_scale"]) + layer["bias"].to(torch.float64)
    return [float(v) for v in (acc / p["out_scale"] + p["out_zp"]).flatten()]


def describe_tensor(result: Any) -> dict[str, Any]:
    """dtype, shape and values of a tensor returned by student code (exactly a torch.Tensor)."""
    if type(result) is not torch.Tensor:
        raise EvidenceError(f"int8_linear 應該回傳 torch.Tensor，看到 {type(result).__name__}")
    if result.numel() > 5000:
        raise EvidenceError("回傳的 tensor 太大")
    values = result.detach().to(torch.float64).flatten().tolist()
    return {"dtype": str(result.dtype).removeprefix("torch."), "shape": list(result.shape), "values": plain(values)}


def _case(kind: str) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        layer = hidden_layers(seed)[kind]
        out = call_int8_linear(ns, layer, layer["x_q"])
        reference = layer["reference"]
        return {
            "result": describe_tensor(out),
            "reference": {
                "shape": list(reference.shape),
                "values": [int(v) for v in reference.flatten()],
                "unclamped": unclamped_output(layer),
            },
            "params": layer["params"],
        }

    return case


EXERCISES = with_hidden_cases(
    PUBLIC,
    int8_linear={kind: _case(kind) for kind in KINDS},
)
