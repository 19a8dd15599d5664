"""Hidden checks of M05-1: qdq_path and qdq_summary on converted graphs the student has not seen.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
qdq_path
- one step only (the dequantize), or the walk goes on through real ops → every case (q → dq of an
  activation, the weight's dq, a relu between two q/dq);
- the weight always has a quantize (fold_quantize forgotten), or never has one → per_tensor (folded:
  int8 constant → dq), unfolded (fp32 constant → q → dq);
- only per-tensor ops → per_channel, cat (``dequantize_per_channel`` with its scale / zero point constants);
- only the first input followed (``args[0]``), or list arguments skipped → every case, cat (a cat of
  three branches, inside a list);
- a repeated input listed twice (``h * h``) → named_like;
- q/dq recognised by node name → named_like (an input called ``quantize_per_tensor``, a layer called
  ``dequantize``), renamed (a pass swapped the names of every quantize and dequantize op);
- one dq shared by every consumer → fan_out (each consumer has its own dq after one q);
- the path in walk order (from the consumer back) instead of from the source → every case.
qdq_summary
- the int8 constants of ``fold_quantize=True`` counted as quantize ops → per_tensor;
- only per-tensor ops, or only the overloads seen in the chapter → unfolded, cat (per-channel);
- a q/dq counted once per edge instead of once per node → fan_out;
- ops counted by node name → named_like, renamed;
- ``quantize`` matched as a substring of ``dequantize`` → every case.
Both: a reading function may change the graph → every converted graph must come back unchanged
(first check of each exercise).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, expect_unchanged, value

PATH_WHERE = {
    "per_tensor": "conv → relu → flatten → linear（per-tensor）",
    "per_channel": "linear → relu → 兩個 linear 相加（per-channel）",
    "unfolded": "conv → relu → flatten → linear（fold_quantize=False）",
    "fan_out": "x 分給兩個 conv 再相加",
    "named_like": "輸入名叫 quantize_per_tensor、layer 名叫 dequantize、h * h + 1.0",
    "cat": "三個 conv 分支 → cat → max_pool2d",
    "renamed": "x 分給兩個 conv 再相加，q/dq 的名字被 pass 對調（叫 dequantize… 的是 quantize，反之亦然）",
}


def _unchanged(seen: dict[str, Any], function: str) -> None:
    """Every converted graph the reading function was handed comes back as it was."""
    for case, where in PATH_WHERE.items():
        if "value" not in seen.get("cases", {}).get(case, {}):  # absent here, or stopped: its own check fails
            continue
        record = value(seen, case)
        if isinstance(record, dict):
            expect_unchanged({where: record.get("changed", [])}, function)


def _path_text(entry: Any) -> str:
    try:
        source, steps = entry
        return f"({source!r}, {list(steps)!r})"
    except (TypeError, ValueError):
        return repr(entry)


def compare_paths(seen: dict[str, Any], expected: dict[str, Any], case: str, where: str) -> None:
    """qdq_path(gm, consumer) gives the answer key's list for every consumer of the hidden graph."""
    got, want = value(seen, case)["paths"], value(expected, case)["paths"]
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    for consumer, want_entries in want.items():
        got_entries = got.get(consumer)
        if got_entries == want_entries:
            continue
        if not isinstance(got_entries, list):
            raise Fail(
                f"{where}：qdq_path(gm, {consumer!r}) 應該回傳 list（{consumer} 的每個輸入一項 (來源名稱, 步驟)），"
                f"看到 {type(got_entries).__name__}"
            )
        if len(got_entries) != len(want_entries):
            count = len(got_entries) if isinstance(got_entries, list) else "不是 list"
            raise Fail(
                f"{where}：qdq_path(gm, {consumer!r}) 應該有 {len(want_entries)} 項（{consumer} 的每個輸入一項），"
                f"看到 {count}；預期 {want_entries!r}"
            )
        for index, (got_entry, want_entry) in enumerate(zip(got_entries, want_entries, strict=True)):
            if got_entry != want_entry:
                raise Fail(
                    f"{where}：qdq_path(gm, {consumer!r}) 第 {index} 個輸入預期 {_path_text(want_entry)}，"
                    f"看到 {_path_text(got_entry)}"
                )


def compare_summary(seen: dict[str, Any], expected: dict[str, Any], case: str, where: str) -> None:
    """qdq_summary(gm) counts the same q/dq ops as the answer key (entries with count 0 are ignored)."""
    got, want = value(seen, case)["counts"], value(expected, case)["counts"]
    expect(isinstance(got, dict), f"{where}：qdq_summary 應該回傳 {{op 名稱: 個數}} 的 dict，看到 {type(got).__name__}")
    got = {k: v for k, v in got.items() if v != 0}
    if got != want:
        raise Fail(f"{where}：qdq_summary(gm) 預期 {dict(sorted(want.items()))!r}，看到 {dict(sorted(got.items()))!r}")


# --- qdq_path -------------------------------------------------------------------------------------


@check(
    "qdq_path",
    1,
    "per-tensor weight、fold_quantize=True：activation 走 q → dq，weight 從 int8 常數只走 dq；不改傳進來的圖",
)
def test_path_per_tensor(seen, expected):
    _unchanged(seen, "qdq_path")
    compare_paths(seen, expected, "per_tensor", "conv → relu → flatten → linear（per-tensor）")


@check("qdq_path", 1, "per-channel weight：dequantize_per_channel，以及一個 tensor 餵兩個 linear")
def test_path_per_channel(seen, expected):
    compare_paths(seen, expected, "per_channel", "linear → relu → 兩個 linear 相加（per-channel）")


@check("qdq_path", 1, "fold_quantize=False：weight 從 fp32 常數走 quantize → dequantize")
def test_path_unfolded(seen, expected):
    compare_paths(seen, expected, "unfolded", "conv → relu → flatten → linear（fold_quantize=False）")


@check(
    "qdq_path",
    1,
    "一個 tensor 餵好幾個 consumer：每個 consumer 都從來源經過 q → 自己的 dq；同一個 op 用兩次的輸入（h * h）只列一項；"
    "名字像 q/dq 的 node（輸入 quantize_per_tensor、常數 dequantize_weight、名字被對調的 q/dq）看 target",
)
def test_path_fan_out(seen, expected):
    compare_paths(seen, expected, "fan_out", "x 分給兩個 conv 再相加")
    compare_paths(seen, expected, "named_like", "輸入名叫 quantize_per_tensor、layer 名叫 dequantize、h * h + 1.0")
    compare_paths(seen, expected, "renamed", PATH_WHERE["renamed"])


@check("qdq_path", 1, "cat 的輸入在 list 裡：每個輸入都要列出")
def test_path_cat(seen, expected):
    compare_paths(seen, expected, "cat", "三個 conv 分支 → cat → max_pool2d")


# --- qdq_summary ----------------------------------------------------------------------------------


@check("qdq_summary", 1, "fold_quantize=True：int8 常數不是 quantize op，不算進去；不改傳進來的圖")
def test_summary_per_tensor(seen, expected):
    _unchanged(seen, "qdq_summary")
    compare_summary(seen, expected, "per_tensor", "conv → relu → flatten → linear（per-tensor）")


@check(
    "qdq_summary",
    1,
    "fold_quantize=False 與 per-channel：quantize_per_channel 也要算；名字像 q/dq 的輸入與常數不算",
)
def test_summary_unfolded(seen, expected):
    compare_summary(seen, expected, "unfolded", "conv → relu → flatten → linear（fold_quantize=False）")
    compare_summary(
        seen, expected, "named_like", "輸入名叫 quantize_per_tensor、layer 名叫 dequantize（fold_quantize=False）"
    )


@check("qdq_summary", 1, "一個 quantize 餵兩個 dequantize：每個 node 只算一次；名字被對調的 q/dq 照 target 算")
def test_summary_fan_out(seen, expected):
    compare_summary(seen, expected, "fan_out", "x 分給兩個 conv 再相加")
    compare_summary(seen, expected, "renamed", PATH_WHERE["renamed"])


@check("qdq_summary", 1, "cat 與 per-channel weight：在沒看過的模型上數對每種 op")
def test_summary_cat(seen, expected):
    compare_summary(seen, expected, "cat", "三個 conv 分支 → cat → max_pool2d")
