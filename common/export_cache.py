"""Exported graphs remembered while checking exercises, so that one model is traced once.

Checking an exercise (the preview, the grader's recording and replay) builds the same small
models from the same seed again and again, and ``torch.export`` is most of that time. Inside
``remembered_exports()``, ``common.pt2e.export_module`` looks up a graph by everything the
trace depends on and hands out a deep copy of it; outside, it always traces.

The key is conservative: the module's class and every submodule's class and ``forward``
(strong references, so a redefined class is a new key), the training flags, every
parameter's and buffer's bytes, the plain attributes of every submodule, the inputs'
bytes, shapes, dtypes and ``requires_grad``, ``dynamic_shapes`` and whether grad is on.
A module with hooks, an instance-level ``forward`` or an attribute of any other kind is
never remembered.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

CAPACITY = 256
"""Graphs kept at most (the least recently used one goes first); course models are small."""

_PLAIN = (type(None), bool, int, float, str, torch.dtype, torch.device, torch.Size)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks")


class Unkeyable(Exception):
    """The model or its inputs hold something the key cannot capture: trace it every time."""


_graphs: OrderedDict[Hashable, GraphModule] = OrderedDict()
_depth = 0


@contextlib.contextmanager
def remembered_exports() -> Iterator[None]:
    """Let ``export_module`` reuse graphs inside this block (nested blocks are fine)."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def active() -> bool:
    return _depth > 0


def size() -> int:
    """Graphs remembered now."""
    return len(_graphs)


def _tensor_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    if tensor.is_quantized or tensor.layout != torch.strided or tensor.device.type != "cpu":
        raise Unkeyable(f"tensor of layout {tensor.layout}")
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    digest = hashlib.blake2b(data.numpy().tobytes(), digest_size=16).hexdigest()
    return ("tensor", tuple(tensor.shape), tensor.dtype, tensor.requires_grad, digest)


def _value_key(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return _tensor_key(value)
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, tuple | list):
        return (type(value), tuple(_value_key(v) for v in value))
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return (dict, tuple((k, _value_key(v)) for k, v in sorted(value.items())))
    raise Unkeyable(type(value).__name__)


def _module_key(model: torch.nn.Module) -> tuple[Any, ...]:
    parts: list[Any] = []
    for name, module in model.named_modules(remove_duplicate=False):
        if any(getattr(module, hooks, None) for hooks in _HOOKS) or "forward" in vars(module):
            raise Unkeyable(f"hooks or an instance forward on {name or 'the model'}")
        attributes = tuple(
            (key, _value_key(value))
            for key, value in sorted(vars(module).items())
            if not key.startswith("_") and key != "training"
        )
        tensors = tuple(
            (key, _tensor_key(t)) for key, t in [*module._parameters.items(), *module._buffers.items()] if t is not None
        )
        parts.append((name, type(module), type(module).forward, module.training, attributes, tensors))
    return tuple(parts)


def key_of(model: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any) -> Hashable:
    """The key of one export, or ``Unkeyable``."""
    return (
        _module_key(model),
        _value_key(tuple(example_inputs)),
        repr(dynamic_shapes),
        torch.is_grad_enabled(),
    )


def export_through(
    trace: Callable[[], GraphModule], model: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any
) -> GraphModule:
    """``trace()``, or a copy of the graph it gave for the same key earlier (only when ``active()``)."""
    if not active():
        return trace()
    try:
        key = key_of(model, example_inputs, dynamic_shapes)
    except Unkeyable:
        return trace()
    if key in _graphs:
        _graphs.move_to_end(key)
        return copy.deepcopy(_graphs[key])
    graph = trace()
    _graphs[key] = copy.deepcopy(graph)
    while len(_graphs) > CAPACITY:
        _graphs.popitem(last=False)
    return graph


# --- torchao's pattern graphs ------------------------------------------------------------------------
#
# torchao traces small pattern functions with ``torch.export`` each time a model goes through
# ``prepare_qat_pt2e`` (the conv + batch norm fusion: 12 traces), ``convert_pt2e`` of a QAT model and
# ``move_exported_model_to_eval`` / ``_train`` (dropout and batch norm: 2 to 4 each), about half a
# second per trace. A pattern's graph depends on the pattern's code, what its closure holds and the
# inputs' shapes and dtypes, never on the inputs' values (they are ``torch.randn`` placeholders;
# a traced graph cannot branch on them). Those graphs are remembered for the whole process, and every
# caller gets its own deep copy.

_patterns: OrderedDict[Hashable, GraphModule] = OrderedDict()
PATTERN_CAPACITY = 512
"""Pattern graphs kept at most; torchao traces fewer than 200 different ones."""


def _callable_key(function: Any) -> Hashable:
    """A pattern function by its code and what its closure and defaults hold (functions by identity)."""
    if isinstance(function, torch.nn.Module):
        inner = getattr(function, "fn", None)  # torchao's WrapperModule(fn): nothing but the function
        public = {k for k in vars(function) if not k.startswith("_")}
        stateless = not (function._parameters or function._buffers or function._modules)
        if type(function).__name__ != "WrapperModule" or inner is None or public - {"fn", "training"} or not stateless:
            raise Unkeyable(type(function).__name__)
        return ("wrapper", type(function), function.training, _callable_key(inner))
    if getattr(function, "__self__", None) is not None and getattr(function, "__code__", None) is not None:
        raise Unkeyable("a bound method")  # what it traces may depend on its object
    code = getattr(function, "__code__", None)
    if code is None:
        return ("object", function)  # a builtin or an op overload: hashable, compared by identity
    cells = tuple(_closure_value_key(cell.cell_contents) for cell in function.__closure__ or ())
    defaults = tuple(_closure_value_key(v) for v in function.__defaults__ or ())
    kwdefaults = tuple((k, _closure_value_key(v)) for k, v in sorted((function.__kwdefaults__ or {}).items()))
    return ("function", code, cells, defaults, kwdefaults)


def _closure_value_key(value: Any) -> Hashable:
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if callable(value) and not isinstance(value, torch.nn.Module | torch.Tensor):
        return _callable_key(value) if getattr(value, "__code__", None) is not None else ("object", value)
    raise Unkeyable(type(value).__name__)


def _shape_key(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device.type, value.requires_grad)
    if isinstance(value, tuple | list):
        return (type(value), tuple(_shape_key(v) for v in value))
    return _value_key(value)


def pattern_key(pattern: Any, example_inputs: Sequence[Any], is_cuda: bool, kwargs: dict[str, Any]) -> Hashable:
    """The key of one pattern trace, or ``Unkeyable`` (then it is traced every time)."""
    return (
        _callable_key(pattern),
        _shape_key(tuple(example_inputs)),
        tuple((name, _shape_key(value)) for name, value in sorted(kwargs.items())),
        is_cuda,
        torch.is_grad_enabled(),
    )


def remembering_patterns(trace_pattern: Callable[..., GraphModule]) -> Callable[..., GraphModule]:
    """``trace_pattern`` (torchao's ``_get_aten_graph_module_for_pattern``), remembering what it gives."""

    def remembered(pattern: Any, example_inputs: tuple[Any, ...], is_cuda: bool = False, **kwargs: Any) -> GraphModule:
        try:
            key = pattern_key(pattern, example_inputs, is_cuda, kwargs)
        except Unkeyable:
            return trace_pattern(pattern, example_inputs, is_cuda, **kwargs)
        if key in _patterns:
            _patterns.move_to_end(key)
            return copy.deepcopy(_patterns[key])
        graph = trace_pattern(pattern, example_inputs, is_cuda, **kwargs)
        _patterns[key] = copy.deepcopy(graph)
        while len(_patterns) > PATTERN_CAPACITY:
            _patterns.popitem(last=False)
        return graph

    remembered.__wrapped__ = trace_pattern  # type: ignore[attr-defined]
    return remembered


def remember_torchao_patterns() -> None:
    """Route torchao's pattern traces through ``remembering_patterns`` (once per process)."""
    import importlib

    utils = importlib.import_module("torchao.quantization.pt2e.utils")
    original = utils._get_aten_graph_module_for_pattern
    if hasattr(original, "__wrapped__"):
        return
    remembered = remembering_patterns(original)
    utils._get_aten_graph_module_for_pattern = remembered  # what a module imported later takes
    for name, module in list(sys.modules.items()):  # the ones that took the name already
        if name.startswith("torchao.") and getattr(module, "_get_aten_graph_module_for_pattern", None) is original:
            module._get_aten_graph_module_for_pattern = remembered
