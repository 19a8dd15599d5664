"""Answer key of M02-3: the qparams formulas of torchao's observers, quantize and dequantize."""

from __future__ import annotations

import torch

EPS = torch.finfo(torch.float32).eps


def calculate_qparams(
    min_val: torch.Tensor,
    max_val: torch.Tensor,
    quant_min: int,
    quant_max: int,
    symmetric: bool,
    eps: float = EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    min_neg = torch.min(min_val, torch.zeros_like(min_val))  # the range always contains 0
    max_pos = torch.max(max_val, torch.zeros_like(max_val))
    eps_tensor = torch.tensor([eps], dtype=torch.float32)
    if symmetric:
        scale = torch.max(-min_neg, max_pos) / (float(quant_max - quant_min) / 2)
        scale = torch.max(scale, eps_tensor)
        zero_point = torch.zeros(scale.shape, dtype=torch.int64)
    else:
        scale = (max_pos - min_neg) / float(quant_max - quant_min)
        scale = torch.max(scale, eps_tensor)
        zero_point = quant_min - torch.round(min_neg / scale).to(torch.int)
        zero_point = torch.clamp(zero_point, quant_min, quant_max)
    return scale, zero_point


def quantize(
    x: torch.Tensor, scale: float, zero_point: int, quant_min: int, quant_max: int, dtype: torch.dtype
) -> torch.Tensor:
    inv_scale = 1.0 / scale
    return torch.clamp(torch.round(x * inv_scale) + zero_point, quant_min, quant_max).to(dtype)


def dequantize(q: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    return (q.to(torch.float32) - zero_point) * scale
