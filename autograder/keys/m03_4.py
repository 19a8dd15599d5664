"""Answer key of M03-4: AddQuantizer and CatQuantizer with shared qparams."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    Quantizer,
    SharedQuantizationSpec,
    annotate_input_qspec_map,
    annotate_output_qspec,
)
from common.qspecs import act_spec

ADD = torch.ops.aten.add.Tensor
CAT = torch.ops.aten.cat.default


def _activation_inputs(args: list[object]) -> list[Node]:
    return list(dict.fromkeys(a for a in args if isinstance(a, Node) and a.op != "get_attr"))


def _annotate_shared(node: Node, inputs: list[Node], share: bool) -> None:
    spec = act_spec()
    annotate_input_qspec_map(node, inputs[0], spec)
    rest = SharedQuantizationSpec((inputs[0], node)) if share else spec
    for other in inputs[1:]:
        annotate_input_qspec_map(node, other, rest)
    annotate_output_qspec(node, rest)
    node.meta[ANNOTATION_KEY]._annotated = True


def _claimed(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


class AddQuantizer(Quantizer):
    def __init__(self, share: bool):
        self.share = share

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target != ADD or _claimed(node):
                continue
            inputs = _activation_inputs(list(node.args[:2]))
            if inputs:
                _annotate_shared(node, inputs, self.share)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class CatQuantizer(Quantizer):
    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target != CAT or _claimed(node):
                continue
            inputs = _activation_inputs(list(node.args[0]))
            if inputs:
                _annotate_shared(node, inputs, share=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass
