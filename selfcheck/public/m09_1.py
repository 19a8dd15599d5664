"""Public cases of M09-1 一個小 Transformer (linear_roles, annotation_census) on the chapter's own TinyLM.

Also what the chapter and the hidden cases share: ExecuTorch's XNNPACKQuantizer with the static or the
dynamic symmetric config (``make_quantizer``), a TinyLM exported as PT2E takes it (``exported``), prepared
with a Quantizer (``prepared``) or only annotated (``annotated``), and reading what the two answers
returned. ExecuTorch is imported only inside the functions that need it.
"""

from __future__ import annotations

import operator
from typing import Any

from torch import nn
from torch.fx import GraphModule

from common import tinylm
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_model, seeded_tokens
from selfcheck.evidence import EvidenceError, returned_dict, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m08_1 import HAS_SPEC

ROLES_TITLE = "linear_roles：每個 linear node 來自哪個 nn.Linear"
CENSUS_TITLE = "annotation_census：每種 aten op 標了幾個、沒標幾個"

KINDS = ("static", "dynamic")
"""The two configs of this chapter: activations observed at calibration (static) or at run time (dynamic)."""


def make_quantizer(kind: str = "static", module_type: type[nn.Module] | None = None) -> Any:
    """ExecuTorch's XNNPACKQuantizer with ``get_symmetric_quantization_config(is_per_channel=True, is_dynamic=...)``.

    ``kind`` is ``"static"`` or ``"dynamic"``. The config is set globally, or with ``module_type`` only on
    that module class (``set_module_type``). Built without the QAT-only conv → BN patterns
    (``qat_patterns=False``): TinyLM has no conv, and they cost a second or more per ``prepare_pt2e``.
    """
    from common.backends import symmetric_xnnpack_quantizer

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {KINDS}")
    quantizer = symmetric_xnnpack_quantizer(qat_patterns=False, is_per_channel=True, is_dynamic=kind == "dynamic")
    if module_type is None:
        return quantizer
    config, quantizer.global_config = quantizer.global_config, None
    return quantizer.set_module_type(module_type, config)


def exported(model: nn.Module, batch: int = 4) -> GraphModule:
    """``model`` (eval) exported on ``batch`` windows of its own context: the graph PT2E works on.

    The tokens come from a fixed generator (the global RNG is left alone) and stay inside the model's vocabulary.
    """
    from common.pt2e import export_module

    config = model.config  # type: ignore[attr-defined]
    return export_module(model.eval(), (seeded_tokens(batch, config.vocab, batch, config.context),))


def prepared(model: nn.Module, quantizer: Any) -> GraphModule:
    """``prepare_pt2e(exported(model), quantizer)``: the annotations stay in ``node.meta``, observers are inserted."""
    from common.pt2e import prepare_pt2e

    return prepare_pt2e(exported(model), quantizer)


def annotated(model: nn.Module, quantizer: Any) -> GraphModule:
    """``exported(model)`` only annotated by ``quantizer`` (``transform_for_annotation``, then ``annotate``): no observers."""
    gm = quantizer.transform_for_annotation(exported(model))
    quantizer.annotate(gm)
    return gm


def small_tinylm(config: tinylm.TinyLMConfig, seed: int) -> tinylm.TinyLM:
    """An untrained ``TinyLM(config)`` whose weights come from ``seed`` (the global RNG is left alone)."""
    return seeded_model(seed, tinylm.TinyLM, config)  # type: ignore[return-value]


# --- reading the answers ----------------------------------------------------------------------------


def roles(ns: Namespace, gm: GraphModule) -> dict[str, str]:
    """``linear_roles(gm)``, checked to be ``{node name: module name}`` (plain strings)."""
    got = returned_dict(ns["linear_roles"](gm), "linear_roles", "node 名稱 → nn.Linear 的名稱")
    out = {}
    for key, name in got.items():
        if type(key) is not str or type(name) is not str:
            raise EvidenceError("linear_roles 的 key 與值都應該是 str（node 的名稱、nn.Linear 的名稱）")
        out[safe_text(key, 80)] = safe_text(name, 120)
    return out


def census(ns: Namespace, gm: GraphModule) -> dict[str, dict[str, int]]:
    """``annotation_census(gm)``, checked to be ``{op: {"annotated": int, "unannotated": int}}``."""
    got = returned_dict(ns["annotation_census"](gm), "annotation_census", "op → 次數")
    out = {}
    for op, counts in got.items():
        if type(op) is not str:
            raise EvidenceError(
                f"annotation_census 的 key 應該是 op 的名稱（str(node.target)），看到 {type(op).__name__}"
            )
        if type(counts) is not dict or set(counts) != {"annotated", "unannotated"}:
            raise EvidenceError(
                f'annotation_census["{safe_text(op, 60)}"] 應該是 {{"annotated": 次數, "unannotated": 次數}}'
            )
        if any(type(counts[k]) is not int for k in counts):
            raise EvidenceError(f'annotation_census["{safe_text(op, 60)}"] 的次數應該是 int')
        out[safe_text(op, 80)] = {"annotated": counts["annotated"], "unannotated": counts["unannotated"]}
    return out


# --- public cases -----------------------------------------------------------------------------------


def shipped(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM (shipped weights), exported."""
    return roles(ns, exported(tinylm.tinylm_model()))


def one_layer_no_bias(ns: Namespace, seed: int) -> Any:
    """A one-block TinyLM whose linears have no bias."""
    config = tinylm.TinyLMConfig(layers=1, d_model=32, heads=2, mlp=48, bias=False)
    return roles(ns, exported(small_tinylm(config, seed)))


def static(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM prepared with the static config."""
    return census(ns, prepared(tinylm.tinylm_model(), make_quantizer("static")))


def dynamic(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM prepared with the dynamic config."""
    return census(ns, prepared(tinylm.tinylm_model(), make_quantizer("dynamic")))


class BackwardLM(tinylm.TinyLM):
    """TinyLM whose forward runs its blocks last to first: the linear nodes of blocks.1 come before blocks.0's."""

    def forward(self, tokens: Any) -> Any:
        import torch

        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in reversed(self.blocks):
            x = block(x)
        return self.head(self.ln_f(x))


class Stage(nn.Module):
    """``refine`` applied twice (one nn.Linear, two linear nodes), then ``ffn``: an nn.Sequential whose linears are
    named ``0`` and ``2``."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.refine = nn.Linear(d, d)
        self.ffn = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))

    def forward(self, x: Any) -> Any:
        import torch

        x = torch.tanh(self.refine(torch.tanh(self.refine(x))))
        return x + self.ffn(x)


class Encoder(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.stage = Stage(d)

    def forward(self, x: Any) -> Any:
        return self.stage(x)


class Looped(nn.Module):
    """embed → encoder.stage (refine twice, then ffn.0 → relu → ffn.2, five modules deep) → head, whose weight is
    the embedding's (tied: its get_attr reads embed.weight)."""

    def __init__(self, vocab: int = 12, d: int = 8) -> None:
        super().__init__()
        self.config = tinylm.TinyLMConfig(vocab=vocab, context=6, d_model=d, heads=1, layers=1, mlp=2 * d)
        self.head = nn.Linear(d, vocab, bias=False)  # registered first: the tied weight is exported as embed.weight
        self.encoder = Encoder(d)
        self.embed = nn.Embedding(vocab, d)
        self.head.weight = self.embed.weight

    def forward(self, tokens: Any) -> Any:
        return self.head(self.encoder(self.embed(tokens)))


TIED = ("embed", "head")
"""Looped's tied weight: the module that owns it (its get_attr's name) and the head that uses it too."""


def backward_blocks(ns: Namespace, seed: int) -> Any:
    """A two-block TinyLM run last block first: the linears meet in another order."""
    config = tinylm.TinyLMConfig(vocab=12, context=6, layers=2, d_model=8, heads=1, mlp=8)
    return roles(ns, exported(seeded_model(seed, BackwardLM, config)))


def looped(ns: Namespace, seed: int) -> Any:
    """Looped: an nn.Linear called twice, linears five modules deep, a head whose weight is the embedding's."""
    return roles(ns, exported(seeded_model(seed, Looped)))


class GatedMlp(nn.Module):
    """layer_norm → up → split in two (getitem ×2) → tanh(a) · sigmoid(b) → down → relu → + x → out."""

    def __init__(self, d: int = 8, hidden: int = 12) -> None:
        super().__init__()
        self.hidden = hidden
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * hidden)
        self.down = nn.Linear(hidden, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: Any) -> Any:
        import torch

        a, b = self.up(self.norm(x)).split(self.hidden, dim=-1)
        h = torch.relu(self.down(torch.tanh(a) * torch.sigmoid(b)))
        return self.out(x + h)


def hand_labelled(inner: Any) -> Any:
    """A Quantizer that runs ``inner`` (XNNPACKQuantizer) between labels written by hand, every shape a label can
    take. Before: an empty claimed label (``_annotated=True``, no spec) on the last linear, which keeps it in
    fp32. After: ``None`` under ANNOTATION_KEY on the layer_norm (no label object); the add's input edges listed
    with ``None`` specs; a FixedQParamsQuantizationSpec output on the sigmoid; a DerivedQuantizationSpec on the
    mul's first input; an output-only label with ``_annotated`` left False on the tanh."""
    import torch
    from torchao.quantization.pt2e.quantizer import DerivedQuantizationSpec, FixedQParamsQuantizationSpec

    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
    from common.qspecs import act_spec

    def ops(model: GraphModule, target: Any) -> list[Any]:
        return list(model.graph.find_nodes(op="call_function", target=target))

    def derive(observers: Any) -> tuple[Any, Any]:  # never called: the graph is only annotated
        return torch.ones(1), torch.zeros(1, dtype=torch.int64)

    class HandLabels(Quantizer):
        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return inner.transform_for_annotation(model)

        def annotate(self, model: GraphModule) -> GraphModule:
            ops(model, torch.ops.aten.linear.default)[-1].meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
            inner.annotate(model)
            for node in ops(model, torch.ops.aten.layer_norm.default):
                node.meta[ANNOTATION_KEY] = None
            for node in ops(model, torch.ops.aten.add.Tensor):
                edges = {arg: None for arg in node.args if isinstance(arg, torch.fx.Node)}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=edges, _annotated=True)
            for node in ops(model, torch.ops.aten.sigmoid.default):
                fixed = FixedQParamsQuantizationSpec(dtype=torch.uint8, scale=1.0 / 256, zero_point=0)
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=fixed, _annotated=True)
            for node in ops(model, torch.ops.aten.mul.Tensor):
                first = node.args[0]
                derived = DerivedQuantizationSpec(
                    derived_from=[(first, node)], derive_qparams_fn=derive, dtype=torch.int32
                )
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={first: derived}, _annotated=True)
            for node in ops(model, torch.ops.aten.tanh.default):
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=act_spec())
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return HandLabels()


def hand_labels(ns: Namespace, seed: int) -> Any:
    """GatedMlp only annotated (no observers yet) by XNNPACKQuantizer's static config between labels written by
    hand (``hand_labelled``): labels of every shape."""
    from common.pt2e import export_module
    from selfcheck.casekit import seeded_inputs

    model = seeded_model(seed, GatedMlp).eval()
    quantizer = hand_labelled(make_quantizer("static"))
    gm = quantizer.transform_for_annotation(export_module(model, seeded_inputs(seed, (2, 3, 8))))
    quantizer.annotate(gm)
    return census(ns, gm)


# --- where the chapter teaches it ----------------------------------------------------------------

GRAPH = Section("B. export 之後的圖")
ROLES_RULES = Section("練習 1：linear_roles（4 分）")
WHAT_IS_LABELLED = Section("C. XNNPACKQuantizer 標了什麼")
CENSUS_RULES = Section("練習 2：annotation_census（6 分）")
EMPTY_LABEL = Section("空標籤：讓一個 op 留在 fp32", notebook="M08-1")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")


# --- reading the evidence (the public detectors here; the hidden ones in the checks use them too) ------


def dict_pairs(seen: Any, expected: Any, cases: tuple[str, ...] = ()) -> list[tuple[str, dict, dict]]:
    """``(case, got, want)`` for every case (of ``cases``, all when empty) where both returned a dict."""
    pairs = []
    for case in diagnosis.cases(expected):
        if cases and case not in cases:
            continue
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if isinstance(got, dict) and isinstance(want, dict):
            pairs.append((case, got, want))
    return pairs


def wrong_roles(got: dict[str, Any], want: dict[str, Any]) -> list[tuple[str, str]]:
    """``(got, want)`` module names of the linear nodes both name, where they differ."""
    return [(str(got[node]), str(name)) for node, name in want.items() if node in got and got[node] != name]


def _every_wrong_role(seen: Any, expected: Any, test: Any) -> bool:
    """Some case has a wrong module name, and ``test(got_name, want_name)`` holds for every wrong one of it."""
    for _, got, want in dict_pairs(seen, expected):
        wrong = wrong_roles(got, want)
        if wrong and all(test(mine, ours) for mine, ours in wrong):
            return True
    return False


def roles_of_other_nodes(seen: Any, expected: Any) -> bool:
    """Nodes that are not linears (layer_norm, matmul…) got a role too."""
    return any(set(got) - set(want) for _, got, want in dict_pairs(seen, expected))


def roles_are_classes(seen: Any, expected: Any) -> bool:
    """Module classes instead of names: ``torch.nn.modules.linear.Linear``, ``<class '…Linear'>``, ``Linear``."""
    return _every_wrong_role(seen, expected, lambda mine, ours: "Linear" in mine or mine.startswith("<class"))


def roles_are_node_names(seen: Any, expected: Any) -> bool:
    """Each linear node named after itself (``linear_3 → linear_3``) or after its op."""

    def named_after_node(node: str, mine: Any) -> bool:
        return mine == node or str(mine).startswith("aten.") or str(mine).startswith("linear")

    for _, got, want in dict_pairs(seen, expected):
        wrong = [node for node, name in want.items() if node in got and got[node] != name]
        if wrong and all(named_after_node(node, got[node]) for node in wrong):
            return True
    return False


def roles_are_outer_modules(seen: Any, expected: Any) -> bool:
    """A module that contains the linear's nn.Linear (the model itself, ``""``, or a block) instead of it."""
    return _every_wrong_role(seen, expected, lambda mine, ours: mine == "" or ours.startswith(mine + "."))


def roles_are_stack_keys(seen: Any, expected: Any) -> bool:
    """The ``nn_module_stack`` key (``L__self__blocks.0.attn.q``, ``…@1`` on a later call) instead of the name."""

    def key_of(mine: str, ours: str) -> bool:
        plain = mine.removeprefix("L__self__").split("@", 1)[0]
        return "L__self__" in mine or "@" in mine or plain.replace("_", ".").strip(".") == ours.replace("_", ".")

    return _every_wrong_role(seen, expected, key_of)


def roles_need_bias(seen: Any, expected: Any) -> bool:
    """A model whose linears have no bias raised (or lost its linears), where one with bias did not."""
    for case in diagnosis.cases(expected):
        if "bias" not in case:
            continue
        others = [c for c in diagnosis.cases(expected) if "bias" not in c]
        others_fine = any(isinstance(diagnosis.value(seen, c), dict) and diagnosis.value(seen, c) for c in others)
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if diagnosis.error(seen, case) and others_fine:
            return True
        if isinstance(got, dict) and isinstance(want, dict) and set(got) < set(want) and others_fine:
            return True
    return False


def census_counts(census: dict[str, Any], op: str, kind: str = "annotated") -> int:
    counts = census.get(op)
    return int(counts.get(kind, 0)) if isinstance(counts, dict) else 0


def annotated_changes(got: dict[str, Any], want: dict[str, Any]) -> dict[str, int]:
    """Op → how many more nodes the student counts as annotated than the key (only the ops that differ)."""
    changes = {}
    for op in set(want) | set(got):
        change = census_counts(got, op) - census_counts(want, op)
        if change:
            changes[op] = change
    return changes


def census_extra_keys(seen: Any, expected: Any) -> bool:
    """Keys that are not an op of a call_function node (weights, observers, ``output``), every op still there."""
    return any(set(got) - set(want) and set(want) <= set(got) for _, got, want in dict_pairs(seen, expected))


def census_totals_differ(seen: Any, expected: Any) -> bool:
    """An op's annotated + unannotated is not its number of nodes: something else than nodes was counted."""
    for _, got, want in dict_pairs(seen, expected):
        for op in want:
            total = census_counts(got, op) + census_counts(got, op, "unannotated")
            if op in got and total != census_counts(want, op) + census_counts(want, op, "unannotated"):
                return True
    return False


def census_counts_unlabelled_ops(seen: Any, expected: Any) -> bool:
    """An op the key never counts as annotated (layer_norm, gelu, embedding…) is counted as annotated."""
    return any(
        change > 0 and census_counts(want, op) == 0
        for _, got, want in dict_pairs(seen, expected)
        for op, change in annotated_changes(got, want).items()
    )


def _only_fewer(seen: Any, expected: Any) -> bool:
    """Every op of the key listed, and only fewer of them counted as annotated (an empty census is another story)."""
    pairs = list(dict_pairs(seen, expected))
    if not pairs or any(not set(want) <= set(got) for _, got, want in pairs):
        return False
    changes = [annotated_changes(got, want) for _, got, want in pairs]
    return any(changes) and all(change < 0 for found in changes for change in found.values())


def census_misses_input_only(seen: Any, expected: Any) -> bool:
    """Fewer annotated linears in the dynamic graph (their labels have input specs only), none counted extra."""
    return _only_fewer(seen, expected) and any(
        change < 0
        for _, got, want in dict_pairs(seen, expected, ("dynamic",))
        for change in annotated_changes(got, want).values()
    )


SHARED_ONLY_OPS = ("aten.reshape.default", "aten.transpose.int")
"""The ops XNNPACKQuantizer labels only by sharing with their input (``SharedQuantizationSpec``)."""


def census_misses_shared(seen: Any, expected: Any) -> bool:
    """Fewer annotated reshape / transpose (their labels are SharedQuantizationSpec only), none counted extra."""
    return _only_fewer(seen, expected) and any(
        annotated_changes(got, want).get(op, 0) < 0
        for _, got, want in dict_pairs(seen, expected)
        for op in SHARED_ONLY_OPS
    )


def roles_wrong_only_where_tied(seen: Any, expected: Any) -> bool:
    """Only the model whose head shares the token embedding's weight is wrong (its head named after the weight's
    owner), every other model right."""
    pairs = dict_pairs(seen, expected)
    tied = [(got, want) for case, got, want in pairs if case == "tied"]
    others = [got == want for case, got, want in pairs if case != "tied"]
    return bool(tied and others) and all(others) and any(wrong_roles(got, want) for got, want in tied)


LABEL_SHAPES = "label_shapes"
"""The hidden graph whose labels take every shape (None, edges without specs, fixed and derived specs)."""


def census_changes_only_in(seen: Any, expected: Any, case: str) -> dict[str, int]:
    """Op → annotated-count change in ``case``, when every other case (that returned a census) is right; else {}."""
    pairs = dict_pairs(seen, expected)
    if any(got != want for name, got, want in pairs if name != case):
        return {}
    return next((annotated_changes(got, want) for name, got, want in pairs if name == case), {})


def roles_one_node_per_module(seen: Any, expected: Any) -> bool:
    """Where an nn.Linear gives several linear nodes, only one of them (each name once) is there, named right."""
    for _, got, want in dict_pairs(seen, expected):
        names = list(want.values())
        right = all(want[node] == name for node, name in got.items() if node in want)
        if (
            got
            and len(set(names)) < len(names)
            and set(got) < set(want)
            and len(set(got.values())) == len(got)
            and right
        ):
            return True
    return False


def roles_reshuffled(seen: Any, expected: Any) -> bool:
    """The right names on the wrong nodes: every linear named, the names a reshuffle of the key's."""
    for _, got, want in dict_pairs(seen, expected):
        if set(got) == set(want) and wrong_roles(got, want) and sorted(map(str, got.values())) == sorted(want.values()):
            return True
    return False


def roles_named_after_weight_owner(seen: Any, expected: Any) -> bool:
    """Only Looped's head is wrong, named after the embedding whose weight it shares; every other linear right."""
    pairs = dict_pairs(seen, expected)
    wrong = [pair for _, got, want in pairs for pair in wrong_roles(got, want)]
    return bool(wrong) and set(wrong) == {TIED} and all(set(got) == set(want) for _, got, want in pairs)


HAND_LABELS = "hand_labels"
"""The public graph whose labels take every shape (``hand_labelled``); only annotated, no observers."""


def hand_changes(seen: Any, expected: Any) -> dict[str, int] | None:
    """Op → annotated-count change in the hand-labelled graph (None when either census is missing)."""
    got, want = diagnosis.value(seen, HAND_LABELS), diagnosis.value(expected, HAND_LABELS)
    if not isinstance(got, dict) or not isinstance(want, dict) or not got:
        return None
    return annotated_changes(got, want)


def _hand(seen: Any, expected: Any, op: str) -> int:
    return (hand_changes(seen, expected) or {}).get(f"aten.{op}", 0)


def census_observers_only(seen: Any, expected: Any) -> bool:
    """Ops the key never counts counted as annotated in the prepared graphs, yet nothing counted in the graph that
    is only annotated (no observer there yet)."""
    got = diagnosis.value(seen, HAND_LABELS)
    nothing = isinstance(got, dict) and bool(got) and all(census_counts(got, op) == 0 for op in got)
    return nothing and census_counts_unlabelled_ops(seen, expected)


def census_producers(seen: Any, expected: Any) -> bool:
    """In the graph that is only annotated, layer_norm (whose output only the up linear's input edge quantizes)
    counted as annotated, and only more counted."""
    changes = hand_changes(seen, expected)
    return bool(changes) and _hand(seen, expected, "layer_norm.default") > 0 and min(changes.values()) > 0


def census_annotated_flag(seen: Any, expected: Any) -> bool:
    """The tanh's output-only label with ``_annotated`` left False not counted, while XNNPACK's output-only label
    on the relu and the fixed spec on the sigmoid are."""
    return (
        _hand(seen, expected, "tanh.default") < 0
        and _hand(seen, expected, "relu.default") == 0
        and _hand(seen, expected, "sigmoid.default") == 0
    )


def census_label_object(seen: Any, expected: Any) -> bool:
    """The empty claimed label on the last linear counted, nothing counted less."""
    changes = hand_changes(seen, expected)
    return bool(changes) and _hand(seen, expected, "linear.default") > 0 and min(changes.values()) >= 0


def census_output_only_missed(seen: Any, expected: Any) -> bool:
    """The relu's output-only label (XNNPACK's, after a linear) not counted, the linears right, nothing counted
    more."""
    changes = hand_changes(seen, expected)
    return (
        bool(changes)
        and _hand(seen, expected, "relu.default") < 0
        and _hand(seen, expected, "linear.default") == 0
        and max(changes.values()) <= 0
    )


def census_map_keys(seen: Any, expected: Any) -> bool:
    """The add, whose input edges are listed with None specs, counted; the linears right, nothing counted less."""
    changes = hand_changes(seen, expected)
    return (
        bool(changes)
        and _hand(seen, expected, "add.Tensor") > 0
        and _hand(seen, expected, "linear.default") == 0
        and min(changes.values()) > 0
    )


def census_none_label(seen: Any, expected: Any) -> bool:
    """The hand-labelled graph (None under ANNOTATION_KEY on the layer_norm) raised about NoneType."""
    return "NoneType" in diagnosis.error_message(seen, HAND_LABELS)


def census_spec_classes(seen: Any, expected: Any) -> bool:
    """The sigmoid's fixed or the mul's derived spec not counted, while the plain and shared specs are (the linears,
    the tanh, the reshapes and transposes)."""
    changes = hand_changes(seen, expected)
    missed = _hand(seen, expected, "sigmoid.default") < 0 or _hand(seen, expected, "mul.Tensor") < 0
    return (
        bool(changes)
        and missed
        and max(changes.values()) <= 0
        and _hand(seen, expected, "tanh.default") == 0
        and _hand(seen, expected, "linear.default") == 0
        and not census_misses_shared(seen, expected)
    )


GETITEM = str(operator.getitem)


def census_aten_only(seen: Any, expected: Any) -> bool:
    """The getitem after split (target operator.getitem, no aten. name) left out, every other op right."""
    for _, got, want in dict_pairs(seen, expected):
        if GETITEM in want and GETITEM not in got and all(got.get(op) == want[op] for op in want if op != GETITEM):
            return True
    return False


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------

_ROOT = ("L__self__", ("", "__main__.TiedLM"))
_LINEAR_CLASS = "torch.nn.modules.linear.Linear"


def _tied_graph() -> list[tuple[Any, str]]:
    """The linear nodes of a graph written the way torch.export writes it for TiedLM: embed → body (a Gate whose
    proj, bias=False, runs twice; a ReLU; a Linear) → head, bias=False, whose weight is embed's (tied: its get_attr
    reads embed.weight). Each linear with the name of the nn.Linear it comes from."""
    import torch

    aten = torch.ops.aten
    graph = torch.fx.Graph()

    def stack(*entries: tuple[str, str, str]) -> dict[str, tuple[str, str]]:
        return dict([_ROOT, *((key, (name, cls)) for key, name, cls in entries)])

    def call(target: Any, args: tuple[Any, ...], name: str, where: dict[str, tuple[str, str]]) -> Any:
        node = graph.call_function(target, args)
        node._rename(name)
        node.meta["nn_module_stack"] = where
        return node

    body = ("L__self__body", "body", "torch.nn.modules.container.Sequential")
    gate = ("L__self__body.0", "body.0", "__main__.Gate")
    tokens = graph.placeholder("tokens")
    embed_weight = graph.get_attr("embed.weight")
    proj_weight = graph.get_attr("body.0.proj.weight")
    out_weight, out_bias = graph.get_attr("body.2.weight"), graph.get_attr("body.2.bias")
    h = call(
        aten.embedding.default, (embed_weight, tokens), "embedding", stack(("L__self__embed", "embed", "Embedding"))
    )
    first = call(
        aten.linear.default,
        (h, proj_weight),
        "linear",
        stack(body, gate, ("L__self__body.0.proj", "body.0.proj", _LINEAR_CLASS)),
    )
    h = call(aten.tanh.default, (first,), "tanh", stack(body, gate))
    again = call(
        aten.linear.default,
        (h, proj_weight),
        "linear_1",
        stack(body, gate, ("L__self__body.0.proj@1", "body.0.proj", _LINEAR_CLASS)),
    )
    h = call(
        aten.relu.default,
        (again,),
        "relu",
        stack(body, ("L__self__body.1", "body.1", "torch.nn.modules.activation.ReLU")),
    )
    out = call(
        aten.linear.default,
        (h, out_weight, out_bias),
        "linear_2",
        stack(body, ("L__self__body.2", "body.2", _LINEAR_CLASS)),
    )
    head = call(aten.linear.default, (out, embed_weight), "linear_3", stack(("L__self__head", "head", _LINEAR_CLASS)))
    graph.output(head)
    return [(first, "body.0.proj"), (again, "body.0.proj"), (out, "body.2"), (head, "head")]


def _check_layer_of(layer_of: Any) -> list[str]:
    problems = []
    for node, want in _tied_graph():
        got = layer_of(node)
        if got != want:
            weight = node.args[1].target
            problems.append(f"{node.name}（weight 讀的是 {weight}）：應該回傳 {want!r}，你的是 {got!r}")
    return problems


LAYER_OF = Practice(
    "layer_of",
    "寫 layer_of(node)：node 是 export 之後圖上的一個 linear node，回傳它來自的那個 nn.Linear 在模型裡的名字（例如 body.0.proj）。"
    "檢查用的圖照 export 的寫法寫成：body.0.proj 沒有 bias、被呼叫兩次；最後的 head 也沒有 bias，"
    "它的 weight 和 embed 共用（tied），get_attr 讀的是 embed.weight。",
    "def layer_of(node):\n    raise NotImplementedError()\n",
    _check_layer_of,
    'node.meta["nn_module_stack"] 是一個 dict，由外到內排：第一項是整個模型，最後一項才是 linear 所在的 nn.Linear。'
    "每一項的值是 (名字, 類別)：取最後一項的值，回傳它的第一個元素。key 只是 export 內部的代號。",
    "def layer_of(node):\n"
    '    entries = list(node.meta["nn_module_stack"].values())\n'
    "    name, _cls = entries[-1]\n"
    "    return name\n",
    "weight 的名字說的是誰擁有那個參數，不是誰在用它：tied 的 head 讀的是 embed.weight。",
)


ROLES_MISCONCEPTIONS = (
    Misconception(
        "bias_name",
        "從 bias 的名字讀 module 的名字",
        "你可能從 node.args[2]（bias 的 get_attr）的名字去掉 .bias，得到 module 的名字。"
        "可是 linear 不一定有 bias：bias=False 的 nn.Linear export 之後只有兩個引數，node.args[2] 不存在。"
        'module 的名字要從 node.meta["nn_module_stack"] 讀，每個 linear 都有。',
        ROLES_RULES,
        public=roles_need_bias,
        practice=LAYER_OF,
    ),
    Misconception(
        "one_node_per_module",
        "以為一個 nn.Linear 只對到一個 linear node",
        "同一個 module 在 forward 裡被呼叫幾次，圖上就有幾個 linear node，它們都來自同一個 nn.Linear（共用的層就是這樣）。"
        "每個 linear node 都要有一項，不同的 node 可以對到同一個名字；不要因為名字出現過就跳過，也不要用 module 名字當 key。",
        ROLES_RULES,
        public=roles_one_node_per_module,
    ),
    Misconception(
        "stack_key",
        "把 nn_module_stack 的 key 當成 module 的名字",
        "nn_module_stack 的 key 是 export 內部用的代號（像 L__self__blocks.0.attn.q），同一個 module 第二次被呼叫時還會多一個 @1 的尾巴。"
        "module 在模型裡的名字是每一項的值 (名字, 類別) 的第一個元素，要讀值，不要讀 key。",
        ROLES_RULES,
        public=roles_are_stack_keys,
        practice=LAYER_OF,
    ),
    Misconception(
        "every_module_op",
        "有 nn_module_stack 的 node 都當成 linear",
        "每個 call_function node 都屬於某個 module：layer_norm、matmul、softmax 也有 nn_module_stack。"
        "練習只要 linear node，先用 node.target == torch.ops.aten.linear.default 挑出 linear，再讀它的 module。",
        GRAPH,
        public=roles_of_other_nodes,
    ),
    Misconception(
        "module_class",
        "回傳 module 的類別，不是它的名字",
        "nn_module_stack 每一項的值是 (名字, 類別)；類別（nn.Linear）對每個 linear 都一樣，分不出 q、k、v。"
        "練習要的是名字，也就是值的第一個元素，例如 blocks.0.attn.q。",
        GRAPH,
        public=roles_are_classes,
        practice=LAYER_OF,
    ),
    Misconception(
        "node_name",
        "以為 node 的名字說明了它是哪一層",
        "linear、linear_1 這些名字只是 export 依出現順序取的編號，和 nn.Linear 在模型裡叫什麼無關。"
        '每個 node 來自哪個 module 寫在 node.meta["nn_module_stack"]，要從那裡讀。',
        GRAPH,
        public=roles_are_node_names,
        practice=LAYER_OF,
    ),
    Misconception(
        "outer_module",
        "取了外層的 module，不是最內層的 nn.Linear",
        "nn_module_stack 由外到內排列：第一項是整個模型（名字是空字串），接著是 block、attention，最後一項才是 linear 所在的 nn.Linear。"
        "要取最後一項：它的名字才是 linear 所在的那個 nn.Linear 的名字。",
        GRAPH,
        public=roles_are_outer_modules,
        practice=LAYER_OF,
    ),
    Misconception(
        "weight_name",
        "從 weight 的名字讀 module 的名字",
        "你可能從 linear 的 weight（node.args[1] 的 get_attr target，例如 blocks.0.attn.q.weight）去掉 .weight 得到 module 的名字。"
        "可是 weight 可以共用：很多語言模型的 head 和 token embedding 用同一個 weight，export 之後 head 的 weight 讀的是 embedding 的名字。"
        'linear 來自哪個 nn.Linear 要從 node.meta["nn_module_stack"] 的最後一項讀。',
        ROLES_RULES,
        public=roles_named_after_weight_owner,
        practice=LAYER_OF,
    ),
    Misconception(
        "fixed_order",
        "假設 linear 照固定的順序出現",
        "你可能照 q、k、v、out、fc1、fc2 的順序，把角色依序配給圖上的 linear。"
        "圖上的順序跟著 forward 的寫法走：先算 MLP 的 block、重複使用的 block，順序和個數都不一樣。"
        "每個 linear 的來源要各自從 nn_module_stack 讀，不要靠順序推。",
        ROLES_RULES,
        public=roles_reshuffled,
    ),
)

CENSUS_MISCONCEPTIONS = (
    Misconception(
        "counts_every_node",
        "把 call_function 以外的 node 也數進去",
        "圖上還有 placeholder、get_attr（weight、buffer）、observer 的 call_module 和 output，它們不是運算。"
        '練習只數 node.op == "call_function" 的 node，key 是 str(node.target)。',
        CENSUS_RULES,
        public=census_extra_keys,
    ),
    Misconception(
        "counts_observers",
        "數的是 observer，不是 node",
        "你可能數每個 op 後面接了幾個 observer。可是一個 op 的輸出可能有好幾個 observer，也可能一個都沒有"
        "（dynamic 的 linear 的 observer 在輸入邊上，只 annotate 的圖根本還沒有 observer），數出來的次數就不是 node 的個數。"
        "每個 call_function node 算一次，看它自己的標籤有沒有規格。",
        CENSUS_RULES,
        public=census_totals_differ,
        practice=HAS_SPEC,
    ),
    Misconception(
        "observer_means_annotated",
        "以為後面接著 observer 的 op 就是標到",
        "observer 插在哪裡由標籤決定，但不一定插在被標的 op 後面：linear 的輸入邊有規格時，observer 接在 layer_norm、gelu 的輸出上，"
        "它們自己卻沒有標籤；只 annotate、還沒 prepare 的圖更是一個 observer 都沒有。"
        "有沒有標到要看 node.meta[ANNOTATION_KEY] 裡的規格。",
        WHAT_IS_LABELLED,
        public=census_observers_only,
        practice=HAS_SPEC,
    ),
    Misconception(
        "producer_counted",
        "consumer 的輸入邊規格也算在 producer 頭上",
        "consumer 的 input_qspec_map 裡以 producer 為 key 的規格，是貼在 consumer 上的邊標籤，不是 producer 的標籤。"
        "layer_norm 的輸出被 linear 的輸入邊量化，layer_norm 自己仍然沒有標到；只看每個 node 自己的標籤。",
        EDGE_AND_OUTPUT,
        public=census_producers,
        practice=HAS_SPEC,
    ),
    Misconception(
        "annotated_flag",
        "用 _annotated 判斷有沒有標到",
        "_annotated 只是「這個 node 已經有 Quantizer 認領」的記號：空標籤的 _annotated 是 True，卻沒有任何規格；"
        "別的 Quantizer 貼的標籤也可能沒設 _annotated，卻有規格。有沒有標到只看規格有沒有一份不是 None。",
        EMPTY_LABEL,
        public=census_annotated_flag,
        practice=HAS_SPEC,
    ),
    Misconception(
        "label_object_counts",
        "有標籤物件就算標到",
        "node.meta 裡有 ANNOTATION_KEY 不代表這個 op 會被量化：空標籤 QuantizationAnnotation(_annotated=True) 一份規格都沒有，"
        "作用正好是讓 op 留在 fp32。要看 input_qspec_map 的值與 output_qspec，至少有一個不是 None 才算標到。",
        EMPTY_LABEL,
        public=census_label_object,
        practice=HAS_SPEC,
    ),
    Misconception(
        "output_spec_only",
        "只看輸出規格",
        "只有輸入規格的標籤也是標到：dynamic 設定的 linear 只有輸入邊（activation 與 weight）的規格，沒有輸出規格；"
        "linear 和後面的 relu 融合時，linear 也只有輸入規格。input_qspec_map 的值和 output_qspec 都要看。",
        CENSUS_RULES,
        public=census_misses_input_only,
        practice=HAS_SPEC,
    ),
    Misconception(
        "input_specs_only",
        "只看輸入邊的規格",
        "只有輸出規格的標籤也是標到：和 linear 融合的 relu、別的 Quantizer 只貼了輸出規格的 op，input_qspec_map 都是空的。"
        "input_qspec_map 的值和 output_qspec 都要看，有一個不是 None 就算標到。",
        CENSUS_RULES,
        public=census_output_only_missed,
        practice=HAS_SPEC,
    ),
    Misconception(
        "map_keys_count",
        "input_qspec_map 有 key 就算標到",
        "input_qspec_map 的 key 只是列出輸入邊，值才是規格：{x: None} 列了一條邊，卻沒有要量化它。"
        "你看的是 map 是不是空的（或 len），這種標籤就被算成標到了。要看值：input_qspec_map.values() 與 output_qspec 裡至少有一個不是 None。",
        CENSUS_RULES,
        public=census_map_keys,
        practice=HAS_SPEC,
    ),
    Misconception(
        "label_none",
        "以為有 ANNOTATION_KEY 就一定有標籤物件",
        "別的 Quantizer 可以在 node.meta 裡放 ANNOTATION_KEY: None，有 key、卻沒有標籤物件；"
        "你直接讀它的 input_qspec_map，就出錯了（'NoneType' object has no attribute）。"
        "先用 node.meta.get(ANNOTATION_KEY) 取出來，是 None 就算沒標到。",
        CENSUS_RULES,
        public=census_none_label,
        practice=HAS_SPEC,
    ),
    Misconception(
        "known_spec_classes",
        "只認得兩種規格類別",
        "規格不只這兩種：FixedQParamsQuantizationSpec（固定的 scale 與 zero point，sigmoid、softmax 常用）和 "
        "DerivedQuantizationSpec（由別的 observer 算出來，例如 bias 的 scale）也是規格。"
        "用 isinstance 一一列出類別，就會漏掉其中幾種；判斷時只要規格不是 None 就算標到。",
        WHAT_IS_LABELLED,
        public=census_spec_classes,
        practice=HAS_SPEC,
    ),
    Misconception(
        "aten_ops_only",
        "只數 aten 的 op",
        "圖上的 call_function 不只 torch.ops.aten 的 op：split 之後取出每一份的 getitem，target 是 Python 的 operator.getitem，"
        "str(node.target) 是 '<built-in function getitem>'。練習要圖上每一種 call_function 都有一項，不要用名字是否以 aten. 開頭來過濾。",
        CENSUS_RULES,
        public=census_aten_only,
    ),
    Misconception(
        "plain_specs_only",
        "SharedQuantizationSpec 不算規格",
        "SharedQuantizationSpec 也是規格：它的意思是「和另一個位置共用同一個 observer」，那個位置一樣會被量化。"
        "q、k、v 之後的 reshape、transpose 只有共用的規格，它們也標到了；判斷時只要規格不是 None 就算，不要只認 QuantizationSpec。",
        WHAT_IS_LABELLED,
        public=census_misses_shared,
        practice=HAS_SPEC,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "linear_roles",
        ROLES_TITLE,
        ("linear_roles",),
        {
            "shipped": shipped,
            "one_layer_no_bias": one_layer_no_bias,
            "backward_blocks": backward_blocks,
            "looped": looped,
        },
        misconceptions=ROLES_MISCONCEPTIONS,
    ),
    Exercise(
        "annotation_census",
        CENSUS_TITLE,
        ("annotation_census",),
        {"static": static, "dynamic": dynamic, "hand_labels": hand_labels},
        case_seconds=90,  # the first case imports ExecuTorch (seconds, more on a busy machine)
        misconceptions=CENSUS_MISCONCEPTIONS,
    ),
)
