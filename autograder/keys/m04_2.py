"""Answer key of M04-2: which BatchNorm nodes does prepare_pt2e leave on the graph?"""

from __future__ import annotations

import torch
from torch.fx import Node

CONV_OPS = {
    torch.ops.aten.conv1d.default,
    torch.ops.aten.conv1d.padding,
    torch.ops.aten.conv2d.default,
    torch.ops.aten.conv2d.padding,
    torch.ops.aten.conv3d.default,
    torch.ops.aten.conv3d.padding,
    torch.ops.aten.conv_transpose1d.default,
    torch.ops.aten.conv_transpose2d.input,
    torch.ops.aten.conv_transpose3d.input,
}
LINEAR = torch.ops.aten.linear.default


def bn_survives(bn: Node) -> bool:
    source = bn.args[0]
    if not isinstance(source, Node) or source.op != "call_function":
        return True
    if source.target in CONV_OPS:
        return False
    if source.target == LINEAR:
        linear_input = source.args[0].meta.get("val")
        return linear_input is not None and linear_input.ndim > 2
    return True
