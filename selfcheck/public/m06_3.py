"""Public cases of M06-3 選擇性量化 (greedy_skip), with made-up metrics and a small real one.

``greedy_skip(layers, evaluate, target)`` is handed an ``evaluate`` built here: a metric of
"which layers stay in fp32" (higher is better). Most metrics are tables (a base score, a gain
per layer and a bonus for some pairs), so a case controls exactly where a greedy search and a
plain ranking disagree; ``weight_sqnr_metric`` is a real one (the SQNR of a model's output with
3-bit weights everywhere except the skipped layers). The student's answer is a list of names;
the score it reaches is recomputed here, by the case itself.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import torch

from selfcheck.casekit import Exercise, Namespace
from selfcheck.evidence import EvidenceError, safe_text

NOTEBOOK = "M06-3"

TITLE = "greedy_skip：留最少的層在 fp32，達到目標"

Metric = Callable[[Any], float]


def _names(skip: Any, layers: list[str]) -> frozenset[str]:
    """The layers an ``evaluate`` call asked to skip (a list, tuple or set of layer names)."""
    if type(skip) not in (list, tuple, set, frozenset):
        raise TypeError(f"evaluate 的參數應該是 layer 名稱的 list，收到 {type(skip).__name__}")
    names = frozenset(skip)
    unknown = [name for name in names if name not in layers]
    if unknown:
        raise KeyError(f"沒有這個 layer：{safe_text(unknown[0], 40)}（可以跳過的是 {layers}）")
    return names


def table_metric(
    layers: list[str], base: float, gains: dict[str, float], bonus: dict[tuple[str, str], float] | None = None
) -> Metric:
    """``evaluate(skip)`` = base + the gain of every skipped layer + the bonus of every skipped pair."""
    extra = {frozenset(pair): value for pair, value in (bonus or {}).items()}

    def evaluate(skip: Any) -> float:
        names = _names(skip, layers)
        score = base + sum(gains[name] for name in names)
        for pair in itertools.combinations(sorted(names), 2):
            score += extra.get(frozenset(pair), 0.0)
        return float(score)

    return evaluate


def weight_sqnr_metric(model: torch.nn.Module, layers: list[str], inputs: torch.Tensor, bits: int = 3) -> Metric:
    """The SQNR (dB) of ``model``'s output when every layer in ``layers`` but the skipped ones has its
    weights fake-quantized to ``bits`` bits (symmetric, one scale per tensor)."""
    with torch.no_grad():
        reference = model(inputs).double()
    top = 2 ** (bits - 1) - 1
    scores: dict[frozenset[str], float] = {}

    def evaluate(skip: Any) -> float:
        names = _names(skip, layers)
        if names not in scores:
            quantized = copy.deepcopy(model)
            with torch.no_grad():
                for name in layers:
                    if name not in names:
                        weight = quantized.get_submodule(name).weight
                        scale = float(weight.abs().max()) / top
                        weight.copy_(torch.fake_quantize_per_tensor_affine(weight, scale, 0, -top, top))
                out = quantized(inputs).double()
            noise = float((reference - out).pow(2).sum())
            scores[names] = float(10 * torch.log10(reference.pow(2).sum() / noise)) if noise else float("inf")
        return scores[names]

    return evaluate


def run_search(ns: Namespace, layers: list[str], evaluate: Metric, target: float) -> dict[str, Any]:
    """``greedy_skip(layers, evaluate, target)``: the layers chosen, and the score they reach (recomputed)."""
    chosen = ns["greedy_skip"](list(layers), evaluate, target)
    if type(chosen) not in (list, tuple):
        raise EvidenceError(f"greedy_skip 應該回傳 layer 名稱的 list，看到 {type(chosen).__name__}")
    names = []
    for item in chosen:
        if type(item) is not str:
            raise EvidenceError(f"greedy_skip 回傳的 list 裡應該是 layer 名稱（str），看到 {type(item).__name__}")
        names.append(safe_text(item, 60))
    if len(set(names)) != len(names):
        raise EvidenceError(f"greedy_skip 回傳的 layer 有重複：{names}")
    score = evaluate(names) if all(name in layers for name in names) else None
    return {
        "chosen": names,
        "score": round(score, 6) if score is not None else None,
        "reached": score is not None and score >= target,
        "target": target,
        "layers": list(layers),
    }


# --- public cases -------------------------------------------------------------------------------


def case_three_layers(ns: Namespace, seed: int) -> Any:
    """Three layers like the chapter's digits model: fc helps most, then conv1; two are needed."""
    layers = ["conv1", "conv2", "fc"]
    evaluate = table_metric(layers, 17.5, {"conv1": 1.8, "conv2": 1.4, "fc": 3.3}, {("conv1", "fc"): 0.6})
    return run_search(ns, layers, evaluate, 23.0)


def case_pair(ns: Namespace, seed: int) -> Any:
    """Four layers where one is useless alone and decisive together with the best one."""
    layers = ["stem", "block.0", "block.1", "head"]
    evaluate = table_metric(
        layers, 10.0, {"stem": 2.0, "block.0": 5.0, "block.1": 0.5, "head": 3.0}, {("block.0", "block.1"): 8.0}
    )
    return run_search(ns, layers, evaluate, 22.0)


def case_already(ns: Namespace, seed: int) -> Any:
    """The quantized model already reaches the target: nothing to skip."""
    layers = ["conv1", "conv2", "fc"]
    return run_search(ns, layers, table_metric(layers, 30.0, {"conv1": 1.0, "conv2": 2.0, "fc": 3.0}), 25.0)


PUBLIC = {
    "greedy_skip": Exercise(
        NOTEBOOK,
        "greedy_skip",
        TITLE,
        ("greedy_skip",),
        {"three_layers": case_three_layers, "pair": case_pair, "already": case_already},
    ),
}
