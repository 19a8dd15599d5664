"""Public cases of M07-3 4-bit weight (Int4WeightQuantizer) on the chapter's own models.

Also what the hidden cases share: the labels the student's Quantizer wrote (read as data by
``describe_annotations``), the observers prepare inserted, and the quantize / dequantize ops
of the converted graph with their integer ranges and axes (read by the case itself).
``annotate`` labels the graph it is handed (prepare_pt2e ignores what it returns): another
GraphModule coming back (a labelled copy) is refused with a sentence that says so, and a
label prepare cannot turn into an observer (say, ``dtype=torch.int4``) is reported as such,
with the labels still judged. The graph reaches ``annotate`` without export's ``_guards_fn``
module, so that a copy can be told apart in the grader's replay too.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import CaseTimeout, EvidenceError, describe_annotations, describe_prepared, safe_text

TITLE = "Int4WeightQuantizer：4-bit per-channel weight、int8 activation"


def qdq_ranges(gm: GraphModule) -> dict[str, list[Any]]:
    """For every conv2d / linear of a converted graph: the dequantize on each input, as
    ``[source, op, quant_min, quant_max, dtype, axis or None]`` (``None`` when the input has none)."""
    out: dict[str, list[Any]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in (
            torch.ops.aten.conv2d.default,
            torch.ops.aten.linear.default,
        ):
            continue
        edges = []
        for arg in node.args[:3]:
            if not isinstance(arg, Node):
                continue
            if arg.op == "call_function" and str(arg.target).startswith("quantized_decomposed.dequantize"):
                name = str(arg.target).split(".")[1]
                channel = name.endswith("per_channel")
                axis = arg.args[3] if channel else None
                qmin, qmax, dtype = (arg.args[4], arg.args[5], arg.args[6]) if channel else arg.args[3:6]
                source = arg.args[0]
                edges.append(
                    [
                        source.name if isinstance(source, Node) else "?",
                        name,
                        int(qmin),
                        int(qmax),
                        str(dtype).removeprefix("torch."),
                        axis,
                    ]
                )
            else:
                edges.append([arg.name, None, None, None, None, None])
        out[node.name] = edges
    return out


def annotate_in_place(quantizer: Any, model: GraphModule) -> None:
    """``quantizer.annotate(model)``; an nn.Module other than ``model`` coming back is refused in one sentence."""
    returned = quantizer.annotate(model)
    if isinstance(returned, torch.nn.Module) and returned is not model:
        raise EvidenceError(
            f"annotate 要在傳進來的 model 上貼標籤、回傳同一個 model：你回傳了另一個 {type(returned).__name__}"
            "（例如貼了標籤的複本），但 prepare_pt2e 不看回傳值，只照傳進去的那張圖上的標籤插 observer"
        )


def quantize_with(
    quantizer: Any, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], seed: int
) -> dict[str, Any]:
    """export → prepare with ``quantizer`` (its labels captured right after annotate) → calibrate → convert."""
    from common.pt2e import Quantizer, convert_pt2e, export_module, prepare_pt2e
    from selfcheck.public.m07_2 import without_guards

    captured: dict[str, Any] = {}

    class CaptureLabels(Quantizer):
        """Forwards to ``quantizer``; keeps the labels as data the moment annotate returns."""

        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return without_guards(model)

        def annotate(self, model: GraphModule) -> GraphModule:
            annotate_in_place(quantizer, model)
            captured["labels"] = describe_annotations(model)
            return model

        def validate(self, model: GraphModule) -> None:
            quantizer.validate(model)

    result: dict[str, Any] = {"observers": None, "instances": None, "ranges": {}, "prepare_error": None}
    try:
        prepared = prepare_pt2e(export_module(model.eval(), inputs), CaptureLabels())
        shapes = [tuple(t.shape) for t in inputs]
        with torch.no_grad():
            for step in range(2):
                prepared(*seeded_inputs(seed * 1000 + step, *shapes))
        description = describe_prepared(prepared)
        result["observers"] = len(description["observers"])
        result["instances"] = description["instances"]
        result["ranges"] = qdq_ranges(convert_pt2e(copy.deepcopy(prepared)))
    except (EvidenceError, CaseTimeout):
        raise
    except Exception as exc:
        if "labels" not in captured:  # the student's annotate itself raised: that is the answer
            raise
        # labelled, but prepare / calibrate / convert cannot follow the labels (an observer refused a spec)
        result["prepare_error"] = f"{type(exc).__name__}: {safe_text(exc, 200)}"
    return {"labels": captured["labels"], **result}


# --- public cases -------------------------------------------------------------------------------


def public_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn: two convs and a linear, all with bias."""
    from common.models import get_model

    return quantize_with(ns["Int4WeightQuantizer"](), get_model("small_cnn"), seeded_inputs(seed, (2, 3, 16, 16)), seed)


def public_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: two linears."""
    from common.models import get_model

    return quantize_with(ns["Int4WeightQuantizer"](), get_model("mlp"), seeded_inputs(seed, (2, 16)), seed)


PUBLIC = declare(
    __name__,
    Exercise(
        "int4_quantizer",
        TITLE,
        ("Int4WeightQuantizer",),
        {"small_cnn": public_small_cnn, "mlp": public_mlp},
    ),
)
