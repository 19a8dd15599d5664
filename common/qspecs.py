"""Ready-made QuantizationSpec objects the chapters share."""

from __future__ import annotations

import torch

from common.pt2e import MinMaxObserver, PerChannelMinMaxObserver, QuantizationSpec


def act_spec() -> QuantizationSpec:
    """Activations: int8 per-tensor affine [-128, 127], observed by MinMaxObserver."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def weight_spec(per_channel: bool = True) -> QuantizationSpec:
    """Weights: int8 symmetric [-127, 127]; per output channel (``ch_axis=0``) by default."""
    if per_channel:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-127,
            quant_max=127,
            qscheme=torch.per_channel_symmetric,
            ch_axis=0,
            observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
        )
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-127,
        quant_max=127,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
