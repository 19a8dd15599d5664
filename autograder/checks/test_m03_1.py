"""Hidden checks of M03-1: add_label and reads_quantized.

add_label checks compare the labels the student's add_label left (read from the annotations:
positions, specs with their observer class, someone else's ``_annotated`` flags) and the observers
``prepare_pt2e`` inserted for them. reads_quantized checks compare the returned dicts.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
add_label
- an output label is an edge label on every consumer (the output node misses it), or an edge label is
  the producer's output label (every consumer quantized) → output_many_users, edge_one_user;
- the ``input_qspec_map`` key is the consumer, or the edge is checked with ``producer in
  consumer.args`` (a cat's list, a keyword) → edge_one_user (cat of a list, a second argument, a
  constant weight);
- a fresh ``QuantizationAnnotation`` each time (overwrites the labels another Quantizer or an earlier
  call wrote, or drops their ``_annotated`` / ``allow_implicit_sharing``), or a label claimed by someone
  else is skipped → stacked, keeps_existing;
- the spec rebuilt or replaced (``act_spec()``, a hard-coded observer) → every case (observer class
  compared);
- no check, an ``assert``, a check in the wrong direction, a message naming one node, or the bad edge
  written before raising → not_an_input.
reads_quantized
- labels mean observers (a ``None`` spec, labels put after prepare_pt2e), or a hand-inserted observer
  without a label is missed → edge, output;
- observers recognised by name (``activation_post_process``) or every call_module is an observer →
  output (a hand-inserted observer named otherwise), chained (an ``nn.Identity`` named like one);
- one hop only, or the observer node taken for the consumer → chained;
- any observer after the producer means every consumer is quantized → edge (one edge of four);
- consumers found by scanning ``args`` (lists, the output tuple) or call_function only → edge
  (cat of a list), graph_output (the output node);
- a reading function may change the graph → every prepared graph must come back unchanged (first check).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import (
    Fail,
    check,
    compare_observers,
    expect,
    expect_equal,
    expect_unchanged,
    spec_text,
    value,
)


def _spec_text(spec: Any) -> str:
    return spec_text(spec, none="不量化（None）")


def compare_labels(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Every node's label: the same input edges and output, each with the same spec (observer class included)."""
    if not isinstance(got, dict) or not isinstance(want, dict):
        raise Fail(f"{where}：證據格式不對")
    for node in sorted(set(got) | set(want)):
        g, w = got.get(node), want.get(node)
        if w is None:
            raise Fail(f"{where}：{node} 不該有標籤，看到 {g}")
        if g is None:
            raise Fail(f"{where}：{node} 應該有標籤，看到沒有")
        got_inputs, want_inputs = dict(map(tuple, g.get("inputs", []))), dict(map(tuple, w["inputs"]))
        for source in sorted(set(got_inputs) | set(want_inputs)):
            if source not in want_inputs:
                raise Fail(f"{where}：{node} 的 input_qspec_map 不該有 {source}（邊 {source} → {node}）")
            if source not in got_inputs:
                raise Fail(f"{where}：{node} 的 input_qspec_map 少了 {source}（邊 {source} → {node}），標籤被蓋掉了？")
            expect(
                got_inputs[source] == want_inputs[source],
                f"{where}：邊 {source} → {node} 的規格預期 {_spec_text(want_inputs[source])}，"
                f"看到 {_spec_text(got_inputs[source])}",
            )
        expect(
            g.get("output") == w["output"],
            f"{where}：{node} 的 output_qspec 預期 {_spec_text(w['output'])}，看到 {_spec_text(g.get('output'))}",
        )
        for flag, text in (("annotated", "_annotated"), ("implicit_sharing", "allow_implicit_sharing")):
            if flag in w and not (flag == "annotated" and w[flag] is False):  # claiming a label is allowed
                expect(
                    g.get(flag) == w[flag],
                    f"{where}：{node} 原本那張標籤的 {text} 是 {w[flag]}，看到 {g.get(flag)}：不要換掉整張標籤",
                )


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
        expect(verdict.get("value_error") is True, f"{what}：應該丟出 ValueError，看到 {verdict.get('raised')}")
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


def _reads(seen, expected, case: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, where in READS[case].items():
        expect_equal(got[model]["answer"], want[model]["answer"], f"{where}的回傳值")


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
