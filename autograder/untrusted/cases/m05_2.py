"""M05-2 DerivedQuantizationSpec: a BiasQuantizer whose int32 bias scale is s_act · s_w, on hidden models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from selfcheck.evidence import describe_converted, getattr_value, qdq_kind

NOTEBOOK = "M05-2"

WEIGHTED_OPS = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


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


def describe_weighted_ops(prepared: GraphModule, converted: GraphModule) -> dict[str, Any]:
    """For each conv2d / linear of the converted graph: its x, weight and bias edges, and its fp32 bias.

    ``float_bias`` is read from the prepared graph (before convert), through the observers.
    """
    prepared_nodes = {n.name: n for n in prepared.graph.nodes}
    ops = {}
    for node in converted.graph.nodes:
        if node.op != "call_function" or node.target not in WEIGHTED_OPS:
            continue
        args = list(node.args[:3]) + [None] * (3 - len(node.args[:3]))
        record = {
            "x": _edge(converted, args[0]),
            "weight": _edge(converted, args[1]),
            "bias": _edge(converted, args[2], with_value=True),
            "float_bias": None,
        }
        before = prepared_nodes.get(node.name)
        if before is not None and len(before.args) > 2 and isinstance(before.args[2], Node):
            source = before.args[2]
            while source.op == "call_module":
                source = source.args[0]
            if source.op == "get_attr":
                record["float_bias"] = _numbers(getattr_value(prepared, source).detach().to(torch.float64))
        ops[node.name] = record
    return ops


def run_bias_quantizer(quantizer: Any, model: nn.Module, shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    import copy

    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), seeded_inputs(seed, shape)), quantizer)
    with torch.no_grad():
        for step in range(3):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    converted = convert_pt2e(copy.deepcopy(prepared))
    return {"ops": describe_weighted_ops(prepared, converted), "converted": describe_converted(converted)}


def _case(model_kind: str, per_channel: bool) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        if model_kind == "conv":
            model: nn.Module = ConvChain(seed_size(seed, 2, 5))
            shape: tuple[int, ...] = (2, 3, 6, 6)
        elif model_kind == "linear":
            features = seed_size(seed, 4, 8)
            model, shape = LinearChain(features), (4, features)
        else:
            model, shape = MixedBias(seed_size(seed, 3, 6)), (2, 3, 6, 6)
        return run_bias_quantizer(ns["BiasQuantizer"](per_channel=per_channel), model, shape, seed)

    return case


EXERCISES = {
    "bias_quantizer": Exercise(
        NOTEBOOK,
        "bias_quantizer",
        "BiasQuantizer：bias 量化成 int32，scale = s_act · s_w",
        ("BiasQuantizer",),
        {
            "conv_per_tensor": _case("conv", False),
            "conv_per_channel": _case("conv", True),
            "linear_per_tensor": _case("linear", False),
            "linear_per_channel": _case("linear", True),
            "no_bias": _case("mixed", True),
        },
    ),
}
