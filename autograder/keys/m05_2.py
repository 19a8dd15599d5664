"""Answer key of M05-2: a Quantizer whose bias is int32 with scale = s_act · s_w (DerivedQuantizationSpec)."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import ANNOTATION_KEY, DerivedQuantizationSpec, QuantizationAnnotation, Quantizer
from common.qspecs import act_spec, weight_spec

CONV = torch.ops.aten.conv2d.default
LINEAR = torch.ops.aten.linear.default


def derive_bias_qparams(obs_or_fqs):
    act, weight = obs_or_fqs
    act_scale, _ = act.calculate_qparams()
    weight_scale, _ = weight.calculate_qparams()
    scale = (act_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def bias_spec(x: Node, weight: Node, node: Node, per_channel: bool) -> DerivedQuantizationSpec:
    return DerivedQuantizationSpec(
        derived_from=[(x, node), (weight, node)],
        derive_qparams_fn=derive_bias_qparams,
        dtype=torch.int32,
        quant_min=-(2**31),
        quant_max=2**31 - 1,
        qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
        ch_axis=0,
    )


class BiasQuantizer(Quantizer):
    def __init__(self, per_channel: bool):
        self.per_channel = per_channel

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in (CONV, LINEAR):
                continue
            x, weight = node.args[0], node.args[1]
            bias = node.args[2] if len(node.args) > 2 else None
            input_qspec_map = {x: act_spec(), weight: weight_spec(self.per_channel)}
            if isinstance(bias, Node):
                input_qspec_map[bias] = bias_spec(x, weight, node, self.per_channel)
            node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map=input_qspec_map, output_qspec=act_spec(), _annotated=True
            )
        return model

    def validate(self, model: GraphModule) -> None:
        pass
