"""Answer key of M09-1: linear_roles (each linear node's nn.Linear) and annotation_census (annotated ops per aten op)."""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY


def linear_roles(gm: GraphModule) -> dict[str, str]:
    roles = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.linear.default:
            name, _ = list(node.meta["nn_module_stack"].values())[-1]
            roles[node.name] = name
    return roles


def annotation_census(gm: GraphModule) -> dict[str, dict[str, int]]:
    census: dict[str, dict[str, int]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        ann = node.meta.get(ANNOTATION_KEY)
        specs = [] if ann is None else [*ann.input_qspec_map.values(), ann.output_qspec]
        kind = "annotated" if any(spec is not None for spec in specs) else "unannotated"
        counts = census.setdefault(str(node.target), {"annotated": 0, "unannotated": 0})
        counts[kind] += 1
    return census
