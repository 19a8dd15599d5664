"""Public cases of M04-3 fusion 就是中間不貼標籤 (FusionQuantizer) on the chapter's own models.

The evidence is canonical: how many observers sit on every edge, which edges share an
observer instance (as sorted groups, never instance numbers), and the labels read from the
annotations (claimed or not, which input edges and outputs carry which spec). Two correct
Quantizers that write their labels in another order give the same data.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import describe_annotations, describe_prepared

TITLE = "FusionQuantizer：pattern 的邊界貼標籤，裡面不貼"

CONV = torch.ops.aten.conv2d.default
RELU = torch.ops.aten.relu.default
ADD = torch.ops.aten.add.Tensor
LINEAR = torch.ops.aten.linear.default


def spec_summary(spec: Any) -> str | None:
    """A described spec as one line: ``int8 [-128,127] per_tensor_affine MinMaxObserver``."""
    if not isinstance(spec, dict):
        return None if spec is None else str(spec)
    if spec.get("kind") != "spec":
        return str(spec.get("kind"))
    dtype = spec.get("dtype")
    scheme = spec.get("qscheme")
    observer = spec.get("observer") or {}
    return (
        f"{dtype.get('dtype') if isinstance(dtype, dict) else dtype} [{spec.get('qmin')},{spec.get('qmax')}] "
        f"{scheme.get('qscheme') if isinstance(scheme, dict) else scheme} "
        f"{str(observer.get('class')).rsplit('.', 1)[-1]}"
    )


def labels(gm: GraphModule) -> dict[str, Any]:
    """Per labelled node: claimed, ``{input: spec}`` and the output spec (an unclaimed empty label counts as none)."""
    out: dict[str, Any] = {}
    for node, ann in describe_annotations(gm).items():
        if not isinstance(ann, dict) or "inputs" not in ann:
            out[node] = str(ann)
            continue
        inputs = {str(src): spec_summary(spec) for src, spec in ann["inputs"] if spec is not None}
        output = spec_summary(ann["output"])
        if ann["annotated"] or inputs or output is not None:
            out[node] = {"claimed": ann["annotated"], "inputs": inputs, "output": output}
    return out


def observers(prepared: GraphModule) -> dict[str, Any]:
    """``edges``: observer count per edge ``"a → b"``; ``shared``: sorted groups of edges one instance observes."""
    described = describe_prepared(prepared)
    counts: dict[str, int] = {}
    serves: dict[int, set[str]] = {}
    for consumer, inputs in described["edges"].items():
        for source, chain in inputs:
            edge = f"{source} → {consumer}"
            counts[edge] = len(chain)
            for instance in chain:
                serves.setdefault(instance, set()).add(edge)
    shared = sorted(sorted(group) for group in serves.values() if len(group) > 1)
    return {"edges": counts, "shared": shared}


def fuse(ns: Namespace, patterns: list[tuple[Any, ...]], model: nn.Module, seed: int) -> dict[str, Any]:
    """Prepare ``model`` with the student's ``FusionQuantizer(patterns)``: labels and observers."""
    from common.pt2e import export_module, prepare_pt2e

    gm = export_module(model.eval(), seeded_inputs(seed, (2, 3, 16, 16)))
    prepared = prepare_pt2e(gm, ns["FusionQuantizer"](patterns))
    return {"labels": labels(prepared), **observers(prepared)}


class SharedY(nn.Module):
    """y = conv(x) feeds a relu and an add (the chapter's last example)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) + y


class TwoConvsAdd(nn.Module):
    """relu(b(x) + a(x)): the conv computed first is the add's second operand."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 3, 3, padding=1)
        self.b = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.a(x)
        v = self.b(x)
        return torch.relu(v + u)


def conv_relu(ns: Namespace, seed: int) -> Any:
    """conv_relu with [(CONV, RELU)]; small_cnn (two conv → relu, a linear) with [(CONV, RELU), (LINEAR, RELU)]."""
    from common.models import get_model

    return {
        "conv_relu": fuse(ns, [(CONV, RELU)], get_model("conv_relu"), seed),
        "small_cnn": fuse(ns, [(CONV, RELU), (LINEAR, RELU)], get_model("small_cnn"), seed),
    }


def residual(ns: Namespace, seed: int) -> Any:
    """residual with the chapter's patterns, and with a single relu listed first."""
    from common.models import get_model

    return {
        "chapter": fuse(ns, [(CONV, RELU), (ADD, RELU), (CONV,)], get_model("residual"), seed),
        "relu_first": fuse(ns, [(RELU,), (CONV, RELU), (ADD,), (CONV,)], get_model("residual"), seed),
    }


def two_users(ns: Namespace, seed: int) -> Any:
    """The chapter's conv with two users, and a three-op pattern whose first member is the add's second operand."""
    return {
        "shared_y": fuse(ns, [(CONV, RELU), (CONV,), (ADD,)], SharedY(), seed),
        "conv_add_relu": fuse(ns, [(CONV, ADD, RELU), (CONV,)], TwoConvsAdd(), seed),
    }


PUBLIC = declare(
    __name__,
    Exercise(
        "fusion_quantizer",
        TITLE,
        ("FusionQuantizer",),
        {"conv_relu": conv_relu, "residual": residual, "two_users": two_users},
    ),
)
