"""Answer key of M09-2: DynamicLinearQuantizer (every linear's input int8 dynamic, its weight int8 per channel)."""

from __future__ import annotations

import torch
from torch.fx import GraphModule
from torchao.quantization.pt2e import PlaceholderObserver

from common.pt2e import PerChannelMinMaxObserver, QuantizationAnnotation, QuantizationSpec, Quantizer

LINEAR = torch.ops.aten.linear.default


class DynamicLinearQuantizer(Quantizer):
    def annotate(self, model: GraphModule) -> GraphModule:
        activation = QuantizationSpec(
            dtype=torch.int8,
            quant_min=-128,
            quant_max=127,
            qscheme=torch.per_tensor_affine,
            is_dynamic=True,
            observer_or_fake_quant_ctr=PlaceholderObserver,
        )
        weight = QuantizationSpec(
            dtype=torch.int8,
            quant_min=-127,
            quant_max=127,
            qscheme=torch.per_channel_symmetric,
            ch_axis=0,
            observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
        )
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target != LINEAR:
                continue
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map={node.args[0]: activation, node.args[1]: weight}, _annotated=True
            )
        return model

    def validate(self, model: GraphModule) -> None:
        pass
