"""M03-1 標籤、Quantizer、prepare_pt2e: add_label and reads_quantized, run on hidden models.

add_label cases call the student's ``add_label`` on an exported graph's nodes, then return the
labels it left (read from the annotations) and the observers ``prepare_pt2e`` puts for them.
reads_quantized cases build prepared graphs without student code (labels by table, observers
inserted by hand, labels that produce no observer) and return what ``reads_quantized`` answers.
Every model is the same on every seed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.probes import Label, NoLabels, TableLabels, by_name, insert_module, put_labels
from common.pt2e import (
    ANNOTATION_KEY,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    export_module,
    prepare_pt2e,
)
from selfcheck.evidence import EvidenceError, describe_annotations, describe_prepared, plain, safe_text
from selfcheck.public.m01_1 import graph_changes, graph_state
from selfcheck.public.m03_1 import PUBLIC


def spec(limit: int = 127) -> QuantizationSpec:
    """int8 per-tensor affine [-128, 127] (MinMaxObserver); ``limit`` < 127: symmetric [-limit, limit]."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-limit - 1 if limit == 127 else -limit,
        quant_max=limit,
        qscheme=torch.per_tensor_affine if limit == 127 else torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def moving_spec() -> QuantizationSpec:
    """int8 symmetric [-100, 100] with MovingAverageMinMaxObserver(averaging_constant=0.5)."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-100,
        quant_max=100,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MovingAverageMinMaxObserver.with_args(averaging_constant=0.5),
    )


def uint8_spec() -> QuantizationSpec:
    """uint8 per-tensor affine [0, 255] with HistogramObserver."""
    return QuantizationSpec(
        dtype=torch.uint8,
        quant_min=0,
        quant_max=255,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver,
    )


# --- hidden models ------------------------------------------------------------------------------


class FanOut(nn.Module):
    """relu(x) read by two linears, a mul and the graph output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.first = nn.Linear(features, features)
        self.second = nn.Linear(features, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return self.first(r), self.second(r), r * 2, r


class FanOutCat(nn.Module):
    """relu(x) read by a linear, a mul with x (two tensor arguments), a cat (inside a list) and the output."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.first = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return self.first(r), r * x, torch.cat([x, r], dim=1), r


def _fan_out(seed: int) -> GraphModule:
    features = seed_size(seed, 4, 9)
    return export_module(FanOut(features).eval(), seeded_inputs(seed, (2, features)))


def _fan_out_cat(seed: int) -> GraphModule:
    features = seed_size(seed, 4, 9)
    return export_module(FanOutCat(features).eval(), seeded_inputs(seed, (2, features)))


# --- add_label ------------------------------------------------------------------------------------

# A position by node names: ("out", node) or ("edge", producer, consumer).
Position = tuple[str, ...]


def normalized_labels(gm: GraphModule, claimed: dict[str, bool]) -> dict[str, Any]:
    """``describe_annotations`` of ``gm`` without empty labels, inputs sorted by name; ``annotated``
    kept only for the nodes that carried someone else's label before (``claimed``: name → flag then)."""
    out = {}
    for name, ann in describe_annotations(gm).items():
        if not isinstance(ann, dict) or "inputs" not in ann:
            out[name] = ann
            continue
        if not ann["inputs"] and ann["output"] is None and not ann["annotated"] and name not in claimed:
            continue
        entry = {"inputs": sorted(ann["inputs"], key=lambda item: str(item[0])), "output": ann["output"]}
        entry["implicit_sharing"] = ann["implicit_sharing"]
        if name in claimed:
            entry["annotated"] = ann["annotated"]
        out[name] = entry
    return out


def _labelled(
    ns: Namespace,
    gm: GraphModule,
    labels: list[tuple[Position, QuantizationSpec]],
    existing: dict[str, Label] | None = None,
) -> dict[str, Any]:
    """Someone else's ``existing`` labels first, then the student's ``add_label`` for each of ``labels``."""
    existing = existing or {}
    put_labels(gm, existing)
    nodes = by_name(gm)
    for position, qspec in labels:
        where = nodes[position[1]] if position[0] == "out" else (nodes[position[1]], nodes[position[2]])
        ns["add_label"](where, qspec)
    labels_seen = normalized_labels(gm, {name: label.annotated for name, label in existing.items()})
    return {"labels": labels_seen, "prepared": describe_prepared(prepare_pt2e(gm, NoLabels()))}


def label_output_many_users(ns: Namespace, seed: int) -> Any:
    """Output labels on relu (four users) and on the model input x."""
    return _labelled(ns, _fan_out(seed), [(("out", "relu"), spec()), (("out", "x"), uint8_spec())])


def _keyword_edge(ns: Namespace, seed: int) -> dict[str, Any]:
    """FanOutCat with mul's second tensor passed by keyword (``mul(relu, other=x)``): the edge x → mul
    exists (x is in ``mul.all_input_nodes``, only not in its ``args``). Labels only: prepare_pt2e
    refuses a labelled node with a tensor keyword argument."""
    gm = _fan_out_cat(seed)
    nodes = by_name(gm)
    mul = nodes["mul"]
    mul.args, mul.kwargs = (nodes["relu"],), {"other": nodes["x"]}
    gm.recompile()
    ns["add_label"]((nodes["x"], mul), spec())
    return {"labels": normalized_labels(gm, {})}


def label_edge_one_user(ns: Namespace, seed: int) -> Any:
    """Edge labels: relu → linear_1 (one of four users); on FanOutCat x → mul (mul's second tensor
    argument), relu → cat (an input inside cat's list) and first_weight → linear (a constant); and
    x → mul where mul takes x by keyword."""
    return {
        "keyword": _keyword_edge(ns, seed),
        "fan_out": _labelled(ns, _fan_out(seed), [(("edge", "relu", "linear_1"), spec())]),
        "fan_out_cat": _labelled(
            ns,
            _fan_out_cat(seed),
            [
                (("edge", "x", "mul"), moving_spec()),
                (("edge", "relu", "cat"), spec()),
                (("edge", "first_weight", "linear"), moving_spec()),
            ],
        ),
    }


def label_stacked(ns: Namespace, seed: int) -> Any:
    """Several labels on one node, edge before output and output before edge."""
    from common.models import example_inputs, get_model

    conv = export_module(get_model("conv_relu").eval(), example_inputs(2))
    mlp = export_module(get_model("mlp").eval(), example_inputs(2, "mlp"))
    return {
        "conv_relu": _labelled(
            ns,
            conv,
            [(("out", "relu"), spec()), (("edge", "x", "conv2d"), spec()), (("edge", "conv_weight", "conv2d"), spec())],
        ),
        "mlp": _labelled(
            ns,
            mlp,
            [
                (("edge", "x", "linear"), spec()),
                (("edge", "fc1_weight", "linear"), moving_spec()),
                (("out", "linear_1"), spec()),
                (("edge", "relu", "linear_1"), spec()),
            ],
        ),
        "fan_out": _labelled(
            ns,
            _fan_out(seed),
            [
                (("edge", "relu", "mul"), spec()),
                (("out", "mul"), moving_spec()),
                (("out", "linear"), uint8_spec()),
                (("edge", "relu", "linear"), spec(100)),
            ],
        ),
    }


def label_keeps_existing(ns: Namespace, seed: int) -> Any:
    """linear carries someone else's claimed label (``_annotated=True``, no implicit sharing), mul an
    unclaimed one; the student adds an edge to the first and an output to the second."""
    existing = {
        "linear": Label(output=spec(100), annotated=True),
        "mul": Label({"relu": spec(100)}, annotated=False),
    }
    return _labelled(
        ns, _fan_out(seed), [(("edge", "relu", "linear"), spec()), (("out", "mul"), moving_spec())], existing
    )


def _keeps_existing_no_sharing(ns: Namespace, seed: int) -> Any:
    gm = _fan_out(seed)
    nodes = by_name(gm)
    nodes["linear_1"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        output_qspec=spec(100), _annotated=True, allow_implicit_sharing=False
    )
    ns["add_label"]((nodes["relu"], nodes["linear_1"]), spec())
    return normalized_labels(gm, {"linear_1": True})


def _relabel(ns: Namespace, seed: int) -> Any:
    """Positions labelled again with another spec: linear carries someone else's claimed label (edge
    relu → linear and its output, both spec(100)) that the student labels anew; the student labels
    relu's output and the edge relu → mul twice. The last spec asked for is the one each position keeps."""
    existing = {"linear": Label({"relu": spec(100)}, spec(100), annotated=True)}
    return _labelled(
        ns,
        _fan_out(seed),
        [
            (("edge", "relu", "linear"), spec()),
            (("out", "linear"), moving_spec()),
            (("out", "relu"), spec(100)),
            (("edge", "relu", "mul"), moving_spec()),
            (("out", "relu"), uint8_spec()),
            (("edge", "relu", "mul"), spec()),
        ],
        existing,
    )


def label_keeps_existing_all(ns: Namespace, seed: int) -> Any:
    return {
        "two_labels": label_keeps_existing(ns, seed),
        "no_sharing": _keeps_existing_no_sharing(ns, seed),
        "relabel": _relabel(ns, seed),
    }


WORD = "A-Za-z0-9_"


def _names(text: str, *names: str) -> bool:
    import re

    return all(re.search(rf"(?<![{WORD}]){re.escape(n)}(?![{WORD}])", text) for n in names)


def _not_an_input(ns: Namespace, gm: GraphModule, producer: str, consumer: str) -> dict[str, Any]:
    nodes = by_name(gm)
    try:
        ns["add_label"]((nodes[producer], nodes[consumer]), spec())
    except ValueError as exc:
        verdict: dict[str, Any] = {
            "raised": "ValueError",
            "value_error": True,
            "names_both": _names(safe_text(exc), producer, consumer),
        }
    except Exception as exc:  # a wrong kind of error is evidence, not a crash
        verdict = {"raised": type(exc).__name__, "value_error": False, "names_both": False}
    else:
        verdict = {"raised": None, "value_error": False, "names_both": False}
    label = describe_annotations(gm).get(consumer) or {}
    verdict["left_label"] = any(source == producer for source, _ in label.get("inputs", []))
    return verdict


def label_not_an_input(ns: Namespace, seed: int) -> Any:
    """Edges that do not exist: relu → conv2d (the wrong way), x → relu (two steps up), conv_weight → relu,
    and mul → cat on FanOutCat (cat's list holds x and relu)."""
    from common.models import example_inputs, get_model

    def conv() -> GraphModule:
        return export_module(get_model("conv_relu").eval(), example_inputs(2))

    return {
        "backwards": _not_an_input(ns, conv(), "relu", "conv2d"),
        "two_steps": _not_an_input(ns, conv(), "x", "relu"),
        "constant": _not_an_input(ns, conv(), "conv_weight", "relu"),
        "not_in_list": _not_an_input(ns, _fan_out_cat(seed), "mul", "cat"),
    }


# --- reads_quantized ------------------------------------------------------------------------------


def _prepared(gm: GraphModule, table: dict[str, Label]) -> GraphModule:
    return prepare_pt2e(gm, TableLabels(table))


def _reads(ns: Namespace, prepared: GraphModule, producer: str) -> Any:
    """What ``reads_quantized(prepared, producer)`` answered, and how it changed the graph (it must not)."""
    before = graph_state(prepared)
    answer = plain(ns["reads_quantized"](prepared, producer))
    if not isinstance(answer, dict) or not all(type(v) is bool for v in answer.values()):
        kind = type(answer).__name__ if not isinstance(answer, dict) else "值不全是 bool 的 dict"
        raise EvidenceError(f"reads_quantized 應該回傳 {{consumer 的名稱: True 或 False}} 的 dict，看到 {kind}")
    return {"answer": answer, "changed": graph_changes(before, prepared)}


def reads_edge(ns: Namespace, seed: int) -> Any:
    """Edge labels: one of four users; x → conv2d on cat_pool; relu → cat (in a list) next to a
    None-spec edge relu → mul; labels put after prepare_pt2e (so no observer) on FanOut."""
    from common.models import example_inputs, get_model

    cat = export_module(get_model("cat_pool").eval(), example_inputs(2))
    late = _prepared(_fan_out(seed), {"linear_1": Label({"relu": spec()})})
    put_labels(late, {"linear": Label({"relu": spec()}), "mul": Label({"relu": spec()}, spec())})
    return {
        "fan_out": _reads(ns, _prepared(_fan_out(seed), {"linear_1": Label({"relu": spec()})}), "relu"),
        "cat_pool": _reads(ns, _prepared(cat, {"conv2d": Label({"x": spec()})}), "x"),
        "fan_out_cat": _reads(
            ns,
            _prepared(_fan_out_cat(seed), {"cat": Label({"relu": spec()}), "mul": Label({"relu": None, "x": spec()})}),
            "relu",
        ),
        "labels_after_prepare": _reads(ns, late, "relu"),
    }


def reads_output(ns: Namespace, seed: int) -> Any:
    """An output label; an observer inserted by hand with no label at all; an output label whose spec is None."""
    by_hand = _prepared(_fan_out(seed), {})
    insert_module(by_hand, "relu", MinMaxObserver(), "watch_relu")
    return {
        "label": _reads(ns, _prepared(_fan_out(seed), {"relu": Label(output=spec())}), "relu"),
        "by_hand": _reads(ns, by_hand, "relu"),
        "none_spec": _reads(ns, _prepared(_fan_out_cat(seed), {"relu": Label(output=None)}), "relu"),
    }


def reads_chained(ns: Namespace, seed: int) -> Any:
    """Two observers in a row (an output label and an edge label that differ; two observers inserted
    by hand), and a module that is named like an observer without being one."""
    chained_by_hand = _prepared(_fan_out(seed), {})
    insert_module(chained_by_hand, "relu", MinMaxObserver(), "watch_a", ["linear"])
    insert_module(chained_by_hand, "watch_a", MinMaxObserver(), "watch_b")
    look_alike = _prepared(_fan_out(seed), {"linear_1": Label({"relu": spec()})})
    insert_module(look_alike, "relu", nn.Identity(), "activation_post_process_99", ["mul"])
    return {
        "labels": _reads(
            ns, _prepared(_fan_out(seed), {"relu": Label(output=spec()), "mul": Label({"relu": spec(100)})}), "relu"
        ),
        "by_hand": _reads(ns, chained_by_hand, "relu"),
        "look_alike": _reads(ns, look_alike, "relu"),
    }


def reads_graph_output(ns: Namespace, seed: int) -> Any:
    """relu is also returned by the graph: the output node is a consumer (quantized or not)."""
    table = {"linear": Label({"relu": spec()}), "mul": Label({"relu": spec()})}
    return {
        "fan_out": _reads(ns, _prepared(_fan_out(seed), table), "relu"),
        "fan_out_cat": _reads(ns, _prepared(_fan_out_cat(seed), {"relu": Label(output=spec())}), "relu"),
    }


EXERCISES = with_hidden_cases(
    PUBLIC,
    add_label={
        "output_many_users": label_output_many_users,
        "edge_one_user": label_edge_one_user,
        "stacked": label_stacked,
        "keeps_existing": label_keeps_existing_all,
        "not_an_input": label_not_an_input,
    },
    reads_quantized={
        "edge": reads_edge,
        "output": reads_output,
        "chained": reads_chained,
        "graph_output": reads_graph_output,
    },
)


STANDINS = {
    "reads_quantized": lambda prepared, producer: {},
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a case goes on to export all its models instead of stopping at its first check."""
