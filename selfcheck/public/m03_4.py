"""Public cases of M03-4 共用 qparams (AddQuantizer, CatQuantizer) on the chapter's own models.

The evidence is canonical (``selfcheck.public.m03_1``): each labelled position with the spec it
ends up using (a ``SharedQuantizationSpec`` resolved to the spec it shares), which nodes are
claimed, the observers on every edge and the groups of edges one observer instance serves.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec, Quantizer
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.probes import ChainQuantizer as Chain
from selfcheck.public.m03_1 import labels, observers

ADD = torch.ops.aten.add.Tensor
CAT = torch.ops.aten.cat.default


class ClaimsFirst(Quantizer):
    """Another backend's Quantizer: claims the first ``target`` op with int8 [-100, 100] symmetric labels."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def annotate(self, model: GraphModule) -> GraphModule:
        node = next(n for n in model.graph.nodes if n.op == "call_function" and n.target == self.target)
        spec = QuantizationSpec(
            dtype=torch.int8,
            quant_min=-100,
            quant_max=100,
            qscheme=torch.per_tensor_symmetric,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map=dict.fromkeys(node.all_input_nodes, spec), output_qspec=spec, _annotated=True
        )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def prepared(quantizer: Quantizer, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """Export, prepare with ``quantizer``: the labels, the claimed nodes and the observers."""
    from common.pt2e import export_module, prepare_pt2e

    gm = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    found = labels(gm)
    return {"labels": found["positions"], "claimed": found["claimed"], **observers(gm)}


class AddSelf(nn.Module):
    """a + a (the chapter's ``_AddSelf``)."""

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a + a


class TwoAdds(nn.Module):
    """(a + b) + a: the second add reads the first one and a again."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a + b) + a


class ConstantOperands(nn.Module):
    """x + self.b (a model constant), then + 1.0 (a Python scalar): the chapter's two kinds of non-activation."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.linspace(-1.0, 1.0, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.b) + 1.0


class CatConstant(nn.Module):
    """cat of relu(x) and a model constant."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pad", torch.zeros(1, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x), self.pad], dim=0)


class CatThree(nn.Module):
    """cat of three branches of x: relu(x), x * 2 and x itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x), x * 2, x], dim=1)


def _residual() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from common.models import example_inputs, get_model

    return get_model("residual"), example_inputs(2)


def add_residual(ns: Namespace, seed: int) -> Any:
    """residual with AddQuantizer(share=True) and with AddQuantizer(share=False)."""
    return {
        "share=True": prepared(ns["AddQuantizer"](share=True), *_residual()),
        "share=False": prepared(ns["AddQuantizer"](share=False), *_residual()),
    }


def add_self_and_claimed(ns: Namespace, seed: int) -> Any:
    """a + a (one input edge and the output); (x + b) + 1.0 with a constant and a scalar; (a + b) + a
    with the first add claimed by another Quantizer."""
    return {
        "a + a": prepared(ns["AddQuantizer"](share=True), AddSelf(), seeded_inputs(seed, (2, 4))),
        "(x + b) + 1.0": prepared(ns["AddQuantizer"](share=True), ConstantOperands(), seeded_inputs(seed, (2, 4))),
        "(a + b) + a": prepared(
            Chain([ClaimsFirst(ADD), ns["AddQuantizer"](share=True)]), TwoAdds(), seeded_inputs(seed, (2, 4), (2, 4))
        ),
    }


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool (the chapter's model), and cat_pool with the cat claimed by another Quantizer first."""
    from common.models import example_inputs, get_model

    return {
        "cat_pool": prepared(ns["CatQuantizer"](), get_model("cat_pool"), example_inputs(2)),
        "claimed": prepared(Chain([ClaimsFirst(CAT), ns["CatQuantizer"]()]), get_model("cat_pool"), example_inputs(2)),
    }


def cat_three(ns: Namespace, seed: int) -> Any:
    """A cat of three inputs (all three input edges and the output share one observer), and a cat of
    relu(x) and a model constant (the constant is not labelled)."""
    return {
        "three": prepared(ns["CatQuantizer"](), CatThree(), seeded_inputs(seed, (2, 3, 4, 4))),
        "constant": prepared(ns["CatQuantizer"](), CatConstant(), seeded_inputs(seed, (2, 4))),
    }


PUBLIC = declare(
    __name__,
    Exercise(
        "add_quantizer",
        "AddQuantizer：add 的輸入與輸出共用 qparams",
        ("AddQuantizer",),
        {"residual": add_residual, "self_and_claimed": add_self_and_claimed},
    ),
    Exercise(
        "cat_quantizer",
        "CatQuantizer：cat 的所有輸入與輸出共用 qparams",
        ("CatQuantizer",),
        {"cat_pool": cat_pool, "three_inputs": cat_three},
    ),
)
