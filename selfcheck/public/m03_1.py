"""Public cases of M03-1 標籤、Quantizer、prepare_pt2e (add_label, reads_quantized) on the chapter's own models.

Also the canonical descriptions the other M03 public cases share: the labels on a graph (each
labelled position with the spec it ends up using, ``SharedQuantizationSpec`` resolved to the
spec it shares) and the observers on it (per edge, and the groups of edges one observer instance
serves). Both are independent of the order labels were written in and of observer names.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from common.pt2e import Quantizer
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import describe_annotations, describe_prepared, plain

# --- canonical descriptions (shared by the M03 public cases) ----------------------------------------


def spec_summary(spec: Any) -> str | None:
    """A described spec as one line: ``int8 [-128,127] per_tensor_affine MinMaxObserver``."""
    if not isinstance(spec, dict):
        return None if spec is None else str(spec)
    if spec.get("kind") != "spec":
        return str(spec.get("kind"))
    dtype, scheme = spec.get("dtype") or {}, spec.get("qscheme") or {}
    observer = str((spec.get("observer") or {}).get("class")).rsplit(".", 1)[-1]
    axis = f" ch_axis={spec.get('ch_axis')}" if "channel" in str(scheme.get("qscheme")) else ""
    return f"{dtype.get('dtype')} [{spec.get('qmin')},{spec.get('qmax')}] {scheme.get('qscheme')}{axis} {observer}"


def _where(of: Any) -> str:
    if isinstance(of, dict) and "edge" in of:
        return f"{of['edge'][0]} → {of['edge'][1]}"
    if isinstance(of, dict) and "node" in of:
        return f"{of['node']} 的輸出"
    return str(of)


def labels(gm: GraphModule) -> dict[str, Any]:
    """``positions``: every labelled edge ``"a → b"`` and output ``"n 的輸出"`` whose spec is not None,
    with the spec it uses (a shared spec resolved to the spec it shares); ``claimed``: the nodes
    whose label has ``_annotated=True``."""
    described = describe_annotations(gm)
    specs: dict[str, Any] = {}
    claimed = []
    for name, ann in described.items():
        if not isinstance(ann, dict) or "inputs" not in ann:
            specs[f"{name} 的標籤"] = str(ann)
            continue
        for source, spec in ann["inputs"]:
            if spec is not None:
                specs[f"{source} → {name}"] = spec
        if ann["output"] is not None:
            specs[f"{name} 的輸出"] = ann["output"]
        if ann["annotated"]:
            claimed.append(name)

    def resolve(spec: Any, steps: int = 0) -> str | None:
        if isinstance(spec, dict) and spec.get("kind") == "shared" and steps < 50:
            target = _where(spec.get("of"))
            return resolve(specs[target], steps + 1) if target in specs else f"共用沒有標籤的 {target}"
        return spec_summary(spec)

    return {"positions": {p: resolve(s) for p, s in sorted(specs.items())}, "claimed": sorted(claimed)}


def observers(prepared: GraphModule) -> dict[str, Any]:
    """``edges``: per edge ``"a → b"`` the observers met on it (kind, range, scheme, class);
    ``shared``: the sorted groups of edges that one observer instance serves."""
    described = describe_prepared(prepared)
    records = described["instances"]
    edges: dict[str, list[str]] = {}
    serves: dict[int, set[str]] = {}
    for consumer, inputs in described["edges"].items():
        for source, chain in inputs:
            edge = f"{source} → {consumer}"
            edges[edge] = [_record_text(records[i]) for i in chain]
            for instance in chain:
                serves.setdefault(instance, set()).add(edge)
    shared = sorted(sorted(group) for group in serves.values() if len(group) > 1)
    return {"edges": dict(sorted(edges.items())), "shared": shared}


def _record_text(record: dict[str, Any]) -> str:
    axis = f" ch_axis={record.get('ch_axis')}" if "channel" in str(record.get("qscheme")) else ""
    return f"{record.get('dtype')} [{record.get('qmin')},{record.get('qmax')}] {record.get('qscheme')}{axis} {record.get('class')}"


def export(name: str) -> GraphModule:
    """A chapter model exported with a fixed batch of two."""
    from common.models import example_inputs, get_model
    from common.pt2e import export_module

    return export_module(get_model(name).eval(), example_inputs(2, name))


# --- add_label ------------------------------------------------------------------------------------


def _spec(observer: Any = None) -> Any:
    """int8 per-tensor affine [-128, 127] (the chapter's ``SPEC``), MinMaxObserver unless ``observer``."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=observer or MinMaxObserver,
    )


class Already(Quantizer):
    """A Quantizer whose labels are already on the graph (the chapter's ``_Already``)."""

    def annotate(self, model: GraphModule) -> GraphModule:
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _described(gm: GraphModule) -> dict[str, Any]:
    """The labels and the observers they give."""
    from common.pt2e import prepare_pt2e

    found = labels(gm)
    return {"labels": found["positions"], "claimed": found["claimed"], **observers(prepare_pt2e(gm, Already()))}


def add_label_conv_relu(ns: Namespace, seed: int) -> Any:
    """conv_relu: conv2d already carries someone else's claimed label (bias not quantized); then
    relu's output, and the two input edges x → conv2d and conv_weight → conv2d (the last one with
    MovingAverageMinMaxObserver)."""
    from common.pt2e import ANNOTATION_KEY, MovingAverageMinMaxObserver, QuantizationAnnotation

    gm = export("conv_relu")
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["conv2d"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={nodes["conv_bias"]: None}, _annotated=True
    )
    ns["add_label"](nodes["relu"], _spec())
    ns["add_label"]((nodes["x"], nodes["conv2d"]), _spec())
    ns["add_label"]((nodes["conv_weight"], nodes["conv2d"]), _spec(MovingAverageMinMaxObserver))
    described = _described(gm)
    described["claimed"] = "conv2d" in described["claimed"]  # someone else's claim stays; claiming more is allowed
    return described


def add_label_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: the edge x → conv2d and the edge conv2d_1 → cat (cat's inputs are in a list); then
    an edge that does not exist, max_pool2d → cat, must raise ValueError and leave no label."""
    gm = export("cat_pool")
    nodes = {n.name: n for n in gm.graph.nodes}
    ns["add_label"]((nodes["x"], nodes["conv2d"]), _spec())
    ns["add_label"]((nodes["conv2d_1"], nodes["cat"]), _spec())
    try:
        ns["add_label"]((nodes["max_pool2d"], nodes["cat"]), _spec())
    except ValueError:
        raised = "ValueError"
    except Exception as exc:  # the wrong kind of error shows in the comparison
        raised = type(exc).__name__
    else:
        raised = "沒有出錯"
    described = _described(gm)
    del described["claimed"]
    return {"max_pool2d → cat": raised, **described}


# --- reads_quantized ------------------------------------------------------------------------------


def _reads(ns: Namespace, name: str, label: tuple[str, ...], producer: str) -> Any:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, prepare_pt2e

    gm = export(name)
    nodes = {n.name: n for n in gm.graph.nodes}
    if len(label) == 1:
        nodes[label[0]].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=_spec())
    else:
        nodes[label[1]].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={nodes[label[0]]: _spec()})
    got = plain(ns["reads_quantized"](prepare_pt2e(gm, Already()), producer))
    return dict(sorted(got.items())) if isinstance(got, dict) else got


def reads_edge(ns: Namespace, seed: int) -> Any:
    """cat_pool with the edge x → conv2d labelled (the chapter's ``edge_only``), asked about x."""
    return _reads(ns, "cat_pool", ("x", "conv2d"), "x")


def reads_output(ns: Namespace, seed: int) -> Any:
    """cat_pool with x's output labelled (the chapter's ``out_label``), and conv_relu with relu's output
    labelled: the graph output reads it."""
    return {
        "cat_pool": _reads(ns, "cat_pool", ("x",), "x"),
        "conv_relu": _reads(ns, "conv_relu", ("relu",), "relu"),
    }


PUBLIC = declare(
    __name__,
    Exercise(
        "add_label",
        "add_label：把一張標籤貼在邊或輸出上",
        ("add_label",),
        {"conv_relu": add_label_conv_relu, "cat_pool": add_label_cat_pool},
    ),
    Exercise(
        "reads_quantized",
        "reads_quantized：哪些 consumer 吃到量化後的值",
        ("reads_quantized",),
        {"edge": reads_edge, "output": reads_output},
    ),
)
