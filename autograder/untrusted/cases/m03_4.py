"""M03-4 共用 qparams: AddQuantizer and CatQuantizer, run on hidden models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.untrusted.cases.base import Exercise, Namespace, quantize_model, seed_size, seeded_inputs

NOTEBOOK = "M03-4"


class TwoInputAdd(nn.Module):
    """a + b, the two inputs on very different ranges."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class BranchAdds(nn.Module):
    """Two conv branches added, then a third branch added to the sum, then relu."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.left = nn.Conv2d(3, channels, 3, padding=1)
        self.right = nn.Conv2d(3, channels, 1)
        self.third = nn.Conv2d(3, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.left(x) + self.right(x)
        return torch.relu(y + self.third(x))


class ConstantAdds(nn.Module):
    """Adds whose second operand is a model constant or a Python scalar."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.register_buffer("offset", torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) + self.offset
        return torch.relu(y) + 0.5


class SelfAdd(nn.Module):
    """relu(x) added to itself: add(r, r) with one producer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(x)
        return r + r


class TwoAdds(nn.Module):
    """(a + b) + c: two adds in a row."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) + c


class ThreeWayCat(nn.Module):
    """Three branches of different ranges concatenated, then max-pooled."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.a(x), self.b(x) * 4, torch.relu(x)], dim=1)
        return torch.max_pool2d(y, 2)


class CatWithConstant(nn.Module):
    """cat of an activation, a model constant and the activation again."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(2, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(x)
        return torch.cat([r, self.table, r], dim=0)


# --- AddQuantizer -------------------------------------------------------------------------------


def add_separate(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 5, 12)
    inputs = seeded_inputs(seed, (4, features), (4, features), scales=(1.0, 5.0))
    return quantize_model(ns["AddQuantizer"](share=False), TwoInputAdd(), inputs, seed)


def add_shared_residual(ns: Namespace, seed: int) -> Any:
    from common.models import get_model

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    return quantize_model(ns["AddQuantizer"](share=True), get_model("residual"), inputs, seed)


def add_shared_branches(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return quantize_model(ns["AddQuantizer"](share=True), BranchAdds(seed_size(seed, 2, 6)), inputs, seed)


def add_constants(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 4, 9)
    inputs = seeded_inputs(seed, (3, features))
    return quantize_model(ns["AddQuantizer"](share=True), ConstantAdds(features), inputs, seed)


def add_self(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (4, seed_size(seed, 3, 10)))
    return quantize_model(ns["AddQuantizer"](share=True), SelfAdd(), inputs, seed)


def add_pre_annotated(ns: Namespace, seed: int) -> Any:
    from autograder.untrusted.cases.probes import ChainQuantizer, FirstAddClaimer, LateAddClaimer

    inputs = seeded_inputs(seed, (4, 6), (4, 6), (4, 6))
    chain = ChainQuantizer([FirstAddClaimer(), ns["AddQuantizer"](share=True), LateAddClaimer()])
    return quantize_model(chain, TwoAdds(), inputs, seed, convert=False)


# --- CatQuantizer -------------------------------------------------------------------------------


def cat_pool(ns: Namespace, seed: int) -> Any:
    from common.models import get_model

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    return quantize_model(ns["CatQuantizer"](), get_model("cat_pool"), inputs, seed)


def cat_three_way(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return quantize_model(ns["CatQuantizer"](), ThreeWayCat(seed_size(seed, 2, 5)), inputs, seed)


def cat_constant_and_repeat(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 8)
    inputs = seeded_inputs(seed, (2, features))
    return quantize_model(ns["CatQuantizer"](), CatWithConstant(features), inputs, seed)


EXERCISES = {
    "add_quantizer": Exercise(
        NOTEBOOK,
        "add_quantizer",
        "AddQuantizer：add 的輸入與輸出共用 qparams",
        ("AddQuantizer",),
        {
            "separate": add_separate,
            "shared_residual": add_shared_residual,
            "shared_branches": add_shared_branches,
            "constants": add_constants,
            "self_add": add_self,
            "pre_annotated": add_pre_annotated,
        },
    ),
    "cat_quantizer": Exercise(
        NOTEBOOK,
        "cat_quantizer",
        "CatQuantizer：cat 的所有輸入與輸出共用 qparams",
        ("CatQuantizer",),
        {
            "cat_pool": cat_pool,
            "three_way": cat_three_way,
            "constant_and_repeat": cat_constant_and_repeat,
        },
    ),
}
