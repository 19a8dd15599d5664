"""Hidden checks of M03-4: AddQuantizer and CatQuantizer with shared qparams."""

from __future__ import annotations

from autograder.checks.support import check, compare_observers, compare_paths, expect, value

NOTEBOOK = "M03-4"


@check("add_quantizer", 1, "AddQuantizer(share=False) 在兩個輸入的 add 上：輸入與輸出各有自己的 observer 實例")
def test_add_separate(seen, expected):
    compare_observers(value(seen, "separate")["prepared"], value(expected, "separate")["prepared"], "a + b")


@check("add_quantizer", 1, "AddQuantizer(share=True) 在 residual 上：add 的三個位置共用同一個 observer 實例")
def test_add_shared_residual(seen, expected):
    got = value(seen, "shared_residual")["prepared"]
    compare_observers(got, value(expected, "shared_residual")["prepared"], "residual")


@check("add_quantizer", 1, "AddQuantizer(share=True) 在沒看過的模型上：每個 add 的輸入與輸出共用 observer 實例")
def test_add_shared_branches(seen, expected):
    got = value(seen, "shared_branches")["prepared"]
    compare_observers(got, value(expected, "shared_branches")["prepared"], "三個分支相加的模型")


@check("add_quantizer", 1, "常數與純量不貼標籤：add(x, self.b) 與 add(x, 0.5) 只量化 activation")
def test_add_constants(seen, expected):
    got = value(seen, "constants")["prepared"]
    labelled = sorted({o["observes"] for o in got["observers"]} & set(got["constants"]))
    expect(not labelled, f"模型常數（get_attr）{labelled} 被貼了標籤：常數不是 activation，不該有 observer")
    compare_observers(got, value(expected, "constants")["prepared"], "有常數與純量的 add")


@check("add_quantizer", 1, "add(r, r) 兩個輸入是同一個 node：只貼一條邊，和輸出共用")
def test_add_self(seen, expected):
    compare_observers(value(seen, "self_add")["prepared"], value(expected, "self_add")["prepared"], "r + r")


@check("add_quantizer", 1, "convert 之後：add 的每個輸入與輸出都經過同一組 scale / zero point 的 q → dq")
def test_add_converted(seen, expected):
    for case, where in (("shared_residual", "residual"), ("shared_branches", "三個分支相加的模型")):
        got, want = value(seen, case)["converted"], value(expected, case)["converted"]
        adds = [name for name in want["paths"] if name.startswith("add")]
        compare_paths(got, want, where, adds + [u for u in want["paths"] if u.startswith("relu")])


@check("add_quantizer", 1, "尊重 _annotated：別人標過的 add 不改，自己標過的 add 設 _annotated = True")
def test_add_pre_annotated(seen, expected):
    got = value(seen, "pre_annotated")["prepared"]
    compare_observers(got, value(expected, "pre_annotated")["prepared"], "(a + b) + c，第一個 add 已被標過")


@check("cat_quantizer", 1, "CatQuantizer 在 cat_pool 上：cat 的兩個輸入與輸出共用同一個 observer 實例")
def test_cat_pool(seen, expected):
    compare_observers(value(seen, "cat_pool")["prepared"], value(expected, "cat_pool")["prepared"], "cat_pool")


@check("cat_quantizer", 1, "CatQuantizer 在三個輸入的 cat 上：範圍不同的三個分支共用一組 qparams")
def test_cat_three_way(seen, expected):
    got, want = value(seen, "three_way"), value(expected, "three_way")
    compare_observers(got["prepared"], want["prepared"], "三個分支的 cat")
    compare_paths(got["converted"], want["converted"], "三個分支的 cat（convert 之後）", ["cat"])


@check("cat_quantizer", 1, "cat([r, 常數, r])：常數不量化，重複的輸入只貼一次")
def test_cat_constant_and_repeat(seen, expected):
    got = value(seen, "constant_and_repeat")["prepared"]
    compare_observers(got, value(expected, "constant_and_repeat")["prepared"], "cat([r, 常數, r])")
