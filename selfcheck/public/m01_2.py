"""Public cases of M01-2 為什麼 annotator 靜默失效 (find_nodes) on the chapter's own models."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.public.m01_1 import export, node_labels

TITLE = "find_nodes：依 node.target 找 op（OpOverloadPacket 與 OpOverload）"


def find_all(ns: Namespace, gm: GraphModule, queries: dict[str, Any]) -> dict[str, list[str]]:
    """``find_nodes(gm, op)`` for each query (text → op): the names of the nodes found, in the order returned."""
    found = {}
    for text, op in queries.items():
        found[text] = node_labels(gm, ns["find_nodes"](gm, op), f"find_nodes(gm, {text}) 的回傳值")
    return found


def _chapter_graph(name: str, seed: int) -> GraphModule:
    from common.models import get_model

    return export(get_model(name), seeded_inputs(seed, (2, 3, 16, 16)))


class TwoConvs(torch.nn.Module):
    """The chapter's two convs: padding="same" exports to conv2d.padding, padding=1 to conv2d.default."""

    def __init__(self) -> None:
        super().__init__()
        self.same = torch.nn.Conv2d(3, 4, 3, padding="same")
        self.pad = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.same(x) + self.pad(x)


def two_convs(ns: Namespace, seed: int) -> Any:
    """The chapter's TwoConvs: the packet finds both overloads, an overload only itself."""
    aten = torch.ops.aten
    gm = export(TwoConvs(), seeded_inputs(seed, (2, 3, 16, 16)))
    return find_all(
        ns,
        gm,
        {
            "aten.conv2d": aten.conv2d,
            "aten.conv2d.default": aten.conv2d.default,
            "aten.conv2d.padding": aten.conv2d.padding,
            "aten.add.Tensor": aten.add.Tensor,
        },
    )


def max_and_pool(ns: Namespace, seed: int) -> Any:
    """torch.max(x, dim) (max.dim then getitem) beside max_pool2d: aten.max is not aten.max_pool2d."""
    aten = torch.ops.aten

    class MaxPool(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            peak = torch.max(x, dim=1, keepdim=True).values
            return torch.max_pool2d(x - peak, 2)

    gm = export(MaxPool(), seeded_inputs(seed, (2, 3, 8, 8)))
    return find_all(
        ns,
        gm,
        {"aten.max": aten.max, "aten.max_pool2d": aten.max_pool2d, "aten.sub.Tensor": aten.sub.Tensor},
    )


def chapter_models(ns: Namespace, seed: int) -> Any:
    """cat_pool (cat, two convs) and residual (relu twice, batch_norm, add) by packet and by overload."""
    aten = torch.ops.aten
    cat_pool = find_all(
        ns,
        _chapter_graph("cat_pool", seed),
        {"aten.cat": aten.cat, "aten.conv2d": aten.conv2d, "aten.max_pool2d.default": aten.max_pool2d.default},
    )
    residual = find_all(
        ns,
        _chapter_graph("residual", seed),
        {
            "aten.relu": aten.relu,
            "aten.relu.default": aten.relu.default,
            "aten.add.Tensor": aten.add.Tensor,
            "aten.add": aten.add,
            "aten.cat": aten.cat,
        },
    )
    return {"cat_pool": cat_pool, "residual": residual}


PUBLIC = declare(
    __name__,
    Exercise(
        "find_nodes",
        TITLE,
        ("find_nodes",),
        {"chapter_models": chapter_models, "two_convs": two_convs, "max_and_pool": max_and_pool},
    ),
)
