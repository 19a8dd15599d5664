"""Hidden checks of M05-3: int8_linear matches the reference representation within 1 LSB.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m05_3.py``); their detectors are at the end of this module. (int8_linear receives
tensors: the grader replays only what it returns, so a change made to its arguments in place is not
visible to these checks.)
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, raised, value
from selfcheck import diagnosis
from selfcheck.public import m05_3 as public

LSB = 1
BEYOND = 2
"""How far beyond [-128, 127] the key's unclamped output must lie for its saturated value to be exact."""

WHERE = {
    "typical": "和校準資料相似的輸入",
    "saturating": "超出校準範圍的輸入（輸出會飽和）",
    "zero_point": "輸入的 zero point 是 -128",
    "batched": "3 維輸入 (2, 3, in_features)",
}


def _parts(seen: dict[str, Any], expected: dict[str, Any], case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    got, want = value(seen, case), value(expected, case)
    try:
        return got["result"], want["reference"]
    except (KeyError, TypeError):
        raise Fail(f"{WHERE[case]}：證據格式不對") from None


def check_close(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Same shape as the reference representation's output, every element within 1 LSB."""
    result, reference = _parts(seen, expected, case)
    where = WHERE[case]
    expect(
        result.get("shape") == reference["shape"],
        f"{where}：輸出的 shape 應該是 {reference['shape']}，你的是 {result.get('shape')}",
    )
    got, want = result.get("values"), reference["values"]
    expect(
        isinstance(got, list) and len(got) == len(want), f"{where}：輸出的元素個數和 reference representation 不一樣"
    )
    worst, index = max((abs(g - w), i) for i, (g, w) in enumerate(zip(got, want, strict=True)))
    if worst > LSB:
        far = sum(1 for g, w in zip(got, want, strict=True) if abs(g - w) > LSB)
        raise Fail(
            f"{where}：第 {index} 個元素應該是 {want[index]}（reference representation），你的是 {got[index]:g}；"
            f"{len(want)} 個元素裡有 {far} 個差超過 1 LSB"
        )
    check_saturated(got, reference, where)


def check_saturated(got: list[float], reference: dict[str, Any], where: str) -> None:
    """Where the key's unclamped output lies well beyond [-128, 127] and the key saturated, yours is exactly the bound."""
    unclamped = reference.get("unclamped")
    if not isinstance(unclamped, list) or len(unclamped) != len(got):
        return
    for i, (g, w, u) in enumerate(zip(got, reference["values"], unclamped, strict=True)):
        saturated = (u < -128 - BEYOND and w == -128) or (u > 127 + BEYOND and w == 127)
        if saturated and g != w:
            raise Fail(
                f"{where}：第 {i} 個元素在 clamp 之前約是 {u:.1f}，遠遠超出 int8 範圍，應該飽和在 {w}，"
                f"你的是 {g:g}；activation 的輸出範圍是 [-128, 127]"
            )


@check("int8_linear", 1, "回傳 int8 tensor，shape 和 reference representation 相同")
def test_dtype_shape(seen, expected):
    for case in ("typical", "batched"):
        result, reference = _parts(seen, expected, case)
        expect(result.get("dtype") == "int8", f"{WHERE[case]}：輸出的 dtype 應該是 int8，你的是 {result.get('dtype')}")
        expect(
            result.get("shape") == reference["shape"],
            f"{WHERE[case]}：輸出的 shape 應該是 {reference['shape']}，你的是 {result.get('shape')}",
        )


@check("int8_linear", 1, "和校準資料相似的輸入：與 reference representation 相差不超過 1 LSB")
def test_typical(seen, expected):
    check_close(seen, expected, "typical")


@check("int8_linear", 1, "輸出超出 int8 範圍時要飽和在 [-128, 127]，不能繞回")
def test_saturating(seen, expected):
    check_close(seen, expected, "saturating")


@check("int8_linear", 1, "輸入 zero point 為 -128：先轉成較寬的整數再減 zero point")
def test_zero_point(seen, expected):
    check_close(seen, expected, "zero_point")


@check("int8_linear", 1, "3 維輸入：對最後一維做 linear")
def test_batched(seen, expected):
    check_close(seen, expected, "batched")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m05_3.py) --------

VALUE_CHECKS = ("test_typical", "test_saturating", "test_zero_point", "test_batched")
TWO_D = ("typical", "saturating", "zero_point")


# the readers the public detectors use too (selfcheck/public/m05_3.py): one diagnosis in the notebook and here
_outputs = public.outputs


@detects("int8_linear", "weight_not_transposed")
def weight_not_transposed(seen: Any, expected: Any) -> bool:
    return public.shapes_mismatch(seen, expected) or raised(seen, ("RuntimeError",), cases=TWO_D, says="size mismatch")


@detects("int8_linear", "two_d_only", explains=("test_batched", "test_dtype_shape"))
def two_d_only(seen: Any, expected: Any) -> bool:
    """Only the 3-d input stops. test_dtype_shape asks the 3-d input's output shape, (2, 3, out_features): the
    same belief (linear only over a 2-d input) gets it wrong, whether it stops there or returns another shape."""
    return raised(seen, cases=("batched",)) and not raised(seen, cases=TWO_D)


@detects("int8_linear", "returns_not_int8", explains=("test_dtype_shape",))
def returns_not_int8(seen: Any, expected: Any) -> bool:
    return public.not_int8(seen, expected)


@detects("int8_linear", "forgets_output_scale", explains=VALUE_CHECKS)
def forgets_output_scale(seen: Any, expected: Any) -> bool:
    return public.output_scale_missing(seen, expected)


@detects("int8_linear", "narrow_output_range", explains=VALUE_CHECKS)
def narrow_output_range(seen: Any, expected: Any) -> bool:
    """Within 1 LSB everywhere, but where the key saturates well below the range the output stops at -127."""
    narrowed = False
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case, "result", "values"), diagnosis.value(expected, case, "reference")
        if not isinstance(got, list) or not isinstance(want, dict):
            continue
        values, unclamped = want.get("values"), want.get("unclamped")
        if (
            not isinstance(values, list)
            or not isinstance(unclamped, list)
            or not len(got) == len(values) == len(unclamped)
        ):
            return False
        if any(abs(g - w) > LSB for g, w in zip(got, values, strict=True)):
            return False
        narrowed = narrowed or any(
            u < -128 - BEYOND and w == -128 and g == -127 for g, w, u in zip(got, values, unclamped, strict=True)
        )
    return narrowed


@detects("int8_linear", "inverted_multiplier", explains=VALUE_CHECKS)
def inverted_multiplier(seen: Any, expected: Any) -> bool:
    return public.multiplier_inverted(seen, expected)


@detects("int8_linear", "bias_after_requant", explains=VALUE_CHECKS)
def bias_after_requant(seen: Any, expected: Any) -> bool:
    return public.bias_in_output_units(seen, expected)


@detects("int8_linear", "forgets_output_zero_point", explains=VALUE_CHECKS)
def forgets_output_zero_point(seen: Any, expected: Any) -> bool:
    return public.output_zero_point_missing(seen, expected)


@detects("int8_linear", "zero_point_after_clamp", explains=VALUE_CHECKS)
def zero_point_after_clamp(seen: Any, expected: Any) -> bool:
    return public.output_zero_point_after_clamp(seen, expected)


@detects("int8_linear", "no_clamp", explains=VALUE_CHECKS)
def no_clamp(seen: Any, expected: Any) -> bool:
    return public.wrapped_not_clamped(seen, expected)


@detects("int8_linear", "int16_accumulator", explains=VALUE_CHECKS)
def int16_accumulator(seen: Any, expected: Any) -> bool:
    return public.int16_accumulated(seen, expected)


@detects("int8_linear", "stays_in_int8", explains=VALUE_CHECKS)
def stays_in_int8(seen: Any, expected: Any) -> bool:
    return public.computed_in_int8(seen, expected)


@detects("int8_linear", "forgets_input_zero_point", explains=VALUE_CHECKS)
def forgets_input_zero_point(seen: Any, expected: Any) -> bool:
    return public.input_zero_point_missing(seen, expected)


@detects("int8_linear", "no_bias", explains=VALUE_CHECKS)
def no_bias(seen: Any, expected: Any) -> bool:
    return public.bias_missing(seen, expected)


@detects("int8_linear", "weight_zero_point", explains=VALUE_CHECKS)
def weight_zero_point(seen: Any, expected: Any) -> bool:
    return public.weight_zero_point_subtracted(seen, expected)
