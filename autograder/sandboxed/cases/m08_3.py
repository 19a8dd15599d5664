"""M08-3 總結專題: the student's BackendQuantizer on hidden models, lowered to XNNPACK and run in ExecuTorch.

- ``lowered``: a hidden backbone (every op of the backend) prepared with the student's Quantizer,
  calibrated, converted, lowered (``selfcheck.public.m08_3.lower_converted``: the int32 biases
  handed to XNNPACK as fp32, ``to_edge_transform_and_lower``, ``.pte``, the runtime); the labels
  right after the student's ``annotate``, the observers, the q/dq paths, the biases, the sigmoid
  quantize, and what the runtime did.
- ``reference``: ExecuTorch's own XNNPACKQuantizer on the same backbone, the same way (no student
  code; kept per seed, so the grader pays for it once).
- ``crowded``: what is not one of the backend's ops, or not where it looks (an input called
  ``cat``, a conv read twice, constants and scalars (a buffer first in an add and in a cat), a
  repeated cat input, ``z + z``, a ConvTranspose2d, a folded BN, a linear without bias): labels,
  observers, paths and biases; no lowering.
- ``claimed``: an add, a cat and the stem's relu claimed before the student's Quantizer, and an add
  labelled but not claimed; the labels right after the student's ``annotate`` (the stem conv, whose
  only consumer is the claimed relu, must label its own output: no fusion over a claimed relu).

Models are built inside a forked RNG from the seed, so the student's run and the reference see
the same weights. ExecuTorch is imported only when a case lowers a model.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.sandboxed.cases.base import (
    Namespace,
    evidence_is_kept,
    seed_size,
    seeded_inputs,
    seeded_model,
    with_hidden_cases,
)
from autograder.sandboxed.cases.probes import (
    ADD,
    CAT,
    ChainQuantizer,
    Claimer,
    Label,
    TableLabels,
    label_groups,
    symmetric_spec,
)
from common.pt2e import Quantizer
from selfcheck.evidence import describe_converted, describe_prepared
from selfcheck.public.m08_3 import (
    OP_NAMES,
    PUBLIC,
    WEIGHTED,
    bias_checks,
    lower_converted,
    reference_record,
    sigmoid_outputs,
)

CONV = torch.ops.aten.conv2d.default
LINEAR = torch.ops.aten.linear.default
RELU = torch.ops.aten.relu.default
MAX_POOL = torch.ops.aten.max_pool2d.default
FLATTEN = torch.ops.aten.flatten.using_ints
SIGMOID = torch.ops.aten.sigmoid.default


# --- hidden models --------------------------------------------------------------------------------


class Backbone(nn.Module):
    """stem conv → relu; a conv and a 1×1 conv added; a sigmoid gate; cat([relu, add, gate]);
    max_pool2d; flatten; linear → relu; a linear without bias."""

    def __init__(self, channels: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.branch = nn.Conv2d(channels, channels, 3, padding=1)
        self.skip = nn.Conv2d(channels, channels, 1)
        self.gate = nn.Conv2d(channels, channels, 1)
        self.fc = nn.Linear(3 * channels * 4 * 4, hidden)
        self.head = nn.Linear(hidden, classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        s = self.branch(h) + self.skip(h)
        g = torch.sigmoid(self.gate(h))
        y = torch.max_pool2d(torch.cat([h, s, g], dim=1), 2)
        return self.head(torch.relu(self.fc(torch.flatten(y, 1))))


class Crowded(nn.Module):
    """Everything around the backend's ops that is not one, or not where it looks.

    The input is called ``cat``. ``a`` (a conv) is read by a relu and an add, so it cannot be
    fused; the add's other operand is a buffer, written first; the cat reads ``r`` twice; a
    ConvTranspose2d (not a conv2d) and a conv → BN → relu (BN folds into a conv without bias)
    follow; then max_pool2d, flatten, linear → relu, an add with a Python scalar, ``z + z`` (one
    operand, one edge) into a linear without bias and a sigmoid, and a cat of a buffer (first) and
    ``z`` into a linear with bias.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.register_buffer("offset", torch.randn(channels, 1, 1))
        self.register_buffer("rows", torch.randn(2, 12))
        self.up = nn.ConvTranspose2d(3 * channels, channels, 2, stride=2)
        self.mix = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels * 8 * 8, 12)
        self.gate = nn.Linear(12, 4, bias=False)
        self.out = nn.Linear(12, 3)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)

    def forward(self, cat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.conv(cat)
        r = torch.relu(a)
        s = self.offset + a
        t = torch.cat([r, s, r], dim=1)
        u = torch.relu(self.bn(self.mix(self.up(t))))
        v = torch.flatten(torch.max_pool2d(u, 2), 1)
        z = torch.relu(self.fc(v)) + 0.5
        return torch.sigmoid(self.gate(z + z)), self.out(torch.cat([self.rows, z], dim=0))


class ClaimedAdds(nn.Module):
    """conv → relu (``relu``, claimed before the student); two convs added (``add``, claimed), the sum
    added to the relu (``add_1``, labelled but not claimed); a cat of the two sums (``cat``, claimed)
    and a cat of that with the relu; max_pool2d; flatten."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.left = nn.Conv2d(channels, channels, 3, padding=1)
        self.right = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        a = self.left(h) + self.right(h)
        b = a + h
        y = torch.cat([torch.cat([a, b], dim=1), h], dim=1)
        return torch.flatten(torch.max_pool2d(y, 2), 1)


def backbone(seed: int) -> nn.Module:
    return seeded_model(seed, Backbone, seed_size(seed, 4, 7), seed_size(seed + 1, 12, 24), seed_size(seed + 2, 5, 10))


def backbone_data(seed: int) -> tuple[list[tuple[torch.Tensor, ...]], tuple[torch.Tensor, ...]]:
    shape = (16, 3, 8, 8)
    return [seeded_inputs(seed * 1000 + step, shape) for step in range(4)], seeded_inputs(seed * 1000 + 99, shape)


# --- evidence -------------------------------------------------------------------------------------


class Snapshot(Quantizer):
    """Right after the student's ``annotate``: the labels (sharing resolved into groups), the backend's
    ops by node, and the x / weight / bias sources of every conv2d / linear."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def annotate(self, model: GraphModule) -> GraphModule:
        weighted = {}
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target in WEIGHTED:
                args = list(node.args[:3]) + [None] * (3 - len(node.args[:3]))
                weighted[node.name] = [a.name if isinstance(a, Node) else None for a in args]
        self.state = {
            "labels": label_groups(model),
            "ops": {
                n.name: OP_NAMES[n.target]
                for n in model.graph.nodes
                if n.op == "call_function" and n.target in OP_NAMES
            },
            "weighted": weighted,
        }
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def run_student(
    ns: Namespace,
    model: nn.Module,
    calibration: list[tuple[torch.Tensor, ...]],
    before: tuple[Quantizer, ...] = (),
) -> tuple[dict[str, Any], GraphModule]:
    """Prepare with ``before`` + BackendQuantizer(), calibrate, convert in place."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    snapshot = Snapshot()
    quantizer = ChainQuantizer([*before, ns["BackendQuantizer"](), snapshot])
    prepared = prepare_pt2e(export_module(model, calibration[0]), quantizer)
    with torch.no_grad():
        for batch in calibration:
            prepared(*batch)
    evidence = {**snapshot.state, "prepared": describe_prepared(prepared)}
    converted = convert_pt2e(prepared)
    evidence["converted"] = describe_converted(converted)
    evidence["biases"] = bias_checks(converted)
    evidence["sigmoids"] = sigmoid_outputs(converted)
    return evidence, converted


def lowered(ns: Namespace, seed: int) -> Any:
    model = backbone(seed)
    calibration, test = backbone_data(seed)
    evidence, converted = run_student(ns, model, calibration)
    if evidence_is_kept():  # lowering calls no student code: the record skips it, the replay lowers
        evidence["runtime"] = lower_converted(converted, model, test)
    return evidence


@functools.cache
def _reference(seed: int) -> dict[str, Any]:
    return reference_record(lambda: backbone(seed), backbone_data(seed))


def reference(ns: Namespace, seed: int) -> Any:
    """ExecuTorch's XNNPACKQuantizer on the backbone of ``seed`` (no student code: nothing to record)."""
    return _reference(seed) if evidence_is_kept() else None


def crowded(ns: Namespace, seed: int) -> Any:
    model = seeded_model(seed, Crowded, seed_size(seed, 2, 5))
    shape = (4, 3, 8, 8)
    calibration = [seeded_inputs(seed * 1000 + step, shape) for step in range(3)]
    evidence, _ = run_student(ns, model, calibration)
    return evidence


def claimed(ns: Namespace, seed: int) -> Any:
    model = seeded_model(seed, ClaimedAdds, seed_size(seed, 3, 6))
    shape = (4, 3, 8, 8)
    calibration = [seeded_inputs(seed * 1000 + step, shape) for step in range(3)]
    before = (
        Claimer((ADD,), 100, first=True),
        Claimer((CAT,), 90, first=True),
        Claimer((RELU,), 80, first=True),
        TableLabels({"add_1": Label({"add": symmetric_spec(30)}, symmetric_spec(30), annotated=False)}),
    )
    evidence, _ = run_student(ns, model, calibration, before)
    return {"labels": evidence["labels"], "ops": evidence["ops"]}


EXERCISES = with_hidden_cases(
    PUBLIC,
    backend_quantizer={"lowered": lowered, "reference": reference, "crowded": crowded, "claimed": claimed},
    # each hidden case lowers one program and runs it in ExecuTorch (seconds, more under load); the public
    # gate_net lowers two, hence its 180 s
    case_seconds={"backend_quantizer": 90},
)
