"""Public cases of M03-4 共用 qparams (AddQuantizer, CatQuantizer) on the chapter's own models.

The evidence is canonical (``selfcheck.public.m03_1``): each labelled position with the spec it
ends up using (a ``SharedQuantizationSpec`` resolved to the spec it shares), which nodes are
claimed, the observers on every edge and the groups of edges one observer instance serves.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY, MinMaxObserver, QuantizationAnnotation, QuantizationSpec, Quantizer
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.probes import ChainQuantizer as Chain
from selfcheck.public.m03_1 import labels, observers

ADD = torch.ops.aten.add.Tensor
CAT = torch.ops.aten.cat.default


class ClaimsFirst(Quantizer):
    """Another backend's Quantizer: claims the first ``target`` op with int8 [-100, 100] symmetric labels
    (``claim=False``: leaves the same labels as a draft nobody claimed, ``_annotated=False``)."""

    def __init__(self, target: Any, claim: bool = True) -> None:
        self.target = target
        self.claim = claim

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
            input_qspec_map=dict.fromkeys(node.all_input_nodes, spec), output_qspec=spec, _annotated=self.claim
        )
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def prepared(
    quantizer: Quantizer, model: nn.Module, inputs: tuple[torch.Tensor, ...], rename: dict[str, str] | None = None
) -> dict[str, Any]:
    """Export, prepare with ``quantizer``: the labels, the claimed nodes and the observers. ``rename``: nodes
    renamed after export (as a graph pass may), old name → new name."""
    from common.pt2e import export_module, prepare_pt2e

    exported = export_module(model.eval(), inputs)
    for node in exported.graph.nodes:
        if node.name in (rename or {}):
            node._rename(rename[node.name])
    gm = prepare_pt2e(exported, quantizer)
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


class AddConstants(nn.Module):
    """self.w + x (an nn.Parameter first) and self.offset + 1.0 (a buffer and a scalar: no activation at all)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, 4))
        self.register_buffer("offset", torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.w + x, self.offset + 1.0


class AddcmulThenAdd(nn.Module):
    """x + addcmul(x, x, addend): an op whose name contains add but is not an add, an input called addend."""

    def forward(self, x: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
        return x + torch.addcmul(x, x, addend)


class CatConstants(nn.Module):
    """cat([self.pad, relu(x), self.w]) (a buffer first, an nn.Parameter last) and cat([self.pad, self.w])
    (model constants only)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pad", torch.zeros(1, 4))
        self.w = nn.Parameter(torch.ones(1, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat([self.pad, torch.relu(x), self.w], dim=0), torch.cat([self.pad, self.w], dim=0)


class CatRepeats(nn.Module):
    """cat([x, x]) and cat([r, x * 2, r]) with r = relu(x): one node listed twice in a cat's inputs."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.relu(x)
        return torch.cat([x, x]), torch.cat([r, x * 2, r], dim=1)


class CatOfInput(nn.Module):
    """cat of relu(x) and an input called category."""

    def forward(self, x: torch.Tensor, category: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(x), category], dim=0)


ADD_RENAMED = "total"
"""The add of ``add_by_target``, renamed after export (its name no longer says add)."""
CAT_RENAMED = "joined"
"""The cat of ``cat_by_target``, renamed after export."""


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


def add_constants(ns: Namespace, seed: int) -> Any:
    """self.w + x (an nn.Parameter is a model constant too, and it comes first) and self.offset + 1.0 (no
    activation: not labelled, not claimed)."""
    return {
        "(w + x, offset + 1.0)": prepared(ns["AddQuantizer"](share=True), AddConstants(), seeded_inputs(seed, (2, 4)))
    }


def add_by_target(ns: Namespace, seed: int) -> Any:
    """x + addcmul(x, x, addend) with the add renamed after export: only node.target says which node adds;
    and (a + b) + a whose first add carries a draft label nobody claimed (``_annotated=False``)."""
    return {
        "x + addcmul(x, x, addend)": prepared(
            ns["AddQuantizer"](share=True),
            AddcmulThenAdd(),
            seeded_inputs(seed, (2, 4), (2, 4)),
            rename={"add": ADD_RENAMED},
        ),
        "draft": prepared(
            Chain([ClaimsFirst(ADD, claim=False), ns["AddQuantizer"](share=True)]),
            TwoAdds(),
            seeded_inputs(seed, (2, 4), (2, 4)),
        ),
    }


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool (the chapter's model), and cat_pool with the cat claimed by another Quantizer first."""
    from common.models import example_inputs, get_model

    return {
        "cat_pool": prepared(ns["CatQuantizer"](), get_model("cat_pool"), example_inputs(2)),
        "claimed": prepared(Chain([ClaimsFirst(CAT), ns["CatQuantizer"]()]), get_model("cat_pool"), example_inputs(2)),
    }


def cat_constants(ns: Namespace, seed: int) -> Any:
    """cat([pad, relu(x), w]) with a buffer first and an nn.Parameter last, and cat([pad, w]) of constants only."""
    return {"constants": prepared(ns["CatQuantizer"](), CatConstants(), seeded_inputs(seed, (2, 4)))}


def cat_by_target(ns: Namespace, seed: int) -> Any:
    """cat of relu(x) and an input called category, the cat renamed after export; and a cat of three inputs
    carrying a draft label nobody claimed (``_annotated=False``)."""
    return {
        "cat(relu, category)": prepared(
            ns["CatQuantizer"](), CatOfInput(), seeded_inputs(seed, (2, 4), (2, 4)), rename={"cat": CAT_RENAMED}
        ),
        "draft": prepared(
            Chain([ClaimsFirst(CAT, claim=False), ns["CatQuantizer"]()]), CatThree(), seeded_inputs(seed, (2, 3, 4, 4))
        ),
    }


def cat_repeats(ns: Namespace, seed: int) -> Any:
    """A cat of x and x, and a cat of r, x * 2 and r: a repeated input is one edge, labelled once."""
    return {
        "cat([x, x]), cat([r, x * 2, r])": prepared(ns["CatQuantizer"](), CatRepeats(), seeded_inputs(seed, (2, 4)))
    }


def cat_three(ns: Namespace, seed: int) -> Any:
    """A cat of three inputs (all three input edges and the output share one observer), and a cat of
    relu(x) and a model constant (the constant is not labelled)."""
    return {
        "three": prepared(ns["CatQuantizer"](), CatThree(), seeded_inputs(seed, (2, 3, 4, 4))),
        "constant": prepared(ns["CatQuantizer"](), CatConstant(), seeded_inputs(seed, (2, 4))),
    }


# --- where the chapter teaches it ----------------------------------------------------------------

SHARED_SPEC = Section("A. 顯式共用：SharedQuantizationSpec")
LIMITS = Section("`BasicAddQuantizer` 的假設在哪裡不成立")
ADD_RULES = Section("練習 1：AddQuantizer（7 分）")
WITH_XNNPACK = Section("和 XNNPACKQuantizer 一起用")
CAT_RULES = Section("練習 2：CatQuantizer（3 分）")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
BY_TARGET = Section("A. 依 `node.target` 找 op", notebook="M03-3")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------


def _shared_groups(seen: Any, case: str, *path: str) -> list[list[str]] | None:
    groups = diagnosis.value(seen, case, *path, "shared")
    return groups if isinstance(groups, list) else None


def _raised(seen: Any, error: str, says: str = "") -> bool:
    return any(
        name == error and says in diagnosis.error_message(seen, case) for case, name in diagnosis.errors(seen).items()
    )


def _recursion(seen: Any, expected: Any) -> bool:
    """a + a: the one edge (a, add) labelled, then made to share with itself; prepare_pt2e's search for the spec it
    shares never ends."""
    return diagnosis.error(seen, "self_and_claimed") == "RecursionError"


def _cat_recursion(seen: Any, expected: Any) -> bool:
    """cat([x, x]) or cat([r, x * 2, r]): the repeated input's edge labelled twice, the second time sharing with
    itself."""
    return diagnosis.error(seen, "repeats") == "RecursionError"


def _anchor_not_observed(seen: Any, expected: Any) -> bool:
    """prepare_pt2e found no observer at the position shared: the add's / cat's own output (a shared spec naming
    a producer's output is another mistake, ``labels_producer_outputs``)."""
    return any(
        name == "AssertionError"
        and re.search(r"has observer.*: '(add|cat)(_\d+)?' not in", diagnosis.error_message(seen, case)) is not None
        for case, name in diagnosis.errors(seen).items()
    )


def _anchor_on_producer(seen: Any, expected: Any) -> bool:
    return any(
        name == "KeyError" and not diagnosis.error_message(seen, case).startswith("(")
        for case, name in diagnosis.errors(seen).items()
    )


def _scalar_key(seen: Any, expected: Any) -> bool:
    return _raised(seen, "Exception", "Expected input_edge to have type Tuple[Node, Node]")


def _never_shares(seen: Any, expected: Any) -> bool:
    return _shared_groups(seen, "residual", "share=True") == [] and bool(
        _shared_groups(expected, "residual", "share=True")
    )


def _shares_without_share(seen: Any, expected: Any) -> bool:
    return (
        bool(_shared_groups(seen, "residual", "share=False"))
        and _shared_groups(expected, "residual", "share=False") == []
    )


def _output_apart(seen: Any, expected: Any) -> bool:
    got, want = _shared_groups(seen, "residual", "share=True"), _shared_groups(expected, "residual", "share=True")
    return bool(got and want) and all("add → relu_1" not in group for group in got) and len(got[0]) >= 2


def _labels(evidence: Any, case: str, *path: str) -> dict[str, Any]:
    """The labels of one public case; empty when the case raised (a crash is not this kind of mistake)."""
    found = diagnosis.value(evidence, case, *path, "labels")
    return found if isinstance(found, dict) else {}


def _user_edges(seen: Any, expected: Any) -> bool:
    got, want = _labels(seen, "residual", "share=True"), _labels(expected, "residual", "share=True")
    return bool(got) and "add → relu_1" in got and "add 的輸出" in want and "add 的輸出" not in got


def _constant_labelled(seen: Any, expected: Any) -> bool:
    """A model constant labelled: the buffer b, or the nn.Parameter w."""
    return "b → add" in _labels(seen, "self_and_claimed", "(x + b) + 1.0") or "w → add" in _labels(
        seen, "constants", "(w + x, offset + 1.0)"
    )


def _claim_overwritten(seen: Any, expected: Any) -> bool:
    got, want = _labels(seen, "self_and_claimed", "(a + b) + a"), _labels(expected, "self_and_claimed", "(a + b) + a")
    return bool(got and want) and got.get("a → add") != want.get("a → add")


def _unmarked(seen: Any, expected: Any) -> bool:
    got = diagnosis.value(seen, "residual", "share=True", "claimed")
    return got == [] and bool(diagnosis.value(expected, "residual", "share=True", "claimed"))


def _histogram(seen: Any, expected: Any) -> bool:
    return any("HistogramObserver" in str(text) for text in _labels(seen, "residual", "share=True").values()) or any(
        "HistogramObserver" in str(text) for text in _labels(seen, "cat_pool", "cat_pool").values()
    )


def _at(labels: dict[str, Any], node: str) -> list[str]:
    """The labelled positions of ``node``: its input edges and its output."""
    return [p for p in labels if p.split(" → ")[-1].removesuffix(" 的輸出") == node]


def _only_failure(seen: Any, case: str, error: str, says: str) -> bool:
    """``case`` alone raised ``error`` with ``says`` in its message; every other case returned."""
    return (
        diagnosis.error(seen, case) == error
        and says in diagnosis.error_message(seen, case)
        and set(diagnosis.errors(seen)) == {case}
    )


def _works_on_plain_adds(seen: Any) -> bool:
    """The residual add (two activations) is labelled: the quantizer works at all."""
    return bool(_labels(seen, "residual", "share=True"))


def _anchor_on_constant_edge(seen: Any, expected: Any) -> bool:
    """w + x: the shared specs point at the edge (w, add) from the constant, which has no label (KeyError)."""
    return diagnosis.error(seen, "constants") == "KeyError" and diagnosis.error_message(seen, "constants").startswith(
        "(w, "
    )


def _crashes_without_activation(seen: Any, expected: Any) -> bool:
    """offset + 1.0 has no activation input: taking the first one raised IndexError, every other case ran."""
    return _only_failure(seen, "constants", "IndexError", "list index out of range")


def _claims_unlabelled_in(seen: Any, expected: Any, *place: str) -> bool:
    """A node claimed (``_annotated=True``) without any label, where the key neither labels nor claims it."""
    got, want = diagnosis.value(seen, *place, "claimed"), diagnosis.value(expected, *place, "claimed")
    if not isinstance(got, list) or not isinstance(want, list):
        return False
    labels = _labels(seen, *place)
    return any(node not in want and not _at(labels, str(node)) for node in got)


def _claims_unlabelled(seen: Any, expected: Any) -> bool:
    return _claims_unlabelled_in(seen, expected, "constants", "(w + x, offset + 1.0)")


def _cat_claims_unlabelled(seen: Any, expected: Any) -> bool:
    return _claims_unlabelled_in(seen, expected, "constants", "constants")


def _skips_constant_operand(seen: Any, expected: Any) -> bool:
    """(x + b) + 1.0 left unlabelled while the residual add (two activations) is labelled."""
    place = ("self_and_claimed", "(x + b) + 1.0")
    return (
        diagnosis.value(seen, *place, "labels") == {} and bool(_labels(expected, *place)) and _works_on_plain_adds(seen)
    )


def _by_name(seen: Any, expected: Any, place: tuple[str, ...], renamed: str, look_alike: str) -> bool:
    """A look-alike node labelled (its name says add / cat), or the renamed op left without labels."""
    got, want = _labels(seen, *place), _labels(expected, *place)
    if not want:
        return False
    if look_alike and _at(got, look_alike):
        return True
    return bool(_at(want, renamed)) and not _at(got, renamed) and diagnosis.value(seen, *place, "labels") is not None


def _found_by_name(seen: Any, expected: Any) -> bool:
    return _works_on_plain_adds(seen) and _by_name(
        seen, expected, ("by_target", "x + addcmul(x, x, addend)"), ADD_RENAMED, "addcmul"
    )


def _cat_found_by_name(seen: Any, expected: Any) -> bool:
    """The input called category taken for a cat (reading its args raised IndexError), or the renamed cat missed."""
    if _only_failure(seen, "by_target", "IndexError", "tuple index out of range"):
        return True
    return bool(_labels(seen, "cat_pool", "cat_pool")) and _by_name(
        seen, expected, ("by_target", "cat(relu, category)"), CAT_RENAMED, ""
    )


def _draft_kept(seen: Any, expected: Any, case: str) -> bool:
    """The draft label nobody claimed (int8 [-100,100]) is still there where the key relabelled it."""
    got, want = _labels(seen, case, "draft"), _labels(expected, case, "draft")
    return any("[-100,100]" in str(text) and "[-100,100]" not in str(want.get(p)) for p, text in got.items())


def _skips_draft(seen: Any, expected: Any) -> bool:
    return _draft_kept(seen, expected, "by_target")


def _cat_skips_draft(seen: Any, expected: Any) -> bool:
    return _draft_kept(seen, expected, "by_target")


def _cat_first_entry(seen: Any, expected: Any) -> bool:
    """cat([pad, relu, w]): the constant listed first is labelled, the other constant is not."""
    got = _labels(seen, "constants", "constants")
    return "pad → cat" in got and "w → cat" not in got


def _cat_unlabelled(seen: Any, expected: Any) -> bool:
    return diagnosis.value(seen, "cat_pool", "cat_pool", "labels") == {} and bool(
        _labels(expected, "cat_pool", "cat_pool")
    )


def _cat_third_missing(seen: Any, expected: Any) -> bool:
    got, want = _labels(seen, "three_inputs", "three"), _labels(expected, "three_inputs", "three")
    return bool(got) and "x → cat" in want and "x → cat" not in got and "relu → cat" in got


def _cat_never_shares(seen: Any, expected: Any) -> bool:
    return _shared_groups(seen, "cat_pool", "cat_pool") == [] and bool(_shared_groups(expected, "cat_pool", "cat_pool"))


def _cat_output_apart(seen: Any, expected: Any) -> bool:
    got = _shared_groups(seen, "three_inputs", "three")
    return bool(got) and all("cat → output" not in group for group in got)


def _cat_producer_output(seen: Any, expected: Any) -> bool:
    got = _labels(seen, "cat_pool", "cat_pool")
    return any(position.endswith(" 的輸出") and not position.startswith("cat") for position in got)


def _cat_constant_labelled(seen: Any, expected: Any) -> bool:
    """A model constant labelled: a buffer (pad) or an nn.Parameter (w)."""
    got = _labels(seen, "constants", "constants")
    return "pad → cat" in _labels(seen, "three_inputs", "constant") or any(
        position.split(" → ")[0] in ("pad", "w") for position in got
    )


def _cat_claim_overwritten(seen: Any, expected: Any) -> bool:
    got, want = _labels(seen, "cat_pool", "claimed"), _labels(expected, "cat_pool", "claimed")
    return bool(got and want) and any(got.get(p) != want[p] for p in want if "[-100,100]" in str(want[p]))


def _cat_unmarked(seen: Any, expected: Any) -> bool:
    got = diagnosis.value(seen, "cat_pool", "cat_pool", "claimed")
    return got == [] and bool(diagnosis.value(expected, "cat_pool", "cat_pool", "claimed"))


# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own ----------------


class _PlainAdd(nn.Module):
    """a + b."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class _BranchAdd(nn.Module):
    """relu(x) + x * 3: both inputs come from x, through two ops."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + x * 3


class _OperandKinds(nn.Module):
    """Adds of every kind of operand: x + x, x + a buffer, a buffer + x, x + 2.0, a buffer + 1.0."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("bias", torch.ones(4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x + x, x + self.bias, self.bias + x, x + 2.0, self.bias + 1.0


def _adds(gm: GraphModule) -> list[Any]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == ADD]


class _EachFound(Quantizer):
    """Hands each node ``find`` lists to the student's ``annotate(node, act_spec())``, then claims the ones it
    labelled (the practice is about the labels, not about _annotated)."""

    def __init__(self, annotate: Any, find: Any) -> None:
        self.label = annotate
        self.find = find

    def annotate(self, model: GraphModule) -> GraphModule:
        from common.qspecs import act_spec

        for node in self.find(model):
            self.label(node, act_spec())
            if ANNOTATION_KEY in node.meta:
                node.meta[ANNOTATION_KEY]._annotated = True
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _prepared(annotate: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...], find: Any = _adds) -> GraphModule:
    """``model`` exported, labelled by ``annotate`` at each node ``find`` lists, prepared and calibrated once."""
    from common.pt2e import export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), _EachFound(annotate, find))
    prepared(*inputs)
    return prepared


def _observer_groups(
    annotate: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...], find: Any = _adds
) -> list[list[str]]:
    """The groups of edges one observer instance serves, once ``annotate`` labelled the nodes ``find`` lists."""
    return observers(_prepared(annotate, model, inputs, find))["shared"]


def _sharing_problems(title: str, shared: list[list[str]], positions: set[str]) -> list[str]:
    """What keeps ``positions`` from being served by one observer instance (empty when one serves them all)."""
    together = next((set(group) & positions for group in shared if set(group) & positions), set())
    if together == positions:
        return []
    if len(together) <= 1:
        return [f"{title}：{len(positions)} 個位置（{'、'.join(sorted(positions))}）各有自己的 observer，沒有共用。"]
    apart = "、".join(sorted(positions - together))
    return [f"{title}：{'、'.join(sorted(together))} 共用一個 observer，{apart} 卻另有一個。"]


def _input_names(got: Any) -> Any:
    """The names of the nodes a student's function returned (anything else as it is, for the message)."""
    return [getattr(a, "name", repr(a)) for a in got] if isinstance(got, list | tuple) else got


def _target_problems(
    answer: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...], find: Any, renamed: str
) -> list[str]:
    """``answer(node)`` must be true for the first node ``find`` lists (renamed ``renamed``, as a pass may) and
    for no other node of ``model``'s graph."""
    from common.pt2e import export_module

    gm = export_module(model.eval(), inputs)
    real = find(gm)[0]
    real.name = renamed
    problems = []
    for node in gm.graph.nodes:
        want = node is real
        got = answer(node)
        if bool(got) is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={node.target}）：應該回傳 {want}，你的是 {got!r}"
            )
    return problems


def _check_share_add(annotate_shared_add: Any) -> list[str]:
    problems = []
    for title, model, inputs, positions in (
        ("a + b", _PlainAdd(), (torch.ones(2, 4), torch.full((2, 4), 5.0)), {"a → add", "b → add", "add → output"}),
        (
            "relu(x) + x * 3",
            _BranchAdd(),
            (torch.linspace(-1, 1, 8).reshape(2, 4),),
            {"relu → add", "mul → add", "add → output"},
        ),
    ):
        problems += _sharing_problems(title, _observer_groups(annotate_shared_add, model, inputs), positions)
    return problems


SHARE_ADD = Practice(
    "annotate_shared_add",
    "寫 annotate_shared_add(node, spec)：node 是一個 add，兩個輸入都是 activation（不同的兩個 node）。"
    "替它貼上標籤，讓兩條輸入邊和 add 的輸出三個位置共用同一個 observer。"
    "檢查會在 a + b 與 relu(x) + x * 3 兩張小圖上 prepare，數每個 observer 服務幾個位置。",
    "from torch.fx import Node\n"
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_shared_add(node, spec):\n"
    "    first, second = node.args[0], node.args[1]\n"
    "    raise NotImplementedError()\n",
    _check_share_add,
    "只有第一個位置用 spec 本身：annotate_input_qspec_map(node, first, spec)。其餘兩個位置都寫同一份 "
    "SharedQuantizationSpec，指向那個第一個位置，也就是邊 (first, node)。",
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_shared_add(node, spec):\n"
    "    first, second = node.args[0], node.args[1]\n"
    "    annotate_input_qspec_map(node, first, spec)\n"
    "    shared = SharedQuantizationSpec((first, node))\n"
    "    annotate_input_qspec_map(node, second, shared)\n"
    "    annotate_output_qspec(node, shared)\n",
    "輸出也用 shared。指向 node 自己的 SharedQuantizationSpec(node) 不行：prepare 處理輸入邊時，輸出還沒有 observer。",
)


def _check_activation_inputs(activation_inputs: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_OperandKinds().eval(), (torch.ones(2, 4),))
    adds = _adds(gm)
    wanted = (["x"], ["x"], ["x"], ["x"], [])
    shown = ("x + x", "x + self.bias", "self.bias + x", "x + 2.0", "self.bias + 1.0")
    problems = []
    for node, want, title in zip(adds, wanted, shown, strict=True):
        names = _input_names(activation_inputs(node))
        if names != want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {names}")
    return problems


ACTIVATION_INPUTS = Practice(
    "activation_inputs",
    "寫 activation_inputs(node)：回傳 add 的 node.args[:2] 裡「要貼標籤」的輸入，也就是來自 activation 的 Node，"
    '每個只出現一次，照原本的順序。Python 純量不是 Node；op == "get_attr" 的是模型常數；add(x, x) 的 x 只算一次。'
    "檢查用一張有五個 add 的小圖：x + x、x + 常數、常數 + x、x + 2.0、常數 + 1.0。",
    "from torch.fx import Node\n\n\ndef activation_inputs(node):\n    raise NotImplementedError()\n",
    _check_activation_inputs,
    '一次只處理一種：先留下 isinstance(a, Node) 的，再去掉 a.op == "get_attr" 的，最後去掉重複的'
    "（list(dict.fromkeys(...)) 會保留第一次出現的順序）。",
    "from torch.fx import Node\n\n\n"
    "def activation_inputs(node):\n"
    '    nodes = [a for a in node.args[:2] if isinstance(a, Node) and a.op != "get_attr"]\n'
    "    return list(dict.fromkeys(nodes))\n",
    "一個都不剩（常數 + 純量）的 add 就不用標：在 AddQuantizer 裡，inputs 是空的就跳過。",
)


def _check_should_annotate(should_annotate: Any) -> list[str]:
    from common.pt2e import export_module
    from common.qspecs import act_spec

    problems = []
    for title, meta, want in (
        ("沒有標籤", None, True),
        ("有標籤，_annotated=False（沒有人認領的草稿）", False, True),
        ("有標籤，_annotated=True（別的 Quantizer 認領了）", True, False),
    ):
        gm = export_module(_PlainAdd().eval(), (torch.ones(2, 4), torch.ones(2, 4)))
        node = _adds(gm)[0]
        if meta is not None:
            node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=act_spec(), _annotated=meta)
        got = should_annotate(node)
        if got is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


SHOULD_ANNOTATE = Practice(
    "should_annotate",
    "寫 should_annotate(node)：這個 add 該不該由你的 Quantizer 貼標籤？只有別的 Quantizer 認領過的"
    "（node.meta[ANNOTATION_KEY]._annotated 是 True）才跳過；沒有標籤、或標籤的 _annotated 是 False，都該你貼。"
    "回傳 True 或 False。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef should_annotate(node):\n    raise NotImplementedError()\n",
    _check_should_annotate,
    "標籤不一定存在：先用 node.meta.get(ANNOTATION_KEY) 拿，拿到 None 就是沒有標籤。有標籤時，答案只看它的 _annotated。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def should_annotate(node):\n"
    "    annotation = node.meta.get(ANNOTATION_KEY)\n"
    "    return annotation is None or not annotation._annotated\n",
    "貼完標籤記得設 _annotated = True：下一個 Quantizer 讀到的就是「有人認領」。",
)


class _Names(nn.Module):
    """An input called add, an addmm, and a real add."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4, 4))

    def forward(self, add: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.addmm(add, y, self.w) + y


def _check_is_add(is_add: Any) -> list[str]:
    return _target_problems(is_add, _Names(), (torch.ones(2, 4), torch.ones(2, 4)), _adds, "renamed_by_a_pass")


IS_ADD = Practice(
    "is_add",
    "寫 is_add(node)：node 是不是一個 add？用 node 做什麼判斷，不要用它叫什麼名字。"
    "檢查用的圖裡有一個名叫 add 的輸入、一個 addmm，和一個被 pass 改過名字的真正的 add。",
    "import torch\n\nADD = torch.ops.aten.add.Tensor\n\n\ndef is_add(node):\n    raise NotImplementedError()\n",
    _check_is_add,
    'node 做什麼寫在兩個屬性：node.op（"call_function" 才是呼叫一個 op）和 node.target（是哪一個 op）。',
    "import torch\n\nADD = torch.ops.aten.add.Tensor\n\n\n"
    "def is_add(node):\n"
    '    return node.op == "call_function" and node.target == ADD\n',
    "名字只是標記：名叫 add 的可能是輸入，addmm 也以 add 開頭，pass 還可能把真正的 add 改名。",
)


def _with_share(annotate_add: Any, node: Any, spec: Any, share: bool) -> None:
    annotate_add(node, spec, share)


def _check_annotate_add(annotate_add: Any) -> list[str]:
    positions = {"a → add", "b → add", "add → output"}
    inputs = (torch.ones(2, 4), torch.full((2, 4), 5.0))
    problems = []
    for share in (True, False):
        shared = _observer_groups(functools.partial(_with_share, annotate_add, share=share), _PlainAdd(), inputs)
        if share:
            problems += _sharing_problems("a + b，share=True", shared, positions)
            continue
        joined = [sorted(set(group) & positions) for group in shared if len(set(group) & positions) > 1]
        problems += [
            f"a + b，share=False：{'、'.join(group)} 共用了一個 observer；share=False 時每個位置應該各有自己的 observer"
            for group in joined
        ]
    return problems


ANNOTATE_ADD = Practice(
    "annotate_add",
    "寫 annotate_add(node, spec, share)：node 是 a + b 的 add，兩個輸入都是 activation。替兩條輸入邊和 add 的輸出貼標籤："
    "share=True 時三個位置共用同一個 observer；share=False 時三個位置都用 spec 本身，各有各的 observer。"
    "檢查在 a + b 上各試一次 share=True 與 share=False，數每個 observer 服務幾個位置。",
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_add(node, spec, share):\n"
    "    first, second = node.args[0], node.args[1]\n"
    "    raise NotImplementedError()\n",
    _check_annotate_add,
    "share 只決定第二條輸入邊和輸出寫什麼：share=True 寫 SharedQuantizationSpec((first, node))，"
    "share=False 就寫 spec 本身。兩種情況都要看 share 決定，不能只在一個位置看。",
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_add(node, spec, share):\n"
    "    first, second = node.args[0], node.args[1]\n"
    "    annotate_input_qspec_map(node, first, spec)\n"
    "    if share:\n"
    "        spec = SharedQuantizationSpec((first, node))\n"
    "    annotate_input_qspec_map(node, second, spec)\n"
    "    annotate_output_qspec(node, spec)\n",
    "同一份一般 spec 貼在三個位置，prepare_pt2e 還是替每個位置建自己的 observer；只有 SharedQuantizationSpec 讓它們共用。",
)


class _AddFan(nn.Module):
    """a + b read by relu, by mul and by the graph's output."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        total = a + b
        return torch.relu(total), total * 3, total


def _check_label_output(label_output: Any) -> list[str]:
    readers = {"add → relu", "add → mul", "add → output"}
    prepared = _prepared(label_output, _AddFan(), (torch.ones(2, 4), torch.full((2, 4), -2.0)))
    written = labels(prepared)["positions"]
    problems = []
    elsewhere = sorted(position for position in written if position != "add 的輸出")
    if elsewhere:
        problems.append(
            f"標籤貼到了 {'、'.join(elsewhere)}：那是 add 的使用者自己的輸入邊，標籤寫在別人的 node 上；"
            "add 的輸出標籤要貼在 add 自己身上"
        )
    if "add 的輸出" not in written and not elsewhere:
        problems.append("add 自己沒有輸出標籤")
    edges = observers(prepared)["edges"]
    bare = sorted(edge for edge in readers if not edges.get(edge))
    if bare:
        problems.append(f"{'、'.join(bare)} 讀到的 add 沒有經過 observer：輸出標籤影響 add 的每個 consumer")
    return problems


LABEL_OUTPUT = Practice(
    "label_output",
    "寫 label_output(node, spec)：替 node 的輸出貼上 spec，讓讀它的每個 consumer（包含圖的輸出）都讀到量化後的值。"
    "檢查用 total = a + b，讀它的有 relu、mul 和圖的輸出；prepare 之後看標籤貼在哪裡、每個 consumer 有沒有經過 observer。",
    "from common.pt2e import annotate_output_qspec\n\n\ndef label_output(node, spec):\n    raise NotImplementedError()\n",
    _check_label_output,
    "輸出標籤只有一張，貼在 node 自己身上：annotate_output_qspec(node, spec)。"
    "不要走訪 node.users 去貼它們的輸入邊：那些標籤屬於別的 node，而且圖的輸出（output node）不會照它量化。",
    "from common.pt2e import annotate_output_qspec\n\n\ndef label_output(node, spec):\n    annotate_output_qspec(node, spec)\n",
    "邊標籤只影響一個 consumer，輸出標籤影響所有 consumer：要讓大家讀同一個量化後的值，就貼在輸出。",
)


def _observer_from(spec: Any) -> torch.nn.Module:
    return spec.observer_or_fake_quant_ctr(
        dtype=spec.dtype, quant_min=spec.quant_min, quant_max=spec.quant_max, qscheme=spec.qscheme
    )


def _spec_cases() -> list[tuple[str, Any, list[torch.Tensor]]]:
    """(what it is, a spec, the batches its observer sees): three observers with the same numbers."""
    from common.pt2e import HistogramObserver, MovingAverageMinMaxObserver

    def spec(observer: Any) -> QuantizationSpec:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-128,
            quant_max=127,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=observer,
        )

    u = torch.linspace(-1.0, 1.0, 201)
    tail = [torch.cat([torch.linspace(-1.0, 1.0, 2001), torch.tensor([40.0])])]
    return [
        ("MinMaxObserver（act_spec 的）", spec(MinMaxObserver), [u, u * 3]),
        ("MovingAverageMinMaxObserver", spec(MovingAverageMinMaxObserver), [u, u * 3]),
        ("HistogramObserver", spec(HistogramObserver), tail),
    ]


def _check_spec_scale(spec_scale: Any) -> list[str]:
    problems = []
    for title, spec, batches in _spec_cases():
        observer = _observer_from(spec)
        for batch in batches:
            observer(batch)
        want = float(observer.calculate_qparams()[0])
        got = spec_scale(spec, [b.clone() for b in batches])
        try:
            mine = float(got)
        except (TypeError, ValueError, RuntimeError):
            problems.append(f"{title}：要回傳 scale（一個數或只有一個值的 tensor），你的是 {got!r}")
            continue
        if abs(mine - want) > 1e-6 * want:
            problems.append(f"規格的 observer 是 {title}，數字都一樣：它算出的 scale 是 {want:.6g}，你的是 {mine:.6g}")
    return problems


SPEC_SCALE = Practice(
    "spec_scale",
    "寫 spec_scale(spec, batches)：spec 是一份 QuantizationSpec，照它建出 prepare_pt2e 會建的那個 observer，"
    "依序看過 batches，回傳它算出的 scale。檢查用三份 int8 [-128, 127] per_tensor_affine 的規格，"
    "只有 observer_or_fake_quant_ctr 不同：MinMaxObserver、MovingAverageMinMaxObserver、HistogramObserver。",
    "def spec_scale(spec, batches):\n    raise NotImplementedError()\n",
    _check_spec_scale,
    "規格的 observer_or_fake_quant_ctr 就是 observer 的類別：用它和規格的 dtype、quant_min、quant_max、qscheme 建一個，"
    "for batch in batches 餵給它，最後 calculate_qparams() 的第一個就是 scale。不要自己用最小值、最大值算。",
    "def spec_scale(spec, batches):\n"
    "    make = spec.observer_or_fake_quant_ctr\n"
    "    observer = make(dtype=spec.dtype, quant_min=spec.quant_min, quant_max=spec.quant_max, qscheme=spec.qscheme)\n"
    "    for batch in batches:\n"
    "        observer(batch)\n"
    "    return observer.calculate_qparams()[0]\n",
    "數字一樣、observer 不同，scale 就不同：MovingAverage 慢慢移動，Histogram 會截掉它認為不值得的尾巴。規格的 observer 也是答案的一部分。",
)

ADD_MISCONCEPTIONS = (
    Misconception(
        "self_add_twice",
        "add(r, r) 的同一條邊貼了兩次",
        "你可能把 node.args[:2] 的兩個輸入各貼一次。add(r, r) 的兩個輸入是同一個 node，兩次寫的是同一條邊："
        "第二次把它改成「和自己共用」，prepare_pt2e 找共用的源頭時繞不出來（RecursionError）。"
        "同一個 node 只算一次，例如 list(dict.fromkeys(...))。",
        LIMITS,
        public=_recursion,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "anchor_on_add_output",
        "輸入邊指向 add 自己的輸出來共用",
        "你可能以為輸入邊寫 SharedQuantizationSpec(node)，「大家和輸出共用」也可以。"
        "prepare_pt2e 先處理輸入邊，那時 add 的輸出還沒有 observer，torchao 的檢查就失敗了。"
        "共用要指向先量化的位置：第一條輸入邊 (inputs[0], node)。",
        SHARED_SPEC,
        public=_anchor_not_observed,
        practice=SHARE_ADD,
    ),
    Misconception(
        "anchor_on_producer_output",
        "SharedQuantizationSpec 指向上游的輸出，而不是那條邊",
        "SharedQuantizationSpec(inputs[0]) 的意思是「和 inputs[0] 這個 node 的輸出共用」，可是那個輸出通常沒有標籤，"
        "torchao 找不到它（KeyError），或讓你共用到別人的標籤。邊要寫成 (producer, consumer)：(inputs[0], node)；"
        "只有 node 的輸出才直接寫 node。",
        SHARED_SPEC,
        public=_anchor_on_producer,
        practice=SHARE_ADD,
    ),
    Misconception(
        "anchor_on_first_argument",
        "共用的位置寫死成 (node.args[0], node)",
        "第一個運算元不一定是 activation：add(self.b, x) 的 node.args[0] 是模型常數，那條邊沒有標籤，"
        "共用就指向一個不存在的位置。錨點要用過濾之後的 inputs[0]，不是 node.args[0]。",
        ADD_RULES,
        public=_anchor_on_constant_edge,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "crash_without_activation",
        "沒想到有的 add 一個 activation 輸入都沒有",
        "像 self.offset + 1.0 這樣的 add，兩個運算元都不是 activation，過濾之後 inputs 是空的，取 inputs[0] 就出錯。"
        "一個 activation 都不剩的 add 不用標，直接跳過。",
        ADD_RULES,
        public=_crashes_without_activation,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "scalar_as_node",
        "把 Python 純量當成 node 貼標籤",
        "add(x, 0.5) 的 0.5 是 Python 的 float，不是圖上的 Node，不能當 input_qspec_map 的 key。"
        "貼標籤之前先用 isinstance(a, Node) 把純量濾掉。",
        LIMITS,
        public=_scalar_key,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "constant_labelled",
        "模型常數也貼了標籤",
        'op == "get_attr" 的 node 是模型常數（buffer），不是 activation：要不要量化、怎麼量化，是 weight、bias 的規格管的事。'
        "add 只標來自 activation 的邊，常數排第一個或第二個都一樣。",
        LIMITS,
        public=_constant_labelled,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "constant_operand_skips_add",
        "以為有常數或純量的 add 整個不用量化",
        "add 的另一個運算元是常數或純量時，activation 那條邊和 add 的輸出還是要量化，只是常數本身不標。"
        "你把整個 add 跳過了，圖上就少了這幾個量化點。",
        ADD_RULES,
        public=_skips_constant_operand,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "shares_without_share",
        "share=False 也共用了",
        "share 是開關：share=False 時每個位置用同一份一般 spec，各有各的 observer；只有 share=True 才寫 "
        "SharedQuantizationSpec。你的程式不看 share，兩種都共用了。",
        SHARED_SPEC,
        public=_shares_without_share,
        practice=ANNOTATE_ADD,
    ),
    Misconception(
        "no_shared_spec",
        "share=True 卻沒有用 SharedQuantizationSpec",
        "你可能以為每個位置都寫同一份 act_spec() 就會共用。其實每個位置的 spec 各自產生一個 observer，各算各的 scale；"
        "要讓 add 的輸入與輸出共用同一個 observer 實例，其餘位置都得寫 SharedQuantizationSpec((inputs[0], node))，"
        "指向第一條輸入邊。",
        SHARED_SPEC,
        public=_never_shares,
        practice=SHARE_ADD,
    ),
    Misconception(
        "output_not_shared",
        "輸入共用了，輸出沒有共用",
        "整數加法要求輸入和輸出在同一個尺度上，結果才不用再 rescale。你讓輸入邊共用了，輸出卻另用一份 spec，"
        "它就有自己的 observer 和 scale。輸出也要寫 SharedQuantizationSpec((inputs[0], node))。",
        SHARED_SPEC,
        public=_output_apart,
        practice=SHARE_ADD,
    ),
    Misconception(
        "output_as_user_edges",
        "把 add 的輸出標籤貼成每個使用者的輸入邊",
        "輸出標籤要用 annotate_output_qspec(node, spec) 貼在 add 自己身上。你把它貼成 add 每個使用者的輸入邊，"
        "標籤就寫到了別人的 node 上，圖的輸出（output node）也收不到。邊標籤只影響一個 consumer，輸出標籤影響所有 consumer。",
        EDGE_AND_OUTPUT,
        public=_user_edges,
        practice=LABEL_OUTPUT,
    ),
    Misconception(
        "found_by_name",
        "用名字找 add，不是用 node.target",
        "node 的名字只是標記，不代表它做什麼：名叫 add 的輸入、addmm 都不是加法；pass 改過名字之後，"
        '真正的 add 也可能叫別的名字。要用 node.op == "call_function" 而且 node.target == ADD 判斷。',
        BY_TARGET,
        public=_found_by_name,
        practice=IS_ADD,
    ),
    Misconception(
        "overwrites_claimed",
        "別的 Quantizer 認領過的 add 又被你改寫",
        "_annotated=True 表示這個 node 已經有 Quantizer 負責，標籤是它的。你的程式照樣重貼，覆蓋了別人的決定"
        "（放在 XNNPACKQuantizer 後面時，會拆掉它的 add + relu 融合）。先看 node.meta[ANNOTATION_KEY]._annotated，是 True 就跳過。",
        WITH_XNNPACK,
        public=_claim_overwritten,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "skips_unclaimed_label",
        "有標籤就跳過，不看 _annotated",
        "有標籤不代表有人認領：_annotated=False 的標籤是沒有人負責的草稿，照規則重貼才對。"
        "要跳過的只有 _annotated 是 True 的 node。",
        ADD_RULES,
        public=_skips_draft,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "forgets_annotated",
        "標完沒有設 _annotated = True",
        "貼完標籤要把 node.meta[ANNOTATION_KEY]._annotated 設成 True，這是告訴後面的 Quantizer「這個 node 有人負責了」。"
        "沒有設，下一個 Quantizer 會以為沒人標過，把你的標籤換掉。",
        WITH_XNNPACK,
        public=_unmarked,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "claims_unlabelled",
        "沒有標籤的 add 也設了 _annotated = True",
        "像 self.offset + 1.0 這樣一個 activation 都沒有的 add，練習說不標、也不碰。"
        "你替它放了一張空標籤並設 _annotated=True，等於替它認領，後面的 Quantizer 就會跳過它。"
        "沒有 activation 輸入的 add 直接跳過，不要建立標籤。",
        WITH_XNNPACK,
        public=_claims_unlabelled,
        practice=ACTIVATION_INPUTS,
    ),
    Misconception(
        "other_observer",
        "observer 換成了別的類別",
        "規格裡的 observer 類別也是答案的一部分：練習要的是 act_spec()（MinMaxObserver）。"
        "照抄 XNNPACK 設定的 HistogramObserver 數字範圍一樣，算出來的 scale 卻不同。",
        ADD_RULES,
        public=_histogram,
        practice=SPEC_SCALE,
    ),
)


class _CatParts(nn.Module):
    """cat([c, sin(x), x, sin(x), exp(x)]), cat([c, c]) and cat([exp(x), x]): a buffer, repeats, five entries."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("c", torch.zeros(1, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s, e = torch.sin(x), torch.exp(x)
        return torch.cat([self.c, s, x, s, e]), torch.cat([self.c, self.c]), torch.cat([e, x], dim=1)


def _cats(gm: GraphModule) -> list[Any]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == CAT]


def _check_cat_inputs(cat_inputs: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_CatParts().eval(), (torch.ones(1, 4),))
    problems = []
    for node, want, title in zip(
        _cats(gm),
        (["sin", "x", "exp"], [], ["exp", "x"]),
        ("cat([c, sin(x), x, sin(x), exp(x)])", "cat([c, c])", "cat([exp(x), x], dim=1)"),
        strict=True,
    ):
        names = _input_names(cat_inputs(node))
        if names != want:
            problems.append(f"{title}（c 是模型常數）：應該回傳 {want}，你的是 {names}")
    return problems


CAT_INPUTS = Practice(
    "cat_inputs",
    "寫 cat_inputs(node)：node 是一個 cat，回傳它「要貼標籤」的輸入，也就是來自 activation 的 Node，每個只出現一次，照原本的順序。"
    "cat 的輸入在哪裡、有幾個，要從 node.args 找；模型常數（get_attr）不算。"
    "檢查用一張有三個 cat 的小圖：五個輸入裡有常數與重複的、只有常數的，和指定 dim=1 的。",
    "from torch.fx import Node\n\n\ndef cat_inputs(node):\n    raise NotImplementedError()\n",
    _check_cat_inputs,
    "torch.cat([a, b, c], dim) 的輸入全在 node.args[0] 這個 list 裡，node.args[1] 是 dim。"
    '從那個 list 留下 isinstance(a, Node) 而且 a.op != "get_attr" 的，再用 list(dict.fromkeys(...)) 去掉重複。',
    "from torch.fx import Node\n\n\n"
    "def cat_inputs(node):\n"
    '    nodes = [a for a in node.args[0] if isinstance(a, Node) and a.op != "get_attr"]\n'
    "    return list(dict.fromkeys(nodes))\n",
    "共用的錨點是這個串列的第一個，不是 node.args[0][0]；串列是空的（只有常數）的 cat 不標、也不認領。",
)


class _CatTwo(nn.Module):
    """cat([a, b])."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat([a, b])


class _CatBranches(nn.Module):
    """cat([sin(x), x, cos(x)], dim=1): three inputs, one of them x itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.sin(x), x, torch.cos(x)], dim=1)


def _check_share_cat(annotate_shared_cat: Any) -> list[str]:
    from torch.fx import Node

    def annotate(node: Any, spec: Any) -> None:
        inputs = list(dict.fromkeys(a for a in node.args[0] if isinstance(a, Node) and a.op != "get_attr"))
        annotate_shared_cat(node, inputs, spec)

    problems = []
    for title, model, inputs, positions in (
        ("cat([a, b])", _CatTwo(), (torch.ones(2, 4), torch.full((2, 4), 5.0)), {"a → cat", "b → cat", "cat → output"}),
        (
            "cat([sin(x), x, cos(x)], dim=1)",
            _CatBranches(),
            (torch.linspace(-2, 2, 8).reshape(2, 4),),
            {"sin → cat", "x → cat", "cos → cat", "cat → output"},
        ),
    ):
        try:
            shared = _observer_groups(annotate, model, inputs, _cats)
        except (AssertionError, KeyError) as error:
            problems.append(
                f"{title}：prepare_pt2e 出錯（{str(error).splitlines()[0][:120]}）："
                "SharedQuantizationSpec 指向的位置，在 prepare 處理到它時還沒有 observer。"
            )
            continue
        problems += _sharing_problems(title, shared, positions)
    return problems


SHARE_CAT = Practice(
    "annotate_shared_cat",
    "寫 annotate_shared_cat(node, inputs, spec)：node 是一個 cat，inputs 是它要貼標籤的輸入（已經過濾好的 Node 串列）。"
    "替 cat 貼上標籤，讓每條輸入邊和 cat 的輸出共用同一個 observer。"
    "檢查會在 cat([a, b]) 與 cat([sin(x), x, cos(x)]) 兩張小圖上 prepare，看每個 observer 服務哪些位置。",
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_shared_cat(node, inputs, spec):\n"
    "    raise NotImplementedError()\n",
    _check_share_cat,
    "標籤貼在 cat 自己身上：annotate_input_qspec_map(node, 上游, …)，不是上游的輸出。第一條邊 (inputs[0], node) 用 spec；"
    "其餘每條輸入邊和輸出都寫 SharedQuantizationSpec((inputs[0], node))，指向那條邊，不是 node 自己。",
    "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n\n\n"
    "def annotate_shared_cat(node, inputs, spec):\n"
    "    annotate_input_qspec_map(node, inputs[0], spec)\n"
    "    shared = SharedQuantizationSpec((inputs[0], node))\n"
    "    for other in inputs[1:]:\n"
    "        annotate_input_qspec_map(node, other, shared)\n"
    "    annotate_output_qspec(node, shared)\n",
    "cat 只是把整數排在一起：所有輸入與輸出在同一個 scale 上，結果才不用再 rescale。",
)


class _CatNames(nn.Module):
    """An input called cat, one called catalog, and a real cat (renamed in the check)."""

    def forward(self, cat: torch.Tensor, catalog: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.sin(cat), catalog])


def _check_is_cat(is_cat: Any) -> list[str]:
    return _target_problems(is_cat, _CatNames(), (torch.ones(2, 4), torch.ones(2, 4)), _cats, "merged_by_a_pass")


IS_CAT = Practice(
    "is_cat",
    "寫 is_cat(node)：node 是不是一個 cat？用 node 做什麼判斷，不要用它叫什麼名字。"
    "檢查用的圖裡有名叫 cat 與 catalog 的兩個輸入，和一個被 pass 改過名字的真正的 cat。",
    "import torch\n\nCAT = torch.ops.aten.cat.default\n\n\ndef is_cat(node):\n    raise NotImplementedError()\n",
    _check_is_cat,
    'node 做什麼寫在兩個屬性：node.op（"call_function" 才是呼叫一個 op）和 node.target（是哪一個 op）。',
    "import torch\n\nCAT = torch.ops.aten.cat.default\n\n\n"
    "def is_cat(node):\n"
    '    return node.op == "call_function" and node.target == CAT\n',
    "名叫 cat 的可能是模型的輸入；pass 改過名字之後，真正的 cat 也可能叫別的名字。",
)


CAT_MISCONCEPTIONS = (
    Misconception(
        "reads_args_like_add",
        "照 add 的寫法讀 node.args[:2]",
        "torch.cat([a, b, c]) 的輸入都在 node.args[0] 這個 list 裡；node.args[1] 是 dim（一個整數）。"
        "照 add 讀 node.args[:2]，拿到的是一個 list 和一個整數，沒有一個是輸入的 node，cat 就沒有標籤。",
        CAT_RULES,
        public=_cat_unlabelled,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "first_two_only",
        "只標了 cat 的前兩個輸入",
        "cat 的輸入個數不固定：node.args[0] 有幾個 activation，就有幾條輸入邊要貼、要共用。"
        "只看前兩個，第三個以後的輸入沒有標籤，也沒有和其他輸入共用 qparams。",
        CAT_RULES,
        public=_cat_third_missing,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "repeated_input_twice",
        "重複的輸入貼了兩次",
        "cat([r, 常數, r]) 裡 r 出現兩次，但 r → cat 只是一條邊：貼兩次的話第二次把它改成「和自己共用」，"
        "prepare_pt2e 找不到源頭。同一個 node 只算一次，保持原本的順序。",
        CAT_RULES,
        public=_cat_recursion,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "cat_anchor_on_output",
        "輸入邊指向 cat 自己的輸出來共用",
        "prepare_pt2e 先處理輸入邊，那時 cat 的輸出還沒有 observer，SharedQuantizationSpec(node) 指向的東西不存在。"
        "共用要指向第一條輸入邊 (inputs[0], node)。",
        SHARED_SPEC,
        public=_anchor_not_observed,
        practice=SHARE_CAT,
    ),
    Misconception(
        "labels_producer_outputs",
        "把標籤貼在上游的輸出，不是 cat 的輸入邊",
        "annotate_output_qspec(上游, spec) 改的是上游的輸出，上游的其他 consumer 也讀到量化後的值；"
        "cat 要的是自己的輸入邊：annotate_input_qspec_map(cat, 上游, spec)。邊標籤只影響一個 consumer，輸出標籤影響所有 consumer。",
        EDGE_AND_OUTPUT,
        public=_cat_producer_output,
        practice=SHARE_CAT,
    ),
    Misconception(
        "cat_anchor_on_first_entry",
        "第一個輸入寫死成 node.args[0][0]",
        "排在 list 第一個的不一定是 activation：cat([常數, r * 2, r]) 的第一個是模型常數，寫死它就把常數量化了，"
        "共用也錨在常數上。先濾掉常數與非 Node 的值，再取剩下的第一個。",
        CAT_RULES,
        public=_cat_first_entry,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "cat_constant_labelled",
        "cat 裡的模型常數也貼了標籤",
        'op == "get_attr" 的 node 是模型常數，不是 activation，cat 只量化 activation 的輸入邊。'
        "常數不貼標籤，也不參與共用。",
        LIMITS,
        public=_cat_constant_labelled,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "cat_found_by_name",
        "用名字找 cat，不是用 node.target",
        "名叫 cat 的 placeholder 不是 cat，pass 改過名字之後真正的 cat 也可能叫別的名字。"
        '要用 node.op == "call_function" 而且 node.target == CAT 判斷。',
        BY_TARGET,
        public=_cat_found_by_name,
        practice=IS_CAT,
    ),
    Misconception(
        "cat_no_shared_spec",
        "cat 的輸入與輸出沒有共用",
        "每個位置各寫一份 act_spec()，就各有一個 observer、各算各的 scale。cat 要求所有輸入與輸出在同一個尺度上："
        "第一條輸入邊用 act_spec()，其餘輸入邊與輸出都寫 SharedQuantizationSpec((inputs[0], node))。",
        SHARED_SPEC,
        public=_cat_never_shares,
        practice=SHARE_CAT,
    ),
    Misconception(
        "cat_output_not_shared",
        "cat 的輸入共用了，輸出沒有共用",
        "concat 只是把整數排在一起，輸出必須和輸入在同一個尺度上；你讓輸出另用一份 spec，它就有自己的 scale。"
        "輸出也要寫 SharedQuantizationSpec((inputs[0], node))。",
        SHARED_SPEC,
        public=_cat_output_apart,
        practice=SHARE_CAT,
    ),
    Misconception(
        "cat_overwrites_claimed",
        "別的 Quantizer 認領過的 cat 又被你改寫",
        "_annotated=True 的 cat 已經有 Quantizer 負責，你的程式照樣重貼，覆蓋了別人的決定。"
        "先看 node.meta[ANNOTATION_KEY]._annotated，是 True 就跳過。",
        WITH_XNNPACK,
        public=_cat_claim_overwritten,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "cat_skips_unclaimed_label",
        "cat 有標籤就跳過，不看 _annotated",
        "有標籤不代表有人認領：_annotated=False 的標籤沒有人負責，照規則重貼才對。要跳過的只有 _annotated 是 True 的 cat。",
        CAT_RULES,
        public=_cat_skips_draft,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "cat_forgets_annotated",
        "標完 cat 沒有設 _annotated = True",
        "_annotated 是給後面的 Quantizer 看的：它是 True，後面的 Quantizer 才知道這個 cat 有人負責。"
        "沒有設，下一個 Quantizer 會把你的標籤換掉；貼完標籤要把 node.meta[ANNOTATION_KEY]._annotated 設成 True。",
        WITH_XNNPACK,
        public=_cat_unmarked,
        practice=SHOULD_ANNOTATE,
    ),
    Misconception(
        "cat_claims_unlabelled",
        "沒有標籤的 cat 也設了 _annotated = True",
        "只接模型常數的 cat 沒有 activation 輸入，練習說不標、也不碰。"
        "你替它放了一張空標籤並設 _annotated=True，等於替它認領，後面的 Quantizer 就會跳過它。"
        "沒有 activation 輸入的 cat 直接跳過，不要建立標籤。",
        WITH_XNNPACK,
        public=_cat_claims_unlabelled,
        practice=CAT_INPUTS,
    ),
    Misconception(
        "cat_other_observer",
        "cat 的 observer 換成了別的類別",
        "規格裡的 observer 類別也是答案的一部分：練習要的是 act_spec()（MinMaxObserver）。"
        "HistogramObserver 的數字範圍一樣，算出來的 scale 卻不同。",
        CAT_RULES,
        public=_histogram,
        practice=SPEC_SCALE,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "add_quantizer",
        "AddQuantizer：add 的輸入與輸出共用 qparams",
        ("AddQuantizer",),
        {
            "residual": add_residual,
            "self_and_claimed": add_self_and_claimed,
            "constants": add_constants,
            "by_target": add_by_target,
        },
        misconceptions=ADD_MISCONCEPTIONS,
    ),
    Exercise(
        "cat_quantizer",
        "CatQuantizer：cat 的所有輸入與輸出共用 qparams",
        ("CatQuantizer",),
        {
            "cat_pool": cat_pool,
            "three_inputs": cat_three,
            "repeats": cat_repeats,
            "constants": cat_constants,
            "by_target": cat_by_target,
        },
        misconceptions=CAT_MISCONCEPTIONS,
    ),
)
