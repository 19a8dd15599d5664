"""M01-3 改圖: replace_op and insert_clamp, run on hidden models.

Each case exports a hidden model, runs the student's pass on it and describes the result
from the FX structure: the count of every call_function target, how the nodes that were
there before are wired (new nodes are described by their target and inputs, so their
names do not matter), whether the graph passes ``lint``, and the outputs on seeded inputs.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from autograder.untrusted.cases.m01_1 import export
from selfcheck.evidence import EvidenceError, safe_text

NOTEBOOK = "M01-3"

aten = torch.ops.aten


# --- hidden models --------------------------------------------------------------------------------


class ReluBranches(nn.Module):
    """A relu read by a conv and an add, and a relu that is the output."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(self.conv(x))
        return torch.relu(self.mix(r) + r)


class SigmoidGates(nn.Module):
    """Two sigmoid gates; the first is read twice, the second is returned next to the product."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.sigmoid(self.a(x))
        h = self.b(x * g) * g
        gate = torch.sigmoid(h)
        return h * gate, gate


class ConvFanOut(nn.Module):
    """The first conv's output has two readers; the second conv feeds an add."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, channels, 3, padding=1)
        self.second = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        return self.second(torch.relu(y)) + y


class LinearOut(nn.Module):
    """A linear read by a sigmoid and returned as it is; a second linear is the other output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.out = nn.Linear(features, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        return y, self.out(torch.sigmoid(y))


# --- describing a pass ----------------------------------------------------------------------------


def _target_text(node: Node) -> str:
    """``aten.clamp.default`` for an op; ``module.name`` for a Python function (no memory address)."""
    target = node.target
    if isinstance(target, str | OpOverload | OpOverloadPacket):
        return safe_text(target, 80)
    module = getattr(target, "__module__", None) or getattr(type(target), "__module__", "?")
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return safe_text(f"{module}.{name}", 80)


class _Labeler:
    """Names for the nodes of a graph after a pass, independent of the names new nodes got.

    A node that was in the graph before the pass, with the same target, keeps its name;
    any other node is written as ``target(inputs…)`` with its inputs labelled the same way.
    """

    def __init__(self, before: list[Node]) -> None:
        self.before = {id(n): (n, n.target) for n in before}

    def original(self, node: Node) -> bool:
        entry = self.before.get(id(node))
        return entry is not None and entry[0] is node and entry[1] == node.target

    def label(self, node: Node, depth: int = 0) -> str:
        if self.original(node):
            return node.name
        if depth >= 4:
            return f"{_target_text(node)}(…)"
        inputs = ", ".join(self.label(a, depth + 1) for a in node.all_input_nodes)
        return f"{_target_text(node)}({inputs})"


def _outputs(value: Any) -> list[float]:
    leaves = torch.utils._pytree.tree_leaves(value)
    numbers: list[float] = []
    for leaf in leaves:
        if type(leaf) is not torch.Tensor:
            raise EvidenceError(f"模型的輸出裡有不是 tensor 的值：{type(leaf).__name__}")
        numbers.extend(round(float(v), 6) for v in leaf.detach().flatten().tolist())
    if len(numbers) > 5000:
        raise EvidenceError("模型的輸出太大")
    return numbers


def describe_pass(
    ns: Namespace, name: str, model: nn.Module, inputs: tuple[torch.Tensor, ...], *args: Any
) -> dict[str, Any]:
    gm = export(model, inputs)
    with torch.no_grad():
        before_out = _outputs(gm(*inputs))
    labeler = _Labeler(list(gm.graph.nodes))
    result = ns[name](gm, *args)
    if not isinstance(result, GraphModule):
        raise EvidenceError(f"{name} 應該回傳改好的 GraphModule，看到 {type(result).__name__}")
    counts = Counter(_target_text(n) for n in result.graph.nodes if n.op == "call_function")
    wiring = {
        n.name: [labeler.label(a) for a in n.all_input_nodes]
        for n in result.graph.nodes
        if labeler.original(n) and n.op not in ("placeholder", "get_attr", "call_module")
    }
    try:
        result.graph.lint()
        lint = "ok"
    except Exception as exc:  # the student's graph is broken: say how
        lint = safe_text(exc, 400).splitlines()[0] if safe_text(exc, 400).strip() else type(exc).__name__
    try:
        with torch.no_grad():
            outputs: Any = _outputs(result(*inputs))
    except EvidenceError:
        raise
    except Exception as exc:  # running the student's graph failed: say how
        outputs = {"error": f"{type(exc).__name__}: {safe_text(exc, 200)}"}
    return {
        "counts": dict(sorted(counts.items())),
        "wiring": wiring,
        "lint": lint,
        "outputs": outputs,
        "unchanged": outputs == before_out,
    }


# --- replace_op -----------------------------------------------------------------------------------


def replace_relu6(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8), scales=(8.0,))
    model = ReluBranches(seed_size(seed, 2, 4))
    return describe_pass(ns, "replace_op", model, inputs, aten.relu.default, aten.hardtanh.default, (0.0, 6.0))


def replace_sigmoid(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), scales=(2.0,))
    return describe_pass(
        ns, "replace_op", SigmoidGates(features), inputs, aten.sigmoid.default, aten.hardsigmoid.default
    )


# --- insert_clamp ---------------------------------------------------------------------------------


def _bounds(seed: int) -> tuple[float, float]:
    return -0.1 * (1 + seed % 3), 0.15 * (1 + seed % 2)


def clamp_fan_out(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    low, high = _bounds(seed)
    return describe_pass(ns, "insert_clamp", ConvFanOut(seed_size(seed, 2, 4)), inputs, aten.conv2d.default, low, high)


def clamp_output(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features))
    low, high = _bounds(seed + 1)
    return describe_pass(ns, "insert_clamp", LinearOut(features), inputs, aten.linear.default, low, high)


EXERCISES = {
    "replace_op": Exercise(
        NOTEBOOK,
        "replace_op",
        "replace_op：把每個 old 換成 new",
        ("replace_op",),
        {"relu6": replace_relu6, "sigmoid": replace_sigmoid},
    ),
    "insert_clamp": Exercise(
        NOTEBOOK,
        "insert_clamp",
        "insert_clamp：在每個 target 後面插一個 clamp",
        ("insert_clamp",),
        {"fan_out": clamp_fan_out, "output": clamp_output},
    ),
}
