"""M06-1 per-tensor 與 per-channel: sqnr and layer_sqnr, run on hidden tensors and models.

``sqnr`` gets tensors the student has not seen: noise at several levels, a signal with a large
mean (power, not variance), a test tensor scaled down (the signal is the reference's), exact
copies (``inf``, also for a channel that is all zeros on both sides: 0 / 0), an outlier channel
read per slice along dims 0, 1 and -1, mixed dtypes, two
float64 tensors near 1000 that differ by about 1e-5 (float32 arithmetic cannot see the
difference), and a look at the types it returns (a Python float; a list of them per slice).
``layer_sqnr`` gets prepared / converted pairs of hidden models: two inputs, an add, a split
whose output is a list (not a tensor), a cat, the model's own
``quantized_decomposed.fake_quant_per_channel`` (a q/dq op by its target, on both graphs, its
name without "quantize": only the target tells it apart), a planted outlier channel quantized
per-tensor and per-channel, and a model whose first layers are left in fp32 (their SQNR is ``inf``); each
case also notes whether the call left the two graphs as they were.
Every model and tensor kind appears on every seed; seeds change sizes, values and the place
of the outlier. The student's functions are only called; their results are read as numbers.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer, get_xnnpack_quantizer
from common.qspecs import act_spec, weight_spec
from selfcheck.public.m06_1 import (
    PUBLIC,
    db,
    db_list,
    describe_table,
    fake_quant,
    kind_of,
    outlier_weight,
    quantized_pair,
)


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 7919 + salt)


# --- sqnr -------------------------------------------------------------------------------------------


def sqnr_noise(ns: Namespace, seed: int) -> Any:
    """Three shapes, each with Gaussian noise at a different level (about 10, 30 and 50 dB)."""
    g = _generator(seed, 1)
    result = []
    for level, shape in zip(
        (0.3, 0.03, 0.003), ((seed_size(seed, 5, 40),), (3, seed_size(seed, 4, 9), 5), (2, 2, 3, 7)), strict=True
    ):
        reference = torch.randn(*shape, generator=g) * (1 + seed % 3)
        test = reference + torch.randn(*shape, generator=g) * level * (1 + seed % 3)
        result.append(db(ns["sqnr"](reference, test), "sqnr(reference, test) "))
    return result


def sqnr_offset(ns: Namespace, seed: int) -> Any:
    """A non-negative signal with a large mean (like a relu output + bias) and its fake-quantized copy."""
    g = _generator(seed, 2)
    reference = torch.relu(torch.randn(4, seed_size(seed, 6, 12), generator=g)) + 3.0
    return db(ns["sqnr"](reference, fake_quant(reference, bits=5)), "sqnr(reference, test) ")


def sqnr_scaled(ns: Namespace, seed: int) -> Any:
    """``test`` is the reference shrunk by 20 %: the signal power is the reference's, not the test's."""
    g = _generator(seed, 3)
    reference = torch.randn(3, seed_size(seed, 8, 20), generator=g)
    return db(ns["sqnr"](reference, reference * 0.8), "sqnr(reference, 0.8 * reference) ")


def sqnr_exact(ns: Namespace, seed: int) -> Any:
    """An exact copy (``inf``), and per channel a tensor whose channel ``c`` is exact, whose next channel is all
    zeros on both sides (a dead channel: no signal and no noise, 0 / 0 in torch is nan, the SQNR is ``inf``) and
    the rest are not exact."""
    g = _generator(seed, 4)
    channels = seed_size(seed, 3, 6)
    reference = torch.randn(channels, 5, generator=g)
    test = reference + 0.01 * torch.randn(channels, 5, generator=g)
    test[seed % channels] = reference[seed % channels]
    reference[(seed + 1) % channels] = 0.0
    test[(seed + 1) % channels] = 0.0
    return {
        "copy": db(ns["sqnr"](reference, reference.clone()), "sqnr(x, x.clone()) "),
        "per_channel": db_list(ns["sqnr"](reference, test, dim=0), "sqnr(reference, test, dim=0) "),
    }


def sqnr_slices(ns: Namespace, seed: int) -> Any:
    """An outlier channel read per slice: a weight along dim 0, an activation along dim 1, features along -1."""
    out_channels = seed_size(seed, 4, 9)
    weight = outlier_weight(seed + 5, out_channels, 3, 8.0 + seed % 5)
    (activation,) = seeded_inputs(seed + 6, (2, seed_size(seed, 3, 6), 4, 4))
    activation[:, seed % activation.shape[1]] *= 10
    (features,) = seeded_inputs(seed + 7, (seed_size(seed, 5, 9), seed_size(seed, 3, 7)))
    features[:, -1] += 4
    return {
        "weight_dim0": db_list(ns["sqnr"](weight, fake_quant(weight), dim=0), "sqnr(weight, test, dim=0) "),
        "weight_whole": db(ns["sqnr"](weight, fake_quant(weight)), "sqnr(weight, test) "),
        "activation_dim1": db_list(
            ns["sqnr"](activation, fake_quant(activation, bits=6), dim=1), "sqnr(x, test, dim=1) "
        ),
        "features_last": db_list(ns["sqnr"](features, fake_quant(features, bits=5), dim=-1), "sqnr(x, test, dim=-1) "),
    }


def sqnr_dtypes(ns: Namespace, seed: int) -> Any:
    """A bfloat16 reference against a float32 test, float64 against float16, and two float64 tensors near
    a large offset that differ by about 1e-8 of it (float32 keeps about 7 digits: the difference rounds away)."""
    g = _generator(seed, 8)
    size = seed_size(seed, 2000, 3000)
    reference = (torch.randn(size, generator=g) * 3).to(torch.bfloat16)
    test = reference.float() + 0.004 * torch.randn(size, generator=g)
    wide = torch.randn(size, generator=g, dtype=torch.float64) * 5
    offset = 500.0 * (1 + seed % 4)
    base = offset + torch.randn(size, generator=g, dtype=torch.float64)
    near = base + 1e-8 * offset * torch.randn(size, generator=g, dtype=torch.float64)
    return {
        "bfloat16": db(ns["sqnr"](reference, test), "sqnr(bfloat16, float32) "),
        "float16": db(ns["sqnr"](wide, wide.to(torch.float16)), "sqnr(float64, float16) "),
        "float64_close": db(ns["sqnr"](base, near), "sqnr(float64, float64) "),
    }


def sqnr_types(ns: Namespace, seed: int) -> Any:
    """The types ``sqnr`` returns: a Python float for the whole tensor, a list of Python floats per slice
    (along dim 0 and along dim -1, one slice exactly equal so its entry is ``inf``)."""
    g = _generator(seed, 9)
    reference = torch.randn(seed_size(seed, 3, 6), 5, generator=g)
    test = reference + 0.05 * torch.randn(reference.shape, generator=g)
    test[0] = reference[0]
    return {
        "whole": kind_of(ns["sqnr"](reference, test)),
        "per_slice": kind_of(ns["sqnr"](reference, test, dim=0)),
        "last_dim": kind_of(ns["sqnr"](reference, test, dim=-1)),
    }


# --- layer_sqnr: hidden models ----------------------------------------------------------------------


class Branches(nn.Module):
    """Two inputs; relu(conv(x)) + conv(y) → split (a list) → cat of the pieces swapped → pool → a
    ``quantized_decomposed.fake_quant_per_channel`` of the model's own (a q/dq op by its target, on both graphs,
    its name without "quantize") → linear."""

    def __init__(self, channels: int, first: int) -> None:
        super().__init__()
        self.conv_x = nn.Conv2d(3, channels, 3, padding=1)
        self.conv_y = nn.Conv2d(2, channels, 1, bias=False)
        self.head = nn.Linear(channels * 4 * 4, 3)
        self.sizes = [first, channels - first]
        self.register_buffer("scales", torch.full((channels,), 0.05))
        self.register_buffer("zero_points", torch.zeros(channels, dtype=torch.int32))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.conv_x(x)) + self.conv_y(y)
        low, high = torch.split(s, self.sizes, dim=1)
        t = torch.max_pool2d(torch.cat([high, low], dim=1), 2)
        t = torch.ops.quantized_decomposed.fake_quant_per_channel(t, self.scales, self.zero_points, 1, -128, 127)
        return self.head(torch.flatten(t, 1))


class OutlierNet(nn.Module):
    """conv (one output channel ``factor`` times larger) → relu → conv → relu → linear."""

    def __init__(self, channels: int, channel: int, factor: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 6 * 6, 4)
        with torch.no_grad():
            self.conv1.weight[channel] *= factor
            self.conv2.weight[:, channel] /= factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


class LastConvQuantizer(Quantizer):
    """Quantizes only the last conv2d of the graph (activation, weight, output): earlier layers stay fp32."""

    def annotate(self, model: GraphModule) -> GraphModule:
        node = [n for n in model.graph.nodes if n.target == torch.ops.aten.conv2d.default][-1]
        node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={node.args[0]: act_spec(), node.args[1]: weight_spec(True)},
            output_qspec=act_spec(),
            _annotated=True,
        )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def layers_branches(ns: Namespace, seed: int) -> Any:
    channels = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (2, 3, 8, 8), (2, 2, 8, 8))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=False)
    prepared, converted = quantized_pair(
        Branches(channels, 1 + seed % (channels - 1)), inputs, quantizer, seed, calibrate=1
    )
    return describe_table(ns, prepared, converted, inputs)


def layers_outlier(ns: Namespace, seed: int) -> Any:
    channels = seed_size(seed, 4, 7)
    model = OutlierNet(channels, seed % channels, 10.0 + seed % 7)
    inputs = seeded_inputs(seed, (2, 3, 6, 6))
    result = {}
    for name, per_channel in (("per_tensor", False), ("per_channel", True)):
        quantizer, _ = get_xnnpack_quantizer(is_per_channel=per_channel)
        prepared, converted = quantized_pair(model, inputs, quantizer, seed, calibrate=1)
        result[name] = describe_table(ns, prepared, converted, inputs)
    return result


def layers_partial(ns: Namespace, seed: int) -> Any:
    channels = seed_size(seed, 3, 6)
    model = OutlierNet(channels, seed % channels, 1.0)
    inputs = seeded_inputs(seed, (2, 3, 6, 6))
    prepared, converted = quantized_pair(model, inputs, LastConvQuantizer(), seed, calibrate=1)
    return describe_table(ns, prepared, converted, inputs)


EXERCISES = with_hidden_cases(
    PUBLIC,
    sqnr={
        "noise": sqnr_noise,
        "offset": sqnr_offset,
        "scaled": sqnr_scaled,
        "exact": sqnr_exact,
        "slices": sqnr_slices,
        "dtypes": sqnr_dtypes,
        "types": sqnr_types,
    },
    layer_sqnr={"branches": layers_branches, "outlier": layers_outlier, "partial": layers_partial},
)
