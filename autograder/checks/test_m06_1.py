"""Hidden checks of M06-1: SQNR in dB (whole tensor and per slice), and the per-layer SQNR table.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m06_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, expect, raised, value
from selfcheck import diagnosis
from selfcheck.public.m06_1 import (
    all_right,
    amplitude_ratio,
    averaged_per_sample,
    count_factor,
    db_pairs,
    divided_by_zero,
    extra_layers,
    graphs_changed,
    inf_made_finite,
    layer_formula,
    list_lengths_differ,
    missing_layers,
    named_like_qdq,
    not_decibels,
    same_db,
    sign_flipped,
    some_wrong,
    swapped_roles,
)

RELATIVE = 1e-4
ABSOLUTE = 1e-4
"""SQNRs agree within 1e-4 relative or 1e-4 dB: float32 and float64 arithmetic both pass."""

KIND_WORDS = {
    "placeholder": "模型的輸入（placeholder）",
    "get_attr": "常數（get_attr）",
    "call_module": "call_module",
    "output": "output",
    "q/dq": "quantize / dequantize",
    "op": "op",
}


def _text(number: Any) -> str:
    if isinstance(number, float):
        return f"{number:.4f} dB"
    if number in ("inf", "-inf", "nan"):
        return {"inf": "inf（完全相同）", "-inf": "-inf", "nan": "nan"}[number]
    return repr(number)


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=RELATIVE, abs_tol=ABSOLUTE)
    return got == want


def compare_db(got: Any, want: Any, where: str) -> None:
    """One SQNR, or a list of them (one per slice)."""
    if isinstance(want, list):
        expect(isinstance(got, list), f"{where}：應該回傳 list（每個 slice 一個 SQNR），你回傳的是 {_text(got)}")
        expect(len(got) == len(want), f"{where}：每個 slice 一個 SQNR，應該有 {len(want)} 個，你的有 {len(got)} 個")
        for index, (mine, theirs) in enumerate(zip(got, want, strict=True)):
            if not _close(mine, theirs):
                raise Fail(f"{where}：第 {index} 個 slice 的 SQNR 應該是 {_text(theirs)}，你的是 {_text(mine)}")
        return
    if not _close(got, want):
        raise Fail(f"{where}：SQNR 應該是 {_text(want)}，你的是 {_text(got)}")


def compare_case(seen: Any, expected: Any, case: str, where: str, parts: dict[str, str] | None = None) -> None:
    got, want = value(seen, case), value(expected, case)
    if parts is None:
        compare_db(got, want, where)
        return
    for key, label in parts.items():
        expect(isinstance(got, dict), f"{where}：收到的結果不是預期的格式")
        compare_db(got.get(key), want[key], f"{where}，{label}")


# --- sqnr ----------------------------------------------------------------------------------------


@check("sqnr", 1, "整個 tensor 的 SQNR：10·log10(Σ reference² / Σ (reference − test)²)，三種雜訊大小")
def test_sqnr_whole(seen, expected):
    got, want = value(seen, "noise"), value(expected, "noise")
    expect(isinstance(got, list) and len(got) == len(want), "雜訊的例子：收到的結果不是預期的格式")
    for index, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        compare_db(mine, theirs, f"第 {index + 1} 個例子（reference 加上高斯雜訊）")


@check("sqnr", 1, "訊號是 reference 的功率（不是變異數、不是 test 的功率）")
def test_sqnr_signal_power(seen, expected):
    compare_case(seen, expected, "offset", "平均值很大的非負訊號（像 relu 加上 bias）與它量化後的值")
    compare_case(seen, expected, "scaled", "test = 0.8 × reference：訊號要用 reference 的功率")


@check("sqnr", 1, "完全相同時是 inf，逐個 slice 時也一樣")
def test_sqnr_exact(seen, expected):
    compare_case(
        seen,
        expected,
        "exact",
        "完全相同的 tensor",
        {"copy": "sqnr(x, x.clone())", "per_channel": "一個 channel 完全相同、一個 channel 兩邊都全是 0，dim=0"},
    )


@check("sqnr", 1, "dim 給定時，每個 slice（沿 dim 的每個 index）一個 SQNR：dim=0、1、-1")
def test_sqnr_slices(seen, expected):
    compare_case(
        seen,
        expected,
        "slices",
        "有一個 outlier channel 的 tensor",
        {
            "weight_dim0": "conv weight，dim=0",
            "weight_whole": "conv weight，整個 tensor",
            "activation_dim1": "activation (N, C, H, W)，dim=1",
            "features_last": "feature 在最後一維，dim=-1",
        },
    )


@check("sqnr", 1, "不同 dtype（bfloat16、float16、float64）一律先轉成 float64 再算")
def test_sqnr_dtypes(seen, expected):
    compare_case(
        seen,
        expected,
        "dtypes",
        "不同 dtype",
        {
            "bfloat16": "bfloat16 的 reference 與 float32 的 test",
            "float16": "float64 的 reference 與 float16 的 test",
            "float64_close": "兩個很大、只差一點點的 float64 tensor（float32 分不出這一點點：要在 float64 裡算）",
        },
    )


TYPE_WORDS = {
    "whole": ("sqnr(reference, test)", "float"),
    "per_slice": ("sqnr(reference, test, dim=0)", "list[float]"),
    "last_dim": ("sqnr(reference, test, dim=-1)", "list[float]"),
}


@check("sqnr", 1, "回傳的型別：dim=None 是 Python float，給了 dim 是 Python float 的 list")
def test_sqnr_types(seen, expected):
    got = value(seen, "types")
    expect(isinstance(got, dict), "回傳型別的例子：收到的結果不是預期的格式")
    for key, (call, want) in TYPE_WORDS.items():
        kind = got.get(key)
        if kind != want:
            words = "Python float" if want == "float" else "Python float 的 list（每個 slice 一個 float(...)）"
            raise Fail(f"{call} 應該回傳 {words}，你回傳的是 {kind}")


# --- layer_sqnr ----------------------------------------------------------------------------------


def _table(evidence: Any, case: str, part: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    result = value(evidence, case)
    if part is not None:
        expect(isinstance(result, dict) and part in result, "收到的結果不是預期的格式")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("table"), dict), "收到的結果不是預期的格式")
    return result["table"], result.get("kinds", {})


def compare_layers(
    seen: Any, expected: Any, case: str, where: str, part: str | None = None, *, judge: str = "values"
) -> None:
    """One idea of the table (issue 50: one mistake costs once).

    ``judge="names"``: the same layers, one more or one fewer fails. ``"values"``: the SQNR of every layer of the
    key the table holds. ``"inf"``: which of those layers are ``inf`` (left in fp32). The last two pass over
    layers the table adds or leaves out (``"names"`` judges those) but need at least one of the key's layers.
    """
    got, kinds = _table(seen, case, part)
    want, _ = _table(expected, case, part)
    if judge == "names":
        extra = [name for name in got if name not in want]
        if extra:
            described = "、".join(
                f"{name}（{KIND_WORDS.get(kinds.get(name, ''), '圖上沒有這個 node')}）" for name in extra[:4]
            )
            raise Fail(
                f"{where}：表裡多了 {described}。表裡只放兩張圖上都有、輸出是 tensor 的 call_function op"
                "（不含 quantize / dequantize）"
            )
        missing = [name for name in want if name not in got]
        if missing:
            raise Fail(f"{where}：表裡少了 {'、'.join(missing[:6])}（應該有的層是 {'、'.join(want)}）")
        return
    shared = [name for name in want if name in got]
    expect(bool(shared), f"{where}：表裡沒有任何一個該比較的層（應該有的層是 {'、'.join(want)}）")
    for name in shared:
        number, mine = want[name], got[name]
        if judge == "inf" and (mine == "inf") != (number == "inf"):
            state = "inf（沒有量化，兩邊完全相同）" if number == "inf" else "有限的值（量化過）"
            raise Fail(f"{where}：{name} 的 SQNR 應該是{state}，你的是 {_text(mine)}")
        if judge == "values" and not _close(mine, number):
            raise Fail(f"{where}：{name} 的 SQNR 應該是 {_text(number)}，你的是 {_text(mine)}")


@check("layer_sqnr", 1, "兩個輸入、add、split（輸出是 list）、cat：該比較的層一個不多、一個不少")
def test_layers_branches(seen, expected):
    compare_layers(seen, expected, "branches", "兩個輸入的模型（add、split、cat、max_pool2d、linear）", judge="names")


@check("layer_sqnr", 1, "一個 channel 有 outlier 的模型：per-tensor weight 的每層 SQNR")
def test_layers_outlier_per_tensor(seen, expected):
    compare_layers(seen, expected, "outlier", "outlier 模型（per-tensor weight）", "per_tensor")


@check("layer_sqnr", 1, "同一個模型：per-channel weight 的每層 SQNR")
def test_layers_outlier_per_channel(seen, expected):
    compare_layers(seen, expected, "outlier", "outlier 模型（per-channel weight）", "per_channel")


@check("layer_sqnr", 1, "只量化最後一個 conv：前面沒量化的層 SQNR 是 inf")
def test_layers_partial(seen, expected):
    compare_layers(seen, expected, "partial", "只量化最後一個 conv 的模型", judge="inf")


@check("layer_sqnr", 1, "只讀不改：傳進來的 prepared 與 converted 圖，呼叫之後和之前一樣")
def test_layers_leave_graphs(seen, expected):
    # a case that stopped has nothing to say about the graphs (its own check says why); at least one must answer
    judged, stopped = 0, None
    for case, part in (("branches", None), ("outlier", "per_tensor"), ("outlier", "per_channel"), ("partial", None)):
        try:
            result = value(seen, case)
        except Fail as problem:
            stopped = stopped or problem
            continue
        if part is not None:
            expect(isinstance(result, dict) and part in result, "收到的結果不是預期的格式")
            result = result[part]
        expect(isinstance(result, dict) and isinstance(result.get("changed"), list), "收到的結果不是預期的格式")
        judged += 1
        if result["changed"]:
            names = " 與 ".join(result["changed"])
            raise Fail(
                f"layer_sqnr 改了傳進來的 {names} 圖（node 或它們的引數變了）：呼叫的人之後還要用這兩張圖，"
                "要改圖請先 copy.deepcopy 一份，或用 Interpreter 記下每個 node 的輸出"
            )
    if not judged and stopped is not None:
        raise stopped


# --- what a wrong answer probably believed (the records: selfcheck/public/m06_1.py) ---------------------

SQNR_VALUES = ("test_sqnr_whole", "test_sqnr_signal_power", "test_sqnr_exact", "test_sqnr_slices", "test_sqnr_dtypes")
WHOLE_CASES = ("noise", "offset", "scaled")


def _whole_right(seen: Any, expected: Any) -> bool:
    """The SQNRs of whole tensors (Gaussian noise, a large mean, a scaled copy, an outlier weight) are right."""
    return all_right(seen, expected, *WHOLE_CASES) and same_db(
        diagnosis.value(seen, "slices", "weight_whole"), diagnosis.value(expected, "slices", "weight_whole")
    )


def _at(evidence: Any, case: str, *path: Any) -> Any:
    return diagnosis.value(evidence, case, *path)


@detects("sqnr", "returns_tensor", explains=("test_sqnr_types",))
def sqnr_returns_tensor(seen: Any, expected: Any) -> bool:
    got, want = _at(seen, "types"), _at(expected, "types")
    return isinstance(got, dict) and any(got.get(key) != kind for key, kind in want.items())


@detects("sqnr", "python_division", explains=("test_sqnr_exact", "test_sqnr_types"))
def sqnr_python_division(seen: Any, expected: Any) -> bool:
    return divided_by_zero(seen, expected)


@detects("sqnr", "zero_over_zero", explains=("test_sqnr_exact",))
def sqnr_zero_over_zero(seen: Any, expected: Any) -> bool:
    """nan where the key has inf (an all-zero slice: 0 / 0), every other SQNR right."""
    pairs = db_pairs(seen, expected)
    return any(got == "nan" and want == "inf" for _, got, want in pairs) and all(
        same_db(got, want) for _, got, want in pairs if not (got == "nan" and want == "inf")
    )


@detects("sqnr", "finite_when_identical", explains=("test_sqnr_exact",))
def sqnr_finite_when_identical(seen: Any, expected: Any) -> bool:
    return inf_made_finite(seen, expected, "exact")


@detects("sqnr", "amplitude_formula", explains=SQNR_VALUES)
def sqnr_amplitude_formula(seen: Any, expected: Any) -> bool:
    return amplitude_ratio(seen, expected)


@detects("sqnr", "ratio_inverted", explains=SQNR_VALUES)
def sqnr_ratio_inverted(seen: Any, expected: Any) -> bool:
    return sign_flipped(seen, expected)


@detects("sqnr", "not_decibels", explains=SQNR_VALUES)
def sqnr_not_decibels(seen: Any, expected: Any) -> bool:
    return not_decibels(seen, expected)


@detects("sqnr", "mean_vs_sum", explains=SQNR_VALUES)
def sqnr_mean_vs_sum(seen: Any, expected: Any) -> bool:
    return count_factor(seen, expected)


@detects("sqnr", "signal_variance", explains=SQNR_VALUES)
def sqnr_signal_variance(seen: Any, expected: Any) -> bool:
    """A signal with a large mean comes out far too low, while a zero-mean one scaled down is about right.

    The signal is part of the formula every SQNR value follows: the value checks all fail with it (as with
    ``amplitude_formula`` and the others above), while the types stay right."""
    got, want = _at(seen, "offset"), _at(expected, "offset")
    scaled, scaled_want = _at(seen, "scaled"), _at(expected, "scaled")
    return (
        isinstance(got, float)
        and isinstance(want, float)
        and got < want - 3
        and isinstance(scaled, float)
        and abs(scaled - scaled_want) < 1
    )


@detects("sqnr", "test_power", explains=SQNR_VALUES)
def sqnr_test_power(seen: Any, expected: Any) -> bool:
    """test = 0.8 × reference: a signal read from test is 0.64 times the reference's power, 1.94 dB less.

    The signal is part of the formula every SQNR value follows: the value checks all fail with it."""
    got, want = _at(seen, "scaled"), _at(expected, "scaled")
    return isinstance(got, float) and isinstance(want, float) and abs(got - want - 10 * math.log10(0.64)) < 0.02


@detects("sqnr", "slices_on_dim0", explains=("test_sqnr_slices", "test_sqnr_exact"))
def sqnr_slices_on_dim0(seen: Any, expected: Any) -> bool:
    """Right along dim 0, wrong (usually another length) along dim 1 or -1."""
    others = ("activation_dim1", "features_last")
    return _lists_match(seen, expected, "slices", "weight_dim0") and any(
        not _lists_match(seen, expected, "slices", name) for name in others
    )


def _lists_match(seen: Any, expected: Any, case: str, name: str) -> bool:
    got, want = _at(seen, case, name), _at(expected, case, name)
    return (
        isinstance(got, list)
        and isinstance(want, list)
        and len(got) == len(want)
        and all(same_db(g, w) for g, w in zip(got, want, strict=True))
    )


@detects("sqnr", "reduces_dim", explains=("test_sqnr_slices", "test_sqnr_exact"))
def sqnr_reduces_dim(seen: Any, expected: Any) -> bool:
    return list_lengths_differ(seen, expected, "exact", "slices")


@detects("sqnr", "slice_uses_whole_signal", explains=("test_sqnr_slices", "test_sqnr_exact"))
def sqnr_slice_uses_whole_signal(seen: Any, expected: Any) -> bool:
    """Whole tensors right; per slice the right number of SQNRs, some of them wrong."""
    names = ("weight_dim0", "activation_dim1", "features_last")
    lengths_right = all(
        isinstance(_at(seen, "slices", name), list)
        and len(_at(seen, "slices", name)) == len(_at(expected, "slices", name))
        for name in names
    )
    return (
        _whole_right(seen, expected)
        and lengths_right
        and some_wrong(seen, expected, "slices", "exact")
        and all(got == "inf" for _, got, want in db_pairs(seen, expected, "exact", "slices") if want == "inf")
    )


@detects("sqnr", "float32_arithmetic", explains=("test_sqnr_dtypes",))
def sqnr_float32(seen: Any, expected: Any) -> bool:
    close = ("float64_close",)
    return (
        not same_db(_at(seen, "dtypes", *close), _at(expected, "dtypes", *close))
        and same_db(_at(seen, "dtypes", "bfloat16"), _at(expected, "dtypes", "bfloat16"))
        and _whole_right(seen, expected)
    )


@detects("sqnr", "input_dtype", explains=("test_sqnr_dtypes",))
def sqnr_input_dtype(seen: Any, expected: Any) -> bool:
    low = ("bfloat16", "float16")
    return any(not same_db(_at(seen, "dtypes", k), _at(expected, "dtypes", k)) for k in low) and _whole_right(
        seen, expected
    )


LAYER_VALUES = ("test_layers_outlier_per_tensor", "test_layers_outlier_per_channel")
"""The checks of each layer's SQNR (the layer list is ``test_layers_branches``'s, the inf of fp32 layers
``test_layers_partial``'s: issue 50, one mistake costs once)."""
LAYER_NAMES = ("test_layers_branches",)


@detects("layer_sqnr", "non_tensor_outputs", explains=("test_layers_branches",))
def layers_non_tensor_outputs(seen: Any, expected: Any) -> bool:
    return raised(seen, cases=("branches",), says="list") or raised(seen, cases=("branches",), says="tuple")


@detects("layer_sqnr", "one_input_only", explains=("test_layers_branches",))
def layers_one_input_only(seen: Any, expected: Any) -> bool:
    """The two-input model raised for want of an argument, the one-input models did not."""
    missing = any(
        words in diagnosis.error_message(seen, "branches")
        for words in ("positional argument", "required argument", "missing", "not enough values")
    )
    return missing and not any(case != "branches" for case in diagnosis.errors(seen))


@detects("layer_sqnr", "layer_python_division", explains=("test_layers_partial",))
def layers_python_division(seen: Any, expected: Any) -> bool:
    return divided_by_zero(seen, expected)


@detects("layer_sqnr", "lists_non_ops", explains=LAYER_NAMES)
def layers_lists_non_ops(seen: Any, expected: Any) -> bool:
    return extra_layers(seen, expected)


@detects("layer_sqnr", "qdq_by_name", explains=LAYER_NAMES)
def layers_qdq_by_name(seen: Any, expected: Any) -> bool:
    return named_like_qdq(seen, expected)


@detects("layer_sqnr", "weighted_layers_only", explains=LAYER_NAMES)
def layers_weighted_only(seen: Any, expected: Any) -> bool:
    return missing_layers(seen, expected)


@detects("layer_sqnr", "modifies_graphs", explains=("test_layers_leave_graphs",))
def layers_modify_graphs(seen: Any, expected: Any) -> bool:
    return graphs_changed(seen, expected)


@detects("layer_sqnr", "layer_formula", explains=LAYER_VALUES)
def layers_formula(seen: Any, expected: Any) -> bool:
    return layer_formula(seen, expected)


@detects("layer_sqnr", "swapped_roles", explains=LAYER_VALUES)
def layers_swapped(seen: Any, expected: Any) -> bool:
    """Every finite SQNR a little off: the value checks fail; the layer list and which layers are inf stay
    right (issue 50: one mistake costs once)."""
    return swapped_roles(seen, expected)


@detects("layer_sqnr", "per_sample_mean", explains=LAYER_VALUES)
def layers_per_sample_mean(seen: Any, expected: Any) -> bool:
    return averaged_per_sample(seen, expected)
