"""Public cases of M04-2 linear + BN，以及什麼時候不折 (bn_survives) on the chapter's own models.

The models are the ones section C of the chapter tabulates (conv → BN, conv → relu → BN,
input → BN, linear → BN on 2-D and 3-D inputs, conv → BN whose conv output also feeds an
add). The evidence is the student's prediction for every BN, by model and node name.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError

TITLE = "bn_survives：預測哪些 BN 在 prepare_pt2e 之後還在"


class ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class ConvReluBn(ConvBn):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.conv(x)))


class InputBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn, self.conv = nn.BatchNorm2d(3), nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.bn(x))


class ConvBnPlusY(ConvBn):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.bn(y) + y


class LinearBn(nn.Module):
    def __init__(self, features: int = 8, out: int = 4) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, out), nn.BatchNorm1d(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class SeqLinearBn(nn.Module):
    def __init__(self, channels: int = 4, length: int = 4) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(length, length), nn.BatchNorm1d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


def predictions(ns: Namespace, label: str, model: nn.Module, shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    """``bn_survives(bn)`` for every batch_norm node of the exported ``model`` (keys ``label/node``)."""
    from common.pt2e import export_module

    gm = export_module(model.eval(), seeded_inputs(seed, shape))
    found: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and "batch_norm" in str(node.target):
            answer = ns["bn_survives"](node)
            if type(answer) is not bool:
                raise EvidenceError(f"bn_survives 應該回傳 True 或 False，收到 {type(answer).__name__}")
            found[f"{label}/{node.name}"] = answer
    return found


def conv_models(ns: Namespace, seed: int) -> Any:
    image = (2, 3, 8, 8)
    return {
        **predictions(ns, "conv → BN", ConvBn(), image, seed),
        **predictions(ns, "conv → relu → BN", ConvReluBn(), image, seed),
        **predictions(ns, "輸入 → BN → conv", InputBn(), image, seed),
        **predictions(ns, "conv → BN，conv 的輸出另外給 add", ConvBnPlusY(), image, seed),
    }


def linear_models(ns: Namespace, seed: int) -> Any:
    return {
        **predictions(ns, "linear → BN（2-D）", LinearBn(), (16, 8), seed),
        **predictions(ns, "linear → BN（3-D）", SeqLinearBn(), (16, 4, 4), seed),
    }


PUBLIC = declare(
    __name__,
    Exercise(
        "bn_survives",
        TITLE,
        ("bn_survives",),
        {"conv_models": conv_models, "linear_models": linear_models},
    ),
)
