"""Hidden checks of M03-1: add_label and reads_quantized.

add_label checks compare the labels the student's add_label left (read from the annotations:
positions, specs with their observer class, someone else's ``_annotated`` flags) and the observers
``prepare_pt2e`` inserted for them. reads_quantized checks compare the returned dicts.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m03_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import (
    Fail,
    check,
    compare_observers,
    detects,
    expect,
    expect_unchanged,
    spec_text,
    value,
)
from selfcheck.public import m03_1 as evidence


def _spec_text(spec: Any) -> str:
    return spec_text(spec, none="不量化（None）")


def compare_labels(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Every node's label: the same input edges and output, each with the same spec (observer class included)."""
    if not isinstance(got, dict) or not isinstance(want, dict):
        raise Fail(f"{where}：證據格式不對")
    for node in sorted(set(got) | set(want)):
        g, w = got.get(node), want.get(node)
        if w is None:
            raise Fail(f"{where}：{node} 不該有標籤，你的貼了（{_label_text(g)}）")
        if g is None:
            raise Fail(f"{where}：{node} 應該有標籤（{_label_text(w)}），你的沒有")
        got_inputs, want_inputs = dict(map(tuple, g.get("inputs", []))), dict(map(tuple, w["inputs"]))
        for source in sorted(set(got_inputs) | set(want_inputs)):
            if source not in want_inputs:
                raise Fail(f"{where}：{node} 的 input_qspec_map 不該有 {source}（邊 {source} → {node}），你的有")
            if source not in got_inputs:
                raise Fail(
                    f"{where}：{node} 的 input_qspec_map 應該有 {source}（邊 {source} → {node}），你的沒有：標籤是不是被蓋掉了？"
                )
            expect(
                got_inputs[source] == want_inputs[source],
                f"{where}：邊 {source} → {node} 的規格應該是 {_spec_text(want_inputs[source])}，"
                f"你的是 {_spec_text(got_inputs[source])}",
            )
        expect(
            g.get("output") == w["output"],
            f"{where}：{node} 的 output_qspec 應該是 {_spec_text(w['output'])}，你的是 {_spec_text(g.get('output'))}",
        )
        for flag, text in (("annotated", "_annotated"), ("implicit_sharing", "allow_implicit_sharing")):
            if flag in w and not (flag == "annotated" and w[flag] is False):  # claiming a label is allowed
                expect(
                    g.get(flag) == w[flag],
                    f"{where}：{node} 原本那張標籤的 {text} 是 {w[flag]}，你的變成 {g.get(flag)}：不要換掉整張標籤",
                )


def _label_text(entry: Any) -> str:
    """A node's label in words: which input edges and whether its output."""
    if not isinstance(entry, dict):
        return str(entry)
    parts = [f"邊 {source} → 這個 node" for source, spec in entry.get("inputs", []) if spec is not None]
    if entry.get("output") is not None:
        parts.append("它的輸出")
    return "、".join(parts) or "沒有量化任何位置"


def _labelled(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    compare_labels(got["labels"], want["labels"], where)
    compare_observers(got["prepared"], want["prepared"], where)


@check("add_label", 1, "輸出標籤：node 的輸出只有一個 observer，所有 consumer 都讀它（模型輸入也一樣）")
def test_label_output(seen, expected):
    got, want = value(seen, "output_many_users"), value(expected, "output_many_users")
    _labelled(got, want, "relu 被四個 consumer 讀的模型，標 relu 與 x 的輸出")


@check(
    "add_label",
    1,
    "邊標籤：只有那一個 consumer 讀到量化後的值，key 是上游 producer（cat 的 list 裡的輸入、第二個引數、常數都是）",
)
def test_label_edge(seen, expected):
    got, want = value(seen, "edge_one_user"), value(expected, "edge_one_user")
    _labelled(got["fan_out"], want["fan_out"], "relu 被四個 consumer 讀的模型，標邊 relu → linear_1")
    _labelled(
        got["fan_out_cat"], want["fan_out_cat"], "標邊 x → mul、relu → cat（在 cat 的 list 裡）、first_weight → linear"
    )
    compare_labels(
        got["keyword"]["labels"], want["keyword"]["labels"], "mul 用 keyword 接 x（mul(relu, other=x)），標邊 x → mul"
    )


@check("add_label", 1, "同一個 node 上的好幾張標籤都留著：不覆蓋自己或別人先貼的標籤，也不改別人標籤的其他欄位")
def test_label_stacked(seen, expected):
    got, want = value(seen, "stacked"), value(expected, "stacked")
    for model in ("conv_relu", "mlp", "fan_out"):
        _labelled(got[model], want[model], f"{model}：同一個 node 上先後貼邊標籤與輸出標籤")
    got, want = value(seen, "keeps_existing"), value(expected, "keeps_existing")
    _labelled(got["two_labels"], want["two_labels"], "linear、mul 上已經有別人貼的標籤")
    compare_labels(
        got["no_sharing"], want["no_sharing"], "linear_1 上已經有別人貼的標籤（allow_implicit_sharing=False）"
    )
    _labelled(
        got["relabel"],
        want["relabel"],
        "同一個位置再貼一次、換一份 spec（relu 的輸出、邊 relu → mul，以及別人標籤上的 relu → linear 與 linear 的輸出）",
    )


@check("add_label", 1, "邊的上游不是 consumer 的輸入時，丟出 ValueError，訊息寫出兩個 node，也不留下這條邊的標籤")
def test_label_not_an_input(seen, expected):
    cases = {
        "backwards": "add_label((relu, conv2d), spec)：relu 是 conv2d 的 consumer，不是輸入",
        "two_steps": "add_label((x, relu), spec)：x 是 relu 的上上游",
        "constant": "add_label((conv_weight, relu), spec)：conv_weight 是 conv2d 的輸入，不是 relu 的",
        "not_in_list": "add_label((mul, cat), spec)：cat 的 list 裡沒有 mul",
    }
    got = value(seen, "not_an_input")
    for case, what in cases.items():
        verdict = got[case]
        expect(verdict.get("raised") is not None, f"{what}，應該出錯，卻沒有")
        expect(verdict.get("value_error") is True, f"{what}：應該丟出 ValueError，你的丟出 {verdict.get('raised')}")
        expect(verdict.get("names_both") is True, f"{what}：錯誤訊息要寫出兩個 node 的名字")
        expect(verdict.get("left_label") is False, f"{what}：出錯之前已經把這條邊寫進 input_qspec_map 了")


READS = {
    "edge": {
        "fan_out": "標邊 relu → linear_1 ",
        "cat_pool": "cat_pool 上標邊 x → conv2d ",
        "fan_out_cat": "標邊 relu → cat（cat 的 list 裡）、邊 relu → mul 的規格是 None ",
        "labels_after_prepare": "prepare_pt2e 之後才在 linear、mul 上貼標籤（沒有 observer）",
    },
    "output": {
        "label": "標 relu 輸出的模型上",
        "by_hand": "沒有任何標籤、relu 後面手插一個 observer（名字不是 activation_post_process）",
        "none_spec": "relu 的 output_qspec 是 None（沒有 observer）",
    },
    "chained": {
        "labels": "輸出標籤加上屬性不同的邊標籤（兩個 observer 串接）",
        "by_hand": "relu → linear 上手插兩個串接的 observer",
        "look_alike": "relu → mul 中間有個叫 activation_post_process_99 的 nn.Identity（不是 observer）",
    },
    "graph_output": {"fan_out": "relu 也直接是圖的輸出", "fan_out_cat": "relu 也直接是圖的輸出（輸出標籤）"},
}


def _compare_answers(got: Any, want: dict[str, bool], where: str) -> None:
    """The same consumers, each with the same bool; the first difference as a sentence."""
    if not isinstance(got, dict):
        raise Fail(f"{where}：reads_quantized 應該回傳 {{consumer 名稱: bool}} 的 dict，你的回傳 {type(got).__name__}")
    for name in sorted(set(want) | set(got)):
        if name not in got:
            raise Fail(f"{where}：{name} 讀 producer 的值，應該在回傳的 dict 裡（{want[name]}），你的沒有")
        if name not in want:
            raise Fail(f"{where}：{name} 不是這個值的 consumer，不該在回傳的 dict 裡，你的有（{got[name]}）")
        if got[name] != want[name]:
            raise Fail(f"{where}：{name} 應該是 {want[name]}，你的是 {got[name]}")


def _reads(seen, expected, case: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, where in READS[case].items():
        _compare_answers(got[model]["answer"], want[model]["answer"], where.strip())


def _reads_unchanged(seen) -> None:
    """reads_quantized only reads: every prepared graph it was handed comes back as it was."""
    for case, models in READS.items():
        if "value" not in seen.get("cases", {}).get(case, {}):  # a case that stopped fails its own check
            continue
        got = value(seen, case)
        for model, where in models.items():
            expect_unchanged({where.strip(): got[model].get("changed", [])}, "reads_quantized")


@check(
    "reads_quantized",
    1,
    "邊標籤：只有被標的那個 consumer 是 True（規格是 None 的標籤、prepare 之後才貼的標籤都沒有 observer）；"
    "不改傳進來的圖",
)
def test_reads_edge(seen, expected):
    _reads_unchanged(seen)
    _reads(seen, expected, "edge")


@check("reads_quantized", 1, "輸出標籤：每個 consumer 都是 True；看的是 observer，不是標籤（手插的 observer 也算）")
def test_reads_output(seen, expected):
    _reads(seen, expected, "output")


@check("reads_quantized", 1, "串接的兩個 observer：沿著 observer 一路走到真正的 consumer；名字像 observer 的不算")
def test_reads_chained(seen, expected):
    _reads(seen, expected, "chained")


@check("reads_quantized", 1, "圖的輸出（output node）也是 consumer")
def test_reads_graph_output(seen, expected):
    _reads(seen, expected, "graph_output")


# --- misconceptions: what recognises each (the records, with their words, are selfcheck/public/m03_1.py) ----

LABEL_CHECKS = ("test_label_output", "test_label_edge", "test_label_stacked")
NOT_AN_INPUT = ("test_label_not_an_input",)


@detects("add_label", "keyed_by_consumer", explains=LABEL_CHECKS)
def keyed_by_consumer(seen: Any, expected: Any) -> bool:
    return evidence.keyed_by_consumer(seen, expected)


@detects("add_label", "edge_as_output", explains=LABEL_CHECKS)
def edge_as_output(seen: Any, expected: Any) -> bool:
    return evidence.edge_as_output(seen, expected)


@detects("add_label", "output_as_edges", explains=LABEL_CHECKS)
def output_as_edges(seen: Any, expected: Any) -> bool:
    return evidence.output_as_edges(seen, expected)


@detects("add_label", "checks_backwards")
def checks_backwards(seen: Any, expected: Any) -> bool:
    return evidence.backwards_check(seen, expected)


@detects("add_label", "checks_args", explains=LABEL_CHECKS)
def checks_args(seen: Any, expected: Any) -> bool:
    return evidence.checks_args(seen, expected)


@detects("add_label", "overwrites", explains=LABEL_CHECKS)
def overwrites(seen: Any, expected: Any) -> bool:
    return evidence.overwrites(seen, expected)


@detects("add_label", "rebuilds_annotation", explains=("test_label_stacked",))
def rebuilds_annotation(seen: Any, expected: Any) -> bool:
    return evidence.flags_lost(seen, expected)


@detects("add_label", "respects_claims", explains=("test_label_stacked",))
def respects_claims(seen: Any, expected: Any) -> bool:
    return evidence.skips_claimed(seen, expected)


RELABEL = ("keeps_existing", "relabel")
"""The case that labels positions again with another spec."""


@detects("add_label", "keeps_old_spec", explains=("test_label_stacked",))
def keeps_old_spec(seen: Any, expected: Any) -> bool:
    """Specs differ from the ones passed in only where a position was labelled again."""
    differences = [
        place
        for place, got, want, _, _ in evidence.label_pairs(seen, expected)
        for position, spec in want.positions.items()
        if position in got.positions and got.positions[position] != spec
    ]
    return bool(differences) and all(place[: len(RELABEL)] == RELABEL for place in differences)


@detects("add_label", "own_spec", explains=LABEL_CHECKS)
def own_spec(seen: Any, expected: Any) -> bool:
    return evidence.own_spec(seen, expected)


@detects("add_label", "copies_fields", explains=LABEL_CHECKS)
def copies_fields(seen: Any, expected: Any) -> bool:
    return evidence.other_observer(seen, expected)


@detects("add_label", "no_check", explains=NOT_AN_INPUT)
def no_check(seen: Any, expected: Any) -> bool:
    return evidence.never_refuses(seen, expected)


@detects("add_label", "assert_instead", explains=NOT_AN_INPUT)
def assert_instead(seen: Any, expected: Any) -> bool:
    return evidence.other_exception(seen, expected)


@detects("add_label", "writes_before_check", explains=NOT_AN_INPUT)
def writes_before_check(seen: Any, expected: Any) -> bool:
    return evidence.written_before_refusing(seen, expected)


@detects("add_label", "message_one_name", explains=NOT_AN_INPUT)
def message_one_name(seen: Any, expected: Any) -> bool:
    return evidence.names_one_node(seen, expected)


@detects("reads_quantized", "erases_guard", explains=("test_reads_edge",))
def erases_guard(seen: Any, expected: Any) -> bool:
    return evidence.changes_graph(seen, expected)


@detects("reads_quantized", "reads_labels")
def reads_labels(seen: Any, expected: Any) -> bool:
    return evidence.labels_for_observers(seen, expected)


@detects("reads_quantized", "reads_any_observer")
def reads_any_observer(seen: Any, expected: Any) -> bool:
    return evidence.any_observer_counts(seen, expected)


@detects("reads_quantized", "reads_one_hop", explains=("test_reads_chained",))
def reads_one_hop(seen: Any, expected: Any) -> bool:
    return evidence.stops_after_one_observer(seen, expected)


@detects("reads_quantized", "reads_direct_users")
def reads_direct_users(seen: Any, expected: Any) -> bool:
    return evidence.observer_as_consumer(seen, expected)


@detects("reads_quantized", "reads_observer_by_name", explains=("test_reads_output", "test_reads_chained"))
def reads_observer_by_name(seen: Any, expected: Any) -> bool:
    return evidence.observer_by_name(seen, expected)


@detects("reads_quantized", "reads_any_call_module", explains=("test_reads_chained", "test_reads_output"))
def reads_any_call_module(seen: Any, expected: Any) -> bool:
    return evidence.module_as_observer(seen, expected)


@detects("reads_quantized", "reads_counts_modules")
def reads_counts_modules(seen: Any, expected: Any) -> bool:
    return evidence.counts_modules(seen, expected)


@detects("reads_quantized", "reads_scans_args")
def reads_scans_args(seen: Any, expected: Any) -> bool:
    return evidence.scans_args(seen, expected)


@detects("reads_quantized", "reads_skips_output")
def reads_skips_output(seen: Any, expected: Any) -> bool:
    return evidence.misses_output(seen, expected)
