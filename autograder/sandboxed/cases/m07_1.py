"""M07-1 prepare_qat_pt2e: fake_quant_roles and fake_quant_instances on hidden QAT graphs.

The graphs: a conv → BN → relu twice model (in a QAT graph the conv's weight is multiplied by
BN's γ/σ before its fake-quant, so that fake-quant does not read a parameter directly); a
model with two inputs, a weight computed in ``forward`` (a parameter times 2), an activation
plus a buffer, and an add that shares one fake-quant instance among three nodes; a graph
into which the case inserted an ``nn.Identity`` named like an observer, a real observer (not a
fake-quant) on a weight, a fake-quant with an unusual name on the input, a ``LearnableFakeQuantize``
(a FakeQuantizeBase that is no FakeQuantize) on a computed weight, and a fake-quant module that is
registered but never called; and a graph whose operands are not where the digits
graph has them: an activation that is the third operand of ``addcmul`` (the first two are
parameters), an activation that reaches its op only as a keyword argument (``sub(offset,
other=h)``, the constant first), weights that reach their fake-quant through a transpose and
through ``cat`` of two parameters (shapes the digits graph does not have), and a linear whose
weight position holds the model's second input (an activation, whatever its position). The
student's functions only read the graph; the answers are names, roles and a count, and the
case checks that the graph is unchanged afterwards.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.evidence import EvidenceError
from selfcheck.public.m07_1 import PUBLIC, describe_answers, graph_change, module_kinds, qat_graph, structure


class ConvBn(nn.Module):
    """conv (bias) → BN → relu → conv (no bias) → BN → relu → flatten → linear."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels * 16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class Computed(nn.Module):
    """linear(x) + linear(y) (a shared fake-quant), a weight computed as 2·w, an activation plus a buffer."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)
        self.w = nn.Parameter(torch.randn(4, features))
        self.register_buffer("offset", torch.randn(features))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.a(x) + self.b(y)
        return nn.functional.linear(h + self.offset, self.w * 2)


class Operands(nn.Module):
    """Operands in other places than the digits graph has them (see the module docstring)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.rand(features) + 0.5)
        self.shift = nn.Parameter(torch.randn(features))
        self.mix = nn.Parameter(torch.randn(features, features))
        self.top = nn.Parameter(torch.randn(2, features))
        self.bottom = nn.Parameter(torch.randn(2, features))
        self.register_buffer("offset", torch.randn(features))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.addcmul(self.shift, self.gain, x)  # the activation is the third operand
        h = nn.functional.linear(a, self.mix.t())  # a weight through a transpose
        g = self.offset - h  # the constant first; the case passes h as the keyword ``other``
        out = nn.functional.linear(g, torch.cat([self.top, self.bottom]))  # a weight through cat
        return out + nn.functional.linear(x, y)  # y sits where a weight goes, and is an activation


def _operands_graph(seed: int) -> GraphModule:
    features = seed_size(seed, 3, 6)
    gm = qat_graph(Operands(features), seeded_inputs(seed, (2, features), (4, features)))
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.sub.Tensor:
            node.kwargs = {"other": node.args[1]}  # sub(offset, other=h): h is no positional argument
            node.args = (node.args[0],)
    gm.graph.lint()
    gm.recompile()
    return gm


def case_operands(ns: Namespace, seed: int) -> Any:
    return describe_answers(ns, _operands_graph(seed))


def case_operands_count(ns: Namespace, seed: int) -> Any:
    """``fake_quant_instances`` alone on the operands graph: the count is judged even when
    ``fake_quant_roles`` raises there (a walk that follows ``args[0]`` into cat's list), so a wrong
    walk is not charged again as a wrong count. ``roles`` stays empty: this case asks for none."""
    gm = _operands_graph(seed)
    before = structure(gm)
    count = ns["fake_quant_instances"](gm)
    if type(count) is not int:
        raise EvidenceError(f"fake_quant_instances 應該回傳 int，看到 {type(count).__name__}")
    return {
        "roles": {},
        "instances": count,
        "modules": module_kinds(gm),
        "changed": graph_change(before, structure(gm)),
    }


def case_conv_bn(ns: Namespace, seed: int) -> Any:
    gm = qat_graph(ConvBn(seed_size(seed, 2, 4)), seeded_inputs(seed, (2, 3, 4, 4)))
    return describe_answers(ns, gm)


def _computed_graph(seed: int) -> GraphModule:
    features = seed_size(seed, 3, 6)
    return qat_graph(Computed(features), seeded_inputs(seed, (2, features), (2, features)))


def case_computed(ns: Namespace, seed: int) -> Any:
    return describe_answers(ns, _computed_graph(seed))


def case_inserted(ns: Namespace, seed: int) -> Any:
    """The graph of ``case_computed`` plus four call_module nodes the case inserted by hand."""
    from torchao.quantization.pt2e import (
        FakeQuantize,
        LearnableFakeQuantize,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
    )

    gm = _computed_graph(seed)
    nodes = {n.name: n for n in gm.graph.nodes}
    inserted = [
        ("activation_post_process_99", nn.Identity(), "add"),  # looks like an observer, is not one
        ("activation_post_process_100", MinMaxObserver(), "w"),  # an observer, not a fake-quant, on a weight
        ("clip_input", FakeQuantize(), "x"),  # a fake-quant named like nothing in particular
        # a fake-quant that is a FakeQuantizeBase but no FakeQuantize (LSQ), on the computed weight 2·w
        ("activation_post_process_101", LearnableFakeQuantize(observer=MovingAverageMinMaxObserver), "mul"),
    ]
    for name, module, after in inserted:
        gm.add_submodule(name, module)
        source = next(n for n in nodes.values() if n.name == after or (n.op == "get_attr" and n.target == after))
        with gm.graph.inserting_after(source):
            node = gm.graph.call_module(name, (source,))
        for user in list(source.users):
            if user is not node:
                user.replace_input_with(source, node)
    gm.add_submodule("spare_fake_quant", FakeQuantize())  # registered, but no node calls it
    gm.graph.lint()
    gm.recompile()
    return describe_answers(ns, gm)


EXERCISES = with_hidden_cases(
    PUBLIC,
    fake_quant_roles={
        "conv_bn": case_conv_bn,
        "computed": case_computed,
        "inserted": case_inserted,
        "operands": case_operands,
        "operands_count": case_operands_count,
    },
)
