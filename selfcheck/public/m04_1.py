"""Public cases of M04-1 BN 折進 conv (fold_bn) on the chapter's own models.

Each case folds a BN of a chapter model with prepare_pt2e (no labels: only the fold
happens) and compares the student's ``fold_bn`` with the constants on the graph. The
evidence is canonical: the shapes returned, and the output channels whose weight or bias
differ from the graph's (empty when right), so any correct way of computing the fold gives
the same data.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError

TITLE = "fold_bn：把 BN 折進 conv 的 weight 與 bias"

RTOL, ATOL = 1e-4, 1e-5


def trained_like(model: nn.Module, seed: int) -> nn.Module:
    """Every BN gets γ, β, running mean and variance away from the defaults; eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                n = bn.num_features
                bn.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                bn.bias.copy_(torch.rand(n, generator=generator) - 0.5)
                bn.running_mean.copy_(torch.rand(n, generator=generator) * 2 - 1)
                bn.running_var.copy_(torch.rand(n, generator=generator) * 1.5 + 0.5)
    return model.eval()


def graph_constants(
    model: nn.Module, seed: int, conv: str, shape: tuple[int, ...] = (2, 3, 16, 16)
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias that prepare_pt2e folded into the conv node called ``conv``."""
    from common.pt2e import Quantizer, export_module, prepare_pt2e

    class NoLabels(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    folded = prepare_pt2e(export_module(model, seeded_inputs(seed, shape)), NoLabels())
    node = next(n for n in folded.graph.nodes if n.name == conv)
    weight, bias = node.args[1], node.args[2]
    return folded.get_parameter(weight.target).detach(), folded.get_parameter(bias.target).detach()


def _tensor(value: Any, what: str) -> torch.Tensor:
    if type(value) not in (torch.Tensor, nn.Parameter):
        raise EvidenceError(f"{what} 應該是 torch.Tensor，收到 {type(value).__name__}")
    tensor = torch.Tensor.detach(value)
    if not tensor.is_floating_point():
        raise EvidenceError(f"{what} 的 dtype {tensor.dtype} 不是浮點數")
    return tensor


def channels_off(got: torch.Tensor, want: torch.Tensor) -> list[int]:
    """The output channels (first dimension) where ``got`` is not within RTOL / ATOL of ``want``."""
    if tuple(got.shape) != tuple(want.shape):
        return list(range(want.shape[0]))
    close = torch.isclose(got.to(torch.float64), want.to(torch.float64), rtol=RTOL, atol=ATOL)
    return [c for c in range(want.shape[0]) if not bool(close[c].all())]


def judge_fold(
    ns: Namespace,
    model: nn.Module,
    conv: nn.Module,
    bn: nn.Module,
    node: str,
    seed: int,
    shape: tuple[int, ...] = (2, 3, 16, 16),
) -> dict[str, Any]:
    """The student's fold of ``conv`` and ``bn`` against the graph's constants: shapes and the channels that differ."""
    graph_weight, graph_bias = graph_constants(model, seed, node, shape)
    conv_b = conv.bias.detach().clone() if conv.bias is not None else None
    result = ns["fold_bn"](conv.weight.detach().clone(), conv_b, bn)
    if type(result) not in (tuple, list) or len(result) != 2:
        raise EvidenceError(f"fold_bn 應該回傳 (weight, bias) 兩個 tensor，收到 {type(result).__name__}")
    weight, bias = _tensor(result[0], "回傳的 weight"), _tensor(result[1], "回傳的 bias")
    return {
        "weight_shape": list(weight.shape),
        "bias_shape": list(bias.shape),
        "weight_channels_off": channels_off(weight, graph_weight),
        "bias_channels_off": channels_off(bias, graph_bias),
    }


def residual_conv1(ns: Namespace, seed: int) -> Any:
    """residual's conv1 (no bias) and bn1: the graph's conv1_weight and conv1_weight_bias."""
    from common.models import get_model

    model = trained_like(get_model("residual"), seed)
    return judge_fold(ns, model, model.conv1, model.bn1, "conv2d", seed)


def conv_bn_relu(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu's conv (with a bias) and bn: the graph's conv_weight and conv_bias."""
    from common.models import get_model

    model = trained_like(get_model("conv_bn_relu"), seed)
    return judge_fold(ns, model, model.conv, model.bn, "conv2d", seed)


class Conv1dBn(nn.Module):
    """Conv1d → BatchNorm1d(eps=0.1) on a (batch, 3, length) input: a 3-D weight and an eps that matters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.bn = nn.BatchNorm1d(4, eps=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def conv1d_eps(ns: Namespace, seed: int) -> Any:
    """A Conv1d (3-D weight) and a BatchNorm1d with eps=0.1 and small variances."""
    model = trained_like(Conv1dBn(), seed)
    with torch.no_grad():
        model.bn.running_var.mul_(0.2)
    return judge_fold(ns, model, model.conv, model.bn, "conv1d", seed, (2, 3, 10))


PUBLIC = declare(
    __name__,
    Exercise(
        "fold_bn",
        TITLE,
        ("fold_bn",),
        {"residual_conv1": residual_conv1, "conv_bn_relu": conv_bn_relu, "conv1d_eps": conv1d_eps},
    ),
)
