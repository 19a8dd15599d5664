"""Pure computations inside torchao, remembered for the whole process (or skipped where they cannot
matter): they cost seconds and repeat.

Three of torchao's internal computations are the same again and again in this course:

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

- **Conv + batch norm patterns of convs the graph does not hold.** ``prepare_qat_pt2e`` and ``convert_pt2e``
  of a QAT model look for conv + batch norm patterns of four convs (``conv1d``, ``conv2d``,
  ``conv_transpose1d``, ``conv_transpose2d``), 12 variants each, two traces per variant at convert: 126
  traces, 18 s in a fresh process, for a model whose convs are all ``conv2d``. A pattern of a conv whose op
  is nowhere in the graph cannot match, so while torchao looks for one, its pattern is an unmatchable
  stand-in instead of a trace. Everything else runs as before (the same random inputs drawn, the same
  graph passes), so the graphs and the global RNG end up as with torchao alone.

``remember()`` (called when ``common.pt2e`` is imported) routes all three through here; it changes no
result: ``tests/test_common.py`` compares each with torchao's own.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

from common.export_cache import PLAIN, Unkeyable, value_key


def remember() -> None:
    """Route torchao's pattern traces and histogram searches through the memories (once per process)."""
    remember_torchao_patterns()
    skip_absent_conv_patterns()
    remember_histogram_searches()


# --- torchao's pattern graphs ------------------------------------------------------------------------

_PATTERN_TRACE = "_get_aten_graph_module_for_pattern"
"""torchao's function that traces a pattern (in ``torchao.quantization.pt2e.utils``, imported by name elsewhere)."""
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
        absent = _absent_conv.get()
        if absent is not None:  # a pattern of a conv the graph does not hold: it cannot match
            return unmatchable(absent)
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
    original = getattr(utils, _PATTERN_TRACE)
    if hasattr(original, "__wrapped__"):
        return
    remembered = remembering_patterns(original)
    setattr(utils, _PATTERN_TRACE, remembered)  # what a module imported later takes
    for name, module in list(sys.modules.items()):  # the ones that took the name already
        if name.startswith("torchao.") and getattr(module, _PATTERN_TRACE, None) is original:
            setattr(module, _PATTERN_TRACE, remembered)


# --- conv + batch norm patterns of a conv the graph does not hold --------------------------------------

_absent_conv: contextvars.ContextVar[Any] = contextvars.ContextVar("absent_conv", default=None)
"""The aten op of the conv whose patterns torchao is looking for now, when the graph holds none of it."""
_QAT_HELPERS = ("_fuse_conv_bn_qat_helper", "_fold_conv_bn_qat_helper")


def conv_targets() -> dict[Any, Any]:
    """torchao's conv functions → the aten op their patterns trace to."""
    import torch.nn.functional as F

    aten = torch.ops.aten
    return {
        F.conv1d: aten.conv1d.default,
        F.conv2d: aten.conv2d.default,
        F.conv_transpose1d: aten.conv_transpose1d.default,
        F.conv_transpose2d: aten.conv_transpose2d.input,
    }


def unmatchable(target: Any) -> GraphModule:
    """A pattern graph that matches no graph without ``target``: one call of it on one input."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(target, (x,)))
    return GraphModule(torch.nn.Module(), graph)


def skipping_absent_convs(helper: Callable[..., GraphModule]) -> Callable[..., GraphModule]:
    """``helper`` (torchao's ``_fuse_conv_bn_qat_helper`` or ``_fold_conv_bn_qat_helper``), with unmatchable
    stand-ins for the patterns it traces when the graph holds no node of its conv."""
    targets = conv_targets()

    def for_present_convs(m: GraphModule, conv_fn: Callable, example_inputs: tuple[Any, ...], is_cuda: bool) -> Any:
        target = targets.get(conv_fn)
        present = target is None or any(n.op == "call_function" and n.target == target for n in m.graph.nodes)
        token = _absent_conv.set(None if present else target)
        try:
            return helper(m, conv_fn, example_inputs, is_cuda)
        finally:
            _absent_conv.reset(token)

    for_present_convs.__wrapped__ = helper  # type: ignore[attr-defined]
    return for_present_convs


def skip_absent_conv_patterns() -> None:
    """Route torchao's two QAT conv + batch norm helpers through ``skipping_absent_convs`` (once per process)."""
    import importlib

    qat_utils = importlib.import_module("torchao.quantization.pt2e.qat_utils")
    for name in _QAT_HELPERS:
        helper = getattr(qat_utils, name)
        if not hasattr(helper, "__wrapped__"):
            setattr(qat_utils, name, skipping_absent_convs(helper))


@contextlib.contextmanager
def torchao_alone() -> Iterator[None]:
    """Inside this block, torchao traces every pattern itself, all convs' included: the pattern memory and
    the skipping of absent convs are undone in every torchao module that holds them, and put back after
    (what ``tests/test_common.py`` and ``bench/qat.py`` compare the course with)."""
    import importlib

    utils = importlib.import_module("torchao.quantization.pt2e.utils")
    qat_utils = importlib.import_module("torchao.quantization.pt2e.qat_utils")
    routed = getattr(utils, _PATTERN_TRACE)
    undone = [
        (module, _PATTERN_TRACE, routed)
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("torchao.") and vars(module).get(_PATTERN_TRACE) is routed
    ]
    undone += [(qat_utils, name, getattr(qat_utils, name)) for name in _QAT_HELPERS]
    for module, name, value in undone:
        setattr(module, name, getattr(value, "__wrapped__", value))
    try:
        yield
    finally:
        for module, name, value in undone:
            setattr(module, name, value)


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
