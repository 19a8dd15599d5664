"""The small models the chapters use, looked up by name.

Every model is tiny and runs on the CPU in milliseconds. Their ``forward`` code is
written so that ``torch.export`` gives the node names the chapters refer to, e.g.
``conv_relu`` exports to ``x, conv_weight, conv_bias, conv2d, relu``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

IMAGE_SHAPE = (3, 16, 16)
"""Channel, height and width of the image models' input."""


class ConvRelu(nn.Module):
    """conv → relu."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv(x))


class Residual(nn.Module):
    """conv1 → bn1 → relu → conv2 → bn2 → (+ x) → relu; 3 channels so the add works."""

    def __init__(self, channels: int = 3) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + x)


class CatPool(nn.Module):
    """x feeds two convs → cat on channels → max_pool2d."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, 4, 3, padding=1)
        self.conv_b = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.cat([self.conv_a(x), self.conv_b(x)], dim=1))


class ConvBnRelu(nn.Module):
    """conv → bn → relu (BN folds into the conv in prepare_pt2e)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class SmallCnn(nn.Module):
    """conv → relu → max_pool2d → conv → relu → flatten → linear: a whole small classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 8 * 8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class LinearRelu(nn.Module):
    """linear → relu on a (batch, 16) input."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 8)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.linear(x))


class Mlp(nn.Module):
    """linear → relu → linear on a (batch, 16) input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


ModelFactory = Callable[[], nn.Module]

MODELS: dict[str, ModelFactory] = {
    "conv_relu": ConvRelu,
    "residual": Residual,
    "cat_pool": CatPool,
    "conv_bn_relu": ConvBnRelu,
    "small_cnn": SmallCnn,
    "linear_relu": LinearRelu,
    "mlp": Mlp,
}

INPUT_SHAPES: dict[str, tuple[int, ...]] = {
    "linear_relu": (16,),
    "mlp": (16,),
}
"""Per-sample input shape of the models whose input is not an image."""


def get_model(name: str) -> nn.Module:
    """A fresh instance of the model called ``name`` (weights from the global RNG)."""
    try:
        factory = MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}") from None
    return factory()


def example_inputs(batch: int = 4, name: str | None = None) -> tuple[torch.Tensor, ...]:
    """A tuple with one random input batch: ``(batch, 3, 16, 16)`` for the image models.

    Pass ``name`` for a model whose input is not an image (e.g. ``"mlp"``).
    """
    shape = INPUT_SHAPES.get(name or "", IMAGE_SHAPE)
    return (torch.randn(batch, *shape),)
