"""Answer key of M05-1: reading the quantize / dequantize ops of a converted graph."""

from __future__ import annotations

from torch.fx import GraphModule, Node


def qdq_name(node: Node) -> str | None:
    """``"quantize_per_tensor"``, ``"dequantize_per_channel"``…, or None when ``node`` is not a q/dq op."""
    if node.op != "call_function":
        return None
    namespace, _, rest = str(node.target).partition(".")
    name = rest.split(".")[0]
    if namespace == "quantized_decomposed" and name.startswith(("quantize_", "dequantize_")):
        return name
    return None


def qdq_path(gm: GraphModule, consumer: str) -> list[tuple[str, list[str]]]:
    node = next(n for n in gm.graph.nodes if n.name == consumer)
    result = []
    for arg in node.all_input_nodes:
        steps, src = [], arg
        while qdq_name(src) is not None:
            steps.append(qdq_name(src))
            src = src.args[0]
        result.append((src.name, steps[::-1]))
    return result


def qdq_summary(gm: GraphModule) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in gm.graph.nodes:
        name = qdq_name(node)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return counts
