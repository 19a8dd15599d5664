"""Exported graphs remembered while checking exercises, so that one model is traced once.

Checking an exercise (the preview, the grader's recording and replay) builds the same small
models from the same seed again and again, and ``torch.export`` is most of that time. Inside
``remembered_exports()``, ``common.pt2e.export_module`` looks up a graph by everything the
trace depends on and hands out a deep copy of it; outside, it always traces.

The key is conservative: the module's class and every submodule's class and ``forward``
(strong references, so a redefined class is a new key), the training flags, every
parameter's and buffer's bytes, the plain attributes of every submodule, the inputs'
bytes, shapes, dtypes and ``requires_grad``, ``dynamic_shapes`` and whether grad is on.
A frozen dataclass (a model's configuration, ``TinyLMConfig``) is keyed by its class and
fields. A module with hooks, an instance-level ``forward`` or an attribute of any other kind is
never remembered.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

CAPACITY = 256
"""Graphs kept at most (the least recently used one goes first); course models are small."""

PLAIN = (type(None), bool, int, float, str, torch.dtype, torch.device, torch.Size)
"""Values a key holds as they are (compared by value)."""
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


def value_key(value: Any) -> Hashable:
    """A plain value, a tensor (by its bytes), or a list / tuple / str-keyed dict of them, as a key; else ``Unkeyable``."""
    if isinstance(value, torch.Tensor):
        return _tensor_key(value)
    if isinstance(value, PLAIN):
        return (type(value), value)
    if isinstance(value, tuple | list):
        return (type(value), tuple(value_key(v) for v in value))
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return (dict, tuple((k, value_key(v)) for k, v in sorted(value.items())))
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and type(value).__dataclass_params__.frozen:
        # a frozen configuration (``TinyLMConfig``): its class and every field, by value
        fields = tuple((f.name, value_key(getattr(value, f.name))) for f in dataclasses.fields(value))
        return (type(value), fields)
    raise Unkeyable(type(value).__name__)


def _module_key(model: torch.nn.Module) -> tuple[Any, ...]:
    parts: list[Any] = []
    for name, module in model.named_modules(remove_duplicate=False):
        if any(getattr(module, hooks, None) for hooks in _HOOKS) or "forward" in vars(module):
            raise Unkeyable(f"hooks or an instance forward on {name or 'the model'}")
        attributes = tuple(
            (key, value_key(value))
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
        value_key(tuple(example_inputs)),
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
