"""Answer key of M07-3: a Quantizer with 4-bit per-channel weights and int8 activations."""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY, PerChannelMinMaxObserver, QuantizationAnnotation, QuantizationSpec, Quantizer
from common.qspecs import act_spec

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


def int4_weight_spec() -> QuantizationSpec:
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-8,
        quant_max=7,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
    )


class Int4WeightQuantizer(Quantizer):
    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in WEIGHTED:
                continue
            existing = node.meta.get(ANNOTATION_KEY)
            if existing is not None and existing._annotated:
                continue
            node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={node.args[0]: act_spec(), node.args[1]: int4_weight_spec()},
                output_qspec=act_spec(),
                _annotated=True,
            )
        return model

    def validate(self, model: GraphModule) -> None:
        pass
