"""M06-3 選擇性量化: greedy_skip on hidden metrics and a hidden model.

The student's search gets an ``evaluate`` callable built by the case and returns names, so the
recording holds only the list it returned; the score that list reaches is recomputed by the
case on the trusted side. (The calls the student's code makes to ``evaluate`` run in the
sandbox only: the checks judge the result, not the path to it.) The made-up metrics put a
greedy search and a one-off ranking of single layers at odds (a layer useless alone but
decisive with the first pick), make two layers tie (the first in the given order wins), make
the pick order differ from the given order, hit the target exactly (reaching it is enough),
start above the target (nothing to skip) and never reach it (every layer, in pick order).
A small MLP with 3-bit weights gives a real metric. Seeds change names' roles and values;
every situation appears on every seed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size
from selfcheck.public.m06_3 import TITLE, run_search, table_metric, weight_sqnr_metric

NOTEBOOK = "M06-3"

NAMES = ["features.0", "features.3", "features.6", "classifier.1", "classifier.4"]


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 7919 + salt)


def case_interaction(ns: Namespace, seed: int) -> Any:
    """Roles: best alone (picked first), its partner (useless alone, +10 with the best), three others.

    Greedy: [best, partner]. Ranking single layers once: best, then the second best alone, then the third.
    The partner always comes before the best in the given order, so the pick order is not the list order.
    """
    g = _generator(seed, 1)
    order = torch.randperm(5, generator=g).tolist()
    roles = [NAMES[i] for i in order]  # best, second, third, partner, weakest
    best, second, third, partner, weakest = roles
    if NAMES.index(partner) > NAMES.index(best):
        best, partner = partner, best
        roles = [best, second, third, partner, weakest]
    jitter = (torch.rand(5, generator=g) * 0.2).tolist()
    gains = dict(zip(roles, [6 + jitter[0], 5 + jitter[1], 4 + jitter[2], 1 + jitter[3], 2 + jitter[4]], strict=True))
    evaluate = table_metric(NAMES, 10.0, gains, {(best, partner): 10.0})
    return run_search(ns, NAMES, evaluate, 24.0)


def case_ties(ns: Namespace, seed: int) -> Any:
    """Two layers tie exactly; the one earlier in ``layers`` wins (the given order is not alphabetical)."""
    layers = ["head", "encoder", "decoder", "attention"][: seed_size(seed, 3, 4)]
    tied = float(2 + seed % 3)
    gains = {name: 0.5 for name in layers}
    gains[layers[1]] = tied
    gains[layers[2]] = tied
    return run_search(ns, layers, table_metric(layers, 10.0, gains), 10.0 + tied + 0.25)


def case_stops(ns: Namespace, seed: int) -> Any:
    """Reaching the target exactly is enough; a model already at the target needs nothing skipped."""
    layers = ["conv1", "conv2", "conv3", "fc"]
    step = 0.5 * seed_size(seed, 2, 6)  # exact in binary: 10 + step == target exactly
    gains = {"conv1": 0.25, "conv2": step, "conv3": step - 0.5, "fc": 0.75}
    evaluate = table_metric(layers, 10.0, gains)
    return {
        "exact": run_search(ns, layers, evaluate, 10.0 + step),
        "already": run_search(ns, layers, evaluate, 9.5),
    }


def case_unreachable(ns: Namespace, seed: int) -> Any:
    """Even every layer in fp32 stays below the target: all of them, in the order they were picked."""
    g = _generator(seed, 4)
    layers = ["a.conv", "b.conv", "c.linear", "d.linear"]
    values = (torch.randperm(4, generator=g) + 1).tolist()
    gains = {name: float(v) for name, v in zip(layers, values, strict=True)}
    return run_search(ns, layers, table_metric(layers, 5.0, gains), 100.0)


class Mlp(nn.Module):
    """Five linear layers; one of them has an outlier column, so its 3-bit weights hurt most."""

    def __init__(self, width: int, outlier: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, width)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, width)
        self.fc4 = nn.Linear(width, width)
        self.fc5 = nn.Linear(width, 4)
        with torch.no_grad():
            getattr(self, f"fc{outlier}").weight[0, 0] *= 25

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (self.fc1, self.fc2, self.fc3, self.fc4):
            x = torch.relu(layer(x))
        return self.fc5(x)


def case_model(ns: Namespace, seed: int) -> Any:
    """A real metric: the output SQNR with 3-bit weights; the target is 1 dB above the best single skip."""
    layers = ["fc1", "fc2", "fc3", "fc4", "fc5"]
    model = Mlp(seed_size(seed, 12, 20), 2 + seed % 3).eval()
    inputs = torch.randn(64, 8, generator=_generator(seed, 5))
    evaluate = weight_sqnr_metric(model, layers, inputs)
    target = round(max(evaluate([name]) for name in layers) + 1.0, 3)
    return run_search(ns, layers, evaluate, target)


EXERCISES = {
    "greedy_skip": Exercise(
        NOTEBOOK,
        "greedy_skip",
        TITLE,
        ("greedy_skip",),
        {
            "interaction": case_interaction,
            "ties": case_ties,
            "stops": case_stops,
            "unreachable": case_unreachable,
            "model": case_model,
        },
    ),
}
