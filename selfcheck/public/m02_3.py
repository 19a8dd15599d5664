"""Public cases of M02-3 自己算 scale 與 zero point (calculate_qparams, quantize / dequantize).

Also how the student's tensors become evidence, shared with the hidden cases: exact
``torch.Tensor`` values only, scale float32, zero point and quantized values integers.
The public cases use the chapter's own inputs: a few ranges (random, all zeros, one value,
only negatives), the XNNPACK eps, a small per-channel weight, and seeded data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.compare import EXACT_FLOAT
from selfcheck.evidence import EvidenceError
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

QPARAMS_TITLE = "calculate_qparams：從 min / max 算出 scale 與 zero point"
QDQ_TITLE = "quantize 與 dequantize：和 convert_pt2e 插的 op 逐位元相同"

EPS = torch.finfo(torch.float32).eps
XNNPACK_EPS = 2**-12


def tensor_values(value: Any, what: str, *, integer: bool, dtype: torch.dtype | None = None) -> list[Any]:
    """The elements of a tensor the student returned, as plain numbers (exact tensors only)."""
    if type(value) is not torch.Tensor:
        raise EvidenceError(f"{what} 應該是 torch.Tensor，收到 {type(value).__name__}")
    if value.numel() > 10_000:
        raise EvidenceError(f"{what} 太大（{value.numel()} 個元素）")
    if integer and (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool):
        raise EvidenceError(f"{what} 應該是整數 tensor，收到 {value.dtype}")
    if dtype is not None and value.dtype != dtype:
        raise EvidenceError(f"{what} 的 dtype 應該是 {dtype}，收到 {value.dtype}")
    flat = value.detach().flatten().tolist()
    return [int(v) for v in flat] if integer else [float(v) for v in flat]


def qparams_values(result: Any) -> dict[str, list[Any]]:
    """``(scale, zero_point)`` returned by a calculate_qparams: scale float32, zero point integer."""
    if type(result) not in (tuple, list) or len(result) != 2:
        raise EvidenceError(f"calculate_qparams 應該回傳 (scale, zero_point) 兩個 tensor，收到 {type(result).__name__}")
    scale, zero_point = result
    return {
        "scale": tensor_values(scale, "scale", integer=False, dtype=torch.float32),
        "zero_point": tensor_values(zero_point, "zero_point", integer=True),
    }


def observer(qmin: int, qmax: int, symmetric: bool, eps: float = EPS, per_channel: bool = False) -> torch.nn.Module:
    """A MinMaxObserver / PerChannelMinMaxObserver (axis 0) with this range, scheme and eps."""
    from common.pt2e import MinMaxObserver, PerChannelMinMaxObserver

    dtype = torch.uint8 if qmin >= 0 else torch.int8
    if per_channel:
        qscheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
        return PerChannelMinMaxObserver(
            ch_axis=0, dtype=dtype, qscheme=qscheme, quant_min=qmin, quant_max=qmax, eps=eps
        )
    qscheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
    return MinMaxObserver(dtype=dtype, qscheme=qscheme, quant_min=qmin, quant_max=qmax, eps=eps)


def student_qparams(
    ns: Namespace, seen: torch.nn.Module, qmin: int, qmax: int, symmetric: bool, eps: float
) -> dict[str, list[Any]]:
    """The student's (scale, zero point) for what observer ``seen`` recorded (copies of its min / max)."""
    min_val, max_val = seen.min_val.clone(), seen.max_val.clone()
    return qparams_values(ns["calculate_qparams"](min_val, max_val, qmin, qmax, symmetric, eps=eps))


# --- public cases ---------------------------------------------------------------------------------


def _chapter_x(seed: int) -> torch.Tensor:
    return torch.randn(1000, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5


def qparams_chapter(ns: Namespace, seed: int) -> Any:
    """The ranges of the chapter's own checks, per-tensor: random, all 0, one value, only negatives."""
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = {
        "x": _chapter_x(seed),
        "亂數 1": torch.randn(50, generator=generator) * 0.3 + 0.1,
        "亂數 2": torch.randn(50, generator=generator) * 3.0 - 0.4,
        "全部是 0": torch.zeros(3),
        "單一值 3.0": torch.tensor([3.0]),
        "只有負值": torch.tensor([-2.0, -0.5]),
        "min / scale 剛好是 -1.5": torch.tensor([-1.5 / 16, 253.5 / 16]),
        "min / scale 剛好是 -2.5": torch.tensor([-2.5 / 16, 252.5 / 16]),
    }
    ranges = ((-128, 127, False), (-127, 127, True), (-128, 127, True), (0, 255, False))
    rows = {}
    for label, data in inputs.items():
        for qmin, qmax, symmetric in ranges:
            seen = observer(qmin, qmax, symmetric)
            seen(data)
            rows[f"{label}，[{qmin},{qmax}]{' symmetric' if symmetric else ' affine'}"] = student_qparams(
                ns, seen, qmin, qmax, symmetric, EPS
            )
    return rows


FIXED_RANGES: dict[str, tuple[tuple[float, ...], int, int, bool]] = {
    "[-0.7, 0.9]，[-128,127] affine": ((-0.7, 0.9), -128, 127, False),
    "min / scale 剛好是 -1.5，[-127,127] affine": ((-1.5 / 16, 252.5 / 16), -127, 127, False),
    "min / scale 剛好是 -2.5，[-127,127] affine": ((-2.5 / 16, 251.5 / 16), -127, 127, False),
}
"""Ranges written by hand (label → (data, quant_min, quant_max, symmetric)): float32 arithmetic gives the same bits
on every CPU, so these rows are compared bit for bit. (max − min) of [-0.7, 0.9] rounds in float32; the two ties
meet an odd quant_min."""


def qparams_fixed(ns: Namespace, seed: int) -> Any:
    """Ranges written by hand, compared bit for bit: a difference that float32 rounds, .5 ties with quant_min -127."""
    rows = {}
    for label, (data, qmin, qmax, symmetric) in FIXED_RANGES.items():
        seen = observer(qmin, qmax, symmetric)
        seen(torch.tensor(data))
        rows[label] = student_qparams(ns, seen, qmin, qmax, symmetric, EPS)
    return rows


def qparams_eps_and_channels(ns: Namespace, seed: int) -> Any:
    """eps = 2**-12 on all zeros; a 4-channel weight (one channel all 0), symmetric per-channel."""
    seen = observer(-128, 127, False, XNNPACK_EPS)
    seen(torch.zeros(3))
    weight = torch.linspace(-1, 2, 24).reshape(4, 6) * torch.tensor([[1.0], [0.0], [0.01], [3.0]])
    channels = observer(-127, 127, True, per_channel=True)
    channels(weight)
    return {
        "全部是 0，eps=2**-12": student_qparams(ns, seen, -128, 127, False, XNNPACK_EPS),
        "4 個 channel 的 weight，[-127,127] symmetric": student_qparams(ns, channels, -127, 127, True, EPS),
    }


def _ties(scale: float, low: int, high: int) -> torch.Tensor:
    """(k + 0.5) · scale and the float32 values right next to it, for k in [low, high)."""
    base = (torch.arange(low, high, dtype=torch.float32) + 0.5) * torch.tensor(scale, dtype=torch.float32)
    up = torch.nextafter(base, torch.tensor(float("inf")))
    down = torch.nextafter(base, torch.tensor(float("-inf")))
    return torch.cat([base, up, down])


def _far() -> torch.Tensor:
    """Values far outside a 4-bit range, and a few inside it."""
    return torch.tensor([1e4, -1e4, 300.0, -300.0, 6.5, -6.5, 0.31, -0.29, 0.02, -0.5])


PUBLIC_QUANTIZE = {
    "quantize 剛好在 .5 附近（scale=0.1, zero_point=3）": (lambda: _ties(0.1, -40, 40), 0.1, 3, -128, 127),
    "quantize 剛好在 .5 附近（scale=0.0123, zero_point=-5）": (lambda: _ties(0.0123, -40, 40), 0.0123, -5, -128, 127),
    "quantize 超出 4 bit 範圍 [-8,7]": (_far, 0.05, -1, -8, 7),
}
"""The public quantize calls on fixed inputs (int8): label → (input, scale, zero point, quant_min, quant_max)."""


def quantize_chapter(ns: Namespace, seed: int) -> Any:
    """The chapter's check (qparams from the first half of x, quantize all of x), values next to .5,
    values far outside a 4-bit range; dequantize every integer."""
    x = _chapter_x(seed)
    rows = {}
    for qmin, qmax, dtype in ((-128, 127, torch.int8), (0, 255, torch.uint8)):
        seen = observer(qmin, qmax, False)
        seen(x[:500])
        scale, zero_point = seen.calculate_qparams()
        scale, zero_point = float(scale), int(zero_point)
        name = str(dtype).removeprefix("torch.")
        got = ns["quantize"](x.clone(), scale, zero_point, qmin, qmax, dtype)
        rows[f"quantize {name}"] = tensor_values(got, "quantize 的結果", integer=True, dtype=dtype)
        every = torch.arange(qmin, qmax + 1).to(dtype)
        got = ns["dequantize"](every, scale, zero_point)
        rows[f"dequantize {name}"] = tensor_values(got, "dequantize 的結果", integer=False, dtype=torch.float32)
    for label, (make, scale, zero_point, qmin, qmax) in PUBLIC_QUANTIZE.items():
        got = ns["quantize"](make(), scale, zero_point, qmin, qmax, torch.int8)
        rows[label] = tensor_values(got, "quantize 的結果", integer=True, dtype=torch.int8)
    every = torch.arange(-128, 128).to(torch.int8)
    got = ns["dequantize"](every, EXACT_DEQUANTIZE[1], EXACT_DEQUANTIZE[2])
    rows[EXACT_DEQUANTIZE[0]] = tensor_values(got, "dequantize 的結果", integer=False, dtype=torch.float32)
    return rows


EXACT_DEQUANTIZE = ("dequantize 每個 int8（scale=0.0123, zero_point=-5）", 0.0123, -5)
"""A dequantize row with a hand-written scale (label, scale, zero point): the same bits on every CPU, compared bit
for bit."""

EXACT_ROWS = {label: EXACT_FLOAT for label in (*FIXED_RANGES, EXACT_DEQUANTIZE[0])}
"""The rows the previews compare bit for bit (their inputs and qparams are written by hand)."""


# --- reading the evidence: the student's numbers beside torchao's (the preview and the grader alike) -----------

FLOOR = XNNPACK_EPS * 1.0001
"""A scale this small is the eps floor (the range was narrower than eps allows)."""


@dataclass(frozen=True)
class QparamsRow:
    """One observer's qparams: what the student returned (``mine``) beside torchao's (``want``), per channel."""

    label: str
    qmin: int | None
    qmax: int | None
    symmetric: bool | None
    min_val: list[float] | None
    max_val: list[float] | None
    mine: dict[str, list[Any]]
    want: dict[str, list[Any]]

    def channels(self) -> list[tuple[float, int, float, int, int]]:
        """``(my scale, my zero point, torchao's scale, torchao's zero point, channel)``, where the lengths agree."""
        ms, mz, ws, wz = self.mine["scale"], self.mine["zero_point"], self.want["scale"], self.want["zero_point"]
        if not len(ms) == len(mz) == len(ws) == len(wz):
            return []
        return [(ms[i], mz[i], ws[i], wz[i], i) for i in range(len(ws))]

    def one_sided(self, channel: int) -> bool | None:
        """Whether the channel's range leaves 0 out (None when the evidence does not say)."""
        if not self.min_val or not self.max_val or channel >= len(self.min_val):
            return None
        return self.min_val[channel] > 0 or self.max_val[channel] < 0


def _range_of(label: str) -> tuple[int | None, int | None, bool | None]:
    found = re.search(r"\[(-?\d+),\s*(-?\d+)\]", label)
    qmin, qmax = (int(found.group(1)), int(found.group(2))) if found else (None, None)
    symmetric = True if "symmetric" in label else False if "affine" in label else None
    return qmin, qmax, symmetric


def _qparams(entry: Any) -> dict[str, list[Any]] | None:
    if isinstance(entry, dict) and isinstance(entry.get("scale"), list) and isinstance(entry.get("zero_point"), list):
        return entry
    return None


def qparams_rows(seen: Any, expected: Any) -> list[QparamsRow]:
    """Every row both evidences hold: the hidden cases' lists of rows, the public cases' rows by label."""
    rows = []
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
            pairs = [
                (str(w.get("label")), g.get("mine"), w.get("torchao"), w.get("min_val"), w.get("max_val"))
                for g, w in zip(got, want, strict=True)
                if isinstance(g, dict) and isinstance(w, dict)
            ]
        elif isinstance(want, dict) and isinstance(got, dict):
            pairs = [(str(label), got.get(label), entry, *_fixed_range(str(label))) for label, entry in want.items()]
        else:
            continue
        for label, mine, theirs, low, high in pairs:
            if _qparams(mine) is not None and _qparams(theirs) is not None:
                rows.append(QparamsRow(label, *_range_of(label), low, high, mine, theirs))
    return rows


def _fixed_range(label: str) -> tuple[list[float] | None, list[float] | None]:
    """The observed (min, max) of a public row written by hand, as float32 values (None for other rows)."""
    if label not in FIXED_RANGES:
        return None, None
    data = torch.tensor(FIXED_RANGES[label][0])
    return [float(data.min())], [float(data.max())]


def _ratio(mine: float, want: float) -> float:
    return mine / want if want else float("inf")


def one_value_for_channels(seen: Any, expected: Any) -> bool:
    """Per-channel: one (scale, zero point) where there should be one per channel."""
    return any(
        len(r.mine["scale"]) < len(r.want["scale"]) for r in qparams_rows(seen, expected) if len(r.want["scale"]) > 1
    )


def channels_share_range(seen: Any, expected: Any) -> bool:
    """Per-channel: every channel got the same scale, though the channels' ranges differ."""
    return any(
        len(r.mine["scale"]) == len(r.want["scale"]) > 1
        and len(set(r.mine["scale"])) == 1
        and len(set(r.want["scale"])) > 1
        for r in qparams_rows(seen, expected)
    )


def unit_scale_when_flat(seen: Any, expected: Any) -> bool:
    """(1.0, 0) where torchao's scale is not 1.0: the docstring's words taken for the code."""
    return any(
        (ms, mz) == (1.0, 0) and ws != 1.0 for r in qparams_rows(seen, expected) for ms, mz, ws, _, _ in r.channels()
    )


def _under_floor(seen: Any, expected: Any) -> list[tuple[QparamsRow, float]]:
    """Where torchao's scale is the eps floor and the student's is smaller: (row, the student's scale)."""
    return [
        (r, ms)
        for r in qparams_rows(seen, expected)
        for ms, _, ws, _, _ in r.channels()
        if ws <= FLOOR and ms < ws * (1 - 1e-4)
    ]


def no_floor(seen: Any, expected: Any) -> bool:
    """A scale below float32's eps: it was never clamped to eps."""
    return any(ms < EPS * (1 - 1e-6) for _, ms in _under_floor(seen, expected))


def default_eps(seen: Any, expected: Any) -> bool:
    """Clamped to eps everywhere except where eps is an argument other than the default."""
    under = _under_floor(seen, expected)
    return bool(under) and all("eps=" in r.label and ms >= EPS * (1 - 1e-6) for r, ms in under)


def zero_point_from_max(seen: Any, expected: Any) -> bool:
    """Affine, all-zero range: zero point quant_max where torchao's is quant_min (counted from the max end)."""
    return any(
        r.symmetric is False and ms == ws and wz == r.qmin and mz == r.qmax != r.qmin
        for r in qparams_rows(seen, expected)
        for ms, mz, ws, wz, _ in r.channels()
    )


def _off(ms: float, mz: int, ws: float, wz: int, tolerance: float = 1e-3) -> bool:
    return abs(_ratio(ms, ws) - 1) > tolerance or abs(mz - wz) > 1


def only_int8_right(seen: Any, expected: Any) -> bool:
    """Right on int8 [-128,127] rows, clearly wrong on affine rows of other integer ranges: the range was not read."""
    rows = [r for r in qparams_rows(seen, expected) if r.qmin is not None]
    int8 = [r for r in rows if (r.qmin, r.qmax) == (-128, 127)]
    others = [r for r in rows if (r.qmin, r.qmax) != (-128, 127)]
    return (
        bool(int8)
        and all(r.mine == r.want for r in int8)
        and any(_off(*c[:4]) for r in others if r.symmetric is False for c in r.channels())
    )


def _symmetric_scales(seen: Any, expected: Any) -> dict[tuple[Any, Any], list[float]]:
    """Symmetric channels whose zero point is right and whose scale is not: the ratio mine / torchao's, per range."""
    found: dict[tuple[Any, Any], list[float]] = {}
    for r in qparams_rows(seen, expected):
        if r.symmetric:
            for ms, mz, ws, wz, _ in r.channels():
                if mz == wz and abs(_ratio(ms, ws) - 1) > 1e-4:
                    found.setdefault((r.qmin, r.qmax), []).append(_ratio(ms, ws))
    return found


def symmetric_divisor(seen: Any, expected: Any) -> bool:
    """Symmetric scales off by one factor per integer range (a wrong divisor); affine scales right."""
    ratios = _symmetric_scales(seen, expected)
    affine_right = all(
        abs(_ratio(ms, ws) - 1) <= 1e-4
        for r in qparams_rows(seen, expected)
        if r.symmetric is False
        for ms, _, ws, _, _ in r.channels()
    )
    return bool(ratios) and affine_right and all(max(found) - min(found) < 1e-4 for found in ratios.values())


def symmetric_zero_point(seen: Any, expected: Any) -> bool:
    """Symmetric on a signed range: the scale right, the zero point not torchao's."""
    return any(
        r.symmetric and ms == ws and mz != wz
        for r in qparams_rows(seen, expected)
        for ms, mz, ws, wz, _ in r.channels()
    )


def _unwidened(r: QparamsRow, channel: int, mine: float) -> bool:
    """The student's affine scale is (max − min) / (qmax − qmin) of the range as observed (True when the evidence
    does not hold the range)."""
    if r.one_sided(channel) is None or r.qmin is None or r.qmax is None or r.qmax == r.qmin:
        return True
    assert r.min_val is not None and r.max_val is not None
    narrow = (r.max_val[channel] - r.min_val[channel]) / (r.qmax - r.qmin)
    return r.one_sided(channel) is True and (abs(mine - narrow) <= 1e-4 * narrow or (narrow < FLOOR and mine <= FLOOR))


def narrower_range(seen: Any, expected: Any) -> bool:
    """An affine scale smaller than torchao's where the range leaves 0 out, as if the range were not widened to
    include 0."""
    for r in qparams_rows(seen, expected):
        if r.symmetric is not False:
            continue
        for ms, _, ws, _, channel in r.channels():
            if ws > FLOOR * 1.01 and ms < ws * (1 - 1e-4) and _unwidened(r, channel, ms):
                return True
    return False


def _tie_shifts(seen: Any, expected: Any) -> set[int]:
    """How the affine zero points differ where the scale is right (my zero point − torchao's, nonzero)."""
    return {
        mz - wz
        for r in qparams_rows(seen, expected)
        if r.symmetric is False
        for ms, mz, ws, wz, _ in r.channels()
        if ms == ws and mz != wz
    }


def _rounded_after_quant_min(r: QparamsRow, channel: int, scale: float) -> int | None:
    """The zero point round(quant_min − min_neg / scale), in float32 and clamped (None without a range)."""
    if r.qmin is None or r.qmax is None or not r.min_val or channel >= len(r.min_val):
        return None
    min_neg = torch.clamp(torch.tensor(r.min_val[channel], dtype=torch.float32), max=0.0)
    rounded = torch.round(r.qmin - min_neg / torch.tensor(scale, dtype=torch.float32))
    return int(torch.clamp(rounded, r.qmin, r.qmax))


def rounds_after_quant_min(seen: Any, expected: Any) -> bool:
    """Affine zero points off where the scale is right, each one round(quant_min − min / scale): the tie turned
    by an odd quant_min."""
    wrong = [
        (r, channel, ms, mz)
        for r in qparams_rows(seen, expected)
        if r.symmetric is False
        for ms, mz, ws, wz, channel in r.channels()
        if ms == ws and mz != wz
    ]
    return bool(wrong) and all(_rounded_after_quant_min(r, channel, ms) == mz for r, channel, ms, mz in wrong)


def rounds_half_away(seen: Any, expected: Any) -> bool:
    """min / scale on .5 rounded away from 0 (one more step below 0): zero points one too high, never too low."""
    return _tie_shifts(seen, expected) == {1}


def rounds_half_up(seen: Any, expected: Any) -> bool:
    """min / scale on .5 always rounded up: zero points one too low, never too high."""
    return _tie_shifts(seen, expected) == {-1}


def last_bit(seen: Any, expected: Any) -> bool:
    """A scale off by float rounding only (float64 arithmetic, then float32)."""
    return any(
        0 < abs(_ratio(ms, ws) - 1) < 1e-5 for r in qparams_rows(seen, expected) for ms, _, ws, _, _ in r.channels()
    )


# quantize / dequantize


@dataclass(frozen=True)
class ValuesRow:
    """One quantize or dequantize call: its input, the student's output beside torchao's, and its arguments."""

    kind: str
    x: list[Any] | None
    scales: tuple[float, ...]
    zero_point: int | None
    qmin: int | None
    qmax: int | None
    mine: list[Any]
    want: list[Any]

    def differences(self) -> list[tuple[Any, Any, Any]]:
        """``(input, mine, torchao's)`` where they differ (input None when unknown)."""
        xs = self.x if self.x is not None and len(self.x) == len(self.want) else [None] * len(self.want)
        if len(self.mine) != len(self.want):
            return []
        return [(x, m, w) for x, m, w in zip(xs, self.mine, self.want, strict=True) if m != w]


def _float32_printed_as(text: str) -> tuple[float, ...]:
    """The float32 numbers that ``f"{v:.6g}"`` prints as ``text`` (the scale a label shows)."""
    try:
        center = torch.tensor(float(text), dtype=torch.float32)
    except ValueError:
        return ()
    found = [float(center)] if f"{float(center):.6g}" == text else []
    for direction in (float("inf"), float("-inf")):
        value = center
        for _ in range(400):
            value = torch.nextafter(value, torch.tensor(direction))
            if f"{float(value):.6g}" != text:
                break
            found.append(float(value))
    return tuple(found)


def values_rows(seen: Any, expected: Any) -> list[ValuesRow]:
    """Every quantize / dequantize call both evidences hold."""
    rows = []
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
            for g, w in zip(got, want, strict=True):
                if not (isinstance(g, dict) and isinstance(w, dict) and isinstance(g.get("mine"), list)):
                    continue
                label = str(w.get("label"))
                exact = w.get("scale")
                scale = re.search(r"scale=([-+.0-9e]+)", label)
                zero_point = re.search(r"zero_point=(-?\d+)", label)
                qmin, qmax, _ = _range_of(label)
                rows.append(
                    ValuesRow(
                        "dequantize" if case == "dequantize" else "quantize",
                        w.get("x"),
                        (exact,) if isinstance(exact, float) else _float32_printed_as(scale.group(1)) if scale else (),
                        int(zero_point.group(1)) if zero_point else None,
                        qmin,
                        qmax,
                        g["mine"],
                        w.get("torchao") or [],
                    )
                )
        elif isinstance(want, dict) and isinstance(got, dict):
            for label, values in want.items():
                mine = got.get(label)
                if not isinstance(mine, list) or not isinstance(values, list):
                    continue
                kind = "dequantize" if str(label).startswith("dequantize") else "quantize"
                if label in PUBLIC_QUANTIZE:
                    make, scale, zero_point, qmin, qmax = PUBLIC_QUANTIZE[label]
                    x = [float(v) for v in make()]
                    rows.append(ValuesRow(kind, x, (scale,), zero_point, qmin, qmax, mine, values))
                else:
                    rows.append(ValuesRow(kind, None, (), None, *_range_of(str(label))[:2], mine, values))
    return rows


def quantize_type_error(seen: Any, expected: Any) -> bool:
    """quantize returned a float tensor, or integers of another dtype."""
    return any(
        error == "EvidenceError" and message.startswith("quantize 的結果") and ("整數" in message or "dtype" in message)
        for case, error in diagnosis.errors(seen).items()
        for message in [diagnosis.error_message(seen, case)]
    )


def dequantize_float64(seen: Any, expected: Any) -> bool:
    """dequantize returned float64."""
    return any(
        error == "EvidenceError" and message.startswith("dequantize 的結果") and "float64" in message
        for case, error in diagnosis.errors(seen).items()
        for message in [diagnosis.error_message(seen, case)]
    )


def wraps_around(seen: Any, expected: Any) -> bool:
    """A value torchao clamps to one end landed far on the other side: the cast wrapped it around first."""
    for row in values_rows(seen, expected):
        if row.kind != "quantize" or row.qmin is None:
            continue
        for _, mine, want in row.differences():
            if (want == row.qmax and mine < want - 1) or (want == row.qmin and mine > want + 1):
                return True
    return False


def dtype_range(seen: Any, expected: Any) -> bool:
    """Values beyond [quant_min, quant_max] (clamped to the dtype's range instead)."""
    for row in values_rows(seen, expected):
        if row.kind != "quantize" or row.qmin is None:
            continue
        if any(mine > row.qmax or mine < row.qmin for _, mine, _ in row.differences()):
            return True
    return False


ROUNDINGS = ("even", "up", "away")


def _rounded(t: torch.Tensor, rounding: str) -> torch.Tensor:
    if rounding == "up":
        return torch.floor(t + 0.5)
    if rounding == "away":
        return torch.sign(t) * torch.floor(t.abs() + 0.5)
    return torch.round(t)


def quantized(
    x: torch.Tensor, scale: float, zero_point: int, qmin: int, qmax: int, way: tuple[bool, bool, bool, str, bool]
):
    """quantize written one way: ``(divides, float64, zero point before rounding, rounding, reciprocal taken in
    float32)``."""
    divides, float64, zero_point_first, rounding, reciprocal32 = way
    v = x.double() if float64 else x
    inverse: Any = 1 / torch.tensor(scale, dtype=torch.float32) if reciprocal32 else 1.0 / scale
    t = v / scale if divides else v * inverse
    if zero_point_first:
        q = _rounded(t + zero_point, rounding)
    else:
        q = _rounded(t, rounding) + zero_point
    return torch.clamp(q, qmin, qmax).to(torch.int64).tolist()


KEY_WAY = (False, False, False, "even", False)
WAYS = [
    (d, f, z, r, i)
    for d in (False, True)
    for f in (False, True)
    for z in (False, True)
    for r in ROUNDINGS
    for i in (False, True)
]


def quantize_ways(seen: Any, expected: Any) -> set[tuple[bool, bool, bool, str, bool]]:
    """The ways of writing quantize that give the student's values on every call whose input is known
    (empty when none does, or when no call differs from torchao's)."""
    rows = [
        r
        for r in values_rows(seen, expected)
        if r.kind == "quantize" and r.x is not None and r.scales and None not in (r.zero_point, r.qmin, r.qmax)
    ]
    if not any(r.mine != r.want for r in rows):
        return set()
    ways = set(WAYS)
    for row in rows:
        x = torch.tensor(row.x, dtype=torch.float32)
        args = (row.zero_point, row.qmin, row.qmax)
        scales = [s for s in row.scales if quantized(x, s, *args, KEY_WAY) == row.want]
        ways &= {way for way in ways if any(quantized(x, s, *args, way) == row.mine for s in scales)}
    return ways


def _every_way(seen: Any, expected: Any, test: Any) -> bool:
    ways = quantize_ways(seen, expected)
    return bool(ways) and all(test(way) for way in ways)


def divides_by_scale(seen: Any, expected: Any) -> bool:
    return _every_way(seen, expected, lambda way: way[0])


def rounds_in_float64(seen: Any, expected: Any) -> bool:
    return _every_way(seen, expected, lambda way: way[1])


def zero_point_before_rounding(seen: Any, expected: Any) -> bool:
    return _every_way(seen, expected, lambda way: way[2])


def reciprocal_in_float32(seen: Any, expected: Any) -> bool:
    return _every_way(seen, expected, lambda way: way[4] and not way[0] and way[3] == "even")


def quantize_rounds_half_up(seen: Any, expected: Any) -> bool:
    """Every difference near .5 is one step up, or the values are floor(v + 0.5) / rounded away from 0."""
    if _every_way(seen, expected, lambda way: way[3] != "even"):
        return True
    steps = {
        mine - want
        for row in values_rows(seen, expected)
        if row.kind == "quantize"
        for _, mine, want in row.differences()
        if isinstance(mine, int) and isinstance(want, int)
    }
    return steps == {1}


def dequantize_wraps(seen: Any, expected: Any) -> bool:
    """Dequantized values far from torchao's (q − zero_point in int8 / uint8 wrapped around)."""
    return any(
        abs(mine - want) > 0.25 * (abs(want) + 1e-6)
        for row in values_rows(seen, expected)
        if row.kind == "dequantize"
        for _, mine, want in row.differences()
    )


def dequantize_last_bits(seen: Any, expected: Any) -> bool:
    """Dequantized values off by float rounding only (another order of operations, or float64)."""
    found = [
        (mine, want)
        for row in values_rows(seen, expected)
        if row.kind == "dequantize"
        for _, mine, want in row.differences()
    ]
    return bool(found) and all(abs(mine - want) <= 1e-5 * max(abs(want), 1e-3) for mine, want in found)


# --- where the chapter teaches it ------------------------------------------------------------------

AFFINE = Section("A. affine：一步一步算")
SYMMETRIC = Section("B. symmetric 與整數範圍")
EDGES = Section("C. 邊界情況")
QPARAMS_RULES = Section("練習 1：calculate_qparams（7 分）")
QDQ = Section("D. quantize 與 dequantize")
QDQ_RULES = Section("練習 2：quantize 與 dequantize（4 分）")

# --- practice after a mistake (issue 50): one idea each ------------------------------------------------

_TIES = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)


def _check_round_ties(predicted: Any) -> list[str]:
    if not isinstance(predicted, dict):
        return ["round_ties 要是一個 dict：{-2.5: ?, -1.5: ?, …}"]
    problems = []
    for value in _TIES:
        want = int(torch.round(torch.tensor(value)).item())
        got = predicted.get(value)
        if got != want:
            problems.append(f"torch.round({value})：你寫 {got!r}，它其實是 {want}")
    return problems


ROUND_TIES = Practice(
    "round_ties",
    "先不要執行 torch.round，預測它對剛好落在 .5 的六個數會給什麼：寫一個 dict round_ties，"
    "key 是 -2.5、-1.5、-0.5、0.5、1.5、2.5，value 是你預測的整數。檢查會拿 torch.round 的結果對答案。",
    "round_ties = {\n    -2.5: None,\n    -1.5: None,\n    -0.5: None,\n    0.5: None,\n    1.5: None,\n    2.5: None,\n}\n",
    _check_round_ties,
    "剛好在兩個整數正中間時，torch.round 選偶數的那一個（四捨六入五成雙）：1.5 → 2，2.5 → 2，-0.5 → -0。"
    "它不是「遠離 0」，也不是 floor(x + 0.5)。",
    "round_ties = {-2.5: -2, -1.5: -2, -0.5: 0, 0.5: 0, 1.5: 2, 2.5: 2}\n",
    "observer 算 zero point 與 quantize 捨入時都用 torch.round：min / scale 剛好是 .5 時，答案跟著這個規則走。",
)


def _check_saturate(saturate: Any) -> list[str]:
    values = torch.tensor([300.0, -300.0, 9.0, -9.0, 3.0])
    problems = []
    for dtype, low, high in ((torch.int8, -128, 127), (torch.int8, -8, 7), (torch.uint8, 0, 255)):
        got = saturate(values, low, high, dtype)
        want = values.clamp(low, high).to(dtype)
        if not isinstance(got, torch.Tensor) or got.dtype != dtype or not torch.equal(got, want):
            shown = got.tolist() if isinstance(got, torch.Tensor) else got
            problems.append(
                f"{dtype}、[{low}, {high}]：[300, -300, 9, -9, 3] 應該是 {want.tolist()}（{dtype}），你的是 {shown}"
                + (f"（{got.dtype}）" if isinstance(got, torch.Tensor) else "")
            )
    return problems


SATURATE = Practice(
    "saturate",
    "寫 saturate(t, quant_min, quant_max, dtype)：t 是已經捨入過的 float tensor，"
    "把它變成 dtype 的整數 tensor，超出 [quant_min, quant_max] 的值要停在端點。"
    "檢查用 [300, -300, 9, -9, 3]，範圍有 int8 的 [-128, 127]、4 bit 的 [-8, 7] 和 uint8 的 [0, 255]。",
    "import torch\n\n\ndef saturate(t, quant_min, quant_max, dtype):\n    raise NotImplementedError()\n",
    _check_saturate,
    "先夾再轉：.to(torch.int8) 遇到超出範圍的值會溢位繞回來（300 變成 44），之後再夾也救不回來；"
    "範圍用引數的 quant_min、quant_max，不是 dtype 能表示的全部。",
    "import torch\n\n\ndef saturate(t, quant_min, quant_max, dtype):\n    return torch.clamp(t, quant_min, quant_max).to(dtype)\n",
    "4 bit 的 [-8, 7] 也放在 int8 裡：dtype 只決定存的容器，範圍由 quant_min、quant_max 決定。",
)


def _shown(value: Any) -> Any:
    """A returned value as the student can read it: a tensor's elements, anything else as it is."""
    return value.tolist() if isinstance(value, torch.Tensor) else value


def _close(got: Any, want: torch.Tensor) -> bool:
    """``got`` is a tensor of ``want``'s shape, equal to it within float rounding."""
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and bool(torch.allclose(got.double(), want.double(), rtol=1e-5, atol=0.0))
    )


def _check_range_with_zero(range_with_zero: Any) -> list[str]:
    problems = []
    for title, low, high in (
        ("4 個 channel", [-1.0, 0.5, -3.0, 2.0], [2.0, 1.5, -0.5, 2.0]),
        ("per-tensor，只有正值", [0.25], [0.75]),
        ("per-tensor，只有負值", [-2.0], [-0.5]),
    ):
        min_val, max_val = torch.tensor(low), torch.tensor(high)
        want = (torch.clamp(min_val, max=0.0), torch.clamp(max_val, min=0.0))
        got = range_with_zero(min_val.clone(), max_val.clone())
        if not isinstance(got, tuple | list) or len(got) != 2 or not all(map(_close, got, want)):
            shown = [_shown(g) for g in got] if isinstance(got, tuple | list) else got
            problems.append(
                f"{title}：min_val={low}、max_val={high} 應該得到 ({want[0].tolist()}, {want[1].tolist()})，你的是 {shown}"
            )
    return problems


RANGE_WITH_ZERO = Practice(
    "range_with_zero",
    "寫 range_with_zero(min_val, max_val)：把 observer 記下的範圍擴大到包含 0，回傳 (min_neg, max_pos) 兩個 tensor。"
    "min_val、max_val 是一樣長的 tensor，per-channel 時每個 channel 一個值，每個 channel 各自和 0 比。"
    "檢查用一組 4 個 channel 的範圍，和只有正值、只有負值的 per-tensor 範圍。",
    "import torch\n\n\ndef range_with_zero(min_val, max_val):\n    raise NotImplementedError()\n",
    _check_range_with_zero,
    "逐元素和 0 比：torch.min(min_val, torch.zeros_like(min_val))。不要先取 min_val.min() 或 .item()，"
    "那會把所有 channel 變成一個數。",
    "import torch\n\n\n"
    "def range_with_zero(min_val, max_val):\n"
    "    min_neg = torch.min(min_val, torch.zeros_like(min_val))\n"
    "    max_pos = torch.max(max_val, torch.zeros_like(max_val))\n"
    "    return min_neg, max_pos\n",
    "[0.25, 0.75] 擴大成 [0, 0.75]：實數 0 一定在範圍裡，才能被精確表示。",
)


def _check_affine_scale(affine_scale: Any) -> list[str]:
    problems = []
    for low, high, qmin, qmax, eps in (
        ([-1.0], [3.0], -128, 127, EPS),
        ([-1.0], [3.0], -8, 7, EPS),
        ([0.0], [3.0], 0, 255, EPS),
        ([0.0], [0.0], -128, 127, EPS),
        ([0.0], [0.0], -128, 127, XNNPACK_EPS),
        ([-1e-6], [1e-6], -128, 127, XNNPACK_EPS),
        ([-1.0, 0.0], [1.0, 0.0], -127, 127, EPS),
    ):
        min_neg, max_pos = torch.tensor(low), torch.tensor(high)
        want = torch.max((max_pos - min_neg) / float(qmax - qmin), torch.tensor([eps]))
        got = affine_scale(min_neg.clone(), max_pos.clone(), qmin, qmax, eps)
        if not _close(got, want):
            shown_eps = "2**-12" if eps == XNNPACK_EPS else "float32 的 eps"
            problems.append(
                f"min_neg={low}、max_pos={high}、[{qmin}, {qmax}]、eps={shown_eps}："
                f"應該是 {[f'{v:.4g}' for v in want.tolist()]}，你的是 {_shown(got)}"
            )
    return problems


AFFINE_SCALE = Practice(
    "affine_scale",
    "寫 affine_scale(min_neg, max_pos, quant_min, quant_max, eps)：min_neg、max_pos 是已經包含 0 的範圍（tensor），"
    "回傳 affine 的 scale tensor，和 observer 一樣有下限 eps。"
    "檢查用幾個範圍：[-1, 3] 配 int8、4 bit [-8, 7] 與 uint8 的整數範圍，全部是 0 的範圍，和比 eps 還窄的範圍，eps 有兩種。",
    "import torch\n\n\ndef affine_scale(min_neg, max_pos, quant_min, quant_max, eps):\n    raise NotImplementedError()\n",
    _check_affine_scale,
    "兩步：先 (max_pos − min_neg) / float(quant_max − quant_min)，整數範圍用引數；"
    "再夾下限 torch.max(scale, torch.tensor([eps]))，eps 也用引數。全部是 0 時沒有特例，答案就是 eps。",
    "import torch\n\n\n"
    "def affine_scale(min_neg, max_pos, quant_min, quant_max, eps):\n"
    "    scale = (max_pos - min_neg) / float(quant_max - quant_min)\n"
    "    return torch.max(scale, torch.tensor([eps]))\n",
    "全部是 0 的範圍得到 eps，不是 docstring 說的 1.0；XNNPACK 傳 eps=2**-12 時，下限就是 2**-12。",
)


def _check_symmetric_qparams(symmetric_qparams: Any) -> list[str]:
    problems = []
    for low, high, qmin, qmax in (
        ([-0.5], [2.0], -127, 127),
        ([-0.5], [2.0], -128, 127),
        ([-3.0, -0.25], [1.0, 0.5], -8, 7),
    ):
        min_neg, max_pos = torch.tensor(low), torch.tensor(high)
        want = torch.max(-min_neg, max_pos) / (float(qmax - qmin) / 2)
        got = symmetric_qparams(min_neg.clone(), max_pos.clone(), qmin, qmax)
        if not isinstance(got, tuple | list) or len(got) != 2:
            problems.append(f"[{qmin}, {qmax}]：應該回傳 (scale, zero_point)，你的是 {got!r}")
            continue
        scale, zero_point = got
        if not _close(scale, want):
            problems.append(
                f"min_neg={low}、max_pos={high}、[{qmin}, {qmax}]：scale 應該是 "
                f"{[f'{v:.4g}' for v in want.tolist()]}，你的是 {_shown(scale)}"
            )
        zeros = _shown(zero_point)
        if not isinstance(zero_point, torch.Tensor) or zero_point.shape != want.shape or any(zeros):
            problems.append(f"[{qmin}, {qmax}]：zero point 應該每個都是 0，你的是 {zeros}")
    return problems


SYMMETRIC_QPARAMS = Practice(
    "symmetric_qparams",
    "寫 symmetric_qparams(min_neg, max_pos, quant_min, quant_max)：範圍已經包含 0、也不是全 0，"
    "回傳 symmetric 的 (scale, zero_point) 兩個 tensor，每個 channel 一個值。"
    "檢查用 [-127, 127]、[-128, 127] 和 4 bit 的 [-8, 7]，都是 signed 的整數範圍。",
    "import torch\n\n\ndef symmetric_qparams(min_neg, max_pos, quant_min, quant_max):\n    raise NotImplementedError()\n",
    _check_symmetric_qparams,
    "scale 是 torch.max(-min_neg, max_pos) 除以整數範圍的一半 (quant_max − quant_min) / 2：[-128, 127] 是 127.5，"
    "不是 quant_max。signed 範圍的 symmetric 把實數 0 放在整數 0，zero point 全是 0，不是範圍的中點。",
    "import torch\n\n\n"
    "def symmetric_qparams(min_neg, max_pos, quant_min, quant_max):\n"
    "    scale = torch.max(-min_neg, max_pos) / (float(quant_max - quant_min) / 2)\n"
    "    return scale, torch.zeros(scale.shape, dtype=torch.int64)\n",
    "[-127, 127] 的一半剛好是 quant_max，所以除以 quant_max 在那裡看不出錯；換成 [-128, 127] 或 [-8, 7] 就不同了。",
)


def _check_affine_zero_point(affine_zero_point: Any) -> list[str]:
    problems = []
    for low, high, scale, qmin, qmax in (
        ([-1.5 / 16], [252.5 / 16], 1 / 16, -127, 127),
        ([-2.5 / 16], [251.5 / 16], 1 / 16, -127, 127),
        ([0.0], [0.0], EPS, -128, 127),
        ([-0.5, -0.25], [1.0, 2.0], 0.01, 0, 255),
    ):
        min_neg, max_pos = torch.tensor(low), torch.tensor(high)
        scales = torch.full(min_neg.shape, scale)
        rounded = torch.round(min_neg / scales).to(torch.int)
        want = torch.clamp(qmin - rounded, qmin, qmax).tolist()
        got = affine_zero_point(min_neg.clone(), max_pos.clone(), scales.clone(), qmin, qmax)
        if (
            not isinstance(got, torch.Tensor)
            or got.dtype.is_floating_point
            or got.shape != min_neg.shape
            or got.tolist() != want
        ):
            shown_scale = "float32 的 eps" if scale == EPS else f"{scale:g}"
            problems.append(
                f"min_neg={[f'{v:g}' for v in low]}、scale={shown_scale}、[{qmin}, {qmax}]："
                f"zero point 應該是 {want}（整數 tensor），你的是 {_shown(got)}"
                + (f"（{got.dtype}）" if isinstance(got, torch.Tensor) else "")
            )
    return problems


AFFINE_ZERO_POINT = Practice(
    "affine_zero_point",
    "寫 affine_zero_point(min_neg, max_pos, scale, quant_min, quant_max)：照 observer 的算法回傳 affine 的 zero point，"
    "一個整數 tensor，讓實數 min_neg 對到整數 quant_min。"
    "檢查用 min_neg / scale 剛好是 -1.5 與 -2.5、quant_min 是 -127 的範圍，全部是 0 的範圍，和兩個 channel 的 uint8 範圍。",
    "import torch\n\n\n"
    "def affine_zero_point(min_neg, max_pos, scale, quant_min, quant_max):\n"
    "    raise NotImplementedError()\n",
    _check_affine_zero_point,
    "從 min 那一端算，而且先捨入再相減：quant_min − torch.round(min_neg / scale).to(torch.int)，最後夾到 [quant_min, quant_max]。"
    "max_pos 用不到。",
    "import torch\n\n\n"
    "def affine_zero_point(min_neg, max_pos, scale, quant_min, quant_max):\n"
    "    zero_point = quant_min - torch.round(min_neg / scale).to(torch.int)\n"
    "    return torch.clamp(zero_point, quant_min, quant_max)\n",
    "-1.5 先捨入成 -2，zero point 是 -127 + 2 = -125；先算 -127 + 1.5 = -125.5 再捨入，會到偶數 -126。",
)


_SPANS = ((-0.7, 0.9, 255), (-1.3, 2.9, 255), (-0.1, 0.2, 15), (-0.15, 3.05, 15))
"""(low, high, steps) whose step is another float32 value when the subtraction is done in float64."""


def _check_step_size(step_size: Any) -> list[str]:
    problems = []
    for low, high, steps in _SPANS:
        lows, highs = torch.tensor([low]), torch.tensor([high])
        want = (highs - lows) / steps
        got = step_size(lows.clone(), highs.clone(), steps)
        title = f"[{low}, {high}] 分成 {steps} 格"
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            problems.append(f"{title}：應該回傳和 low 一樣形狀的 tensor，你的是 {_shown(got)!r}")
        elif got.dtype != torch.float32:
            problems.append(f"{title}：應該回傳 float32 tensor，你的是 {got.dtype}")
        elif not torch.equal(got, want):
            close = bool(torch.allclose(got, want, rtol=1e-6, atol=0.0))
            hint = "（只差在最後一位：float64 算完才轉回 float32？）" if close else ""
            problems.append(f"{title}：應該是 {want.item()!r}，你的是 {got.item()!r}{hint}")
    return problems


STEP_SIZE = Practice(
    "step_size",
    "寫 step_size(low, high, steps)：low、high 是 float32 tensor（範圍的兩端），把範圍分成 steps 格（steps 是 Python int），"
    "回傳每格的寬度，一個 float32 tensor，要和 observer 用 float32 tensor 算的逐位元相同。"
    "檢查用四個範圍，例如 [-0.7, 0.9] 分成 255 格。",
    "import torch\n\n\ndef step_size(low, high, steps):\n    raise NotImplementedError()\n",
    _check_step_size,
    "high − low 在 float32 裡就會捨入一次；轉成 double、.item() 或 Python float 算，這一步不捨入，"
    "最後轉回 float32 時結果可能差最後一位。整個算式留在 float32 tensor 裡：先相減，再除以 steps。",
    "import torch\n\n\ndef step_size(low, high, steps):\n    width = high - low\n    return width / steps\n",
    "float32 存不下 0.9 − (−0.7) 的精確結果：observer 先捨入了這一步，要逐位元相同，就得在同一個地方捨入。",
)

QPARAMS_MISCONCEPTIONS = (
    Misconception(
        "python_floats",
        "per-channel 只算出一組 scale",
        "你可能用 .item() 或 Python 的 min、max 把 min_val、max_val 變成一個數字來算。per-channel 的 min_val 每個 channel 一個值，"
        "這樣只算到一組 scale 與 zero point；而且 Python float 是 float64，scale 的最後一位也會和 observer 不同。"
        "全部用 tensor 逐元素運算（torch.min、torch.max、torch.round），不要 .item()。",
        QPARAMS_RULES,
        public=one_value_for_channels,
        practice=RANGE_WITH_ZERO,
    ),
    Misconception(
        "global_min_max",
        "per-channel 的每個 channel 共用一個範圍",
        "包含 0 的那一步要逐元素和 0 比：torch.min(min_val, torch.zeros_like(min_val))。"
        "你先取了 min_val.min() 或 max_val.max()，所有 channel 就共用同一個範圍，scale 全都一樣。"
        "per-channel 的意義正是每個 channel 有自己的範圍與 scale。",
        AFFINE,
        public=channels_share_range,
        practice=RANGE_WITH_ZERO,
    ),
    Misconception(
        "docstring_equal_min_max",
        "照 docstring 把 min == max 算成 (1.0, 0)",
        "observer 的 docstring 說 min 等於 max 時回傳 (1.0, 0)，但程式不是這樣做：範圍先擴大到包含 0，全 0 時 scale 夾到 eps，"
        "單一值 3.0 得到 3 / 255。只有從沒看過資料的 observer 才回傳 (1.0, 0)；文件和程式不一致時，以程式為準。",
        EDGES,
        public=unit_scale_when_flat,
        practice=AFFINE_SCALE,
    ),
    Misconception(
        "no_eps_clamp",
        "scale 沒有夾到 eps",
        "範圍是 0 或極小時，(max − min) / (qmax − qmin) 是 0 或比 eps 還小，後面 min / scale 就會除以 0。"
        "observer 會把 scale 夾到下限：scale = torch.max(scale, torch.tensor([eps]))，全 0 的 tensor 因此得到 scale = eps。",
        EDGES,
        public=no_floor,
        practice=AFFINE_SCALE,
    ),
    Misconception(
        "ignores_eps_argument",
        "沒有用傳進來的 eps",
        "eps 是 scale 的下限，由呼叫的人決定：XNNPACKQuantizer 的 observer 用 eps=2**-12，不是 float32 的 eps。"
        "你的程式夾的是固定的預設值，所以傳 2**-12 進來時，範圍很小的 scale 就比該有的小。夾下限時用引數 eps。",
        QPARAMS_RULES,
        public=default_eps,
        practice=AFFINE_SCALE,
    ),
    Misconception(
        "zero_point_from_max",
        "zero point 從 max 那一端算",
        "zero point 的定義是讓 min_neg 對到 qmin：zero_point = qmin − round(min_neg / scale)。"
        "從 max 那端算（qmax − round(max / scale)）在範圍正常時常常一樣，但全 0 時會得到 qmax 而不是 qmin，"
        "剛好 .5 時捨入方向也相反。照 observer 的寫法從 min 那端算。",
        AFFINE,
        public=zero_point_from_max,
        practice=AFFINE_ZERO_POINT,
    ),
    Misconception(
        "ignores_quant_range",
        "整數範圍寫死成 int8 的 [-128, 127]",
        "quant_min 與 quant_max 是引數：uint8 是 [0, 255]，4 bit 是 [-8, 7]，weight 常用 [-127, 127]。"
        "你的程式在 [-128, 127] 上對，換一個範圍就錯，表示 scale 或 zero point 沒有用傳進來的範圍算。"
        "公式裡的 qmax − qmin 與 qmin 都要用引數。",
        SYMMETRIC,
        public=only_int8_right,
        practice=AFFINE_SCALE,
    ),
    Misconception(
        "symmetric_divides_by_qmax",
        "symmetric 的 scale 除錯了數",
        "symmetric 的 scale 是 max(|min|, max) / ((qmax − qmin) / 2)：[-128, 127] 除以 127.5，[-127, 127] 才是 127。"
        "你除的是別的數（例如 quant_max），在 [-127, 127] 上看不出差別，其他範圍就不對了。照 (qmax − qmin) / 2 除。",
        SYMMETRIC,
        public=symmetric_divisor,
        practice=SYMMETRIC_QPARAMS,
    ),
    Misconception(
        "symmetric_zero_point_midpoint",
        "signed 範圍的 symmetric zero point 不是 0",
        "symmetric 把實數 0 放在整數 0：在 signed 的範圍（quant_min < 0）zero point 就是 0。"
        "你用了範圍的中點之類的值，[-128, 127] 的中點 (qmin + qmax) // 2 是 -1，不是 0。練習裡 symmetric 只用在 signed 的範圍，zero point 直接給 0。",
        SYMMETRIC,
        public=symmetric_zero_point,
        practice=SYMMETRIC_QPARAMS,
    ),
    Misconception(
        "range_without_zero",
        "範圍沒有先擴大到包含 0",
        "實數 0 一定要能被精確表示，所以 observer 先把範圍擴大到包含 0：min_neg = min(min_val, 0)、max_pos = max(max_val, 0)。"
        "你直接用 min_val、max_val，只有正值、只有負值或單一值的資料範圍就太窄，scale 也跟著太小。先擴大範圍，再算 scale 與 zero point。",
        AFFINE,
        public=narrower_range,
        practice=RANGE_WITH_ZERO,
    ),
    Misconception(
        "rounds_after_quant_min",
        "zero point 加上 quant_min 之後才 round",
        "observer 先 round(min_neg / scale)，再拿 quant_min 去減：zero_point = qmin − round(min_neg / scale)。"
        "你先算 qmin − min_neg / scale 才 round；四捨六入五成雙看的是捨入那一刻的數，quant_min 是奇數（例如 -127）時，"
        "剛好 .5 的值就捨入到另一邊，差 1。照 observer 的順序：先 round，再和 quant_min 相減。",
        AFFINE,
        public=rounds_after_quant_min,
        practice=AFFINE_ZERO_POINT,
    ),
    Misconception(
        "round_half_away",
        "zero point 的 .5 捨入成遠離 0",
        "torch.round 是四捨六入五成雙：-2.5 捨入成 -2，不是 -3。你用了遠離 0 的四捨五入（像 C 的 round），"
        "min / scale 剛好是 .5 時 zero point 就差 1。直接用 torch.round。",
        AFFINE,
        public=rounds_half_away,
        practice=ROUND_TIES,
    ),
    Misconception(
        "round_half_up",
        "zero point 用 floor(x + 0.5) 四捨五入",
        "torch.round 是四捨六入五成雙：-1.5 捨入成 -2，floor(-1.5 + 0.5) 卻是 -1。min / scale 剛好是 .5 時，"
        "你的 zero point 就差 1。直接用 torch.round，不要自己寫捨入。",
        AFFINE,
        public=rounds_half_up,
        practice=ROUND_TIES,
    ),
    Misconception(
        "float64_arithmetic",
        "用 float64 算 scale",
        "observer 全程用 float32 tensor 算：max − min 在 float32 會捨入一次，float64 不會，差別落在 scale 的最後一位。"
        "練習要的是完全相等，所以不要轉成 double、不要用 Python float，照 observer 用 float32 tensor 算。",
        AFFINE,
        public=last_bit,
        practice=STEP_SIZE,
    ),
)


def _near_halves(scale: float, low: int, high: int) -> torch.Tensor:
    """(k + 0.5) · scale for k in [low, high), and the float32 values on either side of each."""
    base = (torch.arange(low, high, dtype=torch.float32) + 0.5) * torch.tensor(scale, dtype=torch.float32)
    return torch.cat(
        [base, torch.nextafter(base, torch.tensor(float("inf"))), torch.nextafter(base, torch.tensor(float("-inf")))]
    )


def _check_quantize_steps(quantize_steps: Any) -> list[str]:
    problems = []
    for scale, zero_point in ((0.0917, 4), (0.037, -6)):
        x = _near_halves(scale, -30, 30)
        want = (torch.round(x * (1.0 / scale)) + zero_point).to(torch.float64)
        got = quantize_steps(x.clone(), scale, zero_point)
        if not isinstance(got, torch.Tensor) or got.shape != x.shape:
            problems.append(f"scale={scale}：應該回傳和 x 一樣長的 tensor，你的是 {type(got).__name__}")
            continue
        wrong = (got.to(torch.float64) != want).nonzero().flatten().tolist()
        if wrong:
            i = wrong[0]
            problems.append(
                f"scale={scale}、zero_point={zero_point}：{len(wrong)} / {len(x)} 個值不同，"
                f"例如 x = {x[i].item()!r} 應該是 {int(want[i])}，你的是 {got[i].item()!r}"
            )
    return problems


QUANTIZE_STEPS = Practice(
    "quantize_steps",
    "寫 quantize_steps(x, scale, zero_point)：照 quantize_per_tensor 的運算順序，回傳 x 對到的整數（先不夾、不轉 dtype，"
    "回傳 float32 tensor 就好）。scale 是 Python float，zero_point 是 Python int。"
    "檢查用剛好在兩個整數中間、和它旁邊的 float32 值，每一個都要和 op 的結果完全相同。",
    "import torch\n\n\ndef quantize_steps(x, scale, zero_point):\n    raise NotImplementedError()\n",
    _check_quantize_steps,
    "照抄 op 的三步：inv_scale = 1.0 / scale（Python float 的除法）；torch.round(x * inv_scale)（float32 tensor 的乘法，"
    "四捨六入五成雙）；最後才 + zero_point。不要改成 x / scale、不要把 scale 先變成 tensor、不要轉成 Python float 或 double。",
    "import torch\n\n\n"
    "def quantize_steps(x, scale, zero_point):\n"
    "    inv_scale = 1.0 / scale\n"
    "    return torch.round(x * inv_scale) + zero_point\n",
    "數學上相等的寫法在 float32 裡捨入的地方不同：剛好在兩個整數中間附近的值，一個位元的差就會差 1。",
)


def _check_dequantize_steps(dequantize_steps: Any) -> list[str]:
    problems = []
    for q, scale, zero_point in (
        (torch.arange(0, 256).to(torch.uint8), 0.0271, 131),
        (torch.arange(-128, 128).to(torch.int8), 0.0173, -9),
    ):
        want = (q.to(torch.float32) - zero_point) * scale
        got = dequantize_steps(q.clone(), scale, zero_point)
        title = f"{str(q.dtype).removeprefix('torch.')} 的每個整數、scale={scale}、zero_point={zero_point}"
        if not isinstance(got, torch.Tensor) or got.shape != q.shape:
            problems.append(f"{title}：應該回傳和 q 一樣長的 tensor，你的是 {type(got).__name__}")
        elif got.dtype != torch.float32:
            problems.append(f"{title}：應該回傳 float32，你的是 {got.dtype}")
        elif not torch.equal(got, want):
            wrong = (got != want).nonzero().flatten().tolist()
            i = wrong[0]
            far = bool(((got - want).abs() > 0.25 * (want.abs() + 1e-6)).any())
            kind = "差得很遠" if far else "差在最後一位"
            problems.append(
                f"{title}：{len(wrong)} 個值不同（{kind}），例如 q = {int(q[i])} 應該是 {want[i].item()!r}，"
                f"你的是 {got[i].item()!r}"
            )
    return problems


DEQUANTIZE_STEPS = Practice(
    "dequantize_steps",
    "寫 dequantize_steps(q, scale, zero_point)：q 是 int8 或 uint8 的 tensor，照 dequantize_per_tensor 的順序還原成 "
    "float32。檢查用 uint8 與 int8 的每一個整數，每個結果都要和 op 的逐位元相同。",
    "import torch\n\n\ndef dequantize_steps(q, scale, zero_point):\n    raise NotImplementedError()\n",
    _check_dequantize_steps,
    "第一步就把 q 轉成 float32（在 uint8 裡算 q − 131 會溢位繞回來）；再減 zero point；最後乘 scale。"
    "不要展開成 q * scale − zero_point * scale，也不要用 float64 算。",
    "import torch\n\n\n"
    "def dequantize_steps(q, scale, zero_point):\n"
    "    return (q.to(torch.float32) - zero_point) * scale\n",
    "減法在 float32 裡對小整數是精確的，只有乘 scale 捨入一次；展開之後捨入兩次，很多值就差最後一位。",
)


QDQ_MISCONCEPTIONS = (
    Misconception(
        "quantize_returns_float",
        "quantize 沒有轉成要求的 dtype",
        "quantize 要回傳 dtype 引數指定的整數 tensor（int8 或 uint8），就像 convert_pt2e 插的 quantize_per_tensor。"
        "torch.round 與 torch.clamp 的結果還是 float tensor，轉成別的整數型別（例如 int32）也不對。最後夾完要 .to(dtype)。",
        QDQ_RULES,
        public=quantize_type_error,
        practice=SATURATE,
    ),
    Misconception(
        "dequantize_float64",
        "dequantize 回傳 float64",
        "dequantize_per_tensor 回傳 float32：模型其他部分都是 float32，後面的 op 也期待 float32。"
        "你轉成 float64 算，回傳的就是 float64 tensor。照 op 的寫法 q.to(torch.float32) 再減 zero point、乘 scale。",
        QDQ_RULES,
        public=dequantize_float64,
        practice=DEQUANTIZE_STEPS,
    ),
    Misconception(
        "quantize_clamps_to_dtype",
        "沒有夾到 [quant_min, quant_max]",
        "整數範圍由 quant_min 與 quant_max 決定，不一定是 dtype 能表示的整個範圍：4 bit 的 [-8, 7] 也放在 int8 裡。"
        "你的結果有超出 [quant_min, quant_max] 的值：可能夾的是 dtype 的範圍（或寫死的 [-128, 127]），或以為 .to(dtype) 會幫你夾，"
        "其實它只會溢位繞回來。用引數 quant_min、quant_max 夾，夾完才轉 dtype。",
        QDQ_RULES,
        public=dtype_range,
        practice=SATURATE,
    ),
    Misconception(
        "quantize_cast_then_clamp",
        "先轉成整數 dtype 才夾",
        ".to(torch.int8) 不會把超出範圍的值夾到端點，而是溢位繞回來：300 會變成 44 之類的值，之後再夾也救不回來。"
        "要先 torch.clamp 到 [quant_min, quant_max]，夾完才轉 dtype。",
        QDQ_RULES,
        public=wraps_around,
        practice=SATURATE,
    ),
    Misconception(
        "quantize_zero_point_before_round",
        "先加 zero point 才 round",
        "op 的順序是 round(x * (1 / scale)) + zero_point：先捨入、再加整數的 zero point。"
        "你先加 zero point 再 round，加法在 float32 裡多捨入一次，剛好在兩個整數中間附近的值就差 1。照 op 的順序寫。",
        QDQ,
        public=zero_point_before_rounding,
        practice=QUANTIZE_STEPS,
    ),
    Misconception(
        "quantize_float32_reciprocal",
        "scale 的倒數在 float32 裡算",
        "op 的 1.0 / scale 是 Python float（float64）的除法，乘進 float32 tensor 時才捨入成 float32。"
        "你先把 scale 變成 float32 tensor 再取倒數；scale 是 float32 算出來的值時結果一樣，"
        "但手寫的 scale（例如 0.0123）float32 存不下，兩種倒數會差最後一位，剛好在兩個整數中間附近的值就差 1。"
        "照抄 op：x * (1.0 / scale)，scale 保持 Python float。",
        QDQ,
        public=reciprocal_in_float32,
        practice=QUANTIZE_STEPS,
    ),
    Misconception(
        "quantize_divides",
        "quantize 用 x / scale",
        "數學上 x / scale 等於 x * (1 / scale)，但 float32 的捨入不同：剛好在兩個整數中間附近的值會差 1。"
        "quantize_per_tensor 的寫法是先算 inv_scale = 1.0 / scale，再乘上去；要逐位元相同就照抄這個順序。",
        QDQ,
        public=divides_by_scale,
        practice=QUANTIZE_STEPS,
    ),
    Misconception(
        "quantize_uses_python_round",
        "quantize 在 float64 裡捨入",
        "你把 tensor 轉成 Python float（或 double）逐一算，x * (1 / scale) 就是 float64 的乘法，"
        "剛好在兩個整數中間附近的值捨入方向會和 float32 的不同。用 float32 tensor 的 torch.round 算，和 op 一樣。",
        QDQ,
        public=rounds_in_float64,
        practice=QUANTIZE_STEPS,
    ),
    Misconception(
        "quantize_round_half_up",
        "quantize 的 .5 一律進位",
        "torch.round 是四捨六入五成雙：2.5 是 2、3.5 是 4。floor(v + 0.5) 或遠離 0 的四捨五入把每個 .5 都往上（或往外）進，"
        "剛好在中間的值就差 1。直接用 torch.round。",
        QDQ,
        public=quantize_rounds_half_up,
        practice=ROUND_TIES,
    ),
    Misconception(
        "dequantize_int_subtraction",
        "dequantize 在整數 dtype 裡做減法",
        "q 是 int8 或 uint8 時，q − zero_point 還是在 int8 / uint8 裡算，超出範圍就溢位繞回來，還原出完全不對的值。"
        "先 q.to(torch.float32)，再減 zero point、乘 scale。",
        QDQ_RULES,
        public=dequantize_wraps,
        practice=DEQUANTIZE_STEPS,
    ),
    Misconception(
        "dequantize_distributes",
        "dequantize 的運算順序和 op 不同",
        "你可能把 (q − zero_point) × scale 展開成 q × scale − zero_point × scale，或換成 float64 算完再轉回來。"
        "數學上相等，float32 卻多捨入一次，很多值差在最後一位。照 op 的順序：(q.to(torch.float32) − zero_point) * scale。",
        QDQ,
        public=dequantize_last_bits,
        practice=DEQUANTIZE_STEPS,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "calculate_qparams",
        QPARAMS_TITLE,
        ("calculate_qparams",),
        {
            "chapter_ranges": qparams_chapter,
            "fixed_ranges": qparams_fixed,
            "eps_and_channels": qparams_eps_and_channels,
        },
        misconceptions=QPARAMS_MISCONCEPTIONS,
        tolerances=EXACT_ROWS,
    ),
    Exercise(
        "quantize_dequantize",
        QDQ_TITLE,
        ("quantize", "dequantize"),
        {"chapter_data": quantize_chapter},
        misconceptions=QDQ_MISCONCEPTIONS,
        tolerances=EXACT_ROWS,
    ),
)
