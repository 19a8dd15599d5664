"""Public cases of M03-2 讀懂 XNNPACKQuantizer 的標籤 (label_positions, fused_patterns) on the chapter's own models.

The graphs are labelled by torchao's XNNPACKQuantizer (per-channel) and copied right after
``annotate``, as in the chapter. The answers are compared sorted: their order does not matter.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import EvidenceError, plain
from selfcheck.probes import CaptureLabels
from selfcheck.public.m03_1 import export


def labelled(name: str) -> GraphModule:
    """A chapter model as XNNPACKQuantizer (per-channel) labelled it, copied after annotate."""
    from common.pt2e import get_xnnpack_quantizer, prepare_pt2e

    capture = CaptureLabels(get_xnnpack_quantizer(is_per_channel=True)[0])
    prepare_pt2e(export(name), capture)
    assert capture.annotated is not None
    return capture.annotated


class Branches(nn.Module):
    """Five short branches from x, for labels written by hand (see ``hand_labelled``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 1, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = self.conv(x)
        c = torch.abs(x)
        b = torch.tanh(a)
        d = torch.relu(c)
        e = torch.sigmoid(x - 1)
        f = torch.relu(x * 3)
        k = self.conv2(x)
        return b, d, e, f, torch.relu(k), k, torch.exp(-x)


def hand_labelled() -> GraphModule:
    """Branches with labels written by hand, copied like the chapter's graphs.

    conv2d → tanh: fused (tanh's label nobody claimed); abs → relu: not fused (the edge is
    quantized); sub → sigmoid: fused (the edge's spec is None); mul → relu_1: not fused (mul's
    input spec is None); conv2d_1 has two users; neg → exp: exp has no label. x's own output is
    labelled too, and sub shares its input's spec.
    """
    from common.models import example_inputs
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, SharedQuantizationSpec, export_module
    from common.qspecs import act_spec, weight_spec

    gm = export_module(Branches().eval(), example_inputs(2))
    n = {node.name: node for node in gm.graph.nodes}

    def label(name: str, inputs: dict[str, Any], output: Any = None, claimed: bool = True) -> None:
        n[name].meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={n[k]: v for k, v in inputs.items()}, output_qspec=output, _annotated=claimed
        )

    label("x", {}, act_spec())
    label("conv2d", {"x": act_spec(), "conv_weight": weight_spec(), "conv_bias": None})
    label("tanh", {}, act_spec(), claimed=False)
    label("abs_1", {"x": act_spec()})
    label("relu", {"abs_1": act_spec()}, act_spec())
    label("sub", {"x": SharedQuantizationSpec(n["x"])}, claimed=False)
    label("sigmoid", {"sub": None}, act_spec())
    label("mul", {"x": None})
    label("relu_1", {}, act_spec())
    label("conv2d_1", {"x": act_spec(), "conv2_weight": weight_spec()})
    label("relu_2", {}, act_spec())
    label("neg", {"x": act_spec()})
    return copy.deepcopy(gm)


def _positions(ns: Namespace, name: str) -> dict[str, Any]:
    got = plain(ns["label_positions"](hand_labelled() if name == "hand" else labelled(name)))
    if not isinstance(got, dict) or set(got) != {"edges", "outputs"}:
        raise EvidenceError('label_positions 應該回傳 {"edges": [...], "outputs": [...]} 這樣的 dict')
    if not isinstance(got["edges"], list) or not all(isinstance(e, list) and len(e) == 2 for e in got["edges"]):
        raise EvidenceError("edges 應該是 (上游名稱, consumer 名稱) 的 list")
    if not isinstance(got["outputs"], list):
        raise EvidenceError("outputs 應該是 node 名稱的 list")
    return {"edges": sorted(got["edges"], key=str), "outputs": sorted(got["outputs"], key=str)}


def _pairs(ns: Namespace, name: str) -> list[Any]:
    got = plain(ns["fused_patterns"](hand_labelled() if name == "hand" else labelled(name)))
    if not isinstance(got, list) or not all(isinstance(p, list) and len(p) == 2 for p in got):
        raise EvidenceError("fused_patterns 應該回傳 (第一個 op, 最後一個 op) 的 list")
    return sorted(got, key=str)


def positions_residual(ns: Namespace, seed: int) -> Any:
    """residual: the add's two input edges, bias labels that are None, and empty labels on constants."""
    return _positions(ns, "residual")


def positions_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: two convs that read x, a cat nobody labelled."""
    return _positions(ns, "cat_pool")


def positions_by_hand(ns: Namespace, seed: int) -> Any:
    """Labels written by hand: some nobody claimed, one on the model input x, a shared spec, None specs."""
    return _positions(ns, "hand")


def fused_by_hand(ns: Namespace, seed: int) -> Any:
    """Labels written by hand (see ``hand_labelled``): what fuses is read from the labels, not the ops."""
    return _pairs(ns, "hand")


def fused_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn (two conv → relu) and conv_bn_relu (BN folded into the conv)."""
    return {name: _pairs(ns, name) for name in ("small_cnn", "conv_bn_relu")}


def fused_mlp_cat(ns: Namespace, seed: int) -> Any:
    """mlp (linear → relu) and cat_pool (nothing fused)."""
    return {name: _pairs(ns, name) for name in ("mlp", "cat_pool")}


PUBLIC = declare(
    __name__,
    Exercise(
        "label_positions",
        "label_positions：列出會被量化的邊與輸出",
        ("label_positions",),
        {"residual": positions_residual, "cat_pool": positions_cat_pool, "by_hand": positions_by_hand},
    ),
    Exercise(
        "fused_patterns",
        "fused_patterns：從標籤找出融合的 pattern",
        ("fused_patterns",),
        {"small_cnn": fused_small_cnn, "mlp_cat_pool": fused_mlp_cat, "by_hand": fused_by_hand},
    ),
)
