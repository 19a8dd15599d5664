"""M08-2 x86：classify_kernels, run on graphs lowered from hidden models.

Each case builds one hidden model, quantizes it with an ``X86InductorQuantizer`` (default,
dynamic, or with layers left out by module name or by module type), lowers it with
``lower_pt2e_quantized_to_x86`` (``common.backends.lower_x86``) and hands the lowered graph
to the student's ``classify_kernels``:

- ``convs``: a conv stack: with and without bias, depthwise (groups = channels), groups=2,
  relu after one of them (which one changes with the seed); then a residual
  block: conv → relu → conv, + y, relu (``qconv2d_pointwise.binary``, sum + relu), and
  conv(z) + conv(z) (sum, no relu);
- ``linears``: linears on a 3-D input (left in fp32 as ``addmm`` / ``mm``, q/dq still
  around them: quantized but not fused), then 2-D linears: linear → relu, linear(h) + h →
  relu (``qlinear_pointwise.binary``, add + relu), linear;
- ``dynamic``: the dynamic config: linears become ``qlinear_pointwise.tensor``, the conv
  stays an fp32 ``aten.convolution`` between dequantized weight and activation;
- ``skipped``: ``set_module_name_qconfig("conv_b", None)`` on a conv that reads a dequantized
  (int8 max-pooled) activation, ``set_module_type_qconfig(nn.Linear, None)`` on the linears of
  an ``nn.Sequential`` head (``mkl._mkl_linear``); a Conv1d followed by ``nn.ReLU`` (quantized
  and fused), a Conv1d alone and a ConvTranspose2d (not quantized).

Every model appears on every seed; seeds change sizes, weights and where the relus are.
A lowered graph is built once per model and seed and every case gets its own copy of its
structure (oneDNN's packed weights cannot be deep-copied; they are shared, and only read).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from selfcheck.public.m08_2 import TITLE, describe_kernels, lowered_graph

NOTEBOOK = "M08-2"


class ConvNet(nn.Module):
    """A conv stack, then a residual block.

    The stack: conv with bias, depthwise (groups = channels), groups=2 without bias; relu after
    the conv at index ``relu``. The block: relu(conv2(relu(conv1(y))) + y), conv2 without bias,
    then conv3(z) + conv4(z).
    """

    def __init__(self, channels: int, relu: int) -> None:
        super().__init__()
        self.relu = relu
        self.stack = nn.ModuleList(
            [
                nn.Conv2d(3, channels, 3, padding=1),
                nn.Conv2d(channels, channels, 3, padding=1, groups=channels),
                nn.Conv2d(channels, channels, 3, padding=1, groups=2, bias=False),
            ]
        )
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv3 = nn.Conv2d(channels, channels, 1)
        self.conv4 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, conv in enumerate(self.stack):
            x = conv(x)
            if index == self.relu:
                x = F.relu(x)
        z = torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)
        return self.conv3(z) + self.conv4(z)


class Linears(nn.Module):
    """(batch, steps, features) → linear → relu → linear without bias (both on a 3-D input) → flatten →
    h = relu(fc1(·)); fc3(relu(fc2(h) + h)), fc2 without bias."""

    def __init__(self, steps: int, features: int, hidden: int) -> None:
        super().__init__()
        self.fc_a = nn.Linear(features, features)
        self.fc_b = nn.Linear(features, 4, bias=False)
        self.fc1 = nn.Linear(4 * steps, hidden)
        self.fc2 = nn.Linear(hidden, hidden, bias=False)
        self.fc3 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(torch.flatten(self.fc_b(torch.relu(self.fc_a(x))), 1)))
        return self.fc3(torch.relu(self.fc2(h) + h))


class ConvHead(nn.Module):
    """conv → relu → flatten → linear → relu → linear (input 3×4×4)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels * 16, hidden)
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(torch.flatten(torch.relu(self.conv(x)), 1))))


class Skipped(nn.Module):
    """conv_a → max_pool2d → conv_b → relu, then two branches and a head of two linears (input 3×8×8).

    Branch 1: Conv1d → nn.ReLU → Conv1d on the flattened map; branch 2: ConvTranspose2d. The head
    (``nn.Sequential`` of two linears) reads the sum of the branches' means.
    """

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, channels, 3, padding=1)
        self.conv_b = nn.Conv2d(channels, channels, 3, padding=1)
        self.seq1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.seq2 = nn.Conv1d(channels, channels, 1)
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.head = nn.Sequential(nn.Linear(channels, hidden), nn.Linear(hidden, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(self.conv_a(x), 2)
        y = torch.relu(self.conv_b(y))
        z = self.seq2(self.relu(self.seq1(torch.flatten(y, 2))))
        return self.head(z.mean(-1) + self.up(y).mean((2, 3)))


def _quantizer(kind: str) -> Any:
    from common.backends import x86_quantizer

    if kind == "dynamic":
        from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
            X86InductorQuantizer,
            get_default_x86_inductor_quantization_config,
        )

        return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    quantizer = x86_quantizer()
    if kind == "skipped":
        quantizer.set_module_name_qconfig("conv_b", None)
        quantizer.set_module_type_qconfig(nn.Linear, None)
    return quantizer


def _model(kind: str, seed: int) -> tuple[nn.Module, tuple[int, ...]]:
    """The hidden model of ``kind`` and its input shape (weights from the global RNG)."""
    if kind == "convs":
        return ConvNet(2 * seed_size(seed, 2, 3), seed % 3), (2, 3, 5, 5)
    if kind == "linears":
        steps, features = seed_size(seed, 3, 6), seed_size(seed, 4, 8)
        return Linears(steps, features, seed_size(seed, 5, 9)), (2, steps, features)
    if kind == "dynamic":
        return ConvHead(seed_size(seed, 2, 5), seed_size(seed, 4, 8)), (2, 3, 4, 4)
    if kind == "skipped":
        return Skipped(seed_size(seed, 2, 5), seed_size(seed, 4, 8)), (2, 3, 8, 8)
    raise KeyError(kind)


def hidden_graph(kind: str, seed: int) -> GraphModule:
    """The lowered graph of the hidden model ``kind`` on ``seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(seed * 7919 + sum(map(ord, kind)))
        model, shape = _model(kind, seed)
    return lowered_graph(model, seeded_inputs(seed, shape), _quantizer(kind), seed)


_BUILT: dict[tuple[str, int], GraphModule] = {}


def fresh_graph(kind: str, seed: int) -> GraphModule:
    """A lowered graph built once per kind and seed; each call gets its own copy of the graph's structure."""
    if (kind, seed) not in _BUILT:
        _BUILT[kind, seed] = hidden_graph(kind, seed)
    built = _BUILT[kind, seed]
    return GraphModule(built, copy.deepcopy(built.graph))


def _case(kind: str) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        return describe_kernels(ns, fresh_graph(kind, seed))

    case.__doc__ = f"classify_kernels on the lowered {kind} model."
    return case


CASES = ("convs", "linears", "dynamic", "skipped")

EXERCISES = {
    "classify_kernels": Exercise(
        NOTEBOOK,
        "classify_kernels",
        TITLE,
        ("classify_kernels",),
        {kind: _case(kind) for kind in CASES},
    ),
}
