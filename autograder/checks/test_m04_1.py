"""Hidden checks of M04-1: fold_bn against the weight and bias prepare_pt2e folds into the conv.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- Conv2d only (``reshape(-1, 1, 1, 1)``) → conv1d, conv3d;
- the scale on the input channels (dim 1) → every case;
- a conv always has a bias, or the folded bias is ``None`` without one → conv2d_without_bias;
- ``bn.weight`` / ``bn.bias`` always exist → not_affine (``affine=False``: γ = 1, β = 0);
- eps fixed to 1e-5, left out, or outside the square root → other_eps;
- γ assumed positive (``sqrt(γ² / (σ² + ε))``) → hidden BNs have negative γ;
- the formula's signs and factors (mean added, β scaled, conv bias not scaled, weight divided, no
  sqrt) → conv2d_with_bias, conv2d_without_bias.
(fold_bn receives tensors and a module: the grader replays only what it returns, so a change made
to its arguments in place is not visible to these checks.)
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, value

RTOL, ATOL = 1e-4, 1e-5


def compare_tensor(got: Any, want: dict[str, Any], what: str) -> None:
    """Same shape, and every value within RTOL / ATOL of the graph's constant."""
    if not isinstance(got, dict) or "shape" not in got or "values" not in got:
        raise Fail(f"{what}：證據格式不對")
    if got["shape"] != want["shape"]:
        raise Fail(f"{what}：預期 shape {want['shape']}，看到 {got['shape']}")
    worst, where = 0.0, -1
    for index, (g, w) in enumerate(zip(got["values"], want["values"], strict=True)):
        if not math.isclose(g, w, rel_tol=RTOL, abs_tol=ATOL) and abs(g - w) > worst:
            worst, where = abs(g - w), index
    if where >= 0:
        g, w = got["values"][where], want["values"][where]
        raise Fail(f"{what}：和 prepare_pt2e 折出來的常數不同，第 {where} 個值預期 {w:.6g}，看到 {g:.6g}")


def compare_one(got: Any, want: dict[str, Any]) -> None:
    if not isinstance(got, dict) or "weight" not in got or "bias" not in got:
        raise Fail("證據格式不對")
    conv = want["conv"]
    compare_tensor(got["weight"], want["graph_weight"], f"{conv}：折完的 weight")
    compare_tensor(got["bias"], want["graph_bias"], f"{conv}：折完的 bias")


def compare_fold(seen: dict[str, Any], expected: dict[str, Any], case: str, parts: tuple[str, ...] = ()) -> None:
    got, want = value(seen, case), value(expected, case)
    if not parts:
        compare_one(got, want)
        return
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    for part in parts:
        compare_one(got.get(part), want[part])


@check("fold_bn", 1, "Conv2d 有 bias：折完的 weight 與 bias 和 prepare_pt2e 圖上的常數相同")
def test_conv_with_bias(seen, expected):
    compare_fold(seen, expected, "conv2d_with_bias")


@check("fold_bn", 1, "Conv2d 沒有 bias（conv_b 是 None）：仍要回傳 BN 算出的新 bias")
def test_conv_without_bias(seen, expected):
    compare_fold(seen, expected, "conv2d_without_bias")


@check("fold_bn", 1, "Conv1d + BatchNorm1d 與 Conv3d + BatchNorm3d：weight 的維度數不是 4")
def test_other_ranks(seen, expected):
    compare_fold(seen, expected, "conv1d")
    compare_fold(seen, expected, "conv3d")


@check("fold_bn", 1, "eps 不是預設的 1e-5：用 bn.eps，加在 sqrt 裡面")
def test_other_eps(seen, expected):
    compare_fold(seen, expected, "other_eps")


@check(
    "fold_bn",
    1,
    "BatchNorm2d(affine=False)：bn.weight 與 bn.bias 是 None，當成 1 與 0（conv 有 bias 與沒有 bias 各一次）",
)
def test_not_affine(seen, expected):
    compare_fold(seen, expected, "not_affine", ("with_bias", "without_bias"))
