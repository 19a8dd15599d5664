"""M03-2 讀懂 XNNPACKQuantizer 的標籤: label_positions and fused_patterns, on hidden models.

The labelled graphs are copies taken right after ``annotate`` (as in the chapter), so the keys of
``input_qspec_map`` are nodes of the original graph: only names can be compared. Labels come from
torchao's XNNPACKQuantizer, or from a table per model (labels nobody claimed, ``None`` specs, shared
specs, labels on a model input, a graph that already holds an observer). Every model is the same
on every seed.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases import m03_3
from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.probes import Label, Shared, insert_module, put_labels
from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    Quantizer,
    export_module,
    get_xnnpack_quantizer,
    prepare_pt2e,
)
from common.qspecs import act_spec, weight_spec
from selfcheck.evidence import EvidenceError, plain
from selfcheck.probes import CaptureLabels
from selfcheck.public.m01_1 import graph_changes, graph_state
from selfcheck.public.m03_2 import PUBLIC


class SigmoidMlp(nn.Module):
    """linear → sigmoid → linear: XNNPACK leaves sigmoid without a label."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.sigmoid(self.a(x)))


class LinearAddRelu(nn.Module):
    """relu(a(x) + b(x)): two linears added, add → relu fused."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.a(x) + self.b(x))


class FusedByLabels(nn.Module):
    """For table labels that fuse ops other than relu: conv → sigmoid (a mul between them in graph
    order) and mul → hardtanh (the edge between them labelled ``None``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv(x)
        b = x * 3
        return torch.sigmoid(a) + F.hardtanh(b)[:, :1]


class NotFused(nn.Module):
    """For table labels where nothing fuses: conv → relu with the edge labelled, conv → relu with
    every input spec ``None``, an add (no output label) read by a neg and by the graph output."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.b = nn.Conv2d(3, channels, 3, padding=1)
        self.c = nn.Conv2d(3, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = torch.relu(self.b(x)) + torch.relu(self.c(x))
        return -e, e


class TwoInputLast(nn.Module):
    """For table labels where the last op of a fused pattern has another input: conv → add with
    sigmoid → add labelled (the conv is add's second argument), and mul → hardtanh whose output
    label is a ``SharedQuantizationSpec``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.conv(x)
        s = torch.sigmoid(x)
        y = s + a
        m = x * 3
        return y, F.hardtanh(m)


class SecondInputQuantized(nn.Module):
    """For table labels where nothing fuses: conv → mul with the edge labelled (the conv is mul's
    second argument, the first one's edge is ``None``), and a cat whose output label is shared,
    read only by a relu."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.conv(x)
        t = torch.tanh(x)
        u = t * c
        r = torch.abs(x)
        return u, torch.relu(torch.cat([x, r], 1))


TWO_INPUT_LAST = {
    "conv2d": Label({"x": act_spec(), "conv_weight": weight_spec(), "conv_bias": None}),
    "sigmoid": Label(output=act_spec()),
    "add": Label({"sigmoid": act_spec()}, act_spec()),
    "mul": Label({"x": act_spec()}),
    "hardtanh": Label(output=Shared(("x", "mul"))),
}

SECOND_INPUT_QUANTIZED = {
    "conv2d": Label({"x": act_spec(), "conv_weight": weight_spec()}),
    "tanh": Label(output=act_spec()),
    "mul": Label({"tanh": None, "conv2d": act_spec()}, act_spec()),
    "cat": Label({"x": act_spec(), "abs_1": Shared(("x", "cat"))}, Shared(("x", "cat"))),
    "relu": Label(output=act_spec()),
}

FUSED_BY_LABELS = {
    "conv2d": Label({"x": act_spec(), "conv_weight": weight_spec(), "conv_bias": None}, annotated=False),
    "mul": Label({"x": act_spec()}),
    "sigmoid": Label(output=act_spec(), annotated=False),
    "hardtanh": Label({"mul": None}, act_spec()),
    "add": Label({"sigmoid": act_spec(), "slice_1": act_spec()}, act_spec()),
}

NOT_FUSED = {
    "conv2d": Label({"x": act_spec(), "b_weight": weight_spec()}),
    "relu": Label({"conv2d": act_spec()}, act_spec()),
    "conv2d_1": Label({"x": None, "c_weight": None}),
    "relu_1": Label(output=act_spec()),
    "add": Label({"relu": act_spec(), "relu_1": act_spec()}),
    "neg": Label({"add": None}, act_spec()),
}


def _model(name: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from common.models import example_inputs, get_model

    features = seed_size(seed, 4, 8)
    image = seeded_inputs(seed, (2, 3, 8, 8))
    builders = {
        "sigmoid_mlp": lambda: (SigmoidMlp(features), seeded_inputs(seed, (2, features))),
        "linear_add_relu": lambda: (LinearAddRelu(features), seeded_inputs(seed, (2, features))),
        "conv_two_users": lambda: (m03_3.ConvTwoUsers(features), image),
        "fused_by_labels": lambda: (FusedByLabels(features), image),
        "not_fused": lambda: (NotFused(features), image),
        "two_input_last": lambda: (TwoInputLast(), image),
        "second_input_quantized": lambda: (SecondInputQuantized(), image),
    }
    return builders[name]() if name in builders else (get_model(name), example_inputs(2, name))


def labelled(name: str, seed: int, quantizer: Quantizer | None = None) -> GraphModule:
    """The graph as a Quantizer (XNNPACK per-channel by default) left it after annotate (a copy)."""
    if name in m03_3.HIDDEN:
        gm = m03_3.build(name, seed)
    else:
        model, inputs = _model(name, seed)
        gm = export_module(model.eval(), inputs)
    capture = CaptureLabels(quantizer or get_xnnpack_quantizer(is_per_channel=True)[0])
    prepare_pt2e(gm, capture)
    assert capture.annotated is not None
    return capture.annotated


TABLES = {
    "fused_by_labels": FUSED_BY_LABELS,
    "not_fused": NOT_FUSED,
    "two_input_last": TWO_INPUT_LAST,
    "second_input_quantized": SECOND_INPUT_QUANTIZED,
}


def table_labelled(name: str, seed: int) -> GraphModule:
    """A graph labelled from a table (see the models' docstrings), copied like ``labelled``."""
    if name == "table_net":
        gm = m03_3.table_net(seed)
        labels = {
            "leaky_relu": Label(annotated=False),  # an empty label: nothing to list
            "mean": Label({"cat": None}),  # only a None spec: nothing to list
        }
        labels["kernel"] = Label(output=weight_spec(per_channel=False))  # a constant (get_attr) with an output label
        put_labels(gm, labels)
        insert_module(gm, "add", MinMaxObserver(), "observer_by_hand")  # an observer nobody labelled
    else:
        model, inputs = _model(name, seed)
        gm = export_module(model.eval(), inputs)
        put_labels(gm, TABLES[name])
    return copy.deepcopy(gm)


class HalfLabelled(Quantizer):
    """conv2d's inputs labelled, its output and the relu after it not: a pattern left open."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.conv2d.default:
                x, weight = node.args[0], node.args[1]
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                    input_qspec_map={x: act_spec(), weight: weight_spec()}, _annotated=True
                )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


# --- evidence -----------------------------------------------------------------------------------


def _positions(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    before = graph_state(gm)
    got = plain(ns["label_positions"](gm))
    changed = graph_changes(before, gm)
    if not isinstance(got, dict) or set(got) != {"edges", "outputs"}:
        raise EvidenceError('label_positions 應該回傳 {"edges": [...], "outputs": [...]} 這樣的 dict')
    edges = got["edges"]
    if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 for e in edges):
        raise EvidenceError("edges 應該是 (上游名稱, consumer 名稱) 的 list")
    if not isinstance(got["outputs"], list):
        raise EvidenceError("outputs 應該是 node 名稱的 list")
    return {"edges": sorted(edges, key=str), "outputs": sorted(got["outputs"], key=str), "changed": changed}


def _pairs(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    before = graph_state(gm)
    got = plain(ns["fused_patterns"](gm))
    changed = graph_changes(before, gm)
    if not isinstance(got, list) or not all(isinstance(p, list) and len(p) == 2 for p in got):
        raise EvidenceError("fused_patterns 應該回傳 (第一個 op 的名稱, 最後一個 op 的名稱) 的 list")
    return {"pairs": sorted(got, key=str), "changed": changed}


def _over(models: tuple[str, ...], fn: Any, tables: tuple[str, ...] = ()) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        out = {name: fn(ns, labelled(name, seed)) for name in models}
        out.update({name: fn(ns, table_labelled(name, seed)) for name in tables})
        return out

    return case


EXERCISES = with_hidden_cases(
    PUBLIC,
    label_positions={
        "seed_models": _over(("conv_relu", "residual"), _positions),
        "cnn": _over(("small_cnn", "far_relu"), _positions),
        "table": _over((), _positions, ("table_net",)),
        "unseen": _over(("mlp", "sigmoid_mlp", "cat_pool", "constant_adds"), _positions),
    },
    fused_patterns={
        "conv_relu": _over(("small_cnn", "conv_bn_relu", "far_relu", "claimed"), _pairs),
        "add_linear_relu": _over(
            ("residual", "mlp", "linear_add_relu", "constant_adds"), _pairs, ("fused_by_labels", "two_input_last")
        ),
        "nothing_fused": _over(
            ("cat_pool", "sigmoid_mlp", "conv_two_users", "look_alikes"),
            _pairs,
            ("not_fused", "second_input_quantized"),
        ),
        "half_labelled": lambda ns, seed: _pairs(ns, labelled("conv_relu", seed, HalfLabelled())),
    },
)


STANDINS = {
    "label_positions": lambda gm: {"edges": [], "outputs": []},
    "fused_patterns": lambda gm: [],
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a case goes on to export all its models instead of stopping at its first check."""
