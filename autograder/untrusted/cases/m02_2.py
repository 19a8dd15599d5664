"""M02-2 手插 observer: insert_observer, compared with prepare_pt2e on the same positions.

Every case exports a model twice. On one copy the student's ``insert_observer`` puts an
observer at each position (an edge ``(producer, consumer)`` or a node); the other copy goes
through ``prepare_pt2e`` with a Quantizer that labels exactly those positions (or with the
XNNPACKQuantizer itself, whose positions the first cases copy). Both graphs are calibrated
on the same batches and described by what they do: which observer instances each input of
each node reads through, and every instance's kind and qparams.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from common.pt2e import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
    annotate_input_qspec_map,
    annotate_output_qspec,
)
from selfcheck.evidence import is_guard, is_observer_node, observer_record

NOTEBOOK = "M02-2"

# A position: ("edge", producer name, consumer name) or ("node", node name).
Position = tuple[str, ...]


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


# --- describing a graph by behaviour ------------------------------------------------------------


def describe_observed(gm: GraphModule) -> dict[str, Any]:
    """What a graph with observers does, independent of node order and observer names.

    ``edges``: for every node that is not an observer, placeholder or guard, in graph order,
    ``[consumer, source, [instance, ...]]`` per input, the observer instances met walking from
    the source to the consumer. Instances are numbered in order of first appearance along
    ``edges``; ``instances`` holds each one's record (class, range, scheme, qparams).
    """
    numbers: dict[int, int] = {}
    instances: list[dict[str, Any]] = []
    edges: list[list[Any]] = []
    for node in gm.graph.nodes:
        if is_observer_node(gm, node) or node.op == "placeholder" or is_guard(node):
            continue
        for arg in node.all_input_nodes:
            modules = []
            source: Any = arg
            steps = 0
            while is_observer_node(gm, source) and steps < 100:
                modules.append(gm.get_submodule(str(source.target)))
                source = source.args[0] if source.args else None
                steps += 1
            chain = []
            for module in reversed(modules):
                if id(module) not in numbers:
                    numbers[id(module)] = len(numbers)
                    instances.append(observer_record(module))
                chain.append(numbers[id(module)])
            edges.append([node.name, source.name if isinstance(source, Node) else "?", chain])
    return {"edges": edges, "instances": instances}


# --- running a case -----------------------------------------------------------------------------


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


def _calibrate(gm: GraphModule, shapes: list[tuple[int, ...]], seed: int, steps: int = 4) -> None:
    with torch.no_grad():
        for step in range(steps):
            gm(*seeded_inputs(seed * 1000 + step, *shapes))


def run_positions(
    ns: Namespace,
    seed: int,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    positions: list[tuple[Position, str]],
    specs: dict[str, Any],
    reference_quantizer: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Insert observers with the student's function and with prepare_pt2e; calibrate; describe both."""
    from common.pt2e import export_module, prepare_pt2e

    gm = export_module(model.eval(), inputs)
    reference = copy.deepcopy(gm)
    observers: dict[str, nn.Module] = {}
    returned = []
    for position, group in positions:
        if group not in observers:
            observers[group] = _observer_from_spec(specs[group])
        nodes = {n.name: n for n in gm.graph.nodes}
        where: Any = (nodes[position[1]], nodes[position[2]]) if position[0] == "edge" else nodes[position[1]]
        result = ns["insert_observer"](gm, where, observers[group])
        returned.append(
            type(result) is Node
            and result.graph is gm.graph
            and is_observer_node(gm, result)
            and gm.get_submodule(str(result.target)) is observers[group]
        )
    quantizer = reference_quantizer() if reference_quantizer else PositionQuantizer(positions, specs)
    prepared = prepare_pt2e(reference, quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    _calibrate(gm, shapes, seed)
    _calibrate(prepared, shapes, seed)
    return {
        "positions": [_position_text(p) for p, _ in positions],
        "mine": describe_observed(gm),
        "prepare_pt2e": describe_observed(prepared),
        "returned_observer_node": all(returned),
    }


def _position_text(position: Position) -> str:
    return f"邊 {position[1]} → {position[2]}" if position[0] == "edge" else f"node {position[1]}（所有使用者）"


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


def case_edges(ns: Namespace, seed: int) -> Any:
    """cat_pool: x feeds two convs; only the edge x → conv2d is observed (and conv2d_1 → cat)."""
    from common.models import get_model

    positions = [(("edge", "x", "conv2d"), "a"), (("edge", "conv2d_1", "cat"), "b")]
    inputs = seeded_inputs(seed, (seed_size(seed, 2, 4), 3, 16, 16))
    return run_positions(ns, seed, get_model("cat_pool"), inputs, positions, {"a": _minmax(), "b": _moving(0.5)})


def case_nodes(ns: Namespace, seed: int) -> Any:
    """cat_pool: the outputs of x (two convs read it) and of cat; and a relu that is also returned."""
    from common.models import get_model

    positions = [(("node", "x"), "a"), (("node", "cat"), "b")]
    inputs = seeded_inputs(seed, (seed_size(seed, 2, 4), 3, 16, 16))
    pool = run_positions(ns, seed, get_model("cat_pool"), inputs, positions, {"a": _minmax(), "b": _moving(0.5)})
    features = seed_size(seed, 4, 9)
    positions = [(("edge", "x", "linear"), "a"), (("node", "relu"), "b")]
    inputs = seeded_inputs(seed, (3, features))
    outputs = run_positions(
        ns, seed, TwoOutputs(features), inputs, positions, {"a": _minmax(), "b": _symmetric_minmax()}
    )
    return {"cat_pool": pool, "two_outputs": outputs}


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


EXERCISES = {
    "insert_observer": Exercise(
        NOTEBOOK,
        "insert_observer",
        "insert_observer：不用 Quantizer，把 observer 插進圖裡",
        ("insert_observer",),
        {
            "conv_relu": case_conv_relu,
            "linear_relu": case_linear_relu,
            "edges": case_edges,
            "nodes": case_nodes,
            "repeated_input": case_repeated_input,
            "shared": case_shared,
        },
    ),
}
