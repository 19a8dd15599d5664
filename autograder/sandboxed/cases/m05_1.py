"""M05-1 convert 之後的圖: qdq_path and qdq_summary, run on converted graphs the student has not seen."""

from __future__ import annotations

import collections
import copy
import functools
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import SUFFIX
from selfcheck.evidence import plain, qdq_kind
from selfcheck.public.m01_1 import graph_changes, graph_state
from selfcheck.public.m05_1 import PUBLIC


class ConvLinear(nn.Module):
    """conv → relu → flatten → linear."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class FanOut(nn.Module):
    """x feeds two convs; their outputs are added, then relu."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.left = nn.Conv2d(3, channels, 3, padding=1)
        self.right = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.relu(self.left(x)) + self.right(x))


class BranchCat(nn.Module):
    """Three conv branches of x concatenated, then max-pooled."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1)
        self.c = nn.Conv2d(3, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max_pool2d(torch.cat([self.a(x), self.b(x), self.c(x)], dim=1), 2)


class MlpFanOut(nn.Module):
    """linear → relu, whose output feeds two linears that are added."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, 2 * features)
        self.fc2 = nn.Linear(2 * features, features)
        self.fc3 = nn.Linear(2 * features, features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(h) + self.fc3(h)


class NamedLikeQdq(nn.Module):
    """Names that look like q/dq ops on nodes that are not: the input is called ``quantize_per_tensor`` and the
    first layer ``dequantize`` (its constants are ``dequantize_weight`` / ``dequantize_bias``). Also ``h * h``
    (one tensor twice in one op: one entry in ``all_input_nodes``) and an add with a scalar."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.dequantize = nn.Linear(features, features)
        self.fc = nn.Linear(features, 3)

    def forward(self, quantize_per_tensor: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.dequantize(quantize_per_tensor))
        return self.fc(h * h + 1.0)


def converted(model: nn.Module, shape: tuple[int, ...], seed: int, per_channel: bool, fold: bool) -> GraphModule:
    """Export ``model``, quantize it with XNNPACKQuantizer, calibrate on ``seed``, convert."""
    from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e

    quantizer, _ = get_xnnpack_quantizer(is_per_channel=per_channel)
    prepared = prepare_pt2e(export_module(model.eval(), seeded_inputs(seed, shape)), quantizer)
    with torch.no_grad():
        for step in range(2):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    return convert_pt2e(prepared, fold_quantize=fold)


def hidden_graph(kind: str, seed: int) -> GraphModule:
    """The converted graphs of the hidden cases (weights from the global RNG, seeded by the collector)."""
    if kind == "per_tensor":
        return converted(ConvLinear(seed_size(seed, 2, 5), seed_size(seed, 3, 6)), (2, 3, 4, 4), seed, False, True)
    if kind == "per_channel":
        return converted(MlpFanOut(seed_size(seed, 4, 9)), (3, seed_size(seed, 4, 9)), seed, True, True)
    if kind == "unfolded":
        return converted(ConvLinear(seed_size(seed, 3, 6), 4), (2, 3, 4, 4), seed, True, False)
    if kind == "fan_out":
        return converted(FanOut(seed_size(seed, 2, 6)), (2, 3, 6, 6), seed, False, True)
    if kind == "cat":
        return converted(BranchCat(seed_size(seed, 2, 4)), (2, 3, 6, 6), seed, True, True)
    if kind == "named_like":
        features = seed_size(seed, 4, 7)
        return converted(NamedLikeQdq(features), (4, features), seed, False, False)
    if kind == "renamed":
        return swapped_qdq_names(converted(FanOut(seed_size(seed + 1, 2, 6)), (2, 3, 6, 6), seed, False, True))
    raise KeyError(kind)


def swapped_qdq_names(gm: GraphModule) -> GraphModule:
    """A pass that swapped names: every quantize op is now called ``dequantize_per_tensor_default_9N`` and
    every dequantize op ``quantize_per_tensor_default_9N`` (there are more dequantize ops than quantize ops)."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and qdq_kind(n) is not None]
    for index, node in enumerate(ops):
        lie = "quantize" if str(node.target).split(".")[1].startswith("de") else "dequantize"
        node._rename(f"{lie}_per_tensor_default_{SUFFIX + index}")  # a name nobody reserved: see SUFFIX
    gm.recompile()
    return gm


@functools.cache
def _built(kind: str, seed: int) -> GraphModule:
    return hidden_graph(kind, seed)


def fresh_graph(kind: str, seed: int) -> GraphModule:
    """A copy of the hidden graph (built once per kind and seed), so student code cannot change the next case's."""
    return copy.deepcopy(_built(kind, seed))


def consumers(gm: GraphModule) -> list[str]:
    """Every node that is neither a q/dq op nor an input, constant or guard: the ops and the output."""
    return [n.name for n in gm.graph.nodes if n.op in ("call_function", "output") and qdq_kind(n) is None]


# --- qdq_path -----------------------------------------------------------------------------------


def _paths(kind: str) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        gm = fresh_graph(kind, seed)
        before = graph_state(gm)
        qdq_path = ns["qdq_path"]
        found = {name: plain(qdq_path(gm, name)) for name in consumers(gm)}
        return {"paths": found, "changed": graph_changes(before, gm)}

    return case


# --- qdq_summary --------------------------------------------------------------------------------


def _summary(kind: str) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        gm = fresh_graph(kind, seed)
        before = graph_state(gm)
        result = ns["qdq_summary"](gm)
        if type(result) in (collections.Counter, collections.defaultdict, collections.OrderedDict):
            result = dict(result)  # the standard dicts a count is often kept in (exact types only)
        return {"counts": plain(result), "changed": graph_changes(before, gm)}

    return case


PATH_CASES = ("per_tensor", "per_channel", "unfolded", "fan_out", "cat", "named_like", "renamed")
SUMMARY_CASES = ("per_tensor", "unfolded", "fan_out", "cat", "named_like", "renamed")

EXERCISES = with_hidden_cases(
    PUBLIC,
    qdq_path={kind: _paths(kind) for kind in PATH_CASES},
    qdq_summary={kind: _summary(kind) for kind in SUMMARY_CASES},
)
