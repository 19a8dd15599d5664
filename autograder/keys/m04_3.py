"""Answer key of M04-3: a Quantizer that fuses op patterns by labelling only their boundaries."""

from __future__ import annotations

from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    QuantizationAnnotation,
    Quantizer,
    annotate_input_qspec_map,
    annotate_output_qspec,
)
from common.qspecs import act_spec


def _claimed(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


def _match(node: Node, pattern: tuple) -> list[Node] | None:
    """The chain of nodes starting at ``node`` whose targets are ``pattern``, each the only user of the one before."""
    if node.op != "call_function" or node.target != pattern[0]:
        return None
    members = [node]
    for target in pattern[1:]:
        last = members[-1]
        if len(last.users) != 1:
            return None
        nxt = next(iter(last.users))
        if nxt.op != "call_function" or nxt.target != target:
            return None
        members.append(nxt)
    return members


class FusionQuantizer(Quantizer):
    def __init__(self, patterns):
        self.patterns = patterns

    def annotate(self, model: GraphModule) -> GraphModule:
        for pattern in self.patterns:
            for node in model.graph.nodes:
                members = _match(node, pattern)
                if members is None or any(_claimed(m) for m in members):
                    continue
                for index, member in enumerate(members):
                    previous = members[index - 1] if index > 0 else None
                    for arg in member.all_input_nodes:
                        if arg is not previous and arg.op != "get_attr":
                            annotate_input_qspec_map(member, arg, act_spec())
                annotate_output_qspec(members[-1], act_spec())
                for member in members:
                    member.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())._annotated = True
        return model

    def validate(self, model: GraphModule) -> None:
        pass
