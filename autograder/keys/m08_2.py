"""Answer key of M08-2: predict, from a converted (q/dq) graph, which conv / linear nodes ``lower_x86`` makes
into oneDNN int8 kernels and which nodes after each one the kernel takes in.

The rules are those of Inductor's x86 quantization patterns (torch/_inductor/fx_passes/quantization.py,
torchao/quantization/pt2e/inductor_passes/x86.py) for the graphs X86InductorQuantizer gives:

- an int8 kernel needs a per-channel int8 weight (``dequantize_per_channel`` of a constant) and an
  activation dequantized per tensor (``.default``; a linear also takes the dynamic ``.tensor``);
- a weight dequantized from a constant in any other way (per tensor, or a conv with a dynamic
  activation) leaves an fp32 conv / matmul that dequantizes the weight on every call;
- an fp32 weight gives oneDNN's / MKL's fp32 kernel, which the lowering fuses nothing into;
- after an int8 kernel: an add that is its only consumer (the other operand a tensor of the same
  shape; for a conv a ``dequantize_per_tensor``, an int8 value it adds in place), then a relu that is
  the only consumer, then a ``quantize_per_tensor.default`` that is the only consumer (uint8 output).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

import common.pt2e  # noqa: F401  (imports torchao's PT2E, which registers torch.ops.quantized_decomposed)
from common.backends import value_shape

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

CONVS = (aten.conv1d.default, aten.conv2d.default, aten.conv_transpose1d.default, aten.conv_transpose2d.input)
LINEAR = aten.linear.default
DEQUANTIZE_WEIGHT = (
    qd.dequantize_per_channel.default,
    qd.dequantize_per_tensor.default,
    qd.dequantize_per_tensor.tensor,
)


def only_consumer(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def calls(node: Any, *targets: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def predict_kernels(converted: GraphModule) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for node in converted.graph.nodes:
        if not calls(node, *CONVS, LINEAR):
            continue
        x, weight = node.args[0], node.args[1]
        linear = node.target == LINEAR
        int8_weight = calls(weight, *DEQUANTIZE_WEIGHT) and weight.args[0].op == "get_attr"
        activation = (
            (qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor)
            if linear
            else (qd.dequantize_per_tensor.default,)
        )
        if not int8_weight:
            table[node.name] = {"kernel": "fp32", "fuses": []}
            continue
        if not (calls(weight, qd.dequantize_per_channel.default) and calls(x, *activation)):
            table[node.name] = {"kernel": "dequantize", "fuses": []}
            continue
        fuses: list[str] = []
        current = node
        add = only_consumer(current)
        if calls(add, aten.add.Tensor) and len(add.args) == 2:
            other = add.args[1] if add.args[0] is current else add.args[0]
            same_shape = value_shape(converted, other) == value_shape(converted, current)
            int8_other = calls(other, qd.dequantize_per_tensor.default)  # a conv adds an int8 value in place
            if isinstance(other, Node) and same_shape and (linear or int8_other):
                fuses.append(add.name)
                current = add
        relu = only_consumer(current)
        if calls(relu, aten.relu.default):
            fuses.append(relu.name)
            current = relu
        quantize = only_consumer(current)
        if calls(quantize, qd.quantize_per_tensor.default):
            fuses.append(quantize.name)
        table[node.name] = {"kernel": "int8", "fuses": fuses}
    return table
