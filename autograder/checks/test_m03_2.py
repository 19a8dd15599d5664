"""Hidden checks of M03-2: label_positions and fused_patterns.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
label_positions
- a ``None`` spec is a quantized edge (bias) → seed_models, cnn;
- only ``QuantizationSpec`` counts (shared, fixed, derived specs skipped) → table (a shared spec),
  seed_models (XNNPACK's shared pooling spec);
- only labels someone claimed (``_annotated``) count → table (labels nobody claimed);
- any annotation is an output label (XNNPACK's empty labels on constants) → seed_models, unseen;
- edges filtered by ``producer in node.all_input_nodes`` (the copy's keys belong to the original
  graph), or written (consumer, producer) → every model;
- only call_function nodes carry labels → table (a label on a model input);
- output labels forgotten → every model.
fused_patterns
- the next node in graph order is the last op (``node.next``) → conv_relu (far_relu: nodes between);
- the op kinds decide (conv then relu) instead of the labels, or the last op must be a relu →
  add_linear_relu (fused_by_labels: conv → sigmoid, mul → hardtanh), nothing_fused (look_alikes);
- any label on the first op, or any user → nothing_fused (no input label, two consumers, inputs all
  ``None``), half_labelled;
- an edge present in ``input_qspec_map`` means quantized (a ``None`` spec does not) → add_linear_relu;
- the middle edge looked up by identity in the copy's keys → every fused pattern;
- only claimed labels count → conv_relu (claimed);
- pairs written (last, first) → every case.
Both: a reading function may change the graph → every labelled graph must come back unchanged
(first check of each exercise).
"""

from __future__ import annotations

from autograder.checks.support import check, expect_equal, expect_unchanged, value

POSITIONS = ("seed_models", "cnn", "table", "unseen")
FUSED = ("conv_relu", "add_linear_relu", "nothing_fused")


def _unchanged(seen, cases: tuple[str, ...], function: str) -> None:
    """Every graph the reading function was handed comes back as it was."""
    for case in cases:
        if "value" not in seen.get("cases", {}).get(case, {}):  # a case that stopped fails its own check
            continue
        for model, record in value(seen, case).items():
            if isinstance(record, dict):
                expect_unchanged({TABLE if model == "table_net" else model: record.get("changed", [])}, function)


TABLE = "手貼標籤的模型（有沒人認領的標籤、None 規格、共用規格、模型輸入上的標籤、圖上已有一個 observer）"


def _compare_positions(seen, expected, case: str, part: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_positions in want.items():
        where = TABLE if model == "table_net" else model
        expect_equal(got[model][part], want_positions[part], f"{where} 的 {part}")


def _compare_pairs(seen, expected, case: str, names: dict[str, str] | None = None) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_pairs in want.items():
        expect_equal(got[model]["pairs"], want_pairs["pairs"], f"{(names or {}).get(model, model)} 的融合 pattern")


@check(
    "label_positions",
    1,
    "邊：只列規格不是 None 的輸入邊，寫成 (上游, consumer)；有沒有人認領都算；不改傳進來的圖",
)
def test_positions_edges(seen, expected):
    _unchanged(seen, POSITIONS, "label_positions")
    for case in ("seed_models", "cnn", "table"):
        _compare_positions(seen, expected, case, "edges")


@check("label_positions", 1, "輸出：只列有輸出標籤的 node（空的標籤不算，模型輸入上的也算）")
def test_positions_outputs(seen, expected):
    for case in ("seed_models", "cnn", "table"):
        _compare_positions(seen, expected, case, "outputs")


@check("label_positions", 1, "沒看過的模型（mlp、有 sigmoid 的 mlp、cat_pool、有常數的 add）：邊與輸出都對")
def test_positions_unseen(seen, expected):
    for part in ("edges", "outputs"):
        _compare_positions(seen, expected, "unseen", part)


@check(
    "fused_patterns",
    1,
    "conv → relu（包括 BN 折掉之後的 conv → bn → relu，以及圖上不相鄰的 conv 與 relu）；不改傳進來的圖",
)
def test_fused_conv_relu(seen, expected):
    _unchanged(seen, FUSED, "fused_patterns")
    if "value" in seen.get("cases", {}).get("half_labelled", {}):
        expect_unchanged(value(seen, "half_labelled").get("changed", []), "fused_patterns")
    _compare_pairs(seen, expected, "conv_relu")


@check("fused_patterns", 1, "add → relu、linear → relu，以及標籤看得出來、最後一個 op 不是 relu 的融合")
def test_fused_add_linear(seen, expected):
    _compare_pairs(
        seen,
        expected,
        "add_linear_relu",
        {"fused_by_labels": "手貼標籤的模型（conv → sigmoid 中間隔著別的 node、mul → hardtanh 的邊標成 None）"},
    )


@check(
    "fused_patterns",
    1,
    "沒有融合的地方不列：沒有標籤的 op、有兩個 consumer 的 op、中間的邊有量化、輸入全是 None、後面沒有輸出標籤",
)
def test_fused_nothing(seen, expected):
    _compare_pairs(
        seen,
        expected,
        "nothing_fused",
        {"not_fused": "手貼標籤的模型（conv → relu 的邊有量化、輸入規格全是 None、add 有兩個 consumer）"},
    )
    expect_equal(
        value(seen, "half_labelled")["pairs"],
        value(expected, "half_labelled")["pairs"],
        "conv 有輸入標籤、relu 沒有標籤",
    )
