"""Answer key of M07-1: which fake-quantize nodes of a QAT graph quantize weights, which activations."""

from __future__ import annotations

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import FakeQuantizeBase


def _fake_quant_nodes(gm: GraphModule) -> list[Node]:
    return [
        n for n in gm.graph.nodes if n.op == "call_module" and isinstance(gm.get_submodule(n.target), FakeQuantizeBase)
    ]


def _reads_an_input(node: Node) -> bool:
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            return True
        stack.extend(current.all_input_nodes)
    return False


def fake_quant_roles(gm: GraphModule) -> dict[str, str]:
    return {n.name: "activation" if _reads_an_input(n.args[0]) else "weight" for n in _fake_quant_nodes(gm)}


def fake_quant_instances(gm: GraphModule) -> int:
    return len({id(gm.get_submodule(n.target)) for n in _fake_quant_nodes(gm)})
