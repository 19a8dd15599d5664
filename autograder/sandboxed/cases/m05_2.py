"""M05-2 DerivedQuantizationSpec: a BiasQuantizer whose int32 bias scale is s_act · s_w, on hidden models.

Every case builds the student's ``BiasQuantizer``, runs it inside ``prepare_pt2e`` (between
probe Quantizers of ours for some cases), keeps the annotations it wrote right after its
``annotate`` (``describe_annotations``: a derived spec shows its ``from`` edges, dtype and
range), calibrates, and converts in place. The evidence is read from the graphs: each
conv / linear's input edges with their q/dq steps and constants, the fp32 bias before
convert, and every q/dq path. The student's ``derive_qparams_fn`` is only ever called by
torchao during convert (on the trusted side it is a replay of what it returned here).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import swap_names
from autograder.sandboxed.cases.probes import ChainQuantizer
from common.pt2e import (
    ANNOTATION_KEY,
    HistogramObserver,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
)
from selfcheck.evidence import describe_converted, getattr_value, qdq_kind
from selfcheck.probes import AnnotationSnapshot as Snapshot
from selfcheck.public.m05_2 import PUBLIC

WEIGHTED_OPS = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
RELU = torch.ops.aten.relu.default
LINEAR = torch.ops.aten.linear.default


# --- hidden models ------------------------------------------------------------------------------


class ConvChain(nn.Module):
    """conv → relu → conv, both with a bias (made large enough to matter)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, channels, 3, padding=1)
        self.second = nn.Conv2d(channels, channels + 1, 1)
        with torch.no_grad():
            self.first.bias.mul_(4)
            self.second.bias.mul_(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


class LinearChain(nn.Module):
    """linear → relu → linear, both with a bias."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, 2 * features)
        self.fc2 = nn.Linear(2 * features, features - 1)
        with torch.no_grad():
            self.fc1.bias.mul_(4)
            self.fc2.bias.mul_(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class MixedBias(nn.Module):
    """conv without bias → relu → mean → linear with bias → linear without bias."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.fc1 = nn.Linear(channels, 6)
        self.fc2 = nn.Linear(6, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc2(self.fc1(h))


class Crowded(nn.Module):
    """Everything around the convs and linears that is not one.

    The input is called ``linear`` (a placeholder named like an op) and feeds two convs
    (one without bias), whose outputs are concatenated (inputs in a list) and go through a
    relu (claimed by an earlier Quantizer) into a third conv; then a ConvTranspose2d (a
    ``conv_transpose2d``: not a conv2d), a bilinear upsample (``upsample_bilinear2d``: not a
    linear), an add with a scalar, a mean, and two linears, the first of them already
    labelled by an earlier Quantizer that did not claim it.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1, bias=False)
        self.mix = nn.Conv2d(2 * channels, channels, 1)
        self.up = nn.ConvTranspose2d(channels, channels + 1, 2, stride=2)
        self.fc = nn.Linear(channels + 1, 5)
        self.head = nn.Linear(5, 3)
        with torch.no_grad():
            for layer in (self.a, self.mix, self.fc, self.head):
                layer.bias.mul_(4)

    def forward(self, linear: torch.Tensor) -> torch.Tensor:
        y = torch.relu(torch.cat([self.a(linear), self.b(linear)], dim=1))
        u = self.up(self.mix(y))
        v = torch.nn.functional.interpolate(u, scale_factor=0.5, mode="bilinear") + 1.0
        return self.head(self.fc(v.mean(dim=(2, 3))))


# --- probe Quantizers ---------------------------------------------------------------------------


def _symmetric(limit: int, observer: Any = MinMaxObserver) -> QuantizationSpec:
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-limit,
        quant_max=limit,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=observer,
    )


class EarlyLabels(Quantizer):
    """Before the student's Quantizer: claims every relu (output int8 [-60, 60], ``_annotated=True``) and
    labels the output of the first linear (HistogramObserver) without claiming it."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == RELU:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_symmetric(60), _annotated=True)
        first = next(n for n in model.graph.nodes if n.op == "call_function" and n.target == LINEAR)
        first.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_symmetric(100, HistogramObserver))
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class LateOutputClaimer(Quantizer):
    """After the student's Quantizer: every op nobody claimed gets a new annotation, an int8 [-50, 50] output."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            ann = node.meta.get(ANNOTATION_KEY)
            if ann is None or not ann._annotated:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_symmetric(50), _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _qdq_chain(node: Node) -> tuple[Node, list[Node]]:
    """The q/dq nodes met walking up from ``node``, in order from the source; and the source."""
    chain, source = [], node
    while qdq_kind(source) is not None:
        chain.append(source)
        source = source.args[0]
    return source, chain[::-1]


def _resolve(gm: GraphModule, arg: Any) -> Any:
    return getattr_value(gm, arg) if isinstance(arg, Node) and arg.op == "get_attr" else arg


def _numbers(value: Any) -> Any:
    """Full-precision plain numbers (no rounding: the product check uses rtol 1e-6)."""
    if isinstance(value, torch.Tensor):
        return [float(v) for v in value.flatten()] if value.is_floating_point() else [int(v) for v in value.flatten()]
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    return None


def _step(gm: GraphModule, node: Node) -> dict[str, Any]:
    name = str(node.target).split(".")[1]
    args = [_resolve(gm, a) for a in node.args]
    per_channel = name.endswith("per_channel")
    ranges = args[4:6] if per_channel else args[3:5]
    dtype = next((a for a in args if isinstance(a, torch.dtype)), None)
    return {
        "op": name,
        "scale": _numbers(args[1]),
        "zero_point": _numbers(args[2]),
        "qmin": _numbers(ranges[0]) if ranges else None,
        "qmax": _numbers(ranges[1]) if len(ranges) > 1 else None,
        "dtype": str(dtype).removeprefix("torch."),
    }


def _edge(gm: GraphModule, arg: Any, with_value: bool = False) -> dict[str, Any] | None:
    if not isinstance(arg, Node):
        return None
    source, chain = _qdq_chain(arg)
    record: dict[str, Any] = {"source": source.name, "steps": [_step(gm, n) for n in chain]}
    value = _resolve(gm, source) if source.op == "get_attr" else None
    if isinstance(value, torch.Tensor):
        record["source_dtype"] = str(value.dtype).removeprefix("torch.")
    if isinstance(value, torch.Tensor) and with_value:
        with torch.no_grad():
            for n in chain:  # run the q/dq ops on the constant: the value the op really reads
                value = n.target(value, *[_resolve(gm, a) for a in n.args[1:]])
        record["value"] = _numbers(value.to(torch.float64))
    return record


def float_biases(prepared: GraphModule) -> dict[str, Any]:
    """The fp32 bias of every conv2d / linear of a prepared graph (through its observers), before convert."""
    found: dict[str, Any] = {}
    for node in prepared.graph.nodes:
        if node.op != "call_function" or node.target not in WEIGHTED_OPS:
            continue
        found[node.name] = None
        if len(node.args) > 2 and isinstance(node.args[2], Node):
            source = node.args[2]
            while source.op == "call_module":
                source = source.args[0]
            if source.op == "get_attr":
                found[node.name] = _numbers(getattr_value(prepared, source).detach().to(torch.float64))
    return found


def describe_weighted_ops(converted: GraphModule, biases: dict[str, Any]) -> dict[str, Any]:
    """For each conv2d / linear of the converted graph: its x, weight and bias edges, and its fp32 bias."""
    ops = {}
    for node in converted.graph.nodes:
        if node.op != "call_function" or node.target not in WEIGHTED_OPS:
            continue
        args = list(node.args[:3]) + [None] * (3 - len(node.args[:3]))
        ops[node.name] = {
            "x": _edge(converted, args[0]),
            "weight": _edge(converted, args[1]),
            "bias": _edge(converted, args[2], with_value=True),
            "float_bias": biases.get(node.name),
        }
    return ops


def run_bias_quantizer(
    ns: Namespace,
    per_channel: bool,
    model: nn.Module,
    shape: tuple[int, ...],
    seed: int,
    before: tuple[Quantizer, ...] = (),
    after: tuple[Quantizer, ...] = (),
    rename: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Prepare ``model`` with ``before`` + BiasQuantizer(per_channel) + ``after``, calibrate, convert in place.

    ``rename``: node names a pass swapped in the exported graph first (``swap_names``).
    """
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    snapshot = Snapshot()
    quantizer = ChainQuantizer([*before, ns["BiasQuantizer"](per_channel=per_channel), snapshot, *after])
    exported = export_module(model.eval(), seeded_inputs(seed, shape))
    if rename:
        swap_names(exported, rename)
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for step in range(3):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    biases = float_biases(prepared)
    converted = convert_pt2e(prepared)
    return {
        "annotations": snapshot.annotations,
        "ops": describe_weighted_ops(converted, biases),
        "converted": describe_converted(converted),
    }


def _case(model_kind: str, per_channel: bool, after: tuple[type[Quantizer], ...] = ()) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        before: tuple[Quantizer, ...] = ()
        rename: dict[str, str] | None = None
        if model_kind == "conv":
            model: nn.Module = ConvChain(seed_size(seed, 2, 5))
            shape: tuple[int, ...] = (2, 3, 6, 6)
        elif model_kind == "linear":
            features = seed_size(seed, 4, 8)
            model, shape = LinearChain(features), (4, features)
        elif model_kind == "mixed":
            model, shape = MixedBias(seed_size(seed, 3, 6)), (2, 3, 6, 6)
        elif model_kind == "renamed":  # the first linear is called mean_90, the mean linear_91
            model, shape = MixedBias(seed_size(seed + 1, 3, 6)), (2, 3, 6, 6)
            rename = {"linear": "mean", "mean": "linear"}
        else:
            model, shape = Crowded(seed_size(seed + 1, 2, 4)), (2, 3, 6, 6)
            before = (EarlyLabels(),)
        return run_bias_quantizer(ns, per_channel, model, shape, seed, before, tuple(q() for q in after), rename)

    return case


EXERCISES = with_hidden_cases(
    PUBLIC,
    bias_quantizer={
        "conv_per_tensor": _case("conv", False),
        "conv_per_channel": _case("conv", True),
        "linear_per_tensor": _case("linear", False),
        "linear_per_channel": _case("linear", True),
        "no_bias": _case("mixed", True),
        "crowded": _case("crowded", True),
        "renamed": _case("renamed", True),
        "late_quantizer": _case("linear", False, (LateOutputClaimer,)),
    },
)
