"""Answer key of M01-1: the op targets of a graph, and a node's producers and consumers."""

from __future__ import annotations

from typing import Any

from torch.fx import GraphModule, Node


def op_targets(gm: GraphModule) -> list[Any]:
    return [node.target for node in gm.graph.nodes if node.op == "call_function"]


def _is_guard(node: Node) -> bool:
    return node.op == "call_module" and node.target == "_guards_fn"


def neighbors(gm: GraphModule, name: str) -> tuple[list[Node], list[Node]]:
    order = {node: index for index, node in enumerate(gm.graph.nodes)}
    node = next(n for n in gm.graph.nodes if n.name == name)
    producers = list(node.all_input_nodes)
    consumers = sorted((user for user in node.users if not _is_guard(user)), key=order.__getitem__)
    return producers, consumers
