"""Answer key of M07-2: freeze the BN statistics of an exported (QAT) graph."""

from __future__ import annotations

import torch
from torch.fx import GraphModule


def freeze_bn_stats(gm: GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.batch_norm.default:
            args = list(node.args)
            args[5] = False
            node.args = tuple(args)
    gm.recompile()
