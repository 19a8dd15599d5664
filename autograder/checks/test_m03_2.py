"""Hidden checks of M03-2: label_positions and fused_patterns."""

from __future__ import annotations

from autograder.checks.support import check, expect_equal, value

NOTEBOOK = "M03-2"

TABLE = "手貼標籤的模型（有沒人認領的標籤、None 規格、共用規格、模型輸入上的標籤、圖上已有一個 observer）"


def _compare_positions(seen, expected, case: str, part: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_positions in want.items():
        where = TABLE if model == "table_net" else model
        expect_equal(got[model][part], want_positions[part], f"{where} 的 {part}")


def _compare_pairs(seen, expected, case: str, names: dict[str, str] | None = None) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_pairs in want.items():
        expect_equal(got[model], want_pairs, f"{(names or {}).get(model, model)} 的融合 pattern")


@check("label_positions", 1, "邊：只列規格不是 None 的輸入邊，寫成 (上游, consumer)；有沒有人認領都算")
def test_positions_edges(seen, expected):
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


@check("fused_patterns", 1, "conv → relu（包括 BN 折掉之後的 conv → bn → relu，以及圖上不相鄰的 conv 與 relu）")
def test_fused_conv_relu(seen, expected):
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
    "沒有融合的地方不列：沒有標籤的 op、有兩個使用者的 op、中間的邊有量化、輸入全是 None、後面沒有輸出標籤",
)
def test_fused_nothing(seen, expected):
    _compare_pairs(
        seen,
        expected,
        "nothing_fused",
        {"not_fused": "手貼標籤的模型（conv → relu 的邊有量化、輸入規格全是 None、add 有兩個使用者）"},
    )
    expect_equal(value(seen, "half_labelled"), value(expected, "half_labelled"), "conv 有輸入標籤、relu 沒有標籤")
