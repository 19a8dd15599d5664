"""M03-1 標籤、Quantizer、prepare_pt2e: add_label and reads_quantized, run on hidden models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    export_module,
    prepare_pt2e,
)
from selfcheck.evidence import describe_prepared, plain

NOTEBOOK = "M03-1"

# A position by node names: ("out", node) or ("edge", producer, consumer).
Label = tuple[str, ...]


def spec(limit: int = 127) -> QuantizationSpec:
    """int8 per-tensor affine; ``limit`` < 127 makes a spec whose attributes differ."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-limit - 1 if limit == 127 else -limit,
        quant_max=limit,
        qscheme=torch.per_tensor_affine if limit == 127 else torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


class FanOut(nn.Module):
    """relu(x) read by two linears, a mul and the graph output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.first = nn.Linear(features, features)
        self.second = nn.Linear(features, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return self.first(r), self.second(r), r * 2, r


def _fan_out(seed: int) -> GraphModule:
    features = seed_size(seed, 4, 9)
    return export_module(FanOut(features).eval(), seeded_inputs(seed, (2, features)))


def _by_name(gm: GraphModule) -> dict[str, Node]:
    return {n.name: n for n in gm.graph.nodes}


class StudentLabels(Quantizer):
    """Puts ``labels`` on the graph through the student's ``add_label``."""

    def __init__(self, add_label: Any, labels: list[Label], existing: list[Label] = ()) -> None:
        self.add_label, self.labels, self.existing = add_label, labels, list(existing)

    def annotate(self, model: GraphModule) -> GraphModule:
        nodes = _by_name(model)
        for label in self.existing:  # someone else's labels, put there before the student's
            reference_label(nodes, label, spec(100))
        for label in self.labels:
            position = nodes[label[1]] if label[0] == "out" else (nodes[label[1]], nodes[label[2]])
            self.add_label(position, spec())
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def reference_label(nodes: dict[str, Node], label: Label, qspec: QuantizationSpec) -> None:
    """Put one label the way the answer key does (used to build graphs for reads_quantized)."""
    if label[0] == "out":
        ann = nodes[label[1]].meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
        ann.output_qspec = qspec
    else:
        ann = nodes[label[2]].meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
        ann.input_qspec_map[nodes[label[1]]] = qspec


class ReferenceLabels(Quantizer):
    """Labels with given specs, for building the prepared graphs reads_quantized is asked about."""

    def __init__(self, labels: list[tuple[Label, QuantizationSpec]]) -> None:
        self.labels = labels

    def annotate(self, model: GraphModule) -> GraphModule:
        nodes = _by_name(model)
        for label, qspec in self.labels:
            reference_label(nodes, label, qspec)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


# --- add_label ------------------------------------------------------------------------------------


def _labelled(ns: Namespace, gm: GraphModule, labels: list[Label], existing: list[Label] = ()) -> Any:
    prepared = prepare_pt2e(gm, StudentLabels(ns["add_label"], labels, existing))
    return describe_prepared(prepared)


def label_output_many_users(ns: Namespace, seed: int) -> Any:
    return _labelled(ns, _fan_out(seed), [("out", "relu")])


def label_edge_one_user(ns: Namespace, seed: int) -> Any:
    return _labelled(ns, _fan_out(seed), [("edge", "relu", "linear_1")])


def label_stacked(ns: Namespace, seed: int) -> Any:
    from common.models import example_inputs, get_model

    conv = export_module(get_model("conv_relu").eval(), example_inputs(2))
    mlp = export_module(get_model("mlp").eval(), example_inputs(2, "mlp"))
    return {
        "conv_relu": _labelled(ns, conv, [("out", "relu"), ("edge", "x", "conv2d"), ("edge", "conv_weight", "conv2d")]),
        "mlp": _labelled(
            ns,
            mlp,
            [
                ("edge", "x", "linear"),
                ("edge", "fc1_weight", "linear"),
                ("out", "linear_1"),
                ("edge", "relu", "linear_1"),
            ],
        ),
    }


def label_keeps_existing(ns: Namespace, seed: int) -> Any:
    existing = [("out", "linear"), ("edge", "relu", "mul")]
    return _labelled(ns, _fan_out(seed), [("edge", "relu", "linear"), ("out", "mul")], existing)


def label_not_an_input(ns: Namespace, seed: int) -> Any:
    from common.models import example_inputs, get_model

    gm = export_module(get_model("conv_relu").eval(), example_inputs(2))
    nodes = _by_name(gm)
    try:
        ns["add_label"]((nodes["relu"], nodes["conv2d"]), spec())
    except ValueError as exc:
        return {"raised": type(exc).__name__, "value_error": True}
    except Exception as exc:  # a wrong kind of error is evidence, not a crash
        return {"raised": type(exc).__name__, "value_error": False}
    return {"raised": None, "value_error": False}


# --- reads_quantized ------------------------------------------------------------------------------


def _reads(ns: Namespace, gm: GraphModule, labels: list[tuple[Label, QuantizationSpec]], producer: str) -> Any:
    prepared = prepare_pt2e(gm, ReferenceLabels(labels))
    return plain(ns["reads_quantized"](prepared, producer))


def reads_edge(ns: Namespace, seed: int) -> Any:
    from common.models import example_inputs, get_model

    cat = export_module(get_model("cat_pool").eval(), example_inputs(2))
    return {
        "fan_out": _reads(ns, _fan_out(seed), [(("edge", "relu", "linear_1"), spec())], "relu"),
        "cat_pool": _reads(ns, cat, [(("edge", "x", "conv2d"), spec())], "x"),
    }


def reads_output(ns: Namespace, seed: int) -> Any:
    return _reads(ns, _fan_out(seed), [(("out", "relu"), spec())], "relu")


def reads_chained(ns: Namespace, seed: int) -> Any:
    labels = [(("out", "relu"), spec()), (("edge", "relu", "mul"), spec(100))]
    return _reads(ns, _fan_out(seed), labels, "relu")


def reads_graph_output(ns: Namespace, seed: int) -> Any:
    return _reads(ns, _fan_out(seed), [(("edge", "relu", "linear"), spec()), (("edge", "relu", "mul"), spec())], "relu")


EXERCISES = {
    "add_label": Exercise(
        NOTEBOOK,
        "add_label",
        "add_label：把一張標籤貼在邊或輸出上",
        ("add_label",),
        {
            "output_many_users": label_output_many_users,
            "edge_one_user": label_edge_one_user,
            "stacked": label_stacked,
            "keeps_existing": label_keeps_existing,
            "not_an_input": label_not_an_input,
        },
    ),
    "reads_quantized": Exercise(
        NOTEBOOK,
        "reads_quantized",
        "reads_quantized：哪些 consumer 吃到量化後的值",
        ("reads_quantized",),
        {
            "edge": reads_edge,
            "output": reads_output,
            "chained": reads_chained,
            "graph_output": reads_graph_output,
        },
    ),
}
