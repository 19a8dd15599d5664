"""Public cases of M06-3 選擇性量化: may_quantize (a filter function) and greedy_skip (the search).

``may_quantize(node, skipped)`` is a filter function: ``FilterQuantizer`` hands it to every
annotator of torchao's XNNPACKQuantizer, which leaves a pattern unlabelled as soon as one of its
nodes gets ``False``. A case quantizes a model with it (export → prepare → calibrate → convert)
and describes what the answers did to the graph: which nodes are observed (and how often),
which conv / linear weights stay fp32, and the quantize / dequantize steps on every input edge.
Every answer must be a ``bool`` and leave the graph as it was: the case checks both at each call.

``greedy_skip(layers, evaluate, target)`` is handed an ``evaluate`` built here: a metric of
"which layers stay in fp32" (higher is better). Most metrics are tables (a base score, a gain
per layer and a bonus for some sets), so a case controls exactly where a greedy search and a
plain ranking disagree; ``weight_sqnr_metric`` is a real one (the SQNR of a model's output with
3-bit weights everywhere except the skipped layers). The student's answer is a list of names;
the score it reaches is recomputed here, by the case itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import (
    ANNOTATION_KEY,
    EvidenceError,
    describe_annotations,
    is_observer_node,
    qdq_kind,
    safe_text,
)
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

FILTER_TITLE = "may_quantize：filter function，skipped 裡的 module 留在 fp32"
TITLE = "greedy_skip：留最少的層在 fp32，達到目標"

WEIGHTED = ("aten.conv2d.default", "aten.linear.default")

Metric = Callable[[Any], float]


# --- may_quantize -------------------------------------------------------------------------------


def filter_config() -> Any:
    """The configuration the filter cases quantize with: XNNPACK's int8 symmetric, per-tensor weights."""
    from torchao.testing.pt2e._xnnpack_quantizer import get_symmetric_quantization_config

    return get_symmetric_quantization_config(is_per_channel=False)


def filter_quantizer(config: Any, filter_fn: Callable[[Node], bool]) -> Any:
    """A Quantizer that runs every static pattern of torchao's XNNPACKQuantizer with ``filter_fn``.

    What ExecuTorch's ``XNNPACKQuantizer.set_filter_function`` does (there, combined with the
    quantizer's own module filters); with a filter that always answers True it labels exactly as
    ``XNNPACKQuantizer().set_global(config)``. ``propagate_annotation`` at the end (ops that only
    move data share their input's qparams) does not ask the filter, in both quantizers.
    """
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer
    from torchao.testing.pt2e._xnnpack_quantizer_utils import OP_TO_ANNOTATOR, propagate_annotation

    from common.pt2e import Quantizer

    class FilterQuantizer(Quantizer):
        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return XNNPACKQuantizer().transform_for_annotation(model)

        def annotate(self, model: GraphModule) -> GraphModule:
            for pattern in XNNPACKQuantizer.STATIC_OPS:
                OP_TO_ANNOTATOR[pattern](model, config, filter_fn)
            propagate_annotation(model)
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return FilterQuantizer()


def _held(value: Any) -> Any:
    """What a write into ``value`` changes: a dict or list by its keys and the identity of its items, anything
    else by its own identity (a new object in its place is a write too)."""
    if type(value) is dict:
        return (id(value), tuple((str(k), id(v)) for k, v in value.items()))
    if type(value) is list:
        return (id(value), tuple(id(v) for v in value))
    return id(value)


RECOMPILED = frozenset({"_code", "_lineno_map", "_prologue_start"})
"""GraphModule attributes that a recompile replaces (the code itself is compared as text)."""


def _graph_text(gm: Any) -> Any:
    """The whole graph as data, equal before and after a call that only read it: every node (name, op, target,
    arguments, consumers, every ``meta`` entry by identity, its label by ``describe_annotations``), the
    GraphModule's own attributes (its submodules, parameters, buffers and ``meta`` among them) and its code.

    On the grader's side a replayed write shows in ``gm.meta`` (``autograder.sandboxed.replay.mark_writes``)."""
    if not isinstance(gm, GraphModule):
        return None
    nodes = [
        (
            n.name,
            n.op,
            str(n.target),
            str(n.args),
            str(n.kwargs),
            tuple(user.name for user in n.users),
            tuple((key, _held(value)) for key, value in n.meta.items() if key != ANNOTATION_KEY),
        )
        for n in gm.graph.nodes
    ]
    attributes = tuple((name, _held(value)) for name, value in vars(gm).items() if name not in RECOMPILED)
    return nodes, describe_annotations(gm), attributes, gm.code


def checked_filter(ns: Namespace, skipped: list[str]) -> Callable[[Node], bool]:
    """``node -> may_quantize(node, skipped)``, refusing an answer that is not a bool or that changed the graph.

    Each call gets its own copy of ``skipped``: the answers cannot depend on what an earlier call did to it.
    """

    def filter_fn(node: Node) -> bool:
        before = _graph_text(node.graph.owning_module)
        answer = ns["may_quantize"](node, list(skipped))
        if type(answer) is not bool:
            raise EvidenceError(
                f"may_quantize 應該回傳 True 或 False（bool），對 node {node.name} 回傳的是 {type(answer).__name__}"
            )
        gm = node.graph.owning_module
        after = _graph_text(gm)
        if after != before:
            raise EvidenceError(
                f"may_quantize 改了圖（問到 node {node.name} 時，{_changed_part(gm, before, after)}）："
                "filter function 只回答 True / False，不要改 node、它的 meta、它的標籤或它所在的圖"
            )
        return answer

    return filter_fn


REPLAYED_WRITES = "writes_replayed"
"""Where the grader's replay notes the places a recorded call wrote into (``gm.meta``; ``autograder.sandboxed.replay``)."""


def _changed_part(gm: Any, before: Any, after: Any) -> str:
    """Where ``_graph_text`` changed, in words: the first node that differs, the label, an attribute, the code."""
    marked = gm.meta.get(REPLAYED_WRITES) if isinstance(gm, GraphModule) else None
    if marked:
        return "寫進了 " + "、".join(str(place) for place in marked[:3])
    if before is None or after is None:
        return "圖不見了"
    for old, new in zip(before[0], after[0], strict=False):
        if old != new:
            return f"改到 node {old[0]}" + ("的 meta" if old[:6] == new[:6] else "")
    parts = ("node 的個數", "node 的標籤", "GraphModule 的屬性", "圖的程式碼")
    return "改到" + "、".join(words for words, old, new in zip(parts, before, after, strict=True) if old != new)


def _observed(gm: GraphModule, node: Node) -> str:
    source = node.args[0]
    while isinstance(source, Node) and is_observer_node(gm, source):
        source = source.args[0]
    return source.name if isinstance(source, Node) else "?"


def describe_filtered(prepared: GraphModule, converted: GraphModule) -> dict[str, Any]:
    """What a filter did to a model: observed nodes (prepare), fp32 weights and q/dq steps per edge (convert)."""
    observed = sorted(_observed(prepared, n) for n in prepared.graph.nodes if is_observer_node(prepared, n))
    fp32, edges = [], {}
    for node in converted.graph.nodes:
        if node.op != "call_function" or qdq_kind(node) is not None:
            continue
        target = f"{getattr(node.target, 'namespace', '')}.{getattr(node.target, '_opname', '')}"
        target += f".{getattr(node.target, '_overloadname', '')}"
        if target in WEIGHTED and qdq_kind(node.args[1]) is None:
            fp32.append(node.name)
        steps = []
        for arg in node.all_input_nodes:
            kinds, source = [], arg
            while qdq_kind(source) is not None:
                kinds.append(qdq_kind(source))
                source = source.args[0]
            steps.append(" → ".join([*reversed(kinds), node.name]) if kinds else f"fp32 → {node.name}")
        edges[node.name] = steps
    return {"observers": len(observed), "observed": observed, "fp32_weights": fp32, "edges": edges}


def filtered(ns: Namespace, model: nn.Module, inputs: tuple[torch.Tensor, ...], skipped: list[str], seed: int) -> Any:
    """PTQ of ``model`` with ``FilterQuantizer`` and the student's ``may_quantize`` (``skipped`` left in fp32)."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    quantizer = filter_quantizer(filter_config(), checked_filter(ns, skipped))
    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        prepared(*seeded_inputs(seed * 1000, *shapes))
    converted = convert_pt2e(copy.deepcopy(prepared))
    return {"skipped": list(skipped), **describe_filtered(prepared, converted)}


class Block(nn.Module):
    """conv → nn.ReLU → flatten → linear: a module that holds a whole pattern and more."""

    def __init__(self, channels: int, size: int, classes: int = 10) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(channels * size * size, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.relu(self.conv(x)), 1))


class StemBlock(nn.Module):
    """stem conv → torch.relu (in the top-level forward) → Block."""

    def __init__(self, channels: int = 4, size: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, channels, 3, padding=1)
        self.block = Block(channels, size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(torch.relu(self.stem(x)))


class Tower(nn.Module):
    """flatten → ``out``: a linear whose name is also a top-level module's."""

    def __init__(self, features: int, width: int) -> None:
        super().__init__()
        self.out = nn.Linear(features, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.flatten(x, 1))


class SideNet(nn.Module):
    """side(x) + sidecar(x) (two 1×1 convs, one name the prefix of the other) → tower → torch.relu → out.

    Names to match exactly: ``side`` is not ``sidecar``, ``out`` is not ``tower.out``."""

    def __init__(self, channels: int = 4, size: int = 4, width: int = 8) -> None:
        super().__init__()
        self.side = nn.Conv2d(1, channels, 1)
        self.sidecar = nn.Conv2d(1, channels, 1)
        self.tower = Tower(channels * size * size, width)
        self.out = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.tower(self.side(x) + self.sidecar(x))))


SIDE_SKIPS = {"names": ["side", "out"], "inner": ["tower.out"]}
"""The side_net case's two runs: ``side`` (a prefix of ``sidecar``) and ``out`` (the last segment of
``tower.out``); then a module nested in another."""


def filter_side(ns: Namespace, seed: int) -> Any:
    """SideNet, twice: skipping ``side`` and ``out`` (not ``sidecar``, not ``tower.out``), then ``tower.out`` alone
    (not the whole tower, not the top-level ``out``)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = SideNet()
    inputs = seeded_inputs(seed, (2, 1, 4, 4))
    return {run: filtered(ns, model, inputs, skipped, seed) for run, skipped in SIDE_SKIPS.items()}


# --- greedy_skip ------------------------------------------------------------------------------------


def _names(skip: Any, layers: list[str]) -> frozenset[str]:
    """The layers an ``evaluate`` call asked to skip (a list, tuple or set of layer names)."""
    if type(skip) not in (list, tuple, set, frozenset):
        raise TypeError(f"evaluate 的引數應該是 layer 名稱的 list，收到 {type(skip).__name__}")
    names = frozenset(skip)
    unknown = [name for name in names if name not in layers]
    if unknown:
        raise KeyError(f"沒有這個 layer：{safe_text(unknown[0], 40)}（可以跳過的是 {layers}）")
    return names


def table_metric(
    layers: list[str], base: float, gains: dict[str, float], bonus: dict[tuple[str, ...], float] | None = None
) -> Metric:
    """``evaluate(skip)`` = base + the gain of every skipped layer + the bonus of every set of skipped layers
    (a pair, a triple…) that ``skip`` holds. Gains and bonuses may be negative: a layer can hurt."""
    extra = {frozenset(group): value for group, value in (bonus or {}).items()}

    def evaluate(skip: Any) -> float:
        names = _names(skip, layers)
        score = base + sum(gains[name] for name in names)
        for group, value in extra.items():
            if group <= names:
                score += value
        return float(score)

    return evaluate


def weight_sqnr_metric(model: torch.nn.Module, layers: list[str], inputs: torch.Tensor, bits: int = 3) -> Metric:
    """The SQNR (dB) of ``model``'s output when every layer in ``layers`` but the skipped ones has its
    weights fake-quantized to ``bits`` bits (symmetric, one scale per tensor)."""
    with torch.no_grad():
        reference = model(inputs).double()
    top = 2 ** (bits - 1) - 1
    scores: dict[frozenset[str], float] = {}

    def evaluate(skip: Any) -> float:
        names = _names(skip, layers)
        if names not in scores:
            quantized = copy.deepcopy(model)
            with torch.no_grad():
                for name in layers:
                    if name not in names:
                        weight = quantized.get_submodule(name).weight
                        scale = float(weight.abs().max()) / top
                        weight.copy_(torch.fake_quantize_per_tensor_affine(weight, scale, 0, -top, top))
                out = quantized(inputs).double()
            noise = float((reference - out).pow(2).sum())
            scores[names] = float(10 * torch.log10(reference.pow(2).sum() / noise)) if noise else float("inf")
        return scores[names]

    return evaluate


def run_search(
    ns: Namespace, layers: list[str], evaluate: Metric, target: float, handed: list[str] | None = None
) -> dict[str, Any]:
    """``greedy_skip(layers, evaluate, target)``: the layers chosen, and the score they reach (recomputed).

    The search gets a copy of ``layers``, or ``handed`` itself when given (a list an earlier call
    may have changed: see the hidden case about the caller's arguments).
    """
    chosen = ns["greedy_skip"](handed if handed is not None else list(layers), evaluate, target)
    if type(chosen) not in (list, tuple):
        raise EvidenceError(f"greedy_skip 應該回傳 layer 名稱的 list，看到 {type(chosen).__name__}")
    names = []
    for item in chosen:
        if type(item) is not str:
            raise EvidenceError(f"greedy_skip 回傳的 list 裡應該是 layer 名稱（str），看到 {type(item).__name__}")
        names.append(safe_text(item, 60))
    if len(set(names)) != len(names):
        raise EvidenceError(f"greedy_skip 回傳的 layer 有重複：{names}（每一步選一層還沒留下的層）")
    score = evaluate(names) if all(name in layers for name in names) else None
    return {
        "chosen": names,
        "score": round(score, 6) if score is not None else None,
        "reached": score is not None and score >= target,
        "target": target,
        "layers": list(layers),
    }


# --- public cases -------------------------------------------------------------------------------


def filter_digits(ns: Namespace, seed: int) -> Any:
    """The chapter's digits network (conv → BN → relu twice, pool, linear), skipping conv2."""
    from common.data import DigitsNet

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = DigitsNet()
    inputs = seeded_inputs(seed, (4, 1, 8, 8))
    return filtered(ns, model, inputs, ["conv2"], seed)


def filter_block(ns: Namespace, seed: int) -> Any:
    """stem → relu → block (conv → nn.ReLU → flatten → linear), skipping the whole block."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = StemBlock()
    return filtered(ns, model, seeded_inputs(seed, (4, 1, 8, 8)), ["block"], seed)


def case_three_layers(ns: Namespace, seed: int) -> Any:
    """Three layers like the chapter's digits model: conv1 helps most, then fc; two are needed."""
    layers = ["conv1", "conv2", "fc"]
    evaluate = table_metric(layers, 18.2, {"conv1": 3.5, "conv2": 0.2, "fc": 1.0}, {("conv1", "conv2"): 1.7})
    return run_search(ns, layers, evaluate, 24.5)


def case_pair(ns: Namespace, seed: int) -> Any:
    """Four layers where one is useless alone and decisive together with the best one."""
    layers = ["stem", "block.0", "block.1", "head"]
    evaluate = table_metric(
        layers, 10.0, {"stem": 2.0, "block.0": 5.0, "block.1": 0.5, "head": 3.0}, {("block.0", "block.1"): 8.0}
    )
    return run_search(ns, layers, evaluate, 22.0)


def case_dips(ns: Namespace, seed: int) -> Any:
    """Every single layer makes the score worse; two together make it much better: the search goes on."""
    layers = ["conv1", "conv2", "fc"]
    evaluate = table_metric(layers, 12.0, {"conv1": -1.0, "conv2": -2.0, "fc": -3.0}, {("conv1", "fc"): 9.0})
    return run_search(ns, layers, evaluate, 15.0)


def case_already(ns: Namespace, seed: int) -> Any:
    """The quantized model already reaches the target: nothing to skip."""
    layers = ["conv1", "conv2", "fc"]
    return run_search(ns, layers, table_metric(layers, 30.0, {"conv1": 1.0, "conv2": 2.0, "fc": 3.0}), 25.0)


def case_below_zero(ns: Namespace, seed: int) -> Any:
    """Every score is negative (a very noisy model, in dB): the best candidate is still picked at each step."""
    layers = ["embed", "mixer", "proj"]
    evaluate = table_metric(layers, -12.0, {"embed": 2.0, "mixer": 5.0, "proj": 3.0})
    return run_search(ns, layers, evaluate, -4.5)


def case_out_of_reach(ns: Namespace, seed: int) -> Any:
    """Every layer in fp32 stays below the target: all of them, in pick order (not the order of ``layers``).

    The second step's best (12) is lower than the first's (13): each step finds its own best. The list
    handed to the search is read back afterwards (``layers_after``): it must be as it was.
    """
    layers = ["embed", "mixer", "proj"]
    evaluate = table_metric(
        layers, 8.0, {"embed": 2.0, "mixer": 1.0, "proj": 5.0}, {("proj", "embed"): -4.0, ("proj", "mixer"): -2.0}
    )
    handed = list(layers)
    return {**run_search(ns, layers, evaluate, 20.0, handed=handed), "layers_after": list(handed)}


def case_exact(ns: Namespace, seed: int) -> Any:
    """The first pick reaches the target exactly (21.5): that is enough."""
    layers = ["embed", "mixer", "proj"]
    return run_search(ns, layers, table_metric(layers, 20.0, {"embed": 0.5, "mixer": 1.5, "proj": 1.0}), 21.5)


def case_tie(ns: Namespace, seed: int) -> Any:
    """proj and embed tie exactly; proj comes first in ``layers`` (the order is not alphabetical), so it wins."""
    layers = ["proj", "embed", "mixer"]
    return run_search(ns, layers, table_metric(layers, 10.0, {"proj": 2.0, "embed": 2.0, "mixer": 0.5}), 11.75)


# --- where the chapter teaches it ----------------------------------------------------------------

BY_PATTERN = Section("B. filter function：自己決定哪些 node 可以量化")
FILTER_RULES = Section("練習 1：may_quantize（4 分）")
WHY_NOT_NONE = Section("A. 讓一層留在 fp32：XNNPACKQuantizer 的設定做了什麼")
GREEDY = Section("D. 貪婪搜尋")
GREEDY_RULES = Section("練習 2：greedy_skip（8 分）")


# --- reading the evidence (the public detectors here, the hidden ones in autograder/checks/test_m06_3.py) ---


def fp32_relation(seen: Any, expected: Any, *place: str) -> str | None:
    """How the layers the student's filter left in fp32 compare with the key's at ``place``: ``"same"`` (and the
    same observers), ``"fewer"`` (a strict subset), ``"more"`` (a strict superset), ``"other"``; None when either
    side has no such record."""
    got = diagnosis.value(seen, *place, "fp32_weights")
    want = diagnosis.value(expected, *place, "fp32_weights")
    if not isinstance(got, list) or not isinstance(want, list):
        return None
    if set(got) == set(want):
        same = diagnosis.value(seen, *place, "observed") == diagnosis.value(expected, *place, "observed")
        return "same" if same else "other"
    if set(got) < set(want):
        return "fewer"
    if set(got) > set(want):
        return "more"
    return "other"


def filter_raised(seen: Any, says: str) -> bool:
    """Some case stopped because of the filter's answer (``checked_filter``'s sentence holds ``says``)."""
    return any(says in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen))


def no_stack_refused(seen: Any, expected: Any, *places: tuple[str, ...]) -> bool:
    """A node without ``nn_module_stack`` was refused: every place left more layers in fp32 than the key (the
    convs' weights), or reading the stack raised KeyError."""
    keyed = any(
        name == "KeyError" and "nn_module_stack" in diagnosis.error_message(seen, case)
        for case, name in diagnosis.errors(seen).items()
    )
    return keyed or all(fp32_relation(seen, expected, *place) == "more" for place in places)


def never_refused(seen: Any, expected: Any, *places: tuple[str, ...]) -> bool:
    """Nothing in fp32 anywhere, though the key leaves layers in fp32 somewhere."""
    got = [diagnosis.value(seen, *place, "fp32_weights") for place in places]
    want = [diagnosis.value(expected, *place, "fp32_weights") for place in places]
    return all(isinstance(g, list) and not g for g in got) and any(isinstance(w, list) and w for w in want)


def _public_pattern(seen: Any, expected: Any) -> bool:
    return (
        fp32_relation(seen, expected, "digits_conv2") == "fewer"
        and fp32_relation(seen, expected, "block") == "fewer"
        and bool(diagnosis.value(seen, "block", "fp32_weights"))
    )


def _public_innermost(seen: Any, expected: Any) -> bool:
    return fp32_relation(seen, expected, "digits_conv2") == "same" and fp32_relation(seen, expected, "block") == "fewer"


def _public_name(seen: Any, expected: Any) -> bool:
    return fp32_relation(seen, expected, "digits_conv2") == "more" and fp32_relation(seen, expected, "block") != "more"


PUBLIC_FILTERS = (("digits_conv2",), ("block",), *(("side_net", run) for run in SIDE_SKIPS))


def only_off(seen: Any, expected: Any, place: tuple[str, ...], how: str) -> bool:
    """At ``place`` the fp32 layers relate to the key's as ``how``; at every other public place they are the same."""
    return fp32_relation(seen, expected, *place) == how and all(
        fp32_relation(seen, expected, *other) == "same" for other in PUBLIC_FILTERS if other != place
    )


def extra_fp32(seen: Any, expected: Any, *place: str) -> set[str]:
    """The layers left in fp32 at ``place`` that the key quantizes (node names: ``conv2d_1``, ``linear``…)."""
    got = diagnosis.value(seen, *place, "fp32_weights")
    want = diagnosis.value(expected, *place, "fp32_weights")
    if not isinstance(got, list) or not isinstance(want, list):
        return set()
    return {str(name) for name in got} - {str(name) for name in want}


def also_skipped(seen: Any, expected: Any, kind: str) -> bool:
    """Skipping ``side`` and ``out`` also left a ``kind`` layer in fp32 (``conv``: sidecar, a prefix match;
    ``linear``: tower.out, a segment or suffix match), and nothing else anywhere is off."""
    extra = extra_fp32(seen, expected, "side_net", "names")
    return (
        only_off(seen, expected, ("side_net", "names"), "more")
        and bool(extra)
        and all(name.startswith(kind) for name in extra)
    )


# --- practice after a mistake (issue 50): one idea each, on paths, nodes and tables of their own --------------

_WITHIN_CASES = (
    ("proj", "proj", True),
    ("proj.fc", "proj", True),
    ("block.conv.inner", "block", True),
    ("block.fc", "block.fc", True),
    ("proj2", "proj", False),
    ("blockade", "block", False),
    ("block.fc", "fc", False),
    ("out_proj", "proj", False),
    ("head.block", "block", False),
    ("block", "block.conv", False),
    ("", "block", False),
)
"""(a module's path, a skipped module, whether the first is the second or nested in it)."""


def _check_within(within: Any) -> list[str]:
    problems = []
    for path, module, want in _WITHIN_CASES:
        got = within(path, module)
        if not isinstance(got, bool) or got is not want:
            problems.append(f"within({path!r}, {module!r})：應該回傳 {want}，你的是 {got!r}")
    return problems


WITHIN = Practice(
    "within",
    '寫 within(path, module)：path 是某個 module 的完整路徑（例如 "block.conv"），module 是要跳過的 module 的路徑。'
    "path 就是 module 本身、或包在它裡面時回傳 True，否則 False（一定要回傳 bool）。"
    "檢查用 proj 與 proj2、block 與 blockade、block.fc 與 fc、out_proj 與 proj、head.block 與 block 這類名字相近的路徑。",
    "def within(path, module):\n    raise NotImplementedError()\n",
    _check_within,
    "路徑是用 . 分隔的一段一段：path 要嘛和 module 完全相同，要嘛以 module 再加一個 . 開頭（module 底下的子 module）。"
    '"proj2".startswith("proj") 是 True，但 proj2 不在 proj 裡面；"block.fc".endswith("fc") 也是，但 block.fc 不是 fc。',
    'def within(path, module):\n    return path == module or path.startswith(module + ".")\n',
    "may_quantize 不用自己比字首：nn_module_stack 裡本來就有每一層的完整路徑，逐一和 skipped 完全比對就夠了。",
)


class _Block(nn.Module):
    """Stands in for the module classes a stack names."""


def _stack_nodes() -> list[tuple[Node, list[str]]]:
    """(node, its module paths): nodes of a graph built by hand with the meta export leaves, a conv in block, a relu
    at the top level, a linear in block.fc, and an input and a weight without any nn_module_stack."""
    aten = torch.ops.aten
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    weight = graph.create_node("get_attr", "block.conv.weight", name="block_conv_weight")
    conv = graph.create_node("call_function", aten.conv2d.default, (x, weight), name="conv2d_1")
    relu = graph.create_node("call_function", aten.relu.default, (conv,), name="relu")
    fc = graph.create_node("call_function", aten.linear.default, (relu, weight), name="linear")
    graph.output((fc,))
    stacks = {
        conv: {
            "L__self__": ("", _Block),
            "L__self___block": ("block", _Block),
            "L__self___block_conv": ("block.conv", nn.Conv2d),
        },
        relu: {"L__self__": ("", _Block)},
        fc: {
            "L__self__": ("", _Block),
            "L__self___block": ("block", _Block),
            "L__self___block_fc": ("block.fc", nn.Linear),
        },
    }
    for node, stack in stacks.items():
        node.meta["nn_module_stack"] = stack
    return [(node, [path for path, _ in stacks.get(node, {}).values()]) for node in (x, weight, conv, relu, fc)]


def _check_stack_paths(stack_paths: Any) -> list[str]:
    problems = []
    for node, want in _stack_nodes():
        before = {key: dict(value) if isinstance(value, dict) else value for key, value in node.meta.items()}
        title = f"名叫 {node.name} 的 node（op={node.op}）"
        try:
            got = stack_paths(node)
        except NotImplementedError:
            raise
        except Exception as error:  # one node crashing should not hide the others
            problems.append(f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 60)}），應該回傳 {want}")
            continue
        if not isinstance(got, list | tuple) or sorted(map(str, got)) != sorted(want) or len(got) != len(want):
            problems.append(f"{title}：應該是 {want}，你的是 {got!r}")
        if node.meta != before:
            problems.append(f"{title}：你的程式改了 node.meta（{sorted(set(node.meta) ^ set(before)) or '裡面的值'}）")
    return problems


STACK_PATHS = Practice(
    "stack_paths",
    '寫 stack_paths(node)：回傳 node 所在的每一層 module 的路徑（一個 list，例如 ["", "block", "block.conv"]）。'
    'node.meta["nn_module_stack"] 是一個 dict，每個值是 (路徑, module 的類別)；沒有這一項的 node（輸入、weight 的 '
    "get_attr）回傳 []。只讀，不要改 node.meta。檢查用 block 裡的 conv、最外層的 relu、block.fc 裡的 linear、"
    "一個輸入和一個 weight。",
    "def stack_paths(node):\n    raise NotImplementedError()\n",
    _check_stack_paths,
    '三件事：路徑在 dict 的值裡（每個值的第 0 項），key（L__self___block 這種）不是路徑；node.meta.get("nn_module_stack") '
    "在沒有這一項時給 None，不會 KeyError，也不會像 setdefault 那樣把一個空的 stack 寫進 node.meta；node 的名字"
    "（conv2d_1）是 export 取的，不是 module 的路徑。",
    "def stack_paths(node):\n"
    '    stack = node.meta.get("nn_module_stack") or {}\n'
    "    return [entry[0] for entry in stack.values()]\n",
    "weight 沒有 stack，不代表它在要跳過的 module 裡：may_quantize 對它要回答 True，conv 才量化得到。",
)


def _next_cases() -> list[tuple[str, list[str], list[str], Any, tuple[str, float]]]:
    """(title, layers, skipped, evaluate, the best next layer and its score): a pair that helps only together, every
    score negative, a tie."""
    layers = ["conv1", "conv2", "fc"]
    pair = table_metric(layers, 5.0, {"conv1": 10.0, "conv2": 6.0, "fc": 9.0}, {("conv1", "conv2"): 9.0})
    negative = table_metric(layers, -10.0, {"conv1": 5.0, "conv2": 7.0, "fc": 6.0})
    tie = table_metric(layers, 0.0, {"conv1": 4.0, "conv2": 4.0, "fc": 10.0})
    return [
        ("已經留了 conv1；conv2 單獨留沒什麼用，和 conv1 一起留卻幫很大", layers, ["conv1"], pair, ("conv2", 30.0)),
        ("什麼都還沒留；每個候選的分數都是負的", layers, [], negative, ("conv2", -3.0)),
        ("已經留了 fc；conv1 與 conv2 平手", layers, ["fc"], tie, ("conv1", 14.0)),
    ]


def _check_best_next(best_next: Any) -> list[str]:
    problems = []
    for title, layers, skipped, evaluate, want in _next_cases():
        handed, done = list(layers), list(skipped)
        try:
            got = best_next(handed, done, evaluate)
        except NotImplementedError:
            raise
        except Exception as error:  # one case crashing should not hide the others
            problems.append(f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 80)}）")
            continue
        pair = tuple(got) if isinstance(got, tuple | list) and len(got) == 2 else None
        if pair is None or pair[0] != want[0] or not isinstance(pair[1], int | float) or abs(pair[1] - want[1]) > 1e-9:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
        if handed != layers or done != skipped:
            problems.append(f"{title}：layers 或 skipped 被改了（現在是 {handed}、{done}）：只讀不改")
    return problems


BEST_NEXT = Practice(
    "best_next",
    "寫 best_next(layers, skipped, evaluate)：貪婪搜尋的一步。對 layers 裡每個還不在 skipped 裡的層，評估"
    "「已經留的層 + 這一層」，回傳 (分數最高的那一層, 它的分數)；平手時選 layers 裡排在前面的；分數可能是負的。"
    "layers 與 skipped 只讀不改。evaluate(skip) 的引數是層名稱的 list。檢查用三組分數：兩層一起留才有用、"
    "每個分數都是負的、兩層平手。",
    "def best_next(layers, skipped, evaluate):\n    raise NotImplementedError()\n",
    _check_best_next,
    "每個候選都評估 evaluate(skipped + [layer])（一個新的 list，不是 evaluate(layer)，也不是只評估 [layer]）。"
    "最佳的起點是「還沒有」（None），不是 0：每個分數都可能是負的。照 layers 的順序走，只有分數嚴格大於（>）"
    "目前最好的才換人，平手就留住前面那一個。",
    "def best_next(layers, skipped, evaluate):\n"
    "    scored = [(layer, evaluate(skipped + [layer])) for layer in layers if layer not in skipped]\n"
    "    return max(scored, key=lambda pair: pair[1])  # max keeps the first of equal scores\n",
    "只看 conv2 單獨留下的分數（11）會輸給 fc（14）；和已經留下的 conv1 一起評估，conv2 是 30，fc 只有 24。",
)


_STEP_CASES = (
    ([10.0, 14.0, 21.0, 25.0], 20.0),
    ([22.0, 30.0], 20.0),
    ([10.0, 20.0, 25.0], 20.0),
    ([10.0, 8.0, 23.0, 24.0], 20.0),
    ([10.0, 12.0, 15.0], 20.0),
)
"""(the score after each step, the target): reached at step 2, before any step, exactly, after a dip, never."""


def _check_steps_taken(steps_taken: Any) -> list[str]:
    problems = []
    for scores, target in _STEP_CASES:
        want = next((i for i, score in enumerate(scores) if score >= target), len(scores) - 1)
        got = steps_taken(list(scores), target)
        if got != want:
            problems.append(
                f"scores = [{', '.join(f'{score:g}' for score in scores)}]，target = {target:g}："
                f"應該回傳 {want}，你的是 {got!r}"
            )
    return problems


STEPS_TAKEN = Practice(
    "steps_taken",
    "寫 steps_taken(scores, target)：scores[i] 是貪婪搜尋留了 i 層之後的分數（scores[0] 是一層都沒留）。"
    "回傳搜尋停下來時留了幾層：分數達到（≥）target 就停；所有層都留了還達不到，也停。"
    "檢查用五組分數：第 2 步達到、一開始就達到、剛好等於 target、先變差再變好、怎樣都達不到。",
    "def steps_taken(scores, target):\n    raise NotImplementedError()\n",
    _check_steps_taken,
    "從 i = 0（一層都還沒留）開始看：scores[0] 已經 ≥ target 就是 0 層。「達到」包括剛好等於。"
    "某一步比前一步差不是停的理由（層之間會互相影響，下一步可能補回來）；走到最後還不夠，就是全部 len(scores) − 1 層。",
    "def steps_taken(scores, target):\n"
    "    for kept, score in enumerate(scores):\n"
    "        if score >= target:\n"
    "            return kept\n"
    "    return len(scores) - 1\n",
    "greedy_skip 的迴圈條件正好相反：還沒達到（score < target）而且還有層沒留，才再選一層。",
)


FILTER_MISCONCEPTIONS = (
    Misconception(
        "returns_non_bool",
        "filter 沒有每次都回傳 bool",
        "你可能只在要跳過時 return False，其他情況沒有 return，Python 就回傳 None。"
        "filter function 的回答要是 True 或 False：None 會被當成「不能量化」，你本來想放行的 node 也被擋下了。"
        "函式的最後一定要 return 一個 bool，例如 return not any(...)。",
        FILTER_RULES,
        public=lambda seen, expected: filter_raised(seen, "應該回傳 True 或 False"),
        practice=WITHIN,
    ),
    Misconception(
        "changes_graph",
        "filter 順手改了 node 或它的標籤",
        "filter function 只回答「這個 node 可以量化嗎」，annotator 會對同一個 node 問好幾次。"
        "你替要跳過的 node 貼了標籤（或改了它），回答就會影響圖、影響後面的 annotator。"
        "只 return True 或 False，不要碰 node.meta。",
        FILTER_RULES,
        public=lambda seen, expected: filter_raised(seen, "改了圖"),
        practice=STACK_PATHS,
    ),
    Misconception(
        "no_stack_refused",
        "沒有 nn_module_stack 的 node 回答 False",
        "weight 與 bias 的 get_attr 沒有 nn_module_stack，它們沒有 module 資訊，不等於「不在可以量化的 module 裡」。"
        "conv 的 pattern 包含它們，只要其中一個得到 False，整個 conv 就不量化，所以每個 conv 都留在 fp32 了"
        '（直接讀 node.meta["nn_module_stack"] 則會 KeyError）。'
        '用 node.meta.get("nn_module_stack", {})，沒有 stack 的 node 回答 True。',
        BY_PATTERN,
        public=lambda seen, expected: no_stack_refused(seen, expected, *PUBLIC_FILTERS),
        practice=STACK_PATHS,
    ),
    Misconception(
        "pattern_spans_modules",
        "以為整個 pattern 都在 module 裡才跳得掉",
        "XNNPACK 的 annotator 以 pattern 為單位問 filter：conv → relu 這個 pattern 裡，只要有一個 node 得到 False，"
        "整個 pattern 就留在 fp32，relu 寫在 module 外面也一樣。你的 filter 要等 node 後面接的 op 也在 skipped 裡才回答 False，"
        "後面接 relu 或 add 的 conv 就跳不掉。每個 node 只看它自己的 nn_module_stack 就好。",
        BY_PATTERN,
        public=_public_pattern,
    ),
    Misconception(
        "innermost_only",
        "只看 node 最裡面那一層 module",
        'nn_module_stack 由外往內記下 node 所在的每一層 module：block 裡 conv 的 node 同時屬於 "block" 與 "block.conv"。'
        "只看最裡面那一層，跳過父 module（block）時，裡面的層都沒跳過。stack 裡任何一個路徑在 skipped 裡，就回答 False。",
        FILTER_RULES,
        public=_public_innermost,
        practice=WITHIN,
    ),
    Misconception(
        "outermost_only",
        "只看最外層底下的第一層 module",
        'nn_module_stack 裡有每一層的路徑；只看最外層底下那一層（例如 "block"），只跳過 block.fc 時就比對不到，'
        "它照樣被量化。stack 裡的每一個路徑都要比對，任何一個在 skipped 裡就回答 False。",
        FILTER_RULES,
        public=lambda seen, expected: only_off(seen, expected, ("side_net", "inner"), "fewer"),
        practice=WITHIN,
    ),
    Misconception(
        "prefix_match",
        "用字首比對 module 的路徑",
        'module 的路徑要完全相同才算："proj2".startswith("proj") 是 True，但 proj2 不是 proj，也不在 proj 裡面。'
        '包在 proj 裡面的 module，路徑本身就會出現在 stack 上（"proj" 與 "proj.xxx" 各是一項），'
        "所以用 path in skipped 逐一比對就夠了。",
        FILTER_RULES,
        public=lambda seen, expected: also_skipped(seen, expected, "conv"),
        practice=WITHIN,
    ),
    Misconception(
        "last_segment_match",
        "用路徑的結尾或其中一段比對 module",
        '跳過 "fc" 只表示路徑剛好是 "fc" 的 module；block 裡的 linear 路徑是 "block.fc"，它不是 fc，也不在 fc 裡面。'
        "你用 endswith 或把路徑切成一段一段來比，名字只是某個巢狀路徑最後一段時，也把那一層跳過了。"
        "拿 stack 上每一個完整的路徑和 skipped 完全比對。",
        FILTER_RULES,
        public=lambda seen, expected: also_skipped(seen, expected, "linear"),
        practice=WITHIN,
    ),
    Misconception(
        "node_name_match",
        "用 node 的名字找 module",
        "node 的名字（conv2d_1、linear…）是 export 取的，不是 module 的名字；get_attr 的名字（proj2_weight）又會讓 "
        '"proj" 誤中別的 module。module 的路徑在 node.meta["nn_module_stack"] 裡：每個值是 (路徑, 類別)，'
        "拿路徑和 skipped 完全比對。",
        FILTER_RULES,
        public=_public_name,
        practice=STACK_PATHS,
    ),
    Misconception(
        "never_refuses",
        "filter 從來沒有回答 False",
        "跳過任何 module 時，你的 filter 都對每個 node 回答 True，它比對的東西和 skipped 裡的路徑對不上"
        "（node 的名字、module 的類別、nn_module_stack 的 key 都不是路徑）。"
        '路徑是 nn_module_stack 每個值的第一項：[path for path, _ in node.meta.get("nn_module_stack", {}).values()]。',
        FILTER_RULES,
        public=lambda seen, expected: never_refused(seen, expected, *PUBLIC_FILTERS),
        practice=STACK_PATHS,
    ),
)


def chosen(evidence: Any, *place: str) -> list[str] | None:
    """The layers a search returned at ``place`` (None when the case raised or has no such record)."""
    found = diagnosis.value(evidence, *place, "chosen")
    return found if isinstance(found, list) else None


def search_relation(seen: Any, expected: Any, *place: str) -> str | None:
    """``"same"``, ``"reordered"`` (the same layers in another order), ``"shorter"`` (a strict prefix of the key's:
    stopped early), ``"longer"`` (the key's, then more), ``"other"``; None when either side has no result."""
    got, want = chosen(seen, *place), chosen(expected, *place)
    if got is None or want is None:
        return None
    if got == want:
        return "same"
    if sorted(got) == sorted(want):
        return "reordered"
    if len(got) < len(want) and want[: len(got)] == got:
        return "shorter"
    if len(got) > len(want) and got[: len(want)] == want:
        return "longer"
    return "other"


def alone_ranked(seen: Any, expected: Any, *place: str) -> bool:
    """The first pick right, the second not: the best layer alone, then the next best alone instead of the best
    together with the first."""
    got, want = chosen(seen, *place), chosen(expected, *place)
    return bool(got and want) and len(got) > 1 and len(want) > 1 and got[0] == want[0] and got[1] != want[1]


def reordered_somewhere(seen: Any, expected: Any, places: list[tuple[str, ...]]) -> bool:
    return any(search_relation(seen, expected, *place) == "reordered" for place in places)


def evaluate_misused(seen: Any, expected: Any) -> bool:
    """``evaluate`` got something other than a list of layer names (a single name, …)."""
    return any(
        name == "TypeError" and "evaluate 的引數" in diagnosis.error_message(seen, case)
        for case, name in diagnosis.errors(seen).items()
    )


def layers_shrunk(seen: Any, expected: Any) -> bool:
    """The list handed to the search lost layers (they were removed from it while searching)."""
    got = diagnosis.value(seen, "out_of_reach", "layers_after")
    want = diagnosis.value(expected, "out_of_reach", "layers_after")
    return isinstance(got, list) and isinstance(want, list) and set(got) < set(want)


def tie_lost(seen: Any, expected: Any) -> bool:
    """Where two layers tie, the other one was picked; every search without a tie is right."""
    got, want = chosen(seen, "tie"), chosen(expected, "tie")
    untied = [place for place in PUBLIC_SEARCHES if place != ("tie",)]
    return (
        bool(got and want)
        and got[0] != want[0]
        and all(search_relation(seen, expected, *place) == "same" for place in untied)
    )


PUBLIC_SEARCHES = [
    ("three_layers",),
    ("pair",),
    ("dips",),
    ("already",),
    ("below_zero",),
    ("out_of_reach",),
    ("exact",),
    ("tie",),
]

SEARCH_MISCONCEPTIONS = (
    Misconception(
        "evaluate_single_name",
        "evaluate 只給了一個層的名字",
        "evaluate(skip) 的引數是「留在 fp32 的層」的 list，分數是這一整組一起留下的結果。"
        "只給一個名字（evaluate(layer)），它就不知道已經留了哪些層。每個候選都評估 skipped + [layer]。",
        GREEDY_RULES,
        public=evaluate_misused,
        practice=BEST_NEXT,
    ),
    Misconception(
        "mutates_layers",
        "改了呼叫者傳進來的 layers",
        "layers 是呼叫的人的 list：你在上面 remove、pop 或 sort，搜尋結束後它就少了層或換了順序，"
        "同一個 list 再交給下一次搜尋就得到不同的答案。用另一個 list 記錄已經留下的層，layers 只讀不改。",
        GREEDY_RULES,
        public=layers_shrunk,
        practice=BEST_NEXT,
    ),
    Misconception(
        "scores_layers_alone",
        "只看每一層單獨留下的分數",
        "層與層會互相影響：一層單獨留下沒什麼用，和另一層一起留卻可能幫很大（C 段的 conv2 就是例子）。"
        "你只照「單獨留這一層」的分數排名（或每一步只評估 [layer]），選不到這種組合。"
        "每一步都重新評估「已經留的層 + 這一層」：evaluate(skipped + [layer])。",
        GREEDY,
        public=lambda seen, expected: any(alone_ranked(seen, expected, *place) for place in PUBLIC_SEARCHES),
        practice=BEST_NEXT,
    ),
    Misconception(
        "never_resets_best",
        "最佳候選沒有每一步重新找",
        "「這一步最好的候選」要在每一步開始時重設成還沒有（None），再和這一步的候選比較。"
        "你把上一步的最佳分數留到下一步，這一步的候選都比它低時，就選不到新的層（或又選回已經留下的層）。"
        "每一步開頭寫 best, best_score = None, None。",
        GREEDY_RULES,
        public=lambda seen, expected: "重複" in diagnosis.error_message(seen, "out_of_reach"),
    ),
    Misconception(
        "stops_without_improvement",
        "候選都比現在差就停下來",
        "規則是每一步都選一層，即使每個候選都比現在的分數差：層之間會互相影響，下一步可能補回來。"
        "你在「這一步沒有變好」時就停了（或只接受比現在好的候選），先變差、兩層一起才變好的情況就找不到。"
        "只有達到目標或所有層都留下了才停。",
        GREEDY,
        public=lambda seen, expected: search_relation(seen, expected, "dips") == "shorter",
        practice=STEPS_TAKEN,
    ),
    Misconception(
        "best_starts_at_zero",
        "最佳分數從 0 開始",
        "SQNR 是 dB，誤差比訊號還大時就是負的；分數也可能是任何「越高越好」的數字。"
        "最佳分數從 0 開始，每個候選都是負的時候一層也選不到。用 None（或第一個候選的分數）當起點。",
        GREEDY_RULES,
        public=lambda seen, expected: (
            search_relation(seen, expected, "below_zero") == "shorter"
            and search_relation(seen, expected, "dips") in ("same", "reordered")
        ),
        practice=BEST_NEXT,
    ),
    Misconception(
        "gives_up",
        "達不到目標就放棄",
        "所有層都留了還達不到目標時，規則要你回傳全部的層（依選到的先後），呼叫的人才知道「全部留下也不夠」、差多少。"
        "你回傳了空的 list（或中途停下）。迴圈的條件是「還沒達到目標而且還有層沒留」，跑完就回傳 skipped。",
        GREEDY_RULES,
        public=lambda seen, expected: (
            "NoneType" in diagnosis.error_message(seen, "out_of_reach")
            or search_relation(seen, expected, "out_of_reach") == "shorter"
        ),
        practice=STEPS_TAKEN,
    ),
    Misconception(
        "skips_at_least_one",
        "至少留一層，沒先看目標",
        "量化後的模型可能本來就達到目標，那就一層都不用留，回傳 []。"
        "你在檢查目標之前先選了一層。開始搜尋前先評估 evaluate([])，達到目標就直接結束。",
        GREEDY,
        public=lambda seen, expected: search_relation(seen, expected, "already") == "longer",
        practice=STEPS_TAKEN,
    ),
    Misconception(
        "strictly_above_target",
        "要超過目標才停",
        "目標是「達到」：分數 ≥ target 就停。你用 score > target，剛好等於目標時又多留了一層，"
        "多一層 fp32 就少一層量化。比較時用 >=（或迴圈條件寫 score < target）。",
        GREEDY_RULES,
        public=lambda seen, expected: (
            search_relation(seen, expected, "exact") == "longer"
            and search_relation(seen, expected, "already") == "same"
        ),
        practice=STEPS_TAKEN,
    ),
    Misconception(
        "ties_not_first",
        "平手時沒有選排在前面的層",
        "兩個候選分數一樣時，規則是選 layers 裡排在前面的。你用 >= 比較（後來的會蓋掉前面的），"
        "或先把 layers 排序過，選到的就換成另一層。照 layers 原本的順序走，只在分數嚴格大於（>）時才換人。",
        GREEDY_RULES,
        public=tie_lost,
        practice=BEST_NEXT,
    ),
    Misconception(
        "order_not_pick_order",
        "回傳的順序不是選到的先後",
        "回傳的 list 要照選到的先後排：第一個是第一步選的層。照 layers 的順序（或字母順序）重新排過，"
        "就看不出哪一層最重要、搜尋走了哪條路。選到一層就 append，最後直接回傳那個 list。",
        GREEDY_RULES,
        public=lambda seen, expected: reordered_somewhere(
            seen, expected, [place for place in PUBLIC_SEARCHES if place != ("tie",)]
        ),
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "may_quantize",
        FILTER_TITLE,
        ("may_quantize",),
        {"digits_conv2": filter_digits, "block": filter_block, "side_net": filter_side},
        misconceptions=FILTER_MISCONCEPTIONS,
    ),
    Exercise(
        "greedy_skip",
        TITLE,
        ("greedy_skip",),
        {
            "three_layers": case_three_layers,
            "pair": case_pair,
            "dips": case_dips,
            "already": case_already,
            "below_zero": case_below_zero,
            "out_of_reach": case_out_of_reach,
            "exact": case_exact,
            "tie": case_tie,
        },
        misconceptions=SEARCH_MISCONCEPTIONS,
    ),
)
