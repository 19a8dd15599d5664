"""Public cases of M01-3 改圖 (replace_op, insert_clamp) on the chapter's own models.

Also how a graph pass is described, shared with the hidden cases: the pass runs on an
exported graph, and the graph *after the call* is described from its FX structure (the
count of every call_function target, how the nodes that were there before are wired,
whether it passes ``lint``, whether the code was regenerated) and by running it on the
same inputs. New nodes are written as ``target(inputs…)``, so their names do not matter.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m01_1 import export

REPLACE_TITLE = "replace_op：把每個 old 換成 new"
CLAMP_TITLE = "insert_clamp：在每個 target 後面插一個 clamp"


def target_text(target: Any) -> str:
    """``aten.clamp.default`` for an op; ``module.name`` for a Python function (no memory address)."""
    if isinstance(target, str | OpOverload | OpOverloadPacket):
        return safe_text(target, 80)
    module = getattr(target, "__module__", None) or getattr(type(target), "__module__", "?")
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return safe_text(f"{module}.{name}", 80)


class Labeler:
    """Names for the nodes of a graph after a pass, independent of the names new nodes got.

    A node whose name, kind and target were in the graph before the pass keeps its name;
    any other node is written as ``target(inputs…)`` with its inputs labelled the same way.
    """

    def __init__(self, gm: GraphModule) -> None:
        self.before = {n.name: (n.op, n.target) for n in gm.graph.nodes}

    def original(self, node: Node) -> bool:
        entry = self.before.get(node.name)
        if entry is None or entry[0] != node.op:
            return False
        target = node.target
        return entry[1] is target or (type(entry[1]) is str and type(target) is str and entry[1] == target)

    def label(self, node: Node, depth: int = 0) -> str:
        if self.original(node):
            return node.name
        if depth >= 4:
            return f"{target_text(node.target)}(…)"
        inputs = ", ".join(self.label(a, depth + 1) for a in node.all_input_nodes)
        return f"{target_text(node.target)}({inputs})"


def output_numbers(value: Any) -> list[float]:
    """Every element of a model's output (tensors only), rounded to 6 decimals."""
    numbers: list[float] = []
    for leaf in torch.utils._pytree.tree_leaves(value):
        if type(leaf) is not torch.Tensor:
            raise EvidenceError(f"模型的輸出裡有不是 tensor 的值：{type(leaf).__name__}")
        numbers.extend(round(float(v), 6) for v in leaf.detach().flatten().tolist())
    if len(numbers) > 5000:
        raise EvidenceError("模型的輸出太大")
    return numbers


def _first_line(exc: BaseException) -> str:
    text = safe_text(exc, 400).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_pass(
    ns: Namespace,
    name: str,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    *args: Any,
    edit: Callable[[GraphModule], None] | None = None,
) -> dict[str, Any]:
    """Export ``model``, call ``ns[name](gm, *args)`` and describe ``gm`` after the call.

    ``edit``, when given, changes the exported graph first (an earlier pass: the student is handed
    its result). ``counts``: every call_function target and how many nodes have it; ``wiring``: for
    each node that was there before (and still has its target), the labels of its inputs;
    ``lint``: ``"ok"`` or lint's complaint; ``recompiled``: the code is the graph's current
    code; ``outputs``: the outputs on ``inputs``; ``unchanged``: the outputs did not change.
    """
    gm = export(model, inputs)
    if edit is not None:
        edit(gm)
        gm.graph.lint()
        gm.recompile()
    with torch.no_grad():
        before_out = output_numbers(gm(*inputs))
    labeler = Labeler(gm)
    result = ns[name](gm, *args)
    if result is not gm:
        raise EvidenceError(f"{name} 應該原地修改傳進來的 gm，最後回傳同一個 gm")
    counts = Counter(target_text(n.target) for n in gm.graph.nodes if n.op == "call_function")
    wiring = {
        n.name: [labeler.label(a) for a in n.all_input_nodes]
        for n in gm.graph.nodes
        if labeler.original(n) and n.op not in ("placeholder", "get_attr", "call_module")
    }
    try:
        gm.graph.lint()
        lint = "ok"
    except Exception as exc:  # the graph is broken: say how
        lint = _first_line(exc)
    try:
        recompiled = gm.code == gm.graph.python_code(root_module="self").src
    except Exception:  # a graph too broken to generate code
        recompiled = False
    try:
        with torch.no_grad():
            outputs: Any = output_numbers(gm(*inputs))
    except EvidenceError:
        raise
    except Exception as exc:  # running the edited graph failed: say how
        outputs = {"error": f"{type(exc).__name__}: {safe_text(exc, 200)}"}
    return {
        "counts": dict(sorted(counts.items())),
        "wiring": wiring,
        "lint": lint,
        "recompiled": recompiled,
        "outputs": outputs,
        "unchanged": outputs == before_out,
    }


# --- public cases: the chapter's models -----------------------------------------------------------


def _chapter(name: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from common.models import get_model

    shape = (4, 16) if name == "mlp" else (2, 3, 16, 16)
    return get_model(name), seeded_inputs(seed, shape, scales=(8.0,))


class FanOut(nn.Module):
    """A linear read by a relu and by an add; the relu's output is read by the add and returned."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        r = torch.relu(y)
        return r + y, r


def replace_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: relu → hardtanh(0, 6) (inputs large enough that some values pass 6)."""
    model, inputs = _chapter("mlp", seed)
    aten = torch.ops.aten
    return describe_pass(ns, "replace_op", model, inputs, aten.relu.default, aten.hardtanh.default, (0.0, 6.0))


def replace_residual(ns: Namespace, seed: int) -> Any:
    """residual: both relus → sigmoid, and the add of two tensors → sub (every argument is kept)."""
    aten = torch.ops.aten
    model, inputs = _chapter("residual", seed)
    relus = describe_pass(ns, "replace_op", model, inputs, aten.relu.default, aten.sigmoid.default)
    adds = describe_pass(ns, "replace_op", model, inputs, aten.add.Tensor, aten.sub.Tensor)
    return {"relu → sigmoid": relus, "add → sub": adds}


def replace_fan_out(ns: Namespace, seed: int) -> Any:
    """A relu read by an add and returned: relu → hardtanh(-1, 1)."""
    aten = torch.ops.aten
    inputs = seeded_inputs(seed, (4, 6), scales=(4.0,))
    return describe_pass(ns, "replace_op", FanOut(), inputs, aten.relu.default, aten.hardtanh.default, (-1.0, 1.0))


class ClampMinFan(nn.Module):
    """A linear clamped below at 0 (clamp_min), read by a cat (inside a list) and by a mul."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        c = torch.clamp_min(y, 0.0)
        return torch.cat([c, y], dim=1), c * y


def replace_clamp_min(ns: Namespace, seed: int) -> Any:
    """clamp_min(y, 0) → clamp(y, 0, 6): the old op has two arguments, the extra one goes after both; the node is
    read inside a cat's list and by a mul."""
    aten = torch.ops.aten
    inputs = seeded_inputs(seed, (4, 6), scales=(8.0,))
    return describe_pass(ns, "replace_op", ClampMinFan(), inputs, aten.clamp_min.default, aten.clamp.default, (6.0,))


def gelu_in_place(gm: GraphModule) -> None:
    """An earlier pass swapped the activation in place: the node ``relu`` now runs gelu (its name stays)."""
    node = next(n for n in gm.graph.nodes if n.name == "relu")
    node.target = torch.ops.aten.gelu.default


def replace_retargeted(ns: Namespace, seed: int) -> Any:
    """mlp after a pass made its relu a gelu in place (still named relu): gelu → hardtanh(0, 6)."""
    model, inputs = _chapter("mlp", seed)
    aten = torch.ops.aten
    return describe_pass(
        ns,
        "replace_op",
        model,
        inputs,
        aten.gelu.default,
        aten.hardtanh.default,
        (0.0, 6.0),
        edit=gelu_in_place,
    )


def other_overloads(op: OpOverload, found: list[str]) -> Callable[[GraphModule], None]:
    """An ``edit`` that changes nothing: it puts in ``found`` the names of the nodes of another overload of ``op``."""

    def note(gm: GraphModule) -> None:
        found.extend(
            n.name
            for n in gm.graph.nodes
            if n.op == "call_function"
            and isinstance(n.target, OpOverload)
            and n.target.overloadpacket is op.overloadpacket
            and n.target != op
        )

    return note


def with_other_overloads(
    ns: Namespace, name: str, model: nn.Module, inputs: tuple[torch.Tensor, ...], op: OpOverload, *args: Any
) -> dict[str, Any]:
    """``describe_pass`` of ``ns[name](gm, op, *args)``, and under ``other_overloads`` the nodes of another
    overload of ``op`` (they must be left alone)."""
    others: list[str] = []
    result = describe_pass(ns, name, model, inputs, op, *args, edit=other_overloads(op, others))
    return {**result, "other_overloads": others}


class SumGate(nn.Module):
    """x times its sum over channels (sum.dim_IntList) plus its sum over everything (sum.default)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x.sum(dim=1, keepdim=True) + x.sum()


def replace_sums(ns: Namespace, seed: int) -> Any:
    """sum.dim_IntList → amax: the sum of everything (sum.default, another overload) stays."""
    aten = torch.ops.aten
    inputs = seeded_inputs(seed, (2, 3, 4))
    return with_other_overloads(ns, "replace_op", SumGate(), inputs, aten.sum.dim_IntList, aten.amax.default)


def clamp_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: a clamp after each of the two linears (the second is the output)."""
    model, inputs = _chapter("mlp", seed)
    return describe_pass(ns, "insert_clamp", model, inputs, torch.ops.aten.linear.default, -0.5, 0.5)


def clamp_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: a clamp after each conv (both read by the cat, inside a list)."""
    model, inputs = _chapter("cat_pool", seed)
    return describe_pass(ns, "insert_clamp", model, inputs, torch.ops.aten.conv2d.default, -1.0, 2.0)


def clamp_fan_out(ns: Namespace, seed: int) -> Any:
    """A linear read by a relu and by an add: both read the clamp."""
    inputs = seeded_inputs(seed, (4, 6))
    return describe_pass(ns, "insert_clamp", FanOut(), inputs, torch.ops.aten.linear.default, -0.3, 0.4)


def fused_names(gm: GraphModule) -> None:
    """An earlier pass rebuilt the relu as ``hardtanh(linear, 0, 6)`` and named it after the fused pair:
    ``linear_relu6`` is no linear."""
    nodes = {n.name: n for n in gm.graph.nodes}
    relu = nodes["relu"]
    with gm.graph.inserting_after(relu):
        relu6 = gm.graph.create_node(
            "call_function", torch.ops.aten.hardtanh.default, (relu.args[0], 0.0, 6.0), name="linear_relu6"
        )
    relu.replace_all_uses_with(relu6)
    gm.graph.erase_node(relu)


def clamp_fused_names(ns: Namespace, seed: int) -> Any:
    """mlp after a pass named its relu6 ``linear_relu6``: a clamp after each of the two linears only."""
    model, inputs = _chapter("mlp", seed)
    return describe_pass(ns, "insert_clamp", model, inputs, torch.ops.aten.linear.default, -0.5, 0.5, edit=fused_names)


def clamp_two_convs(ns: Namespace, seed: int) -> Any:
    """M01-2's TwoConvs: a clamp after the conv2d.default only, not after the padding="same" one (conv2d.padding)."""
    from selfcheck.public.m01_2 import TwoConvs

    inputs = seeded_inputs(seed, (2, 3, 8, 8))
    return with_other_overloads(ns, "insert_clamp", TwoConvs(), inputs, torch.ops.aten.conv2d.default, -1.0, 2.0)


# --- where the chapter teaches it ----------------------------------------------------------------

REPLACING = Section("A. 替換：relu → hardtanh(0, 6)")
REPLACE_RULES = Section("練習 1：replace_op（3 分）")
RECOMPILE = Section("B. 忘了 `recompile` 會怎樣")
INSERTING = Section("C. 插入：在一個 node 後面插一個 node")
CLAMP_RULES = Section("練習 2：insert_clamp（4 分）")
DELETING = Section("D. 刪除：只有沒有 consumer 的 node 刪得掉")
BY_TARGET = Section("B. `node.target`：op 的身分", notebook="M01-1")
OVERLOADS = Section("D. 改用 `node.target` 找", notebook="M01-2")


# --- reading the evidence (the public cases' and the hidden ones' alike) ---------------------------
# Each graph after the pass is a record holding "counts" (target → how many nodes), "wiring" (each
# node that was there before → the labels of its inputs; a new node is "target(inputs…)"), "lint",
# "recompiled", "outputs" and "unchanged".


def passes(seen: Any, expected: Any) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """``(place, got, want)`` for each graph after the pass, in both evidences (place[0] is the case)."""
    return [
        (place, got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "counts")
        if all(isinstance(r.get("counts"), dict) and isinstance(r.get("wiring"), dict) for r in (got, want))
    ]


def same_structure(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """The same ops, the same wiring, and the graph passes lint."""
    return got["counts"] == want["counts"] and got["wiring"] == want["wiring"] and got.get("lint") == "ok"


def _outputs_differ(got: dict[str, Any], want: dict[str, Any]) -> bool:
    mine, key = got.get("outputs"), want.get("outputs")
    if not isinstance(mine, list) or not isinstance(key, list) or len(mine) != len(key):
        return True
    return any(abs(float(a) - float(b)) > 1e-5 + 1e-4 * abs(float(b)) for a, b in zip(mine, key, strict=True))


def _not_in_place(seen: Any, expected: Any) -> bool:
    return any(
        error == "EvidenceError" and "原地修改" in diagnosis.error_message(seen, case)
        for case, error in diagnosis.errors(seen).items()
    )


def _python_function(seen: Any, expected: Any) -> bool:
    """A new node whose target is a Python function (``torch.clamp``, ``F.hardtanh``), not an aten op."""
    return any(
        any(
            not str(target).startswith(("aten.", "<")) and str(target) not in want["counts"] for target in got["counts"]
        )
        for _, got, want in passes(seen, expected)
    )


def _not_recompiled(seen: Any, expected: Any) -> bool:
    return any(got.get("recompiled") is False for _, got, _ in passes(seen, expected))


USED_BEFORE = re.compile(r"Argument '([^']+)' of Node '([^']+)' was used before it has been defined")


def _lint_names(got: dict[str, Any]) -> tuple[str, str] | None:
    found = USED_BEFORE.search(str(got.get("lint", "")))
    return (found.group(1), found.group(2)) if found else None


def _after_output(seen: Any, expected: Any) -> bool:
    """A node is read before it is defined by another node: the new node was put at the end of the graph."""
    return any((names := _lint_names(got)) is not None and names[0] != names[1] for _, got, _ in passes(seen, expected))


def _reads_itself(seen: Any, expected: Any) -> bool:
    return any((names := _lint_names(got)) is not None and names[0] == names[1] for _, got, _ in passes(seen, expected))


def _label_parts(label: str) -> tuple[str, list[str]] | None:
    """``"aten.mul.Tensor(linear, y)"`` → ``("aten.mul.Tensor", ["linear", "y"])``; None for a plain name."""
    if not label.endswith(")") or "(" not in label:
        return None
    target, _, inside = label.partition("(")
    inside = inside[:-1]
    parts, depth, current = [], 0, ""
    for char in inside:
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += char == "("
        depth -= char == ")"
        current += char
    if current.strip():
        parts.append(current.strip())
    return target, parts


def _wiring_pairs(seen: Any, expected: Any) -> list[tuple[Any, str, str, str]]:
    """``(place, consumer, got label, want label)`` for each input of each node the key keeps, where they differ."""
    found = []
    for place, got, want in passes(seen, expected):
        for consumer, inputs in want["wiring"].items():
            mine = got["wiring"].get(consumer)
            if not isinstance(mine, list) or len(mine) != len(inputs):
                continue
            found.extend((place, str(consumer), str(a), str(b)) for a, b in zip(mine, inputs, strict=True) if a != b)
    return found


def _fewer_inputs(seen: Any, expected: Any) -> bool:
    """A new node reads only some of the old node's inputs: op(a) where the key has op(a, b)."""
    for _, _, mine, key in _wiring_pairs(seen, expected):
        got, want = _label_parts(mine), _label_parts(key)
        if got and want and got[0] == want[0] and len(got[1]) < len(want[1]) and want[1][: len(got[1])] == got[1]:
            return True
    return False


def _only_numbers_wrong(seen: Any, expected: Any) -> bool:
    """The right ops wired the right way, recompiled, and yet other outputs: the non-node arguments are wrong."""
    records = passes(seen, expected)
    return (
        bool(records)
        and all(same_structure(got, want) and got.get("recompiled") is not False for _, got, want in records)
        and any(_outputs_differ(got, want) for _, got, want in records)
    )


def _collapsed(seen: Any, expected: Any) -> bool:
    """Right structure, and the outputs collapse onto fewer values than the key's (clamp with min > max)."""

    def distinct(values: Any) -> int:
        return len(set(values)) if isinstance(values, list) else 0

    return _only_numbers_wrong(seen, expected) and any(
        _outputs_differ(got, want) and 0 < distinct(got.get("outputs")) * 2 <= distinct(want.get("outputs"))
        for _, got, want in passes(seen, expected)
    )


def _new_targets(got: dict[str, Any], want: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """The targets the student has more of, and the ones the key has more of."""
    more = {t: n - want["counts"].get(t, 0) for t, n in got["counts"].items() if n > want["counts"].get(t, 0)}
    less = {t: n - got["counts"].get(t, 0) for t, n in want["counts"].items() if n > got["counts"].get(t, 0)}
    return more, less


def _fewer_new_nodes(seen: Any, expected: Any) -> bool:
    """Fewer new nodes than the key's and old ones left: some matches were not replaced."""
    return any(all(_new_targets(got, want)) for _, got, want in passes(seen, expected))


def _fewer_clamps(seen: Any, expected: Any) -> bool:
    """Fewer new nodes than the key's, nothing else changed: some targets got none."""
    for _, got, want in passes(seen, expected):
        more, less = _new_targets(got, want)
        if less and not more:
            return True
    return False


def _old_left(seen: Any, expected: Any) -> bool:
    """Every node the key keeps reads what it should; only extra old nodes remain."""
    for _, got, want in passes(seen, expected):
        more, less = _new_targets(got, want)
        if (
            more
            and not less
            and all(got["wiring"].get(k) == v for k, v in want["wiring"].items())
            and set(got["wiring"]) > set(want["wiring"])
        ):
            return True
    return False


def _other_overloads_touched(seen: Any, expected: Any) -> bool:
    """A node of another overload of the op asked for (``other_overloads``, hidden cases only) was replaced (gone
    from the wiring) or clamped (a consumer reads a new node that reads it) where the key leaves it alone."""
    for _, got, want in passes(seen, expected):
        others = want.get("other_overloads")
        if not isinstance(others, list):
            continue
        for name in others:
            if name in want["wiring"] and name not in got["wiring"]:
                return True
            for consumer, inputs in want["wiring"].items():
                mine = got["wiring"].get(consumer)
                if not isinstance(mine, list):
                    continue
                for label in mine:
                    parts = _label_parts(str(label))
                    if parts and name in parts[1] and label not in inputs:
                        return True
    return False


NAME_TRAPS = ("retargeted", "fused_names")
"""Public cases whose node names no longer tell their ops (a pass changed a target in place, or named a node)."""


def _only_where_names_lie(seen: Any, expected: Any) -> bool:
    """The graph whose node names no longer match their ops is edited wrong, and no other graph is but those with
    a node of another overload of the op (named like it: a name test takes it too)."""
    if diagnosis.errors(seen):
        return False
    records = passes(seen, expected)
    wrong = {
        place[0] for place, got, want in records if got["counts"] != want["counts"] or got["wiring"] != want["wiring"]
    }
    overloads = {place[0] for place, _, want in records if want.get("other_overloads")}
    return bool(wrong & set(NAME_TRAPS)) and wrong <= set(NAME_TRAPS) | overloads


def _packet_target(seen: Any, expected: Any) -> bool:
    """The new nodes' target is the packet of the op the key uses (``aten.clamp`` for ``aten.clamp.default``)."""
    for _, got, want in passes(seen, expected):
        more, less = _new_targets(got, want)
        if any(str(key).startswith(f"{mine}.") for mine in more for key in less):
            return True
    return False


def _other_op(seen: Any, expected: Any) -> bool:
    """As many new nodes as the key's, of another aten op (hardtanh for clamp)."""
    for _, got, want in passes(seen, expected):
        more, less = _new_targets(got, want)
        if (
            more
            and less
            and sum(more.values()) == sum(less.values())
            and all(str(t).startswith("aten.") for t in more)
            and not any(str(key).startswith(f"{mine}.") for mine in more for key in less)
        ):
            return True
    return False


LIST_READERS = ("cat", "output")
"""Nodes of the cases that read their inputs inside a list or a tuple."""


def reads_in_list(consumer: str) -> bool:
    return consumer == "output" or consumer.startswith("cat")


def _unrewired(seen: Any, expected: Any) -> list[tuple[Any, str]]:
    """``(place, consumer)`` where the consumer still reads the old node instead of the new one: the target itself
    (an insertion), or the old node left in the graph, reading what the new one reads (a replacement)."""
    found = []
    for place, got, want in passes(seen, expected):
        for consumer, inputs in want["wiring"].items():
            mine = got["wiring"].get(consumer)
            if not isinstance(mine, list) or len(mine) != len(inputs):
                continue
            for label, key in zip(mine, inputs, strict=True):
                parts = _label_parts(str(key))
                if label == key or parts is None or _label_parts(str(label)) is not None:
                    continue
                if label in parts[1] or got["wiring"].get(label) == parts[1]:
                    found.append((place, str(consumer)))
    return found


def _clamps_input(seen: Any, expected: Any) -> bool:
    """A new node reads the target's first input instead of the target: op(x) where the key has op(conv2d)."""
    for _, got, want in passes(seen, expected):
        for consumer, inputs in want["wiring"].items():
            mine = got["wiring"].get(consumer)
            if not isinstance(mine, list) or len(mine) != len(inputs):
                continue
            for label, key in zip(mine, inputs, strict=True):
                have, wanted = _label_parts(str(label)), _label_parts(str(key))
                if not have or not wanted or have[0] != wanted[0] or have[1] == wanted[1] or not wanted[1]:
                    continue
                read = want["wiring"].get(wanted[1][0])
                if isinstance(read, list) and read[:1] == have[1][:1]:
                    return True
    return False


def _some_users_only(seen: Any, expected: Any) -> bool:
    """A consumer that reads the node directly (not inside a list or the output's tuple) was not rewired."""
    return any(not reads_in_list(consumer) for _, consumer in _unrewired(seen, expected))


def _list_users_missed(seen: Any, expected: Any) -> bool:
    """Only the consumers reading it inside a list or a tuple were not rewired, a cat among them."""
    missed = _unrewired(seen, expected)
    return bool(missed) and all(reads_in_list(c) for _, c in missed) and any(c != "output" for _, c in missed)


def _output_missed(seen: Any, expected: Any) -> bool:
    missed = _unrewired(seen, expected)
    return bool(missed) and all(c == "output" for _, c in missed)


# --- practice after a mistake (issue 50): one idea each, on small graphs of their own -------------------------


class _Readers(nn.Module):
    """relu(x) read four ways: r * r, inside cat's list, by keyword (mul(x, other=r)), and as an output."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = torch.relu(x)
        return r * r, torch.cat([r, x]), torch.mul(x, other=r), r


def _readers_input() -> torch.Tensor:
    return torch.tensor([[-1.0, 0.5], [2.0, -0.25]])


def _readers_expected(r: torch.Tensor) -> list[torch.Tensor]:
    """The outputs of ``_Readers`` when every consumer reads ``r`` in place of relu(x)."""
    x = _readers_input()
    return [r * r, torch.cat([r, x]), torch.mul(x, other=r), r]


def _readers() -> tuple[GraphModule, Node]:
    gm = torch.fx.symbolic_trace(_Readers())
    return gm, next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.relu)


def _lint(gm: GraphModule) -> str | None:
    """lint's complaint, its first line; None when the graph is well formed."""
    try:
        gm.graph.lint()
    except Exception as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return None


def _readers_wrong(gm: GraphModule, want: list[torch.Tensor]) -> str | None:
    """Which outputs of ``gm`` on the practice's input are not ``want`` (None when they all are)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # fx prints the generated code on an error
            got = list(gm(_readers_input()))
    except Exception as error:
        return f"執行 gm 時出錯（{type(error).__name__}: {safe_text(error, 80)}）"
    shown = ("r * r", "cat([r, x])", "mul(x, other=r)", "輸出的 r")
    wrong = [name for name, mine, right in zip(shown, got, want, strict=True) if not torch.allclose(mine, right)]
    return f"gm(x) 的 {'、'.join(wrong)} 和預期不同" if wrong else None


def _new_args_cases() -> list[tuple[str, Node, tuple[Any, ...]]]:
    """(title, the old node, extra_args): one, two and one argument, extra arguments or none."""
    aten = torch.ops.aten
    graph = Graph()
    x = graph.placeholder("x")
    y = graph.placeholder("y")
    relu = graph.call_function(aten.relu.default, (x,))
    clamp = graph.call_function(aten.clamp.default, (x, 0.0))
    add = graph.call_function(aten.add.Tensor, (x, y))
    sigmoid = graph.call_function(aten.sigmoid.default, (add,))
    return [
        ("relu(x) → hardtanh，extra_args = (0.0, 6.0)", relu, (0.0, 6.0)),
        ("clamp(x, 0.0) → hardtanh，extra_args = (6.0,)", clamp, (6.0,)),
        ("add(x, y) → mul，extra_args = ()", add, ()),
        ("sigmoid(add) → hardsigmoid，extra_args = ()", sigmoid, ()),
    ]


def _check_new_args(new_args: Any) -> list[str]:
    problems = []
    for title, node, extra in _new_args_cases():
        want = (*node.args, *extra)
        got = new_args(node, extra)
        if not isinstance(got, tuple | list) or tuple(got) != want:
            mine = _shown_args(tuple(got)) if isinstance(got, tuple | list) else repr(got)
            problems.append(f"{title}：應該是 {_shown_args(want)}，你的是 {mine}")
    return problems


def _shown_args(args: tuple[Any, ...]) -> str:
    return (
        "("
        + ", ".join(a.name if isinstance(a, Node) else repr(a) for a in args)
        + ("," if len(args) == 1 else "")
        + ")"
    )


NEW_ARGS = Practice(
    "new_args",
    "寫 new_args(node, extra_args)：replace_op 要用新的 op 取代 node，回傳新 node 的引數（一個 tuple）："
    "原本的引數一個都不少、順序不變，extra_args 接在後面。"
    "檢查用 relu(x)、clamp(x, 0.0)、add(x, y) 與 sigmoid(add)，有的有 extra_args，有的沒有。",
    "def new_args(node, extra_args):\n    raise NotImplementedError()\n",
    _check_new_args,
    "node.args 是原本的每一個引數（add 有兩個 tensor，clamp(x, 0.0) 有 x 與 0.0），不只是 node.args[0]；"
    "hardtanh(x, min_val, max_val) 的範圍接在這些引數之後。兩個 tuple 可以直接用 + 接起來。",
    "def new_args(node, extra_args):\n    return tuple(node.args) + tuple(extra_args)\n",
    "clamp(x, 0.0) 換成 hardtanh 時 extra_args 只要 (6.0,)：0.0 已經是原本的第二個引數。",
)


def _check_hand_over(hand_over: Any) -> list[str]:
    gm, old = _readers()
    readers = [user.name for user in old.users]
    with gm.graph.inserting_after(old):
        new = gm.graph.call_function(torch.ops.aten.abs.default, (old.args[0],))
    try:
        hand_over(gm, old, new)
    except NotImplementedError:
        raise
    except Exception as error:
        if "Tried to erase Node" in str(error):
            still = [user.name for user in old.users]
            return [
                f"刪 relu 的時候，{still} 還在讀它：只有沒有 consumer 的 node 刪得掉，先把每一個 consumer 都改接到 new"
            ]
        return [f"hand_over 出錯了（{type(error).__name__}: {safe_text(error, 120)}）"]
    nodes = list(gm.graph.nodes)
    problems = []
    if old in nodes:
        still = [user.name for user in old.users]
        if still:
            problems.append(f"relu 原本的 consumer {readers} 都該改讀 {new.name}，{still} 還在讀 relu")
        else:
            problems.append("relu 已經沒有 consumer，卻還留在圖上：刪掉它")
    late = _lint(gm)
    if late:
        problems.append(f"gm.graph.lint() 不通過：{late}")
    elif not problems:
        differ = _readers_wrong(gm, _readers_expected(_readers_input().abs()))
        if differ:
            problems.append(f"圖改對了，{differ}：gm 跑的還是舊的程式碼")
    return problems


HAND_OVER = Practice(
    "hand_over",
    "寫 hand_over(gm, old, new)：new 已經建好、插在 old 後面，讀的是 old 的輸入。讓 old 原本的每一個 consumer "
    "都改讀 new，把 old 從圖上拿掉，最後讓 gm 照新的圖執行。"
    "檢查用的 old 是 relu，有四個 consumer：r * r、cat([r, x])、mul(x, other=r) 和圖的輸出，new 是 abs。",
    "def hand_over(gm, old, new):\n    raise NotImplementedError()\n",
    _check_hand_over,
    "三步：old.replace_all_uses_with(new) 一次改接每一個 consumer（list 裡、keyword 引數裡、output 的 tuple 裡都算）；"
    "old 沒有 consumer 了，gm.graph.erase_node(old) 才刪得掉；GraphModule 跑的是由圖產生的程式碼，"
    "最後 gm.recompile()。",
    "def hand_over(gm, old, new):\n"
    "    old.replace_all_uses_with(new)\n"
    "    gm.graph.erase_node(old)\n"
    "    gm.recompile()\n",
    "少了 recompile 不會出錯，gm 卻還在算 relu：改完圖要拿輸出和預期比，才看得出來。",
)


def _check_add_after(add_after: Any) -> list[str]:
    gm, node = _readers()
    readers = [user.name for user in node.users]
    sigmoid = torch.ops.aten.sigmoid.default
    try:
        new = add_after(gm, node, sigmoid)
    except NotImplementedError:
        raise
    except Exception as error:
        return [f"add_after 出錯了（{type(error).__name__}: {safe_text(error, 120)}）"]
    added = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == sigmoid]
    if len(added) != 1:
        return [f"圖上應該多一個 aten.sigmoid.default 的 node，你的圖上有 {len(added)} 個"]
    (made,) = added
    problems = []
    if new is not made:
        problems.append(f"要回傳新插的 node（{made.name}），你回傳的是 {new!r}")
    if made in made.all_input_nodes:
        problems.append("新 node 讀的是它自己：它也是 relu 的 consumer，改接時連它也改掉了")
    elif made.all_input_nodes != [node]:
        problems.append(
            f"新 node 應該讀 relu（它要處理的是 relu 算出來的值），它讀的是 {[n.name for n in made.all_input_nodes]}"
        )
    still = [user.name for user in node.users if user is not made]
    if still:
        problems.append(f"relu 原本的 consumer {readers} 都該改讀新 node，{still} 還在讀 relu")
    late = _lint(gm)
    if late and not problems:
        order = list(gm.graph.nodes)
        if order.index(made) > order.index(next(iter(made.users), made)):
            late = f"新 node 排在讀它的 node 後面（{late}）"
        problems.append(f"gm.graph.lint() 不通過：{late}")
    if not problems:
        differ = _readers_wrong(gm, _readers_expected(torch.sigmoid(torch.relu(_readers_input()))))
        if differ:
            problems.append(f"圖改對了，{differ}：gm 跑的還是舊的程式碼")
    return problems


ADD_AFTER = Practice(
    "add_after",
    "寫 add_after(gm, node, op)：在 node 後面插一個 op(node) 的新 node（call_function，target 就是傳進來的 op），"
    "讓 node 原本的每一個 consumer 都改讀新 node，新 node 自己讀 node；讓 gm 照新的圖執行，回傳新 node。"
    "檢查用的 node 是 relu，有四個 consumer：r * r、cat([r, x])、mul(x, other=r) 和圖的輸出；op 是 "
    "torch.ops.aten.sigmoid.default。",
    "def add_after(gm, node, op):\n    raise NotImplementedError()\n",
    _check_add_after,
    "新 node 要排在 node 之後、它的 consumer 之前：在 with gm.graph.inserting_after(node): 裡建它。"
    "它自己也讀 node，所以也是 node 的 consumer：node.replace_all_uses_with(新 node) 會連它也改掉，變成自己讀自己；"
    "用 delete_user_cb 回傳 False 把它排除。最後 gm.recompile()。",
    "def add_after(gm, node, op):\n"
    "    with gm.graph.inserting_after(node):\n"
    "        added = gm.graph.call_function(op, (node,))\n"
    "    for user in list(node.users):\n"
    "        if user is not added:\n"
    "            user.replace_input_with(node, added)\n"
    "    gm.recompile()\n"
    "    return added\n",
    "replace_input_with 換掉一個 consumer 讀 node 的每個地方；也可以用 node.replace_all_uses_with(added, "
    "delete_user_cb=lambda user: user is not added) 一次做完。",
)


NO_RECOMPILE = Misconception(
    "no_recompile",
    "改完圖沒有 gm.recompile()",
    "GraphModule 執行的是由圖產生的程式碼 gm.code，不是圖本身：改了圖不 recompile，gm 跑的還是舊程式，輸出不變，也不會出錯。"
    "改完圖、lint() 之後一定要 gm.recompile()。",
    RECOMPILE,
    public=_not_recompiled,
    practice=HAND_OVER,
)
"""Both exercises of the chapter change the graph: the same misconception, the same words."""

REPLACE_MISCONCEPTIONS = (
    Misconception(
        "returns_copy",
        "改的是副本，不是傳進來的 gm",
        "replace_op 要原地修改傳進來的 gm：呼叫的人手上只有那一個 gm，你改副本再回傳，他的圖完全沒變。"
        "直接在 gm.graph 上改，最後回傳同一個 gm。",
        REPLACE_RULES,
        public=_not_in_place,
    ),
    Misconception(
        "python_function",
        "新 node 的 target 用了 Python 函式",
        "torch.nn.functional.hardtanh 這類 Python 函式數值一樣，但放進圖裡就不是 aten op，"
        "之後依 node.target 找 op 的程式（Quantizer、M01-2 的 find_nodes）都認不出它。新 node 的 target 直接用傳進來的 new。",
        REPLACE_RULES,
        public=_python_function,
    ),
    NO_RECOMPILE,
    Misconception(
        "appended_at_end",
        "新 node 沒有用 inserting_after 放好位置",
        "graph.call_function 預設把新 node 加在圖的最後（output 之後），node 的順序就是執行順序，"
        "讀它的 node 會在它定義之前就用到它，lint() 失敗。建新 node 時放在 with gm.graph.inserting_after(node): 裡。",
        REPLACING,
        public=_after_output,
        practice=ADD_AFTER,
    ),
    Misconception(
        "by_name",
        "用 node 的名字找 old",
        "node 的名字只是標籤：別的 pass 原地改過 target 之後，叫 sigmoid 的 node 可能是 relu。"
        "要換的是 node.target == old 的 node，名字不能用來認 op。",
        BY_TARGET,
        public=_only_where_names_lie,
    ),
    Misconception(
        "other_overloads",
        "比 overloadpacket，換掉了同一個 op 的其他 overload",
        "old 是一個 OpOverload（例如 aten.clamp.default），只有 node.target == old 的 node 要換。"
        "比 node.target.overloadpacket 會把同一個 op 的其他 overload（x.mean() 是 mean.default，不是 mean.dim）也一起換掉，"
        "它們的引數和 old 不同，換了就錯。直接比 node.target == old。",
        OVERLOADS,
        public=_other_overloads_touched,
    ),
    Misconception(
        "first_argument_only",
        "新 node 只讀 node.args[0]",
        "relu、sigmoid 只有一個輸入，但 add(a, b) 有兩個：只取 node.args[0]，新 node 就少了一個輸入。"
        "新 node 的引數要是 (*node.args, *extra_args)，原本的引數一個都不能少。",
        REPLACE_RULES,
        public=_fewer_inputs,
        practice=NEW_ARGS,
    ),
    Misconception(
        "extra_args_misplaced",
        "extra_args 沒接在原本的引數後面",
        "hardtanh(x, 0, 6) 的 0 與 6 是 extra_args，要接在原本的每一個引數之後：(*node.args, *extra_args)。"
        "漏掉它們，hardtanh 用預設的 (-1, 1)；放在前面或插在第一個引數後面，old 有兩個以上引數時（clamp(x, 0)）位置就錯了；"
        "自己寫成 min_val=…、max_val=… 也一樣會和原本的引數對不上。",
        REPLACE_RULES,
        public=_only_numbers_wrong,
        practice=NEW_ARGS,
    ),
    Misconception(
        "first_match_only",
        "只換了第一個符合的 node",
        "圖上可能有好幾個 old（residual 的 relu 就有兩個），每一個都要換。"
        "走完整個 list(gm.graph.nodes)，不要換完一個就 break。",
        REPLACE_RULES,
        public=_fewer_new_nodes,
    ),
    Misconception(
        "first_user_only",
        "只改接了第一個 consumer",
        "一個 node 可以有好幾個 consumer，只改一個的話，其他 consumer 還讀舊 node，舊 node 也刪不掉。"
        "用 node.replace_all_uses_with(new_node) 一次改接全部，包括 output。",
        REPLACING,
        public=_some_users_only,
        practice=HAND_OVER,
    ),
    Misconception(
        "rewrites_args_tuple",
        "自己改 consumer 的 args，漏了 list 與 tuple 裡的",
        "consumer 不一定在 args 的最外層讀舊 node：cat 在一個 list 裡讀它，output 在一個 tuple 裡回傳它。"
        "自己替換 user.args 的最外層會漏掉這些；replace_all_uses_with 會處理每一種讀法。",
        REPLACING,
        public=_list_users_missed,
        practice=HAND_OVER,
    ),
    Misconception(
        "old_node_left",
        "改接了 consumer，舊 node 卻沒刪",
        "改接之後舊 node 沒有 consumer 了，但它還在圖上，圖上的 op 數量就不對。"
        "改接完用 gm.graph.erase_node(node) 刪掉它（或最後呼叫 eliminate_dead_code()）。",
        DELETING,
        public=_old_left,
        practice=HAND_OVER,
    ),
)

CLAMP_MISCONCEPTIONS = (
    Misconception(
        "python_function",
        "插的是 Python 的 torch.clamp",
        "torch.clamp 數值和 aten.clamp.default 一樣，但放進圖裡就不是 aten op，之後依 node.target 找 op 的程式找不到它。"
        "新 node 的 target 要用 torch.ops.aten.clamp.default。",
        CLAMP_RULES,
        public=_python_function,
    ),
    NO_RECOMPILE,
    Misconception(
        "appended_at_end",
        "clamp 沒有用 inserting_after 放好位置",
        "graph.call_function 預設把新 node 加在圖的最後（output 之後），讀 clamp 的 node 就在它定義之前用到它，lint() 失敗。"
        "建 clamp 時放在 with gm.graph.inserting_after(node): 裡。",
        INSERTING,
        public=_after_output,
        practice=ADD_AFTER,
    ),
    Misconception(
        "clamp_reads_itself",
        "replace_all_uses_with 沒有排除 clamp 自己",
        "clamp 讀的就是原本的 node，所以它自己也是那個 node 的 consumer：直接 replace_all_uses_with(clamp) 會連它也改掉，"
        "變成 clamp 讀 clamp 自己。用 delete_user_cb=lambda user: user is not clamp 排除它。",
        INSERTING,
        public=_reads_itself,
        practice=ADD_AFTER,
    ),
    Misconception(
        "by_name",
        "用 node 的名字找 target",
        "node 的名字只是標籤：op 依 module 改過名之後，叫 proj 的是 linear，名字以 linear 開頭的卻可能是 relu。"
        "要找的是 node.target == target 的 node，名字不能用來認 op。",
        BY_TARGET,
        public=_only_where_names_lie,
    ),
    Misconception(
        "other_overloads",
        "比 overloadpacket，其他 overload 也插了 clamp",
        "target 是一個 OpOverload（例如 aten.conv2d.default），只有 node.target == target 的 node 後面要插 clamp。"
        '比 node.target.overloadpacket 會把同一個 op 的其他 overload（padding="same" 的 conv 是 conv2d.padding）也算進去。'
        "直接比 node.target == target。",
        OVERLOADS,
        public=_other_overloads_touched,
    ),
    Misconception(
        "packet_target",
        "clamp 用了 OpOverloadPacket",
        "torch.ops.aten.clamp 是整個 op 的總稱（OpOverloadPacket），不是圖上的 target：數值一樣，"
        "但 node.target 不等於 aten.clamp.default，之後依 target 找 clamp 的程式找不到它。用 torch.ops.aten.clamp.default。",
        OVERLOADS,
        public=_packet_target,
    ),
    Misconception(
        "other_clamping_op",
        "用別的 op 代替 clamp",
        "hardtanh(x, low, high) 的數值和 clamp 一樣，但練習要的是 aten.clamp.default 這個 op："
        "圖上的 target 不同，依 target 找 clamp 的程式就找不到它。照規定用 torch.ops.aten.clamp.default。",
        CLAMP_RULES,
        public=_other_op,
    ),
    Misconception(
        "first_match_only",
        "只在第一個 target 後面插 clamp",
        "圖上可能有好幾個 target 符合的 node，每一個後面都要插一個 clamp。"
        "走完整個 list(gm.graph.nodes)，不要插完一個就 break。",
        CLAMP_RULES,
        public=_fewer_clamps,
    ),
    Misconception(
        "clamp_reads_input",
        "clamp 讀的是 target 的輸入",
        "clamp 要夾住的是 target 算出來的結果，所以它讀的是 node 本身：(node, low, high)，不是 node.args[0]。"
        "讀 node.args[0] 的話，target 算完沒人用，clamp 夾的是它之前的值。",
        INSERTING,
        public=_clamps_input,
        practice=ADD_AFTER,
    ),
    Misconception(
        "first_user_only",
        "只改接了第一個 consumer",
        "一個 node 可以有好幾個 consumer，只改一個的話，其他 consumer 讀到的還是沒有夾過的值。"
        "用 node.replace_all_uses_with(clamp, delete_user_cb=…) 一次改接全部（排除 clamp 自己）。",
        INSERTING,
        public=_some_users_only,
        practice=HAND_OVER,
    ),
    Misconception(
        "rewrites_args_tuple",
        "自己改 consumer 的 args，漏了 list 與 tuple 裡的",
        "consumer 不一定在 args 的最外層讀這個 node：cat 在一個 list 裡讀它，output 在一個 tuple 裡回傳它。"
        "自己替換 user.args 的最外層會漏掉這些；replace_all_uses_with 會處理每一種讀法。",
        INSERTING,
        public=_list_users_missed,
        practice=HAND_OVER,
    ),
    Misconception(
        "output_skipped",
        "以為 output node 不用改接",
        "output node 把值回傳出去，它也是 consumer：不改接的話，模型回傳的還是沒有夾過的值。"
        "改接時只排除 clamp 自己，不要排除 output。",
        CLAMP_RULES,
        public=_output_missed,
        practice=ADD_AFTER,
    ),
    Misconception(
        "swapped_bounds",
        "clamp 的 low、high 順序反了",
        "aten.clamp.default 的引數是 (input, min, max)。寫成 (node, high, low) 時 min 比 max 大，"
        "每個值都被夾成同一個數。照 (node, low, high) 的順序傳。",
        CLAMP_RULES,
        public=_collapsed,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "replace_op",
        REPLACE_TITLE,
        ("replace_op",),
        {
            "mlp": replace_mlp,
            "residual": replace_residual,
            "fan_out": replace_fan_out,
            "clamp_min": replace_clamp_min,
            "retargeted": replace_retargeted,
            "sums": replace_sums,
        },
        misconceptions=REPLACE_MISCONCEPTIONS,
    ),
    Exercise(
        "insert_clamp",
        CLAMP_TITLE,
        ("insert_clamp",),
        {
            "mlp": clamp_mlp,
            "cat_pool": clamp_cat_pool,
            "fan_out": clamp_fan_out,
            "fused_names": clamp_fused_names,
            "two_convs": clamp_two_convs,
        },
        misconceptions=CLAMP_MISCONCEPTIONS,
    ),
)
