"""Hidden checks of M07-2: freeze_bn_stats sets every BN's training flag to False, and nothing else."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

NOTEBOOK = "M07-2"

WHERE = {
    "qat": "prepare_qat_pt2e 之後的 conv → BN 模型",
    "mixed": "conv → BN、linear → BatchNorm1d、一個本來就是 eval 的 BN、max_pool2d(ceil_mode=True)、dropout 的模型",
}


def _result(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and "training_flags" in result, f"{WHERE[case]}：證據格式不對")
    return result


def compare_flags(seen: Any, expected: Any, case: str) -> None:
    got, want = _result(seen, case), _result(expected, case)
    if got["training_flags"] != want["training_flags"]:
        raise Fail(
            f"{WHERE[case]}：依圖上順序，每個 batch_norm 的 training 引數預期 {want['training_flags']}，"
            f"看到 {got['training_flags']}"
        )


def compare_statistics(seen: Any, expected: Any, case: str) -> None:
    got = _result(seen, case)
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


@check("freeze_bn_stats", 1, "其他 node 不動：max_pool2d 的 ceil_mode、dropout 仍然有效")
def test_others_untouched(seen, expected):
    got, want = _result(seen, "mixed"), _result(expected, "mixed")
    if got["output_shape"] != want["output_shape"] or got["others"] != want["others"]:
        changed = [a for a, b in zip(got["others"], want["others"], strict=False) if a != b]
        detail = f"例如 {changed[0]}" if changed else f"輸出形狀 {got['output_shape']}（預期 {want['output_shape']}）"
        raise Fail(f"{WHERE['mixed']}：batch_norm 以外的 node 被改了：{detail}")
    expect(bool(got.get("dropout_active")), f"{WHERE['mixed']}：dropout 被關掉了（凍結 BN 不是切到 eval 模式）")


@check("freeze_bn_stats", 1, "QAT 圖：BN 的 training 引數與 running stats 都凍結")
def test_qat_graph(seen, expected):
    compare_flags(seen, expected, "qat")
    compare_statistics(seen, expected, "qat")
