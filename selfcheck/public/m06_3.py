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

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, describe_annotations, is_observer_node, qdq_kind, safe_text

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


def _graph_text(gm: Any) -> Any:
    """A graph's nodes and labels as data: equal before and after a call that only read it."""
    if not isinstance(gm, GraphModule):
        return None
    nodes = [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]
    return nodes, describe_annotations(gm)


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
        if _graph_text(node.graph.owning_module) != before:
            raise EvidenceError(
                f"may_quantize 改了圖（問到 node {node.name} 時）：filter function 只回答 True / False，"
                "不要改 node、它的標籤或它所在的圖"
            )
        return answer

    return filter_fn


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


# --- greedy_skip ------------------------------------------------------------------------------------


def _names(skip: Any, layers: list[str]) -> frozenset[str]:
    """The layers an ``evaluate`` call asked to skip (a list, tuple or set of layer names)."""
    if type(skip) not in (list, tuple, set, frozenset):
        raise TypeError(f"evaluate 的參數應該是 layer 名稱的 list，收到 {type(skip).__name__}")
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


PUBLIC = declare(
    __name__,
    Exercise(
        "may_quantize",
        FILTER_TITLE,
        ("may_quantize",),
        {"digits_conv2": filter_digits, "block": filter_block},
    ),
    Exercise(
        "greedy_skip",
        TITLE,
        ("greedy_skip",),
        {"three_layers": case_three_layers, "pair": case_pair, "dips": case_dips, "already": case_already},
    ),
)
