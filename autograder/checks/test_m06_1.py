"""Hidden checks of M06-1: SQNR in dB (whole tensor and per slice), and the per-layer SQNR table.

What a student who half-understood SQNR could bake in, and the hidden case that refutes it:

sqnr
- a power ratio in 20·log10 (amplitude formula): ``noise`` (every value twice too large);
- the signal is the variance, or the test tensor's power: ``offset`` (large mean), ``scaled`` (0.8 × reference);
- Python division, so identical tensors raise instead of giving ``inf``: ``exact`` (whole and per slice);
- "per slice" means summing that dim away, or the signal of the whole tensor with a slice's noise:
  ``exact`` and ``slices`` (dims 0, 1 and -1, an outlier channel);
- arithmetic in the inputs' own dtype (bfloat16, float16) or in float32: ``dtypes`` (two float64 tensors near
  a large offset whose difference float32 rounds away);
- a tensor (or a tuple, or a list of 0-d tensors) is as good as a float or a list of floats: ``types``.

layer_sqnr
- every call_function node is a layer (q/dq, inputs, constants too), or only the ops with weights:
  ``branches``, ``outlier``, ``partial``;
- every op outputs a tensor (split outputs a list): ``branches``;
- one input (``prepared(inputs)``): ``branches`` has two;
- one SQNR per image, averaged; reference and test swapped: ``branches``, ``outlier``;
- Python division (identical layers raise instead of ``inf``): ``partial``;
- editing the graphs it is handed (adding outputs to them) is harmless: every case notes whether the call
  left ``prepared`` and ``converted`` as they were.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, expect, value

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
        expect(isinstance(got, list), f"{where}：預期一個 list（每個 slice 一個 SQNR），看到 {_text(got)}")
        expect(len(got) == len(want), f"{where}：預期 {len(want)} 個 SQNR（每個 slice 一個），看到 {len(got)} 個")
        for index, (mine, theirs) in enumerate(zip(got, want, strict=True)):
            if not _close(mine, theirs):
                raise Fail(f"{where}：第 {index} 個 slice 的 SQNR 預期 {_text(theirs)}，看到 {_text(mine)}")
        return
    if not _close(got, want):
        raise Fail(f"{where}：預期 {_text(want)}，看到 {_text(got)}")


def compare_case(seen: Any, expected: Any, case: str, where: str, parts: dict[str, str] | None = None) -> None:
    got, want = value(seen, case), value(expected, case)
    if parts is None:
        compare_db(got, want, where)
        return
    for key, label in parts.items():
        expect(isinstance(got, dict), f"{where}：證據格式不對")
        compare_db(got.get(key), want[key], f"{where}，{label}")


# --- sqnr ----------------------------------------------------------------------------------------


@check("sqnr", 1, "整個 tensor 的 SQNR：10·log10(Σ reference² / Σ (reference − test)²)，三種雜訊大小")
def test_sqnr_whole(seen, expected):
    got, want = value(seen, "noise"), value(expected, "noise")
    expect(isinstance(got, list) and len(got) == len(want), "雜訊的例子：證據格式不對")
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
        {"copy": "sqnr(x, x.clone())", "per_channel": "只有一個 channel 完全相同，dim=0"},
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
    expect(isinstance(got, dict), "回傳型別的例子：證據格式不對")
    for key, (call, want) in TYPE_WORDS.items():
        kind = got.get(key)
        if kind != want:
            words = "Python float" if want == "float" else "Python float 的 list（每個 slice 一個 float(...)）"
            raise Fail(f"{call} 應該回傳 {words}，你回傳的是 {kind}")


# --- layer_sqnr ----------------------------------------------------------------------------------


def _table(evidence: Any, case: str, part: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    result = value(evidence, case)
    if part is not None:
        expect(isinstance(result, dict) and part in result, "證據格式不對")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("table"), dict), "證據格式不對")
    return result["table"], result.get("kinds", {})


def compare_layers(seen: Any, expected: Any, case: str, where: str, part: str | None = None) -> None:
    """The same layers (names), then the same SQNR for each."""
    got, kinds = _table(seen, case, part)
    want, _ = _table(expected, case, part)
    extra = [name for name in got if name not in want]
    if extra:
        described = "、".join(
            f"{name}（{KIND_WORDS.get(kinds.get(name, ''), '圖上沒有這個 node')}）" for name in extra[:4]
        )
        raise Fail(f"{where}：多了 {described}；只比較兩張圖上都有、輸出是 tensor 的 op（不含 q/dq）")
    missing = [name for name in want if name not in got]
    if missing:
        raise Fail(f"{where}：少了 {'、'.join(missing[:6])}（預期的層：{'、'.join(want)}）")
    for name, number in want.items():
        if not _close(got[name], number):
            raise Fail(f"{where}：{name} 的 SQNR 預期 {_text(number)}，看到 {_text(got[name])}")


@check("layer_sqnr", 1, "兩個輸入、add、split（輸出是 list）、cat：該比較的層一個不多、一個不少，SQNR 正確")
def test_layers_branches(seen, expected):
    compare_layers(seen, expected, "branches", "兩個輸入的模型（add、split、cat、max_pool2d、linear）")


@check("layer_sqnr", 1, "一個 channel 有 outlier 的模型：per-tensor weight 的每層 SQNR")
def test_layers_outlier_per_tensor(seen, expected):
    compare_layers(seen, expected, "outlier", "outlier 模型（per-tensor weight）", "per_tensor")


@check("layer_sqnr", 1, "同一個模型：per-channel weight 的每層 SQNR")
def test_layers_outlier_per_channel(seen, expected):
    compare_layers(seen, expected, "outlier", "outlier 模型（per-channel weight）", "per_channel")


@check("layer_sqnr", 1, "只量化最後一個 conv：前面沒量化的層 SQNR 是 inf")
def test_layers_partial(seen, expected):
    compare_layers(seen, expected, "partial", "只量化最後一個 conv 的模型")


@check("layer_sqnr", 1, "只讀不改：傳進來的 prepared 與 converted 圖，呼叫之後和之前一樣")
def test_layers_leave_graphs(seen, expected):
    for case, part in (("branches", None), ("outlier", "per_tensor"), ("outlier", "per_channel"), ("partial", None)):
        result = value(seen, case)
        if part is not None:
            expect(isinstance(result, dict) and part in result, "證據格式不對")
            result = result[part]
        expect(isinstance(result, dict) and isinstance(result.get("changed"), list), "證據格式不對")
        if result["changed"]:
            names = " 與 ".join(result["changed"])
            raise Fail(
                f"layer_sqnr 改了傳進來的 {names} 圖（node 或它們的引數變了）：呼叫的人之後還要用這兩張圖，"
                "要改圖請先 copy.deepcopy 一份，或用 Interpreter 記下每個 node 的輸出"
            )
