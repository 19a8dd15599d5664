"""Answer key of M03-2: label_positions and fused_patterns."""

from __future__ import annotations

from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY


def label_positions(labeled: GraphModule) -> dict[str, list]:
    edges, outputs = [], []
    for node in labeled.graph.nodes:
        ann = node.meta.get(ANNOTATION_KEY)
        if ann is None:
            continue
        for producer, spec in ann.input_qspec_map.items():
            if spec is not None:
                edges.append((producer.name, node.name))
        if ann.output_qspec is not None:
            outputs.append(node.name)
    return {"edges": edges, "outputs": outputs}


def fused_patterns(labeled: GraphModule) -> list[tuple[str, str]]:
    pairs = []
    for node in labeled.graph.nodes:
        ann = node.meta.get(ANNOTATION_KEY)
        if node.op != "call_function" or ann is None or ann.output_qspec is not None:
            continue
        if not any(spec is not None for spec in ann.input_qspec_map.values()):
            continue
        if len(node.users) != 1:
            continue
        last = next(iter(node.users))
        last_ann = last.meta.get(ANNOTATION_KEY)
        if last_ann is None or last_ann.output_qspec is None:
            continue
        if any(p.name == node.name and s is not None for p, s in last_ann.input_qspec_map.items()):
            continue
        pairs.append((node.name, last.name))
    return pairs
