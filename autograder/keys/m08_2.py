"""Answer key of M08-2: which conv / linear kernels of a graph lowered for x86 compute in int8."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node


def named_args(node: Node) -> dict[str, Any]:
    """The node's arguments by the names in its op's schema."""
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        target = target.default
    names = [argument.name for argument in target._schema.arguments]
    return {**dict(zip(names, node.args, strict=False)), **node.kwargs}


def classify_kernels(lowered: GraphModule) -> dict[str, dict[str, Any]]:
    int8_ops = {
        torch.ops.onednn.qconv_pointwise: "conv",
        torch.ops.onednn.qconv2d_pointwise: "conv",
        torch.ops.onednn.qlinear_pointwise: "linear",
    }
    fp32_ops = {
        torch.ops.aten.convolution: "conv",
        torch.ops.mkldnn._convolution_pointwise: "conv",
        torch.ops.mkldnn._convolution_transpose_pointwise: "conv",
        torch.ops.aten.addmm: "linear",
        torch.ops.aten.mm: "linear",
        torch.ops.mkl._mkl_linear: "linear",
        torch.ops.mkldnn._linear_pointwise: "linear",
    }
    shape_ops = {
        torch.ops.aten.permute,
        torch.ops.aten.t,
        torch.ops.aten.reshape,
        torch.ops.aten.view,
        torch.ops.aten._unsafe_view,
    }
    dequantize_ops = {
        torch.ops.quantized_decomposed.dequantize_per_channel,
        torch.ops.quantized_decomposed.dequantize_per_tensor,
    }
    post_op_names = ("attr", "binary_attr", "unary_attr", "post_op_name", "binary_post_op", "unary_post_op")

    def packet(node):
        if node.op != "call_function":
            return None
        if isinstance(node.target, torch._ops.OpOverload):
            return node.target.overloadpacket
        return node.target if isinstance(node.target, torch._ops.OpOverloadPacket) else None

    def reads_int8_weight(node):
        for arg in node.all_input_nodes:
            while packet(arg) in shape_ops:
                arg = arg.args[0]
            if packet(arg) in dequantize_ops and arg.args[0].op == "get_attr":
                return True
        return False

    table = {}
    for node in lowered.graph.nodes:
        op = packet(node)
        if op not in int8_ops and op not in fp32_ops:
            continue
        args = named_args(node)
        fused = [
            args[name] for name in post_op_names if isinstance(args.get(name), str) and args[name] not in ("", "none")
        ]
        if op in int8_ops:
            table[node.name] = {"layer": int8_ops[op], "int8": True, "fused": fused, "reason": None}
        else:
            reason = "not_fused" if reads_int8_weight(node) else "not_quantized"
            table[node.name] = {"layer": fp32_ops[op], "int8": False, "fused": fused, "reason": reason}
    return table
