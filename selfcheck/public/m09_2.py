"""Public cases of M09-2 動態量化 (DynamicLinearQuantizer) on the chapter's own models, and the chapter's tools.

What the chapter and the hidden cases share:

- the TinyLMs themselves come from ``selfcheck.public.m09_1.small_tinylm`` (weights drawn from a
  seed) and their tokens from ``selfcheck.casekit.seeded_tokens``.
- ``dynamic_record``: a Quantizer run on a model the dynamic way (export → ``prepare_pt2e`` with the
  labels read right after ``annotate`` → one forward → ``convert_pt2e`` of the prepared graph itself,
  never of a copy, which breaks dynamic specs), described as plain data:

  ``labels``: every node that carries a spec, with the spec of each input edge and of its output
  (``label_text``: is_dynamic, dtype, range, qscheme, axis, observer class; observer keyword
  arguments such as ``eps`` left out); ``prepared``: the observer instances (class, settings, which
  node each observes and which nodes read it); ``converted``: for every ``linear``, how its input,
  weight and bias reach it (``path``) and whether its output is quantized, the quantized_decomposed
  ops counted, and the other ops that read a dequantized value.

Node names and op names only: no float of a scale, so the evidence is the same on every CPU.
"""

from __future__ import annotations

import collections
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.tinylm import TinyLMConfig
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_tokens
from selfcheck.evidence import getattr_value, is_guard, is_observer_node
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.probes import AnnotationSnapshot, ChainQuantizer
from selfcheck.public.m07_3 import CLAIM_OUTPUT
from selfcheck.public.m09_1 import small_tinylm

TITLE = "DynamicLinearQuantizer：每個 linear 的輸入動態量化、權重 per-channel"

LINEAR = torch.ops.aten.linear.default
QD = "quantized_decomposed"


# --- reading the labels ----------------------------------------------------------------------------


def label_text(spec: Any) -> Any:
    """A described spec (``describe_spec``) in one line, observer keyword arguments left out:
    ``dynamic int8 [-128,127] per_tensor_affine PlaceholderObserver``,
    ``int8 [-127,127] per_channel_symmetric ch_axis=0 PerChannelMinMaxObserver``,
    ``SharedQuantizationSpec(a → b)``."""
    if not isinstance(spec, dict):
        return spec

    def field(key: str) -> Any:
        value = spec.get(key)
        return value.get(key) if isinstance(value, dict) and key in value else value

    kind = spec.get("kind")
    if kind == "shared":
        of = spec.get("of") or {}
        where = " → ".join(of["edge"]) if "edge" in of else f"{of.get('node')} 的輸出"
        return f"SharedQuantizationSpec({where})"
    dynamic = "dynamic " if spec.get("is_dynamic") else ""
    head = f"{dynamic}{field('dtype')} [{spec.get('qmin')},{spec.get('qmax')}] {field('qscheme')}"
    if "channel" in str(field("qscheme")):
        head += f" ch_axis={spec.get('ch_axis')}"
    if kind == "spec":
        observer = spec.get("observer") if isinstance(spec.get("observer"), dict) else {}
        return f"{head} {str(observer.get('class')).rsplit('.', 1)[-1]}"
    return f"{kind} {head}"


def labels(annotations: dict[str, Any], ops: dict[str, str]) -> dict[str, Any]:
    """Every node whose annotation holds a spec: its op, the spec of each input edge, of its output."""
    out: dict[str, Any] = {}
    for name, ann in annotations.items():
        if not isinstance(ann, dict) or "inputs" not in ann:
            out[name] = {"op": ops.get(name), "unsupported": True}
            continue
        inputs = {source: label_text(spec) for source, spec in ann["inputs"] if spec is not None}
        output = label_text(ann["output"]) if ann["output"] is not None else None
        if inputs or output is not None:
            out[name] = {"op": ops.get(name), "inputs": dict(sorted(inputs.items())), "output": output}
    return out


# --- reading the graphs ------------------------------------------------------------------------------


def op_name(node: Node) -> str:
    """``linear.default``, ``choose_qparams.tensor``…: an op overload without its namespace."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._opname}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def is_quant_op(node: Any) -> bool:
    """A quantized_decomposed op (choose_qparams, quantize, dequantize) or a getitem of one."""
    if not isinstance(node, Node) or node.op != "call_function":
        return False
    if str(node.target).startswith(QD):
        return True
    return op_name(node) == "getitem" and is_quant_op(node.args[0])


def _origin(node: Any) -> str:
    """Where a qparam argument comes from: ``choose_qparams.tensor(x)`` at run time, a constant, a number."""
    if isinstance(node, Node):
        if op_name(node) == "getitem" and is_quant_op(node.args[0]):
            chooser = node.args[0]
            source = chooser.args[0]
            return f"{op_name(chooser)}({source.name if isinstance(source, Node) else '?'})"
        if node.op == "get_attr":
            return "constant"
        return f"node {node.name}"
    return "constant" if isinstance(node, int | float) else type(node).__name__


def _step(gm: GraphModule, node: Node) -> dict[str, Any]:
    """One quantize / dequantize on a path: op, where its qparams come from, range and dtype."""
    args = list(node.args)
    name = op_name(node)
    step: dict[str, Any] = {"op": name}
    if "per_channel" in name:
        scales, zero_points, axis, qmin, qmax, dtype = args[1:7]
        step["qparams"] = _origin(scales)
        step["axis"] = axis
        step["range"] = [qmin, qmax]
        step["dtype"] = str(dtype).removeprefix("torch.")
        zp = getattr_value(gm, zero_points) if isinstance(zero_points, Node) and zero_points.op == "get_attr" else None
        step["zero_points_zero"] = bool(isinstance(zp, torch.Tensor) and bool((zp == 0).all()))
    else:
        scale, qmin, qmax, dtype = args[1], args[3], args[4], args[5]
        step["qparams"] = _origin(scale)
        step["range"] = [qmin, qmax]
        step["dtype"] = str(dtype).removeprefix("torch.")
    return step


def path(gm: GraphModule, arg: Any) -> dict[str, Any]:
    """How a value reaches its consumer: the node it comes from and the q/dq steps on the way (in order)."""
    steps = []
    source = arg
    while is_quant_op(source):
        steps.append(_step(gm, source))
        source = source.args[0]
    kind = source.op if isinstance(source, Node) else "literal"
    return {
        "from": source.name if isinstance(source, Node) else None,
        "kind": kind,
        "steps": list(reversed(steps)),
    }


def _stored_dtype(gm: GraphModule, arg: Any) -> str | None:
    source = arg
    while is_quant_op(source):
        source = source.args[0]
    if isinstance(source, Node) and source.op == "get_attr":
        value = getattr_value(gm, source)
        return str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else None
    return None


def describe_dynamic(gm: GraphModule) -> dict[str, Any]:
    """The converted graph as ``DynamicLinearQuantizer``'s checks read it (see the module's docstring)."""
    linears: dict[str, Any] = {}
    reads_dq: set[str] = set()
    counts: collections.Counter[str] = collections.Counter()
    for node in gm.graph.nodes:
        if node.op != "call_function" or is_guard(node):
            continue
        if is_quant_op(node):
            if str(node.target).startswith(QD):
                counts[op_name(node)] += 1
            continue
        if node.target == LINEAR:
            args = list(node.args) + [None] * (3 - len(node.args))
            linears[node.name] = {
                "input": path(gm, args[0]),
                "weight": {**path(gm, args[1]), "from": None, "stored": _stored_dtype(gm, args[1])},
                "bias": path(gm, args[2]) if isinstance(args[2], Node) else None,
                "output_quantized": any(is_quant_op(user) for user in node.users),
            }
        elif any(is_quant_op(arg) for arg in node.all_input_nodes):
            reads_dq.add(node.name)
    return {"linears": linears, "counts": dict(sorted(counts.items())), "float_ops_reading_dq": sorted(reads_dq)}


def _settings(module: Any) -> str:
    qscheme = str(getattr(module, "qscheme", None)).removeprefix("torch.")
    dynamic = "dynamic " if getattr(module, "is_dynamic", False) else ""
    dtype = str(getattr(module, "dtype", None)).removeprefix("torch.")
    axis = f" ch_axis={module.ch_axis}" if "channel" in qscheme else ""
    return f"{type(module).__name__} {dynamic}{dtype} [{module.quant_min},{module.quant_max}] {qscheme}{axis}"


def describe_observers(gm: GraphModule) -> dict[str, Any]:
    """The observer instances of a prepared graph: ``[settings, observed node, sorted reader names]`` each
    (readers: the non-observer nodes that read it), in graph order; and the count of instances per class."""
    found: dict[int, list[Any]] = {}
    for node in gm.graph.nodes:
        if not is_observer_node(gm, node):
            continue
        module = gm.get_submodule(str(node.target))
        source = node.args[0]
        while is_observer_node(gm, source):
            source = source.args[0]
        entry = found.setdefault(id(module), [_settings(module), source.name, set()])
        stack = list(node.users)
        while stack:
            user = stack.pop()
            if is_observer_node(gm, user):
                stack.extend(user.users)
            elif not is_guard(user):
                entry[2].add(user.name)
    instances = [[settings, source, sorted(readers)] for settings, source, readers in found.values()]
    classes = collections.Counter(settings.split(" ", 1)[0] for settings, _, _ in instances)
    return {"instances": instances, "classes": dict(sorted(classes.items()))}


class PrepareRefused(RuntimeError):
    """prepare_pt2e raised NotImplementedError on the student's labels (e.g. an observer that cannot be dynamic):
    reported under another name, since a NotImplementedError in every case reads as an exercise not answered yet."""


def dynamic_record(
    quantizer: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...], after: tuple[Any, ...] = ()
) -> dict[str, Any]:
    """``quantizer`` run on ``model`` the dynamic way, described (``labels``, ``prepared``, ``converted``).

    Export on ``inputs``, ``prepare_pt2e`` (the labels read right after ``quantizer``'s ``annotate``, before
    the Quantizers ``after`` annotate too), one forward on ``inputs`` (the weights' observers need it),
    ``convert_pt2e`` of the prepared graph itself with the global random state forked.
    """
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    snapshot = AnnotationSnapshot()
    gm = export_module(model.eval(), inputs)
    ops = {n.name: op_name(n) for n in gm.graph.nodes if n.op == "call_function"}
    snapshot.annotations = {"": "not yet"}  # replaced when the snapshot runs, right after the student's annotate
    try:
        prepared = prepare_pt2e(gm, ChainQuantizer([quantizer, snapshot, *after]))
    except NotImplementedError as exc:
        if snapshot.annotations == {"": "not yet"}:
            raise  # the student's annotate itself: the unanswered stub raises NotImplementedError
        # labelled, but an observer the labels ask for refuses: that is an answer, not a missing one
        raise PrepareRefused(f"prepare_pt2e 照你的標籤插 observer 時出錯（NotImplementedError: {exc}）") from exc
    result: dict[str, Any] = {
        "labels": labels(snapshot.annotations, ops),
        "prepared": describe_observers(prepared),
    }
    with torch.no_grad():
        prepared(*inputs)
    with torch.random.fork_rng():
        result["converted"] = describe_dynamic(convert_pt2e(prepared))
    return result


# --- public cases ----------------------------------------------------------------------------------


def shipped_tinylm(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM (shipped weights) on 4 held-out windows."""
    from common.tinylm import example_inputs, tinylm_model

    return dynamic_record(ns["DynamicLinearQuantizer"](), tinylm_model(), example_inputs(4))


def tinylm_without_bias(ns: Namespace, seed: int) -> Any:
    """A TinyLM of the chapter's sizes whose linears have no bias (weights from seed 0)."""
    model = small_tinylm(TinyLMConfig(bias=False), 0)
    return dynamic_record(ns["DynamicLinearQuantizer"](), model, (seeded_tokens(seed, model.config.vocab, 2, 16),))


class Tagger(nn.Module):
    """A small token tagger named unlike TinyLM: ``vocab_table`` (an embedding) → ``proj_in`` → relu → ``mix`` →
    ``classifier``, every linear with a bias."""

    def __init__(self, vocab: int = 11, d: int = 8) -> None:
        super().__init__()
        self.config = TinyLMConfig(vocab=vocab, context=6, d_model=d, heads=1, layers=1, mlp=d)
        self.vocab_table = nn.Embedding(vocab, d)
        self.proj_in = nn.Linear(d, 2 * d)
        self.mix = nn.Linear(2 * d, d)
        self.classifier = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.mix(torch.relu(self.proj_in(self.vocab_table(tokens)))))


def chained(ns: Namespace, seed: int) -> Any:
    """Tagger quantized by three Quantizers one after another, as ExecuTorch's recipes compose them:
    EmbeddingQuantizer first (its label on the embedding must survive), the student's, then XNNPACK's 4-bit dynamic
    config, which labels only the linears nobody claimed (``_annotated``). The labels are read before that last one
    runs."""
    from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer

    from common.dynamic import xnnpack_dynamic_quantizer
    from selfcheck.casekit import seeded_model

    model = seeded_model(seed, Tagger)
    chain = ChainQuantizer([EmbeddingQuantizer(), ns["DynamicLinearQuantizer"]()])
    batch = (seeded_tokens(seed, model.config.vocab, 2, model.config.context),)
    return dynamic_record(chain, model, batch, after=(xnnpack_dynamic_quantizer(-8, 7),))


# --- where the chapter teaches it ----------------------------------------------------------------

RULES = Section("練習：DynamicLinearQuantizer（10 分）")
DYNAMIC_OBSERVERS = Section("動態 config：prepare 放了哪些 observer")
RUN_TIME_QPARAMS = Section("convert 之後：執行時才算的 qparams")
RANGES_DIFFER = Section("每一批的範圍都不一樣")
PER_CHANNEL = Section("B. 一個 outlier channel：per-tensor 與 per-channel weight", notebook="M06-1")
SYMMETRIC_RANGE = Section("B. symmetric 與整數範圍", notebook="M02-3")


# --- reading the evidence (the public detectors here; the hidden ones in the checks use them too) ------


def records(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(case, got, want)`` for every case where both returned a dict (``selfcheck.diagnosis.case_pairs``)."""
    return diagnosis.case_pairs(seen, expected)


def has_bias(record: Any) -> bool:
    """The model of this record has linears with a bias (read from the key's converted graph)."""
    linears = diagnosis.at(record, "converted", "linears")
    return isinstance(linears, dict) and any(
        isinstance(linear, dict) and linear.get("bias") for linear in linears.values()
    )


def _with_bias(expected: Any) -> dict[str, bool]:
    """Case → whether its model's linears have a bias."""
    return {case: has_bias(diagnosis.value(expected, case)) for case in diagnosis.cases(expected)}


def linear_parts(seen: Any, expected: Any, part: str) -> list[tuple[Any, Any]]:
    """``(got, want)`` of one part (``input``, ``weight``, ``bias``, ``output_quantized``) of every linear both
    converted graphs have."""
    out = []
    for _, got, want in records(seen, expected):
        mine, ours = diagnosis.at(got, "converted", "linears"), diagnosis.at(want, "converted", "linears")
        if isinstance(mine, dict) and isinstance(ours, dict):
            out.extend(
                (mine[name].get(part), ours[name].get(part)) for name in ours if isinstance(mine.get(name), dict)
            )
    return out


def steps(path: Any) -> list[dict[str, Any]]:
    found = path.get("steps") if isinstance(path, dict) else None
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def label_pairs(seen: Any, expected: Any) -> list[tuple[dict[str, Any] | None, dict[str, Any]]]:
    """``(got, want)`` label of every linear the key labels (``got`` None when the student's has none); the labels
    another Quantizer put on other ops (the embeddings of the composed case) are left out."""
    out = []
    for _, got, want in records(seen, expected):
        mine, ours = got.get("labels"), want.get("labels")
        if isinstance(mine, dict) and isinstance(ours, dict):
            out.extend(
                (mine.get(name), label)
                for name, label in ours.items()
                if isinstance(label, dict) and label.get("op") == "linear.default"
            )
    return out


def _weight_source(label: dict[str, Any]) -> str | None:
    """The input edge of a key's linear label that carries the weight (its per-channel spec)."""
    return next((source for source, text in label.get("inputs", {}).items() if "per_channel" in str(text)), None)


def crashes_without_bias(seen: Any, expected: Any) -> bool:
    """A model whose linears have no bias raised an IndexError; one with bias did not raise."""
    bias = _with_bias(expected)
    failed = [case for case in diagnosis.errors(seen) if not bias.get(case, True)]
    fine = [case for case, yes in bias.items() if yes and diagnosis.value(seen, case) is not None]
    return any(diagnosis.error(seen, case) == "IndexError" for case in failed) and bool(fine)


def crashes_with_bias(seen: Any, expected: Any) -> bool:
    """A model whose linears have a bias raised; one without bias did not."""
    bias = _with_bias(expected)
    failed = [case for case in diagnosis.errors(seen) if bias.get(case)]
    fine = [case for case, yes in bias.items() if not yes and diagnosis.value(seen, case) is not None]
    return bool(failed and fine)


def bias_quantized(seen: Any, expected: Any) -> bool:
    """A bias reaches its linear through q / dq, or carries a spec."""
    if any(steps(got) and not steps(want) for got, want in linear_parts(seen, expected, "bias")):
        return True
    return any(
        isinstance(got, dict) and len(got.get("inputs") or {}) > len(want.get("inputs") or {})
        for got, want in label_pairs(seen, expected)
    )


def quantizes_bias(seen: Any, expected: Any) -> bool:
    """The bias carries a spec: q / dq before it, or a model with bias raised where one without did not."""
    return bias_quantized(seen, expected) or crashes_with_bias(seen, expected)


def _missing_linears(got: dict[str, Any], want: dict[str, Any]) -> set[str]:
    mine, ours = got.get("labels"), want.get("labels")
    if not isinstance(mine, dict) or not isinstance(ours, dict):
        return set()
    return {name for name in ours if name not in mine}


def skips_linears_without_bias(seen: Any, expected: Any) -> bool:
    """Linears without bias left unlabelled, every linear with a bias labelled."""
    pairs = records(seen, expected)
    without = [_missing_linears(got, want) for _, got, want in pairs if not has_bias(want)]
    with_bias = [_missing_linears(got, want) for _, got, want in pairs if has_bias(want)]
    return any(without) and bool(with_bias) and not any(with_bias)


def misses_linears(seen: Any, expected: Any) -> bool:
    """Some linear of a model with bias has no label (the linears were looked for some other way)."""
    return any(_missing_linears(got, want) for _, got, want in records(seen, expected) if has_bias(want))


def symmetric_dynamic(seen: Any, expected: Any) -> bool:
    """convert fails in PortNodeMetaForQDQ: a dynamic per-tensor symmetric input (its quantize has several users)."""
    return any("PortNodeMetaForQDQ" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen))


def static_inputs(seen: Any, expected: Any) -> bool:
    """A linear's input is quantized with constant qparams (calibrated), where the key's come from choose_qparams;
    or a PlaceholderObserver was asked for qparams (``is_dynamic`` left False)."""
    for got, want in linear_parts(seen, expected, "input"):
        if any(
            mine.get("qparams") == "constant" and str(ours.get("qparams")).startswith("choose_qparams")
            for mine, ours in zip(steps(got), steps(want), strict=False)
        ):
            return True
    return any(
        "should not be called for PlaceholderObserver" in diagnosis.error_message(seen, case)
        for case in diagnosis.errors(seen)
    )


def dynamic_with_observer(seen: Any, expected: Any) -> bool:
    """A dynamic input spec with an observer that records ranges (MinMaxObserver…) instead of PlaceholderObserver."""
    if any("doesn't support dynamic" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen)):
        return True
    for got, want in label_pairs(seen, expected):
        for source, text in (want.get("inputs") or {}).items():
            mine = str((got or {}).get("inputs", {}).get(source))
            if str(text).startswith("dynamic") and mine.startswith("dynamic") and mine.split()[-1] != text.split()[-1]:
                return True
    return False


def input_range_differs(seen: Any, expected: Any) -> bool:
    """The input is quantized at run time, in another dtype or range than int8 [-128, 127]."""
    for got, want in linear_parts(seen, expected, "input"):
        for mine, ours in zip(steps(got), steps(want), strict=False):
            dynamic = str(mine.get("qparams")).startswith("choose_qparams")
            if dynamic and (mine.get("range"), mine.get("dtype")) != (ours.get("range"), ours.get("dtype")):
                return True
    return False


def weight_shares_input(seen: Any, expected: Any) -> bool:
    """The weight's label shares with another position, or its qparams are chosen at run time."""
    for got, want in label_pairs(seen, expected):
        source = _weight_source(want)
        if got and source and str(got.get("inputs", {}).get(source)).startswith("SharedQuantizationSpec"):
            return True
    return any(
        str(step.get("qparams")).startswith("choose_qparams")
        for got, _ in linear_parts(seen, expected, "weight")
        for step in steps(got)
    )


def _weight_steps(seen: Any, expected: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (mine, ours)
        for got, want in linear_parts(seen, expected, "weight")
        for mine, ours in zip(steps(got), steps(want), strict=False)
    ]


def weights_per_tensor(seen: Any, expected: Any) -> bool:
    """One constant scale for the whole weight (dequantize_per_tensor) where the key has one per channel."""
    return any(
        str(mine.get("op")).startswith("dequantize_per_tensor")
        and mine.get("qparams") == "constant"
        and str(ours.get("op")).startswith("dequantize_per_channel")
        for mine, ours in _weight_steps(seen, expected)
    )


def _per_channel_differs(seen: Any, expected: Any, field: str) -> bool:
    return any(
        str(mine.get("op")).startswith("dequantize_per_channel") and mine.get(field) != ours.get(field)
        for mine, ours in _weight_steps(seen, expected)
    )


def weight_axis_differs(seen: Any, expected: Any) -> bool:
    return _per_channel_differs(seen, expected, "axis")


def weights_asymmetric(seen: Any, expected: Any) -> bool:
    """Per-channel weights whose zero points are not all 0 (an affine scheme)."""
    return _per_channel_differs(seen, expected, "zero_points_zero") or any(
        "per_channel_affine" in str(text)
        for got, _ in label_pairs(seen, expected)
        for text in (got or {}).get("inputs", {}).values()
    )


def weight_range_differs(seen: Any, expected: Any) -> bool:
    """Per-channel weights in another range than the key's, where the student's Quantizer runs alone (after it, in
    the composed cases, XNNPACK's 4-bit config labels whatever linear nobody claimed: that range is not the
    student's)."""
    alone = {"cases": {case: record for case, record in diagnosis.cases(seen).items() if case not in COMPOSED}}
    return _per_channel_differs(alone, expected, "range")


def output_shared(seen: Any, expected: Any) -> bool:
    """The linear's output carries a SharedQuantizationSpec (tied to an input)."""
    return any(
        got and str(got.get("output")).startswith("SharedQuantizationSpec") for got, _ in label_pairs(seen, expected)
    )


def output_labelled(seen: Any, expected: Any) -> bool:
    """The linear's output carries a spec of its own (not shared with the input: that is ``output_shared``), or is
    quantized after convert, where the key leaves it float."""
    if output_shared(seen, expected):
        return False
    if any(
        got and got.get("output") is not None and want.get("output") is None
        for got, want in label_pairs(seen, expected)
    ):
        return True
    quantized = any(got is True and want is False for got, want in linear_parts(seen, expected, "output_quantized"))
    return quantized and not other_ops_labelled(seen, expected)  # a consumer's own label quantizes it too


def other_ops_labelled(seen: Any, expected: Any) -> bool:
    """Nodes the key leaves alone (layer_norm, matmul, softmax…) carry a spec."""
    for _, got, want in records(seen, expected):
        mine, ours = got.get("labels"), want.get("labels")
        if isinstance(mine, dict) and isinstance(ours, dict) and set(mine) - set(ours):
            return True
    return False


COMPOSED = ("composed", "chained")
"""The cases where the student's Quantizer runs between EmbeddingQuantizer and XNNPACK's 4-bit config (the hidden
one, the public one)."""


def _only_composed_differs(seen: Any, expected: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``[(got, want)]`` of the composed case when it differs and every other case is right; else ``[]``."""
    pairs = records(seen, expected)
    if any(got != want for case, got, want in pairs if case not in COMPOSED):
        return []
    return [(got, want) for case, got, want in pairs if case in COMPOSED and got != want]


def other_labels_lost(seen: Any, expected: Any) -> bool:
    """Where another Quantizer labelled first, a label of a node that is not a linear (the embeddings) is gone or
    changed; every other case right."""
    for got, want in _only_composed_differs(seen, expected):
        mine, ours = got.get("labels"), want.get("labels")
        if isinstance(mine, dict) and isinstance(ours, dict):
            others = [
                name for name, label in ours.items() if isinstance(label, dict) and label.get("op") != "linear.default"
            ]
            if any(mine.get(name) != ours[name] for name in others):
                return True
    return False


def relabelled_after(seen: Any, expected: Any) -> bool:
    """Where a 4-bit XNNPACKQuantizer runs after the student's, the student's labels are right but the linears'
    weights end in [-8, 7] (it relabelled them: the labels did not claim them); every other case right."""
    for got, want in _only_composed_differs(seen, expected):
        mine = diagnosis.at(got, "converted", "linears")
        if (
            got.get("labels") == want.get("labels")
            and isinstance(mine, dict)
            and any(
                step.get("range") == [-8, 7] for linear in mine.values() for step in steps((linear or {}).get("weight"))
            )
        ):
            return True
    return False


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------


def _shown_values(values: Any) -> str:
    if not isinstance(values, torch.Tensor):
        return repr(values)
    return "[" + ", ".join(f"{float(v):.4g}" for v in values.detach().flatten()) + "]"


def _check_weight_row_qparams(weight_row_qparams: Any) -> list[str]:
    problems = []
    for title, w in (
        (
            "4×3 的 weight（第 0 列全是正數）",
            torch.tensor([[0.5, 1.0, 2.0], [-0.2, 0.1, 0.3], [-4.0, 1.0, 0.0], [0.1, -0.6, 0.3]]),
        ),
        ("2×5 的 weight", torch.linspace(-1.0, 1.5, 10).reshape(2, 5) * torch.tensor([[1.0], [0.25]])),
    ):
        want = w.abs().amax(dim=1) / 127
        got = weight_row_qparams(w.clone())
        if not isinstance(got, tuple | list) or len(got) != 2:
            problems.append(f"{title}：應該回傳 (scale, zero_point) 兩個 tensor，你的是 {got!r}")
            continue
        scale, zero_point = (torch.as_tensor(v, dtype=torch.float64) for v in got)
        rows = w.shape[0]
        if scale.shape != want.shape:
            problems.append(
                f"{title}：每個輸出 channel（w 的第 0 維，{rows} 個）一個 scale，你的 scale 形狀是 {tuple(scale.shape)}"
            )
        elif not torch.allclose(scale, want.to(torch.float64), rtol=1e-4, atol=0.0):
            problems.append(f"{title}：scale 應該是 {_shown_values(want)}，你的是 {_shown_values(scale)}")
        if bool((zero_point != 0).any()):
            problems.append(
                f"{title}：symmetric 的 zero point 每個輸出 channel 都是 0，你的是 {_shown_values(zero_point)}"
            )
        elif zero_point.shape != want.shape and scale.shape == want.shape:
            problems.append(f"{title}：zero point 也是每個輸出 channel 一個，你的形狀是 {tuple(zero_point.shape)}")
    return problems


WEIGHT_ROW_QPARAMS = Practice(
    "weight_row_qparams",
    "寫 weight_row_qparams(w)：w 是一個 linear 的 weight，形狀 (輸出 channel, 輸入 channel)。"
    "回傳 XNNPACK 要的 int8 weight qparams (scale, zero_point)：每個輸出 channel 一組、symmetric、整數範圍 [-127, 127]，"
    "兩個都是形狀 (輸出 channel,) 的 tensor。檢查用一個 4×3（有一列全是正數）和一個 2×5 的 weight。",
    "import torch\n\n\ndef weight_row_qparams(w):\n    raise NotImplementedError()\n",
    _check_weight_row_qparams,
    "symmetric 把實數 0 放在整數 0：zero point 全是 0，scale 只看每一列離 0 最遠的值，max|w| / 127（正負兩邊都是 127 格）。"
    "每個輸出 channel 是 w 的一列：沿第 1 維取最大值，w.abs().amax(dim=1)。",
    "import torch\n\n\n"
    "def weight_row_qparams(w):\n"
    "    farthest = w.abs().amax(dim=1)\n"
    "    scale = farthest / 127\n"
    "    return scale, torch.zeros(w.shape[0], dtype=torch.int64)\n",
    "全是正數的那一列，affine 會給它一個不是 0 的 zero point；symmetric 不管，zero point 永遠是 0，kernel 少算一項。",
)


MISCONCEPTIONS = (
    Misconception(
        "overwrites_other_labels",
        "清掉或蓋掉了別的 Quantizer 的標籤",
        "Quantizer 常常組合起來用（ComposableQuantizer：先 EmbeddingQuantizer、再你的）。你的 annotate 替 linear 以外的 node "
        "拿掉標籤（或貼上空標籤，想讓它們留在 fp32），也就把前面的 Quantizer 貼在 embedding 上的標籤弄掉了。"
        "不要碰 linear 以外的 node：不貼標籤就是不量化。",
        RULES,
        public=other_labels_lost,
    ),
    Misconception(
        "annotated_not_set",
        "貼了標籤卻沒有設 _annotated=True",
        "_annotated=True 是「這個 node 已經有 Quantizer 認領」的記號。沒有設，後面組合進來的 Quantizer（例如 XNNPACKQuantizer）"
        "會以為這個 linear 還沒人處理，換上它自己的標籤，你的規格就不見了。QuantizationAnnotation(..., _annotated=True)。",
        RULES,
        public=relabelled_after,
        practice=CLAIM_OUTPUT,
    ),
    Misconception(
        "bias_assumed",
        "以為每個 linear 都有 bias",
        "你直接讀 node.args[2]，可是 bias=False 的 linear 在圖上只有兩個引數（輸入與 weight），沒有第三個，就出錯了。"
        "bias 本來就不用量化，標籤裡用不到它；真的要讀時先看 len(node.args) > 2。",
        RULES,
        public=crashes_without_bias,
    ),
    Misconception(
        "bias_quantized",
        "bias 也貼了規格",
        "動態量化的 linear 只量化輸入和 weight：bias 留在 float，由 kernel 直接加上去。"
        "你替 bias 貼了規格，convert 之後 bias 多了 q/dq（或形狀不合而出錯）。input_qspec_map 只放輸入與 weight 兩條邊。",
        RULES,
        public=quantizes_bias,
    ),
    Misconception(
        "skips_no_bias",
        "沒有 bias 的 linear 就跳過",
        "你只標了有 bias 的 linear（例如用 len(node.args) < 3 過濾）。沒有 bias 的 linear 一樣是 linear，"
        "輸入和 weight 都要量化；有沒有 bias 只影響要不要讀 node.args[2]，不影響要不要貼標籤。",
        RULES,
        public=skips_linears_without_bias,
    ),
    Misconception(
        "some_linears_only",
        "有些 linear 沒有找到",
        "練習要替圖裡每一個 aten.linear.default 貼標籤，不只 attention 的，也包括 MLP 的 fc1、fc2 和最後的 head。"
        '用 node.op == "call_function" 而且 node.target == torch.ops.aten.linear.default 找，不要靠 module 名字或 node 名字。',
        RULES,
        public=misses_linears,
    ),
    Misconception(
        "symmetric_activation",
        "動態輸入用了 symmetric",
        "你可能以為 activation 和 weight 一樣用 symmetric。動態輸入的 qparams 在執行時由 choose_qparams 依當下的最小、最大值算出來，"
        "用的是 per_tensor_affine；換成 per_tensor_symmetric，convert 就出錯（PortNodeMetaForQDQ）。"
        "輸入用 torch.per_tensor_affine、範圍 −128..127。",
        RANGES_DIFFER,
        public=symmetric_dynamic,
    ),
    Misconception(
        "static_activation",
        "輸入用了靜態的規格",
        "is_dynamic 沒有設成 True，輸入的 scale 與 zero point 就在 convert 時固定成常數（quantize_per_tensor.default），"
        "每一批都用同一組，也就不是動態量化了。動態的規格要 is_dynamic=True，convert 之後才會在執行時用 choose_qparams 算 qparams。",
        RUN_TIME_QPARAMS,
        public=static_inputs,
    ),
    Misconception(
        "dynamic_with_observer",
        "動態輸入配了會記錄範圍的 observer",
        "你可能以為動態量化也要 MinMaxObserver 之類的 observer 記下範圍。動態輸入的 qparams 每次執行時才算，"
        "prepare 時不需要記任何東西：它的 observer 是 PlaceholderObserver，只占個位置，告訴 convert「這裡在執行時量化」。",
        DYNAMIC_OBSERVERS,
        public=dynamic_with_observer,
    ),
    Misconception(
        "activation_range",
        "動態輸入的 dtype 或範圍不對",
        "XNNPACK 的動態輸入是 int8、範圍 −128..127（per_tensor_affine）。換成 uint8 [0, 255] 或別的範圍，"
        "choose_qparams 算出來的 qparams 就不是後端要的。照練習的規則寫 dtype=torch.int8、quant_min=-128、quant_max=127。",
        RULES,
        public=input_range_differs,
    ),
    Misconception(
        "weight_shared_with_input",
        "weight 和輸入共用 qparams",
        "weight 和 activation 的數值範圍完全不同，不能共用一組 scale：你用 SharedQuantizationSpec 把 weight 綁在輸入上，"
        "weight 也跟著在執行時 per-tensor 量化。weight 要有自己的規格：int8 per_channel_symmetric、ch_axis=0，convert 時就量化成常數。",
        RUN_TIME_QPARAMS,
        public=weight_shares_input,
    ),
    Misconception(
        "per_tensor_weights",
        "weight 用了 per-tensor",
        "per-tensor 時整個 weight 只有一個 scale，只要有一個輸出 channel 的值特別大，其他 channel 就只剩很少的格子可用。"
        "每個輸出 channel 一組 scale 才是 XNNPACK 要的：qscheme=torch.per_channel_symmetric、ch_axis=0，observer 用 PerChannelMinMaxObserver。",
        PER_CHANNEL,
        public=weights_per_tensor,
        practice=WEIGHT_ROW_QPARAMS,
    ),
    Misconception(
        "weight_axis",
        "per-channel 沿錯了軸",
        "linear 的 weight 形狀是 (輸出 channel, 輸入 channel)，per-channel 要每個輸出 channel 一組 scale，也就是 ch_axis=0。"
        "沿 ch_axis=1 是每個輸入 channel 一組，kernel 沒辦法把它提到矩陣乘法外面。",
        PER_CHANNEL,
        public=weight_axis_differs,
        practice=WEIGHT_ROW_QPARAMS,
    ),
    Misconception(
        "asymmetric_weights",
        "weight 用了非對稱的 per_channel_affine",
        "weight 的分布大致以 0 為中心，XNNPACK 的 int8 weight 是對稱的：zero point 全是 0，kernel 才不用多算一項。"
        "你用了 per_channel_affine，每個 channel 有自己的 zero point；改用 torch.per_channel_symmetric。",
        SYMMETRIC_RANGE,
        public=weights_asymmetric,
        practice=WEIGHT_ROW_QPARAMS,
    ),
    Misconception(
        "weight_range",
        "weight 的範圍不是 −127..127",
        "對稱量化要正負兩邊一樣多格：int8 的 −128 沒有對應的 +128，所以 XNNPACK 的 int8 weight 用 −127..127。"
        "這個練習的 weight 是 8-bit，quant_min=-127、quant_max=127（4-bit 是 M09-3 的事）。",
        SYMMETRIC_RANGE,
        public=weight_range_differs,
        practice=WEIGHT_ROW_QPARAMS,
    ),
    Misconception(
        "quantizes_other_ops",
        "linear 以外的 op 也貼了標籤",
        "你可能以為 Transformer 裡的每個 op 都該量化。XNNPACK 的動態 config 只標 linear：layer_norm、softmax、matmul、gelu 沒有動態的 int8 kernel，"
        "標了只會在它們前面多出 q/dq，convert 之後還是用 float 算。只替 aten.linear.default 貼標籤。",
        DYNAMIC_OBSERVERS,
        public=other_ops_labelled,
    ),
    Misconception(
        "output_shared_with_input",
        "linear 的輸出和輸入共用 qparams",
        "你用 SharedQuantizationSpec 把 linear 的輸出綁在輸入上，輸出也被量化了。linear 的輸出和輸入的範圍本來就不同，"
        "而動態量化的 linear 輸出留在 float，給下一個 op 直接用；output_qspec 不要寫。",
        RULES,
        public=output_shared,
    ),
    Misconception(
        "output_spec",
        "linear 的輸出也貼了規格",
        "動態量化只量化 linear 的輸入與 weight，linear 算完的輸出是 float，直接交給 layer_norm、gelu 這些用 float 算的 op。"
        "你替輸出貼了規格，convert 之後輸出多了一組 q/dq；QuantizationAnnotation 只寫 input_qspec_map。",
        RULES,
        public=output_labelled,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "dynamic_linear_quantizer",
        TITLE,
        ("DynamicLinearQuantizer",),
        {"tinylm": shipped_tinylm, "no_bias": tinylm_without_bias, "chained": chained},
        misconceptions=MISCONCEPTIONS,
    ),
)
