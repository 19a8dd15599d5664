"""Hidden checks of M07-3: the labels of Int4WeightQuantizer, the observers they produce, the converted ranges.

What a student who half-understood a 4-bit weight Quantizer could assume, and the hidden case that refutes it:
- "conv and linear are the nodes named so": ``lookalike`` (an input named ``linear``);
- "4 bit is torch.int4", "[-7, 7] like int8's [-127, 127]", "per-tensor is enough", "the
  channel axis of a weight is 1", "any observer will do", "the bias is quantized too":
  ``stack`` and ``lookalike`` compare every weight spec, and convert shows the ranges and axes;
- "a node with a label belongs to someone else": ``between`` (an unclaimed label, ``_annotated=False``,
  must be replaced);
- "an unclaimed label is to be completed in place": ``between`` (its bias spec and its
  ``allow_implicit_sharing=False`` must not survive: the exercise replaces the whole label);
- "a claimed node can be relabelled": ``between`` (the claimed linear's label must come back as it was);
- "no need to mark my own labels": ``between`` (a Quantizer after the student's relabels what is unmarked);
- "annotate may label a copy and return it": every case reads the graph it handed over.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value
from autograder.checks.support import spec_text as _spec_text

WHERE = {
    "stack": "conv（有 bias）→ relu → conv（沒有 bias）→ flatten → linear",
    "lookalike": "輸入叫 linear、linear → relu → 加上純量 → linear",
    "between": "三個 Quantizer 依序執行：先有人認領了最後的 linear、替第一個 conv 貼了標籤但沒認領，你的之後還有一個",
}


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="不量化（None）")


LEFTOVER = (
    "：這個 node 原本有一張前一個 Quantizer 沒認領（_annotated=False）的標籤，"
    "練習要的是整張換成你的新標籤，不是在舊標籤上補 spec（舊的 bias spec、旗標都不該留下）"
)


def _result(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("labels"), dict), f"{WHERE[case]}：證據格式不對")
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
        raise Fail(f"{WHERE[case]}：多了 {'、'.join(extra_nodes)} 的標籤（只標 conv2d 與 linear）")


def compare_label(node: str, got_label: Any, want_label: Any, case: str, part: str) -> None:
    """One node's label against the answer key's (``part`` as in ``compare_labels``)."""
    if got_label is None:
        raise Fail(f"{WHERE[case]}：{node} 沒有標籤")
    got_inputs, want_inputs = _inputs(got_label), _inputs(want_label)
    weight = next((s for s in want_inputs if s.endswith("weight")), None)
    for source, want_spec in want_inputs.items():
        is_weight = source == weight
        if (part == "weight" and not is_weight) or (part == "activation" and is_weight):
            continue
        got_spec = got_inputs.get(source, "（沒有這條邊）")
        if got_spec != want_spec:
            shown = spec_text(got_spec) if isinstance(got_spec, dict) else got_spec
            raise Fail(f"{WHERE[case]}：邊 {source} → {node} 預期 {spec_text(want_spec)}，看到 {shown}")
    if part in ("weight", "all"):
        extra = [s for s in got_inputs if s not in want_inputs]
        if extra:
            leftover = LEFTOVER if case == "between" else ""
            raise Fail(f"{WHERE[case]}：{node} 多標了 {'、'.join(extra)}（bias 不量化）{leftover}")
    if part in ("activation", "all") and got_label.get("output") != want_label.get("output"):
        raise Fail(
            f"{WHERE[case]}：{node} 的輸出預期 {spec_text(want_label.get('output'))}，"
            f"看到 {spec_text(got_label.get('output'))}"
        )
    if part == "all" and got_label.get("annotated") != want_label.get("annotated"):
        raise Fail(
            f"{WHERE[case]}：{node} 的 _annotated 預期 {want_label.get('annotated')}，看到 {got_label.get('annotated')}"
        )
    if part == "all" and got_label.get("implicit_sharing") != want_label.get("implicit_sharing"):
        raise Fail(
            f"{WHERE[case]}：{node} 的 allow_implicit_sharing 預期 {want_label.get('implicit_sharing')}，"
            f"看到 {got_label.get('implicit_sharing')}{LEFTOVER}"
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
    for case in ("stack", "lookalike", "between"):
        got, want = _result(seen, case), _result(expected, case)
        if got.get("prepare_error"):
            raise Fail(
                f"{WHERE[case]}：照你的標籤 prepare / convert 時出錯（{got['prepare_error']}）："
                "4-bit 的 weight 用 int8 儲存（dtype=torch.int8、[-8, 7]），torchao 的 observer 不收 torch.int4"
            )
        if got.get("observers") != want.get("observers"):
            raise Fail(
                f"{WHERE[case]}：prepare 之後 observer 預期 {want.get('observers')} 個，看到 {got.get('observers')} 個"
            )
        for node, want_edges in want.get("ranges", {}).items():
            got_edges = got.get("ranges", {}).get(node)
            if got_edges != want_edges:
                raise Fail(
                    f"{WHERE[case]}：{node} 的輸入 [來源, dequantize, qmin, qmax, dtype, axis] 預期 {want_edges}，看到 {got_edges}"
                )
