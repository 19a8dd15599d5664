"""Answer key of M02-1: every observer's quantization error on the same batches, and the best one."""

from __future__ import annotations

import torch

PER_CHANNEL = (torch.per_channel_affine, torch.per_channel_symmetric)


def fake_quantize(observer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Quantize then dequantize ``x`` with the observer's qparams, range and (per-channel) axis."""
    scale, zero_point = observer.calculate_qparams()
    if observer.qscheme in PER_CHANNEL:
        return torch.fake_quantize_per_channel_affine(
            x, scale, zero_point.to(torch.int32), observer.ch_axis, observer.quant_min, observer.quant_max
        )
    return torch.fake_quantize_per_tensor_affine(
        x, float(scale), int(zero_point), observer.quant_min, observer.quant_max
    )


def observer_errors(observers: dict[str, torch.nn.Module], batches: list[torch.Tensor]) -> dict[str, float]:
    data = torch.cat(batches)
    errors = {}
    for name, observer in observers.items():
        for batch in batches:
            observer(batch)
        errors[name] = float(((data - fake_quantize(observer, data)) ** 2).mean())
    return errors


def best_observer(observers: dict[str, torch.nn.Module], batches: list[torch.Tensor]) -> str:
    errors = observer_errors(observers, batches)
    return min(errors, key=errors.get)
