"""Public cases of M06-2 numeric debugger (layer_drops, worst_layer) on the chapter's own models.

Also what the hidden cases share: ``BitsQuantizer`` (int16 everywhere, fewer weight bits on the
layers it is told, fewer output bits on the ops without weights it is told), the numeric debugger's comparison of a prepared model (the reference: BN
folded, observers only look) with its converted copy, and how the student's answers are read.
"""

from __future__ import annotations

import copy
import itertools
import math
import operator
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.compare import DECIBELS
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "layer_drops 與 worst_layer：numeric debugger 的表裡，SQNR 掉最多的那一層"

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)


def _specs(bits: int) -> tuple[Any, Any]:
    """int16 activations (practically lossless) and symmetric per-tensor weights with ``bits`` bits."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    act = QuantizationSpec(
        dtype=torch.int16,
        quant_min=-(2**15),
        quant_max=2**15 - 1,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    top = 2 ** (bits - 1) - 1
    weight = QuantizationSpec(
        dtype=torch.int16 if bits > 8 else torch.int8,
        quant_min=-top,
        quant_max=top,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    return act, weight


def _activation_spec(bits: int) -> Any:
    """An affine per-tensor activation spec with ``bits`` bits (int8 storage below 9 bits)."""
    from common.pt2e import MinMaxObserver, QuantizationSpec

    return QuantizationSpec(
        dtype=torch.int8 if bits <= 8 else torch.int16,
        quant_min=-(2 ** (bits - 1)),
        quant_max=2 ** (bits - 1) - 1,
        qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )


def bits_quantizer(bits: dict[str, int], default: int = 16, outputs: dict[str, int] | None = None) -> Any:
    """A Quantizer for every conv2d / linear (activation, weight, output), and for the ops ``outputs`` names.

    Activations are int16 and weights have ``default`` bits, so a layer loses almost nothing,
    except the layers ``bits`` (node name → weight bits) names: those lose what their bits cost.
    ``outputs`` (node name → bits) quantizes the output of an op without weights (an add, a pool)
    with that few bits, its tensor inputs with int16: a culprit that has no weight.
    Cheap MinMax observers, so the cases stay fast.
    """
    from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer

    few = dict(outputs or {})

    class BitsQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op == "call_function" and node.target in WEIGHTED:
                    act, weight = _specs(bits.get(node.name, default))
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={node.args[0]: act, node.args[1]: weight},
                        output_qspec=act,
                        _annotated=True,
                    )
                elif node.op == "call_function" and node.name in few:
                    act, _ = _specs(default)
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={a: act for a in node.args if isinstance(a, Node)},
                        output_qspec=_activation_spec(few[node.name]),
                        _annotated=True,
                    )
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return BitsQuantizer()


def comparison_of(
    model: torch.nn.Module, batches: list[tuple[torch.Tensor, ...]], quantizer: Any
) -> tuple[dict[Any, Any], GraphModule]:
    """The numeric debugger on ``model``: ``(compare_results(...), prepared)``.

    export → prepare (the reference: BN folded, observers only look) → calibrate on ``batches``
    → convert a copy; loggers on both, the same ``batches`` through both, results compared.
    Comparing on the calibration batches keeps clipping (values outside the observed range)
    out of the picture: every loss comes from the bits a layer was given.
    """
    from torchao.quantization.pt2e import (
        compare_results,
        extract_results_from_loggers,
        prepare_for_propagation_comparison,
    )

    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), batches[0]), quantizer)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
        converted = convert_pt2e(copy.deepcopy(prepared))
        reference = prepare_for_propagation_comparison(prepared)
        actual = prepare_for_propagation_comparison(converted)
        for batch in batches:
            reference(*batch)
            actual(*batch)
    comparison = compare_results(extract_results_from_loggers(reference), extract_results_from_loggers(actual))
    return comparison, prepared


def seeded_batches(seed: int, shape: tuple[int, ...], count: int = 2, positive: bool = False) -> list[tuple]:
    """``count`` single-input batches from ``seed`` (absolute values when ``positive``)."""
    batches = [seeded_inputs(seed * 1000 + i, shape) for i in range(count)]
    return [tuple(t.abs() for t in b) if positive else b for b in batches]


def mean_sqnr(comparison: dict[Any, Any]) -> dict[str, float]:
    """Each compared node's mean SQNR (nodes whose results are numbers), for messages."""
    table = {}
    for info, summary in comparison.items():
        values = [r.sqnr for r in summary.results]
        if values and all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in values):
            table[info.name] = round(sum(float(v) for v in values) / len(values), 4)
    return table


def _name(value: Any, what: str) -> str:
    if type(value) is Node:
        return value.name
    if type(value) is not str:
        raise EvidenceError(f"{what}應該回傳 node 的名字（str），看到 {type(value).__name__}")
    return safe_text(value, 80)


def _number(value: Any, what: str) -> float | str:
    if type(value) is torch.Tensor and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise EvidenceError(f"{what}應該是 float，看到 {type(value).__name__}")
    return value if math.isfinite(value) else str(value)


def graph_state(gm: GraphModule) -> list[Any]:
    """A graph's nodes as text (name, op, target, arguments): equal before and after a call that left it alone."""
    return [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


def describe_answers(ns: Namespace, comparison: dict[Any, Any], gm: GraphModule) -> dict[str, Any]:
    """``layer_drops`` and ``worst_layer`` on one comparison, as names and numbers; ``changed`` is True
    when a call left ``gm`` different (the functions should only read it)."""
    before = graph_state(gm)
    drops = ns["layer_drops"](comparison, gm)
    if type(drops) is not dict:
        raise EvidenceError(f"layer_drops 應該回傳 dict，看到 {type(drops).__name__}")
    table = {}
    for key, number in drops.items():
        name = _name(key, "layer_drops 的 key ")
        table[name] = _number(number, f"layer_drops 的 {name} ")
    worst = _name(ns["worst_layer"](comparison, gm), "worst_layer ")
    return {"drops": table, "worst": worst, "changed": graph_state(gm) != before}


# --- public cases -------------------------------------------------------------------------------


def small_cnn_bad_conv(ns: Namespace, seed: int) -> Any:
    """small_cnn with its second conv at 3-bit weights."""
    from common.models import get_model

    batches = seeded_batches(seed, (2, 3, 16, 16))
    comparison, prepared = comparison_of(get_model("small_cnn"), batches, bits_quantizer({"conv2d_1": 3}))
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison)}


def residual_bad_first(ns: Namespace, seed: int) -> Any:
    """residual (BN folded into the convs) with its second conv at 3-bit weights: the add reads it and x."""
    from common.models import get_model

    batches = seeded_batches(seed, (2, 3, 16, 16))
    comparison, prepared = comparison_of(get_model("residual"), batches, bits_quantizer({"conv2d_1": 3}))
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison)}


class Fork(nn.Module):
    """stem → relu → split (its output is a list, not compared) → left conv, right conv → add(left, right) →
    flatten → linear. The right conv (the add's second input) is the one the case quantizes badly."""

    def __init__(self, channels: int = 2, size: int = 6) -> None:
        super().__init__()
        self.channels = channels
        self.stem = nn.Conv2d(1, 2 * channels, 3, padding=1)
        self.left = nn.Conv2d(channels, channels, 3, padding=1)
        self.right = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc = nn.Linear(channels * size * size, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low, high = torch.split(torch.relu(self.stem(x)), self.channels, dim=1)
        return self.fc(torch.flatten(self.left(low) + self.right(high), 1))


class Detour(nn.Module):
    """x + a detour a hundred times smaller: stem → relu → avg pool → tail conv (weights / 100) → x + tail →
    flatten → linear. The case gives the pool a 4-bit output (the culprit has no weight) after an 8-bit stem;
    the add's SQNR then climbs far back above the tail's (x itself is exact): a negative drop larger than any."""

    def __init__(self, channels: int = 4, size: int = 6) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, channels, 3, padding=1)
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.tail = nn.Conv2d(channels, 1, 1)
        self.fc = nn.Linear(size * size, 3)
        with torch.no_grad():
            self.tail.weight /= 100
            self.tail.bias /= 100

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.tail(self.pool(torch.relu(self.stem(x))))
        return self.fc(torch.flatten(x + t, 1))


def fork_bad_right(ns: Namespace, seed: int) -> Any:
    """Fork with its right conv (conv2d_2, the add's second input) at 3-bit weights."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Fork()
    comparison, prepared = comparison_of(model, seeded_batches(seed, (2, 1, 6, 6)), bits_quantizer({"conv2d_2": 3}))
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison)}


def detour_bad_pool(ns: Namespace, seed: int) -> Any:
    """Detour with an 8-bit stem and a 4-bit output on the pool (the culprit, without weights)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Detour()
    quantizer = bits_quantizer({"conv2d": 8}, outputs={"avg_pool2d": 4})
    comparison, prepared = comparison_of(model, seeded_batches(seed, (2, 1, 6, 6)), quantizer)
    return {**describe_answers(ns, comparison, prepared), "sqnr": mean_sqnr(comparison)}


# --- where the chapter teaches it ----------------------------------------------------------------

THREE_FUNCTIONS = Section("A. 三個函式")
PROPAGATES = Section("B. 一個量化壞掉的層")
RULES = Section("練習：layer_drops 與 worst_layer（7 分）")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------


def drop_pairs(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(case, the student's answers, the key's) for the cases where both returned ``drops`` and ``worst``."""
    found = []
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if isinstance(got, dict) and isinstance(want, dict) and isinstance(got.get("drops"), dict):
            if isinstance(want.get("drops"), dict):
                found.append((case, got, want))
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def changed_graph(seen: Any, expected: Any) -> bool:
    return any(got.get("changed") is True for _, got, _ in drop_pairs(seen, expected))


def rise_not_drop(seen: Any, expected: Any) -> bool:
    """Every drop has the key's size with the opposite sign (yours − upstream), within ``DECIBELS``."""
    signs = []
    for _, got, want in drop_pairs(seen, expected):
        for name, number in want["drops"].items():
            mine = got["drops"].get(name)
            if _is_number(number) and _is_number(mine) and abs(number) > 0.5:
                signs.append(abs(mine + number) <= DECIBELS.absolute + 1e-4 * abs(number))
    return bool(signs) and all(signs)


def _close(a: Any, b: Any, tolerance: float = DECIBELS.absolute) -> bool:
    return _is_number(a) and _is_number(b) and math.isclose(a, b, rel_tol=1e-4, abs_tol=tolerance)


def _same_drops(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return set(got["drops"]) == set(want["drops"]) and all(
        _close(got["drops"][name], number) for name, number in want["drops"].items()
    )


def _differing(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [name for name, number in want["drops"].items() if not _close(got["drops"].get(name), number)]


def _sqnr(want: dict[str, Any]) -> dict[str, float]:
    """The key's mean SQNR of every compared node (the cases record it), numbers only."""
    table = want.get("sqnr")
    return {n: v for n, v in table.items() if _is_number(v)} if isinstance(table, dict) else {}


def largest_in_size(seen: Any, expected: Any) -> bool:
    """The drops are right; the answer is the largest drop in size (a large negative one wins), somewhere not
    the culprit."""
    found = False
    for _, got, want in drop_pairs(seen, expected):
        if not _same_drops(got, want):
            return False
        sizes = {n: abs(d) for n, d in want["drops"].items() if _is_number(d)}
        if not sizes or got.get("worst") != max(sizes, key=sizes.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found


def split_stops_walk(seen: Any, expected: Any) -> bool:
    """Right on the models without a split; on the fork (after a split) it raised or lost the layers there."""
    others = [(got, want) for case, got, want in drop_pairs(seen, expected) if case != "fork"]
    if len(others) < 3 or not all(set(got["drops"]) == set(want["drops"]) for got, want in others):
        return False
    if diagnosis.error(seen, "fork") and not any(diagnosis.error(seen, c) for c in ("small_cnn", "residual", "detour")):
        return True
    return any(
        case == "fork" and set(got["drops"]) < set(want["drops"]) for case, got, want in drop_pairs(seen, expected)
    )


def previous_entry(seen: Any, expected: Any) -> bool:
    """Every drop is the previous entry's SQNR (graph order) minus this one's, and somewhere that is not the key's."""
    differs, checked = False, 0
    for _, got, want in drop_pairs(seen, expected):
        sqnr = _sqnr(want)
        # graph order: the case's own table in the live evidence (the shipped JSON has its keys sorted)
        order = [name for name in _sqnr(got) if name in sqnr]
        for name, number in got["drops"].items():
            if name not in sqnr or order.index(name) == 0:
                return False
            before = order[order.index(name) - 1]
            if not _close(number, sqnr[before] - sqnr[name], 2 * DECIBELS.absolute):
                return False
            checked += 1
        differs = differs or bool(_differing(got, want))
    return differs and checked > 0


def not_worst_upstream(seen: Any, expected: Any) -> bool:
    """Only some drops are off, each larger than the key's, and each measured from another node's SQNR: a node
    with several upstreams compared with one that is not the worst."""
    found = False
    for _, got, want in drop_pairs(seen, expected):
        if set(got["drops"]) != set(want["drops"]):
            return False
        sqnr = _sqnr(want)
        off = _differing(got, want)
        if 2 * len(off) > len(want["drops"]):
            return False
        for name in off:
            mine = got["drops"][name]
            if not _is_number(mine) or mine <= want["drops"][name] or name not in sqnr:
                return False
            if not any(
                _close(mine + sqnr[name], level, 2 * DECIBELS.absolute) for o, level in sqnr.items() if o != name
            ):
                return False
            found = True
    return found


def one_run_or_sum(seen: Any, expected: Any) -> bool:
    """The same nodes, most drops a little off (one run instead of their mean) or off by one factor (their sum)."""
    mine, theirs = [], []
    for _, got, want in drop_pairs(seen, expected):
        if set(got["drops"]) != set(want["drops"]):
            return False
        for name, number in want["drops"].items():
            if _is_number(got["drops"][name]) and _is_number(number):
                mine.append(got["drops"][name])
                theirs.append(number)
    off = [not _close(a, b) for a, b in zip(mine, theirs, strict=True)]
    if not mine or 2 * sum(off) < len(off):
        return False
    close = [abs(a - b) <= max(2.0, 0.25 * abs(b)) for a, b in zip(mine, theirs, strict=True)]
    near = 4 * sum(close) >= 3 * len(close)
    big = [(a, b) for a, b in zip(mine, theirs, strict=True) if abs(b) > 1]
    ratios = [a / b for a, b in big]
    scaled = bool(ratios) and max(ratios) - min(ratios) < 0.05 and abs(abs(ratios[0]) - 1) > 0.1 and ratios[0] > 0
    return near or scaled


def lowest_chosen(seen: Any, expected: Any) -> bool:
    """In every case the answer is the node with the lowest SQNR, and somewhere that is not the culprit."""
    found = False
    pairs = drop_pairs(seen, expected)
    for _, got, want in pairs:
        sqnr = _sqnr(want)
        if not sqnr or got.get("worst") != min(sqnr, key=sqnr.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found


def weighted_chosen(seen: Any, expected: Any) -> bool:
    """The drops are right; the answer is the largest drop among the conv / linear layers, which misses a culprit
    without weights."""
    found = False
    for _, got, want in drop_pairs(seen, expected):
        if not _same_drops(got, want):
            return False
        weighted = {n: d for n, d in want["drops"].items() if n.startswith(("conv", "linear")) and _is_number(d)}
        if not weighted or got.get("worst") != max(weighted, key=weighted.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found


def sources_listed(seen: Any, expected: Any) -> bool:
    """Nodes without an upstream (the key leaves them out) have a drop in your table."""
    return any(set(got["drops"]) - set(want["drops"]) for _, got, want in drop_pairs(seen, expected))


def most_missing(seen: Any, expected: Any) -> bool:
    """In every case most of the key's nodes have no drop (their upstream was never found), none is extra."""
    pairs = drop_pairs(seen, expected)
    return bool(pairs) and all(
        set(got["drops"]) <= set(want["drops"])
        and 2 * len(set(want["drops"]) - set(got["drops"])) >= len(want["drops"])
        for _, got, want in pairs
    )


# --- practice after a mistake (issue 50): one idea each, on tables and a graph of their own ------------------

_CHAINS = (
    [("conv2d", 40.0), ("relu", 39.5), ("conv2d_1", 25.0), ("relu_1", 24.0), ("linear", 18.0)],
    [("conv2d", 30.0), ("avg_pool2d", 16.0), ("conv2d_1", 12.0), ("add", 45.0), ("linear", 44.0)],
    [("conv2d", 9.0), ("relu", 8.5), ("linear", 3.0)],
)
"""Models without branches, layer by layer (name, SQNR in dB): the lowest SQNR comes after the culprit; an add
climbs far back (a large negative drop); a culprit without weights."""


def _check_steepest_fall(steepest_fall: Any) -> list[str]:
    problems = []
    for chain in _CHAINS:
        falls = {name: before - now for (_, before), (name, now) in itertools.pairwise(chain)}
        want = max(falls, key=lambda name: falls[name])
        got = steepest_fall(list(chain))
        if got != want:
            shown = " → ".join(f"{name} {value:g}" for name, value in chain)
            problems.append(f"{shown}：應該是 {want}（掉了 {falls[want]:g} dB），你的是 {got!r}")
    return problems


STEEPEST_FALL = Practice(
    "steepest_fall",
    "寫 steepest_fall(chain)：chain 是一個沒有分支的模型逐層的 SQNR，[(名稱, dB), …]，依圖上的順序；"
    "每一層的上游就是前一項。回傳 SQNR 比上游掉最多的那一層的名稱。"
    "檢查用三條 chain：SQNR 最低的在禍首的下游、有一層 SQNR 大幅回升、禍首沒有 weight。",
    "def steepest_fall(chain):\n    raise NotImplementedError()\n",
    _check_steepest_fall,
    "每一層吃的是上一層已經有誤差的輸出，SQNR 最低的常常只是承接了前面的誤差。對第 1 項以後的每一層算 "
    "「前一項的 SQNR − 自己的 SQNR」（帶正負號：回升是負的，不是壞事），挑最大的；第 0 項沒有上游，不參加。"
    "任何一層都可能是禍首，不只是 conv 與 linear。",
    "def steepest_fall(chain):\n"
    "    best = max(range(1, len(chain)), key=lambda i: chain[i - 1][1] - chain[i][1])\n"
    "    return chain[best][0]\n",
    "第二條 chain 的 add 回升了 33 dB（一條有誤差的小支路加回乾淨的大訊號），用絕對值比就會選到它。",
)


_DROP_CASES = (
    (20.0, [30.0]),
    (20.0, [35.0, 25.0]),
    (40.0, [30.0, 12.0]),
    (15.0, [15.0, 18.0]),
    (15.0, []),
)
"""(own SQNR, the SQNRs of its upstreams): one upstream, two, a climb above the worst upstream, none."""


def _check_drop_of(drop_of: Any) -> list[str]:
    problems = []
    for own, upstream in _DROP_CASES:
        want = min(upstream) - own if upstream else None
        title = f"drop_of({own:g}, {[float(u) for u in upstream]})"
        try:
            got = drop_of(own, list(upstream))
        except NotImplementedError:
            raise
        except Exception as error:  # one case crashing should not hide the others
            problems.append(f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 60)}），應該回傳 {want}")
            continue
        right = got is None if want is None else isinstance(got, int | float) and abs(got - want) <= 1e-6
        if not right:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


DROP_OF = Practice(
    "drop_of",
    "寫 drop_of(own, upstream)：own 是這一層的 SQNR（dB），upstream 是它每一個上游的 SQNR 的 list。"
    "回傳這一層「掉了幾 dB」；沒有任何上游時回傳 None（這一層不列入表）。"
    "檢查用一個上游、兩個上游、比最差的上游還高（回升），以及沒有上游。",
    "def drop_of(own, upstream):\n    raise NotImplementedError()\n",
    _check_drop_of,
    "掉了幾 dB 是「上游 − 自己」：SQNR 變低才是掉，結果是正的。有好幾個上游時，和最差（SQNR 最低）的那個比："
    "差的輸入不是這一層的錯。沒有上游就沒有東西可比：不要當成 0 或 inf。",
    "def drop_of(own, upstream):\n    if not upstream:\n        return None\n    return min(upstream) - own\n",
    "add 的兩個上游是 35 與 25 dB，自己 20 dB：掉了 5 dB，不是 15 dB；另外 10 dB 是 25 dB 那個分支自己掉的。",
)


def _prepared_graph() -> Graph:
    """A prepared graph built by hand (never run): observers (call_module) on every edge, a split whose output is
    a list (not in the table), two convs on its halves, their add, a linear."""
    aten = torch.ops.aten
    graph = Graph()
    count = iter(range(100))

    def observed(node: Node) -> Node:
        return graph.create_node("call_module", f"activation_post_process_{next(count)}", (node,), {})

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    x = graph.placeholder("x")
    weights = [graph.create_node("get_attr", f"w{i}", name=f"w{i}") for i in range(4)]
    conv = op(aten.conv2d.default, "conv2d", observed(x), observed(weights[0]))
    relu = op(aten.relu.default, "relu", observed(conv))
    split = op(aten.split.Tensor, "split", observed(relu), 2, 1)
    left = op(operator.getitem, "getitem", split, 0)
    right = op(operator.getitem, "getitem_1", split, 1)
    conv_1 = op(aten.conv2d.default, "conv2d_1", left, observed(weights[1]))
    conv_2 = op(aten.conv2d.default, "conv2d_2", right, observed(weights[2]))
    add = op(aten.add.Tensor, "add", observed(conv_1), observed(conv_2))
    flat = op(aten.flatten.using_ints, "flatten", observed(add), 1)
    graph.output((op(aten.linear.default, "linear", flat, observed(weights[3])),))
    return graph


_IN_TABLE = {"conv2d", "relu", "conv2d_1", "conv2d_2", "add", "linear"}
"""The nodes the numeric debugger's table holds (split, getitem and flatten are not in it here)."""


def _nearest(node: Node) -> set[str]:
    found: set[str] = set()
    for source in node.all_input_nodes:
        found |= {source.name} if source.name in _IN_TABLE else _nearest(source)
    return found


def _check_upstreams(upstreams: Any) -> list[str]:
    graph = _prepared_graph()
    before = [(n.name, n.op, str(n.args)) for n in graph.nodes]
    problems = []
    for node in list(graph.nodes):
        if node.name not in _IN_TABLE:
            continue
        want = _nearest(node)
        got = upstreams(node, set(_IN_TABLE))
        names = {item.name if isinstance(item, Node) else item for item in got} if isinstance(got, Iterable) else got
        if names != want:
            inputs = [n.name for n in node.all_input_nodes]
            problems.append(
                f"{node.name}（直接的輸入是 {inputs}）：上游應該是 {sorted(want)}，你的是 "
                f"{sorted(map(str, names)) if isinstance(names, set) else names!r}"
            )
    if [(n.name, n.op, str(n.args)) for n in graph.nodes] != before:
        problems.append("圖被改掉了：upstreams 只該讀圖，穿過 observer 就好，不要把它們從圖上拿掉")
    return problems


UPSTREAMS = Practice(
    "upstreams",
    "寫 upstreams(node, table)：table 是比較結果裡有的 node 名稱（一個 set）。從 node 在圖上的輸入往上找，"
    "碰到 table 裡的 node 就停，它就是一個上游；不在 table 裡的 node（observer、輸出是 list 的 split 與它的 getitem、"
    "flatten）就穿過去，繼續找它的輸入。回傳上游的名稱（set 或 list，順序不重要）。不要改圖。"
    "檢查用一張手工建的 prepared 圖：每條邊上都有 observer，relu 之後 split 成兩半各接一個 conv，再 add。",
    "def upstreams(node, table):\n    raise NotImplementedError()\n",
    _check_upstreams,
    "prepared 圖上，一層的直接輸入通常是 observer（activation_post_process_…），不是上一層。"
    "對 node.all_input_nodes 的每一個：在 table 裡就記下它的名字；不在就對它再做一次同樣的事（遞迴，或用一個 list 當佇列）。"
    "placeholder 與 get_attr 沒有輸入，走到那裡自然結束。上游要沿著圖的邊找，不是比較結果裡的前一項。",
    "def upstreams(node, table):\n"
    "    found = set()\n"
    "    for source in node.all_input_nodes:\n"
    "        if source.name in table:\n"
    "            found.add(source.name)\n"
    "        else:\n"
    "            found |= upstreams(source, table)\n"
    "    return found\n",
    "conv2d_1 的上游是 relu：中間隔著 observer、split 與 getitem，它們都不在表裡。",
)


MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "找上游時把傳進來的圖改掉了",
        "layer_drops 與 worst_layer 只該讀 gm：呼叫的人之後還要用這張 prepared 圖，例如再 convert 一次。"
        "你把 observer 從圖上拿掉（或改了 node），數字也許對了，圖卻不是原本那一張了。"
        "往上游找時遇到 observer 就穿過去，繼續看它的輸入，不要改圖。",
        RULES,
        public=changed_graph,
        practice=UPSTREAMS,
    ),
    Misconception(
        "rise_not_drop",
        "掉幅的正負號反了",
        "掉了幾 dB 是「上游的 SQNR − 自己的 SQNR」：SQNR 變低才叫掉。你算成自己減上游，正負號反了，"
        "worst_layer 找到的是 SQNR 回升最多的那一層。把兩項對調。",
        RULES,
        public=rise_not_drop,
        practice=DROP_OF,
    ),
    Misconception(
        "abs_drop",
        "用掉幅的絕對值挑禍首",
        "掉幅是負的，表示 SQNR 比上游回升了，那不是壞事：一個乾淨的大訊號加上一條有誤差的小支路，add 之後的 SQNR "
        "會比上游高很多。你用絕對值比大小，回升最多的那一層就被當成了禍首。"
        "worst_layer 要找的是「上游 − 自己」最大的那一個，直接比帶正負號的掉幅。",
        RULES,
        public=largest_in_size,
        practice=STEEPEST_FALL,
    ),
    Misconception(
        "sources_counted",
        "沒有上游的 node 也列進來了",
        "第一層這類 node 的輸入只有模型的輸入與常數，沒有上游可以比，也就沒有「掉了幾 dB」。"
        "你把它們的上游當成 0 或無限大，列進了表，worst_layer 就可能選到它。沒有任何上游的 node 不列入 layer_drops。",
        RULES,
        public=sources_listed,
        practice=DROP_OF,
    ),
    Misconception(
        "direct_inputs_only",
        "只看直接的輸入找上游",
        "prepared 圖上，一層的輸入通常是 observer（activation_post_process_…），不是上一層，而 observer 不在比較結果裡。"
        "只看 node.all_input_nodes，大部分的層都找不到上游而被略過。遇到不在表裡的 node 要穿過去，"
        "繼續往它的輸入找，直到碰到表裡的 node。",
        RULES,
        public=most_missing,
        practice=UPSTREAMS,
    ),
    Misconception(
        "split_breaks_walk",
        "穿不過輸出是 list 的 op",
        "split 這類 op 的輸出是 list，result.sqnr 不是一個數字，所以它不在表裡；往上游找時它和 observer 一樣，要穿過去。"
        "你的程式把它當成一個數字（或在那裡停下），split 之後的層就出錯或找不到上游。"
        "只把每次結果都是單一數字的 node 放進表，不在表裡的 node 一律穿過。",
        RULES,
        public=split_stops_walk,
        practice=UPSTREAMS,
    ),
    Misconception(
        "previous_in_order",
        "把表裡的前一項當成上游",
        "比較結果依圖上 node 的順序排，但前一項不一定是這一層的輸入：兩個分支相加時，add 的前一項可能是另一個分支的 conv。"
        "上游要沿著圖的邊找：從 node.all_input_nodes 往上走。",
        RULES,
        public=previous_entry,
        practice=UPSTREAMS,
    ),
    Misconception(
        "best_upstream",
        "有好幾個上游時沒有取最差的那個",
        "add、cat 這類 op 有好幾個上游；其中一個上游已經很差時，那是上游的錯，不是這一層的。"
        "掉幅要和最差（SQNR 最低）的上游比：min(上游的 SQNR) − 自己的 SQNR。你取了最好的（或第一個）上游，這一層的掉幅被算大了。",
        RULES,
        public=not_worst_upstream,
        practice=DROP_OF,
    ),
    Misconception(
        "not_mean_of_runs",
        "每層的 SQNR 沒有取每次執行的平均",
        "logger 每跑一次就記一筆，summary.results 裡有每次執行的結果。你只取了其中一筆（或把它們加總），"
        "每層的 SQNR 就和題目要的平均不同，掉幅也跟著偏掉。把每一筆的 float(result.sqnr) 加起來除以筆數。",
        THREE_FUNCTIONS,
        public=one_run_or_sum,
    ),
    Misconception(
        "lowest_sqnr",
        "把 SQNR 最低的那一層當成禍首",
        "每一層吃的是上一層已經有誤差的輸出，誤差一路往下游累積，SQNR 最低的常常是最後幾層，它們只是承接了前面的誤差。"
        "禍首是 SQNR 比上游掉最多的那一層：worst_layer 要在 layer_drops 裡找最大的。",
        PROPAGATES,
        public=lowest_chosen,
        practice=STEEPEST_FALL,
    ),
    Misconception(
        "weighted_only",
        "只在有 weight 的層裡找禍首",
        "不只 conv 與 linear 會量化壞：add、pool 的輸出如果只用很少的 bit，一樣會掉很多 dB。"
        "你只在有 weight 的層裡挑，禍首是 add 時就答錯了。worst_layer 要在 layer_drops 的所有 node 裡找掉最多的。",
        RULES,
        public=weighted_chosen,
        practice=STEEPEST_FALL,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "worst_layer",
        TITLE,
        ("layer_drops", "worst_layer"),
        {
            "small_cnn": small_cnn_bad_conv,
            "residual": residual_bad_first,
            "fork": fork_bad_right,
            "detour": detour_bad_pool,
        },
        tolerances={"drops": DECIBELS, "sqnr": DECIBELS},
        misconceptions=MISCONCEPTIONS,
    ),
)
