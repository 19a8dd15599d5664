"""What a recording may make the replay run: the allow-list and the budgets, in one place.

A recording is data a student controlled. When it holds a graph the student edited, the replay
(``replay.py``) rebuilds that graph on the grader's own copy of the hidden model and the cases
run it; when it holds a quantization spec, torchao builds the observer it names. Nothing a
recording names is looked up by name in a module: every target, method and observer class it
may use is listed here, and a recording that names anything else is refused before it runs
(``check_recording``: the exercise scores zero, with one sentence saying why). A rebuilt graph is
then propagated on *fake* tensors (shapes and dtypes only, nothing computed) and refused when its
outputs would hold more than ``BUDGET.tensor_bytes`` or cost more than ``BUDGET.flops``
(``check_cost``). What is left to chance (a case that runs a graph often) is bounded by the
replay worker's own time and memory limit (``replay_job.py``).

Growing a list is a reviewed change: ``tests/test_allowed.py`` prints them and compares them
with ``tests/allowed.txt``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

# --- call_function targets ----------------------------------------------------------------------------

ATEN = (
    # the layers of the course's models and what export writes for them
    "conv1d.default conv1d.padding conv2d.default conv2d.padding conv3d.default conv3d.padding "
    "conv_transpose1d.default conv_transpose2d.input conv_transpose3d.input convolution.default "
    "linear.default addmm.default mm.default bmm.default matmul.default "
    "batch_norm.default _native_batch_norm_legit_no_training.default _native_batch_norm_legit.default "
    "_native_batch_norm_legit_functional.default native_batch_norm.default layer_norm.default "
    "native_layer_norm.default group_norm.default embedding.default dropout.default "
    "scaled_dot_product_attention.default _softmax.default softmax.int log_softmax.int _log_softmax.default "
    "max_pool2d.default max_pool2d_with_indices.default avg_pool2d.default adaptive_avg_pool2d.default "
    "_adaptive_avg_pool2d.default upsample_bilinear2d.vec upsample_nearest2d.vec upsample_bilinear2d.default "
    "upsample_nearest2d.default "
    # elementwise: activations and arithmetic (a student replaces or inserts these)
    "relu.default relu_.default relu6.default hardtanh.default hardtanh_.default sigmoid.default tanh.default "
    "hardsigmoid.default hardswish.default gelu.default silu.default leaky_relu.default elu.default "
    "clamp.default clamp.Tensor clamp_min.default clamp_max.default neg.default abs.default exp.default "
    "log.default sqrt.default rsqrt.default reciprocal.default pow.Tensor_Scalar square.default "
    "add.Tensor add.Scalar add_.Tensor sub.Tensor sub.Scalar rsub.Scalar mul.Tensor mul.Scalar "
    "div.Tensor div.Scalar div.Tensor_mode floor_divide.default remainder.Scalar "
    "minimum.default maximum.default where.self eq.Scalar ne.Scalar lt.Scalar gt.Scalar le.Scalar ge.Scalar "
    "round.default floor.default ceil.default sign.default masked_fill.Scalar "
    # reductions
    "mean.default mean.dim sum.default sum.dim_IntList amax.default amin.default max.default max.dim "
    "min.default min.dim argmax.default argmin.default aminmax.default var.correction std.correction "
    # shapes and copies
    "view.default reshape.default _unsafe_view.default flatten.using_ints unflatten.int permute.default "
    "transpose.int t.default unsqueeze.default squeeze.dim squeeze.dims squeeze.default expand.default "
    "contiguous.default clone.default detach.default alias.default select.int slice.Tensor narrow.default "
    "cat.default stack.default split.Tensor split_with_sizes.default chunk.default unbind.int index.Tensor "
    "repeat.default _to_copy.default to.dtype type_as.default zeros_like.default ones_like.default "
    "full_like.default arange.default arange.start arange.start_step full.default zeros.default ones.default "
    "triu.default tril.default sym_size.int pad.default constant_pad_nd.default"
)
QUANTIZED_DECOMPOSED = (
    "quantize_per_tensor.default quantize_per_tensor.tensor quantize_per_tensor.tensor2 "
    "dequantize_per_tensor.default dequantize_per_tensor.tensor dequantize_per_tensor.tensor2 "
    "quantize_per_channel.default dequantize_per_channel.default choose_qparams.tensor "
    "choose_qparams_symmetric.tensor choose_qparams_per_token_asymmetric.default quantize_per_token.default "
    "dequantize_per_token.default quantize_per_channel_group.default dequantize_per_channel_group.default "
    "fake_quant_per_channel.default"
)
OPS = frozenset(
    [f"aten.{name}" for name in ATEN.split()]
    + [f"quantized_decomposed.{name}" for name in QUANTIZED_DECOMPOSED.split()]
)
"""Op overloads a rebuilt graph may call (``namespace.op.overload``); nothing with an effect outside its tensors."""
PACKETS = frozenset(name.rpartition(".")[0] for name in OPS)
"""Ops a graph may call without naming the overload (``torch.ops.aten.clamp``): every overload of each is a
computation on tensors (an ``out=`` one writes only into the tensor it is given)."""

PYTHON: dict[str, Callable[..., Any]] = {"operator.getitem": operator.getitem, "_operator.getitem": operator.getitem}
"""The Python callables a rebuilt graph may call: taking one output of an op that returns several."""

METHODS = frozenset(
    "view reshape flatten permute transpose contiguous unsqueeze squeeze size dim relu sigmoid tanh clamp "
    "add sub mul div mean sum float to detach clone".split()
)
"""Tensor methods a rebuilt graph's ``call_method`` node may name (run only on a tensor: ``check_cost``)."""


# --- observers ------------------------------------------------------------------------------------------

DTYPES = frozenset({"int8", "uint8", "int16", "int32", "float8_e4m3fn", "qint8", "quint8", "qint32", "float32"})
"""The dtypes an observer may name."""
QSCHEMES = frozenset(
    {
        "per_tensor_affine",
        "per_tensor_symmetric",
        "per_channel_affine",
        "per_channel_symmetric",
        "per_channel_affine_float_qparams",
    }
)


def _int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and low <= v <= high


def _positive_float(high: float) -> Callable[[Any], bool]:
    return lambda v: type(v) in (int, float) and 0 < v <= high and math.isfinite(v)


def _named(key: str, names: frozenset[str]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and set(v) == {key} and v[key] in names


SETTINGS: dict[str, Callable[[Any], bool]] = {
    "dtype": _named("torch_dtype", DTYPES),
    "qscheme": _named("qscheme", QSCHEMES),
    "quant_min": _int_in(-(2**31), 2**31 - 1),
    "quant_max": _int_in(-(2**31), 2**31 - 1),
    "ch_axis": _int_in(-8, 8),
    "averaging_constant": _positive_float(1.0),
    "bins": _int_in(1, 4096),
    "upsample_rate": _int_in(1, 256),
    "eps": _positive_float(1.0),
    "reduce_range": lambda v: type(v) is bool,
    "is_dynamic": lambda v: type(v) is bool,
    "scale": _positive_float(1e6),
    "zero_point": _int_in(-(2**31), 2**31 - 1),
}
"""The settings an observer (or a spec's observer constructor) may carry, as the recording writes them,
and the values each may have: a ``bins`` of 10**9 would make the replay allocate gigabytes for one
histogram. ``None`` is allowed for each (the class's default)."""

OBSERVER_MODULES = (
    "torchao.quantization.pt2e.observer",
    "torchao.quantization.pt2e.fake_quantize",
    "torch.ao.quantization.observer",
    "torch.ao.quantization.fake_quantize",
)
OBSERVERS = frozenset(
    f"{module}.{name}"
    for module in OBSERVER_MODULES
    for name in (
        "MinMaxObserver MovingAverageMinMaxObserver PerChannelMinMaxObserver MovingAveragePerChannelMinMaxObserver "
        "HistogramObserver PlaceholderObserver NoopObserver FixedQParamsObserver FakeQuantize "
        "FusedMovingAvgObsFakeQuantize FixedQParamsFakeQuantize AffineQuantizedMinMaxObserver"
    ).split()
)
"""Observer and fake-quant classes a recording may name (torchao's and torch.ao's, nothing else)."""


# --- budgets --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How much one recording may ask of the replay before it runs."""

    nodes: int = 2_000
    """Nodes of one rebuilt graph (the course's graphs have tens)."""
    total_nodes: int = 20_000
    """Nodes of every graph state in one exercise's recording."""
    events: int = 4_000
    """Calls recorded in one exercise."""
    tensor_elements: int = 2_000_000
    """Elements of every tensor written in one exercise's recording, together."""
    tensor_bytes: int = 512 * 1024 * 1024
    """Bytes of every output of one run of a rebuilt graph (the course's graphs need a few MB)."""
    flops: float = 2e10
    """Floating-point operations of one run of a rebuilt graph (the course's graphs need a few million)."""


BUDGET = Budget()


class Refused(Exception):
    """A recording asks for something outside the allow-list or over a budget; the message says what."""


def op_name(op: Any) -> str:
    """``aten.relu.default`` for an op overload."""
    return f"{op.namespace}.{op._opname}.{op._overloadname}"


# --- the whole recording, before anything runs ----------------------------------------------------------


def check_recording(recorded: Any) -> None:
    """Refuse a recording (one exercise's) that names a target, method or observer outside the lists,
    or is larger than ``BUDGET`` allows. Only reads the data; runs and imports nothing."""
    counts = {"nodes": 0, "events": 0, "elements": 0}

    def walk(value: Any, depth: int) -> None:
        if depth > 60:
            raise Refused("評分紀錄巢狀太深")
        if isinstance(value, list):
            for item in value:
                walk(item, depth + 1)
            return
        if not isinstance(value, dict):
            return
        if isinstance(value.get("nodes"), list):
            nodes = value["nodes"]
            if len(nodes) > BUDGET.nodes:
                raise Refused(f"一張圖有 {len(nodes)} 個 node，超過上限 {BUDGET.nodes}")
            counts["nodes"] += len(nodes)
            if counts["nodes"] > BUDGET.total_nodes:
                raise Refused(f"評分紀錄裡的 node 超過上限 {BUDGET.total_nodes}")
            for node in nodes:
                _check_node(node)
        if "tensor" in value and isinstance(value["tensor"], list):
            counts["elements"] += len(value["tensor"])
            if counts["elements"] > BUDGET.tensor_elements:
                raise Refused(f"評分紀錄裡的 tensor 元素超過上限 {BUDGET.tensor_elements}")
        if isinstance(value.get("new"), dict) and "class" in value["new"]:
            _check_observer(value["new"].get("class"), value["new"].get("settings"))
        if isinstance(value.get("observer"), dict) and "class" in value["observer"]:
            _check_observer(value["observer"].get("class"), value["observer"].get("kwargs"))
        for key, item in value.items():
            if key == "channels" and isinstance(item, dict):
                counts["events"] += sum(len(v) for v in item.values() if isinstance(v, list))
                if counts["events"] > BUDGET.events:
                    raise Refused(f"評分紀錄裡的呼叫超過上限 {BUDGET.events}")
            walk(item, depth + 1)

    walk(recorded, 0)


def as_written(python_name: str) -> str:
    """A Python function's name as a student writes it: ``torch._VariableFunctionsClass.clamp`` → ``torch.clamp``."""
    for inner in ("torch._VariableFunctionsClass.", "torch._C._VariableFunctions."):
        if python_name.startswith(inner):
            return "torch." + python_name[len(inner) :]
    return python_name


def aten_overload_for(python_name: str) -> str:
    """The ATen overload a student meant by a Python function on the graph (``torch.clamp`` →
    ``torch.ops.aten.clamp.default``), or how to find one when no allowed op has that name."""
    short = python_name.rsplit(".", 1)[-1].strip("_")
    for overload in ("default", "Tensor", "Scalar", "int", "dim"):
        if f"aten.{short}.{overload}" in OPS:
            return f"torch.ops.aten.{short}.{overload}"
    return "torch.ops.aten 裡對應的 op（例如 torch.ops.aten.relu.default；看原本的 node.target 怎麼寫）"


def _check_node(node: Any) -> None:
    if not isinstance(node, dict):
        return  # malformed: the replay says so on its own
    op, target = node.get("op"), node.get("target")
    if not isinstance(target, dict):
        return
    if op == "call_function":
        name = target.get("op") or target.get("packet") or target.get("py")
        known = OPS if "op" in target else PACKETS if "packet" in target else PYTHON
        if not (isinstance(name, str) and name in known):
            if "py" in target:  # a Python function where the graph holds ATen ops
                raise Refused(
                    f"圖上的 {as_written(str(name))[:60]} 是 Python 函式，不是 ATen op：export 出來的圖裡，node 的 target 是 "
                    f"ATen op 的 overload，你加的 node 也要用它，這裡該寫 {aten_overload_for(str(name))}"
                )
            raise Refused(f"圖上的 {str(name)[:60]} 不是課程允許的運算")
    elif op == "call_method" and target.get("name") not in METHODS:
        raise Refused(f"圖上的 tensor 方法 {str(target.get('name'))[:40]} 不是課程允許的運算")


def _check_observer(path: Any, settings: Any) -> None:
    if path not in OBSERVERS:
        name = str(path).rsplit(".", 1)[-1][:60]
        if "observer" not in name.lower() and "fakequant" not in name.lower():
            raise Refused(
                f"圖上多了一個不是 observer 的新模組 {name}：評分只接受 torchao 的 observer 與 fake-quant 模組。"
                "常見的原因是複製了整個圖（例如 copy.deepcopy(gm)）再回傳，練習要你直接修改傳進來的圖"
            )
        raise Refused(f"observer 必須是 torchao 的 observer 或 fake-quant 類別，看到 {str(path)[:80]}")
    if settings is None:
        return
    if not isinstance(settings, dict):
        raise Refused("observer 的設定格式不對")
    for name, value in settings.items():
        rule = SETTINGS.get(name)
        if rule is None or not (value is None or rule(value)):
            raise Refused(f"observer 的設定 {str(name)[:30]}={str(value)[:40]} 不在允許的範圍")


# --- one rebuilt graph, before it runs ------------------------------------------------------------------


def tensor_overload(op: Any) -> bool:
    """True when the op overload takes or returns a tensor (its schema says so): ``aten.add.Tensor`` and
    ``aten.arange.default`` are computations on tensors, ``aten.add.str`` or ``aten.mul.left_t`` are not."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return False
    types = [a.type for a in schema.arguments] + [r.type for r in schema.returns]
    return any(_holds_tensor(t) for t in types)


def _holds_tensor(kind: Any) -> bool:
    """``Tensor``, ``Tensor?``, ``Tensor[]``, ``Tensor?[]``: a schema type whose values are tensors."""
    if isinstance(kind, torch.TensorType):
        return True
    contained = getattr(kind, "containedTypes", None)
    return bool(contained) and any(_holds_tensor(t) for t in contained())


def _overload(op: Any, args: Any, kwargs: Any) -> Any:
    """The overload a call of ``op`` runs: ``op`` itself, or the one a packet picks for these arguments."""
    if not isinstance(op, torch._ops.OpOverloadPacket):
        return op
    name = torch._C._jit_resolve_packet(op._qualified_op_name, *args, **kwargs)
    return getattr(op, name)


SIZE_METHODS = frozenset("view reshape flatten permute transpose unsqueeze squeeze size".split())
"""Methods whose other arguments are sizes or dimensions: a tensor there makes the size depend on the data."""


def check_cost(gm: torch.fx.GraphModule, inputs: Sequence[Any] | None = None) -> None:
    """Refuse a rebuilt graph whose one run would exceed ``BUDGET`` (bytes of its outputs, flops), or whose
    cost cannot be known before it runs.

    The graph runs on fake tensors (shapes and dtypes only, nothing computed) shaped as the graph's
    inputs were when it was exported: ``inputs`` by position (what the placeholders held before the
    recording renamed or replaced them), else each placeholder's own. An input of unknown shape is
    refused. Every call is judged on the overload it runs: a packet (``torch.ops.aten.add``) resolves
    to one here, and only overloads on tensors pass (``tensor_overload``). A size that depends on the
    data is taken at its worst (a boolean mask selects every element) or refused (a tensor passed
    where the op takes a number or a size). Observer and other module calls are taken to return their
    input (observers do). A graph that fails on fake tensors for another reason fails the same way when
    it runs, at the same node, and is left to the case; but a packet the propagation did not reach is
    refused, since nothing said which overload it would run.
    """
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    known = list(inputs) if inputs is not None else [node.meta.get("val") for node in placeholders]
    examples = []
    for position, node in enumerate(placeholders):
        value = known[position] if position < len(known) else None
        if not isinstance(value, torch.Tensor):
            value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise Refused(
                f"圖的第 {position + 1} 個輸入 {node.name[:40]} 不是原本的圖有的輸入，評分無法事先知道它的形狀："
                "改圖時保留原本的輸入（placeholder），不要新增"
            )
        shape = [s if isinstance(s, int) else _hint(s) for s in value.shape]
        with mode:
            examples.append(torch.empty(shape, dtype=value.dtype))
    total = [0]
    reached: set[str] = set()

    class Sizes(torch.fx.Interpreter):
        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if isinstance(target, torch._ops.OpOverloadPacket | torch._ops.OpOverload):
                op = _overload(target, args, kwargs)
                if not tensor_overload(op):
                    raise Refused(f"圖上的 {op_name(op)[:60]} 不是對 tensor 的運算")
                _sizes_from_data(op, args, kwargs)
                if op is torch.ops.aten.index.Tensor:
                    args = (args[0], _worst_indices(args[1]), *args[2:])
            return super().call_function(target, args, kwargs)

        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            return args[0] if args else None

        def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
            if not (args and isinstance(args[0], torch.Tensor)):
                raise Refused(f"tensor 方法 {str(target)[:40]} 用在不是 tensor 的東西上")
            if target in SIZE_METHODS and _tensors_in((args[1:], kwargs)):
                raise Refused(f"tensor 方法 {str(target)[:40]} 的大小由另一個 tensor 的值決定，評分無法事先估算")
            return super().call_method(target, args, kwargs)

        def run_node(self, n: torch.fx.Node) -> Any:
            reached.add(n.name)
            result = super().run_node(n)
            for leaf in torch.utils._pytree.tree_leaves(result):
                if isinstance(leaf, torch.Tensor):
                    total[0] += leaf.numel() * leaf.element_size()
            if total[0] > BUDGET.tensor_bytes:
                raise Refused(
                    f"這張圖執行一次要 {total[0] // 2**20} MB 以上，超過上限 {BUDGET.tensor_bytes // 2**20} MB"
                )
            return result

    try:
        with mode, FlopCounterMode(display=False) as counter:
            sizes = Sizes(gm)
            sizes.extra_traceback = False  # torch's "While executing ..." in a refusal is not for the student
            sizes.run(*examples)
    except Refused:
        raise
    except (DynamicOutputShapeException, DataDependentOutputException) as exc:
        raise Refused(f"圖上有輸出大小由資料決定的運算（{str(exc)[:60]}），評分無法事先估算") from None
    except Exception:  # fails on fake tensors as it would when it runs: the case reports it
        unresolved = [
            n.name
            for n in gm.graph.nodes
            if n.name not in reached and isinstance(n.target, torch._ops.OpOverloadPacket)
        ]
        if unresolved:
            raise Refused(
                f"無法事先確認圖上的 {unresolved[0][:40]} 會執行哪一個 overload："
                "新 node 的 target 請寫完整的 overload（例如 torch.ops.aten.relu.default）"
            ) from None
        return
    flops = counter.get_total_flops()
    if flops > BUDGET.flops:
        raise Refused(f"這張圖執行一次要 {flops:.2g} 次浮點運算，超過上限 {BUDGET.flops:.2g}")


def _tensors_in(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in torch.utils._pytree.tree_leaves(value))


def _sizes_from_data(op: Any, args: Any, kwargs: Any) -> None:
    """Refuse a tensor passed where ``op`` takes a number, a size or a dimension: what it would run
    depends on the tensor's values, which fake tensors do not hold (``arange(x.max())``)."""
    schema = op._schema
    if not _dispatchable(schema, args, kwargs):
        return  # the call fails when it runs, whatever the values: the case reports it as the student's error
    for position, argument in enumerate(schema.arguments):
        if _holds_tensor(argument.type):
            continue
        if argument.kwarg_only or position >= len(args):
            value = kwargs.get(argument.name)
        else:
            value = args[position]
        if _tensors_in(value):
            raise Refused(
                f"圖上的 {op_name(op)[:60]} 的引數 {argument.name[:30]} 是一個 tensor 的值，"
                "它決定的大小評分無法事先估算"
            )


def _dispatchable(schema: Any, args: Any, kwargs: Any) -> bool:
    """Whether every argument ``schema`` types as a plain ``Tensor`` gets one: ``hardtanh(0.0, 6.0, x)`` does not
    (its ``self`` is a number), so it fails on any data and its tensor in a number's place sizes nothing."""
    for position, argument in enumerate(schema.arguments):
        if not isinstance(argument.type, torch.TensorType):
            continue
        if argument.kwarg_only or position >= len(args):
            if argument.name not in kwargs:
                continue
            value = kwargs[argument.name]
        else:
            value = args[position]
        if not isinstance(value, torch.Tensor):
            return False
    return True


def _worst_indices(indices: Any) -> Any:
    """``aten.index.Tensor``'s indices with each boolean mask replaced by the indices it selects at most
    (every element): the output is then as large as it can be for any values of the mask."""
    if not isinstance(indices, list | tuple):
        return indices
    worst: list[Any] = []
    for index in indices:
        if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
            every = torch.zeros(index.numel(), dtype=torch.long)
            worst += [every] * max(index.dim(), 1)
        else:
            worst.append(index)
    return worst


def _hint(size: Any) -> int:
    hint = getattr(getattr(size, "node", None), "hint", None)
    return int(hint) if isinstance(hint, int) else 8
