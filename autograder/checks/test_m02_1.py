"""Hidden checks of M02-1: every observer's quantization error, and which observer is best.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- the observer sees all batches at once (``torch.cat``) instead of one after another → late_outlier
  (MovingAverage differs), configs;
- the error measured on the last batch only, or qparams taken after each batch → late_outlier, configs;
- MSE written as a sum, a mean of absolute values, or on the observer's own min / max formula instead
  of ``calculate_qparams`` (Histogram clips) → channel_outlier, long_tail;
- every observer is per-tensor, or the channel axis is always 1 → channel_outlier, weight (axis 0);
- the range is always int8 [-128, 127], or taken from the dtype → configs (uint8 [0, 255], 4-bit
  [-8, 7], symmetric [-127, 127]), relu;
- ``torch.quantize_per_tensor`` (a dtype's full range) instead of the observer's range → configs;
- the best observer is the last, the largest or a fixed name (PerChannel) → the six scenarios have
  different winners, and the names are shuffled per seed;
- (the batches are copies and the observers are built fresh by each case: an exercise that changes
  them only changes its own inputs.)
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, expect_equal, value

RELATIVE = 1e-4


def _observers_text(scenario: dict[str, Any]) -> str:
    return "；".join(scenario["observers"])


def compare_errors(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """The same error for every observer (relative tolerance 1e-4)."""
    got, want = value(seen, case), value(expected, case)
    where = f"{want['title']}（{want['data']}）"
    expect_equal(sorted(got["errors"]), sorted(want["errors"]), f"{where}：observer_errors 的 key")
    for name, number in want["errors"].items():
        mine = got["errors"][name]
        if not math.isclose(mine, number, rel_tol=RELATIVE, abs_tol=1e-12):
            raise Fail(
                f"{where}：{name} 的量化誤差（MSE）預期 {number:.6g}，看到 {mine:.6g}"
                f"\n這個情況的 observer：{_observers_text(want)}"
            )


@check("observer_errors", 1, "四種預設 observer：一個 channel 有 outlier 的資料與長尾資料，每個 observer 的 MSE")
def test_errors_default(seen, expected):
    compare_errors(seen, expected, "channel_outlier")
    compare_errors(seen, expected, "long_tail")


@check(
    "observer_errors", 1, "每個 batch 依序校準、全部看完才算 qparams：outlier 在後面的 batch 時 MovingAverage 的 MSE"
)
def test_errors_batch_order(seen, expected):
    compare_errors(seen, expected, "late_outlier")


@check("observer_errors", 1, "observer 自己的設定：symmetric、uint8、4 bit 範圍、averaging_constant、bins")
def test_errors_configs(seen, expected):
    compare_errors(seen, expected, "configs")
    compare_errors(seen, expected, "relu")


@check("observer_errors", 1, "per-channel 的 ch_axis：channel 在第 0 維的 conv weight")
def test_errors_weight(seen, expected):
    compare_errors(seen, expected, "weight")


@check("observer_errors", 1, "best_observer：六種情況裡誤差最小的 observer（每種情況的贏家不同）")
def test_best_observer(seen, expected):
    for case in ("channel_outlier", "late_outlier", "relu", "long_tail", "configs", "weight"):
        got, want = value(seen, case), value(expected, case)
        if got["best"] != want["best"]:
            raise Fail(
                f"{want['title']}：best_observer 預期 {want['best']!r}，看到 {got['best']!r}"
                f"\n這個情況的 observer：{_observers_text(want)}"
            )
