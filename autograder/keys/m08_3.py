"""Answer key of M08-3: BackendQuantizer, a Quantizer for a small int8 backend that runs on XNNPACK.

conv2d / linear: activation, per-channel weight, int32 bias derived from s_x · s_w, output (none
when the only user is a relu: the relu's output instead, fused). add / cat / max_pool2d /
flatten: inputs and output share one observer. sigmoid: fixed qparams 1/256, −128. Nodes already
claimed are left alone.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    Quantizer,
    SharedQuantizationSpec,
)
from common.qspecs import act_spec, weight_spec

CONV = torch.ops.aten.conv2d.default
LINEAR = torch.ops.aten.linear.default
RELU = torch.ops.aten.relu.default
ADD = torch.ops.aten.add.Tensor
CAT = torch.ops.aten.cat.default
MAX_POOL = torch.ops.aten.max_pool2d.default
FLATTEN = torch.ops.aten.flatten.using_ints
SIGMOID = torch.ops.aten.sigmoid.default


def derive_bias_qparams(obs_or_fqs):
    act, weight = obs_or_fqs
    act_scale, _ = act.calculate_qparams()
    weight_scale, _ = weight.calculate_qparams()
    scale = (act_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def bias_spec(x: Node, weight: Node, node: Node) -> DerivedQuantizationSpec:
    return DerivedQuantizationSpec(
        derived_from=[(x, node), (weight, node)],
        derive_qparams_fn=derive_bias_qparams,
        dtype=torch.int32,
        quant_min=-(2**31),
        quant_max=2**31 - 1,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
    )


def sigmoid_spec() -> FixedQParamsQuantizationSpec:
    return FixedQParamsQuantizationSpec(
        dtype=torch.int8,
        scale=1.0 / 256.0,
        zero_point=-128,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
    )


def _claimed(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


def _label(node: Node, inputs: dict, output) -> None:
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=inputs, output_qspec=output, _annotated=True)


def _activations(args) -> list[Node]:
    return list(dict.fromkeys(a for a in args if isinstance(a, Node) and a.op != "get_attr"))


class BackendQuantizer(Quantizer):
    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or _claimed(node):
                continue
            if node.target in (CONV, LINEAR):
                x, weight = node.args[0], node.args[1]
                bias = node.args[2] if len(node.args) > 2 else None
                inputs = {x: act_spec(), weight: weight_spec(per_channel=True)}
                if isinstance(bias, Node):
                    inputs[bias] = bias_spec(x, weight, node)
                users = list(node.users)
                relu = users[0] if len(users) == 1 and users[0].target == RELU and not _claimed(users[0]) else None
                _label(node, inputs, None if relu is not None else act_spec())
                if relu is not None:
                    _label(relu, {}, act_spec())
            elif node.target in (ADD, CAT, MAX_POOL, FLATTEN):
                args = node.args[0] if node.target == CAT else node.args[:2] if node.target == ADD else node.args[:1]
                inputs = _activations(list(args))
                if not inputs:
                    continue
                shared = SharedQuantizationSpec((inputs[0], node))
                _label(node, {inputs[0]: act_spec(), **{other: shared for other in inputs[1:]}}, shared)
            elif node.target == SIGMOID:
                _label(node, {node.args[0]: act_spec()}, sigmoid_spec())
        return model

    def validate(self, model: GraphModule) -> None:
        pass
