"""Answer key of M06-1: SQNR of a whole tensor or per slice, and a per-layer SQNR table."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Interpreter, Node


def _db(signal: torch.Tensor, noise: torch.Tensor) -> float:
    if float(noise) == 0.0:
        return float("inf")
    return float(10 * torch.log10(signal / noise))


def sqnr(reference: torch.Tensor, test: torch.Tensor, dim: int | None = None) -> float | list[float]:
    reference = reference.detach().to(torch.float64)
    noise = (reference - test.detach().to(torch.float64)).pow(2)
    signal = reference.pow(2)
    if dim is None:
        return _db(signal.sum(), noise.sum())
    signal = signal.movedim(dim, 0).flatten(1).sum(dim=1)
    noise = noise.movedim(dim, 0).flatten(1).sum(dim=1)
    return [_db(s, n) for s, n in zip(signal, noise, strict=True)]


class _Recorder(Interpreter):
    """Runs a graph node by node and keeps every node's output by name."""

    def __init__(self, gm: GraphModule) -> None:
        super().__init__(gm)
        self.outputs: dict[str, Any] = {}

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        self.outputs[n.name] = result
        return result


def node_outputs(gm: GraphModule, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    recorder = _Recorder(gm)
    with torch.no_grad():
        recorder.run(*inputs)
    return recorder.outputs


def layer_sqnr(prepared: GraphModule, converted: GraphModule, inputs: tuple[torch.Tensor, ...]) -> dict[str, float]:
    reference = node_outputs(prepared, inputs)
    quantized = node_outputs(converted, inputs)
    table = {}
    for node in converted.graph.nodes:
        if node.op != "call_function" or str(node.target).startswith("quantized_decomposed."):
            continue
        if node.name not in reference:
            continue
        ref, got = reference[node.name], quantized[node.name]
        if isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor):
            table[node.name] = sqnr(ref, got)
    return table
