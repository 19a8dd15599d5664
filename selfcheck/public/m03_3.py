"""Public cases of M03-3 規則式 Quantizer (RuleQuantizer, CheckedRuleQuantizer.validate) on the chapter's own models.

RuleQuantizer: the labels it writes (each position with the spec it uses, which nodes it
claims) and the observers they give, described canonically (``selfcheck.public.m03_1``).
validate: graphs labelled correctly by torchao's XNNPACKQuantizer, then one label spoiled; the
evidence is whether validate raised ValueError and whether the message names the node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec
from common.qspecs import act_spec
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import describe_annotations, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m03_1 import labels, observers

# --- RuleQuantizer --------------------------------------------------------------------------------


def _rules(ns: Namespace, name: str) -> dict[str, Any]:
    from common.pt2e import prepare_pt2e

    prepared = prepare_pt2e(export_fixed(name), ns["RuleQuantizer"]())
    found = labels(prepared)
    return {"labels": found["positions"], "claimed": found["claimed"], **observers(prepared)}


def rule_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn (the chapter's model): conv → relu twice, max_pool2d, a linear."""
    return _rules(ns, "small_cnn")


def rule_residual_mlp(ns: Namespace, seed: int) -> Any:
    """residual (BN folded, an add of conv2d_1 and x), mlp (linear → relu → linear: linear does not fuse)
    and cat_pool (two convs into a cat, then max_pool2d)."""
    return {name: _rules(ns, name) for name in ("residual", "mlp", "cat_pool")}


class _ConstantFirst(nn.Module):
    """A model constant (a buffer, a get_attr node) added to a conv's output, the constant first."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.register_buffer("offset", torch.full((1, 4, 1, 1), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.offset + self.conv(x)


class _ConvTwoReaders(nn.Module):
    """A conv read by a relu and by an add: it has two consumers, so it does not fuse."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) + y


class _ReluLater(nn.Module):
    """Two convs, then their relus: each conv's only consumer is its relu, which is not the next node."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Conv2d(3, 4, 3)
        self.right = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.left(x), self.right(x)
        return torch.relu(a) * torch.relu(b)


class _Conv1d(nn.Module):
    """A conv1d (not the rule table's conv2d: its target's name only contains "conv") before a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.fc = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x))


class _NoBias(nn.Module):
    """A linear without bias: it exports as linear(x, weight), with no third argument."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


SMALL = {
    "constant_first": (_ConstantFirst, (2, 3, 8, 8)),
    "conv_two_readers": (_ConvTwoReaders, (2, 3, 8, 8)),
    "relu_later": (_ReluLater, (2, 3, 8, 8)),
    "conv1d": (_Conv1d, (2, 3, 8)),
    "no_bias": (_NoBias, (2, 16)),
}
"""The small models the public cases define (a shape each): what the chapter's models do not show."""

RENAMED = {"conv2d": "block_a", "relu": "block_b", "max_pool2d": "block_c", "conv2d_1": "block_d"}
"""``renamed``: small_cnn with these nodes given names that do not say their op (a pass may rename nodes)."""


def export_small(name: str) -> GraphModule:
    """One of ``SMALL`` (fixed weights) exported."""
    from common.pt2e import export_module

    factory, shape = SMALL[name]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model, example = factory().eval(), torch.randn(shape)
    return export_module(model, (example,))


def export_fixed(name: str) -> GraphModule:
    """A chapter model exported with fixed weights and inputs: the labels do not depend on them, and the same
    graph exported again is a copy of the first trace (``common.export_cache``)."""
    from common.models import example_inputs, get_model
    from common.pt2e import export_module

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model, example = get_model(name).eval(), example_inputs(2, name)
    return export_module(model, example)


def renamed() -> GraphModule:
    """small_cnn with the nodes of ``RENAMED`` renamed."""
    gm = export_fixed("small_cnn")
    for node in gm.graph.nodes:
        if node.name in RENAMED:
            node.name = RENAMED[node.name]
    gm.recompile()
    return gm


def _rules_on(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    from common.pt2e import prepare_pt2e

    prepared = prepare_pt2e(gm, ns["RuleQuantizer"]())
    found = labels(prepared)
    return {"labels": found["positions"], "claimed": found["claimed"], **observers(prepared)}


def rule_small_models(ns: Namespace, seed: int) -> Any:
    """Small models of this case file: a constant added first (constant_first), a conv read by a relu and an add
    (conv_two_readers), two convs whose relus come later (relu_later), a conv1d (not conv2d) before a linear;
    and small_cnn with its nodes renamed (renamed)."""
    out = {name: _rules_on(ns, export_small(name)) for name in ("constant_first", "conv_two_readers", "relu_later")}
    out["conv1d"] = _rules_on(ns, export_small("conv1d"))
    out["renamed"] = _rules_on(ns, renamed())
    return out


def rule_no_bias(ns: Namespace, seed: int) -> Any:
    """A linear without bias (nn.Linear(16, 8, bias=False)): node.args has only x and the weight."""
    return _rules_on(ns, export_small("no_bias"))


def rule_labelled_before(ns: Namespace, seed: int) -> Any:
    """mlp labelled before RuleQuantizer runs: the first linear's label claimed by another Quantizer
    (``_annotated=True``, its output per-tensor symmetric), the second linear's a draft nobody claimed
    (``_annotated=False``, its output int8 [-100, 100]). The evidence is the labels after prepare_pt2e."""
    from common.pt2e import prepare_pt2e

    gm = export_fixed("mlp")
    nodes = {n.name: n for n in gm.graph.nodes}
    other = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-127,
        quant_max=127,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    draft = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-100,
        quant_max=100,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    first = nodes["linear"]
    first.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={first.args[0]: other}, output_qspec=other, _annotated=True
    )
    nodes["linear_1"].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=draft, _annotated=False)
    found = labels(prepare_pt2e(gm, ns["RuleQuantizer"]()))
    return {"labelled_before": found["positions"], "claimed": found["claimed"]}


# --- validate -------------------------------------------------------------------------------------


def xnnpack_labelled(
    name: str, spoil: Callable[[dict[str, Node]], None] | None = None, per_channel: bool = True
) -> GraphModule:
    """A chapter model (without BN) or one of ``SMALL`` (or ``renamed``) labelled in place by XNNPACKQuantizer
    (per-channel unless ``per_channel`` is False), then ``spoil``-ed."""
    from common.pt2e import get_xnnpack_quantizer

    quantizer = get_xnnpack_quantizer(is_per_channel=per_channel)[0]
    gm = export_small(name) if name in SMALL else renamed() if name == "renamed" else export_fixed(name)
    gm = quantizer.transform_for_annotation(gm)
    quantizer.annotate(gm)
    if spoil is not None:
        spoil({n.name: n for n in gm.graph.nodes})
    return gm


def _annotations_text(gm: GraphModule) -> str:
    """Every label of ``gm`` as one text, to see whether validate changed one."""
    try:
        return json.dumps(describe_annotations(gm), sort_keys=True, default=str)
    except Exception:  # a label of a shape describe_annotations cannot read: compare what it can
        return repr(sorted(n.name for n in gm.graph.nodes if ANNOTATION_KEY in n.meta))


def verdict(ns: Namespace, gm: GraphModule, node: str | None) -> str:
    """``沒有出錯``, ``沒有出錯，但改了標籤`` (validate changed a label), ``ValueError，訊息寫出 <node>``,
    ``ValueError，訊息沒寫出 <node>`` or the other error's name."""
    before = _annotations_text(gm)
    try:
        ns["CheckedRuleQuantizer"]().validate(gm)
    except ValueError as exc:
        if node is None:
            return "ValueError"
        named = re.search(rf"(?<![A-Za-z0-9_]){re.escape(node)}(?![A-Za-z0-9_])", safe_text(exc)) is not None
        return f"ValueError，訊息{'寫出' if named else '沒寫出'} {node}"
    except Exception as exc:  # the wrong kind of error shows in the comparison
        return type(exc).__name__
    return "沒有出錯" if _annotations_text(gm) == before else "沒有出錯，但改了標籤"


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


def _spec(dtype: torch.dtype, low: int, high: int, scheme: torch.qscheme = torch.per_tensor_affine) -> QuantizationSpec:
    """A spec of ``dtype`` over ``[low, high]`` (per-channel ones along ch_axis 0)."""
    from common.pt2e import PerChannelMinMaxObserver

    channel = scheme in (torch.per_channel_affine, torch.per_channel_symmetric)
    return QuantizationSpec(
        dtype=dtype,
        quant_min=low,
        quant_max=high,
        qscheme=scheme,
        ch_axis=0 if channel else None,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver if channel else MinMaxObserver,
    )


class _ComputedWeight(nn.Module):
    """A conv whose weight is computed by an op (a mul): the weight node is called mul, not ..._weight."""

    def __init__(self) -> None:
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(4, 3, 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.kernel * 0.5)


SMALL["computed_weight"] = (_ComputedWeight, (2, 3, 8, 8))


def validate_correct_more(ns: Namespace, seed: int) -> Any:
    """More correct labels: small_cnn's weights per-tensor symmetric (XNNPACKQuantizer's other setting); the relu
    of conv_relu output uint8 [0, 255]; cat's inputs (in a list, node.args[0]) labelled too (cat_pool); a conv
    read by a relu and an add, which does not fuse (conv_two_readers): its output label is right."""

    def uint8_output(nodes: dict[str, Node]) -> None:
        _label(nodes, "relu").output_qspec = _spec(torch.uint8, 0, 255)

    def cat_inputs(nodes: dict[str, Node]) -> None:
        cat = nodes["cat"]
        label = cat.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
        for producer in cat.all_input_nodes:
            label.input_qspec_map[producer] = act_spec()
        label.output_qspec = act_spec()
        label._annotated = True

    return {
        "per_tensor_weight": verdict(ns, xnnpack_labelled("small_cnn", per_channel=False), None),
        "uint8_output": verdict(ns, xnnpack_labelled("conv_relu", uint8_output), None),
        "cat_inputs": verdict(ns, xnnpack_labelled("cat_pool", cat_inputs), None),
        "conv_two_readers": verdict(ns, xnnpack_labelled("conv_two_readers"), None),
    }


def validate_spoiled_more(ns: Namespace, seed: int) -> Any:
    """More wrong labels, one each: conv2d's weight per-channel affine (small_cnn); relu's output range [5, 5]
    (conv_relu); the model input x's output int8 [0, 255] (cat_pool); conv2d's output labelled inside conv → relu
    while relu has no label (conv_relu); conv2d's weight int8 [-127, 128] (small_cnn); an edge from x with spec
    None on conv2d_1, which does not read x (small_cnn); a computed weight (mul) per-tensor affine
    (computed_weight); conv2d's output inside conv → relu when the relu comes later (relu_later) and in small_cnn
    with renamed nodes (renamed); linear's claimed output int8 [0, 255] (small_cnn)."""

    def channel_affine(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").input_qspec_map[nodes["conv1_weight"]] = _spec(
            torch.int8, -128, 127, torch.per_channel_affine
        )

    def equal_range(nodes: dict[str, Node]) -> None:
        _label(nodes, "relu").output_qspec = _spec(torch.int8, 5, 5)

    def input_range(nodes: dict[str, Node]) -> None:
        nodes["x"].meta[ANNOTATION_KEY] = QuantizationAnnotation(
            output_qspec=_spec(torch.int8, 0, 255), _annotated=True
        )

    def relu_unlabelled(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").output_qspec = act_spec()
        del nodes["relu"].meta[ANNOTATION_KEY]

    def weight_range(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").input_qspec_map[nodes["conv1_weight"]] = _spec(
            torch.int8, -127, 128, torch.per_channel_symmetric
        )

    def none_key(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d_1").input_qspec_map[nodes["x"]] = None

    def computed_weight(nodes: dict[str, Node]) -> None:
        _label(nodes, "conv2d").input_qspec_map[nodes["mul"]] = act_spec()

    def fused_output(name: str) -> Callable[[dict[str, Node]], None]:
        def spoil(nodes: dict[str, Node]) -> None:
            _label(nodes, name).output_qspec = act_spec()

        return spoil

    def claimed_wide(nodes: dict[str, Node]) -> None:
        _label(nodes, "linear").output_qspec = _spec(torch.int8, 0, 255)

    return {
        "channel_affine": verdict(ns, xnnpack_labelled("small_cnn", channel_affine), "conv2d"),
        "equal_range": verdict(ns, xnnpack_labelled("conv_relu", equal_range), "relu"),
        "input_range": verdict(ns, xnnpack_labelled("cat_pool", input_range), "x"),
        "relu_unlabelled": verdict(ns, xnnpack_labelled("conv_relu", relu_unlabelled), "conv2d"),
        "weight_range": verdict(ns, xnnpack_labelled("small_cnn", weight_range), "conv2d"),
        "none_key": verdict(ns, xnnpack_labelled("small_cnn", none_key), "conv2d_1"),
        "computed_weight": verdict(ns, xnnpack_labelled("computed_weight", computed_weight), "conv2d"),
        "relu_later": verdict(ns, xnnpack_labelled("relu_later", fused_output("conv2d")), "conv2d"),
        "renamed": verdict(ns, xnnpack_labelled("renamed", fused_output(RENAMED["conv2d"])), RENAMED["conv2d"]),
        "claimed_wide": verdict(ns, xnnpack_labelled("small_cnn", claimed_wide), "linear"),
    }


# --- where the chapter teaches it ----------------------------------------------------------------

BY_TARGET = Section("A. 依 `node.target` 找 op")
RULE_TABLE = Section("B. 一張規則表，一個 Quantizer")
RULES = Section("練習 1：RuleQuantizer（5 分）")
VALIDATE = Section("C. `validate()`：貼完先檢查")
CHECKS = Section("練習 2：CheckedRuleQuantizer（5 分）")
ROLES = Section("B. 三個角色的分工", notebook="M03-1")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
ADD_LABEL = Section("練習 1：add_label（4 分）", notebook="M03-1")
FUSION = Section("A. conv → relu：conv 和 relu 之間沒有量化點", notebook="M03-2")
USERS = Section("C. `node.args` 與 `node.users`：同一條邊的兩個方向", notebook="M01-1")


# --- names of ops in the chapter's models (exported names follow the aten op: conv2d, conv2d_1, ...) -------


def op_named(name: Any, op: str) -> bool:
    """``name`` is what export calls a node of ``op``: ``op`` itself or ``op_<n>``."""
    text = str(name)
    return text == op or (text.startswith(op + "_") and text[len(op) + 1 :].isdigit())


# --- RuleQuantizer: what the public cases can show ------------------------------------------------------


def rule_records(seen: Any, expected: Any) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """``(place, got, want)`` for each public model both evidences describe (labels, claimed, edges, shared)."""
    return [
        (place, got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "labels")
        if isinstance(got.get("labels"), dict) and isinstance(want.get("labels"), dict)
    ]


def _output_of(position: str) -> str | None:
    return position.removesuffix(" 的輸出") if position.endswith(" 的輸出") else None


def _edge_of(position: str) -> tuple[str, str] | None:
    producer, arrow, consumer = position.partition(" → ")
    return (producer, consumer) if arrow else None


def _label_changes(got: dict[str, Any], want: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The positions the key labels and the student does not, and the other way round."""
    return set(want["labels"]) - set(got["labels"]), set(got["labels"]) - set(want["labels"])


def _public_nothing(seen: Any, expected: Any) -> bool:
    records = rule_records(seen, expected)
    return bool(records) and all(not got["labels"] and want["labels"] for _, got, want in records)


def _public_crash_on_inputs(seen: Any, expected: Any) -> bool:
    return any(
        name == "IndexError"
        and case != "no_bias"
        and "tuple index" in diagnosis.error_message(seen, case)
        and "args[2]" not in diagnosis.error_message(seen, case)
        for case, name in diagnosis.errors(seen).items()
    )


def _record(seen: Any, expected: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(got, want)`` of the public model ``name`` (its path ends with it), None when either is absent."""
    for place, got, want in rule_records(seen, expected):
        if place and place[-1] == name:
            return got, want
    return None


def _public_renamed(seen: Any, expected: Any) -> bool:
    """Labels lost only where the nodes were renamed: small_cnn under its own names is labelled right."""
    renamed, plain = _record(seen, expected, "renamed"), _record(seen, expected, "small_cnn")
    if renamed is None or plain is None:
        return False
    lost, _ = _label_changes(*renamed)
    return bool(lost) and plain[0]["labels"] == plain[1]["labels"]


def _public_found_by_name(seen: Any, expected: Any) -> bool:
    return _public_crash_on_inputs(seen, expected) or _public_renamed(seen, expected)


def _public_look_alike(seen: Any, expected: Any) -> bool:
    """conv1d (whose target's name contains "conv") labelled, the renamed small_cnn labelled right."""
    look_alike, renamed = _record(seen, expected, "conv1d"), _record(seen, expected, "renamed")
    if look_alike is None or renamed is None or renamed[0]["labels"] != renamed[1]["labels"]:
        return False
    _, gained = _label_changes(*look_alike)
    return any("conv1d" in position for position in gained)


def _before(seen: Any, expected: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    got, want = diagnosis.value(seen, "labelled_before"), diagnosis.value(expected, "labelled_before")
    if isinstance(got, dict) and isinstance(want, dict):
        mine, key = got.get("labelled_before"), want.get("labelled_before")
        if isinstance(mine, dict) and isinstance(key, dict):
            return mine, key
    return {}, {}


def _public_overwrote(seen: Any, expected: Any) -> bool:
    """A position of the label another Quantizer claimed (per-tensor symmetric) carries another spec."""
    mine, key = _before(seen, expected)
    return any("per_tensor_symmetric" in str(spec) and mine.get(p) != spec for p, spec in key.items())


def _public_draft_kept(seen: Any, expected: Any) -> bool:
    """The unclaimed draft's spec (int8 [-100, 100]) is still on the graph after RuleQuantizer."""
    mine, key = _before(seen, expected)
    return any("[-100,100]" in str(spec) and key.get(p) != spec for p, spec in mine.items())


def _public_bias_crash(seen: Any, expected: Any) -> bool:
    """Only the linear without bias fails, with an IndexError: node.args[2] read where there is none."""
    return diagnosis.errors(seen) == {"no_bias": "IndexError"} and "tuple index" in diagnosis.error_message(
        seen, "no_bias"
    )


def _fused_in_key(want: dict[str, Any]) -> set[str]:
    """The convs the key labels (an input edge) without an output label: those fused with their relu."""
    convs = {edge[1] for edge in map(_edge_of, want["labels"]) if edge and op_named(edge[1], "conv2d")}
    return {conv for conv in convs if f"{conv} 的輸出" not in want["labels"]}


def _public_next_node(seen: Any, expected: Any) -> bool:
    """Some conv the key fuses has an output label of its own, while another is fused right."""
    apart = together = False
    for _, got, want in rule_records(seen, expected):
        for conv in _fused_in_key(want):
            if f"{conv} 的輸出" in got["labels"]:
                apart = True
            else:
                together = True
    return apart and together


def _public_fuses_shared(seen: Any, expected: Any) -> bool:
    """A conv with two consumers lost its output label to the relu that reads it."""
    for _, got, want in rule_records(seen, expected):
        lost, gained = _label_changes(got, want)
        if any(op_named(_output_of(p), "conv2d") for p in lost) and any(
            op_named(_output_of(p), "relu") for p in gained
        ):
            return True
    return False


def _public_constant_edge(seen: Any, expected: Any) -> bool:
    """An input edge of an add labelled that the key leaves alone (a model constant's)."""
    for _, got, want in rule_records(seen, expected):
        _, gained = _label_changes(got, want)
        if any((edge := _edge_of(p)) and op_named(edge[1], "add") for p in gained):
            return True
    return False


def _public_histogram(seen: Any, expected: Any) -> bool:
    return any(
        "HistogramObserver" in str(text) and "HistogramObserver" not in str(want["labels"].get(position))
        for _, got, want in rule_records(seen, expected)
        for position, text in got["labels"].items()
    )


def _public_moved_to_relu(seen: Any, expected: Any) -> bool:
    """A linear's output label moved to the relu after it."""
    for _, got, want in rule_records(seen, expected):
        lost, gained = _label_changes(got, want)
        if any(op_named(_output_of(p), "linear") for p in lost) and any(
            op_named(_output_of(p), "relu") for p in gained
        ):
            return True
    return False


def _public_conv_output(seen: Any, expected: Any) -> bool:
    """A conv the key fuses with its relu has an output label of its own."""
    for _, got, want in rule_records(seen, expected):
        _, gained = _label_changes(got, want)
        if any(op_named(_output_of(p), "conv2d") for p in gained):
            return True
    return False


def _public_edge_into_fused(seen: Any, expected: Any) -> bool:
    """An input edge labelled on a node whose key label is an output only (the relu of a fused pattern)."""
    for _, got, want in rule_records(seen, expected):
        _, gained = _label_changes(got, want)
        consumers_in_key = {edge[1] for edge in map(_edge_of, want["labels"]) if edge}
        for position in gained:
            edge = _edge_of(position)
            if edge and edge[1] not in consumers_in_key and f"{edge[1]} 的輸出" in want["labels"]:
                return True
    return False


def _public_relu_unclaimed(seen: Any, expected: Any) -> bool:
    for _, got, want in rule_records(seen, expected):
        unclaimed = set(want.get("claimed") or []) - set(got.get("claimed") or [])
        if got["labels"] == want["labels"] and any(op_named(n, "relu") for n in unclaimed):
            return True
    return False


def _weights(seen: Any, expected: Any, test: Any) -> bool:
    return any(
        test(str(got["labels"].get(position, "")), str(text))
        for _, got, want in rule_records(seen, expected)
        for position, text in want["labels"].items()
        if "per_channel" in str(text)
    )


def _public_per_tensor(seen: Any, expected: Any) -> bool:
    return _weights(seen, expected, lambda mine, key: "per_tensor" in mine)


def _public_axis(seen: Any, expected: Any) -> bool:
    return _weights(seen, expected, lambda mine, key: "per_channel" in mine and "ch_axis=0" not in mine)


def _public_bias(seen: Any, expected: Any) -> bool:
    for _, got, want in rule_records(seen, expected):
        _, gained = _label_changes(got, want)
        if any((edge := _edge_of(p)) and "bias" in edge[0] for p in gained):
            return True
    return False


def _public_add_output(seen: Any, expected: Any) -> bool:
    """Only output labels of adds are missing (nothing extra, every other label there)."""
    found = False
    for _, got, want in rule_records(seen, expected):
        lost, gained = _label_changes(got, want)
        if gained or not all(op_named(_output_of(p), "add") for p in lost):
            return False
        found = found or bool(lost)
    return found


def _public_pool_apart(seen: Any, expected: Any) -> bool:
    """Labels in the same places, but a group of edges the key's observer instance serves is not shared."""
    for _, got, want in rule_records(seen, expected):
        mine, key = got.get("shared"), want.get("shared")
        if set(got["labels"]) == set(want["labels"]) and isinstance(mine, list) and isinstance(key, list):
            if any(group not in mine and any("max_pool2d" in edge for edge in group) for group in key):
                return True
    return False


# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own ----------------

_CONV2D = torch.ops.aten.conv2d.default
_RELU = torch.ops.aten.relu.default


class _ConvLookalikes(nn.Module):
    """An input called conv2d, a conv_transpose2d, and a real conv2d (the check renames it linear_7)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(2, 2, 2)
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, conv2d: torch.Tensor) -> torch.Tensor:
        return self.conv(self.up(conv2d))


def _check_is_conv(is_conv: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_ConvLookalikes().eval(), (torch.ones(1, 2, 3, 3),))
    real = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target == _CONV2D)
    real.name = "linear_7"
    problems = []
    for node in gm.graph.nodes:
        want = node is real
        got = is_conv(node)
        if bool(got) is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={node.target}）：應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_CONV = Practice(
    "is_conv",
    "寫 is_conv(node)：node 是不是一個 conv2d（torch.ops.aten.conv2d.default）？看 node 做什麼，不看它叫什麼名字。"
    "檢查用的圖裡有一個名叫 conv2d 的模型輸入、一個 conv_transpose2d，和一個被 pass 改名成 linear_7 的真正的 conv2d。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\ndef is_conv(node):\n    raise NotImplementedError()\n",
    _check_is_conv,
    'node 做什麼寫在兩個屬性：node.op（"call_function" 才是呼叫一個 op）和 node.target（是哪一個 op 的物件）。'
    "target 要和 CONV 直接比相等，不要轉成字串找子字串。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\n"
    "def is_conv(node):\n"
    '    return node.op == "call_function" and node.target == CONV\n',
    '名字與字串都會騙人："conv" in str(node.target) 也比對到 conv_transpose2d；source_fn_stack 在預設的 export 裡是空的。',
)


class _FourConvs(nn.Module):
    """Four convs on x: one right before its relu, one whose relu comes later, one followed in graph order by a relu
    of x, one whose output goes to a relu and out of the model."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)
        self.third, self.fourth = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.relu(self.first(x))
        b = self.second(x)
        s = torch.sigmoid(x)
        b = torch.relu(b)
        c = self.third(x)
        r = torch.relu(x)
        d = self.fourth(x)
        return a + b + s + c + r + torch.relu(d), d


_FOUR_CONVS = (
    "conv → relu，緊鄰",
    "conv → relu，中間隔著別的 node",
    "conv → add，圖上緊接著的是 relu(x)",
    "conv → relu，conv 的輸出也是模型的輸出",
)


def _fuses(conv: Node) -> bool:
    users = list(conv.users)
    return len(users) == 1 and users[0].op == "call_function" and users[0].target == _RELU


def _check_fuses_with_relu(fuses_with_relu: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_FourConvs().eval(), (torch.ones(1, 2, 3, 3),))
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == _CONV2D]
    problems = []
    for title, conv in zip(_FOUR_CONVS, convs, strict=True):
        want, got = _fuses(conv), fuses_with_relu(conv)
        if bool(got) is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


FUSES_WITH_RELU = Practice(
    "fuses_with_relu",
    "寫 fuses_with_relu(conv)：conv 是圖上的一個 conv2d node，它和 relu 融合嗎？只有 conv 唯一的 consumer 是 relu 時才融合。"
    "檢查用一張有四個 conv 的小圖：緊鄰的 conv → relu、中間隔著別的 node 的 conv → relu、後面緊接著一個不相干 relu 的 conv，"
    "和輸出同時給 relu 與模型輸出的 conv。",
    "import torch\n\nRELU = torch.ops.aten.relu.default\n\n\ndef fuses_with_relu(conv):\n    raise NotImplementedError()\n",
    _check_fuses_with_relu,
    "誰讀 conv 的輸出，寫在 conv.users（一個 dict，key 是 consumer）；conv.next 只是圖上排在後面的 node。"
    "先看 users 是不是只有一個，再看那一個的 target 是不是 RELU。",
    "import torch\n\nRELU = torch.ops.aten.relu.default\n\n\n"
    "def fuses_with_relu(conv):\n"
    "    users = list(conv.users)\n"
    '    return len(users) == 1 and users[0].op == "call_function" and users[0].target == RELU\n',
    "模型的輸出（output node）也是 consumer：conv 的值要完整交出去，中間就不能不量化。",
)


class _Projection(nn.Module):
    """A conv with a bias into a linear without one."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 1)
        self.proj = nn.Linear(3, 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.conv(x).mean((2, 3)))


def _spec_text(spec: Any) -> str:
    if spec is None:
        return "None"
    if not isinstance(spec, QuantizationSpec):
        return type(spec).__name__
    observer = getattr(spec.observer_or_fake_quant_ctr, "__name__", type(spec.observer_or_fake_quant_ctr).__name__)
    axis = f" ch_axis={spec.ch_axis}" if spec.qscheme in (torch.per_channel_symmetric, torch.per_channel_affine) else ""
    return f"{spec.dtype} [{spec.quant_min},{spec.quant_max}] {spec.qscheme}{axis} {observer}"


def _check_weighted_inputs(weighted_inputs: Any) -> list[str]:
    from common.pt2e import export_module
    from common.qspecs import weight_spec

    gm = export_module(_Projection().eval(), (torch.ones(1, 2, 3, 3),))
    problems = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in (_CONV2D, torch.ops.aten.linear.default):
            continue
        want = {node.args[0].name: _spec_text(act_spec()), node.args[1].name: _spec_text(weight_spec())}
        if len(node.args) > 2 and isinstance(node.args[2], Node):
            want[node.args[2].name] = "None"
        got = weighted_inputs(node)
        if not isinstance(got, dict):
            problems.append(f"{node.name}：應該回傳一個 dict，你的是 {type(got).__name__}")
            continue
        mine = {getattr(key, "name", repr(key)): _spec_text(spec) for key, spec in got.items()}
        for name in sorted(set(want) | set(mine)):
            if name not in mine:
                problems.append(f"{node.name} 的輸入 {name}：應該有 {want[name]}，你的 dict 裡沒有它")
            elif name not in want:
                problems.append(f"{node.name}：{name} 不是它的輸入，你的 dict 裡卻有它")
            elif mine[name] != want[name]:
                problems.append(f"{node.name} 的輸入 {name}：應該是 {want[name]}，你的是 {mine[name]}")
    return problems


WEIGHTED_INPUTS = Practice(
    "weighted_inputs",
    "寫 weighted_inputs(node)：node 是 conv 或 linear，照規則表回傳它的 input_qspec_map（一個 dict）："
    "activation 輸入 act_spec()、weight weight_spec()、有 bias 時 bias 對到 None。"
    "檢查用一個有 bias 的 conv 和一個 bias=False 的 linear。",
    "from torch.fx import Node\n"
    "from common.qspecs import act_spec, weight_spec\n\n\n"
    "def weighted_inputs(node):\n"
    "    raise NotImplementedError()\n",
    _check_weighted_inputs,
    "conv 與 linear 的引數順序是 (輸入, weight, bias)：args[0] 是 activation、args[1] 是 weight；"
    "args[2] 不一定存在（bias=False 的 linear 只有兩個引數），先看 len(node.args) > 2 而且它是 Node。",
    "from torch.fx import Node\n"
    "from common.qspecs import act_spec, weight_spec\n\n\n"
    "def weighted_inputs(node):\n"
    "    found = {node.args[0]: act_spec(), node.args[1]: weight_spec()}\n"
    "    if len(node.args) > 2 and isinstance(node.args[2], Node):\n"
    "        found[node.args[2]] = None\n"
    "    return found\n",
    "weight_spec() 是 per-channel symmetric、ch_axis=0（每個 output channel 一個 scale）；bias 保持 fp32，規格是 None。",
)


_LINEAR = torch.ops.aten.linear.default
_ADD = torch.ops.aten.add.Tensor
_MAX_POOL = torch.ops.aten.max_pool2d.default
_SIGMOID = torch.ops.aten.sigmoid.default


def _x_relu() -> tuple[Node, Node]:
    """x → relu on a graph of its own."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(_RELU, (x,), name="relu")
    graph.output(relu)
    return x, relu


def _check_label_if_unclaimed(label_if_unclaimed: Any) -> list[str]:
    spec, old = act_spec(), _spec(torch.int8, -100, 100)
    problems = []
    for title, claimed in (
        ("沒有標籤的 relu", None),
        ("relu 有一張沒人認領的草稿（_annotated=False，輸出 int8 [-100, 100]）", False),
        ("relu 有別的 Quantizer 認領的標籤（_annotated=True，輸出 int8 [-100, 100]）", True),
    ):
        x, relu = _x_relu()
        if claimed is not None:
            relu.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={x: old}, output_qspec=old, _annotated=claimed
            )
        before = relu.meta.get(ANNOTATION_KEY)
        label_if_unclaimed(relu, spec)
        after = relu.meta.get(ANNOTATION_KEY)
        if claimed:
            if after is not before or after.output_qspec is not old or after._annotated is not True:
                problems.append(f"{title}：那是別人負責的 node，標籤一個欄位都不該動，你的改了它")
            continue
        if after is None or after.output_qspec != spec:
            mine = "沒有標籤" if after is None else _spec_text(after.output_qspec)
            problems.append(f"{title}：output_qspec 應該是傳進來的 spec（{_spec_text(spec)}），你的是 {mine}")
        if after is not None and after._annotated is not True:
            problems.append(
                f"{title}：貼完要設 _annotated = True，後面的 Quantizer 才知道它有人負責了；你的是 {after._annotated!r}"
            )
    return problems


LABEL_IF_UNCLAIMED = Practice(
    "label_if_unclaimed",
    "寫 label_if_unclaimed(node, spec)：替 node 貼輸出標籤，並認領它。別的 Quantizer 認領過（標籤的 _annotated 是 True）就什麼都不動；"
    "沒有標籤、或只是沒人認領的草稿（_annotated 是 False），就把 output_qspec 設成 spec、_annotated 設成 True。"
    "檢查用三個 relu：沒有標籤的、有草稿的、別人認領過的。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_if_unclaimed(node, spec):\n"
    "    raise NotImplementedError()\n",
    _check_label_if_unclaimed,
    "要不要跳過，只看 _annotated：先 node.meta.get(ANNOTATION_KEY)，是 None（沒有標籤）或 _annotated 是 False 都輪到你；"
    "貼好 output_qspec 之後，別忘了把 _annotated 設成 True。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation\n\n\n"
    "def label_if_unclaimed(node, spec):\n"
    "    annotation = node.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())\n"
    "    if annotation._annotated:\n"
    "        return\n"
    "    annotation.output_qspec = spec\n"
    "    annotation._annotated = True\n",
    "有標籤不等於有人負責：草稿要重貼；每個你貼過的 node（融合進來的 relu 也是）都設 _annotated = True。",
)


def _check_is_act_spec(is_act_spec: Any) -> list[str]:
    from common.pt2e import HistogramObserver, MovingAverageMinMaxObserver

    def spec(dtype: torch.dtype, low: int, high: int, scheme: torch.qscheme, observer: Any) -> QuantizationSpec:
        return QuantizationSpec(
            dtype=dtype, quant_min=low, quant_max=high, qscheme=scheme, observer_or_fake_quant_ctr=observer
        )

    affine = torch.per_tensor_affine
    problems = []
    for title, candidate, want in (
        ("act_spec() 本身", act_spec(), True),
        ("另外建的一份，欄位都和 act_spec() 一樣", spec(torch.int8, -128, 127, affine, MinMaxObserver), True),
        ("範圍一樣，observer 是 HistogramObserver", spec(torch.int8, -128, 127, affine, HistogramObserver), False),
        (
            "範圍一樣，observer 是 MovingAverageMinMaxObserver",
            spec(torch.int8, -128, 127, affine, MovingAverageMinMaxObserver),
            False,
        ),
        (
            "observer 一樣，範圍是 int8 [-127, 127] symmetric",
            spec(torch.int8, -127, 127, torch.per_tensor_symmetric, MinMaxObserver),
            False,
        ),
        ("observer 一樣，範圍是 uint8 [0, 255]", spec(torch.uint8, 0, 255, affine, MinMaxObserver), False),
    ):
        got = is_act_spec(candidate)
        if bool(got) is not want:
            problems.append(f"{title}（{_spec_text(candidate)}）：應該回傳 {want}，你的是 {got!r}")
    return problems


IS_ACT_SPEC = Practice(
    "is_act_spec",
    "寫 is_act_spec(spec)：spec 是不是規則表的 activation 規格 act_spec()？dtype、quant_min、quant_max、qscheme "
    "和 observer（observer_or_fake_quant_ctr）都一樣才算。回傳 True 或 False。"
    "檢查用六份規格：範圍一樣、observer 不同的，observer 一樣、範圍不同的，和兩份真正一樣的。",
    "from common.qspecs import act_spec\n\n\ndef is_act_spec(spec):\n    raise NotImplementedError()\n",
    _check_is_act_spec,
    "observer 也是規格的一個欄位：spec.observer_or_fake_quant_ctr 是 observer 的類別，要和 act_spec() 的那個相等。"
    "QuantizationSpec 是 dataclass，== 會一次比完所有欄位。",
    "from common.qspecs import act_spec\n\n\ndef is_act_spec(spec):\n    return spec == act_spec()\n",
    "整數範圍一樣，observer 不同，scale 就不同：HistogramObserver 會裁掉離群值，MovingAverage 只慢慢跟上新的範圍。",
)


def _owner_graph() -> dict[str, Node]:
    """conv → relu; linear → relu; conv → sigmoid; conv → relu and add (two consumers)."""
    graph = torch.fx.Graph()
    x, w, v = graph.placeholder("x"), graph.get_attr("w"), graph.get_attr("v")
    conv = graph.call_function(_CONV2D, (x, w), name="conv2d")
    linear = graph.call_function(_LINEAR, (x, v), name="linear")
    conv_sigmoid = graph.call_function(_CONV2D, (x, w), name="conv2d_1")
    conv_shared = graph.call_function(_CONV2D, (x, w), name="conv2d_2")
    relu_of_conv = graph.call_function(_RELU, (conv,), name="relu")
    relu_of_linear = graph.call_function(_RELU, (linear,), name="relu_1")
    sigmoid = graph.call_function(_SIGMOID, (conv_sigmoid,), name="sigmoid")
    relu_of_shared = graph.call_function(_RELU, (conv_shared,), name="relu_2")
    add = graph.call_function(_ADD, (conv_shared, relu_of_shared), name="add")
    graph.output((relu_of_conv, relu_of_linear, sigmoid, add))
    return {
        "conv": conv,
        "relu_of_conv": relu_of_conv,
        "linear": linear,
        "conv_sigmoid": conv_sigmoid,
        "conv_shared": conv_shared,
    }


def _check_output_owner(output_owner: Any) -> list[str]:
    nodes = _owner_graph()
    problems = []
    for title, node, want in (
        ("conv，唯一的 consumer 是 relu", nodes["conv"], nodes["relu_of_conv"]),
        ("linear，唯一的 consumer 是 relu", nodes["linear"], nodes["linear"]),
        ("conv，唯一的 consumer 是 sigmoid", nodes["conv_sigmoid"], nodes["conv_sigmoid"]),
        ("conv，consumer 是 relu 與 add", nodes["conv_shared"], nodes["conv_shared"]),
    ):
        got = output_owner(node)
        if got is not want:
            mine = f"{got.name}（op {got.target}）" if isinstance(got, Node) else repr(got)
            problems.append(f"{title}（{node.name}）：輸出標籤應該在 {want.name}（op {want.target}），你的是 {mine}")
    return problems


OUTPUT_OWNER = Practice(
    "output_owner",
    "寫 output_owner(node)：node 是 conv 或 linear，照這一章的規則表，回傳該貼輸出標籤的那個 node："
    "conv 唯一的 consumer 是 relu 時是那個 relu（融合），其他情況都是 node 自己。"
    "檢查用 conv → relu、linear → relu、conv → sigmoid，和一個同時給 relu 與 add 讀的 conv。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\nRELU = torch.ops.aten.relu.default\n\n\n"
    "def output_owner(node):\n"
    "    raise NotImplementedError()\n",
    _check_output_owner,
    "融合有三個條件，缺一個就是 node 自己：node.target 是 CONV（linear 不算）、node.users 只有一個、那一個的 target 是 RELU。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\nRELU = torch.ops.aten.relu.default\n\n\n"
    "def output_owner(node):\n"
    "    readers = list(node.users)\n"
    "    if node.target == CONV and len(readers) == 1 and readers[0].target == RELU:\n"
    "        return readers[0]\n"
    "    return node\n",
    "XNNPACKQuantizer 也融合 linear → relu，這一章的規則表沒有：照你要實作的規則表，不照別的 Quantizer 的習慣。",
)


def _check_breaks_fusion(breaks_fusion: Any) -> list[str]:
    from common.qspecs import weight_spec

    problems = []
    for title, conv_output, relu_label, want in (
        ("conv 只有輸入邊的標籤，relu 只有輸出標籤", False, {"output": True}, False),
        ("conv 也有輸出標籤，relu 有輸出標籤", True, {"output": True}, True),
        ("conv 沒有輸出標籤，relu 的標籤有 (conv, relu) 這條邊", False, {"edge": act_spec(), "output": True}, True),
        ("conv 沒有輸出標籤，relu 的標籤有 (conv, relu)，規格是 None", False, {"edge": None, "output": True}, False),
        ("conv 有輸出標籤，relu 沒有標籤", True, None, True),
    ):
        graph = torch.fx.Graph()
        x, w = graph.placeholder("x"), graph.get_attr("w")
        conv = graph.call_function(_CONV2D, (x, w), name="conv2d")
        relu = graph.call_function(_RELU, (conv,), name="relu")
        graph.output(relu)
        conv.meta[ANNOTATION_KEY] = QuantizationAnnotation(
            input_qspec_map={x: act_spec(), w: weight_spec()},
            output_qspec=act_spec() if conv_output else None,
            _annotated=True,
        )
        if relu_label is not None:
            relu.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={conv: relu_label["edge"]} if "edge" in relu_label else {},
                output_qspec=act_spec(),
                _annotated=True,
            )
        got = breaks_fusion(conv)
        if bool(got) is not want:
            why = "conv 和 relu 之間會有 observer" if want else "conv 和 relu 之間沒有 observer"
            problems.append(f"{title}：{why}，應該回傳 {want}，你的是 {got!r}")
    return problems


BREAKS_FUSION = Practice(
    "breaks_fusion",
    "寫 breaks_fusion(conv)：conv 唯一的 consumer 是 relu。照圖上的標籤，prepare_pt2e 會不會在 conv 和 relu 之間插 observer"
    "（融合被破壞）？回傳 True 或 False。檢查用五種貼法：conv 的輸出標籤、relu 的輸入邊 (conv, relu)、兩者都沒有，"
    "還有 relu 根本沒有標籤的。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef breaks_fusion(conv):\n    raise NotImplementedError()\n",
    _check_breaks_fusion,
    "中間那個位置可以從兩頭貼：conv 的 output_qspec，或 relu 的 input_qspec_map[conv]。兩個都要查，規格不是 None 就有 observer；"
    "哪一張標籤不存在（meta.get 拿到 None），就只是那一頭沒有。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def breaks_fusion(conv):\n"
    "    relu = next(iter(conv.users))\n"
    "    conv_label = conv.meta.get(ANNOTATION_KEY)\n"
    "    relu_label = relu.meta.get(ANNOTATION_KEY)\n"
    "    if conv_label is not None and conv_label.output_qspec is not None:\n"
    "        return True\n"
    "    return relu_label is not None and relu_label.input_qspec_map.get(conv) is not None\n",
    "融合在標籤上的樣子是「中間什麼都不貼」：輸出標籤只在 relu，relu 也不標輸入邊；conv 的輸出標籤不管 relu 有沒有標籤都會破壞它。",
)


def _check_is_activation(is_activation: Any) -> list[str]:
    graph = torch.fx.Graph()
    x, offset = graph.placeholder("x"), graph.get_attr("offset")
    relu = graph.call_function(_RELU, (x,), name="relu")
    add = graph.call_function(_ADD, (offset, relu), name="add")
    graph.output(graph.call_function(_ADD, (add, 2.0), name="add_1"))
    problems = []
    for title, arg, want in (
        ("模型輸入 x（placeholder）", x, True),
        ("relu 的輸出（call_function）", relu, True),
        ("模型常數 offset（get_attr，一個 buffer）", offset, False),
        ("純量 2.0", 2.0, False),
    ):
        got = is_activation(arg)
        if bool(got) is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


IS_ACTIVATION = Practice(
    "is_activation",
    "寫 is_activation(arg)：arg 是 add 的一個引數（node.args 裡的東西），它是不是要貼標籤的 activation？"
    "回傳 True 或 False。檢查用 offset + relu(x) 與 add + 2.0 的引數：模型輸入、relu 的輸出、模型常數 offset 和純量。",
    "from torch.fx import Node\n\n\ndef is_activation(arg):\n    raise NotImplementedError()\n",
    _check_is_activation,
    '兩關：先 isinstance(arg, Node)（純量不是 Node）；再看 arg.op，"get_attr" 是模型裡的常數（buffer、parameter），不是算出來的值。',
    "from torch.fx import Node\n\n\n"
    "def is_activation(arg):\n"
    '    return isinstance(arg, Node) and arg.op != "get_attr"\n',
    "常數不管名字叫什麼、排在第幾個引數，都不是 activation：它的值是固定的，不需要 observer 去看它的範圍。",
)


def _check_output_spec_for(output_spec_for: Any) -> list[str]:
    from common.pt2e import SharedQuantizationSpec

    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    add = graph.call_function(_ADD, (x, y), name="add")
    pool = graph.call_function(_MAX_POOL, (x, [2, 2]), name="max_pool2d")
    sigmoid = graph.call_function(_SIGMOID, (x,), name="sigmoid")
    graph.output((add, pool, sigmoid))
    problems = []

    got = output_spec_for(add)
    if isinstance(got, SharedQuantizationSpec):
        problems.append("add(x, y)：加出來的是新的值，範圍和任何一個輸入都不同，不能和輸入共用：要自己的 act_spec()")
    elif got is None:
        problems.append(
            "add(x, y)：輸入量化了，輸出還是新的值，沒有輸出標籤，讀它的 op 拿到的就是沒量化的值：要 act_spec()"
        )
    elif got != act_spec():
        problems.append(f"add(x, y)：應該是 act_spec()，你的是 {_spec_text(got)}")

    got = output_spec_for(pool)
    if not isinstance(got, SharedQuantizationSpec):
        mine = "None" if got is None else _spec_text(got)
        problems.append(
            f"max_pool2d：輸出的每個值都來自輸入，要和輸入邊共用 qparams：SharedQuantizationSpec((x, max_pool2d))，你的是 {mine}"
        )
    elif got.edge_or_node != (x, pool):
        there = got.edge_or_node
        shown = tuple(n.name for n in there) if isinstance(there, tuple) else getattr(there, "name", there)
        problems.append(f"max_pool2d：應該共用輸入邊 (x, max_pool2d)，你的指向 {shown}")

    got = output_spec_for(sigmoid)
    if got is not None:
        problems.append(f"sigmoid：不在規則表裡，應該回傳 None，你的是 {_spec_text(got)}")
    return problems


OUTPUT_SPEC_FOR = Practice(
    "output_spec_for",
    "寫 output_spec_for(node)：照規則表，回傳 node 輸出標籤的規格：add 是 act_spec()；max_pool2d 和它的輸入邊共用，"
    "SharedQuantizationSpec((node.args[0], node))；不在表裡的 op 回傳 None。檢查用 add(x, y)、max_pool2d(x) 與 sigmoid(x)。",
    "import torch\n"
    "from common.pt2e import SharedQuantizationSpec\n"
    "from common.qspecs import act_spec\n\n"
    "ADD = torch.ops.aten.add.Tensor\n"
    "MAX_POOL = torch.ops.aten.max_pool2d.default\n\n\n"
    "def output_spec_for(node):\n"
    "    raise NotImplementedError()\n",
    _check_output_spec_for,
    "問一件事：這個 op 的輸出是新算出來的值，還是從輸入裡挑出來的？新算的（add）要自己的 act_spec()；"
    "只挑不算的（max_pool2d）和輸入邊 (node.args[0], node) 共用。",
    "import torch\n"
    "from common.pt2e import SharedQuantizationSpec\n"
    "from common.qspecs import act_spec\n\n"
    "ADD = torch.ops.aten.add.Tensor\n"
    "MAX_POOL = torch.ops.aten.max_pool2d.default\n\n\n"
    "def output_spec_for(node):\n"
    "    if node.target == ADD:\n"
    "        return act_spec()\n"
    "    if node.target == MAX_POOL:\n"
    "        return SharedQuantizationSpec((node.args[0], node))\n"
    "    return None\n",
    "共用之後 max_pool2d 的輸入與輸出是同一個 observer 實例，convert 之後不必 rescale；add 若共用，相加的結果就可能超出範圍。",
)


RULE_MISCONCEPTIONS = (
    Misconception(
        "source_fn_stack",
        "靠 source_fn_stack 這類 metadata 找 op",
        "預設的 non-strict export 不填 node.meta 裡的 source_fn_stack，依賴它找 op 的程式什麼都找不到，也不會出錯，"
        '結果一張標籤都沒貼。規則式 Quantizer 只用 node.op == "call_function" 與 node.target 找 op。',
        BY_TARGET,
        public=_public_nothing,
        practice=IS_CONV,
    ),
    Misconception(
        "found_by_name",
        "用 node 的名字找 op",
        "node.name 只是 export 取的標記：模型輸入可以叫 relu、conv2d，pass 也可能把名字換掉，"
        "名叫 linear_90 的 node 其實是 conv。用名字認 op，換個模型就貼錯地方（模型輸入沒有 node.args，直接讀也會出錯）。"
        '要用 node.op == "call_function" 而且 node.target == CONV 這樣比對。',
        BY_TARGET,
        public=_public_found_by_name,
        practice=IS_CONV,
    ),
    Misconception(
        "target_substring",
        "用字串比對 target，連名字相近的 op 也算",
        '"conv" in str(node.target) 也會比對到 conv_transpose2d，"relu" 會比對到 relu6、leaky_relu，'
        '"add" 會比對到 addmm，"max_pool2d" 會比對到 max_pool2d_with_indices：它們都不是規則表裡的 op。'
        "要拿 node.target 和 torch.ops.aten.conv2d.default 這些物件直接比相等。",
        BY_TARGET,
        public=_public_look_alike,
        practice=IS_CONV,
    ),
    Misconception(
        "overwrites_claimed",
        "別的 Quantizer 認領過的 node 又被你改寫",
        "_annotated 為 True 表示這個 node 已經有 Quantizer 負責，標籤是它的。你的程式照樣重貼，覆蓋了別人的決定。"
        "先看 node.meta 裡的標籤，_annotated 是 True 就跳過。",
        RULES,
        public=_public_overwrote,
        practice=LABEL_IF_UNCLAIMED,
    ),
    Misconception(
        "skips_unclaimed_label",
        "有標籤就跳過，不看 _annotated",
        "有標籤不代表有人認領：_annotated 為 False 的標籤是沒人負責的草稿，照規則重貼、再設 _annotated = True 才對。"
        "要跳過的只有 _annotated 是 True 的 node。",
        RULES,
        public=_public_draft_kept,
        practice=LABEL_IF_UNCLAIMED,
    ),
    Misconception(
        "other_observer",
        "observer 換成了別的類別",
        "規格裡的 observer 類別也是規則的一部分：規則表的 activation 用 act_spec()，也就是 MinMaxObserver。"
        "換成別的 observer（例如照抄 XNNPACK 設定的 HistogramObserver），整數範圍一樣，算出來的 scale 卻不同；直接用 act_spec() 與 weight_spec()。",
        RULE_TABLE,
        public=_public_histogram,
        practice=IS_ACT_SPEC,
    ),
    Misconception(
        "fusion_by_next_node",
        "用圖上的下一個 node 判斷 conv 後面是不是 relu",
        "node.next 只是圖上排在後面的 node，不一定讀 conv 的輸出：relu 可能隔了好幾個 node，"
        "緊接在 conv 後面的 relu 也可能讀的是別的值。融合要看 node.users：conv 唯一的 consumer 是 relu 才融合。",
        USERS,
        public=_public_next_node,
        practice=FUSES_WITH_RELU,
    ),
    Misconception(
        "fuses_shared_conv",
        "conv 有兩個 consumer 時也融合",
        "conv 的輸出沒有標籤、只把標籤貼在 relu 上，另一個 consumer 讀到的就是沒量化的 conv 輸出。"
        "只有 conv 唯一的 consumer 是 relu 時才融合；有兩個以上 consumer，conv 自己貼輸出標籤。",
        EDGE_AND_OUTPUT,
        public=_public_fuses_shared,
        practice=FUSES_WITH_RELU,
    ),
    Misconception(
        "linear_fuses_relu",
        "linear 也和後面的 relu 融合",
        "XNNPACKQuantizer 會融合 linear → relu，但這一章的規則表只有 conv 融合：linear 的輸出標籤貼在 linear 自己身上，"
        "後面的 relu 不標。照規則表寫，不要照 XNNPACK 的習慣。",
        RULE_TABLE,
        public=_public_moved_to_relu,
        practice=OUTPUT_OWNER,
    ),
    Misconception(
        "no_fusion",
        "conv 接 relu 時 conv 也貼了輸出標籤",
        "融合在標籤上的樣子就是「pattern 中間不貼標籤」：conv 唯一的 consumer 是 relu 時，輸出標籤只貼在 relu，"
        "conv 自己不貼。你讓 conv 也有輸出標籤，conv 和 relu 之間就多了一個 observer，後端不能把兩個 op 合成一個 kernel。",
        FUSION,
        public=_public_conv_output,
        practice=BREAKS_FUSION,
    ),
    Misconception(
        "label_inside_pattern",
        "融合的 relu 的輸入邊也貼了標籤",
        "conv → relu 融合時，中間那條邊 (conv, relu) 不能有標籤：貼了，prepare_pt2e 就在中間插 observer，融合就破了。"
        "relu 只要輸出標籤。",
        FUSION,
        public=_public_edge_into_fused,
        practice=BREAKS_FUSION,
    ),
    Misconception(
        "relu_not_marked",
        "融合進來的 relu 沒有設 _annotated",
        "relu 的輸出標籤是你貼的，relu 也算你標過的 node：沒設 _annotated = True，後面的 Quantizer 會以為 relu 沒人管，"
        "重貼它的標籤，在 conv 和 relu 中間插 observer。貼完 relu 的輸出標籤，也把它的 _annotated 設成 True。",
        RULES,
        public=_public_relu_unclaimed,
        practice=LABEL_IF_UNCLAIMED,
    ),
    Misconception(
        "per_tensor_weight",
        "weight 用了 per-tensor 規格",
        "規則表的 weight 是 weight_spec()：int8 per-channel symmetric，每個 output channel 各有一個 scale。"
        "per-tensor 只用一個 scale，數值範圍小的 channel 解析度就被大的 channel 拖垮。weight 要用 weight_spec()。",
        RULE_TABLE,
        public=_public_per_tensor,
        practice=WEIGHTED_INPUTS,
    ),
    Misconception(
        "weight_axis_1",
        "per-channel 的 ch_axis 寫成 1",
        "conv 與 linear 的 weight 第 0 維是 output channel，per-channel 要沿著它（ch_axis=0）各算一個 scale；"
        "ch_axis=1 是 input channel，scale 分錯了維度。直接用 weight_spec()，它的 ch_axis 是 0。",
        FUSION,
        public=_public_axis,
        practice=WEIGHTED_INPUTS,
    ),
    Misconception(
        "bias_assumed",
        "以為 conv、linear 一定有 bias",
        "nn.Linear(..., bias=False) export 出來是 linear(x, weight)，根本沒有 node.args[2]；沒有 bias 的 conv 也可能只有兩個引數。"
        "直接讀 node.args[2]，遇到沒有 bias 的模型就出錯。先確認 len(node.args) > 2 而且 node.args[2] 是 Node，才替 bias 設 None。",
        RULES,
        public=_public_bias_crash,
        practice=WEIGHTED_INPUTS,
    ),
    Misconception(
        "quantizes_bias",
        "bias 也貼了量化規格",
        "規則表的 bias 規格是 None：bias 保持 fp32，不插 observer。你給 bias 一份 int8 規格，它就被量化了。"
        "node.args[2] 是 Node 時，把它的規格設成 None。",
        RULE_TABLE,
        public=_public_bias,
        practice=WEIGHTED_INPUTS,
    ),
    Misconception(
        "add_labels_constants",
        "add 的模型常數也貼了標籤",
        'op == "get_attr" 的 node 是模型常數（buffer），不是 activation；add 只標 activation 輸入，常數排第一個或第二個都一樣。'
        "過濾 node.args[:2] 時，除了純量，也要排除 get_attr。",
        RULES,
        public=_public_constant_edge,
        practice=IS_ACTIVATION,
    ),
    Misconception(
        "add_no_output",
        "add 只標了輸入，忘了輸出",
        "規則表的 add 輸入與輸出都要標：add 的結果是新的數值範圍，沒有輸出標籤，後面的 op 讀到的就是沒量化的值。"
        "add 的輸出也貼 act_spec()。",
        RULE_TABLE,
        public=_public_add_output,
        practice=OUTPUT_SPEC_FOR,
    ),
    Misconception(
        "pool_not_shared",
        "max_pool2d 的輸出沒有和輸入共用",
        "max_pool 只是從輸入裡挑最大值，輸出的數值全部來自輸入，所以輸出要和輸入共用同一組 qparams："
        "output_qspec 寫 SharedQuantizationSpec((輸入, max_pool2d))。你另給一份 act_spec()，輸出就有自己的 observer 和 scale。",
        RULE_TABLE,
        public=_public_pool_apart,
        practice=OUTPUT_SPEC_FOR,
    ),
)


# --- validate: what the public cases can show -------------------------------------------------------------


def _verdicts(seen: Any, case: str) -> dict[str, str]:
    found = diagnosis.value(seen, case)
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _spoiled(seen: Any, expected: Any) -> list[tuple[str, str]]:
    """``(mine, key)`` for each spoiled graph."""
    mine, key = _verdicts(seen, "spoiled"), _verdicts(expected, "spoiled")
    return [(mine[name], verdict) for name, verdict in key.items() if name in mine]


def _rejected_correct(seen: Any, expected: Any) -> list[str]:
    """The correctly labelled graphs the student's validate raised on."""
    key = _verdicts(expected, "correct")
    return [name for name, verdict in _verdicts(seen, "correct").items() if verdict != key.get(name)]


def _public_wrong_error(seen: Any, expected: Any) -> bool:
    return any(
        mine not in ("沒有出錯", "AttributeError", "TypeError", "KeyError", "IndexError")
        and not mine.startswith("ValueError")
        for mine, _ in _spoiled(seen, expected)
    )


def _public_reads_every_spec(seen: Any, expected: Any) -> bool:
    return any(_verdicts(seen, "correct").get(name) == "AttributeError" for name in _rejected_correct(seen, expected))


def _public_checks_nothing(seen: Any, expected: Any) -> bool:
    spoiled = _spoiled(seen, expected)
    return bool(spoiled) and all(mine == "沒有出錯" for mine, _ in spoiled)


def _every_correct_refused(seen: Any, expected: Any) -> bool:
    key = _verdicts(expected, "correct")
    return bool(key) and len(_rejected_correct(seen, expected)) == len(key)


def _public_rejects_all(seen: Any, expected: Any) -> bool:
    """Every correct graph refused, and on the spoiled ones validate stops before the wrong label."""
    spoiled = _spoiled(seen, expected)
    return _every_correct_refused(seen, expected) and bool(spoiled) and all("沒寫出" in mine for mine, _ in spoiled)


def _public_per_tensor_only(seen: Any, expected: Any) -> bool:
    """Every correct graph (per-channel weights, all of them) refused, but some spoiled label named right."""
    return _every_correct_refused(seen, expected) and any(mine == key for mine, key in _spoiled(seen, expected))


def _public_vague(seen: Any, expected: Any) -> bool:
    spoiled = _spoiled(seen, expected)
    raised = [mine for mine, _ in spoiled if mine.startswith("ValueError")]
    return not _rejected_correct(seen, expected) and len(raised) >= 2 and all("沒寫出" in mine for mine in raised)


def _public_names_producer(seen: Any, expected: Any) -> bool:
    mine, key = _verdicts(seen, "spoiled"), _verdicts(expected, "spoiled")
    return (
        not _rejected_correct(seen, expected)
        and "沒寫出" in mine.get("not_an_input", "")
        and "寫出" in key.get("not_an_input", "")
        and any(mine.get(name) == verdict for name, verdict in key.items() if name != "not_an_input")
    )


def _public_conv_output(seen: Any, expected: Any) -> bool:
    return _rejected_correct(seen, expected) == ["cat_pool"]


def _public_too_wide_passes(seen: Any, expected: Any) -> bool:
    mine, key = _verdicts(seen, "spoiled"), _verdicts(expected, "spoiled")
    others = [name for name in key if name != "too_wide"]
    return (
        mine.get("too_wide") == "沒有出錯"
        and bool(others)
        and all(mine.get(name) == key[name] for name in others)
        and not _rejected_correct(seen, expected)
    )


def _missed(seen: Any, expected: Any, name: str, case: str = "spoiled_more") -> bool:
    """The spoiled graph ``name`` passed validate (the key raised on it)."""
    mine, key = _verdicts(seen, case).get(name), _verdicts(expected, case).get(name)
    return mine == "沒有出錯" and key is not None and key != mine


def _refused(seen: Any, expected: Any, name: str) -> bool:
    """The correct graph ``name`` of ``correct_more`` refused with a ValueError, the other correct graphs passed."""
    mine, key = _verdicts(seen, "correct_more"), _verdicts(expected, "correct_more")
    return (
        not _rejected_correct(seen, expected)
        and mine.get(name, "").startswith("ValueError")
        and all(mine.get(other) == verdict for other, verdict in key.items() if other != name)
    )


def _public_changed_labels(seen: Any, expected: Any) -> bool:
    return any(
        "改了標籤" in verdict
        for case in ("correct", "spoiled", "correct_more", "spoiled_more")
        for verdict in _verdicts(seen, case).values()
    )


def _public_one_symmetric(seen: Any, expected: Any) -> bool:
    return _public_per_tensor_only(seen, expected) or _refused(seen, expected, "per_tensor_weight")


def _public_next_node_validate(seen: Any, expected: Any) -> bool:
    """The relu that comes later is not seen as fused, or the conv with a relu next and an add was; the adjacent
    conv → relu of the first spoiled graphs is checked right."""
    mine, key = _verdicts(seen, "spoiled"), _verdicts(expected, "spoiled")
    adjacent = mine.get("fused_output") == key.get("fused_output") is not None
    return adjacent and (_missed(seen, expected, "relu_later") or _refused(seen, expected, "conv_two_readers"))


def _public_claimed_only(seen: Any, expected: Any) -> bool:
    """The unclaimed too-wide label passes, the claimed one (linear's output) does not."""
    return _public_too_wide_passes(seen, expected) and not _missed(seen, expected, "claimed_wide")


def _public_order_only(seen: Any, expected: Any) -> bool:
    """Too-wide ranges pass, claimed or not."""
    return _public_too_wide_passes(seen, expected) and _missed(seen, expected, "claimed_wide")


def _public_renamed_fusion(seen: Any, expected: Any) -> bool:
    mine, key = _verdicts(seen, "spoiled"), _verdicts(expected, "spoiled")
    return mine.get("fused_output") == key.get("fused_output") is not None and _missed(seen, expected, "renamed")


def _public_channel_affine(seen: Any, expected: Any) -> bool:
    return _missed(seen, expected, "channel_affine")


def _public_computed_weight(seen: Any, expected: Any) -> bool:
    return _missed(seen, expected, "computed_weight")


def _public_uint8_refused(seen: Any, expected: Any) -> bool:
    return _refused(seen, expected, "uint8_output")


def _public_cat_refused(seen: Any, expected: Any) -> bool:
    return _refused(seen, expected, "cat_inputs")


def _public_none_key(seen: Any, expected: Any) -> bool:
    return _missed(seen, expected, "none_key")


def _public_relu_unlabelled(seen: Any, expected: Any) -> bool:
    return _missed(seen, expected, "relu_unlabelled")


def _public_weight_range(seen: Any, expected: Any) -> bool:
    """The weight's too-wide range passes, the same kind of range on an output (linear's) does not."""
    return _missed(seen, expected, "weight_range") and not _missed(seen, expected, "claimed_wide")


def _public_equal_range(seen: Any, expected: Any) -> bool:
    return _missed(seen, expected, "equal_range")


def _public_input_range(seen: Any, expected: Any) -> bool:
    """x's too-wide output passes while the same range on cat (a call_function node) does not."""
    return _missed(seen, expected, "input_range") and not _public_too_wide_passes(seen, expected)


def _range_specs() -> list[tuple[str, QuantizationSpec]]:
    """Specs whose range is right or wrong for their dtype, activations and a per-channel weight."""

    def spec(dtype: torch.dtype, low: int, high: int, scheme: torch.qscheme = torch.per_tensor_affine) -> Any:
        axis = 0 if scheme == torch.per_channel_symmetric else None
        return QuantizationSpec(
            dtype=dtype,
            quant_min=low,
            quant_max=high,
            qscheme=scheme,
            ch_axis=axis,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )

    return [
        ("int8 [-128, 127]", spec(torch.int8, -128, 127)),
        ("uint8 [0, 255]", spec(torch.uint8, 0, 255)),
        ("int16 [-1000, 1000]", spec(torch.int16, -1000, 1000)),
        ("int8 [0, 255]", spec(torch.int8, 0, 255)),
        ("uint8 [-128, 127]", spec(torch.uint8, -128, 127)),
        ("int8 [3, 3]", spec(torch.int8, 3, 3)),
        ("per-channel weight int8 [-127, 127]", spec(torch.int8, -127, 127, torch.per_channel_symmetric)),
        ("per-channel weight int8 [-127, 300]", spec(torch.int8, -127, 300, torch.per_channel_symmetric)),
    ]


def _check_range_ok(range_ok: Any) -> list[str]:
    problems = []
    for title, spec in _range_specs():
        info = torch.iinfo(spec.dtype)
        want = info.min <= spec.quant_min < spec.quant_max <= info.max
        got = range_ok(spec)
        if bool(got) is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


RANGE_OK = Practice(
    "range_ok",
    "寫 range_ok(spec)：spec 是一份 QuantizationSpec，它的 quant_min、quant_max 合不合規則 4？回傳 True 或 False。"
    "檢查用八份規格：int8、uint8、int16 的正確與錯誤範圍、只有一個值的範圍，和兩份 per-channel 的 weight 規格。",
    "import torch\n\n\ndef range_ok(spec):\n    raise NotImplementedError()\n",
    _check_range_ok,
    "dtype 能表示的整數在 torch.iinfo(spec.dtype) 裡（.min、.max）；規則有兩半："
    "範圍在 dtype 裡面，而且 quant_min 嚴格小於 quant_max。weight 的規格也一樣檢查。",
    "import torch\n\n\n"
    "def range_ok(spec):\n"
    "    info = torch.iinfo(spec.dtype)\n"
    "    return info.min <= spec.quant_min < spec.quant_max <= info.max\n",
    "Python 的連續比較一次寫完兩半：quant_min == quant_max 的範圍只有一個值，observer 算 scale 時會除以零。",
)


def _check_symmetric_ok(symmetric_ok: Any) -> list[str]:
    problems = []
    for scheme in (
        torch.per_tensor_symmetric,
        torch.per_channel_symmetric,
        torch.per_tensor_affine,
        torch.per_channel_affine,
    ):
        axis = 0 if scheme in (torch.per_channel_symmetric, torch.per_channel_affine) else None
        spec = QuantizationSpec(
            dtype=torch.int8,
            quant_min=-127,
            quant_max=127,
            qscheme=scheme,
            ch_axis=axis,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        want = scheme in (torch.per_tensor_symmetric, torch.per_channel_symmetric)
        got = symmetric_ok(spec)
        if bool(got) is not want:
            problems.append(f"qscheme={scheme} 的 weight：應該回傳 {want}，你的是 {got!r}")
    return problems


SYMMETRIC_OK = Practice(
    "symmetric_ok",
    "寫 symmetric_ok(spec)：spec 是一份 weight 的 QuantizationSpec，它的 qscheme 合不合規則 2？回傳 True 或 False。"
    "檢查用 int8 的四種 qscheme：per_tensor／per_channel 的 symmetric 與 affine。",
    "import torch\n\n\ndef symmetric_ok(spec):\n    raise NotImplementedError()\n",
    _check_symmetric_ok,
    "規則是白名單：合格的只有 torch.per_tensor_symmetric 與 torch.per_channel_symmetric 這兩種，其他一律不行。",
    "import torch\n\nSYMMETRIC = (torch.per_tensor_symmetric, torch.per_channel_symmetric)\n\n\n"
    "def symmetric_ok(spec):\n"
    "    return spec.qscheme in SYMMETRIC\n",
    "只列一種不行的（!= per_tensor_affine）會放過 per_channel_affine；只列一種行的會擋掉另一種正確的 weight。",
)


class _JoinRelu(nn.Module):
    """cat([relu(x), y]): the cat's inputs sit in a list."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x), y], 1)


def _check_check_edges(check_edges: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_JoinRelu().eval(), (torch.ones(1, 2, 2), torch.ones(1, 2, 2)))
    nodes = {n.name: n for n in gm.graph.nodes}
    x, y, relu, cat = nodes["x"], nodes["y"], nodes["relu"], nodes["cat"]
    cat.name = "joined_7"
    problems = []
    for title, inputs, wrong in (
        ("joined_7（cat）貼了 relu、y 兩條輸入邊", {relu: act_spec(), y: act_spec()}, False),
        ("joined_7（cat）的標籤裡有 x（x 是 relu 的輸入，不是 cat 的）", {relu: act_spec(), x: act_spec()}, True),
        ("joined_7（cat）的標籤裡有 x，規格是 None", {relu: act_spec(), x: None}, True),
    ):
        cat.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=dict(inputs), _annotated=True)
        try:
            check_edges(cat)
        except ValueError as error:
            if not wrong:
                problems.append(f"{title}：這張標籤沒錯，不該出錯，你的丟出 ValueError：{error}")
            elif "joined_7" not in str(error):
                problems.append(f"{title}：訊息要寫出標籤所在的 node（joined_7），你的是：{error}")
        except NotImplementedError:
            raise
        except Exception as error:  # the wrong kind of exception is the point of this check
            problems.append(f"{title}：應該 raise ValueError，你的丟出 {type(error).__name__}")
        else:
            if wrong:
                problems.append(f"{title}：應該 raise ValueError，你的沒有出錯")
        after = cat.meta.get(ANNOTATION_KEY)
        if after is None or dict(after.input_qspec_map) != inputs:
            problems.append(f"{title}：validate 只讀標籤，你的程式改了它")
    return problems


CHECK_EDGES = Practice(
    "check_edges",
    "寫 check_edges(node)：照規則 1 檢查 node 的標籤 node.meta[ANNOTATION_KEY]：input_qspec_map 的每個 key 都要是 node 的輸入，"
    "不是就 raise ValueError，訊息寫出 node.name；標籤本身不要改。"
    "檢查用 torch.cat([relu(x), y]) 的 cat（改名成 joined_7），貼上一張對的、兩張錯的標籤。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef check_edges(node):\n    raise NotImplementedError()\n",
    _check_check_edges,
    "node 的輸入是 node.all_input_nodes（cat 的 list 也攤開了），不是 node.args；"
    '規格是 None 的 key 也要檢查。訊息寫標籤所在的 node，例如 f"{node.name}：{key.name} 不是它的輸入"。',
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def check_edges(node):\n"
    "    annotation = node.meta[ANNOTATION_KEY]\n"
    "    for key in annotation.input_qspec_map:\n"
    "        if key not in node.all_input_nodes:\n"
    '            raise ValueError(f"{node.name}：{key.name} 不是它的輸入，標籤卻有 ({key.name}, {node.name}) 這條邊")\n',
    "用 raise ValueError，不用 assert：python -O 會拿掉 assert，呼叫的人也靠錯誤的型別分辨「標籤錯了」。",
)


def _check_spec_ranges(spec_ranges: Any) -> list[str]:
    from common.pt2e import SharedQuantizationSpec
    from common.qspecs import weight_spec

    graph = torch.fx.Graph()
    x, w, b = graph.placeholder("x"), graph.get_attr("w"), graph.get_attr("b")
    conv = graph.call_function(_CONV2D, (x, w, b), name="conv2d")
    graph.output(graph.call_function(_RELU, (conv,), name="relu"))
    problems = []
    for title, annotation, want in (
        (
            "conv 的標籤：x、w 兩份 QuantizationSpec，b 是 None，輸出和 x → conv 共用（SharedQuantizationSpec）",
            QuantizationAnnotation(
                input_qspec_map={x: act_spec(), w: weight_spec(), b: None},
                output_qspec=SharedQuantizationSpec((x, conv)),
            ),
            [(-128, 127), (-127, 127)],
        ),
        (
            "relu 的標籤：輸入邊和 x 的輸出共用（SharedQuantizationSpec），輸出 uint8 [0, 255]",
            QuantizationAnnotation(
                input_qspec_map={conv: SharedQuantizationSpec(x)}, output_qspec=_spec(torch.uint8, 0, 255)
            ),
            [(0, 255)],
        ),
        ("一張空的標籤", QuantizationAnnotation(), []),
    ):
        try:
            got = spec_ranges(annotation)
        except NotImplementedError:
            raise
        except AttributeError as error:
            problems.append(
                f"{title}：執行時出錯（AttributeError: {error}）。SharedQuantizationSpec 只說和誰共用，沒有 quant_min、"
                "quant_max：只讀 isinstance(spec, QuantizationSpec) 的規格"
            )
            continue
        if isinstance(got, str) or not isinstance(got, list | tuple | set):
            problems.append(f"{title}：要回傳 (quant_min, quant_max) 的 list，你的是 {got!r}")
            continue
        mine = sorted((tuple(r) if isinstance(r, list | tuple) else (r,) for r in got), key=str)
        if mine != sorted(want, key=str):
            shared = (
                "；(None, None) 這類是共用規格留下的，它沒有自己的範圍，不要列" if any(None in r for r in mine) else ""
            )
            problems.append(f"{title}：應該是 {sorted(want)}，你的是 {mine}{shared}")
    return problems


SPEC_RANGES = Practice(
    "spec_ranges",
    "寫 spec_ranges(annotation)：annotation 是一張標籤，回傳它每一份 QuantizationSpec（輸入邊與輸出）的 (quant_min, quant_max)。"
    "None 與 SharedQuantizationSpec 這類規格跳過，順序不拘。檢查用三張標籤：有 weight、bias 是 None、輸出共用的 conv，"
    "輸入邊共用的 relu，和一張空的。",
    "from common.pt2e import QuantizationSpec\n\n\ndef spec_ranges(annotation):\n    raise NotImplementedError()\n",
    _check_spec_ranges,
    "先把 annotation.input_qspec_map.values() 與 annotation.output_qspec 放進同一個 list，"
    "再只留下 isinstance(spec, QuantizationSpec) 的：None 不是，SharedQuantizationSpec 也不是（它沒有 quant_min）。",
    "from common.pt2e import QuantizationSpec\n\n\n"
    "def spec_ranges(annotation):\n"
    "    specs = [*annotation.input_qspec_map.values(), annotation.output_qspec]\n"
    "    return [(s.quant_min, s.quant_max) for s in specs if isinstance(s, QuantizationSpec)]\n",
    "共用的位置用的是它指向的那份規格，範圍在那份規格上檢查：每份真正的規格檢查一次就夠了。",
)


def _labelled_chain(spoil: str | None) -> GraphModule:
    """x → relu → sigmoid, every node labelled right (x's output claimed, relu's input edge shares x's output,
    sigmoid's label nobody claimed); ``spoil`` puts int8 [0, 255] (or a quant_max of 300 on relu's input edge) on
    one of them."""
    from common.pt2e import SharedQuantizationSpec

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    relu = graph.call_function(_RELU, (x,), name="relu")
    sigmoid = graph.call_function(_SIGMOID, (relu,), name="sigmoid")
    graph.output(sigmoid)
    wide = _spec(torch.int8, 0, 255)
    x.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=wide if spoil == "x" else act_spec(), _annotated=True)
    relu.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={x: _spec(torch.int8, -128, 300) if spoil == "relu" else SharedQuantizationSpec(x)},
        output_qspec=_spec(torch.uint8, 0, 255),
        _annotated=True,
    )
    sigmoid.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={relu: act_spec()}, output_qspec=wide if spoil == "sigmoid" else act_spec(), _annotated=False
    )
    return GraphModule(nn.Module(), graph)


def _check_check_every_label(check_every_label: Any) -> list[str]:
    problems = []
    for title, spoil in (
        ("每張標籤都對（x 的輸出、relu 的共用輸入邊與 uint8 輸出、沒人認領的 sigmoid）", None),
        ("沒人認領（_annotated=False）的 sigmoid，輸出是 int8 [0, 255]", "sigmoid"),
        ("模型輸入 x（placeholder）的輸出是 int8 [0, 255]", "x"),
        ("relu 的輸入邊是 int8 [-128, 300]", "relu"),
    ):
        try:
            check_every_label(_labelled_chain(spoil))
        except NotImplementedError:
            raise
        except ValueError as error:
            if spoil is None:
                problems.append(f"{title}：這些標籤都沒錯，不該出錯，你的丟出 ValueError：{error}")
            elif not re.search(rf"(?<![A-Za-z0-9_]){spoil}(?![A-Za-z0-9_])", str(error)):
                problems.append(f"{title}：訊息要寫出標籤所在的 node（{spoil}），你的是：{error}")
        except Exception as error:  # the wrong kind of exception is what this check reports
            hint = "（fits 只能用在 QuantizationSpec 上）" if isinstance(error, AttributeError) else ""
            problems.append(
                f"{title}：應該{'不出錯' if spoil is None else ' raise ValueError'}，你的丟出 {type(error).__name__}{hint}"
            )
        else:
            if spoil is not None:
                problems.append(f"{title}：應該 raise ValueError，你的沒有出錯")
    return problems


CHECK_EVERY_LABEL = Practice(
    "check_every_label",
    "寫 check_every_label(model)：只管規則 4。圖上每個有標籤的 node，它每一份 QuantizationSpec（輸入邊與輸出）"
    "只要 fits(spec) 是 False，就 raise ValueError，訊息寫出 node.name；全部合規就什麼都不做。fits 已經寫好了。"
    "檢查用 x → relu → sigmoid 的小圖：一次全對，三次各錯一張（沒人認領的 sigmoid、模型輸入 x、relu 的輸入邊）。",
    "import torch\n"
    "from common.pt2e import ANNOTATION_KEY, QuantizationSpec\n\n\n"
    "def fits(spec):\n"
    "    info = torch.iinfo(spec.dtype)\n"
    "    return info.min <= spec.quant_min < spec.quant_max <= info.max\n\n\n"
    "def check_every_label(model):\n"
    "    raise NotImplementedError()\n",
    _check_check_every_label,
    "validate 是 prepare_pt2e 插 observer 前唯一的關卡：走過 model.graph.nodes 的每一個（不挑 op，不看 _annotated），"
    "node.meta.get(ANNOTATION_KEY) 不是 None 就把它的規格逐一交給 fits；只有不合規的才 raise。",
    "import torch\n"
    "from common.pt2e import ANNOTATION_KEY, QuantizationSpec\n\n\n"
    "def fits(spec):\n"
    "    info = torch.iinfo(spec.dtype)\n"
    "    return info.min <= spec.quant_min < spec.quant_max <= info.max\n\n\n"
    "def check_every_label(model):\n"
    "    for node in model.graph.nodes:\n"
    "        label = node.meta.get(ANNOTATION_KEY)\n"
    "        specs = [] if label is None else [*label.input_qspec_map.values(), label.output_qspec]\n"
    "        for spec in specs:\n"
    "            if isinstance(spec, QuantizationSpec) and not fits(spec):\n"
    '                raise ValueError(f"{node.name}：[{spec.quant_min}, {spec.quant_max}] 放不進 {spec.dtype}")\n',
    "prepare_pt2e 自己不檢查：錯的標籤照樣插 observer。誰貼的、貼在什麼 node 上，插出來的 observer 都一樣會算錯。",
)


def _weights_graph() -> tuple[dict[str, Node], QuantizationSpec, QuantizationSpec]:
    """conv2d(x, mul(kernel, 0.5)) and linear(weights_in, proj, proj_bias), labelled (linear's map lists the bias first,
    then the activation, then the weight); conv2d_1(x, kernel) without a label. Returns the nodes and the two
    weights' specs."""
    from common.qspecs import weight_spec

    graph = torch.fx.Graph()
    x, kernel = graph.placeholder("x"), graph.get_attr("kernel")
    weights_in, proj, proj_bias = graph.placeholder("weights_in"), graph.get_attr("proj"), graph.get_attr("proj_bias")
    mul = graph.call_function(torch.ops.aten.mul.Tensor, (kernel, 0.5), name="mul")
    conv = graph.call_function(_CONV2D, (x, mul), name="conv2d")
    linear = graph.call_function(_LINEAR, (weights_in, proj, proj_bias), name="linear")
    plain = graph.call_function(_CONV2D, (x, kernel), name="conv2d_1")
    graph.output((conv, linear, plain))
    conv_weight, linear_weight = weight_spec(), weight_spec(per_channel=False)
    conv.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: act_spec(), mul: conv_weight})
    linear.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={proj_bias: None, weights_in: act_spec(), proj: linear_weight}
    )
    return {"conv": conv, "linear": linear, "plain": plain}, conv_weight, linear_weight


def _check_weight_spec_of(weight_spec_of: Any) -> list[str]:
    nodes, conv_weight, linear_weight = _weights_graph()
    problems = []
    for title, node, want in (
        ("conv2d(x, mul)：weight 是算出來的 mul", nodes["conv"], conv_weight),
        ("linear(weights_in, proj, proj_bias)：標籤依序是 bias、activation、weight", nodes["linear"], linear_weight),
        ("conv2d_1(x, kernel)：沒有標籤", nodes["plain"], None),
    ):
        got = weight_spec_of(node)
        if got is not want:
            mine = _spec_text(got) if got is None or isinstance(got, QuantizationSpec) else repr(got)
            problems.append(f"{title}：應該是 {_spec_text(want)}，你的是 {mine}")
    return problems


WEIGHT_SPEC_OF = Practice(
    "weight_spec_of",
    "寫 weight_spec_of(node)：node 是 conv 或 linear，回傳它的標籤裡 weight 那條輸入邊的規格；沒有標籤就回傳 None。"
    "檢查用的圖上，conv 的 weight 是算出來的 mul，linear 的 weight 叫 proj、模型輸入反而叫 weights_in，"
    "linear 的 input_qspec_map 也不是照引數的順序寫的。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef weight_spec_of(node):\n    raise NotImplementedError()\n",
    _check_weight_spec_of,
    "weight 是由位置決定的，不是名字，也不是在 input_qspec_map 裡排第幾：conv 與 linear 的第二個引數 node.args[1] 就是 weight，"
    "拿它當 key 去 input_qspec_map 查。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def weight_spec_of(node):\n"
    "    label = node.meta.get(ANNOTATION_KEY)\n"
    "    return None if label is None else label.input_qspec_map.get(node.args[1])\n",
    "weight 可以是 get_attr 的常數，也可以是 op 算出來的 node；不管叫什麼，它都是 node.args[1]。",
)


VALIDATE_MISCONCEPTIONS = (
    Misconception(
        "fixes_silently",
        "validate 自己把錯的標籤改掉",
        "validate 的工作是把錯的標籤擋下來、告訴寫 Quantizer 的人，不是替他修：你悄悄改掉標籤，"
        "錯的 Quantizer 就永遠沒有人知道，換個模型又出一樣的錯。validate 只讀標籤，違反規則就 raise ValueError。",
        VALIDATE,
        public=_public_changed_labels,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "reads_every_spec",
        "每份規格都去讀 quant_min、quant_max",
        "SharedQuantizationSpec 這類規格沒有 dtype、quant_min、quant_max（它只說和誰共用），直接讀這些欄位，"
        "validate 自己就出錯了，正確的標籤也過不了。範圍只檢查 isinstance(spec, QuantizationSpec) 的規格。",
        CHECKS,
        public=_public_reads_every_spec,
        practice=SPEC_RANGES,
    ),
    Misconception(
        "wrong_error_type",
        "丟出的不是 ValueError",
        "規則要求違反時 raise ValueError：呼叫的人（和評分）靠錯誤的型別分辨「標籤錯了」和「程式壞了」。"
        "用 assert 得到的是 AssertionError，而且 python -O 執行時 assert 會整個被拿掉。明確寫 raise ValueError(...)。",
        CHECKS,
        public=_public_wrong_error,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "checks_nothing",
        "以為 validate 可以什麼都不做",
        "prepare_pt2e 不會替你檢查標籤：錯的標籤照樣插 observer，變成一個 convert 得出來、數值卻錯的模型。"
        "validate 是插 observer 之前最後一道關卡，練習的四條規則都要檢查。",
        VALIDATE,
        public=_public_checks_nothing,
        practice=CHECK_EVERY_LABEL,
    ),
    Misconception(
        "rejects_any_label",
        "只要有標籤就出錯",
        "validate 要擋的只有違反規則的標籤：正確的標籤一出錯，Quantizer 就完全不能用了。"
        "對每張標籤逐條檢查四條規則，都沒違反就什麼都不做。",
        CHECKS,
        public=_public_rejects_all,
        practice=CHECK_EVERY_LABEL,
    ),
    Misconception(
        "vague_message",
        "錯誤訊息沒寫出是哪個 node",
        "一張圖有幾十張標籤，訊息只說「有一條邊不對」，看的人不知道去哪裡找。"
        '每個 ValueError 的訊息都寫出標籤所在的 node，例如 f"{node.name}：..."。',
        CHECKS,
        public=_public_vague,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "names_producer",
        "不存在的邊只寫出上游的名字",
        "input_qspec_map 貼在 consumer 身上，錯的是 consumer 那張標籤；只寫出 key（上游）的名字，看的人會去錯的 node 找。"
        "訊息要寫出標籤所在的 node.name，也可以再加上 key 的名字。",
        CHECKS,
        public=_public_names_producer,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "one_symmetric_only",
        "只接受其中一種 symmetric 的 weight",
        "symmetric 有兩種：torch.per_tensor_symmetric 與 torch.per_channel_symmetric，XNNPACK 的 weight 通常用 per-channel，"
        "也可以設定成 per-tensor。你只放行其中一種，另一種正確的 weight 也被擋掉；規則是兩種 symmetric 都接受。",
        CHECKS,
        public=_public_one_symmetric,
        practice=SYMMETRIC_OK,
    ),
    Misconception(
        "any_conv_output",
        "conv 有輸出標籤就出錯",
        "只有 conv 唯一的 consumer 是 relu（融合 pattern）時，conv 才不能有輸出標籤；"
        "接 cat、add，或有兩個 consumer 的 conv 本來就該有自己的輸出標籤。先確認 conv 的 users 只有一個 relu 再檢查。",
        CHECKS,
        public=_public_conv_output,
        practice=FUSES_WITH_RELU,
    ),
    Misconception(
        "fusion_by_next_node",
        "用圖上的下一個 node 判斷融合",
        "node.next 只是圖上排在後面的 node：conv 唯一的 consumer relu 可能隔了好幾個 node，"
        "緊接在 conv 後面的 relu 也可能讀的是別的值。判斷融合 pattern 要看 node.users。",
        USERS,
        public=_public_next_node_validate,
        practice=FUSES_WITH_RELU,
    ),
    Misconception(
        "claimed_only",
        "只檢查 _annotated 為 True 的標籤",
        "prepare_pt2e 插 observer 時不看 _annotated：沒人認領的標籤照樣插 observer，錯了一樣會算錯。"
        "validate 要檢查每一張標籤。",
        ROLES,
        public=_public_claimed_only,
        practice=CHECK_EVERY_LABEL,
    ),
    Misconception(
        "found_by_name",
        "用 node 的名字認 conv、linear",
        "node 的名字只是標記，pass 改過名字之後，叫 linear_90 的可能是 conv。用名字認 op，改過名字的圖就檢查錯了。"
        '要用 node.op == "call_function" 而且 node.target == CONV 判斷。',
        BY_TARGET,
        public=_public_renamed_fusion,
        practice=IS_CONV,
    ),
    Misconception(
        "affine_only",
        "只擋 per_tensor_affine 的 weight",
        "不是 symmetric 的方案不只 per_tensor_affine，還有 per_channel_affine：它一樣不是 XNNPACK 接受的 weight。"
        "規則是「qscheme 必須是兩種 symmetric 之一」，用白名單檢查，不要只列一種不行的。",
        CHECKS,
        public=_public_channel_affine,
        practice=SYMMETRIC_OK,
    ),
    Misconception(
        "weight_by_name",
        "用名字找 weight",
        "weight 不一定叫 weight：它可以是由 op 算出來的 node（例如 mul_1）。conv 與 linear 的 weight 就是 node.args[1]，"
        "用 ann.input_qspec_map.get(node.args[1]) 拿它的規格。",
        RULES,
        public=_public_computed_weight,
        practice=WEIGHT_SPEC_OF,
    ),
    Misconception(
        "int8_range_only",
        "整數範圍寫死成 int8",
        "每份規格的 dtype 不一定是 int8：uint8、int16、int32 的正確規格範圍都超出 [-128, 127]。"
        "範圍要照 spec.dtype 查：torch.iinfo(spec.dtype).min 與 .max。",
        CHECKS,
        public=_public_uint8_refused,
        practice=RANGE_OK,
    ),
    Misconception(
        "key_in_args",
        "用 producer in node.args 判斷是不是輸入",
        "node.args 不一定直接放著輸入：cat 的輸入在 node.args[0] 這個 list 裡，所以 cat 的正確標籤也被擋了。"
        "要用 node.all_input_nodes，它把 list 裡的輸入也攤開。",
        ADD_LABEL,
        public=_public_cat_refused,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "skips_none_keys",
        "規格是 None 的 key 就不檢查",
        "規則 1 問的是 input_qspec_map 的每個 key，規格是 None 的也一樣：None 只表示這條邊不量化，"
        "key 仍然說這條邊存在，不存在的邊出現在標籤裡就是 Quantizer 貼錯了。先檢查 key 在不在 node.all_input_nodes，再看規格。",
        CHECKS,
        public=_public_none_key,
        practice=CHECK_EDGES,
    ),
    Misconception(
        "fusion_from_relu",
        "從 relu 的標籤回頭檢查融合",
        "規則 3 管的是 conv 的標籤：conv 唯一的 consumer 是 relu 時，conv 不能有輸出標籤，不管 relu 有沒有標籤。"
        "你只在看到有標籤的 relu 時才回頭查 conv，輸出標籤從 relu 搬回 conv、relu 沒有標籤時就漏掉了。"
        "在 conv 的標籤上檢查它的 users。",
        CHECKS,
        public=_public_relu_unlabelled,
        practice=BREAKS_FUSION,
    ),
    Misconception(
        "range_skips_weights",
        "weight 的規格沒檢查整數範圍",
        "規則 4 管每一份 QuantizationSpec，weight（per-channel 的也一樣）並不例外：規則 2 只看 qscheme，"
        "int8 放不下的 quant_max 仍然要擋。輸入邊、weight 與輸出的規格都要照 torch.iinfo(spec.dtype) 檢查範圍。",
        CHECKS,
        public=_public_weight_range,
        practice=RANGE_OK,
    ),
    Misconception(
        "allows_equal",
        "quant_min 等於 quant_max 也放行",
        "quant_min 等於 quant_max 的範圍只有一個整數值，什麼都表示不了，observer 算 scale 時還會除以零。"
        "規則是 quant_min < quant_max，比較要用 <，不是 <=。",
        CHECKS,
        public=_public_equal_range,
        practice=RANGE_OK,
    ),
    Misconception(
        "order_only",
        "只檢查 quant_min < quant_max，沒對照 dtype",
        "範圍還必須是 dtype 表示得出來的整數：int8 放不下 255，uint8 沒有負數。"
        "用 torch.iinfo(spec.dtype) 拿到 dtype 的 min、max，確認 min <= quant_min 而且 quant_max <= max。",
        CHECKS,
        public=_public_order_only,
        practice=RANGE_OK,
    ),
    Misconception(
        "call_function_only",
        "只檢查 call_function node 的標籤",
        "標籤不只貼在 op 上：模型輸入（placeholder）x 也可以有輸出標籤，它的範圍一樣要檢查。"
        "validate 要看每個有標籤的 node，不要先過濾 node.op。",
        EDGE_AND_OUTPUT,
        public=_public_input_range,
        practice=CHECK_EVERY_LABEL,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "rule_quantizer",
        "RuleQuantizer：依 node.target 照規則表貼標籤",
        ("RuleQuantizer",),
        {
            "small_cnn": rule_small_cnn,
            "residual_mlp": rule_residual_mlp,
            "small_models": rule_small_models,
            "no_bias": rule_no_bias,
            "labelled_before": rule_labelled_before,
        },
        misconceptions=RULE_MISCONCEPTIONS,
    ),
    Exercise(
        "validate",
        "validate：擋住錯的標籤",
        ("CheckedRuleQuantizer",),
        {
            "correct": validate_correct,
            "spoiled": validate_spoiled,
            "correct_more": validate_correct_more,
            "spoiled_more": validate_spoiled_more,
        },
        misconceptions=VALIDATE_MISCONCEPTIONS,
    ),
)
