"""M01-2 為什麼 annotator 靜默失效: find_nodes by node.target, run on hidden graphs."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from autograder.untrusted.cases.m01_1 import export, node_labels

NOTEBOOK = "M01-2"

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


def _mixed(seed: int):
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return export(MixedOverloads(seed_size(seed, 2, 4)), inputs)


def _chain(seed: int):
    features = seed_size(seed, 3, 6)
    return export(LongChain(features, 11 + seed % 3), seeded_inputs(seed, (2, features)))


def _run(ns: Namespace, gm: Any, queries: dict[str, Any]) -> dict[str, list[str]]:
    found = {}
    for text, op in queries.items():
        found[text] = node_labels(gm, ns["find_nodes"](gm, op), f"find_nodes(gm, {text}) 的回傳值")
    return found


def packets(ns: Namespace, seed: int) -> Any:
    mixed = _run(ns, _mixed(seed), {"aten.conv2d": aten.conv2d, "aten.mean": aten.mean})
    chain = _run(ns, _chain(seed), {"aten.add": aten.add})
    return {"mixed": mixed, "chain": chain}


def overloads(ns: Namespace, seed: int) -> Any:
    queries = {
        "aten.conv2d.default": aten.conv2d.default,
        "aten.conv2d.padding": aten.conv2d.padding,
        "aten.mean.dim": aten.mean.dim,
        "aten.mean.default": aten.mean.default,
    }
    mixed = _run(ns, _mixed(seed), queries)
    chain = _run(ns, _chain(seed), {"aten.add.Tensor": aten.add.Tensor, "aten.addmm.default": aten.addmm.default})
    return {"mixed": mixed, "chain": chain}


def similar(ns: Namespace, seed: int) -> Any:
    queries = {
        "aten.max": aten.max,
        "aten.relu": aten.relu,
        "aten.max_pool2d.default": aten.max_pool2d.default,
        "aten.sigmoid": aten.sigmoid,
    }
    return {"mixed": _run(ns, _mixed(seed), queries)}


def order(ns: Namespace, seed: int) -> Any:
    return {"chain": _run(ns, _chain(seed), {"aten.relu.default": aten.relu.default})}


EXERCISES = {
    "find_nodes": Exercise(
        NOTEBOOK,
        "find_nodes",
        "find_nodes：依 node.target 找 op（OpOverloadPacket 與 OpOverload）",
        ("find_nodes",),
        {"packets": packets, "overloads": overloads, "similar": similar, "order": order},
    ),
}
