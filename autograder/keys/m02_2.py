"""Answer key of M02-2: insert an observer on an edge or on a node's output, as prepare_pt2e does."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node


def insert_observer(gm: GraphModule, edge_or_node: Node | tuple[Node, Node], observer: torch.nn.Module) -> Node:
    index = 0
    while hasattr(gm, f"activation_post_process_{index}"):
        index += 1
    name = f"activation_post_process_{index}"
    gm.add_submodule(name, observer)
    if isinstance(edge_or_node, tuple):
        producer, consumer = edge_or_node
        with gm.graph.inserting_before(consumer):
            observer_node = gm.graph.call_module(name, (producer,))
        consumer.replace_input_with(producer, observer_node)  # only this consumer reads the observer
    else:
        producer = edge_or_node
        with gm.graph.inserting_after(producer):
            observer_node = gm.graph.call_module(name, (producer,))
        producer.replace_all_uses_with(observer_node, delete_user_cb=lambda user: user is not observer_node)
    gm.recompile()
    return observer_node
