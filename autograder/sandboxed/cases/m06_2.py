"""M06-2 numeric debugger: layer_drops and worst_layer on hidden models with one badly quantized layer.

Each case quantizes a hidden model with int16 everywhere except one culprit (4-bit weights, or
for an op without weights a 4-bit output) and a last layer with 2-bit weights, runs torchao's
numeric debugger (prepared model as reference, converted model as actual, two batches) and
hands the student the comparison and the prepared graph. The culprit is never the node with
the lowest SQNR (errors add up downstream), its input arrives through an observer node (not in
the comparison); in the branch case it is the second operand of an add whose other operand is
clean, and in the activation case it is an add itself, which has no weight. In the rise case
the bad conv reads an 8-bit stem, and the input added to a small tail brings the SQNR back up:
that add's negative drop is larger in size than the culprit's drop (the largest |drop| is not
the answer). Each case also
notes whether the student's calls left the prepared graph as it was. The seed changes sizes,
weights and inputs; every model appears on every seed. The student's answers are names and
numbers; the comparison itself is recomputed by the grader.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.sandboxed.cases.base import Namespace, seed_size, with_hidden_cases
from selfcheck.public.m06_2 import (
    PUBLIC,
    bits_quantizer,
    comparison_of,
    describe_answers,
    mean_sqnr,
    seeded_batches,
)


class Chain(nn.Module):
    """conv → relu → conv (bad) → relu → conv → relu → flatten → linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv3 = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(torch.relu(self.conv3(x)), 1))


class Branches(nn.Module):
    """stem → relu → two branches (clean conv → relu, bad conv) → add(clean, bad) → conv → flatten → linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.clean = nn.Conv2d(channels, channels, 3, padding=1)
        self.bad = nn.Conv2d(channels, channels, 1)
        self.mix = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 6 * 6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.stem(x))
        y = torch.relu(self.clean(s)) + self.bad(s)
        return self.fc(torch.flatten(self.mix(y), 1))


class Split(nn.Module):
    """stem → relu → split (its output is a list, not compared) → a bad conv on one piece, cat → linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 2 * channels, 3, padding=1)
        self.bad = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(2 * channels * 6 * 6, 3)
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low, high = torch.split(torch.relu(self.stem(x)), self.channels, dim=1)
        y = torch.cat([low, torch.relu(self.bad(high))], dim=1)
        return self.fc(torch.flatten(y, 1))


class AddCulprit(nn.Module):
    """stem → relu → (conv → relu) + the stem's relu → add (the culprit: a 4-bit output, no weight) → conv → linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.body = nn.Conv2d(channels, channels, 3, padding=1)
        self.mix = nn.Conv2d(channels, channels, 1)
        self.fc = nn.Linear(channels * 6 * 6, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.stem(x))
        y = torch.relu(self.body(s)) + s
        return self.fc(torch.flatten(self.mix(y), 1))


class Rise(nn.Module):
    """A small path that loses a lot, added back to the input: stem (8-bit) → relu → bad conv (4-bit) → relu →
    tail conv (2-bit, three channels a hundred times smaller than x) → x + tail → linear. The add's SQNR climbs
    back far above the bad conv's upstream (x itself is exact): its rise is larger than any drop."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.bad = nn.Conv2d(channels, channels, 3, padding=1)
        self.tail = nn.Conv2d(channels, 3, 1)
        self.fc = nn.Linear(3 * 6 * 6, 4)
        with torch.no_grad():
            self.tail.weight /= 100
            self.tail.bias /= 100

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.tail(torch.relu(self.bad(torch.relu(self.stem(x)))))
        return self.fc(torch.flatten(x + t, 1))


def _case(ns: Namespace, seed: int, model: nn.Module, bad: str, last: str, output: bool = False) -> dict[str, Any]:
    """``bad`` gets 4-bit weights (or, with ``output``, a 4-bit output: an op without weights), the culprit;
    ``last`` 2-bit weights (the lowest SQNR, but a smaller drop); the other layers have int16 weights and
    activations, so they lose almost nothing."""
    batches = seeded_batches(seed, (2, 3, 6, 6))
    quantizer = bits_quantizer({last: 2}, outputs={bad: 4}) if output else bits_quantizer({bad: 4, last: 2})
    comparison, prepared = comparison_of(model, batches, quantizer)
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison), "bad": bad}


def case_chain(ns: Namespace, seed: int) -> Any:
    return _case(ns, seed, Chain(seed_size(seed, 3, 6)), "conv2d_1", "linear")


def case_branches(ns: Namespace, seed: int) -> Any:
    return _case(ns, seed, Branches(seed_size(seed, 3, 6)), "conv2d_2", "linear")


def case_split(ns: Namespace, seed: int) -> Any:
    return _case(ns, seed, Split(seed_size(seed, 2, 4)), "conv2d_1", "linear")


def case_activation(ns: Namespace, seed: int) -> Any:
    return _case(ns, seed, AddCulprit(seed_size(seed, 3, 6)), "add", "linear", output=True)


def case_rise(ns: Namespace, seed: int) -> Any:
    """The bad conv (4-bit) reads an 8-bit stem, so it drops less than the add climbs back (a large negative drop:
    the largest |drop|, not the largest drop); the 2-bit tail has the lowest SQNR."""
    batches = seeded_batches(seed, (2, 3, 6, 6))
    quantizer = bits_quantizer({"conv2d": 8, "conv2d_1": 4, "conv2d_2": 2})
    comparison, prepared = comparison_of(Rise(seed_size(seed, 3, 6)), batches, quantizer)
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison), "bad": "conv2d_1"}


EXERCISES = with_hidden_cases(
    PUBLIC,
    worst_layer={
        "chain": case_chain,
        "branches": case_branches,
        "split": case_split,
        "activation": case_activation,
        "rise": case_rise,
    },
)
