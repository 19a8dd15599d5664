"""M03-3 規則式 Quantizer: RuleQuantizer.annotate and CheckedRuleQuantizer.validate on hidden models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.untrusted.cases.base import Exercise, Namespace, seed_size, seeded_inputs
from autograder.untrusted.cases.m03_2 import ConvTwoUsers
from common.pt2e import ANNOTATION_KEY, QuantizationSpec, Quantizer, export_module, prepare_pt2e
from common.qspecs import act_spec
from selfcheck.evidence import describe_prepared, safe_text

NOTEBOOK = "M03-3"


class ConvReluPool(nn.Module):
    """conv → relu → max_pool2d → conv (no bias)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(channels, 2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.max_pool2d(torch.relu(self.a(x)), 2))


class LinearAdd(nn.Module):
    """Two linears added, then a third linear."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)
        self.c = nn.Linear(features, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.a(x) + self.b(x))


def build(name: str, seed: int) -> GraphModule:
    """Export a named model (seed models from common.models, or the hidden ones here)."""
    from common.models import example_inputs, get_model

    size = seed_size(seed, 3, 7)
    hidden = {
        "conv_two_users": lambda: (ConvTwoUsers(size), seeded_inputs(seed, (2, 3, 8, 8))),
        "conv_relu_pool": lambda: (ConvReluPool(size), seeded_inputs(seed, (2, 3, 8, 8))),
        "linear_add": lambda: (LinearAdd(size + 2), seeded_inputs(seed, (2, size + 2))),
    }
    model, inputs = hidden[name]() if name in hidden else (get_model(name), example_inputs(2, name))
    return export_module(model.eval(), inputs)


def _prepared(ns: Namespace, seed: int, models: tuple[str, ...]) -> dict[str, Any]:
    return {name: describe_prepared(prepare_pt2e(build(name, seed), ns["RuleQuantizer"]())) for name in models}


def _over(models: tuple[str, ...]) -> Any:
    return lambda ns, seed: _prepared(ns, seed, models)


# --- validate ---------------------------------------------------------------------------------------


class _Labels(Quantizer):
    """Labels a graph with the answer key's rules, then spoils one label."""

    def __init__(self, spoil: Any = None) -> None:
        self.spoil = spoil

    def annotate(self, model: GraphModule) -> GraphModule:
        from autograder.keys.m03_3 import RuleQuantizer

        RuleQuantizer().annotate(model)
        if self.spoil is not None:
            self.spoil({n.name: n for n in model.graph.nodes})
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _labelled(name: str, seed: int, spoil: Any = None) -> GraphModule:
    gm = build(name, seed)
    _Labels(spoil).annotate(gm)
    return gm


def _verdict(ns: Namespace, gm: GraphModule, node: str) -> dict[str, Any]:
    """What the student's validate did on ``gm``; ``node`` is the name the message should give."""
    try:
        ns["CheckedRuleQuantizer"]().validate(gm)
    except ValueError as exc:
        return {"raised": type(exc).__name__, "value_error": True, "names_node": node in safe_text(exc)}
    except Exception as exc:  # the wrong kind of error is evidence too
        return {"raised": type(exc).__name__, "value_error": False, "names_node": node in safe_text(exc)}
    return {"raised": None, "value_error": False, "names_node": False}


def _spec(**changes: Any) -> QuantizationSpec:
    base = act_spec()
    fields = {
        "dtype": base.dtype,
        "quant_min": base.quant_min,
        "quant_max": base.quant_max,
        "qscheme": base.qscheme,
        "observer_or_fake_quant_ctr": base.observer_or_fake_quant_ctr,
    }
    fields.update(changes)
    return QuantizationSpec(**fields)


def validate_accepts(ns: Namespace, seed: int) -> Any:
    return {name: _verdict(ns, _labelled(name, seed), "") for name in ("small_cnn", "residual", "cat_pool", "mlp")}


def validate_not_an_input(ns: Namespace, seed: int) -> Any:
    def spoil(nodes: dict[str, Any]) -> None:
        nodes["conv2d_1"].meta[ANNOTATION_KEY].input_qspec_map[nodes["x"]] = act_spec()

    return _verdict(ns, _labelled("small_cnn", seed, spoil), "conv2d_1")


def validate_asymmetric_weight(ns: Namespace, seed: int) -> Any:
    def spoil(nodes: dict[str, Any]) -> None:
        ann = nodes["linear"].meta[ANNOTATION_KEY]
        ann.input_qspec_map[nodes["linear"].args[1]] = act_spec()

    return _verdict(ns, _labelled("linear_add", seed, spoil), "linear")


def validate_inside_fused(ns: Namespace, seed: int) -> Any:
    def spoil(nodes: dict[str, Any]) -> None:
        nodes["conv2d"].meta[ANNOTATION_KEY].output_qspec = act_spec()

    return _verdict(ns, _labelled("conv_relu_pool", seed, spoil), "conv2d")


def validate_bad_range(ns: Namespace, seed: int) -> Any:
    def too_wide(nodes: dict[str, Any]) -> None:  # int8 cannot hold 255
        nodes["add"].meta[ANNOTATION_KEY].output_qspec = _spec(quant_min=0, quant_max=255)

    def empty(nodes: dict[str, Any]) -> None:  # quant_min not below quant_max
        ann = nodes["conv2d"].meta[ANNOTATION_KEY]
        ann.input_qspec_map[nodes["x"]] = _spec(quant_min=10, quant_max=10)

    return {
        "too_wide": _verdict(ns, _labelled("linear_add", seed, too_wide), "add"),
        "empty": _verdict(ns, _labelled("conv_relu", seed, empty), "conv2d"),
    }


EXERCISES = {
    "rule_quantizer": Exercise(
        NOTEBOOK,
        "rule_quantizer",
        "RuleQuantizer：依 node.target 照規則表貼標籤",
        ("RuleQuantizer",),
        {
            "conv_relu": _over(("conv_relu", "conv_bn_relu")),
            "conv_alone": _over(("conv_two_users", "cat_pool")),
            "weights": _over(("conv_relu", "mlp")),
            "linear_add": _over(("mlp", "linear_add", "residual")),
            "max_pool": _over(("conv_relu_pool", "cat_pool")),
        },
    ),
    "validate": Exercise(
        NOTEBOOK,
        "validate",
        "validate：擋住錯的標籤",
        ("CheckedRuleQuantizer",),
        {
            "accepts": validate_accepts,
            "not_an_input": validate_not_an_input,
            "asymmetric_weight": validate_asymmetric_weight,
            "inside_fused": validate_inside_fused,
            "bad_range": validate_bad_range,
        },
    ),
}
