"""Hidden checks of M05-3: int8_linear matches the reference representation within 1 LSB.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- 2-D inputs only (``torch.mm``) → batched (3-D input);
- the weight used as (in, out), not transposed → every case;
- an int16 accumulator, subtraction of the zero point in int8 → saturating, zero_point;
- the input zero point forgotten, or also subtracted from the symmetric weight → zero_point, typical;
- the bias added after requantization, or forgotten → typical, batched;
- the multiplier inverted or the output scale forgotten, the output zero point forgotten or added
  after the clamp, no clamp, an int32 result → typical, saturating, zero_point;
- (int8_linear receives tensors: the grader replays only what it returns, so a change made to its
  arguments in place is not visible to these checks.)
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

LSB = 1

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
        f"{where}：輸出的 shape 預期 {reference['shape']}，看到 {result.get('shape')}",
    )
    got, want = result.get("values"), reference["values"]
    expect(isinstance(got, list) and len(got) == len(want), f"{where}：輸出的元素個數不對")
    worst, index = max((abs(g - w), i) for i, (g, w) in enumerate(zip(got, want, strict=True)))
    if worst > LSB:
        far = sum(1 for g, w in zip(got, want, strict=True) if abs(g - w) > LSB)
        raise Fail(
            f"{where}：第 {index} 個元素預期 {want[index]}（reference representation），看到 {got[index]:g}；"
            f"{far} / {len(want)} 個元素差超過 1 LSB"
        )


@check("int8_linear", 1, "回傳 int8 tensor，shape 和 reference representation 相同")
def test_dtype_shape(seen, expected):
    for case in ("typical", "batched"):
        result, reference = _parts(seen, expected, case)
        expect(result.get("dtype") == "int8", f"{WHERE[case]}：輸出的 dtype 預期 int8，看到 {result.get('dtype')}")
        expect(
            result.get("shape") == reference["shape"],
            f"{WHERE[case]}：輸出的 shape 預期 {reference['shape']}，看到 {result.get('shape')}",
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
