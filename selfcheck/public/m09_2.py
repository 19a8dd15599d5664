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
from selfcheck.casekit import Exercise, Namespace, declare, seeded_tokens
from selfcheck.evidence import getattr_value, is_guard, is_observer_node
from selfcheck.probes import AnnotationSnapshot, ChainQuantizer
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


def dynamic_record(quantizer: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """``quantizer`` run on ``model`` the dynamic way, described (``labels``, ``prepared``, ``converted``).

    Export on ``inputs``, ``prepare_pt2e`` (the labels read right after ``annotate``), one forward on
    ``inputs`` (the weights' observers need it), ``convert_pt2e`` of the prepared graph itself with the
    global random state forked.
    """
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    snapshot = AnnotationSnapshot()
    gm = export_module(model.eval(), inputs)
    ops = {n.name: op_name(n) for n in gm.graph.nodes if n.op == "call_function"}
    prepared = prepare_pt2e(gm, ChainQuantizer([quantizer, snapshot]))
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


PUBLIC = declare(
    __name__,
    Exercise(
        "dynamic_linear_quantizer",
        TITLE,
        ("DynamicLinearQuantizer",),
        {"tinylm": shipped_tinylm, "no_bias": tinylm_without_bias},
    ),
)
