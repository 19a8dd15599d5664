"""Answer key of M04-1: fold a BatchNorm into the conv in front of it."""

from __future__ import annotations

import torch
from torch import nn


def fold_bn(
    conv_w: torch.Tensor, conv_b: torch.Tensor | None, bn: nn.modules.batchnorm._BatchNorm
) -> tuple[torch.Tensor, torch.Tensor]:
    mean, var = bn.running_mean, bn.running_var
    gamma = bn.weight if bn.weight is not None else torch.ones_like(mean)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(mean)
    bias = conv_b if conv_b is not None else torch.zeros_like(mean)
    scale = gamma / torch.sqrt(var + bn.eps)  # 每個 output channel 一個倍數
    weight = conv_w * scale.reshape(-1, *([1] * (conv_w.dim() - 1)))
    return weight.detach(), ((bias - mean) * scale + beta).detach()
