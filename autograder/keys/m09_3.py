"""Answer key of M09-3: LLMQuantizer (EmbeddingQuantizer + 4-bit dynamic XNNPACKQuantizer) and graph_bytes.

ExecuTorch is imported inside ``LLMQuantizer.__init__``: no key module imports it at import time.
"""

from __future__ import annotations

import operator

import torch
from torchao.quantization.pt2e.quantizer import ComposableQuantizer
from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer


class LLMQuantizer(ComposableQuantizer):
    def __init__(self) -> None:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True, weight_qmin=-8, weight_qmax=7)
        super().__init__([EmbeddingQuantizer(), XNNPACKQuantizer().set_global(config)])


def graph_bytes(gm: torch.fx.GraphModule) -> dict[str, int]:
    totals: dict[str, int] = {}
    seen: set[str] = set()
    for node in gm.graph.nodes:
        if node.op != "get_attr" or node.target in seen:
            continue
        seen.add(node.target)
        value = operator.attrgetter(node.target)(gm)
        if isinstance(value, torch.Tensor):
            name = str(value.dtype).removeprefix("torch.")
            totals[name] = totals.get(name, 0) + value.numel() * value.element_size()
    return totals
