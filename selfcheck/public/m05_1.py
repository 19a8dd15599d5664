"""Public cases of M05-1 convert 之後的圖 (qdq_path, qdq_summary) on the chapter's own models.

The graphs are the chapter's: conv_relu quantized with XNNPACKQuantizer and converted with
and without ``fold_quantize``, and cat_pool with per-channel weights; conv_relu squared (``h * h``),
and conv_relu with a dequantize a pass left behind. The evidence is what the student's functions
return, as plain data (tuples become lists), and whether they left the graph they read as it was.
"""

from __future__ import annotations

import collections
import copy
import functools
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import plain, qdq_kind
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m01_1 import graph_changes, graph_state


class Square(torch.nn.Module):
    """conv → relu → h * h: one op reads the same tensor twice (its two operands are one node)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        return h * h


OWN_MODELS = {"square": Square}
"""Models of this module's own, beside the chapter's (``common.models``)."""


def calibrated_and_converted(name: str, seed: int, per_channel: bool, fold: bool) -> GraphModule:
    """export → prepare_pt2e (XNNPACKQuantizer) → 4 calibration batches → convert_pt2e; a fresh copy each call
    (the answer may change the graph it is given), computed once per process (both exercises read the same four)."""
    return copy.deepcopy(_converted(name, seed, per_channel, fold))


@functools.lru_cache(maxsize=16)
def _converted(name: str, seed: int, per_channel: bool, fold: bool) -> GraphModule:
    from common.models import get_model
    from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e

    quantizer, _ = get_xnnpack_quantizer(is_per_channel=per_channel)
    shape = (4, 3, 16, 16)
    model = OWN_MODELS[name]() if name in OWN_MODELS else get_model(name)
    prepared = prepare_pt2e(export_module(model.eval(), seeded_inputs(seed, shape)), quantizer)
    with torch.no_grad():
        for step in range(4):
            prepared(*seeded_inputs(seed * 1000 + step, shape))
    return convert_pt2e(prepared, fold_quantize=fold)


def consumers(gm: GraphModule) -> list[str]:
    """Every op that is not a q/dq, and the output."""
    return [n.name for n in gm.graph.nodes if n.op in ("call_function", "output") and qdq_kind(n) is None]


def paths(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    return {name: plain(ns["qdq_path"](gm, name)) for name in consumers(gm)}


def summary(ns: Namespace, gm: GraphModule) -> Any:
    """The returned counts; entries with count 0 are dropped (listing an op that is absent is allowed)."""
    result = ns["qdq_summary"](gm)
    if type(result) in (collections.Counter, collections.defaultdict, collections.OrderedDict):
        result = dict(result)  # the standard dicts a count is often kept in (exact types only)
    counts = plain(result)
    return {k: v for k, v in counts.items() if v != 0} if isinstance(counts, dict) else counts


def path_conv_relu(ns: Namespace, seed: int) -> Any:
    """conv_relu, per-tensor weights, converted with fold_quantize=True and False."""
    return {
        "fold_quantize=True": paths(ns, calibrated_and_converted("conv_relu", seed, False, True)),
        "fold_quantize=False": paths(ns, calibrated_and_converted("conv_relu", seed, False, False)),
    }


def path_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool with per-channel weights: x feeds two convs, the cat's inputs are in a list."""
    return paths(ns, calibrated_and_converted("cat_pool", seed, True, True))


def path_square(ns: Namespace, seed: int) -> Any:
    """conv_relu squared, per-tensor, folded: ``mul`` reads one dequantize twice."""
    return paths(ns, calibrated_and_converted("square", seed, False, True))


def left_over(seed: int) -> GraphModule:
    """conv_relu (per-tensor, folded) after a pass that removed an op and left its dequantize behind: a second
    dequantize of the relu's quantize that nobody reads."""
    gm = calibrated_and_converted("conv_relu", seed, False, True)
    quantize = next(n for n in gm.graph.nodes if qdq_kind(n) == "q" and n.args[0].name == "relu")
    read = next(iter(quantize.users))
    with gm.graph.inserting_after(read):
        gm.graph.call_function(read.target, read.args, dict(read.kwargs))
    gm.recompile()
    return gm


def path_unchanged(ns: Namespace, seed: int) -> Any:
    """qdq_path asked about every consumer of ``left_over``: how the graph differs afterwards (nothing)."""
    gm = left_over(seed)
    before = graph_state(gm)
    for name in consumers(gm):
        ns["qdq_path"](gm, name)
    return {"changed": graph_changes(before, gm)}


def summary_unchanged(ns: Namespace, seed: int) -> Any:
    """qdq_summary of ``left_over``: how the graph differs afterwards (nothing)."""
    gm = left_over(seed)
    before = graph_state(gm)
    ns["qdq_summary"](gm)
    return {"changed": graph_changes(before, gm)}


def summary_conv_relu(ns: Namespace, seed: int) -> Any:
    return {
        "fold_quantize=True": summary(ns, calibrated_and_converted("conv_relu", seed, False, True)),
        "fold_quantize=False": summary(ns, calibrated_and_converted("conv_relu", seed, False, False)),
    }


def summary_cat_pool(ns: Namespace, seed: int) -> Any:
    return summary(ns, calibrated_and_converted("cat_pool", seed, True, True))


def renamed_by_a_pass(gm: GraphModule) -> GraphModule:
    """What a pass that renames nodes leaves: every q/dq op is now called ``pass_<i>`` (targets unchanged)."""
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and qdq_kind(n) is not None]
    for index, node in enumerate(ops):
        node._rename(f"pass_{index}")
    gm.recompile()
    return gm


def _before_and_after(seed: int) -> tuple[GraphModule, GraphModule]:
    """conv_relu, per-channel weights, fold_quantize=False (quantize_per_channel on the weight); and a copy of it
    renamed by a pass."""
    gm = calibrated_and_converted("conv_relu", seed, True, False)
    return gm, renamed_by_a_pass(copy.deepcopy(gm))


def path_after_pass(ns: Namespace, seed: int) -> Any:
    """The same graph as converted and after a pass renamed its q/dq ops: the same answer."""
    gm, renamed = _before_and_after(seed)
    return {"as_converted": paths(ns, gm), "renamed": paths(ns, renamed)}


def summary_after_pass(ns: Namespace, seed: int) -> Any:
    """The same graph as converted and after a pass renamed its q/dq ops: the same counts."""
    gm, renamed = _before_and_after(seed)
    return {"as_converted": summary(ns, gm), "renamed": summary(ns, renamed)}


# --- where the chapter teaches it ----------------------------------------------------------------

QDQ_PAIRS = Section("A. observer 換成 quantize → dequantize")
PATH_RULES = Section("練習 1：qdq_path（5 分）")
FOLDED = Section("B. weight：int8 的 `_frozen_param` 與 `fold_quantize`")
ONE_DQ_EACH = Section("C. 每個 consumer 一個 dequantize")
SUMMARY_RULES = Section("練習 2：qdq_summary（4 分）")
DELETING = Section("D. 刪除：只有沒有 consumer 的 node 刪得掉", notebook="M01-3")


# --- reading the evidence (shared with the hidden detectors, autograder/checks/test_m05_1.py) ----------
# A path table is ``{consumer: [[source, [step, ...]], ...]}``: one per converted graph. The hidden cases hold
# it under "paths"; the public ones directly, or under "fold_quantize=True" / "False". A count table is
# ``{op: count}``. Places are where the key has one (``(case,)`` or ``(case, variant)``).

LYING = ("renamed",)
"""Places whose q/dq names lie (a pass swapped or renamed them: the hidden case ``renamed``, the public variant
``("after_pass", "renamed")``): only the by-name detectors read them."""


def _tables(evidence: Any, case: str, key: str) -> dict[tuple[str, ...], Any]:
    """The tables of one case: the value under ``key`` (hidden), the value itself, or its variants (public)."""
    data = diagnosis.value(evidence, case)
    if isinstance(data, dict) and key in data:
        return {(case,): data[key]}
    if isinstance(data, dict) and set(data) == {"changed"}:
        return {}  # a case that only tells whether the graph was left as it was (``graph_unchanged``)
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        if key == "paths" and all(isinstance(v, list) for v in data.values()):
            return {(case,): data}
        return {(case, variant): table for variant, table in data.items()}
    return {(case,): data}


def table_pairs(seen: Any, expected: Any, key: str, lying: bool = False) -> list[tuple[tuple[str, ...], Any, Any]]:
    """``(place, got, want)`` for every table the key has and the student's evidence has at the same place
    (``key``: "paths" or "counts"); the places whose names lie only with ``lying``."""
    pairs = []
    for case in diagnosis.cases(expected):
        mine = _tables(seen, case, key)
        for place, want in _tables(expected, case, key).items():
            if place[-1] in LYING and not lying:
                continue
            got = mine.get(place)
            if isinstance(want, dict) and isinstance(got, dict):
                pairs.append((place, got, want))
    return pairs


def _entry(item: Any) -> tuple[str, list[str]] | None:
    """One path entry as (source, steps); None when it is not of that shape."""
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[1], list | tuple):
        return str(item[0]), [str(step) for step in item[1]]
    return None


def entries(got: Any, want: Any) -> list[tuple[tuple[str, list[str]] | None, tuple[str, list[str]]]]:
    """(the student's entry, the key's entry) at the same position of one consumer's list (student's None
    when absent or of another shape)."""
    pairs = []
    for index, item in enumerate(want):
        theirs = _entry(item)
        if theirs is None:
            continue
        mine = _entry(got[index]) if isinstance(got, list) and index < len(got) else None
        pairs.append((mine, theirs))
    return pairs


def path_entries(seen: Any, expected: Any) -> list[tuple[str, tuple[str, list[str]] | None, tuple[str, list[str]]]]:
    """Every (consumer, student's entry, key's entry) of the tables whose consumers the student answered with
    as many entries as the key."""
    found = []
    for _, got, want in table_pairs(seen, expected, "paths"):
        for consumer, theirs in want.items():
            mine = got.get(consumer)
            if isinstance(theirs, list) and isinstance(mine, list) and len(mine) == len(theirs):
                found.extend((consumer, a, b) for a, b in entries(mine, theirs))
    return found


def _quantized(steps: list[str]) -> bool:
    """A q → dq pair or longer (an activation edge; the unfolded weights too)."""
    return len(steps) >= 2


def _one_step(mine: tuple[str, list[str]] | None, theirs: tuple[str, list[str]]) -> bool:
    """The student stopped at the last step: its source is the node before the dequantize."""
    return mine is not None and _quantized(theirs[1]) and mine[1] == theirs[1][-1:] and mine[0] != theirs[0]


def path_first_input_only(seen: Any, expected: Any) -> bool:
    """Ops of several inputs answered with one entry, the first input's."""
    for _, got, want in table_pairs(seen, expected, "paths"):
        for consumer, theirs in want.items():
            mine = got.get(consumer)
            if isinstance(theirs, list) and len(theirs) >= 2 and isinstance(mine, list) and len(mine) == 1:
                if _entry(mine[0]) == _entry(theirs[0]):
                    return True
    return False


def path_list_args_skipped(seen: Any, expected: Any) -> bool:
    """An op whose inputs are all in a list or tuple (cat, the output) answered with no entry at all."""
    for _, got, want in table_pairs(seen, expected, "paths"):
        for consumer, theirs in want.items():
            if isinstance(theirs, list) and theirs and got.get(consumer) == []:
                return True
    return False


def path_repeated_input(seen: Any, expected: Any) -> bool:
    """One consumer lists a source again: the key's entries, with a repeat (``h * h`` answered with two)."""
    for _, got, want in table_pairs(seen, expected, "paths"):
        for consumer, theirs in want.items():
            mine = got.get(consumer)
            if isinstance(mine, list) and isinstance(theirs, list) and len(mine) > len(theirs):
                if list(dict.fromkeys(map(repr, mine))) == [repr(e) for e in theirs]:
                    return True
    return False


def graph_changed(seen: Any, expected: Any) -> bool:
    """Some case says the function changed the graph it was handed (the key's leaves it as it was)."""
    return any(
        isinstance(diagnosis.value(seen, case, "changed"), list)
        and diagnosis.value(seen, case, "changed")
        and diagnosis.value(expected, case, "changed") == []
        for case in diagnosis.cases(expected)
    )


def path_walks_through_ops(seen: Any, expected: Any) -> bool:
    """The walk went past the key's source (an op, an input): more steps, the key's source among them."""
    return any(
        mine is not None and len(mine[1]) > len(theirs[1]) and theirs[0] in mine[1] and mine[0] != theirs[0]
        for _, mine, theirs in path_entries(seen, expected)
    )


def path_one_dq_per_tensor(seen: Any, expected: Any) -> bool:
    """One tensor read by several ops: one consumer's path is right, another's stops at its dequantize."""
    for _, got, want in table_pairs(seen, expected, "paths"):
        right, stopped = set(), set()
        for consumer, theirs in want.items():
            for mine, key in entries(got.get(consumer), theirs):
                if not _quantized(key[1]):
                    continue
                if mine == key:
                    right.add(key[0])
                elif _one_step(mine, key):
                    stopped.add(key[0])
        if right & stopped:
            return True
    return False


def path_one_step(seen: Any, expected: Any) -> bool:
    """Every q → dq edge of some graph answered with only its dequantize, from the quantize node."""
    for _, got, want in table_pairs(seen, expected, "paths"):
        pairs = [(m, k) for c, t in want.items() for m, k in entries(got.get(c), t) if _quantized(k[1])]
        if pairs and all(_one_step(m, k) for m, k in pairs):
            return True
    return False


def path_not_reversed(seen: Any, expected: Any) -> bool:
    """Most q → dq edges listed from the consumer back: the key's steps, reversed."""
    found = [(m, k) for _, m, k in path_entries(seen, expected) if _quantized(k[1]) and m is not None]
    reversed_ = [m for m, k in found if m[0] == k[0] and m[1] == k[1][::-1]]
    return bool(found) and 2 * len(reversed_) >= len(found)


def path_other_names(seen: Any, expected: Any) -> bool:
    """The right sources and as many steps, but the steps are not written as the short op names."""
    found = [(m, k) for _, m, k in path_entries(seen, expected) if k[1] and m is not None and m[0] == k[0]]
    other = [m for m, k in found if len(m[1]) == len(k[1]) and sorted(m[1]) != sorted(k[1])]
    return bool(found) and 2 * len(other) >= len(found)


def path_fixed_ops(seen: Any, expected: Any) -> bool:
    """The per-channel q/dq are not recognised (the walk stops there) while the per-tensor ones are."""
    found = path_entries(seen, expected)
    per_tensor = [m == k for _, m, k in found if k[1] and not any("per_channel" in s for s in k[1])]
    stopped = [
        m is not None
        and m[0] != k[0]
        and not any("per_channel" in s for s in m[1])
        and m[1] == [s for s in k[1] if "per_channel" not in s]
        for _, m, k in found
        if any("per_channel" in s for s in k[1])
    ]
    return bool(per_tensor) and all(per_tensor) and any(stopped)


def path_weight_quantized(seen: Any, expected: Any) -> bool:
    """Where a weight is or is not folded was assumed, not read off the graph: a folded weight (only a dequantize)
    listed with a quantize before it, or an unfolded one (quantize → dequantize) stopped at its dequantize while
    every other q → dq edge is right."""
    found = path_entries(seen, expected)
    added = any(
        mine is not None
        and mine[0] == theirs[0]
        and len(theirs[1]) == 1
        and len(mine[1]) > 1
        and mine[1][-1:] == theirs[1]
        and all(step.startswith("quantize") for step in mine[1][:-1])
        for _, mine, theirs in found
    )
    if added:
        return True
    for _, got, want in table_pairs(seen, expected, "paths"):
        pairs = [(m, k) for c, t in want.items() for m, k in entries(got.get(c), t) if _quantized(k[1])]
        stopped = {k[0] for m, k in pairs if _one_step(m, k)}
        right = {k[0] for m, k in pairs if m == k}
        if stopped and right and not stopped & right and len(stopped) + len(right) == len({k[0] for _, k in pairs}):
            if all(m == k or _one_step(m, k) for m, k in pairs):
                return True
    return False


# --- qdq_summary --------------------------------------------------------------------------------------


def _counts(table: Any) -> dict[str, Any]:
    return {str(k): v for k, v in table.items() if v != 0} if isinstance(table, dict) else {}


def count_pairs(seen: Any, expected: Any, lying: bool = False) -> list[tuple[tuple[str, ...], dict, dict]]:
    """(place, the student's counts, the key's counts), zero counts dropped."""
    return [(place, _counts(got), _counts(want)) for place, got, want in table_pairs(seen, expected, "counts", lying)]


def _quantize_ops(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if k.startswith("quantize")}


def _dequantize_ops(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if k.startswith("dequantize")}


def summary_substring(seen: Any, expected: Any) -> bool:
    """No dequantize at all: every dequantize was counted as a quantize of the same granularity."""
    for _, got, want in count_pairs(seen, expected):
        if _dequantize_ops(want) and not _dequantize_ops(got):
            merged = {k: v + want.get("de" + k, 0) for k, v in _quantize_ops(want).items()}
            for key, number in _dequantize_ops(want).items():
                merged.setdefault(key[2:], number)
            if got == merged:
                return True
    return False


def _more_quantize(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """More quantize ops than the key, every dequantize count right."""
    more = any(isinstance(v, int) and v > want.get(k, 0) for k, v in _quantize_ops(got).items())
    return more and _dequantize_ops(got) == _dequantize_ops(want)


def summary_per_edge(seen: Any, expected: Any) -> bool:
    """Quantize ops counted once per consumer: more quantize ops only where a tensor feeds several ops
    (the key has more dequantize than quantize ops and no folded weight explains it)."""
    pairs = count_pairs(seen, expected)
    return any(
        _more_quantize(got, want) for place, got, want in pairs if place[0] in ("fan_out", "cat", "cat_pool")
    ) and all(got == want for place, got, want in pairs if place[0] in ("per_tensor", "conv_relu"))


def summary_folded_counted(seen: Any, expected: Any) -> bool:
    """More quantize ops only in the folded graphs (fold_quantize=True): the int8 weights counted as quantize ops."""
    pairs = count_pairs(seen, expected)
    folded = [
        (got, want) for place, got, want in pairs if place in (("per_tensor",), ("conv_relu", "fold_quantize=True"))
    ]
    unfolded = [
        (got, want) for place, got, want in pairs if place in (("unfolded",), ("conv_relu", "fold_quantize=False"))
    ]
    return any(_more_quantize(got, want) for got, want in folded) and all(got == want for got, want in unfolded)


def summary_fixed_ops(seen: Any, expected: Any) -> bool:
    """Some q/dq ops never counted (absent), every one that is counted right."""
    found = False
    for _, got, want in count_pairs(seen, expected):
        if not set(got) <= set(want) or any(got[k] != want[k] for k in got):
            return False
        found = found or (bool(got) and set(got) < set(want))  # counted some ops right, never the others
    return found


def summary_fewer_dequantize(seen: Any, expected: Any) -> bool:
    """Fewer dequantize ops than the key where a tensor feeds several ops, the quantize ops right."""
    pairs = count_pairs(seen, expected)
    return any(
        _quantize_ops(got) == _quantize_ops(want)
        and any(isinstance(v, int) and v < _dequantize_ops(want).get(k, 0) for k, v in _dequantize_ops(got).items())
        for place, got, want in pairs
        if place[0] in ("fan_out", "cat", "cat_pool")
    )


def fooled_by_names(seen: Any, expected: Any, key: str) -> bool:
    """The graph as converted is answered right, the same graph renamed by a pass is not (``key``: "paths" or
    "counts")."""
    places = {place: (got, want) for place, got, want in table_pairs(seen, expected, key, lying=True)}
    before = places.get(("after_pass", "as_converted"))
    after = places.get(("after_pass", "renamed"))
    if before is None or after is None:
        return False
    if key == "counts":
        before, after = (_counts(before[0]), _counts(before[1])), (_counts(after[0]), _counts(after[1]))
    return before[0] == before[1] and after[0] != after[1]


# --- practice after a mistake (issue 50): one idea each, on graphs of their own built by hand (never run) -----


def _short(node: Node) -> str | None:
    """The course's own reading: the short name of a quantized_decomposed q/dq op, else None."""
    target = node.target
    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":
        return None
    name = str(getattr(target, "__name__", "")).split(".")[0]
    return name if name.startswith(("quantize_", "dequantize_")) else None


def _namespaces() -> tuple[Any, Any]:
    """torch.ops.quantized_decomposed (registered when torchao's pt2e is imported) and torch.ops.aten."""
    import common.pt2e  # noqa: F401

    return torch.ops.quantized_decomposed, torch.ops.aten


def _hand_built() -> Graph:
    """``img`` quantized once and read by two linears (two dequantize, one renamed ``pass_7`` by a pass); a folded
    int8 weight whose get_attr is named like a quantize op; an unfolded per-channel weight (quantize → dequantize);
    a relu followed by q → dq in the ``.tensor`` overloads; an input named like a dequantize op; a mul named like one."""
    qd, aten = _namespaces()
    graph = Graph()

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    img = graph.placeholder("img")
    liar = graph.placeholder("dequantize_per_tensor_9")
    folded = graph.create_node("get_attr", "fc_w_int8", name="quantize_per_channel_default")
    fc2_w = graph.create_node("get_attr", "fc2_w", name="fc2_w")
    q_img = op(qd.quantize_per_tensor.default, "quantize_per_tensor_default", img, 0.05, 3, -128, 127, torch.int8)
    dq_a = op(qd.dequantize_per_tensor.default, "dequantize_per_tensor_default", q_img, 0.05, 3, -128, 127, torch.int8)
    dq_b = op(qd.dequantize_per_tensor.default, "pass_7", q_img, 0.05, 3, -128, 127, torch.int8)
    dq_w = op(
        qd.dequantize_per_channel.default, "dequantize_per_channel_default", folded, 0.1, 0, 0, -127, 127, torch.int8
    )
    fc = op(aten.linear.default, "fc", dq_a, dq_w)
    relu = op(aten.relu.default, "relu", fc)
    q_relu = op(qd.quantize_per_tensor.tensor, "q_relu", relu, 0.02, -128, -128, 127, torch.int8)
    dq_relu = op(qd.dequantize_per_tensor.tensor, "dq_relu", q_relu, 0.02, -128, -128, 127, torch.int8)
    q_w2 = op(qd.quantize_per_channel.default, "quantize_per_channel_1", fc2_w, 0.1, 0, 0, -127, 127, torch.int8)
    dq_w2 = op(qd.dequantize_per_channel.default, "dequantize_per_channel_1", q_w2, 0.1, 0, 0, -127, 127, torch.int8)
    fc2 = op(aten.linear.default, "fc2", dq_b, dq_w2)
    total = op(aten.add.Tensor, "add", dq_relu, fc2)
    scaled = op(aten.mul.Tensor, "dequantize_mul", liar, total)
    graph.output((scaled,))
    return graph


def _check_qdq_name(qdq_name: Any) -> list[str]:
    problems = []
    for node in _hand_built().nodes:
        want, got = _short(node), qdq_name(node)
        if got != want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={node.target}）：應該回傳 {want!r}，你的是 {got!r}"
            )
    return problems


QDQ_NAME = Practice(
    "qdq_name",
    "寫 qdq_name(node)：node 是 quantize / dequantize op 時，回傳它的短名稱（例如 quantize_per_tensor、"
    "dequantize_per_channel），不是的話回傳 None。檢查用一張手工建的圖：有 per-tensor 與 per-channel 的 q/dq、"
    ".tensor 版本的 q/dq、被 pass 改過名字的 dequantize，還有名字像 q/dq 的輸入、常數與一般 op。",
    "def qdq_name(node):\n    raise NotImplementedError()\n",
    _check_qdq_name,
    '看 node 做什麼，不看它叫什麼：先確認 node.op == "call_function"，再看 node.target 這個 op overload：'
    'node.target.namespace 是 "quantized_decomposed" 才是 q/dq，node.target.__name__（像 "dequantize_per_channel.default"）'
    "點號前面就是短名稱。",
    "def qdq_name(node):\n"
    "    target = node.target\n"
    '    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":\n'
    "        return None\n"
    '    name = target.__name__.split(".")[0]  # "dequantize_per_channel.default" → "dequantize_per_channel"\n'
    '    return name if name.startswith(("quantize_", "dequantize_")) else None\n',
    "不必列出所有 q/dq op：per-channel、.tensor 版本都屬於 quantized_decomposed；get_attr 常數名字再像也不是 op。",
)


def _check_walk_up(walk_up: Any) -> list[str]:
    graph = _hand_built()
    problems = []
    for consumer in graph.nodes:
        if consumer.op not in ("call_function", "output") or _short(consumer) is not None:
            continue
        for arg in consumer.all_input_nodes:
            steps, source = [], arg
            while _short(source) is not None:
                steps.append(_short(source))
                source = source.args[0]
            want = (source.name, steps[::-1])
            got = walk_up(arg)
            mine = (str(got[0]), list(got[1])) if isinstance(got, list | tuple) and len(got) == 2 else got
            if mine != want:
                problems.append(f"{consumer.name} 的輸入 {arg.name}：應該是 {want}，你的是 {mine}")
    return problems


WALK_UP = Practice(
    "walk_up",
    "寫 walk_up(node)：node 是某個 op 讀的一個輸入，從它往上游走過連續的 q/dq op，回傳 (來源 node 的名稱, "
    "從來源到 consumer 經過的 q/dq 短名稱串列)。判斷 q/dq 用題目給的 qdq_name。檢查用一張手工建的圖："
    "一個 quantize 餵兩個 dequantize、折疊過與沒折疊的 weight、relu 之後的 q → dq。",
    "def qdq_name(node):\n"
    "    target = node.target\n"
    '    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":\n'
    "        return None\n"
    '    name = target.__name__.split(".")[0]\n'
    '    return name if name.startswith(("quantize_", "dequantize_")) else None\n\n\n'
    "def walk_up(node):\n"
    "    raise NotImplementedError()\n",
    _check_walk_up,
    "用 while 迴圈：只要 qdq_name(src) 不是 None，就記下這一步、走到 src.args[0]；碰到第一個不是 q/dq 的 node 就停，"
    "它就是來源。往上走收集到的是 dequantize 在前，回傳前把串列反過來。",
    "def qdq_name(node):\n"
    "    target = node.target\n"
    '    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":\n'
    "        return None\n"
    '    name = target.__name__.split(".")[0]\n'
    '    return name if name.startswith(("quantize_", "dequantize_")) else None\n\n\n'
    "def walk_up(node):\n"
    "    steps, src = [], node\n"
    "    while qdq_name(src) is not None:\n"
    "        steps.append(qdq_name(src))\n"
    "        src = src.args[0]\n"
    "    return src.name, steps[::-1]\n",
    "weight 有沒有 quantize 不用猜：折疊過的只剩 dequantize，沒折疊的有 quantize → dequantize，照圖走就對了。",
)


class _Reads(torch.nn.Module):
    """A linear (x, weight, bias), h * h, a cat of a list, an output tuple."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3, 4))
        self.b = torch.nn.Parameter(torch.zeros(3))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.nn.functional.linear(a, self.w, self.b)
        c = torch.cat([h * h, b], dim=1)
        return c, h


def _check_inputs_of(inputs_of: Any) -> list[str]:
    from torch.fx import symbolic_trace

    problems = []
    for node in symbolic_trace(_Reads()).graph.nodes:
        if node.op not in ("call_function", "output"):
            continue
        want = [n.name for n in node.all_input_nodes]
        got = inputs_of(node)
        mine = [getattr(n, "name", n) for n in got] if isinstance(got, list | tuple) else got
        if mine != want:
            problems.append(f"{node.name}（args = {node.args}）：應該是 {want}，你的是 {mine}")
    return problems


INPUTS_OF = Practice(
    "inputs_of",
    "寫 inputs_of(node)：回傳 node 讀的每個輸入 node 的串列，照 args 裡的順序，每個只列一次。"
    "檢查用一張小圖：linear(a, w, b)、h * h、torch.cat([h * h, b]) 和回傳 tuple 的 output。",
    "def inputs_of(node):\n    raise NotImplementedError()\n",
    _check_inputs_of,
    "輸入不一定直接放在 args 上：cat 的在一個 list 裡、output 的在一個 tuple 裡；h * h 的兩個運算元是同一個 node。"
    "fx 的 Node 有一個屬性把這些都處理好了。",
    "def inputs_of(node):\n    return list(node.all_input_nodes)\n",
    "node.all_input_nodes 攤平 list 與 tuple、去掉重複、保留順序：qdq_path 要列的正是這些輸入。",
)


_COUNTED = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")


def _two_convs() -> Graph:
    """The graph ``qdq_counts`` describes: x quantized once, read by two convs; conv_a's weight folded, conv_b's not."""
    qd, aten = _namespaces()
    graph = Graph()
    x = graph.placeholder("x")
    q = graph.call_function(qd.quantize_per_tensor.default, (x, 0.1, 0, -128, 127, torch.int8))
    w_a = graph.get_attr("conv_a_w_int8")
    w_b = graph.get_attr("conv_b_w")
    q_b = graph.call_function(qd.quantize_per_channel.default, (w_b, 0.1, 0, 0, -127, 127, torch.int8))
    outputs = []
    for weight in (w_a, q_b):
        dq_x = graph.call_function(qd.dequantize_per_tensor.default, (q, 0.1, 0, -128, 127, torch.int8))
        dq_w = graph.call_function(qd.dequantize_per_channel.default, (weight, 0.1, 0, 0, -127, 127, torch.int8))
        outputs.append(graph.call_function(aten.conv2d.default, (dq_x, dq_w)))
    graph.output(tuple(outputs))
    return graph


def _check_qdq_counts(predicted: Any) -> list[str]:
    if not isinstance(predicted, dict):
        return ["qdq_counts 要是一個 dict：{'quantize_per_tensor': ?, …}"]
    counted = collections.Counter(n for n in map(_short, _two_convs().nodes) if n is not None)
    problems = []
    for name in _COUNTED:
        if predicted.get(name) != counted[name]:
            problems.append(f"{name}：你寫 {predicted.get(name)!r}，圖上其實有 {counted[name]} 個")
    return problems


QDQ_COUNTS = Practice(
    "qdq_counts",
    "先別寫程式，預測一張 convert 之後的圖上每種 q/dq op 各有幾個 node：輸入 x 量化一次，被 conv_a 與 conv_b 兩個 "
    "conv 讀；conv_a 的 weight 已經折疊成 int8 常數（fold_quantize=True 那樣），conv_b 的 weight 還是 fp32"
    "（fold_quantize=False 那樣），兩個 weight 都是 per-channel。把數字填進 dict qdq_counts，檢查會數那張圖上的 node。",
    "qdq_counts = {\n"
    '    "quantize_per_tensor": None,\n'
    '    "dequantize_per_tensor": None,\n'
    '    "quantize_per_channel": None,\n'
    '    "dequantize_per_channel": None,\n'
    "}\n",
    _check_qdq_counts,
    "數的是 node，不是邊也不是 tensor：x 只量化一次（一個 quantize），但 conv_a、conv_b 各有自己的 dequantize；"
    "折疊過的 weight 在 convert 時就量化好了，圖上只剩一個常數和它的 dequantize。",
    "qdq_counts = {\n"
    '    "quantize_per_tensor": 1,\n'
    '    "dequantize_per_tensor": 2,\n'
    '    "quantize_per_channel": 1,\n'
    '    "dequantize_per_channel": 2,\n'
    "}\n",
    "所以 qdq_summary 直接走過 gm.graph.nodes，每個 q/dq node 算一次，不要沿著邊往上數。",
)


def _left_behind() -> GraphModule:
    """x quantized once and read by a relu through one dequantize; a second dequantize of it that nobody reads;
    the relu's output quantized and dequantized for the output; a quantize → dequantize of the relu nobody reads."""
    qd, aten = _namespaces()
    graph = Graph()
    x = graph.placeholder("x")
    args = (0.05, 0, -128, 127, torch.int8)
    q_x = graph.call_function(qd.quantize_per_tensor.default, (x, *args))
    dq_x = graph.call_function(qd.dequantize_per_tensor.default, (q_x, *args))
    graph.call_function(qd.dequantize_per_tensor.default, (q_x, *args))
    relu = graph.call_function(aten.relu.default, (dq_x,))
    q_out = graph.call_function(qd.quantize_per_tensor.default, (relu, *args))
    dq_out = graph.call_function(qd.dequantize_per_tensor.default, (q_out, *args))
    q_gone = graph.call_function(qd.quantize_per_tensor.default, (relu, *args))
    graph.call_function(qd.dequantize_per_tensor.default, (q_gone, *args))
    graph.output((dq_out,))
    return GraphModule(torch.nn.Module(), graph)


def _check_unread_dequantize(unread_dequantize: Any) -> list[str]:
    gm = _left_behind()
    want = [n.name for n in gm.graph.nodes if _short(n) == "dequantize_per_tensor" and not n.users]
    before = graph_state(gm)
    got = unread_dequantize(gm)
    problems = []
    changed = graph_changes(before, gm)
    if changed:
        problems.append(f"呼叫之後圖不一樣了：{'；'.join(changed)}。讀圖的函式只回答問題，不能改呼叫的人的圖")
    mine = [getattr(n, "name", n) for n in got] if isinstance(got, list | tuple) else got
    if mine != want:
        problems.append(f"應該回傳 {want}（照圖上的順序），你的是 {mine!r}")
    return problems


UNREAD_DEQUANTIZE = Practice(
    "unread_dequantize",
    "寫 unread_dequantize(gm)：回傳圖上沒有任何 node 讀的 dequantize node 的名稱串列（照圖上的順序）。"
    "它只讀圖、回答問題：呼叫之後，gm 要和呼叫之前一模一樣，要不要清掉是呼叫的人決定的。"
    "檢查用一張手工建的圖：一個 quantize 餵兩個 dequantize、其中一個沒人讀，還有一對沒人讀的 quantize → dequantize。",
    "def is_dequantize(node):\n"
    "    target = node.target\n"
    '    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":\n'
    "        return False\n"
    '    return target.__name__.startswith("dequantize_")\n\n\n'
    "def unread_dequantize(gm):\n"
    "    raise NotImplementedError()\n",
    _check_unread_dequantize,
    "沒有人讀的 node，它的 node.users 是空的：走過 gm.graph.nodes，挑出 is_dequantize(node) 而且 len(node.users) == 0 的，"
    "記下名字就好。erase_node、eliminate_dead_code 都會改圖，讀圖的函式裡一個都不要呼叫。",
    "def is_dequantize(node):\n"
    "    target = node.target\n"
    '    if node.op != "call_function" or getattr(target, "namespace", None) != "quantized_decomposed":\n'
    "        return False\n"
    '    return target.__name__.startswith("dequantize_")\n\n\n'
    "def unread_dequantize(gm):\n"
    "    names = []\n"
    "    for node in gm.graph.nodes:\n"
    "        if is_dequantize(node) and len(node.users) == 0:\n"
    "            names.append(node.name)  # 只記下來，圖不動\n"
    "    return names\n",
    "qdq_path 與 qdq_summary 也一樣：只讀 gm.graph.nodes、node.args、node.users，呼叫的人拿回去的還是原本那張圖。",
)


def _changes(function: str) -> Misconception:
    return Misconception(
        "changes_graph",
        "讀圖的函式把圖改掉了",
        f"{function} 只該讀圖、回答問題，圖是呼叫的人的。你的程式在回答之前改了傳進來的圖（刪掉、改寫或重排了 node），"
        "呼叫的人之後拿這張圖去查別的 op、交給後端時，它已經不是原本那一張了。只讀 gm.graph.nodes 與 node.args，"
        "不要呼叫會改圖的方法。",
        DELETING,
        public=graph_changed,
        practice=UNREAD_DEQUANTIZE,
    )


PATH_MISCONCEPTIONS = (
    _changes("qdq_path"),
    Misconception(
        "by_node_name",
        "用 node 名稱認 q/dq",
        "你可能以為名稱裡有 quantize 的 node 就是 quantize op。名稱只是標記：折疊出來的 int8 weight 常數沿用了 "
        "quantize_per_tensor_default 這個名字，pass 也可能把名字改掉或對調，照名字走就會走錯路或出錯。"
        '判斷 q/dq 要看 node.op == "call_function" 與 node.target 的 namespace（quantized_decomposed）。',
        FOLDED,
        public=lambda seen, expected: fooled_by_names(seen, expected, "paths"),
        practice=QDQ_NAME,
    ),
    Misconception(
        "list_args_skipped",
        "漏掉放在 list 或 tuple 裡的輸入",
        "你可能只從 node.args 裡挑出 Node，以為輸入都直接放在 args 上。cat 的輸入在一個 list 裡、output 的輸入在一個 "
        "tuple 裡，這樣挑會整個漏掉，它們的串列就成了空的。改用 node.all_input_nodes，它會把 list 與 tuple 裡的 node 攤平列出。",
        PATH_RULES,
        public=path_list_args_skipped,
        practice=INPUTS_OF,
    ),
    Misconception(
        "first_input_only",
        "只列了第一個輸入",
        "qdq_path 要列出 consumer 的每個輸入，不只是 activation：conv 與 linear 還有 weight 和 bias，add 與 cat "
        "有好幾個輸入。你只看了 node.args[0]，其餘的邊都沒有列出來。照 node.all_input_nodes 的順序，每個輸入各列一項。",
        PATH_RULES,
        public=path_first_input_only,
        practice=INPUTS_OF,
    ),
    Misconception(
        "repeated_input_twice",
        "同一個輸入列了兩次",
        "h * h 的兩個運算元是同一個 node，只算一條邊，node.all_input_nodes 也只列它一次。你自己攤平 node.args，"
        "沒有去掉重複，同一個來源就出現了兩次。直接用 node.all_input_nodes，或攤平之後照原本的順序去掉重複。",
        PATH_RULES,
        public=path_repeated_input,
        practice=INPUTS_OF,
    ),
    Misconception(
        "walks_through_ops",
        "走過了不是 q/dq 的 op",
        "往上游只走過連續的 q/dq op：碰到第一個不是 q/dq 的 node（一般的 op、placeholder 或常數），它就是來源，"
        "要在那裡停下來。你的程式連 conv、relu 這些一般 op 也走過去、記成步驟，來源一路退到了模型的輸入。"
        "每走一步先確認它是 quantized_decomposed 的 op，不是就停。",
        QDQ_PAIRS,
        public=path_walks_through_ops,
        practice=WALK_UP,
    ),
    Misconception(
        "weight_quantize_assumed",
        "憑假設決定 weight 有沒有 quantize",
        "convert_pt2e 預設 fold_quantize=True：weight 的 quantize 在 convert 時就先算好，存成 int8 常數，圖上只剩 "
        "dequantize；fold_quantize=False 時 fp32 的 weight 還在，圖上有 quantize → dequantize。你照自己的假設處理 weight，"
        "不是補上一個不存在的 quantize，就是在真的存在的 quantize 前停下。照圖上真正有的 q/dq 一步一步往上走。",
        FOLDED,
        public=path_weight_quantized,
        practice=WALK_UP,
    ),
    Misconception(
        "fixed_op_list",
        "只認得幾種 q/dq op",
        "你可能以為 q/dq 只有 quantize_per_tensor 與 dequantize_per_tensor（或章節裡看過的那幾種）。per-channel 的 "
        "weight 用 dequantize_per_channel，fold_quantize=False 時還有 quantize_per_channel；不在你清單上的 op "
        "被當成了來源，路徑就從那裡斷掉。判斷 q/dq 看 node.target 的 namespace 是不是 quantized_decomposed，不要列死一份清單。",
        FOLDED,
        public=path_fixed_ops,
        practice=QDQ_NAME,
    ),
    Misconception(
        "one_dq_per_tensor",
        "以為一個 tensor 只有一個 dequantize",
        "convert 之後一個 tensor 只量化一次，但讀它的每個 consumer 都有自己的 dequantize（DuplicateDQPass）。"
        "你只把 quantize 的第一個 user 當成「它的」dequantize，別的 consumer 讀的那一個就被當成別種東西，路徑從那裡斷掉。"
        "從 consumer 自己的輸入往上走，每一步只看那個 node 是不是 q/dq。",
        ONE_DQ_EACH,
        public=path_one_dq_per_tensor,
        practice=WALK_UP,
    ),
    Misconception(
        "one_step_only",
        "只往上走了一步",
        "一條 activation 的邊是 quantize → dequantize 兩步：consumer 的輸入是 dequantize，它的輸入才是 quantize，"
        "再往上才是來源。你看到 dequantize 就停，來源成了 quantize node，也漏掉了 quantize 這一步。"
        "用迴圈一直往上走，直到碰到不是 q/dq 的 node。",
        QDQ_PAIRS,
        public=path_one_step,
        practice=WALK_UP,
    ),
    Misconception(
        "not_reversed",
        "步驟的順序反了",
        "往上游走時最先碰到的是 dequantize，所以收集到的順序是「從 consumer 往回」。題目要的是資料流動的方向："
        "從來源到 consumer，quantize 在前、dequantize 在後。走完之後把串列反過來再回傳。",
        PATH_RULES,
        public=path_not_reversed,
        practice=WALK_UP,
    ),
    Misconception(
        "steps_not_op_names",
        "步驟沒有寫成 op 的短名稱",
        "每一步要寫 op 的短名稱，例如 quantize_per_tensor、dequantize_per_channel：只寫 q / dq 分不出 per-tensor 與 "
        'per-channel，完整的 target 字串或 node 的名稱也不是題目要的寫法。短名稱是 str(node.target).split(".")[1]。',
        PATH_RULES,
        public=path_other_names,
        practice=QDQ_NAME,
    ),
)

SUMMARY_MISCONCEPTIONS = (
    _changes("qdq_summary"),
    Misconception(
        "quantize_substring",
        "dequantize 也被算成 quantize",
        '"dequantize" 這個字裡就有 "quantize"：先比對 quantize 的話，每個 dequantize 也會先被比對到，全部算成 quantize。'
        '要分開兩種，先比對 dequantize，或直接用短名稱 str(node.target).split(".")[1] 當 key。',
        PATH_RULES,
        public=summary_substring,
        practice=QDQ_NAME,
    ),
    Misconception(
        "by_node_name",
        "用 node 名稱數 q/dq",
        "node 的名稱不代表它是什麼：折疊出來的 int8 weight 常數（get_attr）也叫 quantize_per_..._default，"
        "名稱像 q/dq 的輸入與常數也有，pass 還可能把名字對調。照名字數，這些都會算錯。"
        '只數 node.op == "call_function" 而且 node.target 屬於 quantized_decomposed 的 node，key 用 target 的短名稱。',
        FOLDED,
        public=lambda seen, expected: fooled_by_names(seen, expected, "counts"),
        practice=QDQ_NAME,
    ),
    Misconception(
        "fixed_op_list",
        "只數了幾種 q/dq op",
        "你可能只數了 per-tensor 的 quantize / dequantize，或章節裡看過的那幾種。per-channel 的 weight 用 "
        "dequantize_per_channel，fold_quantize=False 時還有 quantize_per_channel，沒列在你清單上的 op 一個都沒算到。"
        "判斷 q/dq 看 node.target 的 namespace 是不是 quantized_decomposed，用短名稱當 key，不要列死一份清單。",
        FOLDED,
        public=summary_fixed_ops,
        practice=QDQ_NAME,
    ),
    Misconception(
        "one_dq_per_tensor",
        "以為一個 tensor 只有一個 dequantize",
        "一個 tensor 被好幾個 op 讀時，convert 只量化它一次，但每個 consumer 都有自己的 dequantize（DuplicateDQPass）。"
        "你把相同的「來源與步驟」當成同一個，少算了 dequantize。直接走過 gm.graph.nodes，每個 dequantize node 各算一次。",
        ONE_DQ_EACH,
        public=summary_fewer_dequantize,
        practice=WALK_UP,
    ),
    Misconception(
        "counted_per_edge",
        "沿著每條邊數，quantize 重複算了",
        "一個 quantize 可能餵好幾個 dequantize（每個 consumer 一個）。沿著每個 consumer 的輸入邊往上數，"
        "同一個 quantize 就被每條邊各算一次。一個 node 只算一次：直接走過 gm.graph.nodes 數。",
        SUMMARY_RULES,
        public=summary_per_edge,
        practice=QDQ_COUNTS,
    ),
    Misconception(
        "folded_constant_counted",
        "把折疊過的 weight 算成 quantize",
        "fold_quantize=True 時，weight 的 quantize 在 convert 時就算掉了，圖上只剩 int8 常數（get_attr）和 dequantize。"
        "quantize 的個數是「在圖上量化的 tensor 數」，折疊掉的 weight 不算。只數圖上真正是 quantize op 的 node。",
        FOLDED,
        public=summary_folded_counted,
        practice=QDQ_COUNTS,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "qdq_path",
        "qdq_path：每條輸入邊經過的 quantize / dequantize",
        ("qdq_path",),
        {
            "conv_relu": path_conv_relu,
            "cat_pool": path_cat_pool,
            "after_pass": path_after_pass,
            "square": path_square,
            "graph_unchanged": path_unchanged,
        },
        misconceptions=PATH_MISCONCEPTIONS,
    ),
    Exercise(
        "qdq_summary",
        "qdq_summary：每種 q/dq op 各有幾個",
        ("qdq_summary",),
        {
            "conv_relu": summary_conv_relu,
            "cat_pool": summary_cat_pool,
            "after_pass": summary_after_pass,
            "graph_unchanged": summary_unchanged,
        },
        misconceptions=SUMMARY_MISCONCEPTIONS,
    ),
)
