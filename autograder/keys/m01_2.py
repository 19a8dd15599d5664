"""Answer key of M01-2: find ops by node.target, for an OpOverloadPacket or an OpOverload."""

from __future__ import annotations

from typing import Any

from torch._ops import OpOverload, OpOverloadPacket
from torch.fx import GraphModule, Node


def find_nodes(gm: GraphModule, op: Any) -> list[Node]:
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if isinstance(op, OpOverloadPacket):
            if isinstance(node.target, OpOverload) and node.target.overloadpacket is op:
                found.append(node)
        elif node.target == op:
            found.append(node)
    return found
