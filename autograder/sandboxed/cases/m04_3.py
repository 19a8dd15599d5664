"""M04-3 fusion 就是中間不貼標籤: FusionQuantizer, run on hidden models and patterns.

Every case exports a hidden model, prepares it with the student's ``FusionQuantizer``
(sometimes between probe Quantizers of our own), calibrates, and returns the
annotations right after the student's ``annotate`` (``describe_annotations``), the
observers (``describe_prepared``) and, for two cases, the converted q/dq paths.
Student objects are only called: the Quantizer is built, then run by ``prepare_pt2e``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import named_after_modules
from autograder.sandboxed.cases.probes import ChainQuantizer
from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    convert_pt2e,
    export_module,
    prepare_pt2e,
)
from common.qspecs import act_spec
from selfcheck.evidence import describe_converted, describe_prepared
from selfcheck.probes import AnnotationSnapshot as Snapshot
from selfcheck.public.m04_3 import PUBLIC

CONV = torch.ops.aten.conv2d.default
RELU = torch.ops.aten.relu.default
ADD = torch.ops.aten.add.Tensor
LINEAR = torch.ops.aten.linear.default
MAX_POOL = torch.ops.aten.max_pool2d.default
CAT = torch.ops.aten.cat.default


# --- hidden models ------------------------------------------------------------------------------


class ConvChain(nn.Module):
    """conv → relu → conv → relu → flatten → linear → relu → linear."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels * 4 * 4, 16)
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc2(torch.relu(self.fc1(torch.flatten(y, 1))))


class ModuleNamedChain(nn.Module):
    """conv → relu, conv → relu, flatten, linear → relu, with modules named like other ops: ``relu`` is a
    Conv2d, ``conv`` a ReLU, ``linear`` a Conv2d, ``relu_head`` a Linear. ``named_after_modules`` then
    renames every op after its module, so node names lie about every op."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.relu, self.conv = nn.Conv2d(3, channels, 3, padding=1), nn.ReLU()
        self.linear, self.act = nn.Conv2d(channels, channels, 1), nn.ReLU()
        self.relu_head, self.linear_act = nn.Linear(channels * 4 * 4, classes), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.linear(self.conv(self.relu(x))))
        return self.linear_act(self.relu_head(torch.flatten(y, 1)))


class Interleaved(nn.Module):
    """Two conv → relu chains whose relus are not the next node in graph order.

    The inputs are called ``conv2d`` and ``relu`` (placeholders named like ops), so the
    real ops are ``conv2d_1``, ``relu_1``…; right after each conv in graph order comes a
    relu that is not its user.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, channels, 3, padding=1)
        self.second = nn.Conv2d(3, channels, 1)

    def forward(self, conv2d: torch.Tensor, relu: torch.Tensor) -> torch.Tensor:
        a = self.first(conv2d)
        b = torch.relu(relu)  # next in graph order after the first conv, but not its user
        c = self.second(b)
        d = torch.relu(a)  # the first conv's only user
        e = torch.relu(c)
        return d + e


class ResidualBlock(nn.Module):
    """conv → relu → conv, added to the input, then relu (no BN)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class ConstantOperands(nn.Module):
    """add → relu twice: once with a Python scalar operand, once with a constant tensor (a buffer)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, channels).reshape(1, channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y + 0.5) * torch.relu(y + self.shift)


class CatIntoRelu(nn.Module):
    """relu(cat([conv(x), x])): the cat's inputs arrive in a list, one of them straight from the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cat([self.conv(x), x], dim=1))


class SkipIntoAdd(nn.Module):
    """relu(x + conv(x)), then max_pool2d: the conv output is the add's second operand."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max_pool2d(torch.relu(x + self.conv(x)), 2)


class TwoRelusIntoAdd(nn.Module):
    """relu(conv1(x)) + relu(conv2(x)): both operands of the add are relus."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv1(x)) + torch.relu(self.conv2(x))


class SharedConvOutput(nn.Module):
    """y = conv(x) feeds a relu and an add: conv → relu cannot be fused."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) + y


class ConvOutputReturned(nn.Module):
    """y = conv1(x) feeds a relu and is also a model output (the output node reads it): conv1 → relu cannot be
    fused; relu(conv2(x)) beside it can."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = self.conv1(x)
        return torch.relu(y), y, torch.relu(self.conv2(x))


class ManyUsers(nn.Module):
    """An unlabelled max_pool2d feeds two convs; the fused relu at the end of a pattern has two users."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(3, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = torch.max_pool2d(x, 2)
        r = torch.relu(self.conv1(p))
        return r + self.conv2(p) * r


class ConvReluPool(nn.Module):
    """conv → relu → max_pool2d, then conv → relu."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        return torch.relu(self.conv2(y))


class TwoBranches(nn.Module):
    """relu(conv1(x)) and relu(conv2(x)), added: two conv → relu chains side by side."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv1(x)) + torch.relu(self.conv2(x))


# --- probe Quantizers ---------------------------------------------------------------------------


def _late_spec() -> QuantizationSpec:
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-50,
        quant_max=50,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


class LateOutputClaimer(Quantizer):
    """After the student's Quantizer: labels, with int8 [-50, 50] symmetric, the output of every op nobody claimed."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function":
                continue
            ann = node.meta.get(ANNOTATION_KEY)
            if ann is None or not ann._annotated:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_late_spec(), _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class EarlyClaims(Quantizer):
    """Before the student's Quantizer, on ``TwoBranches``: claims the first relu with an empty annotation
    (``_annotated=True``, no spec at all), and labels the second conv's input edge without claiming it."""

    def annotate(self, model: GraphModule) -> GraphModule:
        relus = [n for n in model.graph.nodes if n.op == "call_function" and n.target == RELU]
        convs = [n for n in model.graph.nodes if n.op == "call_function" and n.target == CONV]
        relus[0].meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
        second = convs[1]
        second.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={second.args[0]: act_spec()})
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def fuse(
    ns: Namespace,
    patterns: list[tuple[Any, ...]],
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    seed: int,
    before: tuple[Quantizer, ...] = (),
    after: tuple[Quantizer, ...] = (),
    convert: bool = False,
    edit: Callable[[GraphModule], None] | None = None,
) -> dict[str, Any]:
    """Export ``model``, prepare it with ``before`` + the student's FusionQuantizer(patterns) + ``after``.

    ``edit`` changes the exported graph first (an earlier pass). Returns the annotations right after the
    student's ``annotate``, the observers after calibration and, with ``convert``, the q/dq paths
    (converted in place: nothing student-made is copied).
    """
    snapshot = Snapshot()
    quantizer = ChainQuantizer([*before, ns["FusionQuantizer"](patterns), snapshot, *after])
    exported = export_module(model.eval(), inputs)
    if edit is not None:
        edit(exported)
        exported.recompile()
    prepared = prepare_pt2e(exported, quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(3):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    result: dict[str, Any] = {"annotations": snapshot.annotations, "prepared": describe_prepared(prepared)}
    if convert:
        result["converted"] = describe_converted(convert_pt2e(prepared))
    return result


def _image(seed: int, size: int = 6, count: int = 1) -> tuple[torch.Tensor, ...]:
    return seeded_inputs(seed, *[(2, 3, size, size)] * count)


# --- cases --------------------------------------------------------------------------------------


def chain(ns: Namespace, seed: int) -> Any:
    model = ConvChain(seed_size(seed, 2, 4), seed_size(seed, 3, 6))
    return fuse(ns, [(CONV, RELU), (LINEAR, RELU)], model, _image(seed, 4), seed, convert=True)


def module_names(ns: Namespace, seed: int) -> Any:
    model = ModuleNamedChain(seed_size(seed + 3, 2, 4), seed_size(seed, 3, 5))
    return fuse(ns, [(CONV, RELU), (LINEAR, RELU)], model, _image(seed, 4), seed, edit=named_after_modules)


def interleaved(ns: Namespace, seed: int) -> Any:
    model = Interleaved(seed_size(seed + 1, 2, 4))
    return fuse(ns, [(CONV, RELU), (ADD,)], model, _image(seed, 6, 2), seed)


def residual(ns: Namespace, seed: int) -> Any:
    model = ResidualBlock(seed_size(seed, 2, 5))
    return fuse(ns, [(CONV, RELU), (ADD, RELU), (CONV,)], model, _image(seed), seed, convert=True)


def constant_operands(ns: Namespace, seed: int) -> Any:
    model = ConstantOperands(seed_size(seed, 2, 4))
    return fuse(ns, [(ADD, RELU), (CONV,)], model, _image(seed), seed)


def cat_list(ns: Namespace, seed: int) -> Any:
    model = CatIntoRelu(seed_size(seed + 2, 2, 4))
    return fuse(ns, [(CONV, CAT, RELU)], model, _image(seed), seed)


def three_ops(ns: Namespace, seed: int) -> Any:
    return fuse(ns, [(CONV, ADD, RELU)], SkipIntoAdd(), _image(seed), seed)


def relu_pair(ns: Namespace, seed: int) -> Any:
    model = TwoRelusIntoAdd(seed_size(seed, 2, 4))
    return fuse(ns, [(RELU, ADD), (CONV,)], model, _image(seed), seed)


def shared_output(ns: Namespace, seed: int) -> Any:
    model = SharedConvOutput(seed_size(seed, 2, 4))
    return fuse(ns, [(CONV, RELU), (CONV,), (ADD,)], model, _image(seed), seed)


def graph_output(ns: Namespace, seed: int) -> Any:
    model = ConvOutputReturned(seed_size(seed + 2, 2, 4))
    return fuse(ns, [(CONV, RELU), (CONV,)], model, _image(seed), seed)


def many_users(ns: Namespace, seed: int) -> Any:
    model = ManyUsers(seed_size(seed + 1, 2, 4))
    return fuse(ns, [(CONV, RELU), (CONV,), (ADD,)], model, _image(seed, 8), seed)


def priority(ns: Namespace, seed: int) -> Any:
    inputs = _image(seed, 8)
    model = ConvReluPool(seed_size(seed, 2, 4))
    return {
        "single_first": fuse(ns, [(RELU,), (CONV, RELU)], model, inputs, seed),
        "pair_first": fuse(ns, [(CONV, RELU), (RELU,)], model, inputs, seed),
    }


def claimed_before(ns: Namespace, seed: int) -> Any:
    model = TwoBranches(seed_size(seed, 2, 4))
    return fuse(
        ns, [(CONV, RELU), (CONV,)], model, _image(seed), seed, before=(EarlyClaims(),), after=(LateOutputClaimer(),)
    )


def marks_members(ns: Namespace, seed: int) -> Any:
    model = ConvReluPool(seed_size(seed + 1, 2, 4))
    return fuse(ns, [(CONV, RELU, MAX_POOL)], model, _image(seed, 8), seed, after=(LateOutputClaimer(),))


def marks_boundaries(ns: Namespace, seed: int) -> Any:
    model = TwoRelusIntoAdd(seed_size(seed + 2, 2, 4))
    return fuse(ns, [(CONV, RELU)], model, _image(seed), seed, after=(LateOutputClaimer(),))


CASES = {
    "chain": chain,
    "interleaved": interleaved,
    "module_names": module_names,
    "residual": residual,
    "constant_operands": constant_operands,
    "cat_list": cat_list,
    "three_ops": three_ops,
    "relu_pair": relu_pair,
    "shared_output": shared_output,
    "graph_output": graph_output,
    "many_users": many_users,
    "priority": priority,
    "claimed_before": claimed_before,
    "marks_members": marks_members,
    "marks_boundaries": marks_boundaries,
}

EXERCISES = with_hidden_cases(
    PUBLIC,
    fusion_quantizer=CASES,
)
