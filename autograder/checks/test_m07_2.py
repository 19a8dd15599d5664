"""Hidden checks of M07-2: freeze_bn_stats sets every BN's training flag to False, and nothing else.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m07_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck import diagnosis
from selfcheck.diagnosis import refusal
from selfcheck.public.m07_2 import flags, flags_right_stats_move, froze_none, frozen, returned_a_copy

WHERE = {
    "qat": "prepare_qat_pt2e 之後的 conv → BN 模型",
    "mixed": "conv → BN、linear → BatchNorm1d、一個本來就是 eval 的 BN、max_pool2d(ceil_mode=True)、dropout 的模型",
}


def _result(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and "training_flags" in result, f"{WHERE[case]}：收到的結果不是預期的格式")
    return result


def compare_flags(seen: Any, expected: Any, case: str) -> None:
    got, want = _result(seen, case), _result(expected, case)
    if got["training_flags"] != want["training_flags"]:
        raise Fail(
            f"{WHERE[case]}：依圖上順序，每個 batch_norm 的 training 引數應該是 {want['training_flags']}，"
            f"你的是 {got['training_flags']}"
        )


def compare_statistics(seen: Any, expected: Any, case: str) -> None:
    got = _result(seen, case)
    alone = got.get("statistics_alone")
    if got.get("run_error") and isinstance(alone, dict) and got.get("others") != _result(expected, case).get("others"):
        # another node edited left the graph unrunnable (test_others_untouched judges that): the running stats
        # are measured on the graph as it was, with only the student's batch_norm arguments
        if alone.get("run_error"):
            raise Fail(f"{WHERE[case]}：只換上你的 batch_norm 引數，這張圖還是跑不起來（{alone['run_error']}）")
        if alone.get("changed"):
            raise Fail(
                f"{WHERE[case]}：只看你改的 batch_norm（其他 node 還原）再跑兩個 batch 訓練資料，仍有 "
                f"{alone['changed']} 個 running_mean / running_var 改變了"
            )
        return
    if got.get("run_error"):
        raise Fail(f"{WHERE[case]}：凍結之後這張圖跑不起來（{got['run_error']}）：batch_norm 以外的 node 被改到了嗎？")
    if got["statistics_changed"]:
        raise Fail(
            f"{WHERE[case]}：凍結之後用訓練資料跑兩個 batch，仍有 {got['statistics_changed']} 個 running_mean / "
            "running_var 改變了（改了 node 的引數之後有沒有 recompile？）"
        )


@check("freeze_bn_stats", 1, "每個 batch_norm node 的 training 引數變成 False（本來就是 False 的維持 False）")
def test_flags(seen, expected):
    compare_flags(seen, expected, "mixed")


@check("freeze_bn_stats", 1, "凍結之後再跑訓練資料，running stats 不再改變")
def test_statistics_frozen(seen, expected):
    compare_statistics(seen, expected, "mixed")


def compare_others(got: dict[str, Any], want: dict[str, Any], case: str) -> None:
    """Every node other than a batch_norm is as the answer key left it (op, target, arguments)."""
    if got["others"] == want["others"]:
        return
    new = [text for text in got["others"] if text not in want["others"]]
    gone = [text for text in want["others"] if text not in got["others"]]
    detail = f"多了或改成 {new[0]}" if new else f"少了 {gone[0]}" if gone else "node 的順序變了"
    raise Fail(f"{WHERE[case]}：batch_norm 以外的 node 被改了（{detail}）：凍結 BN 只改 batch_norm 的 training 引數")


@check("freeze_bn_stats", 1, "其他 node 不動：max_pool2d 的 ceil_mode、dropout 仍然有效")
def test_others_untouched(seen, expected):
    got, want = _result(seen, "mixed"), _result(expected, "mixed")
    compare_others(got, want, "mixed")
    expect(
        got.get("bn_arguments") == want.get("bn_arguments"),
        f"{WHERE['mixed']}：batch_norm 除了 training 以外的引數應該是 {want.get('bn_arguments')}，"
        f"你的是 {got.get('bn_arguments')}（eps、momentum 要留模型自己的，只改 args[5]）",
    )
    expect(
        got["output_shape"] == want["output_shape"],
        f"{WHERE['mixed']}：輸出的形狀應該是 {want['output_shape']}，你的是 {got['output_shape']}",
    )
    expect(bool(got.get("dropout_active")), f"{WHERE['mixed']}：dropout 被關掉了（凍結 BN 不是切到 eval 模式）")


@check("freeze_bn_stats", 1, "QAT 圖：BN 的 training 引數與 running stats 都凍結，其他 node 不動")
def test_qat_graph(seen, expected):
    compare_flags(seen, expected, "qat")
    compare_statistics(seen, expected, "qat")
    compare_others(_result(seen, "qat"), _result(expected, "qat"), "qat")


# --- what a wrong answer probably believed (the record: selfcheck/public/m07_2.py) ----------------------

FLAG_CHECKS = ("test_flags", "test_statistics_frozen", "test_qat_graph")


@detects("freeze_bn_stats", "returns_copy")
def freeze_returns_copy(seen: Any, expected: Any) -> bool:
    # on the hidden side a copy is refused before its cases run: the refusal says why
    return returned_a_copy(seen, expected) or "圖的複本" in refusal(seen)


@detects("freeze_bn_stats", "found_by_name", explains=("test_flags", "test_statistics_frozen", "test_others_untouched"))
def freeze_found_by_name(seen: Any, expected: Any) -> bool:
    """The graph with an input named batch_norm raised (an input has no args[5]); the QAT graph, whose nodes called
    batch_norm are BNs, went through."""
    return diagnosis.error(seen, "mixed") in ("IndexError", "TypeError", "AttributeError") and bool(frozen(seen, "qat"))


@detects("freeze_bn_stats", "wrong_bn_target", explains=FLAG_CHECKS)
def freeze_wrong_target(seen: Any, expected: Any) -> bool:
    return froze_none(seen, expected, "qat", "mixed")


@detects("freeze_bn_stats", "after_conv_only", explains=FLAG_CHECKS)
def freeze_after_conv_only(seen: Any, expected: Any) -> bool:
    """No BN of the QAT graph (which read the simulated fold) frozen; in the other graph, most BNs frozen."""
    return froze_none(seen, expected, "qat") and not froze_none(seen, expected, "mixed")


@detects("freeze_bn_stats", "toggles_flag", explains=("test_flags", "test_statistics_frozen"))
def freeze_toggles(seen: Any, expected: Any) -> bool:
    """Every BN of the QAT graph frozen; in the other graph a BN the key leaves False is True."""
    got, want = flags(seen, "mixed"), flags(expected, "mixed")
    return (
        flags(seen, "qat") == flags(expected, "qat")
        and got is not None
        and want is not None
        and len(got) == len(want)
        and any(g is True and w is False for g, w in zip(got, want, strict=True))
    )


@detects("freeze_bn_stats", "any_sixth_argument", explains=("test_others_untouched", "test_qat_graph"))
def freeze_any_sixth(seen: Any, expected: Any) -> bool:
    """A node other than a batch_norm had a True argument turned False."""
    for case in ("mixed", "qat"):
        got, want = frozen(seen, case).get("others"), frozen(expected, case).get("others")
        if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
            for mine, theirs in zip(got, want, strict=True):
                if mine != theirs and "True" in theirs and mine == theirs.replace("True", "False"):
                    return True
    return False


@detects("freeze_bn_stats", "moves_to_eval", explains=("test_others_untouched", "test_qat_graph"))
def freeze_moves_to_eval(seen: Any, expected: Any) -> bool:
    """Dropout no longer active after the call."""
    return frozen(seen, "mixed").get("dropout_active") is False and frozen(expected, "mixed").get("dropout_active")


@detects("freeze_bn_stats", "no_recompile", explains=("test_statistics_frozen", "test_qat_graph"))
def freeze_no_recompile(seen: Any, expected: Any) -> bool:
    return flags_right_stats_move(seen, expected, "qat", "mixed")


@detects("freeze_bn_stats", "rebuilds_defaults", explains=("test_others_untouched",))
def freeze_rebuilds_defaults(seen: Any, expected: Any) -> bool:
    """Every flag as the key's, yet some batch_norm's other arguments (eps, momentum) changed."""
    got, want = frozen(seen, "mixed"), frozen(expected, "mixed")
    return (
        flags(seen, "mixed") == flags(expected, "mixed")
        and isinstance(got.get("bn_arguments"), list)
        and got.get("bn_arguments") != want.get("bn_arguments")
    )
