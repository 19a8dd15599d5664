"""M04-3 fusion 就是中間不貼標籤: FusionQuantizer, run on hidden models and patterns."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from autograder.untrusted.cases.probes import ChainQuantizer
from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    convert_pt2e,
    export_module,
    prepare_pt2e,
)
from selfcheck.evidence import describe_converted, describe_prepared

NOTEBOOK = "M04-3"

CONV = torch.ops.aten.conv2d.default
RELU = torch.ops.aten.relu.default
ADD = torch.ops.aten.add.Tensor
LINEAR = torch.ops.aten.linear.default
MAX_POOL = torch.ops.aten.max_pool2d.default


# --- hidden models ------------------------------------------------------------------------------


class ConvChain(nn.Module):
    """conv → relu → conv → relu → flatten → linear → relu → linear."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels * 4 * 4, 16)
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc2(torch.relu(self.fc1(torch.flatten(y, 1))))


class ResidualBlock(nn.Module):
    """conv → relu → conv, added to the input, then relu (no BN)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class SkipIntoAdd(nn.Module):
    """relu(x + conv(x)), then max_pool2d: the conv output is the add's second operand."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max_pool2d(torch.relu(x + self.conv(x)), 2)


class SharedConvOutput(nn.Module):
    """y = conv(x) feeds a relu and an add: conv → relu cannot be fused."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) + y


class ConvReluPool(nn.Module):
    """conv → relu → max_pool2d, twice."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        return torch.relu(self.conv2(y))


class LateOutputClaimer(Quantizer):
    """After the student's Quantizer: labels, with int8 [-50, 50] symmetric, the output of every op nobody claimed."""

    def annotate(self, model: GraphModule) -> GraphModule:
        spec = QuantizationSpec(
            dtype=torch.int8,
            quant_min=-50,
            quant_max=50,
            qscheme=torch.per_tensor_symmetric,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            ann = node.meta.get(ANNOTATION_KEY)
            if ann is None or not ann._annotated:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec, _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


# --- evidence -----------------------------------------------------------------------------------


def describe_labels(gm: GraphModule) -> dict[str, Any]:
    """Per op: claimed (``_annotated``), the producers of its labelled input edges, whether its output is labelled."""
    labels: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        ann = node.meta.get(ANNOTATION_KEY)
        if type(ann) is not QuantizationAnnotation:
            continue
        qmap = ann.input_qspec_map if type(ann.input_qspec_map) is dict else {}
        labels[node.name] = {
            "claimed": ann._annotated is True,
            "inputs": sorted(k.name for k in qmap if type(k) is Node),
            "output": ann.output_qspec is not None,
        }
    return labels


def fuse(
    quantizer: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...], seed: int, convert: bool = False
) -> dict[str, Any]:
    """Export, prepare with ``quantizer``, calibrate; describe labels, observers (and q/dq when ``convert``)."""
    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(3):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    result: dict[str, Any] = {"labels": describe_labels(prepared), "prepared": describe_prepared(prepared)}
    if convert:
        result["converted"] = describe_converted(convert_pt2e(copy.deepcopy(prepared)))
    return result


def chain(ns: Namespace, seed: int) -> Any:
    model = ConvChain(seed_size(seed, 2, 4), seed_size(seed, 3, 6))
    inputs = seeded_inputs(seed, (2, 3, 4, 4))
    return fuse(ns["FusionQuantizer"]([(CONV, RELU), (LINEAR, RELU)]), model, inputs, seed, convert=True)


def residual(ns: Namespace, seed: int) -> Any:
    model = ResidualBlock(seed_size(seed, 2, 5))
    inputs = seeded_inputs(seed, (2, 3, 6, 6))
    quantizer = ns["FusionQuantizer"]([(CONV, RELU), (ADD, RELU), (CONV,)])
    return fuse(quantizer, model, inputs, seed, convert=True)


def three_ops(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 6, 6))
    return fuse(ns["FusionQuantizer"]([(CONV, ADD, RELU)]), SkipIntoAdd(), inputs, seed)


def shared_output(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 6, 6))
    quantizer = ns["FusionQuantizer"]([(CONV, RELU), (CONV,), (ADD,)])
    return fuse(quantizer, SharedConvOutput(seed_size(seed, 2, 4)), inputs, seed)


def priority(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    model = ConvReluPool(seed_size(seed, 2, 4))
    return {
        "single_first": fuse(ns["FusionQuantizer"]([(RELU,), (CONV, RELU)]), model, inputs, seed),
        "pair_first": fuse(ns["FusionQuantizer"]([(CONV, RELU), (RELU,)]), model, inputs, seed),
    }


def marks_members(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    quantizer = ChainQuantizer([ns["FusionQuantizer"]([(CONV, RELU, MAX_POOL)]), LateOutputClaimer()])
    return fuse(quantizer, ConvReluPool(seed_size(seed + 1, 2, 4)), inputs, seed)


EXERCISES = {
    "fusion_quantizer": Exercise(
        NOTEBOOK,
        "fusion_quantizer",
        "FusionQuantizer：pattern 的邊界貼標籤，裡面不貼",
        ("FusionQuantizer",),
        {
            "chain": chain,
            "residual": residual,
            "three_ops": three_ops,
            "shared_output": shared_output,
            "priority": priority,
            "marks_members": marks_members,
        },
    ),
}
