"""Hidden checks of M02-3: scale / zero point, quantize and dequantize, equal to torchao's bit for bit.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m02_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, value
from selfcheck.public import m02_3 as evidence


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
                raise Fail(f"{where}：{field} 應該有 {len(torchao[field])} 個值，你的有 {len(mine[field])} 個")
            if i is not None:
                channel = f"第 {i} 個 channel 的 " if len(torchao[field]) > 1 else ""
                raise Fail(
                    f"{where}：{channel}{field} 應該是 {torchao[field][i]!r}（observer 的 calculate_qparams() 算出的），"
                    f"你的是 {mine[field][i]!r}"
                )


def compare_values(seen: dict[str, Any], expected: dict[str, Any], case: str, what: str) -> None:
    """Every element equal to the op's output, exactly."""
    for got, want in _rows(seen, expected, case):
        mine, torchao = got["mine"], want["torchao"]
        i = _first_difference(mine, torchao)
        if i == -1:
            raise Fail(f"{want['label']}：{what.strip()} 應該有 {len(torchao)} 個值，你的有 {len(mine)} 個")
        if i is not None:
            wrong = sum(1 for a, b in zip(mine, torchao, strict=True) if a != b)
            raise Fail(
                f"{want['label']}：輸入 {want['x'][i]!r} 的{what}應該是 {torchao[i]!r}，你的是 {mine[i]!r}"
                f"（{len(torchao)} 個值裡有 {wrong} 個和 op 的不同）"
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
    compare_values(seen, expected, "seeded", " quantize 結果")


@check(
    "quantize_dequantize", 1, "quantize：剛好在兩個整數中間附近的值（x * (1 / scale)、torch.round、再加 zero point）"
)
def test_quantize_near_ties(seen, expected):
    compare_values(seen, expected, "near_ties", " quantize 結果")


@check("quantize_dequantize", 1, "quantize：超出範圍的值夾到 [quant_min, quant_max]，不是 dtype 的範圍，也不會溢位")
def test_quantize_clamp(seen, expected):
    compare_values(seen, expected, "clamp", " quantize 結果")


@check("quantize_dequantize", 1, "dequantize：每個整數都和 dequantize_per_tensor 的 float32 結果相同")
def test_dequantize(seen, expected):
    compare_values(seen, expected, "dequantize", " dequantize 結果")


# --- misconceptions: what recognises each (the records, with their words, are selfcheck/public/m02_3.py) ----

ZERO_POINTS = ("test_round_half_even", "test_affine", "test_one_sided", "test_per_channel")
SYMMETRIC = ("test_symmetric", "test_one_sided", "test_per_channel")
FLAT = ("test_zero_range", "test_one_sided", "test_per_channel", "test_eps_argument")
QUANTIZE = ("test_quantize_seeded", "test_quantize_near_ties", "test_quantize_clamp")


@detects("calculate_qparams", "python_floats")
def python_floats(seen: Any, expected: Any) -> bool:
    return evidence.one_value_for_channels(seen, expected)


@detects("calculate_qparams", "global_min_max", explains=("test_per_channel",))
def global_min_max(seen: Any, expected: Any) -> bool:
    return evidence.channels_share_range(seen, expected)


@detects("calculate_qparams", "docstring_equal_min_max", explains=FLAT)
def docstring_equal_min_max(seen: Any, expected: Any) -> bool:
    return evidence.unit_scale_when_flat(seen, expected)


@detects("calculate_qparams", "no_eps_clamp", explains=FLAT)
def no_eps_clamp(seen: Any, expected: Any) -> bool:
    return evidence.no_floor(seen, expected)


@detects("calculate_qparams", "ignores_eps_argument", explains=("test_eps_argument",))
def ignores_eps_argument(seen: Any, expected: Any) -> bool:
    return evidence.default_eps(seen, expected)


@detects("calculate_qparams", "zero_point_from_max", explains=(*FLAT, *ZERO_POINTS))
def zero_point_from_max(seen: Any, expected: Any) -> bool:
    return evidence.zero_point_from_max(seen, expected)


@detects("calculate_qparams", "ignores_quant_range")
def ignores_quant_range(seen: Any, expected: Any) -> bool:
    return evidence.only_int8_right(seen, expected)


@detects("calculate_qparams", "symmetric_divides_by_qmax", explains=SYMMETRIC)
def symmetric_divides_by_qmax(seen: Any, expected: Any) -> bool:
    return evidence.symmetric_divisor(seen, expected)


@detects("calculate_qparams", "symmetric_zero_point_midpoint", explains=SYMMETRIC)
def symmetric_zero_point_midpoint(seen: Any, expected: Any) -> bool:
    return evidence.symmetric_zero_point(seen, expected)


@detects("calculate_qparams", "range_without_zero", explains=("test_one_sided", "test_per_channel", "test_zero_range"))
def range_without_zero(seen: Any, expected: Any) -> bool:
    return evidence.narrower_range(seen, expected)


@detects("calculate_qparams", "rounds_after_quant_min", explains=ZERO_POINTS)
def rounds_after_quant_min(seen: Any, expected: Any) -> bool:
    return evidence.rounds_after_quant_min(seen, expected)


@detects("calculate_qparams", "round_half_away", explains=ZERO_POINTS)
def round_half_away(seen: Any, expected: Any) -> bool:
    return evidence.rounds_half_away(seen, expected)


@detects("calculate_qparams", "round_half_up", explains=ZERO_POINTS)
def round_half_up(seen: Any, expected: Any) -> bool:
    return evidence.rounds_half_up(seen, expected)


@detects("calculate_qparams", "float64_arithmetic")
def float64_arithmetic(seen: Any, expected: Any) -> bool:
    return evidence.last_bit(seen, expected)


@detects("quantize_dequantize", "quantize_returns_float", explains=QUANTIZE)
def quantize_returns_float(seen: Any, expected: Any) -> bool:
    return evidence.quantize_type_error(seen, expected)


@detects("quantize_dequantize", "dequantize_float64", explains=("test_dequantize",))
def dequantize_float64(seen: Any, expected: Any) -> bool:
    return evidence.dequantize_float64(seen, expected)


@detects("quantize_dequantize", "quantize_cast_then_clamp", explains=QUANTIZE)
def quantize_cast_then_clamp(seen: Any, expected: Any) -> bool:
    return evidence.wraps_around(seen, expected)


@detects("quantize_dequantize", "quantize_clamps_to_dtype", explains=QUANTIZE)
def quantize_clamps_to_dtype(seen: Any, expected: Any) -> bool:
    return evidence.dtype_range(seen, expected)


@detects("quantize_dequantize", "quantize_zero_point_before_round", explains=QUANTIZE)
def quantize_zero_point_before_round(seen: Any, expected: Any) -> bool:
    return evidence.zero_point_before_rounding(seen, expected)


@detects("quantize_dequantize", "quantize_float32_reciprocal", explains=QUANTIZE)
def quantize_float32_reciprocal(seen: Any, expected: Any) -> bool:
    return evidence.reciprocal_in_float32(seen, expected)


@detects("quantize_dequantize", "quantize_divides", explains=QUANTIZE)
def quantize_divides(seen: Any, expected: Any) -> bool:
    return evidence.divides_by_scale(seen, expected)


@detects("quantize_dequantize", "quantize_uses_python_round", explains=QUANTIZE)
def quantize_uses_python_round(seen: Any, expected: Any) -> bool:
    return evidence.rounds_in_float64(seen, expected)


@detects("quantize_dequantize", "quantize_round_half_up", explains=QUANTIZE)
def quantize_round_half_up(seen: Any, expected: Any) -> bool:
    return evidence.quantize_rounds_half_up(seen, expected)


@detects("quantize_dequantize", "dequantize_int_subtraction", explains=("test_dequantize",))
def dequantize_int_subtraction(seen: Any, expected: Any) -> bool:
    return evidence.dequantize_wraps(seen, expected)


@detects("quantize_dequantize", "dequantize_distributes", explains=("test_dequantize",))
def dequantize_distributes(seen: Any, expected: Any) -> bool:
    return evidence.dequantize_last_bits(seen, expected)
