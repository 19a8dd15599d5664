"""Recording a student's answers inside the sandbox: what each call of their code produced.

A hidden case runs the student's definitions on a hidden model. Here it runs with a
*recording namespace*: every call of a student function, class or method runs for real,
and what it produced is written down as plain data, call by call:

- the value it returned (plain data, tensors, fx Nodes and GraphModules by reference,
  quantization specs as data);
- the exception it raised (type name and a short message);
- for every GraphModule the call could reach through its arguments, the state it left:
  the quantization annotations on every node, and, when the call changed the graph, the
  nodes themselves (op, target, arguments), the observer modules it added, and whether
  the code was recompiled; and where it wrote anything else into the graph (a node's
  ``meta``, an attribute of the GraphModule), by name only;
- for a derived spec, what its ``derive_qparams_fn`` returned each time torchao called it.

Nothing else leaves the sandbox. The grader replays these recordings on its own copy of the
hidden models (``autograder.sandboxed.replay``) and derives all the evidence there, so a submission
that patches anything in this process can only change its own answers.
"""

from __future__ import annotations

import collections
import math
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from selfcheck.casekit import Exercise, collect
from selfcheck.evidence import ANNOTATION_KEY, TamperingSuspected, encode_spec, safe_text

MAX_EVENTS = 2_000
MAX_TENSOR_ELEMENTS = 200_000
MAX_DEPTH = 12
ALLOWED_CONTAINERS = (list, tuple, dict)
EXACT_DICTS = (dict, collections.Counter, collections.defaultdict, collections.OrderedDict)


class Unrecordable(Exception):
    """A value that cannot be written down as plain data."""


# --- values ---------------------------------------------------------------------------------------


def target_text(target: Any) -> dict[str, str]:
    """A call target as data: an op overload, an op packet, or a Python callable by module path."""
    from torch._ops import OpOverload, OpOverloadPacket

    if isinstance(target, OpOverload):
        return {"op": f"{target.namespace}.{target._opname}.{target._overloadname}"}
    if isinstance(target, OpOverloadPacket):
        return {"packet": str(target._qualified_op_name).replace("::", ".")}
    if isinstance(target, str):
        return {"name": target}
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or ""
    if module == "torch._C._VariableFunctions" or (module == "torch" and not name.startswith("_")):
        module = "torch"
    return {"py": f"{module}.{name}"}


def observer_state(module: Any) -> dict[str, Any]:
    """An observer module as data: its class and the settings a new one needs."""
    state: dict[str, Any] = {"class": f"{type(module).__module__}.{type(module).__qualname__}", "settings": {}}
    for key in ("dtype", "qscheme", "quant_min", "quant_max", "ch_axis", "averaging_constant", "bins", "is_dynamic"):
        if key in getattr(module, "__dict__", {}) or hasattr(type(module), key):
            try:
                value = getattr(module, key)
            except Exception:
                continue
            state["settings"][key] = encode(value, None, 1)
    eps = getattr(module, "eps", None)
    if isinstance(eps, torch.Tensor) and eps.numel() == 1:
        state["settings"]["eps"] = float(eps)
    return state


def reachable_graphs(value: Any, depth: int = 0) -> list[GraphModule]:
    """GraphModules a call can reach through ``value``, in a fixed traversal order (no duplicates)."""
    if depth > 3:
        return []
    found: list[GraphModule] = []
    kind = type(value)
    if isinstance(value, GraphModule):
        found.append(value)
    elif kind is Node:
        owner = value.graph.owning_module
        if isinstance(owner, GraphModule):
            found.append(owner)
    elif kind is Graph:
        owner = value.owning_module
        if isinstance(owner, GraphModule):
            found.append(owner)
    elif kind in (list, tuple):
        for item in value[:64]:
            found += reachable_graphs(item, depth + 1)
    elif kind is dict:
        for key, item in list(value.items())[:64]:
            found += reachable_graphs(key, depth + 1) + reachable_graphs(item, depth + 1)
    unique: list[GraphModule] = []
    for gm in found:
        if all(gm is not u for u in unique):
            unique.append(gm)
    return unique


class Recorder:
    """Wraps a student's namespace; every call through it is recorded on a channel."""

    def __init__(self) -> None:
        self.channels: dict[str, list[dict[str, Any]]] = {}
        self.kinds: dict[str, str] = {}
        self.events = 0
        self.graphs: dict[int, int] = {}  # id(GraphModule) -> number, in order of first appearance
        self.modules: list[GraphModule] = []
        self.derive_fns: dict[int, int] = {}
        self.wrappers: set[int] = set()
        self.keep: list[Any] = []  # keeps wrapped functions alive, so their ids stay theirs
        self.instances = 0
        self._annotations_before: dict[int, Any] = {}
        self._writes_before: dict[int, Any] = {}

    # -- bookkeeping --------------------------------------------------------------------------

    def _event(self, channel: str, event: dict[str, Any]) -> None:
        self.events += 1
        if self.events > MAX_EVENTS:
            raise Unrecordable("呼叫次數太多")
        self.channels.setdefault(channel, []).append(event)

    def graph_number(self, gm: GraphModule) -> int:
        if id(gm) not in self.graphs:
            self.graphs[id(gm)] = len(self.graphs)
            self.modules.append(gm)
        return self.graphs[id(gm)]

    def reachable_graphs(self, value: Any) -> list[GraphModule]:
        return reachable_graphs(value)

    # -- wrapping -----------------------------------------------------------------------------

    def namespace(self, namespace: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        wrapped: dict[str, Any] = {}
        for name in names:
            value = namespace[name]
            if isinstance(value, type):
                self.kinds[name] = "class"
                wrapped[name] = self.wrap_class(name, value)
            else:
                self.kinds[name] = "function"
                wrapped[name] = self.wrap_callable(name, value)
        return wrapped

    def wrap_class(self, name: str, cls: type) -> Callable[..., Any]:
        def construct(*args: Any, **kwargs: Any) -> Any:
            number = self.instances
            self.instances += 1
            self.call(name, cls, args, kwargs, returns_instance=True)
            instance = self._last_instance
            return RecordedInstance(self, f"{name}#{number}", instance)

        return construct

    def wrap_callable(self, channel: str, fn: Any) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(channel, fn, args, kwargs)

        return call

    _last_instance: Any = None

    def call(self, channel: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], **how: Any) -> Any:
        """Call ``fn`` for real; record what it returned or raised and what it did to the graphs it could reach."""
        graphs = self.reachable_graphs((args, kwargs))
        for gm in graphs:
            self.graph_number(gm)
        before = {id(gm): structure_key(gm) for gm in graphs}
        self._annotations_before = {id(gm): self.annotations(gm) for gm in graphs}
        self._writes_before = {id(gm): write_key(gm) for gm in graphs}
        modules_before = {id(gm): dict(gm.named_modules(remove_duplicate=False)) for gm in graphs}
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self._event(
                channel,
                {
                    "raise": exception_record(exc),
                    "graphs": self.graph_states(graphs, before, modules_before, args, kwargs),
                },
            )
            raise
        if how.get("returns_instance"):
            self._last_instance = result
            self._event(channel, {"instance": True, "graphs": {}})
            return result
        graphs_after = graphs + [g for g in self.reachable_graphs(result) if all(g is not h for h in graphs)]
        for gm in graphs_after:
            self.graph_number(gm)
        try:
            encoded = encode(result, self)
        except Unrecordable as exc:
            encoded = {"unrecordable": safe_text(exc, 200)}
        except TamperingSuspected as exc:
            encoded = {"forged": safe_text(exc, 200)}
        self._event(
            channel,
            {"return": encoded, "graphs": self.graph_states(graphs_after, before, modules_before, args, kwargs)},
        )
        return result

    # -- graph states -------------------------------------------------------------------------

    def graph_states(
        self,
        graphs: list[GraphModule],
        before: dict[int, Any],
        modules_before: dict[int, dict[str, Any]],
        args: Any,
        kwargs: Any,
    ) -> dict[str, Any]:
        states: dict[str, Any] = {}
        for gm in graphs:
            state: dict[str, Any] = {}
            annotations = self.annotations(gm)
            if annotations != self._annotations_before.get(id(gm)):
                state["annotations"] = annotations
            if before.get(id(gm)) != structure_key(gm):
                state["nodes"] = [node_record(n) for n in gm.graph.nodes]
                state["stale"] = _is_stale(gm)
                state["modules"] = self.new_modules(gm, modules_before.get(id(gm), {}), args, kwargs)
            writes = written(self._writes_before.get(id(gm), {}), write_key(gm))
            if writes:
                state["writes"] = writes
            states[str(self.graph_number(gm))] = state
        return states

    def new_modules(self, gm: GraphModule, before: dict[str, Any], args: Any, kwargs: Any) -> dict[str, Any]:
        """Submodules that call_module nodes use and that were not there before the call."""
        out: dict[str, Any] = {}
        seen: dict[int, str] = {}
        for node in gm.graph.nodes:
            if node.op != "call_module" or not isinstance(node.target, str) or node.target in out:
                continue
            try:
                module = gm.get_submodule(node.target)
            except AttributeError:
                out[node.target] = {"missing": True}
                continue
            if before.get(node.target) is module:
                continue
            if id(module) in seen:
                out[node.target] = {"same_as": seen[id(module)]}
                continue
            seen[id(module)] = node.target
            where = _find_in(module, (args, kwargs))
            out[node.target] = {"argument": where} if where is not None else {"new": observer_state(module)}
        return out

    def annotations(self, gm: GraphModule) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for node in gm.graph.nodes:
            if ANNOTATION_KEY in node.meta:
                out[node.name] = self.annotation(node.meta[ANNOTATION_KEY])
        return out

    def annotation(self, annotation: Any) -> Any:
        from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

        if annotation is None:
            return None
        if type(annotation) is not QuantizationAnnotation:
            return {"unsupported": type(annotation).__name__}
        mapping = annotation.input_qspec_map
        inputs = []
        if isinstance(mapping, dict):
            for source, spec in list(mapping.items())[:256]:
                inputs.append([_node_ref(source), self.spec(spec)])
        else:
            inputs = [["?", {"unsupported": type(mapping).__name__}]]
        return {
            "inputs": inputs,
            "output": self.spec(annotation.output_qspec),
            "annotated": encode(annotation._annotated, None, 1),
            "implicit_sharing": encode(annotation.allow_implicit_sharing, None, 1),
        }

    def spec(self, spec: Any) -> Any:
        """A spec the student's code made, by ``selfcheck.evidence.encode_spec`` (values by ``encode``); a derived
        spec's function is wrapped so that its calls at convert time are recorded, and numbered."""
        return encode_spec(spec, scalar=lambda value: encode(value, None, 1), derive_fn=self.derive_number)

    def derive_number(self, spec: Any) -> int:
        """The number of a derived spec's ``derive_qparams_fn``; the first time, the spec gets a wrapper of it
        that records its calls (torchao calls it at convert time)."""
        fn = spec.derive_qparams_fn
        if id(fn) not in self.derive_fns:
            self.derive_fns[id(fn)] = len(self.derive_fns)
        number = self.derive_fns[id(fn)]
        if id(fn) not in self.wrappers:
            recorded = self.wrap_callable(f"derive#{number}", fn)
            self.keep.append(recorded)
            self.wrappers.add(id(recorded))
            self.derive_fns[id(recorded)] = number
            object.__setattr__(spec, "derive_qparams_fn", recorded)
        return number


class RecordedInstance:
    """An instance of a student's class whose method calls are recorded.

    It is also a torchao ``Quantizer``: prepare_pt2e calls ``transform_for_annotation``,
    ``annotate`` and ``validate`` on it, and those calls are recorded like any other.
    (``prepare_obs_or_fq_callback`` stays the base class's no-op on both sides.)
    """

    def __init__(self, recorder: Recorder, channel: str, instance: Any) -> None:
        object.__setattr__(self, "_recorder", recorder)
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_instance", instance)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        recorder, channel, instance = self._recorder, self._channel, self._instance
        method = getattr(instance, name)
        if not callable(method):
            raise Unrecordable(f"只能呼叫 {channel.split('#')[0]} 的方法，不能讀它的屬性 {name}")
        return recorder.wrap_callable(f"{channel}.{name}", method)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.__getattr__("transform_for_annotation")(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        return self.__getattr__("annotate")(model)

    def validate(self, model: GraphModule) -> None:
        return self.__getattr__("validate")(model)

    def prepare_obs_or_fq_callback(self, model: GraphModule, edge_or_node_to_obs_or_fq: dict[Any, Any]) -> None:
        return None


def _register_quantizer_base() -> None:
    from torchao.quantization.pt2e.quantizer import Quantizer

    Quantizer.register(RecordedInstance)


# --- encoding ---------------------------------------------------------------------------------------


def exception_record(exc: BaseException) -> dict[str, Any]:
    from selfcheck.evidence import CaseTimeout

    if isinstance(exc, CaseTimeout):
        return {"type": "Timeout", "message": ""}
    from common.explain import student_frame

    name = type(exc).__name__
    from selfcheck.evidence import cause_text

    message = safe_text(exc, 300) + cause_text(exc)  # a torch pass wraps the error that says what went wrong
    record: dict[str, Any] = {"type": name if isinstance(name, str) else "Exception", "message": message[:520]}
    where = student_frame(exc.__traceback__)  # the student's own line, for the feedback (never trusted further)
    if where is not None:
        record["where"] = where
    return record


def _node_ref(node: Any) -> str:
    return node.name if type(node) is Node else f"?{type(node).__name__}"


def encode(value: Any, recorder: Recorder | None, depth: int = 0) -> Any:
    """A value a student's code produced, as plain JSON data (see the module docstring)."""
    if depth > MAX_DEPTH:
        raise Unrecordable("回傳值巢狀太深")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        if kind is str and len(value) > 100_000:
            raise Unrecordable("回傳的字串太長")
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": str(value)}
    if kind is list or kind is tuple:
        if len(value) > 10_000:
            raise Unrecordable("回傳的串列太長")
        items = [encode(v, recorder, depth + 1) for v in value]
        return items if kind is list else {"tuple": items}
    if kind in EXACT_DICTS:  # the standard library's dicts cannot lie about equality
        if len(value) > 10_000:
            raise Unrecordable("回傳的 dict 太大")
        return {"dict": [[encode(k, recorder, depth + 1), encode(v, recorder, depth + 1)] for k, v in value.items()]}
    if kind is Node:
        owner = value.graph.owning_module
        graph = recorder.graph_number(owner) if recorder is not None and isinstance(owner, GraphModule) else None
        return {"node": value.name, "graph": graph}
    if isinstance(value, GraphModule) and recorder is not None:
        return {"graph": recorder.graph_number(value)}
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        if value.numel() > MAX_TENSOR_ELEMENTS:
            raise Unrecordable("回傳的 tensor 太大")
        data = value.detach().cpu()
        if data.is_quantized:
            raise Unrecordable("回傳的是量化過的 tensor")
        values = data.flatten().tolist()
        if data.dtype.is_floating_point:
            values = [v if math.isfinite(v) else str(v) for v in values]
        return {"tensor": values, "dtype": str(data.dtype).removeprefix("torch."), "shape": list(data.shape)}
    if isinstance(value, torch.dtype):
        return {"torch_dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.qscheme):
        return {"qscheme": str(value).removeprefix("torch.")}
    if getattr(kind, "__module__", "") == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return encode(value.item(), recorder, depth + 1)
    if _is_target(value):
        return {"target": target_text(value)}
    if recorder is not None and _is_spec(value):
        return {"qspec": recorder.spec(value)}
    for base in (str, int, float, list, tuple, dict):
        if isinstance(value, base):
            raise TamperingSuspected(
                f"疑似竄改：回傳的是 {kind.__name__}（{base.__name__} 的子類別，可能改寫了 __eq__），只接受真正的 {base.__name__}"
            )
    raise Unrecordable(f"回傳值的型別 {kind.__name__} 無法當成評分證據")


def _is_target(value: Any) -> bool:
    from torch._ops import OpOverload, OpOverloadPacket

    return isinstance(value, OpOverload | OpOverloadPacket) or isinstance(value, types.BuiltinFunctionType)


def _is_spec(value: Any) -> bool:
    from torchao.quantization.pt2e.quantizer import QuantizationSpecBase

    return isinstance(value, QuantizationSpecBase)


def _find_in(target: Any, value: Any, depth: int = 0) -> list[Any] | None:
    """The path of ``target`` (by identity) inside the call's ``(args, kwargs)``."""
    if value is target:
        return []
    if depth > 3:
        return None
    if type(value) in (list, tuple):
        for index, item in enumerate(value[:64]):
            found = _find_in(target, item, depth + 1)
            if found is not None:
                return [index, *found]
    if type(value) is dict:
        for key, item in list(value.items())[:64]:
            if type(key) is str:
                found = _find_in(target, item, depth + 1)
                if found is not None:
                    return [key, *found]
    return None


def node_record(node: Node) -> dict[str, Any]:
    """One node of a changed graph: name, op, target, arguments (nodes by name)."""
    if node.op in ("call_function", "call_method"):
        target: Any = target_text(node.target)
    else:
        target = {"name": str(node.target)}
    return {"name": node.name, "op": node.op, "target": target, "args": _arg(node.args), "kwargs": _arg(node.kwargs)}


def _arg(value: Any, depth: int = 0) -> Any:
    if depth > 8:
        return {"unsupported": "too deep"}
    kind = type(value)
    if kind is Node:
        return {"n": value.name}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": str(value)}
    if kind in (list, tuple) or isinstance(value, (list, tuple)):
        items = [_arg(v, depth + 1) for v in list(value)[:1024]]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, dict):
        return {"dict": [[str(k), _arg(v, depth + 1)] for k, v in list(value.items())[:256]]}
    if isinstance(value, torch.dtype):
        return {"torch_dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, slice):
        return {"slice": [_arg(value.start), _arg(value.stop), _arg(value.step)]}
    return {"unsupported": kind.__name__}


def structure_key(gm: GraphModule) -> tuple[Any, ...]:
    """What a graph is, without its annotations: changes when a node, target or argument changes."""
    return tuple((id(n), n.name, n.op, repr(n.target), repr(n.args), repr(n.kwargs)) for n in gm.graph.nodes)


def _one_level(value: Any) -> Any:
    """What a write into ``value`` changes: a dict or list by the identity of its items, anything else by its own."""
    if type(value) is dict:
        return (id(value), tuple((str(k), id(v)) for k, v in list(value.items())[:256]))
    if type(value) is list:
        return (id(value), tuple(id(v) for v in value[:256]))
    return id(value)


WRITE_KEY_SKIPS = frozenset({"_code", "_lineno_map", "_prologue_start", "_graph"})
"""GraphModule attributes a recompile replaces, and the graph itself (its nodes are compared node by node)."""


def write_key(gm: GraphModule) -> dict[str, Any]:
    """What a call may write into a graph besides its nodes' structure and labels: each node's ``meta`` (but the
    label) and the GraphModule's own attributes, one level deep, by identity (``written`` compares two)."""
    key: dict[str, Any] = {}
    for node in gm.graph.nodes:
        key[f"node {node.name} 的 meta"] = tuple(
            (k, _one_level(v)) for k, v in node.meta.items() if k != ANNOTATION_KEY
        )
    for name, value in vars(gm).items():
        if name not in WRITE_KEY_SKIPS:
            key[f"GraphModule 的屬性 {name}"] = _one_level(value)
    return key


def written(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Where ``after`` differs from ``before`` (``write_key``s of one graph): at most 20 places, as text."""
    places = sorted(place for place in set(before) | set(after) if before.get(place) != after.get(place))
    return [safe_text(place, 80) for place in places[:20]]


def _is_stale(gm: GraphModule) -> bool:
    """True when ``gm``'s Python code no longer matches its graph (recompile was not called)."""
    try:
        return gm.code != gm.graph.python_code(root_module="self").src
    except Exception:
        return True


# --- one exercise -----------------------------------------------------------------------------------


def record_exercise(exercise: Exercise, namespace: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Run every case of ``exercise`` with a recording namespace; return the recordings (plain data).

    ``{"missing": [...]}`` when a name is not defined, else
    ``{"kinds": {name: "class" | "function"}, "cases": {case: {"channels": {...}}}}``.
    """
    _register_quantizer_base()
    missing = [name for name in exercise.names if name not in namespace]
    if missing:
        return {"missing": missing}
    recordings: dict[str, Any] = {}
    kinds: dict[str, str] = {}

    def for_case(case: str) -> dict[str, Any]:
        recorder = Recorder()
        recordings[case] = recorder
        wrapped = recorder.namespace(namespace, exercise.names)
        kinds.update(recorder.kinds)
        return wrapped

    collect(exercise, namespace, seed, namespace_for_case=for_case, recording=True)
    return {
        "kinds": kinds,
        "cases": {case: {"channels": recorder.channels} for case, recorder in recordings.items()},
    }
