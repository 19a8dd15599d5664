"""Hidden checks of M07-3: the labels of Int4WeightQuantizer, the observers they produce, the converted ranges.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m07_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from autograder.checks.support import spec_text as _spec_text
from selfcheck import diagnosis
from selfcheck.diagnosis import refusal
from selfcheck.public import m07_3 as record
from selfcheck.public.m07_3 import claimed, extra_edges, labels, returned_a_copy, unmarked, weight_pairs, weights_differ

WHERE = {
    "stack": "conv（有 bias）→ relu → conv_transpose2d → conv（沒有 bias）→ flatten → linear",
    "lookalike": "輸入叫 linear、linear → relu → 加上純量 → linear",
    "between": (
        "三個 Quantizer 依序執行（模型有 conv_transpose2d）：先有人認領了最後的 linear、"
        "替第一個 conv 貼了標籤但沒認領，你的之後還有一個"
    ),
}


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="不量化（None）")


LEFTOVER = (
    "：這個 node 原本有一張前一個 Quantizer 沒認領（_annotated=False）的標籤，"
    "練習要的是整張換成你的新標籤，不是在舊標籤上補 spec（舊的 bias spec、旗標都不該留下）"
)


def _result(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(
        isinstance(result, dict) and isinstance(result.get("labels"), dict), f"{WHERE[case]}：收到的結果不是預期的格式"
    )
    return result


def _inputs(label: Any) -> dict[str, Any]:
    return {source: spec for source, spec in (label or {}).get("inputs", [])} if isinstance(label, dict) else {}


def compare_labels(seen: Any, expected: Any, case: str, *, part: str) -> None:
    """``part``: "weight" (the weight edges, and nothing on the bias), "activation" (input and output), "all"."""
    got, want = _result(seen, case)["labels"], _result(expected, case)["labels"]
    claimed = _result(expected, case).get("claimed", [])
    for node, want_label in want.items():
        try:
            compare_label(node, got.get(node), want_label, case, part)
        except Fail as fail:
            if node in claimed:
                raise Fail(
                    f"{fail}（{node} 已經被前一個 Quantizer 認領（_annotated=True）：它的標籤要原封不動）"
                ) from None
            raise
    extra_nodes = [n for n in got if n not in want]
    if extra_nodes:
        raise Fail(f"{WHERE[case]}：{'、'.join(extra_nodes)} 不該有標籤，你的貼了（只標 conv2d 與 linear）")


def compare_label(node: str, got_label: Any, want_label: Any, case: str, part: str) -> None:
    """One node's label against the answer key's (``part`` as in ``compare_labels``)."""
    if got_label is None:
        raise Fail(f"{WHERE[case]}：{node} 應該有標籤，你的沒有")
    got_inputs, want_inputs = _inputs(got_label), _inputs(want_label)
    weight = next((s for s in want_inputs if s.endswith("weight")), None)
    for source, want_spec in want_inputs.items():
        is_weight = source == weight
        if (part == "weight" and not is_weight) or (part == "activation" and is_weight):
            continue
        got_spec = got_inputs.get(source, "（沒有這條邊）")
        if got_spec != want_spec:
            shown = spec_text(got_spec) if isinstance(got_spec, dict) else got_spec
            raise Fail(f"{WHERE[case]}：邊 {source} → {node} 應該是 {spec_text(want_spec)}，你的是 {shown}")
    if part in ("weight", "all"):
        extra = [s for s in got_inputs if s not in want_inputs]
        if extra:
            leftover = LEFTOVER if case == "between" else ""
            raise Fail(f"{WHERE[case]}：{node} 的 {'、'.join(extra)} 不該有標籤，你的貼了（bias 不量化）{leftover}")
    if part in ("activation", "all") and got_label.get("output") != want_label.get("output"):
        raise Fail(
            f"{WHERE[case]}：{node} 的輸出應該是 {spec_text(want_label.get('output'))}，"
            f"你的是 {spec_text(got_label.get('output'))}"
        )
    if part == "all" and got_label.get("annotated") != want_label.get("annotated"):
        raise Fail(
            f"{WHERE[case]}：{node} 的 _annotated 應該是 {want_label.get('annotated')}，你的是 {got_label.get('annotated')}"
        )
    if part == "all" and got_label.get("implicit_sharing") != want_label.get("implicit_sharing"):
        raise Fail(
            f"{WHERE[case]}：{node} 的 allow_implicit_sharing 應該是 {want_label.get('implicit_sharing')}，"
            f"你的是 {got_label.get('implicit_sharing')}{LEFTOVER}"
        )


@check(
    "int4_quantizer",
    1,
    "weight：int8 儲存、[-8, 7]、per-channel symmetric、ch_axis=0、PerChannelMinMaxObserver；bias 不量化",
)
def test_weight_specs(seen, expected):
    compare_labels(seen, expected, "stack", part="weight")
    compare_labels(seen, expected, "lookalike", part="weight")


@check("int4_quantizer", 1, "activation：輸入與輸出都是 act_spec()（int8 per-tensor affine、MinMaxObserver）")
def test_activation_specs(seen, expected):
    compare_labels(seen, expected, "stack", part="activation")
    compare_labels(seen, expected, "lookalike", part="activation")


@check("int4_quantizer", 1, "已經被認領（_annotated=True）的 node 不動；有標籤但沒被認領的照樣標")
def test_claimed_nodes(seen, expected):
    compare_labels(seen, expected, "between", part="weight")


@check("int4_quantizer", 1, "標完設 _annotated=True：後面的 Quantizer 不會蓋掉你的標籤")
def test_marks_own(seen, expected):
    compare_labels(seen, expected, "between", part="all")


@check("int4_quantizer", 1, "convert 之後：weight 的 dequantize_per_channel 範圍 [-8, 7]、axis 0；observer 個數正確")
def test_converted(seen, expected):
    # the models where the student's Quantizer is alone: between other Quantizers, which node ends with whose label
    # is test_claimed_nodes' / test_marks_own's to judge, and what convert makes of those labels follows from them
    for case in OWN:
        got, want = _result(seen, case), _result(expected, case)
        if got.get("prepare_error"):
            raise Fail(
                f"{WHERE[case]}：照你的標籤 prepare / convert 時出錯（{got['prepare_error']}）："
                "4-bit 的 weight 用 int8 儲存（dtype=torch.int8、[-8, 7]），torchao 的 observer 不收 torch.int4"
            )
        if got.get("observers") != want.get("observers"):
            raise Fail(
                f"{WHERE[case]}：prepare 之後應該有 {want.get('observers')} 個 observer，你的有 {got.get('observers')} 個"
            )
        for node, want_edges in want.get("ranges", {}).items():
            got_edges = got.get("ranges", {}).get(node)
            if got_edges != want_edges:
                raise Fail(
                    f"{WHERE[case]}：{node} 的輸入 [來源, dequantize, qmin, qmax, dtype, axis] 應該是 {want_edges}，"
                    f"你的是 {got_edges}"
                )


# --- what a wrong answer probably believed (the record: selfcheck/public/m07_3.py) ----------------------

OWN = ("stack", "lookalike")
"""The cases where the student's Quantizer is alone: its specs show there, nobody else's."""
SPEC_CHECKS = ("test_weight_specs", "test_converted", "test_claimed_nodes", "test_marks_own")
BETWEEN_CHECKS = ("test_claimed_nodes", "test_marks_own")


@detects("int4_quantizer", "labels_a_copy")
def int4_labels_a_copy(seen: Any, expected: Any) -> bool:
    # on the hidden side a copy is refused before its cases run: the refusal says why
    return returned_a_copy(seen, expected) or "圖的複本" in refusal(seen)


@detects("int4_quantizer", "found_by_name", explains=("test_weight_specs", "test_activation_specs", "test_converted"))
def int4_found_by_name(seen: Any, expected: Any) -> bool:
    """The model with an input named linear raised; the one without went through."""
    return diagnosis.error(seen, "lookalike") in ("IndexError", "AttributeError", "TypeError", "KeyError") and bool(
        labels(seen, "stack")
    )


@detects(
    "int4_quantizer",
    "target_substring",
    explains=("test_weight_specs", "test_activation_specs", "test_converted", *BETWEEN_CHECKS),
)
def int4_target_substring(seen: Any, expected: Any) -> bool:
    """Alone, every node the key labels is labelled as the key does, plus other ops whose target also says conv
    (conv_transpose2d) or linear."""
    extra = [node for case in OWN for node in labels(seen, case) if node not in labels(expected, case)]
    return (
        bool(extra)
        and all("conv" in node or "linear" in node for node in extra)
        and all(got == want for _, got, want in weight_pairs(seen, expected, *OWN))
    )


@detects("int4_quantizer", "int4_dtype", explains=SPEC_CHECKS)
def int4_dtype(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.storage_differs)


@detects("int4_quantizer", "int8_range", explains=SPEC_CHECKS)
def int4_int8_range(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.wider_range)


@detects("int4_quantizer", "narrow_range", explains=SPEC_CHECKS)
def int4_narrow_range(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.narrowed_range)


@detects("int4_quantizer", "per_tensor_weight", explains=SPEC_CHECKS)
def int4_per_tensor(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.per_tensor_instead)


@detects("int4_quantizer", "input_channel_axis", explains=SPEC_CHECKS)
def int4_input_channel_axis(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.other_axis)


@detects("int4_quantizer", "wrong_observer", explains=SPEC_CHECKS)
def int4_wrong_observer(seen: Any, expected: Any) -> bool:
    return weights_differ(seen, expected, OWN, record.other_observer)


@detects("int4_quantizer", "quantizes_bias", explains=SPEC_CHECKS)
def int4_quantizes_bias(seen: Any, expected: Any) -> bool:
    """An extra input edge (the bias) where the student's Quantizer is alone."""
    return extra_edges(seen, expected, *OWN)


def _own_specs_right(seen: Any, expected: Any) -> bool:
    """Alone, the student's Quantizer labels every weight as the key does, and no more."""
    pairs = weight_pairs(seen, expected, *OWN)
    return bool(pairs) and all(got == want for _, got, want in pairs) and not extra_edges(seen, expected, *OWN)


@detects("int4_quantizer", "ignores_claimed", explains=BETWEEN_CHECKS)
def int4_ignores_claimed(seen: Any, expected: Any) -> bool:
    """The node another Quantizer claimed does not keep its label."""
    return any(got != want for _, got, want in weight_pairs(seen, expected, "between", owned=False))


@detects("int4_quantizer", "forgets_mark", explains=BETWEEN_CHECKS)
def int4_forgets_mark(seen: Any, expected: Any) -> bool:
    """Alone, the student's labels are right but not marked _annotated."""
    return unmarked(seen, expected, *OWN)


@detects("int4_quantizer", "skips_any_label", explains=BETWEEN_CHECKS)
def int4_skips_any_label(seen: Any, expected: Any) -> bool:
    """Alone, right; between the others, some node nobody claimed ends with another Quantizer's weight spec, while
    the other unclaimed nodes carry the student's."""
    if not _own_specs_right(seen, expected) or unmarked(seen, expected, *OWN):
        return False
    between = weight_pairs(seen, expected, "between")
    wrong = [node for node, got, want in between if got != want]
    return bool(wrong) and len(wrong) < len(between)


@detects("int4_quantizer", "updates_in_place", explains=BETWEEN_CHECKS)
def int4_updates_in_place(seen: Any, expected: Any) -> bool:
    """Alone, right; between the others, a node keeps what the earlier Quantizer wrote on its unclaimed label (an
    edge the key does not label, or its allow_implicit_sharing)."""
    if not _own_specs_right(seen, expected):
        return False
    mine, key, taken = labels(seen, "between"), labels(expected, "between"), claimed(expected, "between")
    for node, want in key.items():
        got = mine.get(node)
        if node in taken or not isinstance(got, dict):
            continue
        if got.get("implicit_sharing") != want.get("implicit_sharing") or extra_edges(seen, expected, "between"):
            return True
    return False
