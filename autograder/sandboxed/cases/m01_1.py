"""M01-1 讀懂 export 出來的圖: op_targets and neighbors, run on hidden models.

The describing helpers are shared with the public cases (``selfcheck.public.m01_1``).
Every hidden model appears on every seed; the seed only changes sizes, weights and the
order of a cat's inputs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m01_1 import (
    PUBLIC,
    describe_neighbors,
    describe_targets,
    export,
    graph_changes,
    graph_state,
    node_kinds,
)

aten = torch.ops.aten


# --- hidden models --------------------------------------------------------------------------------


class GatedStack(nn.Module):
    """Two inputs, a buffer, a linear, a block repeated ``depth`` times, max.dim (→ getitem)."""

    def __init__(self, features: int, depth: int) -> None:
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.register_buffer("shift", torch.randn(features))
        self.depth = depth

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        gate = torch.sigmoid(y)
        for _ in range(self.depth):
            h = torch.relu(h * gate) + self.shift
        peak = torch.max(h, dim=1, keepdim=True).values
        return h - peak


class ConvCatHead(nn.Module):
    """conv → relu, cat with the input, pooled, flattened, a linear head; two convs share x."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.skip = nn.Conv2d(3, 3, 1, bias=False)
        self.head = nn.Linear((channels + 3) * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(self.conv(x))
        y = torch.cat([r, self.skip(x)], dim=1)
        y = torch.max_pool2d(y, 2)
        return self.head(torch.flatten(y, 1))


class Mimic(nn.Module):
    """Names that look like ops without being ops.

    Inputs are called ``conv2d`` and ``mean`` (placeholders), the conv module is called
    ``relu`` (its constants are ``relu_weight`` / ``relu_bias``) and a parameter is called
    ``add`` (a get_attr node ``add_2`` whose target is ``"add"``). The ops: conv2d_1, relu
    (read by an add, a cat and the output), view, add (two tensors), mul and add_1 (a scalar
    operand each), cat of a list holding an op, the relu and the placeholder ``mean``, mul_1.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.relu = nn.Conv2d(3, channels, 1)
        self.add = nn.Parameter(torch.randn(channels))
        self.register_buffer("cat_scale", torch.rand(1) + 0.5)
        self.channels = channels

    def forward(self, conv2d: torch.Tensor, mean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(self.relu(conv2d))
        s = r + self.add.view(1, self.channels, 1, 1)
        t = s * 2.0 + 1.0
        u = torch.cat([t, r, mean], dim=1) * self.cat_scale
        return u, r


class Fork(nn.Module):
    """Nodes with list inputs (cat), a repeated input (add(r, r)), several users, and a tuple output.

    Node names: x, conv2d (conv), relu, add, conv2d_1 (proj), cat, mean, output.
    """

    def __init__(self, channels: int, order: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.proj = nn.Conv2d(3, channels, 1, bias=False)
        self.order = order

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.conv(x)
        r = torch.relu(c)
        s = r + r
        parts = [s, c, self.proj(x)]
        parts = parts[self.order :] + parts[: self.order]
        y = torch.cat(parts, dim=1)
        return y, s.mean()


class Gate(nn.Module):
    """conv → relu, conv * y, relu + product: the graph a pass then edits (see ``edited_graph``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        r = torch.relu(c)
        m = c * y
        return r + m


def edited_graph(seed: int) -> GraphModule:
    """``Gate`` after a pass inserted ``sub(y, other=conv2d)`` before relu and made mul read it.

    conv2d's ``users`` then list relu, mul, sub_tensor (the order the uses were made) while
    the graph runs sub_tensor, relu, mul; sub_tensor reads conv2d through a keyword argument.
    """
    channels = seed_size(seed, 2, 4)
    gm = export(Gate(channels), seeded_inputs(seed, (2, channels, 4, 4), (2, channels, 4, 4)))
    nodes = {n.name: n for n in gm.graph.nodes}
    with gm.graph.inserting_before(nodes["relu"]):
        sub = gm.graph.call_function(aten.sub.Tensor, (nodes["y"],), {"other": nodes["conv2d"]})
    nodes["mul"].replace_input_with(nodes["y"], sub)
    gm.graph.lint()
    gm.recompile()
    return gm


# --- op_targets -----------------------------------------------------------------------------------


def _targets(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    """``op_targets(gm)`` described, how the call changed ``gm`` (it must not), and under ``erased`` the
    positions (among the call_function nodes, in graph order) of the op nodes the call removed."""
    before = graph_state(gm)
    ops = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    described = describe_targets(gm, ns["op_targets"](gm))
    after = {n.name for n in gm.graph.nodes}
    erased = [index for index, name in enumerate(ops) if name not in after]
    return {**described, "changed": graph_changes(before, gm), "erased": erased}


def targets_gated(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 7)
    inputs = seeded_inputs(seed, (2, features), (2, features))
    gm = export(GatedStack(features, seed_size(seed, 2, 4)), inputs)
    return _targets(ns, gm)


def targets_conv(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    gm = export(ConvCatHead(seed_size(seed, 2, 5)), inputs)
    return _targets(ns, gm)


def _mimic(seed: int) -> GraphModule:
    channels = seed_size(seed, 2, 5)
    return export(Mimic(channels), seeded_inputs(seed, (2, 3, 4, 4), (2, 2, 4, 4)))


def targets_mimic(ns: Namespace, seed: int) -> Any:
    return _targets(ns, _mimic(seed))


def targets_edited(ns: Namespace, seed: int) -> Any:
    return _targets(ns, edited_graph(seed))


# --- neighbors ------------------------------------------------------------------------------------


def _neighbors(ns: Namespace, gm: GraphModule, queries: tuple[str, ...]) -> dict[str, Any]:
    """``neighbors(gm, name)`` for each query, the node kinds, and how the calls changed ``gm`` (they must not)."""
    before = graph_state(gm)
    answers = describe_neighbors(ns, gm, queries)
    return {"answers": answers, "kinds": node_kinds(gm), "changed": graph_changes(before, gm)}


def neighbors_fork(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    gm = export(Fork(seed_size(seed, 2, 4), seed_size(seed, 0, 2)), inputs)
    return _neighbors(ns, gm, ("x", "conv2d", "add", "cat", "output"))


def neighbors_mimic(ns: Namespace, seed: int) -> Any:
    return _neighbors(ns, _mimic(seed), ("conv2d", "relu", "add", "mul", "cat", "output"))


def neighbors_edited(ns: Namespace, seed: int) -> Any:
    return _neighbors(ns, edited_graph(seed), ("conv2d", "sub_tensor", "y"))


EXERCISES = with_hidden_cases(
    PUBLIC,
    op_targets={"gated": targets_gated, "conv": targets_conv, "mimic": targets_mimic, "edited": targets_edited},
    neighbors={"fork": neighbors_fork, "mimic": neighbors_mimic, "edited": neighbors_edited},
)
