"""Answer key of M06-3: a filter function that leaves modules in fp32, and the greedy search for the fewest."""

from __future__ import annotations

from collections.abc import Callable

from torch.fx import Node


def may_quantize(node: Node, skipped: list[str]) -> bool:
    paths = [path for path, _ in node.meta.get("nn_module_stack", {}).values()]
    return not any(path in skipped for path in paths)


def greedy_skip(layers: list[str], evaluate: Callable[[list[str]], float], target: float) -> list[str]:
    skipped: list[str] = []
    score = evaluate([])
    while score < target and len(skipped) < len(layers):
        best, best_score = None, None
        for layer in layers:
            if layer in skipped:
                continue
            candidate = evaluate([*skipped, layer])
            if best_score is None or candidate > best_score:
                best, best_score = layer, candidate
        skipped.append(best)
        score = best_score
    return skipped
