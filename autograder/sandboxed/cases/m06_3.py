"""M06-3 選擇性量化: may_quantize on a hidden model, greedy_skip on hidden metrics and a hidden model.

``may_quantize`` is the filter function of a ``FilterQuantizer`` (every static pattern of torchao's
XNNPACKQuantizer, with the filter) on a hidden network: stem conv → ``torch.relu`` in the top-level
forward → two 1×1 convs whose module names share a prefix (``proj`` and ``proj2``, other pairs on
other seeds) → add → a block (conv → ``nn.ReLU`` → flatten → linear). Node names (``conv2d_1``…) never
name a module. Each case skips other modules: none, the stem (a conv followed by a relu outside
it), one of the prefix pair (a conv followed by an add), the whole block, and only the block's
linear, and a name that is only the last segment of a nested path (no module is skipped). What the answers did to the graph (observed nodes, fp32 weights, q/dq on every edge) is
derived on the trusted side from the recorded answers; each answer must be a bool and leave the
graph as it was.

``greedy_skip`` gets an ``evaluate`` built by the case and returns names, so the recording holds
only the list it returned; the score that list reaches is recomputed by the case on the trusted
side. (The calls the student's code makes to ``evaluate`` run in the sandbox only: the checks
judge the result, not the path to it.) The made-up metrics put a greedy search and a one-off
ranking of single layers at odds (a layer useless alone but decisive with the first pick), make
two layers tie (the first in the given order wins), make the pick order differ from the given
order, hit the target exactly (reaching it is enough), start above the target (nothing to skip),
never reach it (every layer, in pick order), make every candidate of a step worse than the score
before it (the search still picks one), keep every score negative, and make the second step's
best lower than the first step's (the best is found again at each step). One case hands the
same list to two searches in a row: a search that changed it answers the second differently
from a fresh copy. A small MLP with 3-bit weights gives a real metric. Seeds change names'
roles and values; every situation appears on every seed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m06_3 import (
    PUBLIC,
    Block,
    filtered,
    run_search,
    table_metric,
    weight_sqnr_metric,
)

NAMES = ["features.0", "features.3", "features.6", "classifier.1", "classifier.4"]

PREFIX_PAIRS = [("proj", "proj2"), ("mix", "mix_out"), ("branch", "branch1")]
"""Module names of the two 1×1 convs: the first is a prefix of the second (a prefix test is wrong)."""


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 7919 + salt)


# --- may_quantize ---------------------------------------------------------------------------------


class PairNet(nn.Module):
    """stem → torch.relu → first(x) + second(x) (1×1 convs, no relu) → block (conv → nn.ReLU → flatten → fc)."""

    def __init__(self, channels: int, size: int, first: str, second: str) -> None:
        super().__init__()
        self.names = (first, second)
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        setattr(self, first, nn.Conv2d(channels, channels, 1))
        setattr(self, second, nn.Conv2d(channels, channels, 1))
        self.block = Block(channels, size, classes=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        first, second = (getattr(self, name) for name in self.names)
        return self.block(first(x) + second(x))


def _pair_net(seed: int) -> tuple[PairNet, tuple[torch.Tensor, ...]]:
    channels, size = seed_size(seed, 3, 6), seed_size(seed, 5, 7)
    first, second = PREFIX_PAIRS[seed % len(PREFIX_PAIRS)]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = PairNet(channels, size, first, second)
    return model, seeded_inputs(seed, (2, 3, size, size))


def filter_none(ns: Namespace, seed: int) -> Any:
    """Nothing skipped: every pattern XNNPACK knows is labelled, convs included (their weights have no module)."""
    model, inputs = _pair_net(seed)
    return filtered(ns, model, inputs, [], seed)


def filter_leaf(ns: Namespace, seed: int) -> Any:
    """The stem skipped: a conv whose relu is in the top-level forward (the conv + relu pattern spans both)."""
    model, inputs = _pair_net(seed)
    return filtered(ns, model, inputs, ["stem"], seed)


def filter_names(ns: Namespace, seed: int) -> Any:
    """The first of the prefix pair skipped: the second stays quantized, and no node is named after either."""
    model, inputs = _pair_net(seed)
    return filtered(ns, model, inputs, [model.names[0]], seed)


def filter_parent(ns: Namespace, seed: int) -> Any:
    """The block skipped (its conv, nn.ReLU and linear all stay fp32), then only the block's linear, then a
    name that is only the last segment of a nested path (``fc``, ``conv``: no module has that path, nothing
    is skipped; a suffix or segment test skips ``block.fc``)."""
    model, inputs = _pair_net(seed)
    return {
        "block": filtered(ns, model, inputs, ["block"], seed),
        "inner": filtered(ns, model, inputs, ["block.fc"], seed),
        "tail": filtered(ns, model, inputs, [("fc", "conv")[seed % 2]], seed),
    }


# --- greedy_skip ----------------------------------------------------------------------------------


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


def _roles(seed: int, salt: int, layers: list[str]) -> list[str]:
    order = torch.randperm(len(layers), generator=_generator(seed, salt)).tolist()
    return [layers[i] for i in order]


def case_worse(ns: Namespace, seed: int) -> Any:
    """Every single layer makes the score worse; the least bad one, with a partner, beats the target.

    Greedy: [least bad, partner]. A search that stops when a step does not improve returns [];
    one that only takes a candidate better than the current score never picks anything.
    """
    layers = ["enc.0", "enc.1", "dec.0", "dec.1"]
    first, other, partner, worst = _roles(seed, 5, layers)
    jitter = round(float(torch.rand(1, generator=_generator(seed, 6))) * 0.2, 2)
    gains = {first: -0.5 - jitter, other: -1.0, partner: -1.5, worst: -2.0}
    return run_search(ns, layers, table_metric(layers, 10.0, gains, {(first, partner): 12.0}), 15.0)


def case_negative(ns: Namespace, seed: int) -> Any:
    """Every score is negative (a very noisy model, in dB): the best candidate is still picked at each step."""
    layers = ["conv_a", "conv_b", "fc_a", "fc_b"]
    best, second, third, fourth = _roles(seed, 7, layers)
    jitter = round(float(torch.rand(1, generator=_generator(seed, 8))) * 0.5, 2)
    gains = {best: 6.0 + jitter, second: 4.0, third: 3.0, fourth: 1.0}
    return run_search(ns, layers, table_metric(layers, -30.0, gains), -21.0 + jitter)


def case_reset(ns: Namespace, seed: int) -> Any:
    """The second step's best is lower than the first step's (skipping both costs a little): each step finds
    its own best. The target is out of reach, so every layer comes back, in pick order."""
    layers = ["block1", "block2", "block3"]
    a, b, c = _roles(seed, 9, layers)
    gains = {a: 4.0, b: 2.0, c: 1.0}
    return run_search(ns, layers, table_metric(layers, 10.0, gains, {(a, b): -3.0, (a, c): -2.5}), 30.0)


def case_arguments(ns: Namespace, seed: int) -> Any:
    """The same list handed to two searches in a row, and a fresh copy to the second search.

    The second metric has a tie between the first and the last layer of the list, so a search that
    removed, sorted or emptied the list it was handed answers the second search differently.
    """
    layers = ["stem", "layer1", "layer2", "head"]
    lift = 0.25 * (seed % 3)
    first = table_metric(layers, 10.0, {"stem": 4.0, "layer1": 3.0 + lift, "layer2": 1.0, "head": 0.5})
    second = table_metric(layers, 10.0, {"stem": 3.0, "layer1": 1.0, "layer2": 0.5, "head": 3.0})
    handed = list(layers)
    return {
        "first": run_search(ns, layers, first, 16.5, handed=handed),
        "again": run_search(ns, layers, second, 12.5, handed=handed),
        "fresh": run_search(ns, layers, second, 12.5),
    }


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


EXERCISES = with_hidden_cases(
    PUBLIC,
    may_quantize={"none": filter_none, "leaf": filter_leaf, "names": filter_names, "parent": filter_parent},
    greedy_skip={
        "interaction": case_interaction,
        "ties": case_ties,
        "stops": case_stops,
        "unreachable": case_unreachable,
        "worse": case_worse,
        "negative": case_negative,
        "reset": case_reset,
        "arguments": case_arguments,
        "model": case_model,
    },
)

STANDINS = {
    "may_quantize": lambda node, skipped: True,
    "greedy_skip": lambda layers, evaluate, target: [],
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a filter case goes on to prepare and convert its model instead of stopping at its first answer."""
