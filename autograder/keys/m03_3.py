"""Answer key of M03-3: a rule-based Quantizer by node.target and its validate()."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)
from common.qspecs import act_spec, weight_spec

CONV = torch.ops.aten.conv2d.default
LINEAR = torch.ops.aten.linear.default
ADD = torch.ops.aten.add.Tensor
RELU = torch.ops.aten.relu.default
MAX_POOL = torch.ops.aten.max_pool2d.default


def _label(node: Node) -> QuantizationAnnotation:
    return node.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())


def _claimed(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and ann._annotated


def _fused_relu(node: Node) -> Node | None:
    """The relu that is the only user of ``node``, if there is one."""
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target == RELU:
        return users[0]
    return None


class RuleQuantizer(Quantizer):
    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or _claimed(node):
                continue
            if node.target in (CONV, LINEAR):
                ann = _label(node)
                ann.input_qspec_map[node.args[0]] = act_spec()
                ann.input_qspec_map[node.args[1]] = weight_spec(per_channel=True)
                if len(node.args) > 2 and isinstance(node.args[2], Node):
                    ann.input_qspec_map[node.args[2]] = None
                relu = _fused_relu(node) if node.target == CONV else None
                if relu is not None:
                    _label(relu).output_qspec = act_spec()
                    relu.meta[ANNOTATION_KEY]._annotated = True
                else:
                    ann.output_qspec = act_spec()
                ann._annotated = True
            elif node.target == ADD:
                inputs = [a for a in node.args[:2] if isinstance(a, Node) and a.op != "get_attr"]
                ann = _label(node)
                for a in dict.fromkeys(inputs):
                    ann.input_qspec_map[a] = act_spec()
                ann.output_qspec = act_spec()
                ann._annotated = True
            elif node.target == MAX_POOL:
                source = node.args[0]
                ann = _label(node)
                ann.input_qspec_map[source] = act_spec()
                ann.output_qspec = SharedQuantizationSpec((source, node))
                ann._annotated = True
        return model

    def validate(self, model: GraphModule) -> None:
        pass


SYMMETRIC = (torch.per_tensor_symmetric, torch.per_channel_symmetric)


def _check_range(node: Node, spec: object) -> None:
    if not isinstance(spec, QuantizationSpec) or spec.quant_min is None or spec.quant_max is None:
        return
    info = torch.iinfo(spec.dtype)
    if not info.min <= spec.quant_min < spec.quant_max <= info.max:
        raise ValueError(
            f"{node.name}：整數範圍 [{spec.quant_min}, {spec.quant_max}] 不在 {spec.dtype} 的 [{info.min}, {info.max}] 內"
        )


class CheckedRuleQuantizer(RuleQuantizer):
    def validate(self, model: GraphModule) -> None:
        for node in model.graph.nodes:
            ann = node.meta.get(ANNOTATION_KEY)
            if ann is None:
                continue
            for producer, spec in ann.input_qspec_map.items():
                if producer not in node.all_input_nodes:
                    raise ValueError(f"{node.name}：input_qspec_map 的 key {producer.name} 不是它的輸入")
                _check_range(node, spec)
            _check_range(node, ann.output_qspec)
            if node.op == "call_function" and node.target in (CONV, LINEAR):
                spec = ann.input_qspec_map.get(node.args[1])
                if isinstance(spec, QuantizationSpec) and spec.qscheme not in SYMMETRIC:
                    raise ValueError(f"{node.name}：weight 必須用 symmetric 量化，看到 {spec.qscheme}")
            if node.op == "call_function" and node.target == CONV and _fused_relu(node) is not None:
                if ann.output_qspec is not None:
                    raise ValueError(f"{node.name}：conv → relu 是融合 pattern，conv 的輸出不能有標籤")
