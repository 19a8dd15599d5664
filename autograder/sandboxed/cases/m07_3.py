"""M07-3 4-bit weight: Int4WeightQuantizer on hidden models, alone and between other Quantizers.

The student's Quantizer is only constructed and called (annotate, validate); its labels are
recorded as data and the grader prepares, calibrates and converts on its own side. The models:
a conv with bias → relu → a conv_transpose2d (a target that also says conv, and no conv2d: it
gets no label) → a conv without bias → flatten → linear, a linear whose input is
called ``linear`` (a placeholder named like the op) and an add with a scalar; and a model run
through three Quantizers in a row: one that claims a linear first (``_annotated=True``) and
labels a conv without claiming it (``_annotated=False``: a spec on its bias edge, its output,
``allow_implicit_sharing=False``), the student's, and one after it that labels every conv /
linear still unclaimed with int8 weights (so it shows which nodes the student's Quantizer
marked as its own). The exercise expects an unclaimed label to be replaced as a whole: what
the earlier Quantizer wrote there (the bias spec, the flag) must not survive.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from common.qspecs import act_spec, weight_spec
from selfcheck.public.m07_3 import PUBLIC, quantize_with
from selfcheck.public.m07_3 import Chain as InOrder
from selfcheck.public.m07_3 import Finisher as Sweeper

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


class ConvStack(nn.Module):
    """conv (bias) → relu → conv_transpose2d (not conv2d: no label) → conv (no bias) → flatten → linear; the
    weights differ a lot between channels."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, channels, 3, padding=1)
        self.up = nn.ConvTranspose2d(channels, channels, 3, padding=1)  # its target also says "conv"
        self.second = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.head = nn.Linear(channels * 16, 5)
        with torch.no_grad():
            self.second.weight.mul_(torch.linspace(0.2, 3.0, channels).view(-1, 1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.second(self.up(torch.relu(self.first(x)))), 1))


class Lookalike(nn.Module):
    """Input named ``linear``; a linear, an add with a scalar, a second linear."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, 2 * features)
        self.fc2 = nn.Linear(2 * features, 3)

    def forward(self, linear: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(linear)) + 0.5)


class Claimer(Quantizer):
    """Runs before the student's: claims the last linear (int8, ``_annotated=True``) and labels the
    first conv without claiming it (``_annotated=False``): a spec on its bias edge and on its
    output, and ``allow_implicit_sharing=False``. Replacing that label keeps none of it; updating
    it in place keeps the bias spec and the flag."""

    def annotate(self, model: GraphModule) -> GraphModule:
        weighted = [n for n in model.graph.nodes if n.op == "call_function" and n.target in WEIGHTED]
        last, first = weighted[-1], weighted[0]
        self.claimed = [last.name]
        last.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={last.args[0]: act_spec(), last.args[1]: weight_spec(True)},
            output_qspec=act_spec(),
            _annotated=True,
        )
        first.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={first.args[2]: act_spec()},  # ConvStack's first conv has a bias
            output_qspec=act_spec(),
            allow_implicit_sharing=False,
            _annotated=False,
        )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def case_stack(ns: Namespace, seed: int) -> Any:
    model = ConvStack(seed_size(seed, 3, 6))
    return quantize_with(ns["Int4WeightQuantizer"](), model, seeded_inputs(seed, (2, 3, 4, 4)), seed)


def case_lookalike(ns: Namespace, seed: int) -> Any:
    features = seed_size(seed, 3, 7)
    return quantize_with(ns["Int4WeightQuantizer"](), Lookalike(features), seeded_inputs(seed, (2, features)), seed)


def case_between(ns: Namespace, seed: int) -> Any:
    claimer = Claimer()
    quantizer = InOrder(claimer, ns["Int4WeightQuantizer"](), Sweeper())
    model = ConvStack(seed_size(seed, 3, 6))
    result = quantize_with(quantizer, model, seeded_inputs(seed, (2, 3, 4, 4)), seed)
    result["claimed"] = getattr(claimer, "claimed", [])
    return result


EXERCISES = with_hidden_cases(
    PUBLIC,
    int4_quantizer={"stack": case_stack, "lookalike": case_lookalike, "between": case_between},
)
