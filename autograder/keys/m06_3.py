"""Answer key of M06-3: the greedy search for the fewest layers to leave in fp32."""

from __future__ import annotations

from collections.abc import Callable


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
