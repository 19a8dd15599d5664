"""M01-1 讀懂 export 出來的圖: op_targets and neighbors, run on hidden models.

Also the helpers the other M01 notebooks use to describe what a student's function
returned: nodes become their names only when they are nodes of the graph asked about.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

NOTEBOOK = "M01-1"


def export(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    from common.pt2e import export_module

    return export_module(model.eval(), inputs)


def as_list(value: Any, what: str) -> list[Any]:
    """A student's list (or tuple), refused when it is anything else."""
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 list，看到 {type(value).__name__}")
    if len(value) > 1000:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    return list(value)


def node_label(gm: GraphModule, item: Any) -> str:
    """The name of ``item`` when it is a live node of ``gm``; otherwise what it is, in words."""
    if type(item) is Node:
        if item.graph is gm.graph and not getattr(item, "_erased", False):
            return item.name
        return f"（別張圖的 node {safe_text(item.name, 60)}）"
    return f"（不是 Node：{type(item).__name__} {safe_text(item, 60)}）"


def node_labels(gm: GraphModule, value: Any, what: str) -> list[str]:
    return [node_label(gm, item) for item in as_list(value, what)]


def node_kinds(gm: GraphModule) -> dict[str, str]:
    """``{name: op}`` of every node, for messages (``placeholder``, ``get_attr``…)."""
    return {n.name: str(n.op) for n in gm.graph.nodes}


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


# --- op_targets -----------------------------------------------------------------------------------


def describe_targets(gm: GraphModule, value: Any) -> dict[str, Any]:
    """The returned targets as text, and whether each is the very target object of an op node."""
    items = as_list(value, "op_targets 的回傳值")
    genuine = {id(n.target): n.target for n in gm.graph.nodes if n.op == "call_function"}
    texts, objects = [], []
    for item in items:
        is_target = id(item) in genuine and genuine[id(item)] is item
        objects.append(is_target)
        texts.append(str(item) if is_target else safe_text(item, 80))
    others = sorted({safe_text(n.target) for n in gm.graph.nodes if n.op != "call_function"})
    return {"targets": texts, "objects": objects, "other_targets": others}


def targets_gated(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 7)
    inputs = seeded_inputs(seed, (2, features), (2, features))
    gm = export(GatedStack(features, seed_size(seed, 2, 4)), inputs)
    return describe_targets(gm, ns["op_targets"](gm))


def targets_conv(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    gm = export(ConvCatHead(seed_size(seed, 2, 5)), inputs)
    return describe_targets(gm, ns["op_targets"](gm))


# --- neighbors ------------------------------------------------------------------------------------

NEIGHBOR_QUERIES = ("x", "conv2d", "add", "cat", "output")


def neighbors_fork(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    gm = export(Fork(seed_size(seed, 2, 4), seed % 3), inputs)
    answers: dict[str, Any] = {}
    for name in NEIGHBOR_QUERIES:
        value = ns["neighbors"](gm, name)
        if type(value) not in (list, tuple) or len(value) != 2:
            raise EvidenceError(f"neighbors(gm, {name!r}) 應該回傳 (producers, consumers) 兩個 list")
        producers, consumers = value
        answers[name] = {
            "producers": node_labels(gm, producers, "producers "),
            "consumers": node_labels(gm, consumers, "consumers "),
        }
    return {"answers": answers, "kinds": node_kinds(gm)}


EXERCISES = {
    "op_targets": Exercise(
        NOTEBOOK,
        "op_targets",
        "op_targets：依圖上順序列出每個 op 的 target",
        ("op_targets",),
        {"gated": targets_gated, "conv": targets_conv},
    ),
    "neighbors": Exercise(
        NOTEBOOK,
        "neighbors",
        "neighbors：一個 node 的 producers 與 consumers",
        ("neighbors",),
        {"fork": neighbors_fork},
    ),
}
