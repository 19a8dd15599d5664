"""M02-2 手插 observer: insert_observer, compared with prepare_pt2e on the same positions.

Every case exports a model twice. On one copy the student's ``insert_observer`` puts an
observer at each position (an edge ``(producer, consumer)`` or a node); the other copy goes
through ``prepare_pt2e`` with a Quantizer that labels exactly those positions (or with the
XNNPACKQuantizer itself, whose positions the first cases copy). Both graphs are calibrated
on the same batches and described by what they do (``selfcheck.public.m02_2.describe_observed``).
One case starts from a graph ``prepare_pt2e`` already filled with observers (one instance
shared by two nodes): the student's observers must go in beside them without replacing any.
Another starts from a graph an earlier pass edited so that two muls read their second tensor as the
keyword argument ``other`` (export itself puts every tensor in ``args``): an observer on that edge or
node must reach them too. ``prepare_pt2e`` refuses a labelled node with a tensor keyword, so its copy
is prepared first and edited the same way after.
Every model appears on every seed; the seed changes sizes, weights and calibration data.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from common.pt2e import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
    annotate_input_qspec_map,
    annotate_output_qspec,
)
from selfcheck.public.m02_2 import PUBLIC, Position, calibrate, describe_observed, insert_all, position_text

# --- hidden models ------------------------------------------------------------------------------


class TwoOutputs(nn.Module):
    """linear → relu; the relu output is both returned and fed to a sigmoid."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(self.linear(x))
        return r, torch.sigmoid(r)


class SquareRelu(nn.Module):
    """relu(x) * relu(x): one producer read twice by the same consumer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(x)
        return r * r


class AddTwo(nn.Module):
    """(a + b) then tanh."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.tanh(a + b)


class Branches(nn.Module):
    """x read by two convs (with and without bias) and by a mul as its second argument;
    the first conv read by a mean, a cat (inside a list) and an add with a scalar.

    Node names: x, conv2d, conv2d_1, mean, mul, cat, max_pool2d, add, output.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(3, channels, 3, padding=1)
        self.conv_b = nn.Conv2d(3, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.conv_a(x)
        b = self.conv_b(x)
        g = torch.mul(a.mean(1, keepdim=True), x)
        y = torch.cat([a, b, g], dim=1)
        return torch.max_pool2d(y, 2), a + 1.0


class KeywordGates(nn.Module):
    """linear → tanh and sigmoid; mul(tanh, sigmoid) and mul(linear, tanh) (``keyword_reads`` then moves each
    mul's second tensor into ``kwargs``). Node names: x, linear, tanh, sigmoid, mul, mul_1, output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.linear(x)
        t = torch.tanh(y)
        return t * torch.sigmoid(y), y * t


KEYWORD_READERS = ("mul", "mul_1")


def keyword_reads(gm: GraphModule) -> None:
    """An earlier pass rebuilt both muls as ``mul(a, other=b)``: their second tensor is a keyword argument."""
    for node in gm.graph.nodes:
        if node.name in KEYWORD_READERS:
            first, second = node.args
            node.args, node.kwargs = (first,), {"other": second}
    gm.graph.lint()
    gm.recompile()


class TwoStage(nn.Module):
    """a + b → tanh; tanh * c → sigmoid; tanh is also returned."""

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = torch.tanh(a + b)
        return torch.sigmoid(t * c), t


# --- the reference: prepare_pt2e labelling the same positions -----------------------------------


class PositionQuantizer(Quantizer):
    """Labels the given positions; positions in one group share the first one's observer."""

    def __init__(self, positions: list[tuple[Position, str]], specs: dict[str, Any]) -> None:
        self.positions = positions
        self.specs = specs

    def annotate(self, model: GraphModule) -> GraphModule:
        nodes = {n.name: n for n in model.graph.nodes}
        first: dict[str, Any] = {}
        for position, group in self.positions:
            where: Any = (nodes[position[1]], nodes[position[2]]) if position[0] == "edge" else nodes[position[1]]
            spec = SharedQuantizationSpec(first[group]) if group in first else self.specs[group]
            first.setdefault(group, where)
            if position[0] == "edge":
                annotate_input_qspec_map(where[1], where[0], spec)
            else:
                annotate_output_qspec(where, spec)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _observer_from_spec(spec: Any) -> nn.Module:
    """The observer ``prepare_pt2e`` would build from ``spec``."""
    from torchao.quantization.pt2e.prepare import _create_obs_or_fq_from_qspec

    return _create_obs_or_fq_from_qspec(spec, {}, False)


def _observers(positions: list[tuple[Position, str]], specs: dict[str, Any]) -> list[tuple[Position, nn.Module]]:
    """One fresh observer per group (the same instance for every position of the group)."""
    made: dict[str, nn.Module] = {}
    for _, group in positions:
        if group not in made:
            made[group] = _observer_from_spec(specs[group])
    return [(position, made[group]) for position, group in positions]


def run_positions(
    ns: Namespace,
    seed: int,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    positions: list[tuple[Position, str]],
    specs: dict[str, Any],
    reference_quantizer: Callable[[], Any] | None = None,
    prepared_first: list[tuple[Position, str]] | None = None,
    edit: Callable[[GraphModule], None] | None = None,
) -> dict[str, Any]:
    """Insert observers with the student's function and with prepare_pt2e; calibrate; describe both.

    With ``prepared_first``, the student's copy is first prepared by prepare_pt2e on those
    positions, then the student inserts ``positions``; the reference labels both at once.
    With ``edit`` (an earlier pass), the student's copy is edited before the observers go in, and
    prepare_pt2e's after (``edit`` must read the same on both).
    """
    from common.pt2e import export_module, prepare_pt2e

    gm = export_module(model.eval(), inputs)
    reference = copy.deepcopy(gm)
    if edit is not None:
        edit(gm)
    if prepared_first:
        gm = prepare_pt2e(gm, PositionQuantizer(prepared_first, specs))
    returned = insert_all(ns, gm, _observers(positions, specs))
    if reference_quantizer is not None:
        quantizer = reference_quantizer()
    else:
        quantizer = PositionQuantizer([*(prepared_first or []), *positions], specs)
    prepared = prepare_pt2e(reference, quantizer)
    if edit is not None:
        edit(prepared)
    shapes = [tuple(t.shape) for t in inputs]
    calibrate(gm, shapes, seed)
    calibrate(prepared, shapes, seed)
    return {
        "positions": [position_text(p) for p, _ in [*(prepared_first or []), *positions]],
        "mine": describe_observed(gm),
        "prepare_pt2e": describe_observed(prepared),
        "returned_observer_node": all(returned),
    }


# --- specs --------------------------------------------------------------------------------------


def _spec(observer: Any, qmin: int = -128, qmax: int = 127, qscheme: Any = torch.per_tensor_affine, **extra: Any):
    ctr = observer.with_args(**extra) if extra else observer
    return QuantizationSpec(
        dtype=torch.int8, quant_min=qmin, quant_max=qmax, qscheme=qscheme, observer_or_fake_quant_ctr=ctr
    )


def _minmax() -> QuantizationSpec:
    return _spec(MinMaxObserver)


def _moving(constant: float) -> QuantizationSpec:
    return _spec(MovingAverageMinMaxObserver, averaging_constant=constant)


def _symmetric_minmax() -> QuantizationSpec:
    return _spec(MinMaxObserver, -127, 127, torch.per_tensor_symmetric)


# --- cases --------------------------------------------------------------------------------------


def _xnnpack_case(ns: Namespace, seed: int, model_name: str, per_channel: bool, names: tuple[str, str, str]) -> Any:
    """Positions copied from XNNPACKQuantizer: input edge, weight edge, relu output."""
    from common.models import get_model
    from common.pt2e import get_xnnpack_quantizer

    _, config = get_xnnpack_quantizer(is_per_channel=per_channel)
    op, weight, relu = names
    positions = [(("edge", "x", op), "act"), (("edge", weight, op), "weight"), (("node", relu), "out")]
    specs = {"act": config.input_activation, "weight": config.weight, "out": config.output_activation}
    shape = (seed_size(seed, 2, 5), 3, 16, 16) if model_name == "conv_relu" else (seed_size(seed, 2, 5), 16)
    inputs = seeded_inputs(seed, shape)
    return run_positions(
        ns,
        seed,
        get_model(model_name),
        inputs,
        positions,
        specs,
        reference_quantizer=lambda: get_xnnpack_quantizer(is_per_channel=per_channel)[0],
    )


def case_conv_relu(ns: Namespace, seed: int) -> Any:
    return _xnnpack_case(ns, seed, "conv_relu", True, ("conv2d", "conv_weight", "relu"))


def case_linear_relu(ns: Namespace, seed: int) -> Any:
    return _xnnpack_case(ns, seed, "linear_relu", False, ("linear", "linear_weight", "relu"))


def _branches(seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Branches(seed_size(seed, 2, 4)), seeded_inputs(seed, (seed_size(seed, 2, 3), 3, 8, 8))


def case_edges(ns: Namespace, seed: int) -> Any:
    """Branches: x → conv2d (x has three readers), x → mul (second argument), conv2d_1 → cat (in a list),
    conv2d → add (the add's other operand is a scalar)."""
    positions = [
        (("edge", "x", "conv2d"), "a"),
        (("edge", "x", "mul"), "b"),
        (("edge", "conv2d_1", "cat"), "c"),
        (("edge", "conv2d", "add"), "d"),
    ]
    # x → conv2d and x → mul differ in qscheme: prepare_pt2e would merge equal specs on one tensor
    specs = {"a": _minmax(), "b": _symmetric_minmax(), "c": _moving(0.5), "d": _moving(0.2)}
    model, inputs = _branches(seed)
    return run_positions(ns, seed, model, inputs, positions, specs)


def case_nodes(ns: Namespace, seed: int) -> Any:
    """Branches: the outputs of x (two convs, a mul and the guard read it) and of conv2d (a mean, a cat in
    a list, an add); and a relu that is also returned."""
    model, inputs = _branches(seed)
    positions = [(("node", "x"), "a"), (("node", "conv2d"), "b")]
    branches = run_positions(ns, seed, model, inputs, positions, {"a": _minmax(), "b": _moving(0.5)})
    features = seed_size(seed, 4, 9)
    positions = [(("edge", "x", "linear"), "a"), (("node", "relu"), "b")]
    inputs = seeded_inputs(seed, (3, features))
    outputs = run_positions(
        ns, seed, TwoOutputs(features), inputs, positions, {"a": _minmax(), "b": _symmetric_minmax()}
    )
    return {"branches": branches, "two_outputs": outputs}


def case_repeated_input(ns: Namespace, seed: int) -> Any:
    """mul(r, r): one edge, one observer, read at both argument positions."""
    positions = [(("edge", "relu", "mul"), "a")]
    inputs = seeded_inputs(seed, (4, seed_size(seed, 3, 10)))
    return run_positions(ns, seed, SquareRelu(), inputs, positions, {"a": _moving(0.5)})


def case_shared(ns: Namespace, seed: int) -> Any:
    """One observer instance passed for both input edges and the output of an add."""
    features = seed_size(seed, 4, 12)
    positions = [(("edge", "a", "add"), "s"), (("edge", "b", "add"), "s"), (("node", "add"), "s")]
    inputs = seeded_inputs(seed, (4, features), (4, features), scales=(1.0, 4.0))
    return run_positions(ns, seed, AddTwo(), inputs, positions, {"s": _minmax()})


def _keyword_case(ns: Namespace, seed: int, positions: list[tuple[Position, str]], specs: dict[str, Any]) -> Any:
    """KeywordGates after a pass moved each mul's second tensor into ``kwargs`` (``other``), with ``positions``.
    ``keyword_reads``: the (consumer, producer) pairs read through a keyword."""
    features = seed_size(seed, 4, 12)
    inputs = seeded_inputs(seed, (4, features), scales=(2.0,))
    reads = [["mul", "sigmoid"], ["mul_1", "tanh"]]
    found = run_positions(ns, seed, KeywordGates(features), inputs, positions, specs, edit=keyword_reads)
    return {**found, "keyword_reads": reads}


def case_keywords(ns: Namespace, seed: int) -> Any:
    """KeywordGates: an edge tanh → mul_1 (mul reads tanh too, in ``args``). The nodes are ``keyword_nodes``'s,
    a case of their own so that an edge that stops the run does not take the nodes' answer with it."""
    edge = _keyword_case(
        ns,
        seed,
        [(("edge", "x", "linear"), "a"), (("edge", "tanh", "mul_1"), "b")],
        {"a": _minmax(), "b": _moving(0.5)},
    )
    return {"edge": edge}


def case_keyword_nodes(ns: Namespace, seed: int) -> Any:
    """KeywordGates: the nodes linear and sigmoid (mul reads the sigmoid as ``other``)."""
    node = _keyword_case(
        ns,
        seed,
        [(("node", "linear"), "a"), (("node", "sigmoid"), "b")],
        {"a": _minmax(), "b": _symmetric_minmax()},
    )
    return {"node": node}


def case_prepared(ns: Namespace, seed: int) -> Any:
    """TwoStage prepared by prepare_pt2e first (a → add and b → add share one instance, registered under
    two names; add has its own output observer); then the student adds c → mul and the node tanh."""
    features = seed_size(seed, 4, 12)
    inputs = seeded_inputs(seed, (4, features), (4, features), (4, features), scales=(1.0, 3.0, 2.0))
    first = [(("edge", "a", "add"), "s"), (("edge", "b", "add"), "s"), (("node", "add"), "out")]
    positions = [(("edge", "c", "mul"), "c"), (("node", "tanh"), "t")]
    specs = {"s": _minmax(), "out": _symmetric_minmax(), "c": _moving(0.5), "t": _minmax()}
    return run_positions(ns, seed, TwoStage(), inputs, positions, specs, prepared_first=first)


EXERCISES = with_hidden_cases(
    PUBLIC,
    insert_observer={
        "conv_relu": case_conv_relu,
        "linear_relu": case_linear_relu,
        "edges": case_edges,
        "nodes": case_nodes,
        "repeated_input": case_repeated_input,
        "shared": case_shared,
        "prepared": case_prepared,
        "keywords": case_keywords,
        "keyword_nodes": case_keyword_nodes,
    },
)
