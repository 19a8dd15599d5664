"""M03-2 讀懂 XNNPACKQuantizer 的標籤: label_positions and fused_patterns, on hidden models."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.untrusted.cases.base import Exercise, Namespace, seeded_inputs
from common.pt2e import (
    ANNOTATION_KEY,
    QuantizationAnnotation,
    Quantizer,
    export_module,
    get_xnnpack_quantizer,
    prepare_pt2e,
)
from common.qspecs import act_spec, weight_spec
from selfcheck.evidence import EvidenceError, plain

NOTEBOOK = "M03-2"


class CaptureLabels(Quantizer):
    """Runs an inner Quantizer and keeps a copy of the graph right after annotate."""

    def __init__(self, inner: Quantizer) -> None:
        self.inner = inner
        self.annotated: GraphModule | None = None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        self.inner.annotate(model)
        self.annotated = copy.deepcopy(model)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


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


class ConvTwoUsers(nn.Module):
    """A conv whose output is read by relu and by a mul: nothing to fuse."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return torch.relu(y), y * 2


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


def _features(seed: int) -> int:
    return 4 + seed % 5


def labelled(name: str, seed: int, quantizer: Quantizer | None = None) -> GraphModule:
    """The graph as a Quantizer (XNNPACK per-channel by default) left it after annotate."""
    from common.models import example_inputs, get_model

    features = _features(seed)
    builders = {
        "sigmoid_mlp": lambda: (SigmoidMlp(features), seeded_inputs(seed, (2, features))),
        "linear_add_relu": lambda: (LinearAddRelu(features), seeded_inputs(seed, (2, features))),
        "conv_two_users": lambda: (ConvTwoUsers(features), seeded_inputs(seed, (2, 3, 8, 8))),
    }
    if name in builders:
        model, inputs = builders[name]()
    else:
        model, inputs = get_model(name), example_inputs(2, name)
    gm = export_module(model.eval(), inputs)
    capture = CaptureLabels(quantizer or get_xnnpack_quantizer(is_per_channel=True)[0])
    prepare_pt2e(gm, capture)
    assert capture.annotated is not None
    return capture.annotated


def _positions(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    got = plain(ns["label_positions"](gm))
    if not isinstance(got, dict) or set(got) != {"edges", "outputs"}:
        raise EvidenceError('label_positions 應該回傳 {"edges": [...], "outputs": [...]} 這樣的 dict')
    edges = got["edges"]
    if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 for e in edges):
        raise EvidenceError("edges 應該是 (上游名稱, consumer 名稱) 的 list")
    if not isinstance(got["outputs"], list):
        raise EvidenceError("outputs 應該是 node 名稱的 list")
    return {"edges": sorted(edges, key=str), "outputs": sorted(got["outputs"], key=str)}


def _pairs(ns: Namespace, gm: GraphModule) -> list[Any]:
    got = plain(ns["fused_patterns"](gm))
    if not isinstance(got, list) or not all(isinstance(p, list) and len(p) == 2 for p in got):
        raise EvidenceError("fused_patterns 應該回傳 (第一個 op, 最後一個 op) 的 list")
    return sorted(got, key=str)


def _over(models: tuple[str, ...], fn: Any) -> Any:
    def case(ns: Namespace, seed: int) -> Any:
        return {name: fn(ns, labelled(name, seed)) for name in models}

    return case


EXERCISES = {
    "label_positions": Exercise(
        NOTEBOOK,
        "label_positions",
        "label_positions：列出會被量化的邊與輸出",
        ("label_positions",),
        {
            "seed_models": _over(("conv_relu", "residual"), _positions),
            "cnn": _over(("small_cnn",), _positions),
            "unseen": _over(("mlp", "sigmoid_mlp", "cat_pool"), _positions),
        },
    ),
    "fused_patterns": Exercise(
        NOTEBOOK,
        "fused_patterns",
        "fused_patterns：從標籤找出融合的 pattern",
        ("fused_patterns",),
        {
            "conv_relu": _over(("small_cnn", "conv_bn_relu"), _pairs),
            "add_linear_relu": _over(("residual", "mlp", "linear_add_relu"), _pairs),
            "nothing_fused": _over(("cat_pool", "sigmoid_mlp", "conv_two_users"), _pairs),
            "half_labelled": lambda ns, seed: _pairs(ns, labelled("conv_relu", seed, HalfLabelled())),
        },
    ),
}
