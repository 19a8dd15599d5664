"""Public cases of M02-2 手插 observer (insert_observer) on the chapter's own models.

Also how a graph with observers is described, shared with the hidden cases: by what it
does, independent of node order and observer names (which observer instances each input
of each node reads through, and every instance's kind and calibrated qparams).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import is_guard, is_observer_node, observer_record
from selfcheck.public.m01_1 import export

TITLE = "insert_observer：不用 Quantizer，把 observer 插進圖裡"

# A position: ("edge", producer name, consumer name) or ("node", node name).
Position = tuple[str, ...]


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


def position_text(position: Position) -> str:
    return f"邊 {position[1]} → {position[2]}" if position[0] == "edge" else f"node {position[1]}（所有 consumer）"


def insert_all(ns: Namespace, gm: GraphModule, positions: list[tuple[Position, nn.Module]]) -> list[bool]:
    """Call ``insert_observer`` once per position; for each call, whether it returned the new observer node."""
    returned = []
    for position, observer in positions:
        nodes = {n.name: n for n in gm.graph.nodes}
        where: Any = (nodes[position[1]], nodes[position[2]]) if position[0] == "edge" else nodes[position[1]]
        result = ns["insert_observer"](gm, where, observer)
        returned.append(
            type(result) is Node
            and result.graph is gm.graph
            and is_observer_node(gm, result)
            and gm.get_submodule(str(result.target)) is observer
        )
    return returned


def calibrate(gm: GraphModule, shapes: list[tuple[int, ...]], seed: int, steps: int = 4) -> None:
    """Run ``gm`` on ``steps`` seeded batches of the given input shapes."""
    with torch.no_grad():
        for step in range(steps):
            gm(*seeded_inputs(seed * 1000 + step, *shapes))


# --- public cases: the chapter's models -----------------------------------------------------------


def _minmax(qmin: int = -128, qmax: int = 127, qscheme: Any = torch.per_tensor_affine) -> nn.Module:
    from common.pt2e import MinMaxObserver

    return MinMaxObserver(dtype=torch.int8, quant_min=qmin, quant_max=qmax, qscheme=qscheme)


def _run(ns: Namespace, seed: int, name: str, shape: tuple[int, ...], positions: list[tuple[Position, Any]]) -> Any:
    from common.models import get_model

    gm = export(get_model(name), seeded_inputs(seed, shape))
    returned = insert_all(ns, gm, positions)
    calibrate(gm, [shape], seed)
    return {
        "positions": [position_text(p) for p, _ in positions],
        "graph": describe_observed(gm),
        "returned_observer_node": returned,
    }


def conv_relu(ns: Namespace, seed: int) -> Any:
    """The chapter's three positions on conv_relu: x → conv2d, conv_weight → conv2d, the relu's output."""
    positions = [
        (("edge", "x", "conv2d"), _minmax()),
        (("edge", "conv_weight", "conv2d"), _minmax(-127, 127, torch.per_tensor_symmetric)),
        (("node", "relu"), _minmax()),
    ]
    return _run(ns, seed, "conv_relu", (2, 3, 16, 16), positions)


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: only conv2d reads x through the observer; the cat reads conv2d_1 (in a list) through one."""
    positions = [(("edge", "x", "conv2d"), _minmax()), (("edge", "conv2d_1", "cat"), _minmax())]
    return _run(ns, seed, "cat_pool", (2, 3, 16, 16), positions)


def cat_pool_node(ns: Namespace, seed: int) -> Any:
    """cat_pool: the node x, so both convs read x through the same observer node."""
    return _run(ns, seed, "cat_pool", (2, 3, 16, 16), [(("node", "x"), _minmax())])


def mlp_shared(ns: Namespace, seed: int) -> Any:
    """mlp: one observer instance on the node x and on the node relu (shared, like SharedQuantizationSpec)."""
    shared = _minmax()
    return _run(ns, seed, "mlp", (4, 16), [(("node", "x"), shared), (("node", "relu"), shared)])


PUBLIC = declare(
    __name__,
    Exercise(
        "insert_observer",
        TITLE,
        ("insert_observer",),
        {"conv_relu": conv_relu, "cat_pool": cat_pool, "cat_pool_node": cat_pool_node, "mlp_shared": mlp_shared},
    ),
)
