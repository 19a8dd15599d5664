"""Hidden checks of M03-3: the rule-based Quantizer and its validate()."""

from __future__ import annotations

from autograder.checks.support import check, compare_edges, expect, value

NOTEBOOK = "M03-3"


def _edges(seen, expected, case: str, consumers: dict[str, list[str]]) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, names in consumers.items():
        compare_edges(got[model], want[model], model, names)


@check("rule_quantizer", 1, "conv → relu 是一個融合 pattern：中間沒有 observer，輸出標籤在 relu")
def test_rule_conv_relu(seen, expected):
    _edges(seen, expected, "conv_relu", {"conv_relu": ["relu", "output"], "conv_bn_relu": ["relu", "output"]})


@check("rule_quantizer", 1, "conv 後面不是唯一的 relu 時，conv 自己有輸出標籤")
def test_rule_conv_alone(seen, expected):
    _edges(seen, expected, "conv_alone", {"conv_two_users": ["relu", "mul"], "cat_pool": ["cat"]})


@check(
    "rule_quantizer",
    1,
    "conv 與 linear 的輸入：activation per-tensor affine，weight per-channel symmetric，bias 不量化",
)
def test_rule_weights(seen, expected):
    _edges(seen, expected, "weights", {"conv_relu": ["conv2d"], "mlp": ["linear", "linear_1"]})


@check("rule_quantizer", 1, "linear 與 add 的輸出都有標籤，add 的兩個輸入都量化")
def test_rule_linear_add(seen, expected):
    _edges(
        seen,
        expected,
        "linear_add",
        {"mlp": ["relu", "linear_1"], "linear_add": ["add", "linear_2"], "residual": ["add", "relu_1"]},
    )


@check("rule_quantizer", 1, "max_pool2d 的輸出和它的輸入共用同一個 observer 實例")
def test_rule_max_pool(seen, expected):
    _edges(
        seen, expected, "max_pool", {"conv_relu_pool": ["max_pool2d", "conv2d_1"], "cat_pool": ["max_pool2d", "output"]}
    )


def _rejects(seen, case: str, what: str, node: str, sub: str | None = None) -> None:
    got = value(seen, case)
    if sub is not None:
        got = got[sub]
    expect(got.get("raised") is not None, f"{what}：validate 應該報錯，卻沒有")
    expect(got.get("value_error") is True, f"{what}：應該報 ValueError，看到 {got.get('raised')}")
    expect(got.get("names_node") is True, f"{what}：錯誤訊息要寫出出問題的 node（{node}）")


@check("validate", 1, "正確的標籤不報錯（small_cnn、residual、cat_pool、mlp）")
def test_validate_accepts(seen, expected):
    for model, got in value(seen, "accepts").items():
        expect(got.get("raised") is None, f"{model} 上全是正確的標籤，validate 卻報了 {got.get('raised')}")


@check("validate", 1, "input_qspec_map 的 key 不是這個 node 的輸入：報 ValueError，訊息寫出 node")
def test_validate_not_an_input(seen, expected):
    _rejects(seen, "not_an_input", "conv2d_1 的標籤裡有一條不存在的邊 x → conv2d_1", "conv2d_1")


@check("validate", 1, "weight 用了非 symmetric 的規格：報 ValueError")
def test_validate_asymmetric_weight(seen, expected):
    _rejects(seen, "asymmetric_weight", "linear 的 weight 用 per-tensor affine", "linear")


@check("validate", 1, "conv → relu 融合 pattern 中間（conv 的輸出）有標籤：報 ValueError")
def test_validate_inside_fused(seen, expected):
    _rejects(seen, "inside_fused", "conv2d 只接 relu，輸出卻有標籤", "conv2d")


@check("validate", 1, "整數範圍超出 dtype、或 quant_min 不小於 quant_max：報 ValueError")
def test_validate_bad_range(seen, expected):
    _rejects(seen, "bad_range", "add 的輸出用 int8 [0, 255]", "add", "too_wide")
    _rejects(seen, "bad_range", "conv2d 的輸入用 int8 [10, 10]", "conv2d", "empty")
