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


def _wrap(number: float) -> int:
    """What int32 → int8 makes of an integer: it wraps around."""
    return (round(number) + 128) % 256 - 128


def _clamp(number: float) -> float:
    return max(-128.0, min(127.0, number))


def _outputs(seen: Any, expected: Any) -> dict[str, tuple[list[float], list[int], dict[str, Any], int]]:
    """Case → (the student's values, the reference's, the qparams, out_features), where the shapes agree."""
    found = {}
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case, "result"), diagnosis.value(expected, case)
        if not isinstance(got, dict) or not isinstance(want, dict):
            continue
        reference, params = want.get("reference"), want.get("params")
        values = got.get("values")
        if not (isinstance(reference, dict) and isinstance(params, dict) and isinstance(values, list)):
            continue
        if got.get("shape") != reference.get("shape") or len(values) != len(reference.get("values", [])):
            continue
        found[case] = (values, reference["values"], params, reference["shape"][-1])
    return found


def _free(reference: list[int]) -> list[int]:
    """The positions where the reference did not saturate: there its value is the rescaled acc + out_zp (± 1)."""
    return [i for i, r in enumerate(reference) if -128 < r < 127]


def _wrong(values: list[float], reference: list[int], positions: list[int] | None = None) -> list[int]:
    places = range(len(reference)) if positions is None else positions
    return [i for i in places if abs(values[i] - reference[i]) > 1]


def _predicts(seen: Any, expected: Any, predict: Any) -> bool:
    """On every case, every unsaturated output is ``predict(reference, params)`` (± 1, also across a wrap-around),
    and somewhere the prediction is not the reference itself."""
    outputs = _outputs(seen, expected)
    differs = False
    for values, reference, params, _ in outputs.values():
        for i in _free(reference):
            guess = predict(reference[i], params)
            if abs(_wrap(values[i] - guess)) > 1:
                return False
            differs = differs or abs(guess - reference[i]) > 1
    return bool(outputs) and differs


def _offsets_constant(values: list[float], reference: list[int], columns: int, by_column: bool) -> bool | None:
    """Where neither saturated, is (yours − reference) the same (± 1) along each output column (or each row)?
    None when there is too little to tell."""
    groups: dict[int, list[float]] = {}
    for i in _free(reference):
        if -128 < values[i] < 127:
            groups.setdefault(i % columns if by_column else i // columns, []).append(values[i] - reference[i])
    if sum(len(g) for g in groups.values()) < 4:
        return None
    return all(max(g) - min(g) <= 2 for g in groups.values())


def _per_column(seen: Any, expected: Any) -> tuple[bool, bool]:
    """(in every case that is off, the offsets are constant along each output column, and in some case most
    outputs are off; the case whose input zero point is 0 is off too)."""
    outputs = _outputs(seen, expected)
    constant, mostly_off, zero_point_free_off = bool(outputs), False, False
    for values, reference, params, columns in outputs.values():
        off = _wrong(values, reference)
        if not off:
            continue
        mostly_off = mostly_off or 4 * len(off) >= 3 * len(reference)
        zero_point_free_off = zero_point_free_off or params.get("x_zp") == 0
        if _offsets_constant(values, reference, columns, by_column=True) is not True:
            constant = False
    return constant and mostly_off, zero_point_free_off


@detects("int8_linear", "weight_not_transposed")
def weight_not_transposed(seen: Any, expected: Any) -> bool:
    return public.shapes_mismatch(seen, expected) or raised(seen, ("RuntimeError",), cases=TWO_D, says="size mismatch")


@detects("int8_linear", "two_d_only", explains=("test_batched",))
def two_d_only(seen: Any, expected: Any) -> bool:
    """Only the 3-d input stops."""
    return raised(seen, cases=("batched",)) and not raised(seen, cases=TWO_D)


@detects("int8_linear", "returns_not_int8", explains=("test_dtype_shape",))
def returns_not_int8(seen: Any, expected: Any) -> bool:
    return public.not_int8(seen, expected)


@detects("int8_linear", "forgets_output_scale", explains=VALUE_CHECKS)
def forgets_output_scale(seen: Any, expected: Any) -> bool:
    """acc · s_x s_w (the real value: a few units at most) + out_zp: everything near the output zero point."""
    return _predicts(seen, expected, lambda r, p: _clamp(round((r - p["out_zp"]) * p["out_scale"]) + p["out_zp"]))


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
    """acc · s_out / (s_x s_w): enormous, so every output sits at the bound on the side of its sign."""
    outputs = _outputs(seen, expected)
    checked = 0
    for values, reference, params, _ in outputs.values():
        for i in _free(reference):
            distance = reference[i] - params["out_zp"]
            if abs(distance) < 2:
                continue
            if values[i] != (127 if distance > 0 else -128):
                return False
            checked += 1
    return checked >= 4 and any(_wrong(v, r, _free(r)) for v, r, _, _ in outputs.values())


@detects("int8_linear", "bias_after_requant", explains=VALUE_CHECKS)
def bias_after_requant(seen: Any, expected: Any) -> bool:
    """b_q (thousands of s_x s_w units) added as output units: the outputs that are off sit at one bound per column."""
    pinned = wrong = 0
    for values, reference, _, columns in _outputs(seen, expected).values():
        bounds: dict[int, set[float]] = {}
        for i in _wrong(values, reference):
            wrong += 1
            if values[i] in (127, -128):
                pinned += 1
                bounds.setdefault(i % columns, set()).add(values[i])
        if any(len(b) > 1 for b in bounds.values()):
            return False
    return wrong >= 4 and pinned >= 0.9 * wrong


@detects("int8_linear", "forgets_output_zero_point", explains=VALUE_CHECKS)
def forgets_output_zero_point(seen: Any, expected: Any) -> bool:
    return _predicts(seen, expected, lambda r, p: _clamp(r - p["out_zp"]))


@detects("int8_linear", "zero_point_after_clamp", explains=VALUE_CHECKS)
def zero_point_after_clamp(seen: Any, expected: Any) -> bool:
    return _predicts(seen, expected, lambda r, p: _wrap(_clamp(r - p["out_zp"]) + p["out_zp"]))


@detects("int8_linear", "no_clamp", explains=VALUE_CHECKS)
def no_clamp(seen: Any, expected: Any) -> bool:
    """Every unsaturated output right; most of the saturated ones wrapped around (and not to a bound)."""
    saturated = wrapped = 0
    for values, reference, _, _ in _outputs(seen, expected).values():
        if _wrong(values, reference, _free(reference)):
            return False
        for i, r in enumerate(reference):
            if not -128 < r < 127:
                saturated += 1
                wrapped += abs(values[i] - r) > 1 and values[i] not in (127, -128)
    return wrapped > 0 and 2 * wrapped >= saturated


@detects("int8_linear", "int16_accumulator", explains=VALUE_CHECKS)
def int16_accumulator(seen: Any, expected: Any) -> bool:
    """In no case are most outputs wrong, but some are: the few whose sums overflow 16 bits."""
    if public.int16_refused(seen, expected):
        return True
    outputs = _outputs(seen, expected)
    if set(outputs) != set(diagnosis.cases(expected)):
        return False
    wrong_somewhere = False
    for values, reference, _, _ in outputs.values():
        wrong = _wrong(values, reference)
        if 2 * len(wrong) > len(reference):
            return False
        wrong_somewhere = wrong_somewhere or bool(wrong)
    return wrong_somewhere


def _collapsed(values: list[float], reference: list[int], columns: int) -> bool:
    """Most outputs off, and each output column nearly constant where the reference's vary: an accumulator that
    stayed in int8 holds a few units at most, so only the bias and the zero point are left."""
    if 4 * len(_wrong(values, reference)) < 3 * len(reference):
        return False
    spread_mine, spread_theirs = [], []
    for column in range(columns):
        mine, theirs = values[column::columns], reference[column::columns]
        spread_mine.append(max(mine) - min(mine))
        spread_theirs.append(max(theirs) - min(theirs))
    return max(spread_mine) <= 4 and max(spread_theirs) >= 20


@detects("int8_linear", "stays_in_int8", explains=VALUE_CHECKS)
def stays_in_int8(seen: Any, expected: Any) -> bool:
    """Everything computed in int8 (the sums collapse), or only the subtraction: with the input zero point at -128
    (x_q − x_zp leaves int8) almost every output is off, without a pattern per column or per row, while a zero point
    of 0, or a small one, keeps the outputs (nearly all) right."""
    outputs = _outputs(seen, expected)
    if outputs and all(_collapsed(values, reference, columns) for values, reference, _, columns in outputs.values()):
        return True
    found = False
    for values, reference, params, columns in outputs.values():
        wrong = _wrong(values, reference)
        if params.get("x_zp") == 0 and wrong:
            return False
        if params.get("x_zp") != -128 and 4 * len(wrong) > len(reference):
            return False
        if params.get("x_zp") == -128 and 5 * len(wrong) >= 4 * len(reference):
            by_column = _offsets_constant(values, reference, columns, by_column=True)
            by_row = _offsets_constant(values, reference, columns, by_column=False)
            found = found or not (by_column or by_row)
    return found


@detects("int8_linear", "forgets_input_zero_point", explains=VALUE_CHECKS)
def forgets_input_zero_point(seen: Any, expected: Any) -> bool:
    """Off by a constant per output column (z_x · Σ w), and right where the input zero point is 0."""
    constant, zero_point_free_off = _per_column(seen, expected)
    return constant and not zero_point_free_off


@detects("int8_linear", "no_bias", explains=VALUE_CHECKS)
def no_bias(seen: Any, expected: Any) -> bool:
    """Off by a constant per output column (its bias), whatever the input zero point."""
    constant, zero_point_free_off = _per_column(seen, expected)
    return constant and zero_point_free_off


@detects("int8_linear", "weight_zero_point", explains=VALUE_CHECKS)
def weight_zero_point(seen: Any, expected: Any) -> bool:
    """Off by a constant per row (z_x · Σ (q_x − z_x)), and right where the input zero point is 0."""
    rows = []
    for values, reference, params, columns in _outputs(seen, expected).values():
        wrong = _wrong(values, reference)
        if params.get("x_zp") == 0 and wrong:
            return False
        if wrong:
            rows.append(_offsets_constant(values, reference, columns, by_column=False))
    decided = [r for r in rows if r is not None]
    return bool(decided) and 2 * decided.count(True) >= len(decided)
