"""Answer key of M08-1: quantizer_report (ops left without a spec, observer instances shared)."""

from __future__ import annotations

import operator
from collections import defaultdict
from typing import Any

import torch

from common.graph_utils import observer_nodes
from common.pt2e import ANNOTATION_KEY, export_module, prepare_pt2e


def quantizer_report(model: torch.nn.Module, example_inputs: tuple, quantizer: Any) -> dict[str, list]:
    prepared = prepare_pt2e(export_module(model, example_inputs), quantizer)
    unannotated = []
    for node in prepared.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        ann = node.meta.get(ANNOTATION_KEY)
        specs = [] if ann is None else [*ann.input_qspec_map.values(), ann.output_qspec]
        if all(spec is None for spec in specs):
            unannotated.append(node.name)
    observed: dict[int, list[str]] = defaultdict(list)
    for node, module in observer_nodes(prepared):
        observed[id(module)].append(node.args[0].name)
    shared = [sorted(set(names)) for names in observed.values() if len(names) > 1]
    return {"unannotated": unannotated, "shared": shared}
