"""M08-2 x86：predict_kernels, run on converted graphs of hidden models.

Each case builds one hidden model, quantizes it with an ``X86InductorQuantizer`` (default,
dynamic, with layers left out, or with per-tensor weights on some layers), converts it and
hands the converted (q/dq) graph to the student's ``predict_kernels``. Nothing is lowered
here: ``tests/test_backends.py`` lowers every hidden model with ``lower_x86`` and checks that
the answer key predicts what the lowering does.

- ``convs``: a conv stack (with and without bias, depthwise, groups=2; a relu after the conv
  the seed picks); a residual block relu(conv2(relu(conv1(y))) + y) (add, relu and quantize
  in one kernel); a conv read twice (by a relu and by an add: nothing fused); a + conv(relu(a))
  (the add written first); conv3(w) + conv4(w) (conv4's output is quantized, so conv3 takes
  the add); relu(conv7(v) + offset) with a (C, 1, 1) buffer (shapes differ: no add fused).
- ``linears``: linears on a 3-D input (with and without bias), a flattened map f + linear(f)
  (the other operand is a dequantize: a linear takes it all the same), h = relu(linear(·))
  read twice (relu fused, no quantize), relu(linear(h) + h), a last linear (fp32 output) whose only
  consumer adds a (batch, 1) tensor computed from the input (a broadcast: shapes differ, no add fused).
- ``dynamic``: the dynamic config: conv → relu stays an fp32 conv on a dequantized weight,
  the linears become int8 kernels with relu and add fused (dynamic activations have no static
  quantize to take in).
- ``skipped``: ``set_module_name_qconfig("conv_b", None)`` on a conv that reads a dequantized
  (int8 max-pooled) activation, then a relu (fp32 kernels fuse nothing);
  ``set_module_type_qconfig(nn.Linear, None)`` on the linears of a head with an ``nn.ReLU``; a Conv1d followed by ``nn.ReLU`` (quantized, relu fused), a Conv1d alone and a
  ConvTranspose2d (not quantized). The model's input is called ``add``.
- ``per_tensor``: per-channel weights on the convs, per-tensor weights on the linears
  (``set_module_type_qconfig``): the linears are quantized, yet no int8 kernel.

Every model appears on every seed; seeds change sizes, weights and where the first relu is.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m08_2 import PUBLIC, converted_graph, describe_predictions


class ConvNet(nn.Module):
    """A conv stack, a residual block, a conv read twice, adds of two convs and of a broadcast buffer."""

    def __init__(self, channels: int, relu: int) -> None:
        super().__init__()
        self.relu = relu
        # plain attributes, not an nn.ModuleList: the grader rebuilds an edited graph only when every
        # constant's name is made of identifiers (``s1.bias``, not ``stack.1.bias``)
        self.s0 = nn.Conv2d(3, channels, 3, padding=1)
        self.s1 = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)
        self.s2 = nn.Conv2d(channels, channels, 3, padding=1, groups=2, bias=False)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv5 = nn.Conv2d(channels, channels, 1)
        self.conv6 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv3 = nn.Conv2d(channels, channels, 1)
        self.conv4 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv7 = nn.Conv2d(channels, channels, 1)
        self.register_buffer("offset", torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, conv in enumerate((self.s0, self.s1, self.s2)):
            x = conv(x)
            if index == self.relu:
                x = F.relu(x)
        z = torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)
        a = self.conv5(z)
        w = a + self.conv6(torch.relu(a))
        v = self.conv3(w) + self.conv4(w)
        return torch.relu(self.conv7(v) + self.offset)


class Linears(nn.Module):
    """(batch, steps, features) → linear → relu → linear without bias (3-D) → flatten f; f + linear(f);
    h = relu(linear(·)); relu(linear(h) + h) → linear, plus a (batch, 1) mean of the input (broadcast)."""

    def __init__(self, steps: int, features: int, hidden: int) -> None:
        super().__init__()
        self.fc_a = nn.Linear(features, features)
        self.fc_b = nn.Linear(features, 4, bias=False)
        self.fc_k = nn.Linear(4 * steps, 4 * steps)
        self.fc1 = nn.Linear(4 * steps, hidden)
        self.fc2 = nn.Linear(hidden, hidden, bias=False)
        self.fc3 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.flatten(self.fc_b(torch.relu(self.fc_a(x))), 1)
        k = f + self.fc_k(f)
        h = torch.relu(self.fc1(k))
        # the last linear's only consumer adds a (batch, 1) mean of the input: a broadcast, not fused
        return self.fc3(torch.relu(self.fc2(h) + h)) + x.flatten(1).mean(-1, keepdim=True)


class ConvHead(nn.Module):
    """conv → relu → flatten → linear → relu (h) → relu(linear(h) + h) → linear (input 3×4×4)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels * 16, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(torch.flatten(torch.relu(self.conv(x)), 1)))
        return self.fc3(torch.relu(self.fc2(h) + h))


class Head(nn.Module):
    """linear → nn.ReLU → linear (named attributes, as ``ConvNet``'s)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class Skipped(nn.Module):
    """conv_a → max_pool2d → conv_b → relu, then two branches and a head (input 3×8×8, called ``add``).

    Branch 1: Conv1d → nn.ReLU → Conv1d on the flattened map; branch 2: ConvTranspose2d. The head
    (linear, ``nn.ReLU``, linear) reads the sum of the branches' means.
    """

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, channels, 3, padding=1)
        self.conv_b = nn.Conv2d(channels, channels, 3, padding=1)
        self.seq1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.seq2 = nn.Conv1d(channels, channels, 1)
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.head = Head(channels, hidden)

    def forward(self, add: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(self.conv_a(add), 2)
        y = torch.relu(self.conv_b(y))
        z = self.seq2(self.relu(self.seq1(torch.flatten(y, 2))))
        return self.head(z.mean(-1) + self.up(y).mean((2, 3)))


class PerTensor(nn.Module):
    """conv → relu → conv → relu → max_pool2d → flatten → linear → relu → linear (input 3×8×8)."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels * 16, hidden)
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc2(torch.relu(self.fc1(torch.flatten(F.max_pool2d(y, 2), 1))))


def per_tensor_weights() -> Any:
    """X86's default config with int8 weights quantized per tensor (symmetric, MinMaxObserver)."""
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        QuantizationConfig,
        get_default_x86_inductor_quantization_config,
    )

    from common.pt2e import MinMaxObserver, QuantizationSpec

    base = get_default_x86_inductor_quantization_config()
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    return QuantizationConfig(base.input_activation, base.output_activation, weight, None, False)


def quantizer_for(kind: str) -> Any:
    """The X86InductorQuantizer of the hidden model ``kind``."""
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
    if kind == "per_tensor":
        quantizer.set_module_type_qconfig(nn.Linear, per_tensor_weights())
    return quantizer


def hidden_model(kind: str, seed: int) -> tuple[nn.Module, tuple[int, ...]]:
    """The hidden model of ``kind`` on ``seed`` and its input shape (weights from a forked RNG)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed * 7919 + sum(map(ord, kind)))
        if kind == "convs":
            return ConvNet(2 * seed_size(seed, 2, 3), seed % 3).eval(), (2, 3, 5, 5)
        if kind == "linears":
            steps, features = seed_size(seed, 3, 6), seed_size(seed, 4, 8)
            return Linears(steps, features, seed_size(seed, 5, 9)).eval(), (2, steps, features)
        if kind == "dynamic":
            return ConvHead(seed_size(seed, 2, 5), seed_size(seed, 4, 8)).eval(), (2, 3, 4, 4)
        if kind == "skipped":
            return Skipped(seed_size(seed, 2, 5), seed_size(seed, 4, 8)).eval(), (2, 3, 8, 8)
        if kind == "per_tensor":
            return PerTensor(seed_size(seed, 2, 5), seed_size(seed, 4, 8)).eval(), (2, 3, 8, 8)
    raise KeyError(kind)


def hidden_graph(kind: str, seed: int) -> tuple[GraphModule, tuple[torch.Tensor, ...]]:
    """The converted graph of the hidden model ``kind`` on ``seed``, and the example inputs it was exported with."""
    model, shape = hidden_model(kind, seed)
    inputs = seeded_inputs(seed, shape)
    return converted_graph(model, inputs, quantizer_for(kind), seed), inputs


def _case(kind: str) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        return describe_predictions(ns, hidden_graph(kind, seed)[0])

    case.__doc__ = f"predict_kernels on the converted {kind} model."
    return case


CASES = ("convs", "linears", "dynamic", "skipped", "per_tensor")

EXERCISES = with_hidden_cases(
    PUBLIC,
    predict_kernels={kind: _case(kind) for kind in CASES},
)
