"""M03-4 共用 qparams: AddQuantizer and CatQuantizer, run on hidden models.

Every case returns ``labels`` (the student's annotations, sharing resolved into groups, read
right after the student's ``annotate``), ``prepared`` (observers after calibration) and, where
the check needs it, ``converted`` (q/dq paths). Every model is the same on every seed; seeds
change only sizes, weights and inputs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import swap_names
from autograder.sandboxed.cases.probes import ADD, CAT, Claimer, Label, TableLabels, run_quantizer, symmetric_spec
from common.pt2e import export_module
from selfcheck.public.m03_4 import PUBLIC

# --- hidden models: add -------------------------------------------------------------------------


class TwoInputAdd(nn.Module):
    """a + b, the two inputs on very different ranges."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class MixedAdds(nn.Module):
    """Adds of every kind in one graph.

    ``add`` two inputs; ``add_1`` with a Python scalar; ``add_2`` with a model constant as its
    *first* operand; ``add_3`` with ``alpha=2``. ``add`` is read by ``add_1`` and by the graph
    output, ``a`` by ``add`` and ``add_3``.
    """

    def __init__(self, features: int) -> None:
        super().__init__()
        self.register_buffer("offset", torch.randn(features))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = a + b
        t = s + 0.5
        u = self.offset + t
        return torch.add(u, a, alpha=2), s


class BranchAdds(nn.Module):
    """Two conv branches added, then a third branch (no bias) added to the sum, then relu."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.left = nn.Conv2d(3, channels, 3, padding=1)
        self.right = nn.Conv2d(3, channels, 1)
        self.third = nn.Conv2d(3, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.left(x) + self.right(x)
        return torch.relu(y + self.third(x))


class LookAlikes(nn.Module):
    """An input called ``add`` and an ``addmm``: names that look like an add without being one."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features))

    def forward(self, add: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        y = add + x
        return torch.addmm(y, x, self.weight) * 2


class AddAndMul(nn.Module):
    """``a + b`` and ``a * b`` side by side; ``swap_names`` then gives the add the mul's name and back."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.relu(a + b), a * b


class ConstantAdds(nn.Module):
    """Adds whose other operand is a model constant (a buffer second, an ``nn.Parameter`` first) or a
    Python scalar, and one add of a constant and a scalar (nothing to label)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.register_buffer("offset", torch.randn(features))
        self.scale = nn.Parameter(torch.rand(features) + 0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.linear(x) + self.offset
        z = torch.relu(y) + 0.5
        return self.scale + z, self.offset + 1.0


class SelfAdds(nn.Module):
    """relu(x) added to itself, twice: add(r, r) and add(r, r, alpha=2)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(x)
        return r + r, torch.add(r, r, alpha=2)


class ThreeAdds(nn.Module):
    """((a + b) + c) + d: three adds in a row."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return ((a + b) + c) + d


# --- hidden models: cat -------------------------------------------------------------------------


class ThreeWayCat(nn.Module):
    """Three branches of different ranges concatenated, then max-pooled."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.a(x), self.b(x) * 4, torch.relu(x)], dim=1)
        return torch.max_pool2d(y, 2)


class CatMix(nn.Module):
    """An input called ``cat``; cats with a constant (a buffer in the middle and first, an
    ``nn.Parameter`` last), repeated inputs, a cat of a single tensor and a cat of constants only
    (nothing to label). ``r`` is read by four cats and a mul."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(2, features))
        self.rows = nn.Parameter(torch.randn(1, features))

    def forward(self, cat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(cat)
        a = torch.cat([r, self.table, r], dim=0)
        b = torch.cat([self.table, r * 2, r], dim=0)
        return a, b, torch.cat([r], dim=0), torch.cat([r, self.rows], dim=0), torch.cat([self.table, self.rows], dim=0)


class CatAndStack(nn.Module):
    """``cat([r, x * 2])`` and ``stack([r, x])`` (a list too); ``swap_names`` then gives the cat the stack's
    name and back."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(x)
        return torch.cat([r, x * 2], dim=1), torch.stack([r, x], dim=0)


def swapped(model: nn.Module, inputs: tuple[torch.Tensor, ...], mapping: dict[str, str]) -> GraphModule:
    """``model`` exported, then renamed by ``swap_names``: node names tell another op."""
    gm = export_module(model.eval(), inputs)
    swap_names(gm, mapping)
    return gm


class CatChain(nn.Module):
    """Three cats in a row, each reading the one before."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.cat([torch.relu(x), x * 2], dim=0)
        b = torch.cat([a, a * 0.5], dim=0)
        return torch.cat([b, b - 1.0], dim=0)


# --- AddQuantizer -------------------------------------------------------------------------------


def _add(ns: Namespace, share: bool, model: nn.Module, inputs: tuple[torch.Tensor, ...], seed: int, **kw: Any) -> Any:
    return run_quantizer([ns["AddQuantizer"](share=share)], 0, model, inputs, seed, **kw)


def add_separate(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 5, 12)
    two = seeded_inputs(seed, (4, features), (4, features), scales=(1.0, 5.0))
    mixed = seeded_inputs(seed + 1, (3, features), (3, features), scales=(2.0, 0.5))
    return {
        "two_inputs": _add(ns, False, TwoInputAdd(), two, seed),
        "mixed": _add(ns, False, MixedAdds(features), mixed, seed),
    }


def add_shared_residual(ns: Namespace, seed: int) -> Any:
    from common.models import get_model

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    return _add(ns, True, get_model("residual"), inputs, seed, convert=True)


def add_shared_branches(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 7)
    return {
        "branches": _add(
            ns, True, BranchAdds(seed_size(seed, 2, 6)), seeded_inputs(seed, (2, 3, 8, 8)), seed, convert=True
        ),
        "look_alikes": _add(ns, True, LookAlikes(features), seeded_inputs(seed, (3, features), (3, features)), seed),
        "renamed": _add(
            ns,
            True,
            swapped(AddAndMul(), seeded_inputs(seed, (3, features), (3, features)), {"add": "mul", "mul": "add"}),
            seeded_inputs(seed, (3, features), (3, features)),
            seed,
        ),
    }


def add_constants(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 4, 9)
    mixed = seeded_inputs(seed + 1, (3, features), (3, features), scales=(2.0, 0.5))
    return {
        "constants": _add(ns, True, ConstantAdds(features), seeded_inputs(seed, (3, features)), seed),
        "mixed": _add(ns, True, MixedAdds(features), mixed, seed, convert=True),
    }


def add_self(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (4, seed_size(seed, 3, 10)))
    return _add(ns, True, SelfAdds(), inputs, seed)


def add_pre_annotated(ns: Namespace, seed: int) -> Any:
    """add is claimed before the student; add_1 carries a label nobody claimed; a late Quantizer
    claims whatever the student left unmarked."""
    features = seed_size(seed, 4, 8)
    inputs = seeded_inputs(seed, *[(4, features)] * 4)
    unclaimed = TableLabels({"add_1": Label({"add": symmetric_spec(30)}, symmetric_spec(30), annotated=False)})
    quantizers = [
        Claimer((ADD,), 100, first=True),
        unclaimed,
        ns["AddQuantizer"](share=True),
        Claimer((ADD,), 50, late=True),
    ]
    return run_quantizer(quantizers, 2, ThreeAdds(), inputs, seed)


# --- CatQuantizer -------------------------------------------------------------------------------


def cat_pool(ns: Namespace, seed: int) -> Any:
    from common.models import get_model

    features = seed_size(seed, 3, 7)
    unclaimed = TableLabels({"cat_1": Label({"cat": symmetric_spec(30)}, symmetric_spec(30), annotated=False)})
    quantizers = [Claimer((CAT,), 100, first=True), unclaimed, ns["CatQuantizer"](), Claimer((CAT,), 50, late=True)]
    return {
        "cat_pool": run_quantizer(
            [ns["CatQuantizer"]()], 0, get_model("cat_pool"), seeded_inputs(seed, (2, 3, 16, 16)), seed
        ),
        "claimed": run_quantizer(quantizers, 2, CatChain(), seeded_inputs(seed, (2, features)), seed),
    }


def cat_three_way(ns: Namespace, seed: int) -> Any:
    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return run_quantizer([ns["CatQuantizer"]()], 0, ThreeWayCat(seed_size(seed, 2, 5)), inputs, seed, convert=True)


def cat_constant_and_repeat(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 8)
    inputs = seeded_inputs(seed, (2, features))
    renamed = swapped(CatAndStack(), inputs, {"cat": "stack", "stack": "cat"})
    return {
        "mix": run_quantizer([ns["CatQuantizer"]()], 0, CatMix(features), inputs, seed, convert=True),
        "renamed": run_quantizer([ns["CatQuantizer"]()], 0, renamed, inputs, seed),
    }


EXERCISES = with_hidden_cases(
    PUBLIC,
    add_quantizer={
        "separate": add_separate,
        "shared_residual": add_shared_residual,
        "shared_branches": add_shared_branches,
        "constants": add_constants,
        "self_add": add_self,
        "pre_annotated": add_pre_annotated,
    },
    cat_quantizer={
        "cat_pool": cat_pool,
        "three_way": cat_three_way,
        "constant_and_repeat": cat_constant_and_repeat,
    },
)
