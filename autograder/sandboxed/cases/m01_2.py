"""M01-2 為什麼 annotator 靜默失效: find_nodes by node.target, run on hidden graphs.

Every graph appears on every seed: two overloads of conv2d, of mean and of the
quantized_decomposed ops, names that look like ops (a parameter ``relu_scale``, inputs
called ``relu`` and ``sigmoid``, a node named ``relu_1`` whose target a pass changed to
hardtanh), a ``dequantize_per_tensor`` whose name contains ``quantize_per_tensor``, an
``aten.quantize_per_tensor.default`` beside ``quantized_decomposed.quantize_per_tensor.default`` (the
same ``__name__``: only the namespace tells them apart), and a chain of more than ten relus, once
more with a relu a pass left behind without consumers (still on the graph, so still found). The seed
changes sizes, weights, the chain's length and which relu is left behind.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m01_1 import export, graph_changes, graph_state
from selfcheck.public.m01_2 import PUBLIC, find_all

aten = torch.ops.aten


class MixedOverloads(nn.Module):
    """Two overloads of conv2d, mean and max, max_pool2d, a parameter whose name starts with ``relu``."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.same = nn.Conv2d(3, channels, 3, padding="same")
        self.pad = nn.Conv2d(3, channels, 3, padding=1)
        self.relu_scale = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.same(x)
        b = self.pad(x)
        y = torch.relu(a) * self.relu_scale + b
        y = y - y.mean(dim=1, keepdim=True) + y.mean()
        peak = torch.max(y, dim=1, keepdim=True).values
        return torch.max_pool2d(y - peak, 2)


class LongChain(nn.Module):
    """``depth`` (≥ 11) relu → add blocks, then addmm: node names run past relu_10."""

    def __init__(self, features: int, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.weight = nn.Parameter(torch.randn(features, features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for step in range(self.depth):
            x = torch.relu(x) + 0.1 * step
        return torch.addmm(self.bias, x, self.weight) + x


class QuantDequant(nn.Module):
    """quantize → dequantize → conv → quantize → dequantize, with the ``.default`` and ``.tensor`` overloads."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 1)
        self.register_buffer("scale", torch.rand(()) * 0.05 + 0.01)
        self.register_buffer("zero_point", torch.tensor(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        q = qd.quantize_per_tensor.default(x, 0.02, -1, -128, 127, torch.int8)
        x = qd.dequantize_per_tensor.default(q, 0.02, -1, -128, 127, torch.int8)
        y = self.conv(x)
        q = qd.quantize_per_tensor.tensor(y, self.scale, self.zero_point, -128, 127, torch.int8)
        y = qd.dequantize_per_tensor.tensor(q, self.scale, self.zero_point, -128, 127, torch.int8)
        return torch.relu(y)


class TwoNamespaces(nn.Module):
    """``torch.quantize_per_tensor`` (``aten.quantize_per_tensor.default`` → ``aten.dequantize.self``) beside
    ``quantized_decomposed.quantize_per_tensor.default``: both overloads are called ``quantize_per_tensor.default``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qd = torch.ops.quantized_decomposed
        y = aten.dequantize.self(aten.quantize_per_tensor.default(x, 0.05, 0, torch.qint8))
        q = qd.quantize_per_tensor.default(x, 0.02, -1, -128, 127, torch.int8)
        return y + qd.dequantize_per_tensor.default(q, 0.02, -1, -128, 127, torch.int8)


class NamedLikeOps(nn.Module):
    """Inputs called ``relu`` and ``sigmoid``: the ops become ``sigmoid_1`` and ``relu_1``."""

    def forward(self, relu: torch.Tensor, sigmoid: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(relu) * torch.relu(sigmoid)


def _mixed(seed: int) -> GraphModule:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return export(MixedOverloads(seed_size(seed, 2, 4)), inputs)


def _chain(seed: int) -> GraphModule:
    features = seed_size(seed, 3, 6)
    return export(LongChain(features, seed_size(seed, 11, 13)), seeded_inputs(seed, (2, features)))


def _qdq(seed: int) -> GraphModule:
    return export(QuantDequant(seed_size(seed, 2, 4)), seeded_inputs(seed, (2, 3, 4, 4)))


def _namespaces(seed: int) -> GraphModule:
    return export(TwoNamespaces(), seeded_inputs(seed, (2, seed_size(seed, 3, 6))))


def _leftover(seed: int) -> tuple[GraphModule, list[str]]:
    """The chain after a pass replaced one relu (which one depends on the seed) by hardtanh(0, 6) and rewired
    its consumer, but has not erased it yet: that relu is still on the graph, without consumers. Also its name."""
    gm = _chain(seed)
    relus = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == aten.relu.default]
    old = relus[2 + seed % (len(relus) - 4)]
    with gm.graph.inserting_after(old):
        new = gm.graph.call_function(aten.hardtanh.default, (old.args[0], 0.0, 6.0))
    old.replace_all_uses_with(new)
    gm.graph.lint()
    gm.recompile()
    return gm, [old.name]


def _renamed(seed: int) -> GraphModule:
    """NamedLikeOps after a pass changed relu_1's target to hardtanh(0, 6) in place (the name stays)."""
    features = seed_size(seed, 3, 6)
    gm = export(NamedLikeOps(), seeded_inputs(seed, (2, features), (2, features)))
    node = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target == aten.relu.default)
    node.target = aten.hardtanh.default
    node.args = (*node.args, 0.0, 6.0)
    gm.graph.lint()
    gm.recompile()
    return gm


def searched(ns: Namespace, graphs: dict[str, tuple[GraphModule, dict[str, Any]]]) -> dict[str, Any]:
    """``find_all`` on each graph (key → (graph, queries)), under ``changed`` how the calls changed each graph,
    under ``erased`` the nodes they removed from it, and under ``ops`` each op node's OpOverloadPacket (before
    the calls)."""
    found: dict[str, Any] = {"changed": {}, "ops": {}, "erased": {}}
    for key, (gm, queries) in graphs.items():
        before = graph_state(gm)
        found["ops"][key] = {
            n.name: str(n.target.overloadpacket) for n in gm.graph.nodes if isinstance(n.target, OpOverload)
        }
        found[key] = find_all(ns, gm, queries)
        changes = graph_changes(before, gm)
        if changes:
            found["changed"][key] = changes
            after = {n.name for n in gm.graph.nodes}
            found["erased"][key] = [name for name in before["nodes"] if name not in after]
    return found


def packets(ns: Namespace, seed: int) -> Any:
    qd = torch.ops.quantized_decomposed
    return searched(
        ns,
        {
            "mixed": (_mixed(seed), {"aten.conv2d": aten.conv2d, "aten.mean": aten.mean}),
            "chain": (_chain(seed), {"aten.add": aten.add}),
            "qdq": (
                _qdq(seed),
                {
                    "quantized_decomposed.quantize_per_tensor": qd.quantize_per_tensor,
                    "quantized_decomposed.dequantize_per_tensor": qd.dequantize_per_tensor,
                },
            ),
        },
    )


def overloads(ns: Namespace, seed: int) -> Any:
    qd = torch.ops.quantized_decomposed
    queries = {
        "aten.conv2d.default": aten.conv2d.default,
        "aten.conv2d.padding": aten.conv2d.padding,
        "aten.mean.dim": aten.mean.dim,
        "aten.mean.default": aten.mean.default,
    }
    return searched(
        ns,
        {
            "mixed": (_mixed(seed), queries),
            "chain": (_chain(seed), {"aten.add.Tensor": aten.add.Tensor, "aten.addmm.default": aten.addmm.default}),
            "qdq": (
                _qdq(seed),
                {
                    "quantized_decomposed.quantize_per_tensor.tensor": qd.quantize_per_tensor.tensor,
                    "quantized_decomposed.dequantize_per_tensor.default": qd.dequantize_per_tensor.default,
                },
            ),
        },
    )


def similar(ns: Namespace, seed: int) -> Any:
    mixed = {
        "aten.max": aten.max,
        "aten.relu": aten.relu,
        "aten.max_pool2d.default": aten.max_pool2d.default,
        "aten.sigmoid": aten.sigmoid,
    }
    renamed = {
        "aten.relu": aten.relu,
        "aten.relu.default": aten.relu.default,
        "aten.hardtanh": aten.hardtanh,
        "aten.sigmoid.default": aten.sigmoid.default,
    }
    qdq = {
        "aten.quantize_per_tensor": aten.quantize_per_tensor,
        "quantized_decomposed.quantize_per_tensor.default": torch.ops.quantized_decomposed.quantize_per_tensor.default,
    }
    namespaces = {
        "aten.quantize_per_tensor.default": aten.quantize_per_tensor.default,
        "quantized_decomposed.quantize_per_tensor.default": torch.ops.quantized_decomposed.quantize_per_tensor.default,
        "aten.dequantize": aten.dequantize,
        "quantized_decomposed.dequantize_per_tensor.default": (
            torch.ops.quantized_decomposed.dequantize_per_tensor.default
        ),
    }
    return searched(
        ns,
        {
            "mixed": (_mixed(seed), mixed),
            "renamed": (_renamed(seed), renamed),
            "qdq": (_qdq(seed), qdq),
            "namespaces": (_namespaces(seed), namespaces),
        },
    )


def order(ns: Namespace, seed: int) -> Any:
    """The chain, then the chain with a relu left without consumers (``unused``: its name)."""
    leftover, unused = _leftover(seed)
    found = searched(
        ns,
        {
            "chain": (_chain(seed), {"aten.relu.default": aten.relu.default}),
            "leftover": (leftover, {"aten.relu.default": aten.relu.default, "aten.relu": aten.relu}),
        },
    )
    found["unused"] = unused
    return found


EXERCISES = with_hidden_cases(
    PUBLIC,
    find_nodes={"packets": packets, "overloads": overloads, "similar": similar, "order": order},
)


STANDINS = {
    "find_nodes": lambda gm, op: [],
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a case goes on to export all its models instead of stopping at its first check."""
