"""Public cases of M02-3 自己算 scale 與 zero point (calculate_qparams, quantize / dequantize).

Also how the student's tensors become evidence, shared with the hidden cases: exact
``torch.Tensor`` values only, scale float32, zero point and quantized values integers.
The public cases use the chapter's own inputs: a few ranges (random, all zeros, one value,
only negatives), the XNNPACK eps, a small per-channel weight, and seeded data.
"""

from __future__ import annotations

from typing import Any

import torch

from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import EvidenceError

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
    ties = _ties(0.1, -40, 40)
    got = ns["quantize"](ties, 0.1, 3, -128, 127, torch.int8)
    rows["quantize 剛好在 .5 附近（scale=0.1, zero_point=3）"] = tensor_values(
        got, "quantize 的結果", integer=True, dtype=torch.int8
    )
    far = torch.tensor([1e4, -1e4, 300.0, -300.0, 6.5, -6.5, 0.31, -0.29, 0.02, -0.5])
    got = ns["quantize"](far, 0.05, -1, -8, 7, torch.int8)
    rows["quantize 超出 4 bit 範圍 [-8,7]"] = tensor_values(got, "quantize 的結果", integer=True, dtype=torch.int8)
    return rows


PUBLIC = declare(
    __name__,
    Exercise(
        "calculate_qparams",
        QPARAMS_TITLE,
        ("calculate_qparams",),
        {"chapter_ranges": qparams_chapter, "eps_and_channels": qparams_eps_and_channels},
    ),
    Exercise("quantize_dequantize", QDQ_TITLE, ("quantize", "dequantize"), {"chapter_data": quantize_chapter}),
)
