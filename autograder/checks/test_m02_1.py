"""Hidden checks of M02-1: every observer's quantization error, and which observer is best.

Each check compares the error the student's function measured for every observer (fresh observers
of the case's configurations, hidden data: a channel outlier, an outlier in a late batch, data that is
never negative, a long tail, a conv weight) with the answer key's, and the observer it names best.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m02_1.py``); their detectors are at the end of this module. (The batches are
copies and the observers are built fresh by each case: an exercise that changes them only changes
its own inputs.)
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, value
from selfcheck.public import m02_1 as public

RELATIVE = 1e-4


def _observers_text(scenario: dict[str, Any]) -> str:
    return "；".join(scenario["observers"])


def compare_errors(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """The same error for every observer (relative tolerance 1e-4)."""
    got, want = value(seen, case), value(expected, case)
    where = f"{want['title']}（{want['data']}）"
    if sorted(got["errors"]) != sorted(want["errors"]):
        raise Fail(f"{where}：observer_errors 的 key 應該是 {sorted(want['errors'])}，你的是 {sorted(got['errors'])}")
    for name, number in want["errors"].items():
        mine = got["errors"][name]
        if not math.isclose(mine, number, rel_tol=RELATIVE, abs_tol=1e-12):
            raise Fail(
                f"{where}：{name} 的量化誤差（MSE）應該是 {number:.6g}，你的是 {mine:.6g}"
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
                f"{want['title']}：best_observer 應該回傳 {want['best']!r}，你的回傳 {got['best']!r}"
                f"\n這個情況的 observer：{_observers_text(want)}"
            )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m02_1.py) --------

ERROR_CHECKS = ("test_errors_default", "test_errors_batch_order", "test_errors_configs", "test_errors_weight")
ALL = (*ERROR_CHECKS, "test_best_observer")


@detects("observer_errors", "fixed_channel_axis", explains=("test_errors_weight", "test_best_observer"))
def fixed_channel_axis(seen: Any, expected: Any) -> bool:
    return public._channel_axis_crash(seen, expected)


@detects("observer_errors", "int8_range_always", explains=("test_errors_configs", "test_best_observer"))
def int8_range_always(seen: Any, expected: Any) -> bool:
    return public._int8_range(seen, expected)


@detects("observer_errors", "sum_of_squares", explains=ALL)
def sum_of_squares(seen: Any, expected: Any) -> bool:
    return public._summed(seen, expected)


@detects("observer_errors", "not_squared_error", explains=ALL)
def not_squared_error(seen: Any, expected: Any) -> bool:
    return public._not_squared(seen, expected)


@detects("observer_errors", "own_range_formula", explains=ALL)
def own_range_formula(seen: Any, expected: Any) -> bool:
    return public._histogram_as_min_max(seen, expected)


@detects("observer_errors", "per_channel_as_per_tensor", explains=ALL)
def per_channel_as_per_tensor(seen: Any, expected: Any) -> bool:
    return public._per_channel_as_tensor(seen, expected)


@detects("observer_errors", "range_from_dtype", explains=("test_errors_configs", "test_best_observer"))
def range_from_dtype(seen: Any, expected: Any) -> bool:
    return public._dtype_range(seen, expected)


@detects("observer_errors", "calibrates_once", explains=ALL)
def calibrates_once(seen: Any, expected: Any) -> bool:
    return public._moving_average_only(seen, expected)


@detects("observer_errors", "qparams_each_batch", explains=ALL)
def qparams_each_batch(seen: Any, expected: Any) -> bool:
    return public._early_qparams(seen, expected)


@detects("observer_errors", "error_on_part", explains=ALL)
def error_on_part(seen: Any, expected: Any) -> bool:
    return public._single_batch_right(seen, expected)


@detects("observer_errors", "best_sorted_by_name", explains=("test_best_observer",))
def best_sorted_by_name(seen: Any, expected: Any) -> bool:
    return public._best_first_name(seen, expected)


@detects("observer_errors", "best_is_largest", explains=("test_best_observer",))
def best_is_largest(seen: Any, expected: Any) -> bool:
    return public._best_largest(seen, expected)


@detects("observer_errors", "best_not_measured", explains=("test_best_observer",))
def best_not_measured(seen: Any, expected: Any) -> bool:
    return public._best_not_measured(seen, expected)
