"""Quantizers the hidden checks wrap around a student's Quantizer to probe its manners.

``FirstAddClaimer`` annotates the first add before the student's Quantizer runs;
``LateAddClaimer`` annotates every add nobody has claimed after it. A Quantizer that
respects ``_annotated`` leaves the first add alone and marks the adds it labels.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
)

ADD = torch.ops.aten.add.Tensor


def _spec(limit: int) -> QuantizationSpec:
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-limit,
        quant_max=limit,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def _claim(node: Node, limit: int) -> None:
    spec = _spec(limit)
    inputs = [a for a in node.args[:2] if isinstance(a, Node)]
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map=dict.fromkeys(inputs, spec), output_qspec=spec, _annotated=True
    )


class FirstAddClaimer(Quantizer):
    """Claims the first add of the graph with an int8 [-100, 100] symmetric spec."""

    def annotate(self, model: GraphModule) -> GraphModule:
        first = next(n for n in model.graph.nodes if n.op == "call_function" and n.target == ADD)
        _claim(first, 100)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class LateAddClaimer(Quantizer):
    """Claims, with an int8 [-50, 50] symmetric spec, every add not yet marked ``_annotated``."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == ADD:
                ann = node.meta.get(ANNOTATION_KEY)
                if ann is None or not ann._annotated:
                    _claim(node, 50)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class ChainQuantizer(Quantizer):
    """Runs several Quantizers' annotate / validate in order (like ComposableQuantizer)."""

    def __init__(self, quantizers: list[Quantizer]) -> None:
        self.quantizers = quantizers

    def annotate(self, model: GraphModule) -> GraphModule:
        for quantizer in self.quantizers:
            quantizer.annotate(model)
        return model

    def validate(self, model: GraphModule) -> None:
        for quantizer in self.quantizers:
            quantizer.validate(model)


class NoLabels(Quantizer):
    """Labels nothing: prepare_pt2e then only folds BN (and inserts no observer)."""

    def annotate(self, model: GraphModule) -> GraphModule:
        return model

    def validate(self, model: GraphModule) -> None:
        pass
