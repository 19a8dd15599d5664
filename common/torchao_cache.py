"""Pure computations inside torchao, remembered for the whole process: they cost seconds and repeat.

Two of torchao's internal functions are the same computation again and again in this course:

- **Pattern graphs.** torchao traces small pattern functions with ``torch.export`` each time a model goes
  through ``prepare_qat_pt2e`` (the conv + batch norm fusion: 12 traces), ``convert_pt2e`` of a QAT model
  and ``move_exported_model_to_eval`` / ``_train`` (dropout and batch norm: 2 to 4 each), about half a
  second per trace. A pattern's graph depends on the pattern's code, what its closure holds and the
  inputs' shapes and dtypes, never on the inputs' values (they are ``torch.randn`` placeholders; a traced
  graph cannot branch on them). Every caller gets its own deep copy.
- **HistogramObserver's range search.** ``convert_pt2e`` asks every ``HistogramObserver`` (the activation
  observer of XNNPACKQuantizer) for its range, a search over its 2,048 bins in Python that takes tens of
  milliseconds; a chapter, the preview and the grader convert the same calibrated models many times. The
  result depends only on the histogram, its range and the bin counts: it is remembered by their bytes,
  and handed out as new tensors. An observer of a subclass, or one whose search helpers were replaced,
  always searches.

``remember()`` (called when ``common.pt2e`` is imported) routes both through these memories; it changes no
result: ``tests/test_common.py`` compares each with torchao's own.
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

from common.export_cache import PLAIN, Unkeyable, value_key


def remember() -> None:
    """Route torchao's pattern traces and histogram searches through the memories (once per process)."""
    remember_torchao_patterns()
    remember_histogram_searches()


# --- torchao's pattern graphs ------------------------------------------------------------------------

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
    if isinstance(value, PLAIN):
        return (type(value), value)
    if callable(value) and not isinstance(value, torch.nn.Module | torch.Tensor):
        return _callable_key(value)
    raise Unkeyable(type(value).__name__)


def _shape_key(value: Any) -> Hashable:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device.type, value.requires_grad)
    if isinstance(value, tuple | list):
        return (type(value), tuple(_shape_key(v) for v in value))
    return value_key(value)


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


# --- HistogramObserver's range search ------------------------------------------------------------------

_searches: OrderedDict[Hashable, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
SEARCH_CAPACITY = 4096
"""Searches kept at most (two scalars each)."""
_SEARCH_HELPERS = ("_non_linear_param_search", "_compute_quantization_error", "_get_norm")


def histogram_key(observer: Any, base: type) -> Hashable | None:
    """What ``base._non_linear_param_search`` reads of ``observer``, or ``None`` when it cannot be trusted
    to be the same computation (a subclass, a replaced helper, a tensor off the CPU)."""
    if type(observer) is not base or any(name in vars(observer) for name in _SEARCH_HELPERS):
        return None
    tensors = (observer.histogram, observer.min_val, observer.max_val)
    if not all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in tensors):
        return None
    if type(observer.bins) is not int or type(observer.dst_nbins) is not int:
        return None
    try:  # by their bytes; a quantized tensor or one off the CPU is Unkeyable
        return (observer.bins, observer.dst_nbins, *(value_key(t) for t in tensors))
    except Unkeyable:
        return None


def remembering_searches(search: Callable[[Any], Any], base: type) -> Callable[[Any], Any]:
    """``search`` (``HistogramObserver._non_linear_param_search``), remembering what it gives."""

    def remembered(observer: Any) -> tuple[torch.Tensor, torch.Tensor]:
        key = histogram_key(observer, base)
        if key is None:
            return search(observer)
        if key in _searches:
            _searches.move_to_end(key)
            low, high = _searches[key]
            return low.clone(), high.clone()
        low, high = search(observer)
        _searches[key] = (low.detach().clone(), high.detach().clone())
        while len(_searches) > SEARCH_CAPACITY:
            _searches.popitem(last=False)
        return low, high

    remembered.__wrapped__ = search  # type: ignore[attr-defined]
    return remembered


def remember_histogram_searches() -> None:
    """Route torchao's ``HistogramObserver._non_linear_param_search`` through ``remembering_searches`` (once)."""
    import importlib

    observers = importlib.import_module("torchao.quantization.pt2e.observer")
    base = observers.HistogramObserver
    search = base.__dict__["_non_linear_param_search"]
    if hasattr(search, "__wrapped__"):
        return
    base._non_linear_param_search = remembering_searches(search, base)
