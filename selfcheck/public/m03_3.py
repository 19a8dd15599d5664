"""Public cases of M03-3 規則式 Quantizer (RuleQuantizer, CheckedRuleQuantizer.validate) on the chapter's own models.

RuleQuantizer: the labels it writes (each position with the spec it uses, which nodes it
claims) and the observers they give, described canonically (``selfcheck.public.m03_1``).
validate: graphs labelled correctly by torchao's XNNPACKQuantizer, then one label spoiled; the
evidence is whether validate raised ValueError and whether the message names the node.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node

from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec
from common.qspecs import act_spec
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import safe_text
from selfcheck.public.m03_1 import export, labels, observers

# --- RuleQuantizer --------------------------------------------------------------------------------


def _rules(ns: Namespace, name: str) -> dict[str, Any]:
    from common.pt2e import prepare_pt2e

    prepared = prepare_pt2e(export(name), ns["RuleQuantizer"]())
    found = labels(prepared)
    return {"labels": found["positions"], "claimed": found["claimed"], **observers(prepared)}


def rule_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn (the chapter's model): conv → relu twice, max_pool2d, a linear."""
    return _rules(ns, "small_cnn")


def rule_residual_mlp(ns: Namespace, seed: int) -> Any:
    """residual (BN folded, an add of conv2d_1 and x), mlp (linear → relu → linear: linear does not fuse)
    and cat_pool (two convs into a cat, then max_pool2d)."""
    return {name: _rules(ns, name) for name in ("residual", "mlp", "cat_pool")}


# --- validate -------------------------------------------------------------------------------------


def xnnpack_labelled(name: str, spoil: Callable[[dict[str, Node]], None] | None = None) -> GraphModule:
    """A chapter model (without BN) labelled in place by XNNPACKQuantizer (per-channel), then ``spoil``-ed."""
    from common.pt2e import get_xnnpack_quantizer

    quantizer = get_xnnpack_quantizer(is_per_channel=True)[0]
    gm = quantizer.transform_for_annotation(export(name))
    quantizer.annotate(gm)
    if spoil is not None:
        spoil({n.name: n for n in gm.graph.nodes})
    return gm


def verdict(ns: Namespace, gm: GraphModule, node: str | None) -> str:
    """``沒有出錯``, ``ValueError，訊息寫出 <node>``, ``ValueError，訊息沒寫出 <node>`` or the other error's name."""
    try:
        ns["CheckedRuleQuantizer"]().validate(gm)
    except ValueError as exc:
        if node is None:
            return "ValueError"
        named = re.search(rf"(?<![A-Za-z0-9_]){re.escape(node)}(?![A-Za-z0-9_])", safe_text(exc)) is not None
        return f"ValueError，訊息{'寫出' if named else '沒寫出'} {node}"
    except Exception as exc:  # the wrong kind of error shows in the comparison
        return type(exc).__name__
    return "沒有出錯"


def _label(nodes: dict[str, Node], name: str) -> Any:
    return nodes[name].meta[ANNOTATION_KEY]


def validate_correct(ns: Namespace, seed: int) -> Any:
    """Correct labels (XNNPACKQuantizer's) on small_cnn, cat_pool and mlp: no error."""
    return {name: verdict(ns, xnnpack_labelled(name), None) for name in ("small_cnn", "cat_pool", "mlp")}


def validate_spoiled(ns: Namespace, seed: int) -> Any:
    """One wrong label each: conv2d's weight per-tensor affine (small_cnn, the chapter's example); conv2d's
    output labelled inside conv → relu (conv_relu); an input edge from x on conv2d_1, which does not read x
    (small_cnn); a label on cat with the output spec int8 [0, 255] (cat_pool)."""

    def affine_weight(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").input_qspec_map[nodes["conv1_weight"]] = act_spec()

    def fused_output(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").output_qspec = act_spec()

    def not_an_input(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d_1").input_qspec_map[nodes["x"]] = act_spec()

    def too_wide(nodes: dict[str, Node]) -> None:
        wide = QuantizationSpec(
            dtype=torch.int8,
            quant_min=0,
            quant_max=255,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        nodes["cat"].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=wide)

    return {
        "weight_affine": verdict(ns, xnnpack_labelled("small_cnn", affine_weight), "conv2d"),
        "fused_output": verdict(ns, xnnpack_labelled("conv_relu", fused_output), "conv2d"),
        "not_an_input": verdict(ns, xnnpack_labelled("small_cnn", not_an_input), "conv2d_1"),
        "too_wide": verdict(ns, xnnpack_labelled("cat_pool", too_wide), "cat"),
    }


PUBLIC = declare(
    __name__,
    Exercise(
        "rule_quantizer",
        "RuleQuantizer：依 node.target 照規則表貼標籤",
        ("RuleQuantizer",),
        {"small_cnn": rule_small_cnn, "residual_mlp": rule_residual_mlp},
    ),
    Exercise(
        "validate",
        "validate：擋住錯的標籤",
        ("CheckedRuleQuantizer",),
        {"correct": validate_correct, "spoiled": validate_spoiled},
    ),
)
