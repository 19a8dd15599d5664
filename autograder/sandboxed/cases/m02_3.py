"""M02-3 自己算 scale 與 zero point: calculate_qparams, quantize and dequantize.

Every case returns, for each hidden input, what the student's function gave (``mine``) and
what torchao gave on the same input (``torchao``: the observer's ``calculate_qparams`` or the
``quantized_decomposed`` op that ``convert_pt2e`` puts in the graph). The checks compare the
student's values with the ``torchao`` values of the answer key's evidence, computed in the
judge's own process, for exact equality.

The ``.5`` ties run on an odd ``quant_min`` too (int8 [-127, 127] affine): rounding after adding
``quant_min`` turns a tie the other way there. One near-ties row has a hand-written scale (four
decimals) that float32 cannot hold, chosen so that its reciprocal in float32 differs from the op's
``1.0 / scale`` (float64, then float32) by the last bit; every other scale is a float32 value, where
the two reciprocals are always equal. Quantize rows keep their exact ``scale``.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.sandboxed.cases.base import Namespace, seed_size, with_hidden_cases
from selfcheck.public.m02_3 import (
    EPS,
    PUBLIC,
    XNNPACK_EPS,
    observer,
    student_qparams,
    tensor_values,
)


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 7919 + salt)


# --- calculate_qparams --------------------------------------------------------------------------

# (name, dtype of the observer, quant_min, quant_max, symmetric)
AFFINE_RANGES = (
    ("int8 [-128,127] affine", torch.int8, -128, 127, False),
    ("uint8 [0,255] affine", torch.uint8, 0, 255, False),
    ("4 bit [-8,7] affine", torch.int8, -8, 7, False),
)
SYMMETRIC_RANGES = (
    ("int8 [-128,127] symmetric", torch.int8, -128, 127, True),
    ("int8 [-127,127] symmetric", torch.int8, -127, 127, True),
    ("4 bit [-8,7] symmetric", torch.int8, -8, 7, True),
)


def _qparams_case(
    ns: Namespace,
    label: str,
    batches: list[torch.Tensor],
    config: tuple[str, torch.dtype, int, int, bool],
    eps: float = EPS,
    per_channel: bool = False,
) -> dict[str, Any]:
    """Run one observer over ``batches``; ask the student for the qparams of its min / max."""
    name, _, qmin, qmax, symmetric = config
    seen = observer(qmin, qmax, symmetric, eps, per_channel)
    for batch in batches:
        seen(batch)
    scale, zero_point = seen.calculate_qparams()
    torchao = {"scale": [float(s) for s in scale.flatten()], "zero_point": [int(z) for z in zero_point.flatten()]}
    mine = student_qparams(ns, seen, qmin, qmax, symmetric, eps)
    return {
        "label": f"{label}，{name}" + (f"，eps={eps:g}" if eps != EPS else ""),
        "min_val": [round(float(v), 8) for v in seen.min_val.flatten()],
        "max_val": [round(float(v), 8) for v in seen.max_val.flatten()],
        "mine": mine,
        "torchao": torchao,
    }


def _seeded_batches(seed: int, salt: int, count: int = 3) -> list[torch.Tensor]:
    g = _generator(seed, salt)
    spread = 0.05 + 4 * torch.rand(1, generator=g).item()
    shift = (torch.rand(1, generator=g).item() - 0.5) * spread
    return [torch.randn(seed_size(seed + i, 20, 60), generator=g) * spread + shift for i in range(count)]


def qparams_affine(ns: Namespace, seed: int) -> Any:
    rows = []
    for i, config in enumerate(AFFINE_RANGES):
        for j in range(3):
            rows.append(_qparams_case(ns, f"亂數資料 {j + 1}", _seeded_batches(seed, 10 * i + j), config))
    return rows


def qparams_symmetric(ns: Namespace, seed: int) -> Any:
    rows = []
    for i, config in enumerate(SYMMETRIC_RANGES):
        for j in range(3):
            rows.append(_qparams_case(ns, f"亂數資料 {j + 1}", _seeded_batches(seed, 100 + 10 * i + j), config))
    return rows


def qparams_zero_range(ns: Namespace, seed: int) -> Any:
    """All zeros, and ranges so narrow that the scale falls below eps."""
    g = _generator(seed, 200)
    tiny = float(torch.rand(1, generator=g)) * 1e-6
    cases = [
        ("全部是 0", [torch.zeros(seed_size(seed, 3, 9))]),
        (f"範圍極小（±{tiny:.2g}）", [torch.tensor([-tiny, tiny * 0.5])]),
        (f"只有一個極小的正數 {tiny / 7:.2g}", [torch.tensor([tiny / 7])]),
    ]
    return [
        _qparams_case(ns, label, batches, config)
        for label, batches in cases
        for config in (AFFINE_RANGES[0], SYMMETRIC_RANGES[1])
    ]


def qparams_one_sided(ns: Namespace, seed: int) -> Any:
    """Ranges that do not contain 0: a single value, only negatives, only positives."""
    g = _generator(seed, 300)
    single = 0.5 + 3 * float(torch.rand(1, generator=g))
    negative = -(torch.rand(seed_size(seed, 5, 15), generator=g) * 3 + 0.25)
    positive = torch.rand(seed_size(seed, 5, 15), generator=g) * 2 + 0.5
    cases = [
        (f"只有一個值 {single:.4g}", [torch.tensor([single])]),
        (f"一個值重複（全是 {-single:.4g}）", [torch.full((4,), -single)]),
        ("只有負值", [negative]),
        ("只有正值", [positive]),
    ]
    return [
        _qparams_case(ns, label, batches, config)
        for label, batches in cases
        for config in (AFFINE_RANGES[0], AFFINE_RANGES[1], SYMMETRIC_RANGES[0])
    ]


ODD_AFFINE = ("int8 [-127,127] affine", torch.int8, -127, 127, False)
"""An affine range whose quant_min is odd: round(quant_min − min / scale) turns its ties the other way."""


def qparams_ties(ns: Namespace, seed: int) -> Any:
    """min / scale lands exactly on .5: the zero point needs torch.round (half to even), on an even and an odd
    quant_min."""
    rows = []
    step = 2.0 ** -(seed % 3)  # scale = step, exactly representable
    for config, halves in ((AFFINE_RANGES[0], (-0.5, -1.5, -2.5, -3.5, -6.5)), (ODD_AFFINE, (-0.5, -2.5, -5.5))):
        _, _, qmin, qmax, _ = config
        for half in halves:
            low = half * step
            high = low + (qmax - qmin) * step
            rows.append(_qparams_case(ns, f"min={low:g}, max={high:g}", [torch.tensor([low, high])], config))
    return rows


def qparams_per_channel(ns: Namespace, seed: int) -> Any:
    """A weight of C output channels, one scale per channel; some channels are all 0 or one-sided."""
    g = _generator(seed, 400)
    channels = seed_size(seed, 24, 40)
    weight = torch.randn(channels, 3, 3, 3, generator=g) * (torch.rand(channels, 1, 1, 1, generator=g) * 2 + 0.01)
    weight[1] = 0.0
    weight[2] = -weight[2].abs()
    weight[3] = weight[3].abs()
    return [
        _qparams_case(ns, f"{channels} 個 channel 的 weight", [weight], config, per_channel=True)
        for config in (SYMMETRIC_RANGES[1], AFFINE_RANGES[0])
    ]


def qparams_eps(ns: Namespace, seed: int) -> Any:
    """XNNPACKQuantizer's observers use eps = 2**-12: a small range is clamped to it."""
    g = _generator(seed, 500)
    small = torch.randn(seed_size(seed, 8, 20), generator=g) * 1e-3
    cases = [("全部是 0", [torch.zeros(4)]), ("範圍很小（約 ±0.003）", [small])]
    return [
        _qparams_case(ns, label, batches, config, eps=XNNPACK_EPS)
        for label, batches in cases
        for config in (AFFINE_RANGES[0], SYMMETRIC_RANGES[1])
    ]


# --- quantize / dequantize ----------------------------------------------------------------------


def _ops() -> tuple[Any, Any]:
    import common.pt2e  # noqa: F401  (registers the quantized_decomposed ops)

    return (
        torch.ops.quantized_decomposed.quantize_per_tensor.default,
        torch.ops.quantized_decomposed.dequantize_per_tensor.default,
    )


def _quantize_case(
    ns: Namespace, label: str, x: torch.Tensor, scale: float, zero_point: int, qmin: int, qmax: int, dtype: torch.dtype
) -> dict[str, Any]:
    quantize_op, _ = _ops()
    expected = quantize_op(x, scale, zero_point, qmin, qmax, dtype)
    got = ns["quantize"](x.clone(), scale, zero_point, qmin, qmax, dtype)
    dtype_name = str(dtype).removeprefix("torch.")
    return {
        "label": f"{label}（scale={scale:.6g}, zero_point={zero_point}, [{qmin},{qmax}], {dtype_name}）",
        "x": [float(v) for v in x.flatten()],
        "mine": tensor_values(got, "quantize 的結果", integer=True, dtype=dtype),
        "torchao": [int(v) for v in expected.flatten()],
        "scale": float(scale),
    }


def _observed_qparams(x: torch.Tensor, qmin: int, qmax: int, dtype: torch.dtype) -> tuple[float, int]:
    from common.pt2e import MinMaxObserver

    observer = MinMaxObserver(dtype=dtype, quant_min=qmin, quant_max=qmax)
    observer(x)
    scale, zero_point = observer.calculate_qparams()
    return float(scale), int(zero_point)


def quantize_seeded(ns: Namespace, seed: int) -> Any:
    rows = []
    for i, (qmin, qmax, dtype) in enumerate(((-128, 127, torch.int8), (0, 255, torch.uint8))):
        g = _generator(seed, 600 + i)
        x = torch.randn(seed_size(seed, 200, 400), generator=g) * (0.5 + 3 * float(torch.rand(1, generator=g)))
        scale, zero_point = _observed_qparams(x[: x.numel() // 2], qmin, qmax, dtype)  # the rest may fall outside
        rows.append(_quantize_case(ns, "亂數資料", x, scale, zero_point, qmin, qmax, dtype))
    return rows


def near_ties(scale: float, low: int, high: int) -> torch.Tensor:
    """Values right at (k + 0.5) · scale and a few float32 steps either side."""
    k = torch.arange(low, high, dtype=torch.float32)
    base = (k + 0.5) * torch.tensor(scale, dtype=torch.float32)
    values, up, down = [base], base, base
    for _ in range(3):
        up = torch.nextafter(up, torch.tensor(float("inf")))
        down = torch.nextafter(down, torch.tensor(float("-inf")))
        values += [up, down]
    return torch.cat(values)


def hand_written_scale(g: torch.Generator) -> float:
    """A scale written with four decimals (0.0123) that float32 cannot hold, whose reciprocal taken in float32
    (1 / float32(scale)) is not the op's (1.0 / scale in float64, rounded to float32 when it multiplies)."""
    while True:
        scale = int(torch.randint(30, 800, (1,), generator=g)) / 10_000
        inverse = torch.tensor(1.0 / scale, dtype=torch.float32)
        if float(torch.tensor(scale, dtype=torch.float32)) != scale and inverse != 1 / torch.tensor(scale):
            return scale


def quantize_near_ties(ns: Namespace, seed: int) -> Any:
    g = _generator(seed, 700)
    rows = []
    for qmin, qmax, dtype in ((-128, 127, torch.int8), (0, 255, torch.uint8)):
        scale = float(torch.empty(1).uniform_(0.003, 0.08, generator=g))
        zero_point = int(torch.randint(qmin + 20, qmax - 20, (1,), generator=g))
        x = near_ties(scale, qmin - zero_point - 2, qmax - zero_point + 2)
        rows.append(_quantize_case(ns, "剛好在兩個整數中間附近的值", x, scale, zero_point, qmin, qmax, dtype))
    scale = hand_written_scale(g)
    zero_point = int(torch.randint(-100, 100, (1,), generator=g))
    x = near_ties(scale, -128 - zero_point - 2, 127 - zero_point + 2)
    label = "手寫的 scale（float32 存不下的 Python float），剛好在兩個整數中間附近的值"
    rows.append(_quantize_case(ns, label, x, scale, zero_point, -128, 127, torch.int8))
    return rows


def quantize_clamp(ns: Namespace, seed: int) -> Any:
    g = _generator(seed, 800)
    rows = []
    x = torch.randn(seed_size(seed, 100, 200), generator=g) * 2
    x[:4] = torch.tensor([1e4, -1e4, 300.0, -300.0])  # far outside: clamped, never wrapped around
    for qmin, qmax, dtype in (
        (-8, 7, torch.int8),
        (-128, 127, torch.int8),
        (0, 255, torch.uint8),
        (0, 15, torch.uint8),
    ):
        scale, zero_point = _observed_qparams(x[4:], qmin, qmax, dtype)
        rows.append(_quantize_case(ns, "含遠超出範圍的值", x, scale, zero_point, qmin, qmax, dtype))
    return rows


def dequantize_all(ns: Namespace, seed: int) -> Any:
    """Every integer of the range, dequantized with a few seeded (scale, zero point)."""
    _, dequantize_op = _ops()
    g = _generator(seed, 900)
    rows = []
    for qmin, qmax, dtype in ((-128, 127, torch.int8), (0, 255, torch.uint8), (-128, 127, torch.int8)):
        scale = float(torch.empty(1).uniform_(0.001, 0.2, generator=g))
        zero_point = int(torch.randint(qmin, qmax + 1, (1,), generator=g))
        q = torch.arange(qmin, qmax + 1).to(dtype)
        expected = dequantize_op(q, scale, zero_point, qmin, qmax, dtype)
        got = ns["dequantize"](q.clone(), scale, zero_point)
        rows.append(
            {
                "label": f"[{qmin},{qmax}] 的每個整數（scale={scale:.6g}, zero_point={zero_point}）",
                "x": list(range(qmin, qmax + 1)),
                "mine": tensor_values(got, "dequantize 的結果", integer=False, dtype=torch.float32),
                "torchao": [float(v) for v in expected],
            }
        )
    return rows


EXERCISES = with_hidden_cases(
    PUBLIC,
    calculate_qparams={
        "affine": qparams_affine,
        "symmetric": qparams_symmetric,
        "zero_range": qparams_zero_range,
        "one_sided": qparams_one_sided,
        "ties": qparams_ties,
        "per_channel": qparams_per_channel,
        "eps": qparams_eps,
    },
    quantize_dequantize={
        "seeded": quantize_seeded,
        "near_ties": quantize_near_ties,
        "clamp": quantize_clamp,
        "dequantize": dequantize_all,
    },
)
