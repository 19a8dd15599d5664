"""Public cases of M03-1 標籤、Quantizer、prepare_pt2e (add_label, reads_quantized) on the chapter's own models.

Also the canonical descriptions the other M03 public cases share: the labels on a graph (each
labelled position with the spec it ends up using, ``SharedQuantizationSpec`` resolved to the
spec it shares) and the observers on it (per edge, and the groups of edges one observer instance
serves). Both are independent of the order labels were written in and of observer names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from common.pt2e import Quantizer
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import describe_annotations, describe_prepared, plain
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m01_1 import graph_changes, graph_state

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


def _spec(
    observer: Any = None,
    dtype: torch.dtype = torch.int8,
    quant_range: tuple[int, int] = (-128, 127),
    qscheme: torch.qscheme = torch.per_tensor_affine,
) -> Any:
    """int8 per-tensor affine [-128, 127] (the chapter's ``SPEC``) unless told otherwise, MinMaxObserver unless
    ``observer``."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    return QuantizationSpec(
        dtype=dtype,
        quant_min=quant_range[0],
        quant_max=quant_range[1],
        qscheme=qscheme,
        observer_or_fake_quant_ctr=observer or MinMaxObserver,
    )


def _uint8_spec() -> Any:
    """uint8 per-tensor affine [0, 255] (a relu's output is never negative)."""
    return _spec(dtype=torch.uint8, quant_range=(0, 255))


def _symmetric_spec() -> Any:
    """int8 per-tensor symmetric [-127, 127]."""
    return _spec(quant_range=(-127, 127), qscheme=torch.per_tensor_symmetric)


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


RELABELLED = {"conv_relu": ("relu 的輸出",)}
"""Per public case, the positions labelled twice (the second spec is the one asked for)."""
CLAIMED = {"conv_relu": "conv2d"}
"""Per public case, the node someone else claimed before add_label was called."""


def add_label_conv_relu(ns: Namespace, seed: int) -> Any:
    """conv_relu: conv2d already carries someone else's claimed label (bias not quantized); then
    relu's output (labelled twice: first int8, then uint8 [0, 255]), and the two input edges
    x → conv2d (int8 symmetric) and conv_weight → conv2d (MovingAverageMinMaxObserver)."""
    from common.pt2e import ANNOTATION_KEY, MovingAverageMinMaxObserver, QuantizationAnnotation

    gm = export("conv_relu")
    nodes = {n.name: n for n in gm.graph.nodes}
    nodes["conv2d"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={nodes["conv_bias"]: None}, _annotated=True
    )
    ns["add_label"](nodes["relu"], _spec())
    ns["add_label"](nodes["relu"], _uint8_spec())
    ns["add_label"]((nodes["x"], nodes["conv2d"]), _symmetric_spec())
    ns["add_label"]((nodes["conv_weight"], nodes["conv2d"]), _spec(MovingAverageMinMaxObserver))
    described = _described(gm)
    described["claimed"] = "conv2d" in described["claimed"]  # someone else's claim stays; claiming more is allowed
    return described


KEYWORD_CASE = "conv_relu（conv2d 的 bias 用 keyword 傳）"
"""The key of the cat_pool case's labels on a graph whose conv2d takes its bias by keyword."""


def _keyword_bias(ns: Namespace) -> dict[str, Any]:
    """conv_relu with conv2d rewritten to conv2d(x, conv_weight, bias=conv_bias), the edge conv_bias → conv2d
    labelled (labels only: prepare_pt2e does not take a labelled node with a tensor keyword argument)."""
    gm = export("conv_relu")
    nodes = {n.name: n for n in gm.graph.nodes}
    conv = nodes["conv2d"]
    conv.args, conv.kwargs = conv.args[:2], {**conv.kwargs, "bias": nodes["conv_bias"]}
    ns["add_label"]((nodes["conv_bias"], conv), _spec())
    return labels(gm)["positions"]


def add_label_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: the edge x → conv2d and the edge conv2d_1 → cat (cat's inputs are in a list); then
    an edge that does not exist, max_pool2d → cat, must raise ValueError whose message names both
    nodes, and leave no label. Besides, an edge whose producer is passed by keyword (conv_relu)."""
    keyword = _keyword_bias(ns)
    gm = export("cat_pool")
    nodes = {n.name: n for n in gm.graph.nodes}
    ns["add_label"]((nodes["x"], nodes["conv2d"]), _spec())
    ns["add_label"]((nodes["conv2d_1"], nodes["cat"]), _spec())
    names_both: Any = None
    try:
        ns["add_label"]((nodes["max_pool2d"], nodes["cat"]), _spec())
    except ValueError as exc:
        raised = "ValueError"
        names_both = "max_pool2d" in str(exc) and "cat" in str(exc).replace("max_pool2d", "")
    except Exception as exc:  # the wrong kind of error shows in the comparison
        raised = type(exc).__name__
    else:
        raised = "沒有出錯"
    described = _described(gm)
    del described["claimed"]
    found = {"max_pool2d → cat": raised, **described, KEYWORD_CASE: {"labels": keyword}}
    if names_both is not None:
        found["錯誤訊息寫出兩個 node"] = names_both
    return found


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


class Tap(nn.Module):
    """A module that hands its input on unchanged: a call_module on the graph that is not an observer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class FourReaders(nn.Module):
    """relu(x) read by four consumers: mul, neg, sigmoid and cat (inside cat's list)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return r * 2, torch.neg(r), torch.sigmoid(r), torch.cat([r, x])


def _insert_module(gm: GraphModule, name: str, module: nn.Module, before: Any, source: Any) -> Any:
    """Put ``name`` (running ``module``) between ``source`` and the node ``before``; returns its node."""
    gm.add_submodule(name, module)
    with gm.graph.inserting_before(before):
        node = gm.graph.call_module(name, (source,))
    before.replace_input_with(source, node)
    return node


def reads_by_hand(ns: Namespace, seed: int) -> Any:
    """FourReaders prepared without labels, then changed by hand: two observers in a row (watch_a, watch_b,
    names that are not activation_post_process) between relu and mul, a Tap module (not an observer)
    between relu and neg, and a label on relu → sigmoid written after prepare_pt2e (no observer). Asked
    about relu; ``changed``: how the call changed the graph (it must only read it)."""
    from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, export_module, prepare_pt2e

    gm = prepare_pt2e(export_module(FourReaders().eval(), seeded_inputs(seed, (2, 4))), Already())
    nodes = {n.name: n for n in gm.graph.nodes}
    watch_b = _insert_module(gm, "watch_b", MinMaxObserver(), nodes["mul"], nodes["relu"])
    _insert_module(gm, "watch_a", MinMaxObserver(), watch_b, nodes["relu"])
    _insert_module(gm, "tap", Tap(), nodes["neg"], nodes["relu"])
    nodes["sigmoid"].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={nodes["relu"]: _spec()})
    gm.recompile()
    before = graph_state(gm)
    got = plain(ns["reads_quantized"](gm, "relu"))
    answer = dict(sorted(got.items())) if isinstance(got, dict) else got
    return {"relu": {"answer": answer, "changed": graph_changes(before, gm)}}


# --- reading the evidence (the preview and the grader alike) -----------------------------------------
# add_label: the hidden cases keep each node's label (``inputs``, ``output``, flags), the public ones the
# labelled positions (``labels``); both become {position: (spec without observer, observer)}.


@dataclass(frozen=True)
class Labels:
    """One graph's labels: ``positions`` ``"a → b"`` / ``"n 的輸出"`` → (the spec's numbers, its observer);
    ``flags``: node → its label's ``_annotated`` / ``allow_implicit_sharing`` where the evidence keeps them."""

    positions: dict[str, tuple[str, str]]
    flags: dict[str, dict[str, Any]]

    def edges(self) -> dict[str, tuple[str, str]]:
        return {p: s for p, s in self.positions.items() if " → " in p}

    def outputs(self) -> set[str]:
        return {p.removesuffix(" 的輸出") for p in self.positions if p.endswith(" 的輸出")}

    def nodes(self) -> set[str]:
        """The nodes carrying a labelled position (the consumer of an edge, the node of an output)."""
        return {p.split(" → ")[-1].removesuffix(" 的輸出") for p in self.positions}

    def of(self, node: str) -> set[str]:
        return {p for p in self.positions if p.split(" → ")[-1].removesuffix(" 的輸出") == node}


def _spec_parts(spec: Any) -> tuple[str, str]:
    if isinstance(spec, dict):
        numbers = {k: v for k, v in spec.items() if k != "observer"}
        return json.dumps(numbers, sort_keys=True, default=str), json.dumps(spec.get("observer"), sort_keys=True)
    text = str(spec)
    numbers, _, observer = text.rpartition(" ")
    return numbers, observer


def _labels_of(record: Any) -> Labels | None:
    """A hidden per-node record ({node: {inputs, output, …}}) or a public positions record ({position: text})."""
    if not isinstance(record, dict):
        return None
    positions: dict[str, tuple[str, str]] = {}
    flags: dict[str, dict[str, Any]] = {}
    for key, entry in record.items():
        if isinstance(entry, dict) and "inputs" in entry:
            for source, spec in entry.get("inputs") or []:
                if spec is not None:
                    positions[f"{source} → {key}"] = _spec_parts(spec)
            if entry.get("output") is not None:
                positions[f"{key} 的輸出"] = _spec_parts(entry["output"])
            flags[str(key)] = {f: entry[f] for f in ("annotated", "implicit_sharing") if f in entry}
        elif isinstance(entry, str) and (" → " in key or key.endswith(" 的輸出")):
            positions[str(key)] = _spec_parts(entry)
        else:
            return None
    return Labels(positions, flags)


def _label_records(value: Any) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """(path, labels record, the dict holding it) inside a case's value."""
    if not isinstance(value, dict):
        return
    if isinstance(value.get("labels"), dict):
        yield ("labels",), value["labels"], value
        return
    if value and all(isinstance(v, dict) and "inputs" in v for v in value.values()):
        yield (), value, value
        return
    for key, item in value.items():
        for path, record, holder in _label_records(item):
            yield (key, *path), record, holder


def label_pairs(seen: Any, expected: Any) -> list[tuple[tuple[Any, ...], Labels, Labels, Any, Any]]:
    """(place, the student's labels, the key's, the student's holder dict, the key's) at every place both hold."""
    found = []
    for case in diagnosis.cases(expected):
        want_value = diagnosis.value(expected, case)
        for path, record, holder in _label_records(want_value):
            got_holder = diagnosis.at(diagnosis.value(seen, case), *path[:-1]) if path[-1:] == ("labels",) else None
            got_record = diagnosis.value(seen, case, *path)
            want, got = _labels_of(record), _labels_of(got_record)
            if want is not None and got is not None:
                found.append(((case, *path), got, want, got_holder, holder))
    return found


def keyed_by_consumer(seen: Any, expected: Any) -> bool:
    """An edge label whose key is the consumer itself (``c → c``)."""
    return any(
        p.split(" → ")[0] == p.split(" → ")[1] for _, got, _, _, _ in label_pairs(seen, expected) for p in got.edges()
    )


def edge_as_output(seen: Any, expected: Any) -> bool:
    """An edge label missing while its producer got an output label the key does not write."""
    for _, got, want, _, _ in label_pairs(seen, expected):
        extra = got.outputs() - want.outputs()
        if any(p not in got.positions and p.split(" → ")[0] in extra for p in want.edges()):
            return True
    return False


def output_as_edges(seen: Any, expected: Any) -> bool:
    """An output label missing while edges from that node to its users appear instead."""
    for _, got, want, _, _ in label_pairs(seen, expected):
        lost = want.outputs() - got.outputs()
        if any(p.split(" → ")[0] in lost for p in set(got.edges()) - set(want.edges())):
            return True
    return False


def _has_edges(expected: Any, case: str) -> bool:
    return any(want.edges() for place, _, want, _, _ in label_pairs(expected, expected) if place[0] == case)


def _refused_real_edges(seen: Any, expected: Any) -> tuple[int, int]:
    """(cases labelling real edges that stopped with ValueError, cases labelling real edges)."""
    cases = [c for c in diagnosis.cases(expected) if _has_edges(expected, c)]
    return sum(diagnosis.error(seen, c) == "ValueError" for c in cases), len(cases)


def verdicts(seen: Any, expected: Any) -> list[dict[str, Any]]:
    """What add_label did with edges that do not exist: raised (exception name or None), value_error,
    names_both (None when unknown), left_label."""
    found = []
    for case in diagnosis.cases(expected):
        value = diagnosis.value(seen, case)
        if not isinstance(value, dict):
            continue
        for _, verdict in diagnosis.walk(value, "value_error"):
            found.append(verdict)
        for key, raised in value.items():
            if " → " in str(key) and isinstance(raised, str):
                labels = _labels_of(value.get("labels"))
                found.append(
                    {
                        "raised": None if raised == "沒有出錯" else raised,
                        "value_error": raised == "ValueError",
                        "names_both": value.get("錯誤訊息寫出兩個 node"),
                        "left_label": labels is not None and key in labels.positions,
                    }
                )
    return found


def backwards_check(seen: Any, expected: Any) -> bool:
    """Every case labelling real edges refused one, or a reversed edge went through while others were refused."""
    refused, total = _refused_real_edges(seen, expected)
    passed = [v for v in verdicts(seen, expected) if v.get("raised") is None]
    refused_bad = [v for v in verdicts(seen, expected) if v.get("value_error")]
    return (total > 0 and refused == total) or (bool(passed) and bool(refused_bad) and refused > 0)


def checks_args(seen: Any, expected: Any) -> bool:
    """Some real edges refused with ValueError, others labelled (an input inside a list, a keyword)."""
    refused, total = _refused_real_edges(seen, expected)
    return 0 < refused < total


def _missing_by_node(got: Labels, want: Labels) -> dict[str, set[str]]:
    return {node: want.of(node) - got.of(node) for node in want.nodes() if want.of(node) - got.of(node)}


def _claim_kept(got: Labels, want: Labels, got_holder: Any, want_holder: Any, node: str) -> bool | None:
    """Whether the node's claim (someone else's ``_annotated=True``) survived; None when the key has none."""
    if want.flags.get(node, {}).get("annotated") is True:
        return got.flags.get(node, {}).get("annotated") is True
    if isinstance(want_holder, dict) and want_holder.get("claimed") is True:  # the public case: one claimed node
        return isinstance(got_holder, dict) and got_holder.get("claimed") is True
    return None


def overwrites(seen: Any, expected: Any) -> bool:
    """Labels already on a node are gone (on a node no one claimed, or together with the node's claim), and
    nothing is labelled where the key has no label."""
    for _, got, want, got_holder, want_holder in label_pairs(seen, expected):
        if set(got.positions) - set(want.positions):
            continue
        for node, lost in _missing_by_node(got, want).items():
            if not got.of(node):
                continue  # nothing of the student's either: skipped, not overwritten
            kept = _claim_kept(got, want, got_holder, want_holder, node)
            if kept is False or (kept is None and any(" → " in p for p in lost)):
                return True
    return False


def _claimed_node_pairs(seen: Any, expected: Any) -> Iterator[tuple[Labels, Labels, str]]:
    """(the student's labels, the key's, the node someone else claimed) in the public cases that have one,
    where that claim survived."""
    for place, got, want, got_holder, want_holder in label_pairs(seen, expected):
        node = CLAIMED.get(str(place[0]))
        if node and _claim_kept(got, want, got_holder, want_holder, node):
            yield got, want, node


def overwrites_public(seen: Any, expected: Any) -> bool:
    """``overwrites``, or, on the node someone else claimed (the claim kept), an edge label written earlier is
    gone while a later one is there: the input_qspec_map was replaced."""
    if overwrites(seen, expected):
        return True
    for got, want, node in _claimed_node_pairs(seen, expected):
        lost = want.of(node) - got.of(node)
        if got.of(node) and any(" → " in p for p in lost) and not set(got.positions) - set(want.positions):
            return True
    return False


def skips_claimed_public(seen: Any, expected: Any) -> bool:
    """On the node someone else claimed (the claim kept), none of the labels asked for; every other label there."""
    found = False
    for got, want, node in _claimed_node_pairs(seen, expected):
        missing = _missing_by_node(got, want)
        if set(got.positions) - set(want.positions) or set(missing) - {node}:
            return False
        if node in missing:
            if got.of(node):
                return False
            found = True
    return found


def relabel_kept_old(seen: Any, expected: Any) -> bool:
    """Specs differ from the ones passed in only at positions labelled twice (the first spec stayed)."""
    places = [
        (place, position)
        for place, got, want, _, _ in label_pairs(seen, expected)
        for position, spec in want.positions.items()
        if position in got.positions and got.positions[position] != spec
    ]
    return bool(places) and all(position in RELABELLED.get(str(place[0]), ()) for place, position in places)


def flags_lost(seen: Any, expected: Any) -> bool:
    """Every label is there, but someone else's ``_annotated`` / ``allow_implicit_sharing`` changed."""
    for _, got, want, got_holder, want_holder in label_pairs(seen, expected):
        if set(want.positions) - set(got.positions):
            continue
        for node, flags in want.flags.items():
            if any(got.flags.get(node, {}).get(f) != v for f, v in flags.items() if not (f == "annotated" and not v)):
                return True
        if isinstance(want_holder, dict) and want_holder.get("claimed") is True:
            if isinstance(got_holder, dict) and got_holder.get("claimed") is False:
                return True
    return False


def skips_claimed(seen: Any, expected: Any) -> bool:
    """Labels are missing only on nodes someone else claimed (``_annotated=True`` in the key's labels), whose
    claim stays."""
    found = False
    for _, got, want, _, _ in label_pairs(seen, expected):
        for node in _missing_by_node(got, want):
            if (
                want.flags.get(node, {}).get("annotated") is not True
                or got.flags.get(node, {}).get("annotated") is not True
            ):
                return False
            found = True
    return found


def _spec_differences(seen: Any, expected: Any) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    return [
        (got.positions[p], spec)
        for _, got, want, _, _ in label_pairs(seen, expected)
        for p, spec in want.positions.items()
        if p in got.positions and got.positions[p] != spec
    ]


def own_spec(seen: Any, expected: Any) -> bool:
    """A labelled position whose spec has other numbers (dtype, range, scheme) than the one passed in."""
    return any(mine[0] != theirs[0] for mine, theirs in _spec_differences(seen, expected))


def spec_replaced(seen: Any, expected: Any) -> bool:
    """A labelled position whose spec is not the one passed in (the public cases cannot tell how)."""
    return bool(_spec_differences(seen, expected))


def other_observer(seen: Any, expected: Any) -> bool:
    """The spec's numbers kept, its observer (class or arguments) replaced."""
    differences = _spec_differences(seen, expected)
    return bool(differences) and all(mine[0] == theirs[0] for mine, theirs in differences)


def never_refuses(seen: Any, expected: Any) -> bool:
    """Edges that do not exist go through without an error."""
    return sum(v.get("raised") is None for v in verdicts(seen, expected)) >= 1 and not any(
        v.get("value_error") for v in verdicts(seen, expected)
    )


def other_exception(seen: Any, expected: Any) -> bool:
    """Edges that do not exist raise, but not ValueError."""
    return any(v.get("raised") not in (None, "ValueError") for v in verdicts(seen, expected))


def written_before_refusing(seen: Any, expected: Any) -> bool:
    """ValueError raised after the edge was already in input_qspec_map."""
    return any(v.get("value_error") and v.get("left_label") for v in verdicts(seen, expected))


def names_one_node(seen: Any, expected: Any) -> bool:
    """ValueError whose message does not name both nodes."""
    return any(v.get("value_error") and v.get("names_both") is False for v in verdicts(seen, expected))


# reads_quantized: {consumer: bool} answers, in the hidden cases with how the graph changed.


def answer_pairs(seen: Any, expected: Any) -> list[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any], Any]]:
    """(place, the student's answer, the key's, how the student's call changed the graph) at every place."""
    found = []

    def walk(want: Any, path: tuple[Any, ...]) -> None:
        if not isinstance(want, dict) or not want:
            return
        if isinstance(want.get("answer"), dict):
            got = diagnosis.value(seen, *path)
            if isinstance(got, dict) and isinstance(got.get("answer"), dict):
                found.append((path, got["answer"], want["answer"], got.get("changed")))
            return
        if all(type(v) is bool for v in want.values()):
            got = diagnosis.value(seen, *path)
            if isinstance(got, dict):
                found.append((path, got, want, None))
            return
        for key, item in want.items():
            walk(item, (*path, key))

    for case in diagnosis.cases(expected):
        walk(diagnosis.value(expected, case), (case,))
    return found


CHAINED = ("chained",)
"""The case whose observers come in a row (an observer reads another)."""


def changes_graph(seen: Any, expected: Any) -> bool:
    return any(changed for *_, changed in answer_pairs(seen, expected))


def _shape(got: dict[str, Any], want: dict[str, Any]) -> tuple[set[str], set[str], set[str], set[str]]:
    """(extra consumers, missing consumers, False → True, True → False)."""
    extra, missing = set(got) - set(want), set(want) - set(got)
    up = {k for k in set(got) & set(want) if want[k] is False and got[k] is True}
    down = {k for k in set(got) & set(want) if want[k] is True and got[k] is False}
    return extra, missing, up, down


def labels_for_observers(seen: Any, expected: Any) -> bool:
    """Some consumers without an observer said True while others stay False, or a consumer behind an observer
    said False: the answer follows the labels, not the observers."""
    for _, got, want, _ in answer_pairs(seen, expected):
        _, _, up, down = _shape(got, want)
        unflipped = {k for k in set(got) & set(want) if want[k] is False} - up
        if (up and unflipped) or down:
            return True
    return False


def any_observer_counts(seen: Any, expected: Any) -> bool:
    """Every consumer True once some observer follows the producer (the consumers themselves right)."""
    flipped = False
    for _, got, want, _ in answer_pairs(seen, expected):
        extra, missing, up, _ = _shape(got, want)
        if extra or missing:
            return False
        if up:
            if any(got[k] is False for k in got):
                return False
            flipped = True
    return flipped


def stops_after_one_observer(seen: Any, expected: Any) -> bool:
    """Where observers come in a row, the second one is taken for a consumer; elsewhere right."""
    pairs = answer_pairs(seen, expected)
    chained = [(got, want) for place, got, want, _ in pairs if place[0] in CHAINED]
    others = [(got, want) for place, got, want, _ in pairs if place[0] not in CHAINED]
    return any(set(got) - set(want) and set(want) - set(got) for got, want in chained) and all(
        not (set(got) - set(want)) for got, want in others
    )


BY_HAND = ("by_hand",)
"""The public case with two observers in a row (added by hand)."""


def stops_after_one_observer_public(seen: Any, expected: Any) -> bool:
    """``stops_after_one_observer`` on the public cases: the second of the hand-added observers taken for a
    consumer; elsewhere nothing extra but export's ``_guards_fn`` (which reads an observed input directly)."""
    pairs = answer_pairs(seen, expected)
    chained = [(got, want) for place, got, want, _ in pairs if place[0] in BY_HAND]
    others = [(got, want) for place, got, want, _ in pairs if place[0] not in BY_HAND]
    return any(set(got) - set(want) and set(want) - set(got) for got, want in chained) and all(
        all(str(k).startswith("_guards") for k in set(got) - set(want)) for got, want in others
    )


def observer_as_consumer(seen: Any, expected: Any) -> bool:
    """The observer itself answered as a consumer (True), its real consumers missing."""
    pairs = [(got, want) for place, got, want, _ in answer_pairs(seen, expected) if place[0] not in CHAINED]
    extras = [(got, set(got) - set(want), set(want) - set(got)) for got, want in pairs]
    return any(extra and missing for _, extra, missing in extras) and all(
        got[k] is True for got, extra, _ in extras for k in extra
    )


def _misses_plain_consumers(got: dict[str, Any], want: dict[str, Any]) -> bool:
    missing = set(want) - set(got)
    return bool(missing) and not set(got) - set(want) and any(not _in_a_list(k) for k in missing)


def _right_somewhere(pairs: list[tuple[Any, dict[str, Any], dict[str, Any], Any]]) -> bool:
    """Some answer names exactly the key's consumers (the function works at all)."""
    return any(got and set(got) == set(want) for _, got, want, _ in pairs)


def observer_by_name(seen: Any, expected: Any) -> bool:
    """Consumers behind an observer missing (it was not recognised), with nothing extra."""
    pairs = answer_pairs(seen, expected)
    return _right_somewhere(pairs) and any(_misses_plain_consumers(got, want) for _, got, want, _ in pairs)


def module_as_observer(seen: Any, expected: Any) -> bool:
    """A consumer behind a module that is not an observer answered (True), nothing missing."""
    pairs = answer_pairs(seen, expected)
    extra = [
        k for _, got, want, _ in pairs for k in set(got) - set(want) if got[k] is True and not k.startswith("_guards")
    ]
    return bool(extra) and not any(set(want) - set(got) for _, got, want, _ in pairs)


def counts_modules(seen: Any, expected: Any) -> bool:
    """call_module nodes answered as consumers (export's ``_guards_fn``, a module that reads the value directly),
    every real consumer there."""
    pairs = answer_pairs(seen, expected)
    if any(set(want) - set(got) for _, got, want, _ in pairs):
        return False
    extra = [(k, got[k]) for _, got, want, _ in pairs for k in set(got) - set(want)]
    return bool(extra) and all(k.startswith("_guards") or answer is False for k, answer in extra)


def _in_a_list(consumer: str) -> bool:
    return consumer == "output" or re.fullmatch(r"(cat|concat|stack)(_\d+)?", consumer) is not None


def _missing(seen: Any, expected: Any) -> set[str]:
    """The consumers missing from the answers (none when an answer has extra ones, or none is right)."""
    pairs = answer_pairs(seen, expected)
    found: set[str] = set()
    for _, got, want, _ in pairs:
        if set(got) - set(want):
            return set()
        found |= set(want) - set(got)
    return found if _right_somewhere(pairs) else set()


def scans_args(seen: Any, expected: Any) -> bool:
    """Consumers that hold the value inside a list are missing (a cat), besides the graph's output."""
    missing = _missing(seen, expected)
    return bool(missing - {"output"}) and all(_in_a_list(k) for k in missing)


def misses_output(seen: Any, expected: Any) -> bool:
    """Only the graph's output is missing."""
    return _missing(seen, expected) == {"output"}


# --- where the chapter teaches it ------------------------------------------------------------------

LABEL_LOOKS = Section("A. 標籤長什麼樣")
ROLES = Section("B. 三個角色的分工")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤")
ADD_LABEL_RULES = Section("練習 1：add_label（4 分）")
READS_RULES = Section("練習 2：reads_quantized（4 分）")

# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own -----------------


class _Gate(nn.Module):
    """relu(x) read inside cat's list and by keyword."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(x)
        return torch.cat([r, x]), torch.mul(x, other=r)


def _gate() -> dict[str, Any]:
    gm = torch.fx.symbolic_trace(_Gate())
    return {node.name: node for node in gm.graph.nodes}


def _check_require_edge(require_edge: Any) -> list[str]:
    problems = []
    for producer, consumer, real in (
        ("x", "relu", True),
        ("relu", "cat", True),
        ("relu", "mul", True),
        ("relu", "x", False),
        ("cat", "relu", False),
    ):
        nodes = _gate()
        title = f"({producer}, {consumer})"
        try:
            require_edge(nodes[producer], nodes[consumer])
        except NotImplementedError:
            raise
        except ValueError as error:
            if real:
                problems.append(f"{title} 是真的邊（{producer} 在 {consumer}.all_input_nodes 裡），你卻丟出 ValueError")
            elif producer not in str(error) or consumer not in str(error):
                problems.append(f"{title} 不是邊：ValueError 的訊息要寫出 {producer} 與 {consumer}，你的是「{error}」")
            continue
        except Exception as error:
            problems.append(f"{title}：應該丟出 ValueError，你丟出的是 {type(error).__name__}")
            continue
        if not real:
            problems.append(f"{title} 不是邊（{producer} 不是 {consumer} 的輸入），你卻沒有丟出 ValueError")
    return problems


REQUIRE_EDGE = Practice(
    "require_edge",
    "寫 require_edge(producer, consumer)：邊 producer → consumer 存在時什麼都不做；不存在時 raise ValueError，"
    "訊息寫出兩個 node 的名字。檢查用的圖有 relu = relu(x)、cat([relu, x]) 與 mul(x, other=relu)，"
    "試三條真的邊和兩條反方向的假邊。",
    "def require_edge(producer, consumer):\n    raise NotImplementedError()\n",
    _check_require_edge,
    "邊存在，是指 producer 在 consumer.all_input_nodes 裡：它連 list 裡、kwargs 裡的輸入都列出來，consumer.args 不會。"
    "方向是 producer 在 consumer 的輸入裡，不是反過來；不存在就 raise ValueError(...)，不是 assert。",
    "def require_edge(producer, consumer):\n"
    "    if producer not in consumer.all_input_nodes:\n"
    '        raise ValueError(f"{producer.name} 不是 {consumer.name} 的輸入")\n',
    "一條邊由兩個 node 決定：訊息只寫一個，讀的人看不出是哪一條。",
)


def _practice_specs() -> tuple[Any, Any, Any, Any]:
    from common.pt2e import MinMaxObserver, MovingAverageMinMaxObserver, QuantizationSpec

    def make(low: int, high: int, observer: Any) -> Any:
        dtype = torch.uint8 if low >= 0 else torch.int8
        return QuantizationSpec(
            dtype=dtype,
            quant_min=low,
            quant_max=high,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=observer,
        )

    moving = MovingAverageMinMaxObserver.with_args(averaging_constant=0.25)
    return make(-128, 127, MinMaxObserver), make(0, 255, MinMaxObserver), make(-64, 63, moving), make(0, 15, moving)


def _check_add_edge_label(add_edge_label: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation

    kept_edge, kept_output, first, second = _practice_specs()
    problems = []
    nodes = _gate()
    add_edge_label(nodes["x"], nodes["relu"], first)
    fresh = nodes["relu"].meta.get(ANNOTATION_KEY)
    if fresh is None:
        problems.append("沒有標籤的 relu：貼完 (x, relu) 以後 relu 應該有一張標籤，你的沒有")
    elif fresh.input_qspec_map.get(nodes["x"]) is not first or fresh.output_qspec is not None:
        problems.append("沒有標籤的 relu：標籤應該只有 input_qspec_map {x: 傳進來的 spec}，你的不是")

    nodes = _gate()
    cat, relu, x = nodes["cat"], nodes["relu"], nodes["x"]
    before = QuantizationAnnotation(
        input_qspec_map={x: kept_edge}, output_qspec=kept_output, allow_implicit_sharing=False, _annotated=True
    )
    cat.meta[ANNOTATION_KEY] = before
    add_edge_label(relu, cat, first)
    add_edge_label(relu, cat, second)
    after = cat.meta.get(ANNOTATION_KEY)
    if after is not before:
        problems.append("cat 原本有標籤：要在那張標籤上加位置，你換成了另一張（別人的 _annotated 等欄位就不見了）")
    if after is None:
        return problems
    if cat in after.input_qspec_map:
        problems.append("input_qspec_map 的 key 要是上游的 relu，你用了 cat 自己")
    got = after.input_qspec_map.get(relu)
    if got is first:
        problems.append("(relu, cat) 貼了兩次：應該是第二次傳進來的 spec，你留著第一次的")
    elif got is not second and relu in after.input_qspec_map:
        problems.append("(relu, cat) 的 spec 應該就是傳進來的那一個物件，你換成了別的（自己建的或重建的）")
    elif relu not in after.input_qspec_map and cat not in after.input_qspec_map:
        problems.append("(relu, cat) 沒有貼上：cat 的標籤 _annotated=True，也要照樣加上這條邊")
    if after.input_qspec_map.get(x) is not kept_edge:
        problems.append("cat 原本的邊標籤 (x, cat) 不見了或被換掉")
    if after.output_qspec is not kept_output:
        problems.append("cat 原本的輸出標籤不見了或被換掉")
    if after._annotated is not True or after.allow_implicit_sharing is not False:
        problems.append("cat 原本標籤的 _annotated、allow_implicit_sharing 被改了：那是先貼標籤的人的決定")
    return problems


ADD_EDGE_LABEL = Practice(
    "add_edge_label",
    "寫 add_edge_label(producer, consumer, spec)：把邊 producer → consumer 的 spec 加到 consumer 的標籤上；"
    "consumer 還沒有標籤就建一張，已經有就加在原本那張上，同一條邊再貼一次用新的 spec。"
    "檢查在沒有標籤的 relu 上貼一次，再在一個已經有邊標籤、輸出標籤、_annotated=True 的 cat 上貼兩次。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def add_edge_label(producer, consumer, spec):\n"
    "    raise NotImplementedError()\n",
    _check_add_edge_label,
    "consumer.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation()) 拿到原本那張（沒有才建新的）；"
    "邊寫進它的 input_qspec_map，key 是上游的 producer，值就是傳進來的 spec 物件，別的欄位都不要動。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def add_edge_label(producer, consumer, spec):\n"
    "    annotation = consumer.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())\n"
    "    annotation.input_qspec_map[producer] = spec\n",
    "_annotated=True 的標籤照樣加：要不要尊重別人的認領，是呼叫它的 Quantizer 的事。",
)


class _Fan(nn.Module):
    """relu(x) read by a mul, inside cat's list, and by the graph's output."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r = torch.relu(x)
        return r * 2, torch.cat([r, x]), r


def _fan() -> dict[str, Any]:
    gm = torch.fx.symbolic_trace(_Fan())
    return {node.name: node for node in gm.graph.nodes}


def _shown(names: Any) -> str:
    return "、".join("圖的輸出" if name == "output" else name for name in sorted(names)) or "沒有"


def _check_label_readers(label_readers: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY

    spec = _practice_specs()[0]
    problems = []
    for wanted in (("mul",), ("cat", "mul"), ("output", "cat", "mul")):
        nodes = _fan()
        relu = nodes["relu"]
        users = {user.name for user in relu.users}
        label_readers(relu, [nodes[name] for name in wanted], spec)
        title = f"readers = {_shown(wanted)}"
        own = relu.meta.get(ANNOTATION_KEY)
        output = own is not None and own.output_qspec is not None
        edges = {
            user.name
            for user in relu.users
            if ANNOTATION_KEY in user.meta and user.meta[ANNOTATION_KEY].input_qspec_map.get(relu) is not None
        }
        if set(wanted) == users:
            if not output:
                problems.append(
                    f"{title}（relu 的全部 consumer，包括圖的輸出）：這時要的是 relu 的輸出標籤，寫在 relu 自己的 output_qspec；"
                    f"你的 relu 沒有輸出標籤，標籤寫到了別人的 node（{_shown(edges)}）上"
                )
            elif edges:
                problems.append(
                    f"{title}：relu 的輸出標籤已經讓每個 consumer 都讀到量化值，{_shown(edges)} 上的邊標籤是多的"
                )
        elif output:
            problems.append(
                f"{title}：你貼了 relu 的輸出標籤，relu 的每個 consumer（{_shown(users)}）都讀到量化值；"
                f"只要 {_shown(wanted)} 讀到，就在 {_shown(wanted)} 的 input_qspec_map 上貼邊標籤，key 是 relu"
            )
        elif edges != set(wanted):
            problems.append(f"{title}：應該只有 {_shown(wanted)} 讀到量化後的 relu，照你的標籤是 {_shown(edges)}")
    return problems


LABEL_READERS = Practice(
    "label_readers",
    "寫 label_readers(producer, readers, spec)：讓 readers 裡的 consumer 讀到 producer 量化後的值，producer 的其他 consumer 仍讀原值。"
    "readers 是 producer 的全部 consumer 時，貼一張 producer 的輸出標籤；只是其中幾個時，替每一個貼邊標籤。"
    "檢查用的圖：relu = relu(x)，讀 relu 的有 mul、cat 的 list 和圖的輸出。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_readers(producer, readers, spec):\n"
    "    raise NotImplementedError()\n",
    _check_label_readers,
    "兩種位置寫在不同的 node 上：輸出標籤寫在 producer 自己的 output_qspec，它的每個 consumer 都讀到量化值；"
    "邊標籤寫在那一個 consumer 的 input_qspec_map[producer]，只影響它。set(readers) == set(producer.users) 就是「全部」。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_readers(producer, readers, spec):\n"
    "    if set(readers) == set(producer.users):\n"
    "        producer.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation()).output_qspec = spec\n"
    "        return\n"
    "    for reader in readers:\n"
    "        reader.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation()).input_qspec_map[producer] = spec\n",
    "輸出標籤是 relu 自己的位置：一張就管到它的每個 consumer（圖的輸出也是），不必在別人的 node 上各貼一張"
    "（那些標籤可能是別的 Quantizer 的）。",
)


def _check_label_edges(label_edges: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation

    kept, spec, _, _ = _practice_specs()
    problems = []
    for consumer, producers, old in (
        ("cat", ("relu", "x"), None),
        ("cat", ("relu", "mul"), None),
        ("relu", ("x", "cat"), kept),
    ):
        nodes = _gate()
        target = nodes[consumer]
        if old is not None:
            target.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={nodes["x"]: old})
        before = {p.name: s for p, s in target.meta[ANNOTATION_KEY].input_qspec_map.items()} if old else {}
        strangers = [p for p in producers if nodes[p] not in target.all_input_nodes]
        title = f"label_edges({consumer}, [{', '.join(producers)}])"
        try:
            label_edges(target, [nodes[p] for p in producers], spec)
        except NotImplementedError:
            raise
        except ValueError as error:
            if not strangers:
                problems.append(
                    f"{title}：{'、'.join(producers)} 都是 {consumer} 的輸入，不該出錯，你的丟出 ValueError：{error}"
                )
                continue
        except Exception as error:  # the wrong kind of exception shows in the message
            problems.append(f"{title}：應該 raise ValueError，你的丟出 {type(error).__name__}")
            continue
        else:
            if strangers:
                problems.append(
                    f"{title}：{'、'.join(strangers)} 不是 {consumer} 的輸入，應該 raise ValueError，你的沒有出錯"
                )
                continue
        label = target.meta.get(ANNOTATION_KEY)
        after = {p.name: s for p, s in label.input_qspec_map.items()} if label is not None else {}
        if strangers and after != before:
            changed = sorted(name for name in set(after) | set(before) if after.get(name) is not before.get(name))
            problems.append(
                f"{title}：丟出 ValueError 時，{consumer} 的標籤已經改了（{'、'.join(f'{n} → {consumer}' for n in changed)}）："
                "先檢查完全部的邊，全部存在才開始寫"
            )
        elif not strangers and any(after.get(p) is not spec for p in producers):
            done = [f"{p} → {consumer}" for p in producers if after.get(p) is spec]
            problems.append(f"{title}：每條邊都該貼上傳進來的 spec，你貼好的只有 {'、'.join(done) or '沒有'}")
    return problems


LABEL_EDGES = Practice(
    "label_edges",
    "寫 label_edges(consumer, producers, spec)：一次替 consumer 貼好幾條邊標籤 (producer, consumer)，每條都用 spec。"
    "只要有一個 producer 不是 consumer 的輸入，就 raise ValueError，而且一條都不貼，consumer 原本的標籤也不能變。"
    "檢查用的圖有 relu = relu(x)、cat([relu, x]) 與 mul(x, other=relu)。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_edges(consumer, producers, spec):\n"
    "    raise NotImplementedError()\n",
    _check_label_edges,
    "分成兩段：第一段只讀，找出不在 consumer.all_input_nodes 裡的 producer，有就 raise；"
    "第二段才拿標籤（setdefault）、把每條邊寫進 input_qspec_map。raise 之後的程式不會執行，寫在它前面的卻已經寫了。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_edges(consumer, producers, spec):\n"
    "    strangers = [p.name for p in producers if p not in consumer.all_input_nodes]\n"
    "    if strangers:\n"
    "        raise ValueError(f\"{'、'.join(strangers)} 不是 {consumer.name} 的輸入\")\n"
    "    annotation = consumer.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())\n"
    "    for producer in producers:\n"
    "        annotation.input_qspec_map[producer] = spec\n",
    "呼叫的人接住 ValueError 之後還會用這張圖：先寫再 raise，壞掉的邊就留在標籤上，prepare_pt2e 照樣讀到它。",
)


ADD_LABEL_MISCONCEPTIONS = (
    Misconception(
        "keyed_by_consumer",
        "input_qspec_map 的 key 寫成 consumer 自己",
        "邊標籤貼在 consumer 上，但 input_qspec_map 的 key 是上游的 producer：{producer: spec} 表示「producer → 這個 node」這條邊。"
        "你用 consumer 自己當 key，標的是一條不存在的邊，prepare_pt2e 不會在真正的邊上放 observer。",
        LABEL_LOOKS,
        public=keyed_by_consumer,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "edge_as_output",
        "邊標籤貼成上游的輸出標籤",
        "邊標籤只影響一個 consumer，輸出標籤影響這個 tensor 的所有 consumer。你把 (producer, consumer) 貼成 producer 的 output_qspec，"
        "producer 的每個 consumer 都讀到量化後的值，不只那一條邊。邊要寫進 consumer 的 input_qspec_map：{producer: spec}。",
        EDGE_AND_OUTPUT,
        public=edge_as_output,
        practice=LABEL_READERS,
    ),
    Misconception(
        "output_as_edges",
        "輸出標籤貼成每個使用者的邊標籤",
        "輸出標籤要寫在 node 自己的 output_qspec 上。你把它拆成每個使用者的邊標籤，標籤就寫到了別人的 node 上，"
        "而且圖的輸出（output node）這類 consumer 也不會因此得到同一個 observer。node 的位置直接設 output_qspec = spec。",
        EDGE_AND_OUTPUT,
        public=output_as_edges,
        practice=LABEL_READERS,
    ),
    Misconception(
        "checks_backwards",
        "檢查邊的方向反了",
        "邊 (producer, consumer) 存在，是指 producer 在 consumer.all_input_nodes 裡。你反過來檢查 consumer 是不是 producer 的輸入，"
        "真正的邊都被擋下來，反方向的假邊卻通過了。照練習的規則檢查 producer in consumer.all_input_nodes。",
        ADD_LABEL_RULES,
        public=backwards_check,
        practice=REQUIRE_EDGE,
    ),
    Misconception(
        "checks_args",
        "用 consumer.args 判斷邊存不存在",
        "consumer.args 只看得到直接放在引數裡的 node：cat 的輸入包在 args[0] 這個 list 裡，用 keyword 傳的輸入在 kwargs 裡。"
        "用 producer in consumer.args 檢查，這些真正存在的邊會被你擋下來。改用 consumer.all_input_nodes，它列出所有輸入 node。",
        ADD_LABEL_RULES,
        public=checks_args,
        practice=REQUIRE_EDGE,
    ),
    Misconception(
        "overwrites",
        "新建一張標籤，蓋掉了 node 上原本的標籤",
        "同一個 node 可以有好幾張標籤：先貼的邊標籤、後貼的輸出標籤，或別的 Quantizer 先貼的。"
        "你每次都放一張新的 QuantizationAnnotation，前面的標籤（連同別人的 _annotated）就不見了。"
        "用 node.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation()) 拿回原本那張，再把新的位置加上去。",
        ADD_LABEL_RULES,
        public=overwrites_public,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "rebuilds_annotation",
        "重建標籤時丟了別人標籤上的其他欄位",
        "一張 QuantizationAnnotation 除了 input_qspec_map 與 output_qspec，還有 _annotated、allow_implicit_sharing 等欄位，"
        "是先貼標籤的人（別的 Quantizer）的決定。你抄了兩個 map 重建一張新的，其他欄位就回到預設值。直接在原本那張標籤上加位置，不要換掉它。",
        ADD_LABEL_RULES,
        public=flags_lost,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "respects_claims",
        "別人認領過的 node 就不貼",
        "_annotated=True 是 Quantizer 之間的約定：後面的 Quantizer 看到它，決定要不要跳過這個 node。"
        "add_label 只是一個貼標籤的工具，被要求貼就要貼上去，要不要尊重別人的認領，是呼叫它的 Quantizer 的事。把位置加到原本那張標籤上。",
        ADD_LABEL_RULES,
        public=skips_claimed_public,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "keeps_old_spec",
        "同一個位置再貼一次時，留著舊的 spec",
        "不換掉整張標籤，是指別的位置的標籤都要留著；同一個位置被要求再貼一次時，呼叫的人要的是這次傳進來的 spec。"
        "你只在位置還空著時才寫入（或合併時讓舊的值優先），這個位置就一直用第一次的規格。"
        "輸出直接設 output_qspec = spec，邊直接設 input_qspec_map[producer] = spec。",
        ADD_LABEL_RULES,
        public=relabel_kept_old,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "own_spec",
        "沒有用傳進來的 spec",
        "spec 引數就是這個位置要用的量化規格：dtype、整數範圍、方案與 observer 都由呼叫的人決定。"
        "你換成自己的一份（例如 act_spec()），範圍與 observer 就和要求的不同。把傳進來的 spec 原封不動地放進標籤。",
        LABEL_LOOKS,
        public=own_spec,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "copies_fields",
        "照欄位重建 spec，換掉了 observer",
        "QuantizationSpec 的 observer_or_fake_quant_ctr 也是規格的一部分，連它的引數（例如 averaging_constant）都是。"
        "你照 dtype、範圍重建一份，observer 卻寫死成別的類別，prepare_pt2e 插的就是另一種 observer。直接用傳進來的 spec，不要重建。",
        LABEL_LOOKS,
        public=other_observer,
        practice=ADD_EDGE_LABEL,
    ),
    Misconception(
        "no_check",
        "不存在的邊也照貼",
        "producer 不在 consumer.all_input_nodes 裡時，這條邊不存在，標籤貼了也不會有 observer，只會讓錯誤被藏起來。"
        "練習要求這時 raise ValueError，訊息寫出兩個 node 的名字，而且不留下標籤。",
        ADD_LABEL_RULES,
        public=never_refuses,
        practice=REQUIRE_EDGE,
    ),
    Misconception(
        "assert_instead",
        "不存在的邊丟出的不是 ValueError",
        "呼叫的人靠例外的種類判斷發生了什麼：引數的值不對是 ValueError。你丟出的是別種例外"
        "（用 assert 得到的是 AssertionError，而且 python -O 執行時 assert 會整個被略過）。請 raise ValueError(...)。",
        ADD_LABEL_RULES,
        public=other_exception,
        practice=REQUIRE_EDGE,
    ),
    Misconception(
        "writes_before_check",
        "先寫進標籤才檢查",
        "你先把邊寫進 input_qspec_map 才檢查，丟出 ValueError 時那條不存在的邊已經留在標籤上，"
        "呼叫的人接住例外之後，prepare_pt2e 還是會讀到它。先檢查，確定邊存在再貼。",
        ADD_LABEL_RULES,
        public=written_before_refusing,
        practice=LABEL_EDGES,
    ),
    Misconception(
        "message_one_name",
        "錯誤訊息沒有寫出兩個 node",
        "一條邊由兩個 node 決定，訊息只寫出其中一個，讀的人看不出是哪一條邊出錯。"
        "訊息裡寫出 producer.name 與 consumer.name，例如「relu 不是 conv2d 的輸入」。",
        ADD_LABEL_RULES,
        public=names_one_node,
        practice=REQUIRE_EDGE,
    ),
)


def _reads_graph() -> tuple[torch.fx.Graph, dict[str, Any]]:
    """x → relu; relu → watch_a → watch_b → mul; relu → add; relu → _guards_fn; watch_a → cat's list; watch_b → output."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(torch.relu, (x,))
    watch_a = graph.call_module("watch_a", (relu,))
    watch_b = graph.call_module("watch_b", (watch_a,))
    graph.call_module("_guards_fn", (relu,))
    mul = graph.call_function(torch.mul, (watch_b, x))
    add = graph.call_function(torch.add, (relu, 1.0))
    cat = graph.call_function(torch.cat, ([watch_a, x],))
    graph.output((mul, add, cat, watch_b))
    return graph, {node.name: node for node in graph.nodes}


def _check_quantized_reads(quantized_reads: Any) -> list[str]:
    graph, nodes = _reads_graph()
    before = [(node.name, node.op, str(node.args)) for node in graph.nodes]
    want = {"mul": True, "add": False, "cat": True, "output": True}
    got = quantized_reads(nodes["relu"], lambda node: node.op == "call_module" and str(node.target).startswith("watch"))
    problems = []
    if not isinstance(got, dict):
        return [f"要回傳 {{consumer 的名字: True/False}} 的 dict，你的是 {got!r}"]
    if got != want:
        problems.append(f"應該是 {want}，你的是 {got}")
    if [(node.name, node.op, str(node.args)) for node in graph.nodes] != before:
        problems.append("你的程式改了圖：只該讀圖，不要刪或改 node")
    return problems


QUANTIZED_READS = Practice(
    "quantized_reads",
    "寫 quantized_reads(producer, is_observer)：從 producer 沿著 users 往下走，回傳 {consumer 的名字: 是否經過 observer}；"
    "is_observer(node) 告訴你一個 node 是不是 observer，consumer 是 op 為 call_function 或 output 的 node。"
    "檢查用的圖：relu → watch_a → watch_b → mul、relu → add、relu → _guards_fn、watch_a → cat 的 list、watch_b → 圖的輸出。",
    "def quantized_reads(producer, is_observer):\n    raise NotImplementedError()\n",
    _check_quantized_reads,
    "寫一個遞迴的 walk(node, through)：對 node.users 的每個 user，是 observer 就 walk(user, True) 繼續往下，"
    "是 call_function 或 output 就記下 result[user.name] = through；別的 call_module（像 _guards_fn）跳過。",
    "def quantized_reads(producer, is_observer):\n"
    "    result = {}\n\n"
    "    def walk(node, through):\n"
    "        for user in node.users:\n"
    "            if is_observer(user):\n"
    "                walk(user, True)\n"
    '            elif user.op in ("call_function", "output"):\n'
    "                result[user.name] = result.get(user.name, False) or through\n\n"
    "    walk(producer, False)\n"
    "    return result\n",
    "沿著 users 走，cat 的 list、輸出的 tuple 都不用自己翻；observer 串了兩個也一路走到底。",
)


def _observed_graph() -> dict[str, Any]:
    """A prepared graph by hand, its labels kept: x → activation_post_process_0 → add(·, y), add's label {x: spec,
    y: None}; y → watch (an observer put in by hand, no label) → mul(x, ·); sub(x, y) labelled after prepare."""
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation

    spec = _practice_specs()[0]
    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    observed = graph.call_module("activation_post_process_0", (x,))
    add = graph.call_function(torch.add, (observed, y))
    watch = graph.call_module("watch", (y,))
    mul = graph.call_function(torch.mul, (x, watch))
    sub = graph.call_function(torch.sub, (x, y))
    graph.output((add, mul, sub))
    add.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: spec, y: None})
    sub.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: spec, y: spec})
    return {node.name: node for node in graph.nodes}


def _check_quantized_inputs(quantized_inputs: Any) -> list[str]:
    nodes = _observed_graph()

    def is_observer(node: Any) -> bool:
        return node.op == "call_module" and node.target in ("activation_post_process_0", "watch")

    problems = []
    for name, want, why in (
        ("add", {"x"}, "x 經過 activation_post_process_0，y 直接讀（標籤上 y 的規格是 None）"),
        ("mul", {"y"}, "y 經過手插的 observer watch（mul 沒有標籤），x 直接讀"),
        ("sub", set(), "標籤是 prepare 之後才貼的，x、y 都直接讀，中間沒有 observer"),
    ):
        got = quantized_inputs(nodes[name], is_observer)
        if isinstance(got, str) or not isinstance(got, set | list | tuple | frozenset):
            problems.append(f"{name}：要回傳上游名字的 set 或 list，你的是 {got!r}")
        elif set(got) != want:
            problems.append(f"{name}（{why}）：應該是 {sorted(want)}，你的是 {sorted(got)}")
    return problems


QUANTIZED_INPUTS = Practice(
    "quantized_inputs",
    "寫 quantized_inputs(node, is_observer)：node 在 prepare_pt2e 之後的圖上，回傳它經過 observer 讀到的上游的名字（一個 set）。"
    "is_observer(n) 告訴你 n 是不是 observer。檢查用的圖上，標籤與 observer 對不上："
    "有規格是 None 的標籤、手插的 observer（沒有標籤），和 prepare 之後才貼的標籤。",
    "def quantized_inputs(node, is_observer):\n    raise NotImplementedError()\n",
    _check_quantized_inputs,
    "node.meta 裡的標籤只是 prepare_pt2e 當時的依據，不是圖上現在的樣子。看 node.all_input_nodes：是 observer 的輸入，"
    "它讀的上游是 observer 的 args[0]；不是 observer 的，就是直接讀原值。",
    "def quantized_inputs(node, is_observer):\n"
    "    found = set()\n"
    "    for source in node.all_input_nodes:\n"
    "        if is_observer(source):\n"
    "            found.add(source.args[0].name)\n"
    "    return found\n",
    "標籤說要量化、圖上卻沒有 observer（sub），或有 observer 卻沒有標籤（mul）：讀到的是不是量化值，只看圖。",
)


class _Guards(nn.Module):
    """Stands in for export's ``_guards_fn``: a module that reads a value and returns nothing."""

    def forward(self, x: torch.Tensor) -> None:
        return None


def _watched() -> GraphModule:
    """x → activation_post_process_0 → relu → watch → activation_post_process_tap → mul; relu → second call of
    activation_post_process_0; x → _guards_fn. Observers: activation_post_process_0 (MinMaxObserver) and watch
    (MovingAverageMinMaxObserver, named by hand); activation_post_process_tap is an nn.Identity."""
    from common.pt2e import MinMaxObserver, MovingAverageMinMaxObserver

    root = nn.Module()
    root.add_module("activation_post_process_0", MinMaxObserver())
    root.add_module("watch", MovingAverageMinMaxObserver())
    root.add_module("activation_post_process_tap", nn.Identity())
    root.add_module("_guards_fn", _Guards())
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_module("_guards_fn", (x,))
    first = graph.call_module("activation_post_process_0", (x,))
    relu = graph.call_function(torch.relu, (first,))
    again = graph.call_module("activation_post_process_0", (relu,))
    watch = graph.call_module("watch", (relu,))
    tap = graph.call_module("activation_post_process_tap", (watch,))
    mul = graph.call_function(torch.mul, (again, tap))
    graph.output((tap, mul))
    return GraphModule(root, graph)


def _check_observer_names(observer_names: Any) -> list[str]:
    from common.graph_utils import is_observer

    gm = _watched()
    called = {node.name: gm.get_submodule(str(node.target)) for node in gm.graph.nodes if node.op == "call_module"}
    modules = {name: type(module).__name__ for name, module in called.items()}
    want = {name for name, module in called.items() if is_observer(module)}
    got = observer_names(gm)
    if isinstance(got, str) or not isinstance(got, set | list | tuple | frozenset):
        return [f"要回傳 node 名字的 set 或 list，你的是 {got!r}"]
    problems = []
    for name in sorted(want - set(got)):
        problems.append(f"{name} 呼叫的是 {modules[name]}，是 observer，你的沒有算它")
    for name in sorted(set(got) - want):
        kind = modules.get(name)
        problems.append(
            f"{name} 呼叫的是 {kind}，不是 observer，你的卻算了它" if kind else f"{name} 不是 call_module，你的卻算了它"
        )
    return problems


OBSERVER_NAMES = Practice(
    "observer_names",
    "寫 observer_names(gm)：回傳 gm 上呼叫 observer 的 call_module node 的名字（一個 set）。"
    "檢查用的圖上有 torchao 放的 activation_post_process_0（呼叫了兩次）、手插的 watch、"
    "名字像 observer 的 nn.Identity，和 export 的 _guards_fn。",
    "from common.pt2e import ObserverBase\n\n\ndef observer_names(gm):\n    raise NotImplementedError()\n",
    _check_observer_names,
    "名字誰都能取，模組的類別才算數：call_module node 呼叫的模組是 gm.get_submodule(node.target)，"
    "再用 isinstance(模組, ObserverBase) 判斷。op 不是 call_module 的不用看。",
    "from common.pt2e import ObserverBase\n\n\n"
    "def observer_names(gm):\n"
    "    return {\n"
    "        node.name\n"
    "        for node in gm.graph.nodes\n"
    '        if node.op == "call_module" and isinstance(gm.get_submodule(node.target), ObserverBase)\n'
    "    }\n",
    "common.graph_utils.observer_nodes(gm) 就是這樣找的：名字叫 watch 的也算，名字像 observer 的 Identity 不算。",
)


READS_MISCONCEPTIONS = (
    Misconception(
        "erases_guard",
        "reads_quantized 改了傳進來的圖",
        "reads_quantized 只該讀圖、回答問題：呼叫的人之後還要用這張圖。你刪了 _guards_fn 之類的 node，"
        "答案也許對了，呼叫的人的圖卻少了東西。遇到不算 consumer 的 node 就跳過它，不要改圖。",
        READS_RULES,
        public=changes_graph,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_labels",
        "看標籤，不是看 observer",
        "標籤只是 prepare_pt2e 插 observer 的依據：規格是 None 的標籤、prepare 之後才貼的標籤都沒有 observer，"
        "手插的 observer 也沒有標籤。consumer 讀到的是不是量化值，要看它和 producer 之間有沒有 observer node。",
        ROLES,
        public=labels_for_observers,
        practice=QUANTIZED_INPUTS,
    ),
    Misconception(
        "reads_any_observer",
        "producer 後面有 observer，就當每個 consumer 都量化",
        "邊標籤的 observer 只在 producer 與那一個 consumer 之間，其他 consumer 仍直接讀原值。"
        "你只要看到 producer 後面有 observer，就說每個 consumer 都讀到量化值。要逐一看每個 consumer 是經過 observer 還是直接讀 producer。",
        EDGE_AND_OUTPUT,
        public=any_observer_counts,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_one_hop",
        "只往下走一層 observer",
        "observer 可能串接：一個位置同時有輸出標籤與屬性不同的邊標籤時，會有兩個 observer 一前一後。"
        "你走過第一個 observer 就停，把第二個 observer 當成 consumer。遇到 observer 要一路走下去，直到不是 observer 的 node。",
        READS_RULES,
        public=stops_after_one_observer_public,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_direct_users",
        "把 observer 當成 consumer",
        "producer.users 裡有 observer 時，真正的 consumer 在 observer 的後面。你只看 producer 的直接使用者，"
        "回傳的 key 變成 observer 的名字。observer 本身不是 consumer：要穿過它，找到讀 observer 的 node。",
        READS_RULES,
        public=observer_as_consumer,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_observer_by_name",
        "用名字認 observer",
        "observer 不一定叫 activation_post_process_N：手插的 observer 可以叫任何名字，名字像的也可能只是別的模組。"
        "你用名字判斷，名字不一樣的 observer 認不出來，它後面的 consumer 也就漏掉了。"
        "用 observer_nodes(prepared)，或看 node 呼叫的模組是不是 observer。",
        READS_RULES,
        public=observer_by_name,
        practice=OBSERVER_NAMES,
    ),
    Misconception(
        "reads_any_call_module",
        "把每個 call_module 都當成 observer",
        "call_module 的 node 呼叫的可能是任何模組，不一定是 observer（例如一個 nn.Identity）。"
        "你把它們都當成 observer 走過去，後面的 node 就被算成讀到量化值。用 observer_nodes(prepared) 認 observer。",
        READS_RULES,
        public=module_as_observer,
        practice=OBSERVER_NAMES,
    ),
    Misconception(
        "reads_counts_modules",
        "把 call_module（例如 _guards_fn）算成 consumer",
        "consumer 只算 op 是 call_function 或 output 的 node。_guards_fn 是 export 自動加的 call_module，只檢查輸入的形狀，"
        "其他不是 observer 的 call_module 也不在練習的 consumer 定義裡。沿著 users 走的時候，只收 call_function 與 output。",
        READS_RULES,
        public=counts_modules,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_scans_args",
        "在 args 裡找 producer，漏了 list 裡的輸入",
        "cat 的輸入包在 args[0] 這個 list 裡，圖的輸出也把值包在 tuple 裡，只在每個 node 的 args 最外層找，這些 consumer 會被漏掉。"
        "從 producer 出發沿著 node.users 走，就不必自己翻 args。",
        READS_RULES,
        public=scans_args,
        practice=QUANTIZED_READS,
    ),
    Misconception(
        "reads_skips_output",
        "圖的輸出沒有算成 consumer",
        "consumer 是 op 為 call_function 或 output 的 node：圖的輸出（output node）直接讀這個值時也是 consumer。"
        "你可能只算了 call_function，或只在 args 最外層找，而 output 的值包在 tuple 裡，所以漏掉了它。把 output node 也算進來。",
        READS_RULES,
        public=misses_output,
        practice=QUANTIZED_READS,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "add_label",
        "add_label：把一張標籤貼在邊或輸出上",
        ("add_label",),
        {"conv_relu": add_label_conv_relu, "cat_pool": add_label_cat_pool},
        misconceptions=ADD_LABEL_MISCONCEPTIONS,
    ),
    Exercise(
        "reads_quantized",
        "reads_quantized：哪些 consumer 吃到量化後的值",
        ("reads_quantized",),
        {"edge": reads_edge, "output": reads_output, "by_hand": reads_by_hand},
        misconceptions=READS_MISCONCEPTIONS,
    ),
)
