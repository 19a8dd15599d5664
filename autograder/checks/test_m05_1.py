"""Hidden checks of M05-1: qdq_path and qdq_summary on converted graphs the student has not seen.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m05_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, expect_unchanged, raised, value
from selfcheck import diagnosis
from selfcheck.public import m05_1 as public

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


def _reversed_entries(entries: Any) -> Any:
    """``entries`` with each path's steps in the other order (from the consumer up to the source)."""
    try:
        return [[source, list(reversed(steps))] for source, steps in entries]
    except (TypeError, ValueError):
        return None


def compare_paths(
    seen: dict[str, Any], expected: dict[str, Any], case: str, where: str, *, ordered: bool = False
) -> None:
    """qdq_path(gm, consumer) gives the answer key's list for every consumer of the hidden graph.

    ``ordered=False``: steps listed from the consumer up (every path reversed) pass too; the order of the steps
    is one idea, ``test_path_per_tensor``'s (issue 50: one mistake costs once).
    """
    got, want = value(seen, case)["paths"], value(expected, case)["paths"]
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    for consumer, want_entries in want.items():
        got_entries = got.get(consumer)
        if got_entries == want_entries:
            continue
        if not ordered and isinstance(got_entries, list) and _reversed_entries(got_entries) == want_entries:
            continue
        if not isinstance(got_entries, list):
            raise Fail(
                f"{where}：qdq_path(gm, {consumer!r}) 應該回傳 list（{consumer} 的每個輸入一項 (來源名稱, 步驟)），"
                f"你的回傳了 {type(got_entries).__name__}"
            )
        if len(got_entries) != len(want_entries):
            count = len(got_entries) if isinstance(got_entries, list) else "不是 list"
            raise Fail(
                f"{where}：qdq_path(gm, {consumer!r}) 應該有 {len(want_entries)} 項（{consumer} 的每個輸入一項），"
                f"你的有 {count} 項；應該是 {want_entries!r}"
            )
        for index, (got_entry, want_entry) in enumerate(zip(got_entries, want_entries, strict=True)):
            if got_entry != want_entry:
                raise Fail(
                    f"{where}：qdq_path(gm, {consumer!r}) 的第 {index} 個輸入應該是 {_path_text(want_entry)}，"
                    f"你的是 {_path_text(got_entry)}"
                )


def compare_summary(seen: dict[str, Any], expected: dict[str, Any], case: str, where: str) -> None:
    """qdq_summary(gm) counts the same q/dq ops as the answer key (entries with count 0 are ignored)."""
    got, want = value(seen, case)["counts"], value(expected, case)["counts"]
    expect(
        isinstance(got, dict),
        f"{where}：qdq_summary 應該回傳 {{op 名稱: 個數}} 的 dict，你的回傳了 {type(got).__name__}",
    )
    got = {k: v for k, v in got.items() if v != 0}
    if got != want:
        raise Fail(
            f"{where}：qdq_summary(gm) 應該是 {dict(sorted(want.items()))!r}，你的是 {dict(sorted(got.items()))!r}"
        )


# --- qdq_path -------------------------------------------------------------------------------------


@check(
    "qdq_path",
    1,
    "per-tensor weight、fold_quantize=True：activation 走 q → dq，weight 從 int8 常數只走 dq；不改傳進來的圖",
)
def test_path_per_tensor(seen, expected):
    _unchanged(seen, "qdq_path")
    compare_paths(seen, expected, "per_tensor", "conv → relu → flatten → linear（per-tensor）", ordered=True)


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


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m05_1.py) --------

PATH_CHECKS = (
    "test_path_per_tensor",
    "test_path_per_channel",
    "test_path_unfolded",
    "test_path_fan_out",
    "test_path_cat",
)


def changed_graph(seen: Any, expected: Any) -> bool:
    """A case reports that the function changed the graph it was handed."""
    return any(diagnosis.value(seen, case, "changed") for case in diagnosis.cases(seen))


def _table(evidence: Any, case: str, key: str) -> Any:
    return diagnosis.value(evidence, case, key)


@detects("qdq_path", "changes_graph", explains=("test_path_per_tensor",))
def path_changes_graph(seen: Any, expected: Any) -> bool:
    return changed_graph(seen, expected)


@detects(
    "qdq_path",
    "by_node_name",
    explains=("test_path_per_tensor", "test_path_per_channel", "test_path_fan_out", "test_path_cat"),
)
def path_by_node_name(seen: Any, expected: Any) -> bool:
    """Names lie where a pass swapped them (``renamed``, the same model as ``fan_out``) or where an input or a
    folded constant is called like a q/dq (``named_like``; the int8 weights of every folded graph)."""
    if raised(seen, cases=("named_like",)) and not raised(seen, cases=("unfolded",)):
        return True  # walked into the input called quantize_per_tensor (nothing in unfolded is named like that)
    same = _table(seen, "fan_out", "paths") == _table(expected, "fan_out", "paths")
    return same and _table(seen, "renamed", "paths") not in (None, _table(expected, "renamed", "paths"))


@detects("qdq_path", "list_args_skipped", explains=PATH_CHECKS)
def path_list_args(seen: Any, expected: Any) -> bool:
    return public.path_list_args_skipped(seen, expected)


@detects("qdq_path", "first_input_only", explains=PATH_CHECKS)
def path_first_input(seen: Any, expected: Any) -> bool:
    return public.path_first_input_only(seen, expected)


@detects("qdq_path", "repeated_input_twice", explains=("test_path_fan_out",))
def path_repeated_input(seen: Any, expected: Any) -> bool:
    """One consumer lists a source again: the key's entries, with a repeat."""
    for _, got, want in public.table_pairs(seen, expected, "paths"):
        for consumer, theirs in want.items():
            mine = got.get(consumer)
            if isinstance(mine, list) and isinstance(theirs, list) and len(mine) > len(theirs):
                unique = list(dict.fromkeys(map(repr, mine)))
                if unique == [repr(e) for e in theirs]:
                    return True
    return False


@detects("qdq_path", "walks_through_ops", explains=PATH_CHECKS)
def path_walks_through_ops(seen: Any, expected: Any) -> bool:
    return public.path_walks_through_ops(seen, expected)


@detects("qdq_path", "weight_quantize_assumed", explains=PATH_CHECKS)
def path_weight_quantized(seen: Any, expected: Any) -> bool:
    return public.path_weight_quantized(seen, expected)


@detects("qdq_path", "fixed_op_list", explains=PATH_CHECKS)
def path_fixed_ops(seen: Any, expected: Any) -> bool:
    return public.path_fixed_ops(seen, expected)


@detects("qdq_path", "one_dq_per_tensor", explains=PATH_CHECKS)
def path_one_dq_per_tensor(seen: Any, expected: Any) -> bool:
    return public.path_one_dq_per_tensor(seen, expected)


@detects("qdq_path", "one_step_only", explains=PATH_CHECKS)
def path_one_step(seen: Any, expected: Any) -> bool:
    return public.path_one_step(seen, expected)


@detects("qdq_path", "not_reversed", explains=("test_path_per_tensor",))
def path_not_reversed(seen: Any, expected: Any) -> bool:
    """Every path's steps listed from the consumer up: only ``test_path_per_tensor`` judges their order."""
    return public.path_not_reversed(seen, expected)


@detects("qdq_path", "steps_not_op_names", explains=PATH_CHECKS)
def path_other_names(seen: Any, expected: Any) -> bool:
    return public.path_other_names(seen, expected)


SUMMARY_CHECKS = ("test_summary_per_tensor", "test_summary_unfolded", "test_summary_fan_out", "test_summary_cat")
OP_NAMES = {"quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel"}


def _count(evidence: Any, case: str, op: str) -> Any:
    counts = _table(evidence, case, "counts")
    return counts.get(op, 0) if isinstance(counts, dict) else None


@detects("qdq_summary", "changes_graph", explains=("test_summary_per_tensor",))
def summary_changes_graph(seen: Any, expected: Any) -> bool:
    return changed_graph(seen, expected)


@detects("qdq_summary", "quantize_substring", explains=SUMMARY_CHECKS)
def summary_substring(seen: Any, expected: Any) -> bool:
    return public.summary_substring(seen, expected)


@detects("qdq_summary", "by_node_name", explains=SUMMARY_CHECKS)
def summary_by_node_name(seen: Any, expected: Any) -> bool:
    """Where a pass swapped the names of q and dq (``renamed``, the model of ``fan_out``), dequantize ops went
    missing while ``fan_out`` counts them right; or a name like a q/dq op's (``dequantize_weight``) is a key."""
    op = "dequantize_per_tensor"
    fewer = _count(seen, "renamed", op) is not None and _count(seen, "renamed", op) < _count(expected, "renamed", op)
    if fewer and _count(seen, "fan_out", op) == _count(expected, "fan_out", op):
        return True
    named = _table(seen, "named_like", "counts")
    return isinstance(named, dict) and any(k not in OP_NAMES and "quantize" in str(k) and v for k, v in named.items())


@detects("qdq_summary", "fixed_op_list", explains=SUMMARY_CHECKS)
def summary_fixed_ops(seen: Any, expected: Any) -> bool:
    return public.summary_fixed_ops(seen, expected)


@detects("qdq_summary", "one_dq_per_tensor", explains=SUMMARY_CHECKS)
def summary_one_dq(seen: Any, expected: Any) -> bool:
    return public.summary_fewer_dequantize(seen, expected)


@detects("qdq_summary", "counted_per_edge", explains=SUMMARY_CHECKS)
def summary_per_edge(seen: Any, expected: Any) -> bool:
    return public.summary_per_edge(seen, expected)


@detects("qdq_summary", "folded_constant_counted", explains=SUMMARY_CHECKS)
def summary_folded(seen: Any, expected: Any) -> bool:
    return public.summary_folded_counted(seen, expected)
