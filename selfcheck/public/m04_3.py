"""Public cases of M04-3 fusion 就是中間不貼標籤 (FusionQuantizer) on the chapter's own models.

The evidence is canonical: how many observers sit on every edge, which edges share an
observer instance (as sorted groups, never instance numbers), and the labels read from the
annotations (claimed or not, which input edges and outputs carry which spec). Two correct
Quantizers that write their labels in another order give the same data.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from common.pt2e import Quantizer
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import describe_annotations, describe_prepared, is_guard, is_observer_node
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.probes import ChainQuantizer
from selfcheck.public.m03_1 import LABEL_READERS
from selfcheck.public.m03_3 import IS_ACT_SPEC

TITLE = "FusionQuantizer：pattern 的邊界貼標籤，裡面不貼"

CONV = torch.ops.aten.conv2d.default
RELU = torch.ops.aten.relu.default
ADD = torch.ops.aten.add.Tensor
LINEAR = torch.ops.aten.linear.default
MAX_POOL = torch.ops.aten.max_pool2d.default
CAT = torch.ops.aten.cat.default


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


def graph_order(prepared: GraphModule) -> list[str]:
    """The nodes of the prepared graph in order, observers aside: the order the student's ``annotate`` saw (what
    ``node.next`` follows), the same for every answer."""
    return [n.name for n in prepared.graph.nodes if not is_observer_node(prepared, n) and not is_guard(n)]


def fuse(
    ns: Namespace,
    patterns: list[tuple[Any, ...]],
    model: nn.Module,
    seed: int,
    before: Any = None,
    edit: Any = None,
) -> dict[str, Any]:
    """Prepare ``model`` with the student's ``FusionQuantizer(patterns)`` (after the Quantizer ``before``, when
    given; ``edit`` changes the exported graph first): labels, observers and the graph's order."""
    from common.pt2e import export_module, prepare_pt2e

    gm = export_module(model.eval(), seeded_inputs(seed, (2, 3, 16, 16)))
    if edit is not None:
        edit(gm)
        gm.recompile()
    quantizer = ns["FusionQuantizer"](patterns)
    prepared = prepare_pt2e(gm, quantizer if before is None else ChainQuantizer([before, quantizer]))
    return {"labels": labels(prepared), **observers(prepared), "order": graph_order(prepared)}


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


class Detours(nn.Module):
    """Three branches of x, each not what it looks like at first: conv → relu whose relu is not the node after the
    conv in graph order (a relu of x comes between); a conv whose output is a model output as well as a relu's
    input; and relu(cat([conv(x), sigmoid(x)])), whose cat reads its inputs from a list."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(3, 3, 1)
        self.kept = nn.Conv2d(3, 3, 1)
        self.joined = nn.Conv2d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = self.first(x)
        b = torch.relu(x)  # next after the conv in graph order, not its user
        c = torch.relu(a)  # the conv's only user
        y = self.kept(x)
        joined = torch.relu(torch.cat([self.joined(x), torch.sigmoid(x)], 1))
        return c + b, torch.relu(y), y, joined


class Misnamed(nn.Module):
    """conv → relu whose names lie: the input is called ``conv2d``, the Conv2d module ``relu`` and the ReLU module
    ``conv2d``; ``misnamed`` then names each op after its module, as a pass that names ops after modules would
    (the conv becomes ``relu``, the relu ``conv2d_1``)."""

    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.Conv2d(3, 3, 1)
        self.conv2d = nn.ReLU()

    def forward(self, conv2d: torch.Tensor) -> torch.Tensor:
        return self.conv2d(self.relu(conv2d))


def misnamed(gm: GraphModule) -> None:
    """Names each op of the graph after the module that called it (``nn_module_stack``)."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("nn_module_stack")]
    for index, node in enumerate(ops):
        node._rename(f"pending_{index}")
    for node in ops:
        node._rename(list(node.meta["nn_module_stack"].values())[-1][0])


class EarlierQuantizer(Quantizer):
    """Another Quantizer, run before the student's on small_cnn: it claims the second relu with an empty label
    (``_annotated=True``, no spec at all) and labels the first conv's input edge without claiming it."""

    def annotate(self, model: GraphModule) -> GraphModule:
        from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation
        from common.qspecs import act_spec

        calls = [n for n in model.graph.nodes if n.op == "call_function"]
        convs = [n for n in calls if n.target == CONV]
        relus = [n for n in calls if n.target == RELU]
        relus[1].meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
        convs[0].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={convs[0].args[0]: act_spec()})
        return model

    def validate(self, model: GraphModule) -> None:
        pass


MISNAMED = "detours/misnamed"
"""The public place whose names lie (``Misnamed``)."""


def detours(ns: Namespace, seed: int) -> Any:
    """``Detours`` with [(CONV, RELU), (CONV, CAT, RELU), (CONV,)]; ``Misnamed`` with [(CONV, RELU)]; small_cnn with
    [(CONV, RELU, MAX_POOL), (CONV, RELU), (LINEAR,)] after ``EarlierQuantizer`` (the relu in the middle of the first
    chain gets no label of its own)."""
    from common.models import get_model

    return {
        "detours": fuse(ns, [(CONV, RELU), (CONV, CAT, RELU), (CONV,)], Detours(), seed),
        "misnamed": fuse(ns, [(CONV, RELU)], Misnamed(), seed, edit=misnamed),
        "after_another": fuse(
            ns,
            [(CONV, RELU, MAX_POOL), (CONV, RELU), (LINEAR,)],
            get_model("small_cnn"),
            seed,
            before=EarlierQuantizer(),
        ),
    }


# --- reading a fused graph's labels (the public detectors below, and the grader's hidden ones) -------------

Label = tuple[bool, frozenset[str], bool]
"""A node's label, as data: claimed (``_annotated``), the sources of its labelled input edges, output labelled."""


@dataclass(frozen=True)
class Place:
    """One prepared graph: the key's labels and the student's, and the graph (from the key's evidence).

    ``inputs``: every node that has inputs, with them in order (``all_input_nodes``; consumers in graph order
    where the evidence keeps it); ``constants``: the ``get_attr`` nodes; ``order``: every node in graph order, where
    the evidence has it (the public cases' ``order``).
    """

    name: str
    want: dict[str, Label]
    got: dict[str, Label]
    inputs: dict[str, list[str]]
    constants: frozenset[str]
    order: tuple[str, ...] = ()

    def users(self, node: str) -> list[str]:
        return [consumer for consumer, sources in self.inputs.items() if node in sources]

    def inside(self, source: str, node: str) -> bool:
        """An edge inside one of the key's patterns: both ends claimed, no output label on the source, the edge
        unlabelled."""
        a, b = self.want.get(source), self.want.get(node)
        return bool(
            a and b and a[0] and b[0] and not a[2] and source not in b[1] and source in self.inputs.get(node, [])
        )

    def inside_edges(self) -> list[tuple[str, str]]:
        return [(s, d) for d, sources in self.inputs.items() for s in sources if self.inside(s, d)]

    def groups(self) -> list[list[str]]:
        """The key's fused chains, members in chain order; a node another Quantizer claimed without any label is
        not one (``preclaimed``)."""
        edges = self.inside_edges()
        following = dict(edges)
        starts = [n for n, label in self.want.items() if label[0] and n not in {d for _, d in edges}]
        chains = []
        for start in starts:
            chain = [start]
            while chain[-1] in following:
                chain.append(following[chain[-1]])
            if len(chain) > 1 or self.want[start][1] or self.want[start][2]:
                chains.append(chain)
        return chains

    def preclaimed(self) -> list[str]:
        """Nodes the key shows claimed with no label at all, in no chain: another Quantizer claimed them first."""
        members = {m for group in self.groups() for m in group}
        return [
            n for n, (claimed, ins, out) in self.want.items() if claimed and not ins and not out and n not in members
        ]

    def exact(self, group: list[str]) -> bool:
        return all(self.got.get(m) == self.want.get(m) for m in group)

    def absent(self, group: list[str]) -> bool:
        return all(m not in self.got for m in group)

    def missing_inputs(self) -> list[tuple[str, str]]:
        return [(s, d) for d, label in self.want.items() if d in self.got for s in label[1] - self.got[d][1]]

    def extra_inputs(self) -> list[tuple[str, str]]:
        return [
            (s, d)
            for d, label in self.got.items()
            for s in label[1] - (self.want[d][1] if d in self.want else frozenset())
        ]

    def differs(self) -> bool:
        return self.got != self.want


def stem(name: str) -> str:
    """A node's name without the number export adds: ``relu_1`` → ``relu``."""
    return re.sub(r"_\d+$", "", name)


def as_label(claimed: Any, inputs: Any, output: Any) -> Label | None:
    """A label as data; None for an unclaimed label without any spec (the same as none)."""
    sources = frozenset(str(source) for source, spec in inputs if spec is not None)
    if not claimed and not sources and output is None:
        return None
    return (bool(claimed), sources, output is not None)


def public_labels(labels: Any) -> dict[str, Label]:
    """The ``labels`` of a public case (``labels`` above) as data."""
    found: dict[str, Label] = {}
    for node, entry in (labels or {}).items():
        if isinstance(entry, dict):
            label = as_label(entry.get("claimed"), (entry.get("inputs") or {}).items(), entry.get("output"))
            if label is not None:
                found[str(node)] = label
    return found


def public_places(seen: Any, expected: Any) -> list[Place]:
    """One ``Place`` per public model the student's code prepared (the graph from the expected edges)."""
    places = []
    for case in diagnosis.cases(expected):
        models = diagnosis.value(expected, case)
        for model, want in (models or {}).items():
            got = diagnosis.value(seen, case, model)
            if not isinstance(want, dict) or not isinstance(got, dict) or "labels" not in got:
                continue
            inputs: dict[str, list[str]] = {}
            for edge in want.get("edges", {}):
                source, _, consumer = str(edge).partition(" → ")
                inputs.setdefault(consumer, []).append(source)
            wanted = public_labels(want["labels"])
            consumers = set(inputs)
            labelled = {s for label in wanted.values() for s in label[1]}
            constants = {s for sources in inputs.values() for s in sources if s not in consumers and s not in labelled}
            order = tuple(str(n) for n in want.get("order") or ())
            places.append(
                Place(f"{case}/{model}", wanted, public_labels(got["labels"]), inputs, frozenset(constants), order)
            )
    return places


# --- misconceptions as relations between the student's labels and the key's, on any set of places ----------


def constant_labelled(places: list[Place]) -> bool:
    """An input edge from a constant (weight, bias, a buffer) labelled."""
    return any(s in p.constants for p in places for s, _ in p.extra_inputs())


def producer_outputs(places: list[Place]) -> bool:
    """A node outside every pattern gets an output label (unclaimed) instead of the edge from it into a member."""
    for p in places:
        strangers = {n for n, label in p.got.items() if n not in p.want and not label[0] and label[2]}
        if strangers & {s for s, _ in p.missing_inputs()}:
            return True
    return False


def never_marks(places: list[Place]) -> bool:
    """Nothing the student labelled is claimed (what another Quantizer claimed first aside)."""
    mine = [label for p in places for n, label in p.got.items() if n not in p.preclaimed()]
    return (
        bool(mine)
        and not any(label[0] for label in mine)
        and any(label[0] for p in places for label in p.want.values())
    )


def _chains(places: list[Place], size: int = 2) -> list[tuple[Place, list[str]]]:
    """The key's chains of at least ``size`` members whose members the student all labelled."""
    return [(p, g) for p in places for g in p.groups() if len(g) >= size and all(m in p.got for m in g)]


def outputs_everywhere(places: list[Place]) -> bool:
    """Every member of every chain gets an output label: nothing fused."""
    chains = _chains(places)
    return bool(chains) and all(p.got[m][2] for p, g in chains for m in g)


def output_on_first(places: list[Place]) -> bool:
    """The output label on each chain's first member, not on its last."""
    chains = _chains(places)
    return bool(chains) and all(p.got[g[0]][2] and not p.got[g[-1]][2] for p, g in chains)


def no_output(places: list[Place]) -> bool:
    """No output label on the last member of any chain of two or more, and no output label where the key has
    none."""
    chains = _chains(places)
    return (
        bool(chains)
        and all(not p.got[g[-1]][2] for p, g in chains)
        and not any(
            label[2] and not p.want.get(n, (False, frozenset(), False))[2] for p in places for n, label in p.got.items()
        )
    )


def previous_member_labelled(places: list[Place]) -> bool:
    """Every edge between two members labelled as an input edge."""
    edges = [(p, s, d) for p, g in _chains(places) for s, d in itertools.pairwise(g)]
    return bool(edges) and all(s in p.got[d][1] for p, s, d in edges)


def later_members_unlabelled(places: list[Place]) -> bool:
    """Every edge from outside into a later member of a chain unlabelled (and nothing labelled there instead);
    the first members' all labelled."""
    later, first = [], []
    for p, g in _chains(places):
        for index, member in enumerate(g):
            (later if index else first).extend((p, s, member) for s in p.want[member][1])
    return (
        bool(later)
        and all(s not in p.got[m][1] for p, s, m in later)
        and all(p.got[m][1] <= p.want[m][1] for p, _, m in later)
        and all(s in p.got[m][1] for p, s, m in first)
    )


def same_op_as_previous_unlabelled(places: list[Place]) -> bool:
    """The only labels missing are edges into a member from a node of the same op as the member before it (by
    export name), and nothing else differs."""
    wrong = [p for p in places if p.differs()]
    if not wrong:
        return False
    for p in wrong:
        previous = {g[i]: g[i - 1] for g in p.groups() for i in range(1, len(g))}
        missing = p.missing_inputs()
        if not missing or p.extra_inputs() or set(p.got) != set(p.want):
            return False
        if not all(d in previous and stem(s) == stem(previous[d]) for s, d in missing):
            return False
    return True


def fused_other_operand(places: list[Place]) -> bool:
    """A later member of a chain has the key's previous member labelled as an input and misses the key's input
    from outside: the student's chain came in through the other operand."""
    for p in places:
        for g in p.groups():
            for before, member in itertools.pairwise(g):
                got = p.got.get(member)
                if got and before in got[1] and p.want[member][1] - got[1]:
                    return True
    return False


def fused_past_other_users(places: list[Place]) -> bool:
    """The student fuses across an edge whose source other nodes read too."""
    for p in places:
        for d, sources in p.inputs.items():
            for s in sources:
                a, b = p.got.get(s), p.got.get(d)
                if a and b and a[0] and b[0] and not a[2] and s not in b[1] and len(p.users(s)) > 1:
                    return True
    return False


def pairs_only(places: list[Place]) -> bool:
    """Chains of one and of three members not labelled as the key does, every chain of two right: no member of a
    longer chain past its second labelled (its first two may have been fused by a pattern of two)."""
    groups = [(p, g) for p in places for g in p.groups()]
    return (
        all(p.exact(g) for p, g in groups if len(g) == 2)
        and any(len(g) == 1 and not p.exact(g) for p, g in groups)
        and all(p.absent(g[2:]) and not p.exact(g) for p, g in groups if len(g) > 2)
        and any(len(g) > 2 for _, g in groups)
    )


def last_member_single_user(places: list[Place]) -> bool:
    """Every chain wrong ends in a node several ops read; every other chain right."""
    wrong = [(p, g) for p in places for g in p.groups() if not p.exact(g)]
    return bool(wrong) and all(len(p.users(g[-1])) > 1 for p, g in wrong)


def relabels_claimed_member(places: list[Place]) -> bool:
    """A non-last member of a fused chain also got an output label (a later one-op pattern labelled it again),
    while some other chain's non-last members did not: not every member's output labelled."""
    chains = _chains(places)
    again = [(p, g) for p, g in chains if any(p.got[m][2] for m in g[:-1])]
    clean = [(p, g) for p, g in chains if not any(p.got[m][2] for m in g[:-1])]
    return (
        bool(clean)
        and any(all(p.got[m] == p.want[m] for m in g if not (p.got[m][2] and not p.want[m][2])) for p, g in again)
        and all(p.got[g[-1]] == p.want[g[-1]] for p, g in again)
    )


def _lost_output(p: Place) -> list[str]:
    """Claimed nodes whose output the key labels and the student's does not (the inputs the same)."""
    return [n for n, (claimed, ins, out) in p.want.items() if claimed and out and p.got.get(n) == (True, ins, False)]


def single_chain_taken_over(places: list[Place]) -> bool:
    """A node the key labels on its own (an earlier pattern claimed its user) lost its output label, yet every edge
    from it into its users stays labelled: the student started a chain there, looking at its first member only."""
    found = False
    for p in places:
        for n in _lost_output(p):
            users = [u for u in p.users(n) if n in p.want.get(u, (False, frozenset(), False))[1]]
            kept = all(
                n in got[1] if (got := p.got.get(u)) is not None and p.want.get(u) is not None else got is None
                for u in p.users(n)
            )
            if not users or not kept:
                return False
            found = True
    return found


def fused_before_earlier_pattern(places: list[Place]) -> bool:
    """A node the key labels on its own lost its output label and the edge into its user lost its label too: the
    student fused two nodes that an earlier pattern in the list had already claimed one of (every node the
    key labels labelled, none other)."""
    if any(set(p.got) != set(p.want) for p in places):
        return False
    for p in places:
        for n in _lost_output(p):
            for u in p.users(n):
                want, got = p.want.get(u), p.got.get(u)
                if want and got and n in want[1] and n not in got[1] and got[1] <= want[1] and got[2] == want[2]:
                    return True
    return False


def later_match_missing(places: list[Place]) -> bool:
    """A whole chain of the key absent while another chain of the same ops is labelled exactly."""
    for p in places:
        groups = p.groups()
        for g in groups:
            if p.absent(g) and any(
                h is not g and [stem(m) for m in h] == [stem(m) for m in g] and p.exact(h) for h in groups
            ):
                return True
    return False


NO_LABEL: Label = (False, frozenset(), False)


def middle_unclaimed(places: list[Place]) -> bool:
    """A middle member of a chain of three or more not claimed (no label at all, when the key gives it none of its
    own), its labels otherwise the key's, while the chain's ends are labelled and some member claimed."""
    found = False
    for p in places:
        for g in p.groups():
            if len(g) < 3 or g[0] not in p.got or g[-1] not in p.got or not any(p.got.get(m, NO_LABEL)[0] for m in g):
                continue
            for m in g[1:-1]:
                got, want = p.got.get(m, NO_LABEL), p.want[m]
                if not got[0] and got[1:] == want[1:]:
                    found = True
    return found


def relabels_preclaimed(places: list[Place]) -> bool:
    """A node another Quantizer claimed first (with no label) gets a label from the student."""
    return any(p.got.get(n) != p.want[n] for p in places for n in p.preclaimed())


def skips_unclaimed_labels(places: list[Place]) -> bool:
    """A chain the key claims left alone: one member carries only another Quantizer's unclaimed label, the others
    no label at all; and the student does claim elsewhere."""
    for p in places:
        for g in p.groups():
            kept = [m for m in g if m in p.got]
            if len(kept) == 1 and not p.got[kept[0]][0] and (p.got[kept[0]][1] or p.got[kept[0]][2]):
                return any(label[0] for q in places for n, label in q.got.items() if n not in q.preclaimed())
    return False


def claimed_by_specs(places: list[Place]) -> bool:
    """Both halves of reading the specs instead of ``_annotated``: an empty claimed label taken as free (relabelled),
    a labelled unclaimed node taken as claimed (its chain left alone)."""
    return relabels_preclaimed(places) and skips_unclaimed_labels(places)


def claimed_by_label(places: list[Place]) -> bool:
    """Any label taken as claimed: a chain with another Quantizer's unclaimed label left alone, while what another
    Quantizer claimed stays as it was."""
    return skips_unclaimed_labels(places) and not relabels_preclaimed(places)


def list_inputs_unlabelled(places: list[Place]) -> bool:
    """The only labels missing are edges into a ``cat`` (whose inputs arrive in a list); nothing else differs."""
    wrong = [p for p in places if p.differs()]
    return bool(wrong) and all(
        p.missing_inputs()
        and all(stem(d) == "cat" for _, d in p.missing_inputs())
        and not p.extra_inputs()
        and set(p.got) == set(p.want)
        for p in wrong
    )


def wrong_only_where_names_lie(places: list[Place]) -> bool:
    """Every place is right but the one whose node names lie (``Misnamed``), and that one is wrong."""
    wrong = [p.name for p in places if p.differs()]
    return wrong == [MISNAMED]


def claims_graph_neighbour(places: list[Place]) -> bool:
    """A node the key leaves alone is claimed, and a member without an output label has no fellow member among its
    users: the student's next member was the node after it in graph order, not a user."""
    for p in places:
        extra = [n for n, label in p.got.items() if n not in p.want and label[0]]
        dangling = [
            n
            for n, label in p.got.items()
            if label[0]
            and not label[2]
            and n in p.want
            and not p.want[n][2]
            and not any(u in p.got and p.got[u][0] and n not in p.got[u][1] for u in p.users(n))
        ]
        if extra and dangling:
            return True
    return False


def adjacent(p: Place, source: str, node: str) -> bool:
    """``node`` is the node right after ``source`` in graph order (``source.next``)."""
    order = list(p.order)
    return source in order and order.index(source) + 1 < len(order) and order[order.index(source) + 1] == node


def fused(p: Place, source: str, node: str) -> bool:
    """The student fused ``source`` into ``node``: both claimed, no output label on ``source``, the edge unlabelled."""
    a, b = p.got.get(source), p.got.get(node)
    return bool(a and b and a[0] and b[0] and not a[2] and source not in b[1])


def only_adjacent_chains(places: list[Place]) -> bool:
    """Some chain of the key's is not fused whole, and in every such chain the first link not fused joins two
    members that are not next to each other in graph order: the student fused only neighbours (one of those links
    reaches a member through its only input, so reading another operand does not explain it)."""
    first_broken = [
        next((p, a, b) for a, b in itertools.pairwise(g) if not fused(p, a, b))
        for p in places
        if p.order
        for g in p.groups()
        if not all(fused(p, a, b) for a, b in itertools.pairwise(g))
    ]
    return (
        bool(first_broken)
        and all(not adjacent(p, a, b) for p, a, b in first_broken)
        and any(_sole_input(p, a, b) for p, a, b in first_broken)
    )


def _sole_input(p: Place, source: str, node: str) -> bool:
    """``source`` is ``node``'s only input besides constants (so its ``args[0]``: no other way to miss it)."""
    return [s for s in p.inputs.get(node, []) if s not in p.constants] == [source]


def fused_past_output(places: list[Place]) -> bool:
    """The student fuses across an edge whose source is also read by the model's output, and by nothing else."""
    found = []
    for p in places:
        for d, sources in p.inputs.items():
            for s in sources:
                a, b = p.got.get(s), p.got.get(d)
                if a and b and a[0] and b[0] and not a[2] and s not in b[1] and len(p.users(s)) > 1:
                    found.append(set(p.users(s)) - {d})
    return bool(found) and all(others <= {"output"} for others in found)


def other_observer(seen_specs: list[str], expected_specs: list[str]) -> bool:
    return bool(seen_specs) and bool(expected_specs) and set(seen_specs) != set(expected_specs)


def _public(test: Any) -> Any:
    def detector(seen: Any, expected: Any) -> bool:
        return test(public_places(seen, expected))

    return detector


def _public_specs(evidence: Any) -> list[str]:
    classes = []
    for case in diagnosis.cases(evidence):
        for model in (diagnosis.value(evidence, case) or {}).values():
            for entry in ((model or {}).get("labels") or {}).values():
                if isinstance(entry, dict):
                    specs = [*(entry.get("inputs") or {}).values(), entry.get("output")]
                    classes += [str(spec).rsplit(" ", 1)[-1] for spec in specs if spec]
    return classes


def _public_observer(seen: Any, expected: Any) -> bool:
    return other_observer(_public_specs(seen), _public_specs(expected))


# --- where the chapter teaches it ----------------------------------------------------------------

RULES = Section("練習 1：FusionQuantizer（7 分）")
BOUNDARY = Section("M04-3 | fusion 就是「中間不貼標籤」")
PATTERNS = Section("A. XNNPACKQuantizer 的四個 pattern")
COST = Section("B. 不融合的代價")
OWN = Section("C. 自己寫 fusion")
TARGET = Section("B. `node.target`：op 的身分", notebook="M01-1")
ARGS = Section("C. `node.args` 與 `node.users`：同一條邊的兩個方向", notebook="M01-1")
EDGE_AND_OUTPUT = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
WITH_XNNPACK = Section("和 XNNPACKQuantizer 一起用", notebook="M03-4")


# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own ----------------

_SIGMOID = torch.ops.aten.sigmoid.default
_MUL = torch.ops.aten.mul.Tensor
_CAT = torch.ops.aten.cat.default


class _FiveConvs(nn.Module):
    """Five convs on x, each with different users: a relu after a sigmoid of x, an add where the conv is the second
    operand, a relu and the model's output, a relu and a mul, and an add followed in graph order by a relu of x."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)
        self.c4, self.c5 = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.c1(x)
        s = torch.sigmoid(x)
        a = torch.relu(a)
        b = s + self.c2(x)
        c = self.c3(x)
        d = self.c4(x)
        e = self.c5(x)
        r = torch.relu(x)
        return a + b + torch.relu(c) + torch.relu(d) * d + (e + r), c


def _only_user(node: Any, op: Any) -> Any:
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target == op:
        return users[0]
    return None


def _check_next_member(next_member: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_FiveConvs().eval(), (torch.ones(1, 2, 3, 3),))
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == CONV]
    relu = _only_user(convs[0], RELU)
    relu.name = "block_2"
    problems = []
    for title, node, op in (
        ("c1 → relu（中間隔著 sigmoid(x)，relu 被改名成 block_2）", convs[0], RELU),
        ("c2 是 add 的第二個運算元", convs[1], ADD),
        ("c3 → relu，c3 的輸出也是模型的輸出", convs[2], RELU),
        ("c4 → relu，c4 的輸出也給 mul", convs[3], RELU),
        ("c5 → add，圖上緊接著 add 的是 relu(x)", convs[4], RELU),
        ("c5 → add", convs[4], ADD),
    ):
        want, got = _only_user(node, op), next_member(node, op)
        if got is not want:
            shown = {None: "None"}.get(want, getattr(want, "name", want))
            mine = "None" if got is None else getattr(got, "name", repr(got))
            problems.append(f"{title}，找 {op}：應該回傳 {shown}，你的是 {mine}")
    return problems


NEXT_MEMBER = Practice(
    "next_member",
    "寫 next_member(node, op)：chain 的下一個 member。node 唯一的 consumer 是 target 等於 op 的 call_function 時回傳它，"
    "否則回傳 None。檢查用一張有五個 conv 的小圖：consumer 隔了幾個 node、conv 是 add 的第二個運算元、"
    "conv 的輸出同時給模型輸出或另一個 op、圖上緊接著的 node 不是它的 consumer。",
    "def next_member(node, op):\n    raise NotImplementedError()\n",
    _check_next_member,
    "誰讀 node 的輸出，寫在 node.users（一個 dict，key 是 consumer，模型的 output node 也算）；"
    "node.next 只是圖上的下一個。先看 len(node.users) == 1，再看那一個 consumer 的 op 與 target。",
    "def next_member(node, op):\n"
    "    if len(node.users) != 1:\n"
    "        return None\n"
    "    user = next(iter(node.users))\n"
    '    return user if user.op == "call_function" and user.target == op else None\n',
    "consumer 不一定把 node 放在 args[0]：add 的第二個運算元、cat 的 list 裡都有可能，從 users 找就不用管位置。",
)


class _ThreeChains(nn.Module):
    """relu(cat([conv(x), y])), relu(x) + relu(y), sigmoid(y) + other(y): three chains (the check picks them)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.other = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        joined = torch.relu(torch.cat([self.conv(x), y], 1))
        pair = torch.relu(x) + torch.relu(y)
        skip = torch.sigmoid(y) + self.other(y)
        return joined, pair, skip


def _outside(members: list[Any]) -> set[str]:
    found = set()
    for index, member in enumerate(members):
        for source in member.all_input_nodes:
            if source.op != "get_attr" and not (index and source is members[index - 1]):
                found.add(f"{source.name} → {member.name}")
    return found


def _check_outside_inputs(outside_inputs: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_ThreeChains().eval(), (torch.ones(1, 2, 3, 3), torch.ones(1, 2, 3, 3)))
    nodes = {n.name: n for n in gm.graph.nodes}
    problems = []
    for title, members in (
        ("chain conv → cat → relu（cat([conv(x), y])）", [nodes["conv2d"], nodes["cat"], nodes["relu"]]),
        ("chain relu → add（relu(x) + relu(y) 的前一個 relu）", [nodes["relu_1"], nodes["add"]]),
        ("chain conv → add（conv 是 add 的第二個運算元）", [nodes["conv2d_1"], nodes["add_1"]]),
    ):
        want = _outside(members)
        got = outside_inputs(members)
        try:
            mine = {f"{s.name} → {d.name}" for s, d in got}
        except (TypeError, ValueError, AttributeError):
            problems.append(f"{title}：應該回傳 (輸入, member) 的 list，你的是 {got!r}")
            continue
        if mine != want:
            missing, extra = sorted(want - mine), sorted(mine - want)
            said = [f"少了 {'、'.join(missing)}"] * bool(missing) + [f"多了 {'、'.join(extra)}"] * bool(extra)
            problems.append(f"{title}：應該是 {sorted(want)}，你的{'，'.join(said)}")
    return problems


OUTSIDE_INPUTS = Practice(
    "outside_inputs",
    "寫 outside_inputs(members)：members 是一個 chain 的 node list，回傳要貼標籤的輸入邊 (輸入, member) 的 list："
    "每個 member 的每個輸入，不是 get_attr 常數、也不是上一個 member 的，就算一條。"
    "檢查用三個 chain：conv → cat → relu、relu → add（add 的另一個運算元也是 relu）、conv → add（conv 是第二個運算元）。",
    "def outside_inputs(members):\n    edges = []\n    raise NotImplementedError()\n",
    _check_outside_inputs,
    "每個 member 都要看，不只第一個；輸入用 member.all_input_nodes（cat 的 list 已經攤開）。"
    "跳過上一個 member 要比「是不是同一個 node」（source is members[i - 1]），不要比 target。",
    "def outside_inputs(members):\n"
    "    edges = []\n"
    "    for i, member in enumerate(members):\n"
    "        for source in member.all_input_nodes:\n"
    '            if source.op == "get_attr" or (i > 0 and source is members[i - 1]):\n'
    "                continue\n"
    "            edges.append((source, member))\n"
    "    return edges\n",
    "從外面進到 pattern 的邊不只在第一個 member：cat 的 y、add 的另一個運算元都是。",
)


class _ConvReluPoolChain(nn.Module):
    """max_pool2d(relu(conv(x))): one chain of three members."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)


def _chain_members() -> tuple[Any, list[Any]]:
    """The exported chain model: its input x and [conv, relu, max_pool2d]."""
    from common.pt2e import export_module

    gm = export_module(_ConvReluPoolChain().eval(), (torch.ones(1, 2, 4, 4),))
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    x = next(n for n in gm.graph.nodes if n.op == "placeholder" and n.name == "x")
    return x, calls


def _check_chain_is_free(chain_is_free: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation
    from common.qspecs import act_spec

    problems = []
    for title, labels, want in (
        ("都沒有標籤", {}, True),
        ("conv 有一張貼了規格、_annotated=False 的標籤", {0: (True, False)}, True),
        ("relu 有一張空標籤、_annotated=True", {1: (False, True)}, False),
        ("conv 的標籤 _annotated=True", {0: (True, True)}, False),
        (
            "max_pool2d 有規格、_annotated=False；relu 空標籤、_annotated=True",
            {2: (True, False), 1: (False, True)},
            False,
        ),
    ):
        _, members = _chain_members()
        for index, (with_spec, claimed) in labels.items():
            inputs = {members[index].all_input_nodes[0]: act_spec()} if with_spec else {}
            members[index].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=inputs, _annotated=claimed)
        got = chain_is_free(members)
        if bool(got) is not want:
            problems.append(f"chain conv → relu → max_pool2d，{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


CHAIN_IS_FREE = Practice(
    "chain_is_free",
    "寫 chain_is_free(members)：這個 chain 還能標嗎？只要有一個 member 已被認領（標籤的 _annotated 是 True）就回傳 False，"
    "否則 True。檢查用 conv → relu → max_pool2d，在不同的 member 放上有規格或空的、認領或沒認領的標籤。",
    "from common.pt2e import ANNOTATION_KEY\n\n\ndef chain_is_free(members):\n    raise NotImplementedError()\n",
    _check_chain_is_free,
    "每個 member 都要看，不只第一個；認領只看 _annotated：有規格不代表有人認領，空標籤也可以是認領。"
    "標籤可能不存在，用 member.meta.get(ANNOTATION_KEY)。",
    "from common.pt2e import ANNOTATION_KEY\n\n\n"
    "def chain_is_free(members):\n"
    "    for member in members:\n"
    "        annotation = member.meta.get(ANNOTATION_KEY)\n"
    "        if annotation is not None and annotation._annotated:\n"
    "            return False\n"
    "    return True\n",
    "一個 member 屬於別人，整個 chain 就不能標：list 前面的 pattern 或前一個 Quantizer 優先。",
)


def _check_close_chain(close_chain: Any) -> list[str]:
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, QuantizationSpec
    from common.qspecs import act_spec

    x, members = _chain_members()
    members[0].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={x: act_spec()})
    close_chain(members, act_spec())
    problems = []
    for index, member in enumerate(members):
        name = member.name
        annotation = member.meta.get(ANNOTATION_KEY)
        if annotation is None:
            problems.append(f"{name}：應該有一張標籤（設了 _annotated = True），你的沒有標籤")
            continue
        if annotation._annotated is not True:
            problems.append(f"{name}：_annotated 應該是 True（每個 member 都要認領），你的是 {annotation._annotated!r}")
        last = index == len(members) - 1
        output = isinstance(annotation.output_qspec, QuantizationSpec)
        if last and not output:
            problems.append(f"{name} 是最後一個 member：輸出應該貼 spec，你的沒有")
        if not last and annotation.output_qspec is not None:
            problems.append(f"{name} 在 pattern 裡面：輸出不該有標籤，你的貼了")
    if x not in getattr(members[0].meta.get(ANNOTATION_KEY), "input_qspec_map", {}):
        problems.append(f"{members[0].name}：原本的輸入邊標籤 (x, {members[0].name}) 不見了，不要換掉已經有的標籤")
    return problems


CLOSE_CHAIN = Practice(
    "close_chain",
    "寫 close_chain(members, spec)：chain 的輸入邊已經貼好了（第一個 member 有一張 (x, conv) 的標籤），"
    "把它收尾：輸出標籤只貼在最後一個 member，每個 member 都設 _annotated = True。"
    "檢查用 conv → relu → max_pool2d，看每個 member 的標籤。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, annotate_output_qspec\n\n\n"
    "def close_chain(members, spec):\n"
    "    raise NotImplementedError()\n",
    _check_close_chain,
    "pattern 的輸出是最後一個 member 算的：annotate_output_qspec(members[-1], spec)。"
    "認領時，還沒有標籤的 member（中間的 relu）先放一張空的 QuantizationAnnotation()，已經有的不要換掉。",
    "from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, annotate_output_qspec\n\n\n"
    "def close_chain(members, spec):\n"
    "    annotate_output_qspec(members[-1], spec)\n"
    "    for member in members:\n"
    "        member.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())._annotated = True\n",
    "中間的 member 沒有任何標籤也要認領，不然後面的 Quantizer 會在 pattern 裡面貼標籤。",
)


def _fits(ops: list[str], start: int, pattern: tuple[str, ...], owner: list[Any]) -> bool:
    if start + len(pattern) > len(ops):
        return False
    return all(ops[start + k] == op and owner[start + k] is None for k, op in enumerate(pattern))


def _owners(ops: list[str], patterns: list[tuple[str, ...]]) -> list[int | None]:
    """Who claims each position: every pattern in list order claims all its free matches, left to right."""
    owner: list[int | None] = [None] * len(ops)
    for number, pattern in enumerate(patterns):
        for start in range(len(ops)):
            if _fits(ops, start, pattern, owner):
                owner[start : start + len(pattern)] = [number] * len(pattern)
    return owner


_FITS_TEXT = (
    "def fits(ops, start, pattern, owner):\n"
    '    """ops[start:] 以 pattern 開頭，而且那幾個位置都還沒有人認領。"""\n'
    "    if start + len(pattern) > len(ops):\n"
    "        return False\n"
    "    return all(ops[start + k] == op and owner[start + k] is None for k, op in enumerate(pattern))\n\n\n"
)


def _check_owners(owners: Any) -> list[str]:
    problems = []
    for ops, patterns in (
        (["conv", "add", "relu"], [("add", "relu"), ("conv", "add")]),
        (["conv", "relu", "conv", "relu"], [("relu",), ("conv", "relu")]),
        (["conv", "relu", "conv", "relu"], [("conv", "relu"), ("relu",)]),
    ):
        want = _owners(ops, patterns)
        got = owners(list(ops), list(patterns))
        try:
            mine = list(got)
        except TypeError:
            problems.append(f"ops = {ops}：應該回傳每個位置一個值的 list，你的是 {got!r}")
            continue
        if mine != want:
            first = next(
                (i for i in range(len(want)) if want[i] is not None and (i >= len(mine) or mine[i] != want[i])), None
            )
            why = (
                ""
                if first is None
                else f"：位置 {first} 的 {ops[first]} 應該歸 pattern {want[first]} {patterns[want[first]]}，"
                "list 前面的 pattern 先在整串上找完，後面的才輪到"
            )
            problems.append(f"ops = {ops}，patterns = {patterns}：應該是 {want}，你的是 {mine}{why}")
    return problems


OWNERS = Practice(
    "owners",
    "ops 是一條直線上的 op 名字（每個只給下一個用），patterns 是依優先順序排好的 pattern list。"
    "寫 owners(ops, patterns)：回傳每個位置被第幾個 pattern 認領（沒人認領是 None）。list 前面的 pattern 優先："
    "它在整串上找完所有還沒被認領的地方，後面的 pattern 才輪到。題目給的 fits 會告訴你某個位置能不能開始一個 pattern。",
    _FITS_TEXT + "def owners(ops, patterns):\n    owner = [None] * len(ops)\n    raise NotImplementedError()\n",
    _check_owners,
    "兩層迴圈的順序就是優先順序：外層走 patterns（用 enumerate 拿到編號），內層走每個開始位置；"
    "fits 成立就把那幾個位置都記成這個編號。外層走位置的話，圖上先出現的 op 就被後面的 pattern 搶走了。",
    _FITS_TEXT + "def owners(ops, patterns):\n"
    "    owner = [None] * len(ops)\n"
    "    for number, pattern in enumerate(patterns):\n"
    "        for start in range(len(ops)):\n"
    "            if fits(ops, start, pattern, owner):\n"
    "                for i in range(start, start + len(pattern)):\n"
    "                    owner[i] = number\n"
    "    return owner\n",
    "conv → add → relu 配 [(ADD, RELU), (CONV, ADD)]：add 先給了 (ADD, RELU)，conv 就只剩自己。",
)


def _single_user_graph() -> dict[str, Any]:
    """Hand-built: conv_a → relu_a read by add and mul; conv_b read by relu_b and add_b; conv_c → relu_c → pool_c;
    conv_d → relu_d read by pool_d and the output; conv_e read by three ops."""
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.get_attr("w")
    nodes: dict[str, Any] = {}

    def op(name: str, target: Any, *args: Any) -> Any:
        nodes[name] = graph.create_node("call_function", target, args, name=name)
        return nodes[name]

    relu_a = op("relu_a", RELU, op("conv_a", CONV, x, w))
    conv_b = op("conv_b", CONV, x, w)
    relu_d = op("relu_d", RELU, op("conv_d", CONV, x, w))
    conv_e = op("conv_e", CONV, x, w)
    outputs = [
        op("add_a", ADD, relu_a, x),
        op("mul_a", _MUL, relu_a, x),
        op("add_b", ADD, op("relu_b", RELU, conv_b), conv_b),
        op("pool_c", MAX_POOL, op("relu_c", RELU, op("conv_c", CONV, x, w)), [2, 2]),
        op("pool_d", MAX_POOL, relu_d, [2, 2]),
        relu_d,
        op("relu_e", RELU, conv_e),
        op("sigmoid_e", _SIGMOID, conv_e),
        op("add_e", ADD, conv_e, x),
    ]
    graph.output(tuple(outputs))
    return nodes


def _check_can_fuse(can_fuse: Any) -> list[str]:
    nodes = _single_user_graph()
    problems = []
    for names in (
        ("conv_a", "relu_a"),
        ("conv_b", "relu_b"),
        ("conv_c", "relu_c", "pool_c"),
        ("conv_d", "relu_d", "pool_d"),
        ("conv_e",),
    ):
        members = [nodes[name] for name in names]
        want = all(len(member.users) == 1 for member in members[:-1])
        got = can_fuse(members)
        if bool(got) is not want:
            counts = "、".join(f"{m.name} 有 {len(m.users)} 個 user" for m in members)
            why = (
                f"最後一個 member {names[-1]} 的輸出本來就會量化，給幾個 op 讀都可以"
                if want
                else "中間的值不量化，只能給下一個 member 讀"
            )
            problems.append(f"chain {' → '.join(names)}（{counts}）：應該回傳 {want}，你的是 {got!r}：{why}")
    return problems


CAN_FUSE = Practice(
    "can_fuse",
    "寫 can_fuse(members)：members 是沿著資料流接好的一串 node（後一個是前一個的 user），回傳這串能不能融成一個 pattern："
    "被融進去的中間值只能給下一個 member 讀。檢查用幾串 conv → relu（→ max_pool2d），有的中間、有的最後一個 member 有好幾個 user，"
    "也有只有一個 op、輸出給三個 op 的。",
    "def can_fuse(members):\n    raise NotImplementedError()\n",
    _check_can_fuse,
    "要檢查 len(node.users) == 1 的只有 members[:-1]：它們的輸出留在 pattern 裡面。"
    "最後一個 member 的輸出是 pattern 的輸出，會貼輸出標籤、量化，給幾個 op 讀都沒關係。",
    "def can_fuse(members):\n    return all(len(member.users) == 1 for member in members[:-1])\n",
    "只有一個 op 的 pattern 沒有中間值，永遠可以標：members[:-1] 是空的，all 是 True。",
)


_ONLY_USER_TEXT = (
    "import torch\n\n"
    "CONV = torch.ops.aten.conv2d.default\n"
    "RELU = torch.ops.aten.relu.default\n"
    "ADD = torch.ops.aten.add.Tensor\n"
    "MAX_POOL = torch.ops.aten.max_pool2d.default\n\n\n"
    "def only_user(node):\n"
    "    users = list(node.users)\n"
    "    return users[0] if len(users) == 1 else None\n\n\n"
)


def _reference_chain(node: Any, pattern: tuple[Any, ...]) -> list[Any] | None:
    """The members from ``node`` along ``pattern``, each the only user of the one before; None when they do not chain."""
    found: list[Any] = []
    current = node
    for target in pattern:
        if current is None or current.op != "call_function" or current.target != target:
            return None
        found.append(current)
        users = list(current.users)
        current = users[0] if len(users) == 1 else None
    return found


def _check_chain_of(chain_of: Any) -> list[str]:
    nodes = _single_user_graph()
    problems = []
    for start, pattern, shown in (
        ("conv_c", (CONV,), "(CONV,)"),
        ("conv_c", (CONV, RELU), "(CONV, RELU)"),
        ("conv_c", (CONV, RELU, MAX_POOL), "(CONV, RELU, MAX_POOL)"),
        ("conv_c", (CONV, RELU, ADD), "(CONV, RELU, ADD)"),
        ("relu_c", (CONV, RELU), "(CONV, RELU)"),
        ("conv_a", (CONV, RELU, ADD), "(CONV, RELU, ADD)"),
    ):
        want = _reference_chain(nodes[start], pattern)
        try:
            got = chain_of(nodes[start], pattern)
        except NotImplementedError:
            raise
        except Exception as error:
            problems.append(f"chain_of({start}, {shown})：執行時出錯（{type(error).__name__}：{error}）")
            continue
        wanted = "None" if want is None else str([n.name for n in want])
        try:
            mine = "None" if got is None else str([n.name for n in got])
        except (TypeError, AttributeError):
            mine = repr(got)
        if mine != wanted:
            problems.append(f"chain_of({start}, {shown})：應該是 {wanted}，你的是 {mine}")
    return problems


CHAIN_OF = Practice(
    "chain_of",
    "寫 chain_of(node, pattern)：從 node 開始，照 pattern 的 op 一個接一個往下接，回傳 member 的 list；接不起來就回傳 None。"
    "pattern 可以只有一個 op，也可以有三個或更多。下一個 member 用題目給的 only_user 找（唯一的 user，沒有就是 None）。"
    "檢查用 conv → relu → max_pool2d 與幾個長度不同的 pattern。",
    _ONLY_USER_TEXT + "def chain_of(node, pattern):\n    raise NotImplementedError()\n",
    _check_chain_of,
    "pattern 多長，就接幾個 member：先確認 node 是 call_function 而且 target 是 pattern[0]，"
    "再對 pattern[1:] 的每個 op 找上一個 member 的 only_user、確認 target，一個一個 append。長度是 1 時 chain 就是 [node]。",
    _ONLY_USER_TEXT + "def chain_of(node, pattern):\n"
    "    chain = []\n"
    "    for position, op in enumerate(pattern):\n"
    "        current = node if position == 0 else only_user(chain[-1])\n"
    '        if current is None or current.op != "call_function" or current.target != op:\n'
    "            return None\n"
    "        chain.append(current)\n"
    "    return chain\n",
    "不要寫死成 first, second = pattern：(CONV,) 和 (CONV, RELU, MAX_POOL) 都是合法的 pattern。",
)


def _check_conv_relu_pairs(conv_relu_pairs: Any) -> list[str]:
    nodes = _single_user_graph()
    graph = nodes["conv_a"].graph
    want = {
        (node.name, only.name)
        for node in graph.nodes
        if node.op == "call_function"
        and node.target == CONV
        and len(node.users) == 1
        and (only := next(iter(node.users))).op == "call_function"
        and only.target == RELU
    }
    got = conv_relu_pairs(graph)
    try:
        mine = {(conv.name, relu.name) for conv, relu in got}
    except (TypeError, ValueError, AttributeError):
        return [f"應該回傳 (conv, relu) 的 list，你的是 {got!r}"]
    problems = []
    if mine != want:
        missing = sorted(want - mine)
        problems.append(
            f"圖上的 conv → relu 應該是 {sorted(want)}，你的是 {sorted(mine)}"
            + (f"：少了 {missing}，找到一組之後還要把圖走完" if missing else "")
        )
    return problems


CONV_RELU_PAIRS = Practice(
    "conv_relu_pairs",
    "寫 conv_relu_pairs(graph)：回傳圖上每一組 conv → relu（relu 是 conv 唯一的 user）的 (conv, relu)，放在一個 list 裡。"
    "檢查用的圖有好幾組 conv → relu，也有 conv 的輸出同時給 relu 與 add 的。",
    _ONLY_USER_TEXT + "def conv_relu_pairs(graph):\n    raise NotImplementedError()\n",
    _check_conv_relu_pairs,
    "一個 pattern 在圖上可能出現好幾次：走完 graph.nodes，每一組符合的都放進 list，最後才 return；"
    "不要在找到第一組時就 return 或 break。",
    _ONLY_USER_TEXT + "def conv_relu_pairs(graph):\n"
    "    found = []\n"
    "    for node in graph.nodes:\n"
    "        user = only_user(node)\n"
    '        if node.target == CONV and user is not None and user.op == "call_function" and user.target == RELU:\n'
    "            found.append((node, user))\n"
    "    return found\n",
    "FusionQuantizer 的內層迴圈也一樣：每個符合、還沒被認領的地方都要標，不是只標第一個。",
)


MISCONCEPTIONS = (
    Misconception(
        "never_marks",
        "從來沒有設 _annotated = True",
        "_annotated 是告訴後面的 Quantizer「這個 node 有人負責了」。你的標籤都沒有認領，後面的 Quantizer 會以為沒人標過，"
        "在 pattern 裡面再貼標籤、插進 observer，你自己後面的 pattern 也會重複標同一個 node。"
        "每個 member 貼完都要把 _annotated 設成 True。",
        RULES,
        public=_public(never_marks),
        practice=CLOSE_CHAIN,
    ),
    Misconception(
        "constant_labelled",
        "weight、bias 這些常數也貼了標籤",
        'op == "get_attr" 的 node 是模型常數（weight、bias、buffer），不是從外面流進來的 activation。'
        "這個練習只量化 activation：member.all_input_nodes 裡的 get_attr 要跳過。",
        RULES,
        public=_public(constant_labelled),
        practice=OUTSIDE_INPUTS,
    ),
    Misconception(
        "labels_producer_output",
        "把輸入邊的標籤貼成上游的輸出標籤",
        "annotate_output_qspec(上游, spec) 改的是上游 node 的輸出，上游的每個 consumer 都會讀到量化過的值；"
        "pattern 要的是自己的輸入邊：annotate_input_qspec_map(member, 上游, spec)。"
        "邊標籤只影響一個 consumer，輸出標籤影響所有 consumer。",
        EDGE_AND_OUTPUT,
        public=_public(producer_outputs),
        practice=LABEL_READERS,
    ),
    Misconception(
        "specs_mean_claimed",
        "看標籤裡有沒有規格來判斷認領",
        "認領看的是 _annotated，不是標籤裡有沒有規格：前一個 Quantizer 可以放一張沒有任何規格、_annotated=True 的空標籤來認領 node，"
        "也可以貼了規格卻不認領。你把空標籤當成沒人認領、把有規格的當成已認領，剛好反了。"
        "判斷時只看 node.meta[ANNOTATION_KEY]._annotated。",
        WITH_XNNPACK,
        public=_public(claimed_by_specs),
        practice=CHAIN_IS_FREE,
    ),
    Misconception(
        "ignores_claimed",
        "沒有跳過已被認領的 node",
        "chain 裡只要有一個 member 的 _annotated 是 True，這個 chain 就不能標：它已經屬於 list 前面的 pattern，或前一個 Quantizer。"
        "你的程式照樣重貼，後面的 pattern 把前面融好的 node 又標了一次（像 (CONV,) 在已經融進 conv → relu 的 conv 上貼了輸出標籤）。"
        "標之前先檢查每個 member 的 _annotated。",
        RULES,
        public=_public(relabels_claimed_member),
        practice=CHAIN_IS_FREE,
    ),
    Misconception(
        "checks_first_member_only",
        "只檢查第一個 member 有沒有被認領",
        "chain 裡任何一個 member 被認領了，整個 chain 都不能標，不只看第一個。你只看 chain 的開頭，"
        "後面的 member 已經屬於別的 pattern 或前一個 Quantizer 時，又被你貼了一次標籤。每一個 member 的 _annotated 都要檢查。",
        RULES,
        public=_public(single_chain_taken_over),
        practice=CHAIN_IS_FREE,
    ),
    Misconception(
        "labelled_means_claimed",
        "把有標籤當成已被認領",
        "有標籤不代表有人認領：前一個 Quantizer 可以只貼標籤、不設 _annotated，表示這個 node 還沒有人負責。"
        "你看到標籤就跳過，這個 pattern 就沒有融合；只有 _annotated 是 True 才跳過。",
        WITH_XNNPACK,
        public=_public(claimed_by_label),
        practice=CHAIN_IS_FREE,
    ),
    Misconception(
        "node_order_first",
        "外層走 node，內層才走 pattern",
        "pattern 的順序就是優先順序：list 前面的 pattern 要先把整張圖找完，後面的 pattern 才輪到。"
        "你對每個 node 依序試每個 pattern，圖上先出現的 node 就被比較後面的 pattern 搶走了。"
        "外層迴圈走 patterns，內層才走 model.graph.nodes。",
        RULES,
        public=_public(fused_before_earlier_pattern),
        practice=OWNERS,
    ),
    Misconception(
        "marks_only_labelled",
        "沒有標籤的中間 member 沒有認領",
        "pattern 裡每個 member 都要設 _annotated = True，包括沒有任何標籤的中間 member（像 conv → relu → max_pool 的 relu）。"
        "沒有認領，後面的 Quantizer 會以為它沒人負責，在 pattern 裡面貼標籤、插進 observer。"
        "還沒有標籤的 member，先放一張空的 QuantizationAnnotation() 再設 _annotated。",
        RULES,
        public=_public(middle_unclaimed),
        practice=CLOSE_CHAIN,
    ),
    Misconception(
        "labels_every_output",
        "每個 member 的輸出都貼了標籤",
        "fusion 的意思就是 pattern 裡面不量化：只有最後一個 member 的輸出貼標籤，前面 member 的輸出不貼，中間才沒有 observer。"
        "你在每個 member 的輸出都貼了標籤，conv 和 relu 之間就多量化一次，後端也沒辦法把它們合成一個 kernel。",
        COST,
        public=_public(outputs_everywhere),
        practice=CLOSE_CHAIN,
    ),
    Misconception(
        "output_on_first",
        "輸出標籤貼在 pattern 的第一個 op",
        "pattern 的輸出是最後一個 member 算出來的值（conv → relu 的輸出是 relu 的輸出），輸出標籤要貼在 members[-1]。"
        "貼在第一個 member 上，observer 就插在 pattern 的中間，最後的輸出反而沒有量化。",
        BOUNDARY,
        public=_public(output_on_first),
        practice=CLOSE_CHAIN,
    ),
    Misconception(
        "no_output_label",
        "最後一個 op 的輸出沒有貼標籤",
        "邊界有兩種：從外面進來的輸入邊，和最後一個 member 的輸出。你只貼了輸入邊，pattern 算完的結果沒有 observer，"
        "convert 之後就一直是 fp32。貼完輸入邊，也要替 members[-1] 貼 annotate_output_qspec。",
        BOUNDARY,
        public=_public(no_output),
        practice=CLOSE_CHAIN,
    ),
    Misconception(
        "labels_previous_member",
        "member 之間的邊也貼了標籤",
        "上一個 member 到這一個 member 的邊在 pattern 裡面，貼了標籤就會在中間插 observer，等於沒有融合。"
        "貼輸入邊時要跳過上一個 member，只貼從 pattern 外面進來的邊。",
        RULES,
        public=_public(previous_member_labelled),
        practice=OUTSIDE_INPUTS,
    ),
    Misconception(
        "first_member_inputs_only",
        "只貼了第一個 member 的輸入邊",
        "從外面進到 pattern 的邊不只在第一個 member：relu(x + conv(x)) 的 x 直接進到 add，而 add 是第二個 member。"
        "每個 member 的每個輸入都要看：不是常數、也不是上一個 member，就要貼標籤。",
        RULES,
        public=_public(later_members_unlabelled),
        practice=OUTSIDE_INPUTS,
    ),
    Misconception(
        "args_not_flattened",
        "cat 的輸入沒有從 list 裡拿出來",
        "torch.cat([a, b]) 的輸入包在 args[0] 的 list 裡；只從 member.args 裡挑 Node，會漏掉 list 裡從外面進來的輸入。"
        "用 member.all_input_nodes，它已經把 list 攤平了。",
        RULES,
        public=_public(list_inputs_unlabelled),
        practice=OUTSIDE_INPUTS,
    ),
    Misconception(
        "skips_previous_by_target",
        "用 target 認上一個 member",
        "要跳過的是上一個 member 那一個 node，不是和它同一種 op 的所有 node：relu(a) + relu(b) 融成 (RELU, ADD) 時，"
        "另一個 relu 是從外面進來的輸入，要貼標籤。比較時看是不是同一個 node（arg is previous），不要比 target。",
        RULES,
        public=_public(same_op_as_previous_unlabelled),
        practice=OUTSIDE_INPUTS,
    ),
    Misconception(
        "output_not_a_user",
        "以為模型的輸出不算 consumer",
        "你數 consumer 時把 output node 排除了，所以 conv 的輸出同時是模型的輸出時，你還是把它和 relu 融在一起。"
        "output node 也是 consumer：那個值要以完整、量化好的 tensor 交出去，中間就不能不量化。"
        "找下一個 member 時直接數 len(node.users)，不要先把 output node 濾掉。",
        ARGS,
        public=_public(fused_past_output),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "no_single_user_check",
        "中間的 node 有別的 consumer 也融合了",
        "融合表示中間的值不量化、也不交給 pattern 以外的 op；conv 的輸出還要給 add 用時，它必須是一個完整量化好的 tensor。"
        "下一個 member 必須是上一個 member 唯一的 consumer（len(node.users) == 1），否則這個 chain 不算符合。",
        OWN,
        public=_public(fused_past_other_users),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "last_member_single_user",
        "連最後一個 member 也要求只有一個 consumer",
        "只有被融進去的中間值需要「只給下一個 member 用」；最後一個 member 的輸出本來就會量化，給幾個 op 用都可以。"
        "你連最後一個 member（或只有一個 op 的 pattern）也要求 len(users) == 1，輸出給兩個 op 的 conv 就沒有標。"
        "只在找下一個 member 時檢查 users。",
        RULES,
        public=_public(last_member_single_user),
        practice=CAN_FUSE,
    ),
    Misconception(
        "found_by_name",
        "用 node 的名字認 pattern 的 op",
        "node 的名字只是標記：叫 conv2d、relu 的可能是模型輸入；pass 依 module 改名之後，叫 relu 的可能是 conv。"
        "op 的身分在 node.op 與 node.target：先確認是 call_function，再拿 target 和 pattern 裡的 op 比對。",
        TARGET,
        public=_public(wrong_only_where_names_lie),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "next_in_graph_order",
        "下一個 member 照圖的順序找",
        "node.next 只是圖上排在後面的 node，不一定用到這個 node 的輸出：conv 算完之後，緊接著的可能是另一條分支的 relu。"
        "下一個 member 要從 node.users 找，而且必須是唯一的 user。",
        ARGS,
        public=_public(claims_graph_neighbour),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "requires_adjacent",
        "要求 member 在圖上緊鄰",
        "chain 看的是資料流，不是圖上的排列：conv 唯一的 user 是 relu，中間隔著別的分支的 node 也一樣能融。"
        "只要求「唯一的 user、target 對」，不要再要求 node.next 就是它。",
        ARGS,
        public=_public(only_adjacent_chains),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "args0_chain_only",
        "只沿著 args[0] 找下一個 member",
        "下一個 member 是上一個 member 的 user，但上一個 member 不一定是它的第一個引數：relu(x + conv(x)) 裡 conv 是 add 的第二個輸入，"
        "cat 的輸入則包在 args[0] 的 list 裡。用 node.users 找下一個 member，不要假設它在 args[0]。",
        ARGS,
        public=_public(fused_other_operand),
        practice=NEXT_MEMBER,
    ),
    Misconception(
        "pairs_only",
        "只處理兩個 op 的 pattern",
        "pattern 的長度不固定：(CONV,) 只有一個 op，(CONV, ADD, RELU) 有三個。你只處理兩個 op 的 pattern，其他的都沒有標。"
        "找 chain 時照 pattern 的長度一個一個往下接，長度是 1 時 chain 就是那個 node 自己。",
        RULES,
        public=_public(pairs_only),
        practice=CHAIN_OF,
    ),
    Misconception(
        "first_match_only",
        "每個 pattern 只找第一個符合的地方",
        "一個 pattern 在圖上可能出現很多次（像兩組 conv → relu），每一個符合、而且還沒被認領的地方都要標。"
        "你找到第一個就停了，後面的 chain 沒有融合，也沒有標籤；把圖走完，不要 break。",
        RULES,
        public=_public(later_match_missing),
        practice=CONV_RELU_PAIRS,
    ),
    Misconception(
        "other_observer",
        "observer 換成了別的類別",
        "規格裡的 observer 類別也是答案的一部分：練習要的是 act_spec()（MinMaxObserver）。"
        "照抄 XNNPACKQuantizer 的 activation 設定（HistogramObserver）數字範圍一樣，算出來的 scale 卻不同。",
        RULES,
        public=_public_observer,
        practice=IS_ACT_SPEC,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "fusion_quantizer",
        TITLE,
        ("FusionQuantizer",),
        {"conv_relu": conv_relu, "residual": residual, "two_users": two_users, "detours": detours},
        misconceptions=MISCONCEPTIONS,
    ),
)
