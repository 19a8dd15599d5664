"""Hidden checks of M02-3: scale / zero point, quantize and dequantize, equal to torchao's bit for bit.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
calculate_qparams
- Python floats or float64 arithmetic (``.item()``) → affine, symmetric (the last bit of the scale),
  per_channel (one value for many channels);
- the range not widened to include 0 → one_sided;
- no eps clamp, the default eps instead of the argument → zero_range, eps;
- the docstring's "min == max gives (1.0, 0)" → zero_range;
- round half up or away from zero instead of ``torch.round`` (half to even) → ties;
- one global min / max for every channel → per_channel;
- symmetric divides by ``quant_max``, or its zero point is the range's midpoint → symmetric
  ([-128, 127] divides by 127.5; zero point 0 on signed ranges);
- the zero point from the max end → zero_range, ties;
- int8 [-128, 127] everywhere → affine (uint8 and 4-bit ranges), symmetric ([-8, 7]).
quantize_dequantize
- ``x / scale`` instead of ``x * (1 / scale)``, zero point added before rounding, Python ``round``,
  ``floor(x + 0.5)`` → near_ties;
- clamped to the dtype's range instead of [quant_min, quant_max], or cast before clamping (wraps
  around) → clamp (4-bit [-8, 7] inside int8);
- a float tensor returned from quantize → seeded (dtype compared);
- dequantize subtracts in int8 / uint8 (wraps), distributes the product, or computes in float64 →
  dequantize (every integer of the range).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, value


def _rows(seen: dict[str, Any], expected: dict[str, Any], case: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    got, want = value(seen, case), value(expected, case)
    if not isinstance(got, list) or len(got) != len(want):
        raise Fail("證據格式不對")
    return list(zip(got, want, strict=True))


def _first_difference(got: list[Any], want: list[Any]) -> int | None:
    if len(got) != len(want):
        return -1
    return next((i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b or type(a) is not type(b)), None)


def compare_qparams(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Every row's (scale, zero point) equal to the observer's, exactly."""
    for got, want in _rows(seen, expected, case):
        where = f"{want['label']}（observer 記下 min_val={want['min_val']}, max_val={want['max_val']}）"
        if len(want["min_val"]) > 4:
            where = f"{want['label']}（{len(want['min_val'])} 個 channel）"
        mine, torchao = got["mine"], want["torchao"]
        for field in ("scale", "zero_point"):
            i = _first_difference(mine[field], torchao[field])
            if i == -1:
                raise Fail(f"{where}：{field} 預期 {len(torchao[field])} 個值，看到 {len(mine[field])} 個")
            if i is not None:
                channel = f"第 {i} 個 channel 的 " if len(torchao[field]) > 1 else ""
                raise Fail(
                    f"{where}：{channel}{field} 預期 {torchao[field][i]!r}（observer 的 calculate_qparams），"
                    f"看到 {mine[field][i]!r}"
                )


def compare_values(seen: dict[str, Any], expected: dict[str, Any], case: str, what: str) -> None:
    """Every element equal to the op's output, exactly."""
    for got, want in _rows(seen, expected, case):
        mine, torchao = got["mine"], want["torchao"]
        i = _first_difference(mine, torchao)
        if i == -1:
            raise Fail(f"{want['label']}：{what} 預期 {len(torchao)} 個值，看到 {len(mine)} 個")
        if i is not None:
            wrong = sum(1 for a, b in zip(mine, torchao, strict=True) if a != b)
            raise Fail(
                f"{want['label']}：輸入 {want['x'][i]!r} 的 {what} 預期 {torchao[i]!r}，看到 {mine[i]!r}"
                f"（{len(torchao)} 個值裡有 {wrong} 個不同）"
            )


# --- calculate_qparams --------------------------------------------------------------------------


@check(
    "calculate_qparams",
    1,
    "affine：int8、uint8、4 bit 範圍上的亂數資料，scale 與 zero point 和 MinMaxObserver 完全相等",
)
def test_affine(seen, expected):
    compare_qparams(seen, expected, "affine")


@check(
    "calculate_qparams",
    1,
    "symmetric：[-128,127]、[-127,127]、[-8,7] 上的亂數資料（除以 (qmax − qmin) / 2，zero point 0）",
)
def test_symmetric(seen, expected):
    compare_qparams(seen, expected, "symmetric")


@check("calculate_qparams", 1, "全 0 與極小範圍：scale 不小於 eps")
def test_zero_range(seen, expected):
    compare_qparams(seen, expected, "zero_range")


@check("calculate_qparams", 1, "單一值、只有負值、只有正值：範圍先擴大到包含 0")
def test_one_sided(seen, expected):
    compare_qparams(seen, expected, "one_sided")


@check("calculate_qparams", 1, "min / scale 剛好是 .5：zero point 用 torch.round（四捨六入五成雙）")
def test_round_half_even(seen, expected):
    compare_qparams(seen, expected, "ties")


@check("calculate_qparams", 1, "per-channel：每個 channel 一組 scale 與 zero point（含全 0 與單邊的 channel）")
def test_per_channel(seen, expected):
    compare_qparams(seen, expected, "per_channel")


@check("calculate_qparams", 1, "eps 參數：XNNPACKQuantizer 的 observer 用 eps = 2**-12")
def test_eps_argument(seen, expected):
    compare_qparams(seen, expected, "eps")


# --- quantize / dequantize ----------------------------------------------------------------------


@check("quantize_dequantize", 1, "quantize：亂數資料上和 quantize_per_tensor 的結果與 dtype 相同")
def test_quantize_seeded(seen, expected):
    compare_values(seen, expected, "seeded", "quantize 結果")


@check(
    "quantize_dequantize", 1, "quantize：剛好在兩個整數中間附近的值（x * (1 / scale)、torch.round、再加 zero point）"
)
def test_quantize_near_ties(seen, expected):
    compare_values(seen, expected, "near_ties", "quantize 結果")


@check("quantize_dequantize", 1, "quantize：超出範圍的值夾到 [quant_min, quant_max]，不是 dtype 的範圍，也不會溢位")
def test_quantize_clamp(seen, expected):
    compare_values(seen, expected, "clamp", "quantize 結果")


@check("quantize_dequantize", 1, "dequantize：每個整數都和 dequantize_per_tensor 的 float32 結果相同")
def test_dequantize(seen, expected):
    compare_values(seen, expected, "dequantize", "dequantize 結果")
