"""Answer key of M06-2: from the numeric debugger's comparison to the layer that loses most."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule


def node_sqnr(comparison: dict[Any, Any]) -> dict[str, float]:
    """The mean SQNR of every compared node whose results are single numbers."""
    table = {}
    for info, summary in comparison.items():
        values = [result.sqnr for result in summary.results]
        if values and all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            table[info.name] = sum(float(v) for v in values) / len(values)
    return table


def upstream(gm: GraphModule, name: str, table: dict[str, float]) -> list[str]:
    """The nearest nodes above ``name`` that are in ``table`` (walking through the ones that are not)."""
    node = next(n for n in gm.graph.nodes if n.name == name)
    found, seen, queue = [], set(), list(node.all_input_nodes)
    while queue:
        current = queue.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        if current.name in table:
            found.append(current.name)
        else:
            queue.extend(current.all_input_nodes)
    return found


def layer_drops(comparison: dict[Any, Any], gm: GraphModule) -> dict[str, float]:
    table = node_sqnr(comparison)
    drops = {}
    for node in gm.graph.nodes:
        if node.name not in table:
            continue
        above = upstream(gm, node.name, table)
        if above:
            drops[node.name] = min(table[name] for name in above) - table[node.name]
    return drops


def worst_layer(comparison: dict[Any, Any], gm: GraphModule) -> str:
    drops = layer_drops(comparison, gm)
    return max(drops, key=drops.get)
