"""M01-3 改圖: replace_op and insert_clamp, run on hidden models.

Each case exports a hidden model, runs the student's pass on it and describes the graph
after the call (``selfcheck.public.m01_3.describe_pass``): target counts, wiring of the
nodes that were there before, lint, whether the code was regenerated, and the outputs.
Every model appears on every seed; the seed changes sizes, weights, inputs and bounds.

Two graphs also hold a node of another overload of the op asked for (``aten.mean.default`` beside
``aten.mean.dim``, a ``padding="same"`` conv: ``aten.conv2d.padding`` beside ``aten.conv2d.default``):
it must be left alone. Their names are under ``other_overloads``. One replacement has an old op with two
arguments and one extra argument (``clamp(x, 0)`` → ``hardtanh(x, 0, 6)``): the extra one goes last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m01_3 import PUBLIC, describe_pass

aten = torch.ops.aten


# --- hidden models --------------------------------------------------------------------------------


class ReluBranches(nn.Module):
    """A relu read by a conv, an add and a cat (inside a list); a second relu read by the cat and returned."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.mix = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(self.conv(x))
        y = torch.relu(self.mix(r) + r)
        return torch.cat([y, r], dim=1), y


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


class AddMix(nn.Module):
    """add of two tensors, an add of that and a scalar, both read by a cat; the second is also returned."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.fc(x) + y
        t = s + 0.5
        return torch.cat([s, t * y], dim=1), t


class ClampReLUs(nn.Module):
    """ReLUs written as ``clamp(min=0)`` (``aten.clamp.default`` with two arguments, the input and the min): one
    read by an add and returned, one after the add."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x).clamp(min=0.0)
        return (y - x).clamp(min=0.0), y


class MeanPools(nn.Module):
    """A mean over the channels (``aten.mean.dim``) read by a sub and returned, and a mean of everything
    (``aten.mean.default``: another overload of the same op)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        m = y.mean(dim=1, keepdim=True)
        return y - m + y.mean(), m


class ConvFanOut(nn.Module):
    """The first conv's output has two readers; the second conv feeds an add, and so does a conv with
    ``padding="same"`` (``aten.conv2d.padding``: not the ``aten.conv2d.default`` asked for)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, channels, 3, padding=1)
        self.second = nn.Conv2d(channels, channels, 3, padding=1)
        self.same = nn.Conv2d(3, channels, 3, padding="same")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        return self.second(torch.relu(y)) + y + self.same(x)


class LinearOut(nn.Module):
    """A linear read by a sigmoid and returned as it is; a second linear is the other output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.out = nn.Linear(features, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        return y, self.out(torch.sigmoid(y))


class LinearChain(nn.Module):
    """A linear read by the next linear and by a cat (inside a list); the second is read by the cat and returned."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, features)
        self.fc2 = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.fc1(x)
        b = self.fc2(a)
        return torch.cat([a, b], dim=1), b


class Gates(nn.Module):
    """A sigmoid gate times a relu branch; the relu is also returned (``retargeted`` then edits both in place)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.sigmoid(self.a(x))
        r = torch.relu(self.b(x))
        return g * r, r


def retargeted(gm: GraphModule) -> None:
    """An earlier pass changed targets in place, keeping the names: ``sigmoid`` is now a relu, ``relu`` a tanh."""
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["sigmoid"].target = aten.relu.default
    nodes["relu"].target = aten.tanh.default


class Projections(nn.Module):
    """Two linears in modules ``proj`` and ``head`` around a ReLU module called ``linear_act``."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.proj = nn.Linear(features, features)
        self.linear_act = nn.ReLU()
        self.head = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.linear_act(self.proj(x))
        return self.head(y) + y, y


SUFFIX = 90
"""Renamed nodes get the suffix ``_90``, ``_91``…: a name no graph here has used, so the new name does not
depend on which names the graph's namespace still reserves (a traced graph reserves more than its copy)."""


def named_after_modules(gm: GraphModule) -> None:
    """A readability pass: every op renamed after the module that ran it (``proj_90``, ``linear_act_91``, …).
    Also used by other modules' cases."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("nn_module_stack")]
    index = 0
    for node in ops:
        path = str(list(node.meta["nn_module_stack"].values())[-1][0])
        if path:
            node._rename(f"{path.rsplit('.', 1)[-1]}_{SUFFIX + index}")
            index += 1
    gm.recompile()


def swap_names(gm: GraphModule, mapping: dict[str, str]) -> None:
    """A pass that renamed nodes: the node called ``old`` is then ``new_90`` (``new_91``… in mapping order), so
    names tell another op (``{"add": "mul", "mul": "add"}`` calls the add ``mul_90`` and the mul ``add_91``).
    Also used by other modules' cases."""
    nodes = {n.name: n for n in gm.graph.nodes}
    for index, (old, new) in enumerate(mapping.items()):
        nodes[old]._rename(f"{new}_{SUFFIX + index}")
    gm.recompile()


def noting_overloads(op: OpOverload, found: list[str]) -> Callable[[GraphModule], None]:
    """An ``edit`` that changes nothing: it puts in ``found`` the names of the nodes of another overload of ``op``."""

    def note(gm: GraphModule) -> None:
        found.extend(
            n.name
            for n in gm.graph.nodes
            if n.op == "call_function"
            and isinstance(n.target, OpOverload)
            and n.target.overloadpacket is op.overloadpacket
            and n.target != op
        )

    return note


def with_overloads(ns: Namespace, name: str, model: nn.Module, inputs: tuple[torch.Tensor, ...], op: Any, *args: Any):
    """``describe_pass`` of ``ns[name](gm, op, *args)``, and under ``other_overloads`` the names of the nodes of
    another overload of ``op`` (they must be left alone)."""
    others: list[str] = []
    result = describe_pass(ns, name, model, inputs, op, *args, edit=noting_overloads(op, others))
    result["other_overloads"] = others
    return result


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


def replace_add(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), (3, features))
    return describe_pass(ns, "replace_op", AddMix(features), inputs, aten.add.Tensor, aten.mul.Tensor)


def replace_clamp(ns: Namespace, seed: int) -> Any:
    """clamp(x, 0) → hardtanh(x, 0, 6): the old op has two arguments, the extra one goes after both."""
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), scales=(8.0,))
    return describe_pass(
        ns, "replace_op", ClampReLUs(features), inputs, aten.clamp.default, aten.hardtanh.default, (6.0,)
    )


def replace_mean(ns: Namespace, seed: int) -> Any:
    """mean.dim → amax: the mean of everything (mean.default, another overload) stays."""
    inputs = seeded_inputs(seed, (2, 3, 4, 4))
    return with_overloads(ns, "replace_op", MeanPools(seed_size(seed, 2, 4)), inputs, aten.mean.dim, aten.amax.default)


def replace_renamed(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), scales=(4.0,))
    return describe_pass(
        ns,
        "replace_op",
        Gates(features),
        inputs,
        aten.relu.default,
        aten.hardtanh.default,
        (0.0, 6.0),
        edit=retargeted,
    )


# --- insert_clamp ---------------------------------------------------------------------------------


def _bounds(seed: int, salt: int) -> tuple[float, float]:
    """``low < 0 < high``, from the seed (never equal, never swapped)."""
    generator = torch.Generator().manual_seed(seed * 31 + salt)
    low, high = (torch.rand(2, generator=generator) * 0.25 + 0.05).tolist()
    return round(-low, 4), round(high, 4)


def clamp_fan_out(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    low, high = _bounds(seed, 1)
    return with_overloads(ns, "insert_clamp", ConvFanOut(seed_size(seed, 2, 4)), inputs, aten.conv2d.default, low, high)


def clamp_output(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features))
    low, high = _bounds(seed, 2)
    return describe_pass(ns, "insert_clamp", LinearOut(features), inputs, aten.linear.default, low, high)


def clamp_chain(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), scales=(2.0,))
    low, high = _bounds(seed, 3)
    return describe_pass(ns, "insert_clamp", LinearChain(features), inputs, aten.linear.default, low, high)


def clamp_renamed(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 6)
    inputs = seeded_inputs(seed, (3, features), scales=(2.0,))
    low, high = _bounds(seed, 4)
    return describe_pass(
        ns, "insert_clamp", Projections(features), inputs, aten.linear.default, low, high, edit=named_after_modules
    )


EXERCISES = with_hidden_cases(
    PUBLIC,
    replace_op={
        "relu6": replace_relu6,
        "sigmoid": replace_sigmoid,
        "add": replace_add,
        "clamp": replace_clamp,
        "mean": replace_mean,
        "retargeted": replace_renamed,
    },
    insert_clamp={
        "fan_out": clamp_fan_out,
        "output": clamp_output,
        "chain": clamp_chain,
        "module_names": clamp_renamed,
    },
)
