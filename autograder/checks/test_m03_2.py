"""Hidden checks of M03-2: label_positions and fused_patterns."""

from __future__ import annotations

from autograder.checks.support import check, expect_equal, value

NOTEBOOK = "M03-2"


def _compare_positions(seen, expected, case: str, part: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_positions in want.items():
        expect_equal(got[model][part], want_positions[part], f"{model} 的 {part}")


@check("label_positions", 1, "邊：只列規格不是 None 的輸入邊，寫成 (上游, consumer)")
def test_positions_edges(seen, expected):
    for case in ("seed_models", "cnn"):
        _compare_positions(seen, expected, case, "edges")


@check("label_positions", 1, "輸出：只列有輸出標籤的 node（空的標籤不算）")
def test_positions_outputs(seen, expected):
    for case in ("seed_models", "cnn"):
        _compare_positions(seen, expected, case, "outputs")


@check("label_positions", 1, "沒看過的模型（mlp、有 sigmoid 的 mlp、cat_pool）：邊與輸出都對")
def test_positions_unseen(seen, expected):
    for part in ("edges", "outputs"):
        _compare_positions(seen, expected, "unseen", part)


@check("fused_patterns", 1, "conv → relu（包括 BN 折掉之後的 conv → bn → relu）")
def test_fused_conv_relu(seen, expected):
    for model, want in value(expected, "conv_relu").items():
        expect_equal(value(seen, "conv_relu")[model], want, f"{model} 的融合 pattern")


@check("fused_patterns", 1, "add → relu 與 linear → relu")
def test_fused_add_linear(seen, expected):
    for model, want in value(expected, "add_linear_relu").items():
        expect_equal(value(seen, "add_linear_relu")[model], want, f"{model} 的融合 pattern")


@check("fused_patterns", 1, "沒有融合的地方不列：沒有標籤的 op、有兩個使用者的 conv、後面沒有輸出標籤的 op")
def test_fused_nothing(seen, expected):
    for model, want in value(expected, "nothing_fused").items():
        expect_equal(value(seen, "nothing_fused")[model], want, f"{model} 的融合 pattern")
    expect_equal(value(seen, "half_labelled"), value(expected, "half_labelled"), "conv 有輸入標籤、relu 沒有標籤")
