"""Public cases of M05-1 convert 之後的圖 (qdq_path, qdq_summary) on the chapter's own models.

The graphs are the chapter's: conv_relu quantized with XNNPACKQuantizer and converted with
and without ``fold_quantize``, and cat_pool with per-channel weights. The evidence is what
the student's functions return, as plain data (tuples become lists).
"""

from __future__ import annotations

import collections
from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import plain, qdq_kind


def calibrated_and_converted(name: str, seed: int, per_channel: bool, fold: bool) -> GraphModule:
    """export → prepare_pt2e (XNNPACKQuantizer) → 4 calibration batches → convert_pt2e."""
    from common.models import get_model
    from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e

    quantizer, _ = get_xnnpack_quantizer(is_per_channel=per_channel)
    shape = (4, 3, 16, 16)
    prepared = prepare_pt2e(export_module(get_model(name).eval(), seeded_inputs(seed, shape)), quantizer)
    with torch.no_grad():
        for step in range(4):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    return convert_pt2e(prepared, fold_quantize=fold)


def consumers(gm: GraphModule) -> list[str]:
    """Every op that is not a q/dq, and the output."""
    return [n.name for n in gm.graph.nodes if n.op in ("call_function", "output") and qdq_kind(n) is None]


def paths(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    return {name: plain(ns["qdq_path"](gm, name)) for name in consumers(gm)}


def summary(ns: Namespace, gm: GraphModule) -> Any:
    """The returned counts; entries with count 0 are dropped (listing an op that is absent is allowed)."""
    result = ns["qdq_summary"](gm)
    if type(result) in (collections.Counter, collections.defaultdict, collections.OrderedDict):
        result = dict(result)  # the standard dicts a count is often kept in (exact types only)
    counts = plain(result)
    return {k: v for k, v in counts.items() if v != 0} if isinstance(counts, dict) else counts


def path_conv_relu(ns: Namespace, seed: int) -> Any:
    """conv_relu, per-tensor weights, converted with fold_quantize=True and False."""
    return {
        "fold_quantize=True": paths(ns, calibrated_and_converted("conv_relu", seed, False, True)),
        "fold_quantize=False": paths(ns, calibrated_and_converted("conv_relu", seed, False, False)),
    }


def path_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool with per-channel weights: x feeds two convs, the cat's inputs are in a list."""
    return paths(ns, calibrated_and_converted("cat_pool", seed, True, True))


def summary_conv_relu(ns: Namespace, seed: int) -> Any:
    return {
        "fold_quantize=True": summary(ns, calibrated_and_converted("conv_relu", seed, False, True)),
        "fold_quantize=False": summary(ns, calibrated_and_converted("conv_relu", seed, False, False)),
    }


def summary_cat_pool(ns: Namespace, seed: int) -> Any:
    return summary(ns, calibrated_and_converted("cat_pool", seed, True, True))


PUBLIC = declare(
    __name__,
    Exercise(
        "qdq_path",
        "qdq_path：每條輸入邊經過的 quantize / dequantize",
        ("qdq_path",),
        {"conv_relu": path_conv_relu, "cat_pool": path_cat_pool},
    ),
    Exercise(
        "qdq_summary",
        "qdq_summary：每種 q/dq op 各有幾個",
        ("qdq_summary",),
        {"conv_relu": summary_conv_relu, "cat_pool": summary_cat_pool},
    ),
)
