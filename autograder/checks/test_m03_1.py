"""Hidden checks of M03-1: add_label and reads_quantized."""

from __future__ import annotations

from autograder.checks.support import check, compare_observers, expect, expect_equal, value

NOTEBOOK = "M03-1"


@check("add_label", 1, "輸出標籤：node 的輸出只有一個 observer，所有 consumer 都讀它")
def test_label_output(seen, expected):
    got, want = value(seen, "output_many_users"), value(expected, "output_many_users")
    compare_observers(got, want, "relu 被四個 consumer 讀的模型，標 relu 的輸出")


@check("add_label", 1, "邊標籤：只有那一個 consumer 讀到量化後的值，key 是上游 producer")
def test_label_edge(seen, expected):
    got, want = value(seen, "edge_one_user"), value(expected, "edge_one_user")
    compare_observers(got, want, "relu 被四個 consumer 讀的模型，標邊 relu → linear_1")


@check("add_label", 1, "同一個 node 上的好幾張標籤都留著：不覆蓋自己或別人先貼的標籤")
def test_label_stacked(seen, expected):
    for model in ("conv_relu", "mlp"):
        compare_observers(value(seen, "stacked")[model], value(expected, "stacked")[model], model)
    compare_observers(value(seen, "keeps_existing"), value(expected, "keeps_existing"), "已經有別人貼的標籤")


@check("add_label", 1, "邊的上游不是 consumer 的輸入時，報 ValueError")
def test_label_not_an_input(seen, expected):
    got = value(seen, "not_an_input")
    expect(got.get("raised") is not None, "add_label((relu, conv2d), spec)：relu 不是 conv2d 的輸入，應該報錯，卻沒有")
    expect(got.get("value_error") is True, f"應該報 ValueError，看到 {got.get('raised')}")


@check("reads_quantized", 1, "邊標籤：只有被標的那個 consumer 是 True")
def test_reads_edge(seen, expected):
    for model in ("fan_out", "cat_pool"):
        expect_equal(value(seen, "edge")[model], value(expected, "edge")[model], f"{model} 上的回傳值")


@check("reads_quantized", 1, "輸出標籤：每個 consumer 都是 True")
def test_reads_output(seen, expected):
    expect_equal(value(seen, "output"), value(expected, "output"), "標 relu 輸出的模型上的回傳值")


@check("reads_quantized", 1, "串接的兩個 observer：沿著 observer 一路走到真正的 consumer")
def test_reads_chained(seen, expected):
    expect_equal(
        value(seen, "chained"), value(expected, "chained"), "輸出標籤加上屬性不同的邊標籤（兩個 observer 串接）"
    )


@check("reads_quantized", 1, "圖的輸出（output node）也是 consumer")
def test_reads_graph_output(seen, expected):
    expect_equal(value(seen, "graph_output"), value(expected, "graph_output"), "relu 也直接是圖的輸出")
