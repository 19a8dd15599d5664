"""Probes and helpers the hidden cases share: Quantizers put around a student's, labels by table,
hand-inserted observers, and a canonical reading of the labels a Quantizer left.

- ``Claimer`` claims nodes (labels them and sets ``_annotated``) before the student's Quantizer
  runs (``first=True``: only the first match) or after it (``late=True``: only what nobody marked,
  so the late one shows what the student's Quantizer marked).
- ``TableLabels`` / ``put_labels`` put whole annotations named node by node (no rule: a table per
  model), for building labelled graphs without any exercise's answer.
- ``label_groups`` reads the annotations (``describe_annotations``) and resolves
  ``SharedQuantizationSpec`` into groups, so two Quantizers that share the same positions compare
  equal however they wrote the sharing.

Nothing here is, or contains, the answer to an exercise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    QuantizationSpecBase,
    Quantizer,
    SharedQuantizationSpec,
    convert_pt2e,
    export_module,
    prepare_pt2e,
)
from selfcheck.casekit import seeded_inputs
from selfcheck.evidence import describe_annotations, describe_converted, describe_prepared, sharing_groups
from selfcheck.probes import ChainQuantizer

__all__ = ["ChainQuantizer"]  # the cases import it from here with the other probes

ADD = torch.ops.aten.add.Tensor
CAT = torch.ops.aten.cat.default
CONV = torch.ops.aten.conv2d.default
LINEAR = torch.ops.aten.linear.default
RELU = torch.ops.aten.relu.default
MAX_POOL = torch.ops.aten.max_pool2d.default


def symmetric_spec(limit: int, observer: Any = MinMaxObserver) -> QuantizationSpec:
    """int8 per-tensor symmetric [-limit, limit]: a spec no exercise uses, so its observers stand out."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-limit,
        quant_max=limit,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=observer,
    )


def by_name(gm: GraphModule) -> dict[str, Node]:
    return {n.name: n for n in gm.graph.nodes}


# --- Quantizers around the student's --------------------------------------------------------------


def _claim(node: Node, limit: int) -> None:
    spec = symmetric_spec(limit)
    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map=dict.fromkeys(node.all_input_nodes, spec), output_qspec=spec, _annotated=True
    )


def _claimed(node: Node) -> bool:
    ann = node.meta.get(ANNOTATION_KEY)
    return ann is not None and bool(ann._annotated)


class Claimer(Quantizer):
    """Labels every input and the output of the ops ``targets`` with int8 [-limit, limit] and claims them.

    ``first``: only the first such op in graph order. ``late``: only the ops nobody marked
    ``_annotated`` yet (run after the student's Quantizer, it shows what the student marked).
    """

    def __init__(self, targets: Iterable[Any], limit: int, *, first: bool = False, late: bool = False) -> None:
        self.targets, self.limit, self.first, self.late = tuple(targets), limit, first, late

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in self.targets:
                continue
            if self.late and _claimed(node):
                continue
            _claim(node, self.limit)
            if self.first:
                break
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class NoLabels(Quantizer):
    """Labels nothing: prepare_pt2e then only folds BN (and inserts no observer)."""

    def annotate(self, model: GraphModule) -> GraphModule:
        return model

    def validate(self, model: GraphModule) -> None:
        pass


class Snapshot(Quantizer):
    """Keeps ``label_groups`` of the graph at the moment it runs (put right after the student's Quantizer)."""

    def __init__(self) -> None:
        self.groups: dict[str, Any] = {}

    def annotate(self, model: GraphModule) -> GraphModule:
        self.groups = label_groups(model)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


# --- labels by table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shared:
    """A ``SharedQuantizationSpec`` written by names: ``Shared(("x", "cat"))`` or ``Shared("relu")``."""

    of: str | tuple[str, str]


@dataclass(frozen=True)
class Label:
    """A whole annotation by names: input edges (producer name → spec), output spec, ``_annotated``."""

    inputs: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    annotated: bool = True


def _resolve(spec: Any, nodes: dict[str, Node]) -> QuantizationSpecBase | None:
    if isinstance(spec, Shared):
        where = spec.of
        return SharedQuantizationSpec((nodes[where[0]], nodes[where[1]]) if isinstance(where, tuple) else nodes[where])
    return spec


def put_labels(gm: GraphModule, table: dict[str, Label]) -> None:
    """Replace the annotation of every node named in ``table`` with the one it gives."""
    nodes = by_name(gm)
    for name, label in table.items():
        nodes[name].meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={nodes[src]: _resolve(spec, nodes) for src, spec in label.inputs.items()},
            output_qspec=_resolve(label.output, nodes),
            _annotated=label.annotated,
        )


class TableLabels(Quantizer):
    """Puts a table of labels on the graph (see ``put_labels``)."""

    def __init__(self, table: dict[str, Label]) -> None:
        self.table = table

    def annotate(self, model: GraphModule) -> GraphModule:
        put_labels(model, self.table)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def xnnpack_labels(gm: GraphModule, per_channel: bool = True) -> GraphModule:
    """Label ``gm`` in place the way prepare_pt2e would with torchao's XNNPACKQuantizer (BN folded first).

    Unlike a copy taken inside prepare_pt2e, the labels' keys are nodes of the graph returned.
    """
    from torchao.quantization.pt2e.quantize_pt2e import _fuse_conv_bn_, _fuse_linear_bn_

    from common.pt2e import get_xnnpack_quantizer

    _fuse_conv_bn_(gm)
    _fuse_linear_bn_(gm)
    quantizer = get_xnnpack_quantizer(is_per_channel=per_channel)[0]
    gm = quantizer.transform_for_annotation(gm)
    quantizer.annotate(gm)
    return gm


# --- hand-inserted observers ----------------------------------------------------------------------


def insert_module(
    gm: GraphModule, producer: str, module: nn.Module, attr: str, consumers: Iterable[str] | None = None
) -> None:
    """Put ``module`` (an observer, or anything) between ``producer`` and its ``consumers`` (all by default)."""
    nodes = by_name(gm)
    source = nodes[producer]
    wanted = None if consumers is None else set(consumers)
    users = [
        u for u in source.users if not str(u.target).startswith("_guards") and (wanted is None or u.name in wanted)
    ]
    gm.add_submodule(attr, module)
    first = next(n for n in gm.graph.nodes if n in users)
    with gm.graph.inserting_before(first):
        inserted = gm.graph.call_module(attr, (source,))
    for user in users:
        user.replace_input_with(source, inserted)
    gm.recompile()


# --- reading labels -------------------------------------------------------------------------------


def position_text(position: tuple[str, ...]) -> str:
    """``("edge", a, b)`` → ``"a → b"``; ``("out", n)`` → ``"n 的輸出"``."""
    return f"{position[1]} → {position[2]}" if position[0] == "edge" else f"{position[1]} 的輸出"


def label_groups(gm: GraphModule) -> dict[str, Any]:
    """The labels on ``gm`` as canonical data, however the sharing was written.

    ``positions``: for every labelled position (an input edge ``"a → b"`` or an output ``"n 的輸出"``)
    whose spec is not ``None``: ``{"node", "output", "constant", "group", "spec"}``: the node that
    carries the label, whether it is an output label, whether the edge comes from a constant
    (``get_attr``), the first position (by text) of the positions joined to it through
    ``SharedQuantizationSpec``, and the ``describe_spec`` of the group's one real spec (``None`` if
    the group has none).
    ``annotated``: ``_annotated`` of every node that carries an annotation.
    """
    described = describe_annotations(gm)
    constants = {n.name for n in gm.graph.nodes if n.op == "get_attr"}
    specs: dict[str, Any] = {}
    owner: dict[str, tuple[str, bool]] = {}
    for name, ann in described.items():
        if not isinstance(ann, dict) or "inputs" not in ann:
            continue
        for source, spec in ann["inputs"]:
            if spec is not None:
                specs[position_text(("edge", source, name))] = spec
                owner[position_text(("edge", source, name))] = (name, source in constants)
        if ann["output"] is not None:
            specs[position_text(("out", name))] = ann["output"]
            owner[position_text(("out", name))] = (name, False)
    groups = sharing_groups(specs)
    positions = {}
    for position in specs:
        group = groups[position]
        real = [specs[p] for p in group if p in specs and specs[p].get("kind") != "shared"]
        node, constant = owner[position]
        positions[position] = {
            "node": node,
            "output": " → " not in position,
            "constant": constant,
            "group": min(group),
            "spec": real[0] if real else None,
        }
    annotated = {
        name: ann["annotated"] for name, ann in described.items() if isinstance(ann, dict) and "annotated" in ann
    }
    return {"positions": dict(sorted(positions.items())), "annotated": annotated}


# --- running a Quantizer on a model ---------------------------------------------------------------


def run_quantizer(
    quantizers: list[Quantizer],
    student: int,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    seed: int,
    convert: bool = False,
    calibrate: int = 3,
) -> dict[str, Any]:
    """Prepare ``model`` with ``quantizers`` chained (``quantizers[student]`` is the student's).

    ``model`` is exported with ``inputs`` first unless it already is a GraphModule. Returns ``labels``
    (``label_groups`` right after the student's ``annotate``), ``prepared`` (after ``calibrate``
    batches shaped like ``inputs``) and, with ``convert``, ``converted`` (converted in place:
    nothing student-made is copied).
    """
    snapshot = Snapshot()
    chain = ChainQuantizer([*quantizers[: student + 1], snapshot, *quantizers[student + 1 :]])
    gm = model if isinstance(model, GraphModule) else export_module(model.eval(), inputs)
    prepared = prepare_pt2e(gm, chain)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate if shapes else 0):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    result: dict[str, Any] = {"labels": snapshot.groups, "prepared": describe_prepared(prepared)}
    if convert:
        result["converted"] = describe_converted(convert_pt2e(prepared))
    return result
