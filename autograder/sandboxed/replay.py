"""Replaying a student's recorded answers, and deriving the evidence from them.

The sandbox sends only recordings (``autograder.sandboxed.record``): what each call of the
student's code returned, raised, or did to the graphs it was handed. Here the same hidden
case runs again, on the grader's own copy of the hidden models built from the same seed,
with a *replay namespace*: each student call returns, raises or applies what was recorded,
after validating it, and no student code runs. Everything derived from the answers
(prepare, calibration, convert, observer counts and sharing, q/dq paths, numerics) is
computed here by the course's own code.

So whatever a submission patches inside its sandbox, it can only change its own answers:
forging evidence is as hard as solving the exercise. A recording is interpreted as data:
every op, method and observer class it names must be on the allow-list of ``allowed.py``
(nothing is looked up by name in a module), and a recording that names anything else, or asks
for more than the budgets, is refused before it runs (``derive`` returns ``{"refused": …}``:
the exercise scores zero with that sentence). A recording that does not fit its case (wrong
shapes, unknown nodes) makes that case an error for the student. During grading this runs in a
confined replay worker (``replay_job.py``), never in the grader's process.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import math
import re
import types
from collections.abc import Mapping
from typing import Any

import torch
from torch.fx import GraphModule, Node

from autograder.sandboxed import allowed
from autograder.sandboxed.record import reachable_graphs
from common.explain import clean_where
from selfcheck.casekit import Exercise, collect
from selfcheck.evidence import (
    ANNOTATION_KEY,
    SPEC_FIELDS,
    SPEC_KINDS,
    CaseTimeout,
    EvidenceError,
    TamperingSuspected,
    safe_text,
)

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EXCEPTIONS = {
    name: getattr(builtins, name)
    for name in (
        "ValueError",
        "TypeError",
        "KeyError",
        "IndexError",
        "AttributeError",
        "AssertionError",
        "RuntimeError",
        "NotImplementedError",
        "NameError",
        "ZeroDivisionError",
        "RecursionError",
        "LookupError",
        "ArithmeticError",
        "OverflowError",
        "StopIteration",
        "UnboundLocalError",
        "Exception",
    )
}


class ReplayError(EvidenceError):
    """A recording that does not fit the case it claims to come from."""


def _fail(what: str) -> ReplayError:
    return ReplayError(f"評分紀錄對不上：{what}")


# --- decoding values -----------------------------------------------------------------------------


def _dtype(value: Any) -> torch.dtype:
    name = value.get("torch_dtype") if isinstance(value, dict) else None
    item = getattr(torch, name, None) if isinstance(name, str) and IDENTIFIER.match(name) else None
    if not isinstance(item, torch.dtype):
        raise _fail(f"不認得的 dtype {str(name)[:40]}")
    return item


def _qscheme(value: Any) -> torch.qscheme:
    name = value.get("qscheme") if isinstance(value, dict) else None
    item = getattr(torch, name, None) if isinstance(name, str) and IDENTIFIER.match(name) else None
    if not isinstance(item, torch.qscheme):
        raise _fail(f"不認得的 qscheme {str(name)[:40]}")
    return item


def _number(value: Any) -> float:
    if isinstance(value, dict) and set(value) == {"float"} and value["float"] in ("nan", "inf", "-inf"):
        return float(value["float"])
    if type(value) in (int, float) and type(value) is not bool:
        return value
    raise _fail("預期是數字")


def _tensor(value: dict[str, Any]) -> torch.Tensor:
    data, dtype_name, shape = value.get("tensor"), value.get("dtype"), value.get("shape")
    if not isinstance(data, list) or not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise _fail("tensor 格式不對")
    dtype = _dtype({"torch_dtype": dtype_name})
    if math.prod(shape) != len(data) or len(data) > 200_000:
        raise _fail("tensor 的形狀與資料不符")
    numbers = [float(v) if isinstance(v, str) and v in ("nan", "inf", "-inf") else v for v in data]
    if not all(type(v) in (int, float, bool) for v in numbers):
        raise _fail("tensor 裡有不是數字的值")
    return torch.tensor(numbers, dtype=dtype).reshape(shape)


def _observer_class(path: Any) -> type:
    if not isinstance(path, str) or "." not in path:
        raise _fail("observer 類別格式不對")
    module_name, _, name = path.rpartition(".")
    if path not in allowed.OBSERVERS:
        raise ReplayError(f"observer 必須是 torchao 的 observer 或 fake-quant 類別，看到 {path[:80]}")
    cls = getattr(importlib.import_module(module_name), name, None)
    if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
        raise ReplayError(f"observer 必須是 torchao 的 observer 或 fake-quant 類別，看到 {path[:80]}")
    return cls


def _setting(value: Any) -> Any:
    if value is None or type(value) in (bool, int, str, float):
        return value
    if isinstance(value, dict):
        if "torch_dtype" in value:
            return _dtype(value)
        if "qscheme" in value:
            return _qscheme(value)
        if "float" in value:
            return _number(value)
        if "tensor" in value:
            return _tensor(value)
    raise _fail("observer 的設定格式不對")


def _observer_ctor(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get("kwargs"), dict):
        raise _fail("observer 格式不對")
    cls = _observer_class(value.get("class"))
    kwargs = {str(k): _setting(v) for k, v in value["kwargs"].items() if IDENTIFIER.match(str(k))}
    if not kwargs:
        return cls
    with_args = getattr(cls, "with_args", None)
    return with_args(**kwargs) if with_args is not None else functools.partial(cls, **kwargs)


class Replay:
    """The replay of one case: its recorded channels and the grader's own graphs."""

    def __init__(self, recording: Any, kinds: Mapping[str, str]) -> None:
        channels = recording.get("channels") if isinstance(recording, dict) else None
        if not isinstance(channels, dict):
            raise _fail("沒有這一項的紀錄")
        self.channels = {str(k): list(v) for k, v in channels.items() if isinstance(v, list)}
        self.kinds = kinds
        self.graphs: list[GraphModule] = []
        self.inputs: list[list[Any]] = []
        """Per graph, what its inputs held when the case handed it over (``placeholder.meta["val"]``, by position):
        the shapes ``allowed.check_cost`` runs a rebuilt graph on, whatever the recording renamed."""
        self.instances = 0
        self.refusal: str | None = None
        """Why a graph this case rebuilt was refused (``allowed``), if one was: the whole exercise scores zero."""

    # -- the namespace -----------------------------------------------------------------------

    def namespace(self, names: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            if self.kinds.get(name) == "class":
                out[name] = functools.partial(self.construct, name)
            else:
                out[name] = functools.partial(self.call, name)
        return out

    def construct(self, name: str, *args: Any, **kwargs: Any) -> Any:
        event = self._next(name, args, kwargs)
        if event.get("instance") is not True:
            raise _fail(f"{name} 的建構紀錄格式不對")
        number = self.instances
        self.instances += 1
        return _replay_instance(self, f"{name}#{number}")

    def _next(self, channel: str, args: Any, kwargs: Any) -> dict[str, Any]:
        graphs = reachable_graphs((args, kwargs))
        for gm in graphs:
            self._register(gm)
        queue = self.channels.get(channel)
        if not queue:
            raise _fail(f"{channel.split('.')[0]} 的呼叫比紀錄多")
        event = queue.pop(0)
        if not isinstance(event, dict):
            raise _fail("紀錄格式不對")
        states = event.get("graphs", {})
        if not isinstance(states, dict):
            raise _fail("圖的紀錄格式不對")
        for key, state in sorted(states.items(), key=lambda item: int(item[0]) if str(item[0]).isdigit() else -1):
            if not str(key).isdigit():
                raise _fail("圖的編號格式不對")
            self._apply(int(key), state, (args, kwargs))
        if "raise" in event:
            raise _exception(event["raise"])
        return event

    def call(self, channel: str, *args: Any, **kwargs: Any) -> Any:
        event = self._next(channel, args, kwargs)
        if "return" not in event:
            raise _fail("呼叫的紀錄沒有回傳值")
        return self.value(event["return"], args, kwargs)

    def derive_fn(self, number: int) -> Any:
        """A plain function (copied as itself by deepcopy, like the student's) replaying ``derive#number``."""
        call = self.call

        def derive_qparams(*args: Any, **kwargs: Any) -> Any:
            return call(f"derive#{number}", *args, **kwargs)

        return derive_qparams

    def _register(self, gm: GraphModule) -> int:
        for index, known in enumerate(self.graphs):
            if known is gm:
                return index
        self.graphs.append(gm)
        self.inputs.append([n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
        return len(self.graphs) - 1

    def graph(self, number: Any) -> GraphModule:
        if type(number) is not int or not 0 <= number < len(self.graphs):
            raise _fail("參照了不存在的圖")
        return self.graphs[number]

    # -- values -------------------------------------------------------------------------------

    def value(self, data: Any, args: Any, kwargs: Any, depth: int = 0) -> Any:
        if depth > 14:
            raise _fail("回傳值巢狀太深")
        if data is None or type(data) in (bool, int, str, float):
            return data
        if type(data) is list:
            return [self.value(v, args, kwargs, depth + 1) for v in data]
        if type(data) is not dict:
            raise _fail("回傳值格式不對")
        if "tuple" in data:
            return tuple(self.value(v, args, kwargs, depth + 1) for v in _list(data["tuple"]))
        if "dict" in data:
            out = {}
            for pair in _list(data["dict"]):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise _fail("dict 格式不對")
                key = self.value(pair[0], args, kwargs, depth + 1)
                try:
                    out[key] = self.value(pair[1], args, kwargs, depth + 1)
                except TypeError:
                    raise _fail("dict 的 key 不能當 key") from None
            return out
        if "node" in data:
            gm = self.graph(data.get("graph"))
            return _node(gm, data["node"])
        if "graph" in data:
            return self.graph(data["graph"])
        if "tensor" in data:
            return _tensor(data)
        if "float" in data:
            return _number(data)
        if "torch_dtype" in data:
            return _dtype(data)
        if "qscheme" in data:
            return _qscheme(data)
        if "target" in data:
            return _returned_target(data["target"])
        if "qspec" in data:
            graphs = reachable_graphs((args, kwargs))
            if not graphs:
                raise _fail("回傳的規格找不到所屬的圖")
            return self.spec(graphs[0], data["qspec"])
        if "unrecordable" in data:
            raise EvidenceError(str(data["unrecordable"])[:200])
        if "forged" in data:
            raise TamperingSuspected(str(data["forged"])[:300])
        raise _fail("回傳值格式不對")

    # -- graphs -------------------------------------------------------------------------------

    def _apply(self, number: int, state: Any, call: Any) -> None:
        if not isinstance(state, dict):
            raise _fail("圖的紀錄格式不對")
        if number == len(self.graphs):  # a graph the student's code made: built on the first graph it was handed
            if "nodes" not in state or not self.graphs:
                raise _fail("學生建立的新圖沒有內容")
            self.graphs.append(GraphModule(self.graphs[0], torch.fx.Graph()))
            self.inputs.append(self.inputs[0])  # it is called like the graph it was made from
        gm = self.graph(number)
        if "writes" in state:
            mark_writes(gm, state["writes"])
        if "nodes" in state:
            try:
                _rebuild(gm, state, call, self.inputs[number])
            except allowed.Refused as exc:
                self.refusal = refusal_text(exc)
                raise EvidenceError(self.refusal) from None
        if "annotations" not in state:  # the call left the annotations as they were
            return
        annotations = state["annotations"]
        if not isinstance(annotations, dict):
            raise _fail("標籤紀錄格式不對")
        nodes = {n.name: n for n in gm.graph.nodes}
        for node in nodes.values():
            node.meta.pop(ANNOTATION_KEY, None)
        for name, annotation in annotations.items():
            if name not in nodes:
                raise _fail(f"標籤貼在不存在的 node {str(name)[:60]} 上")
            decoded = self.annotation(gm, annotation)
            if decoded is not None:
                nodes[name].meta[ANNOTATION_KEY] = decoded
            else:
                nodes[name].meta[ANNOTATION_KEY] = None

    def annotation(self, gm: GraphModule, data: Any) -> Any:
        from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

        if data is None:
            return None
        if not isinstance(data, dict) or "unsupported" in data:
            kind = data.get("unsupported") if isinstance(data, dict) else type(data).__name__
            raise EvidenceError(f"node 的標籤不是 QuantizationAnnotation（看到 {str(kind)[:40]}）")
        inputs = {}
        for pair in _list(data.get("inputs")):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _fail("input_qspec_map 格式不對")
            source = _node(gm, pair[0]) if isinstance(pair[0], str) and not pair[0].startswith("?") else None
            if source is None:
                raise EvidenceError(f"input_qspec_map 的 key 必須是 Node，看到 {str(pair[0])[1:40]}")
            inputs[source] = self.spec(gm, pair[1])
        annotated, implicit = data.get("annotated"), data.get("implicit_sharing")
        return QuantizationAnnotation(
            input_qspec_map=inputs,
            output_qspec=self.spec(gm, data.get("output")),
            allow_implicit_sharing=implicit if type(implicit) is bool else bool(implicit),
            _annotated=annotated if type(annotated) is bool else bool(annotated),
        )

    def spec(self, gm: GraphModule, data: Any) -> Any:
        """The one decoder of ``selfcheck.evidence.encode_spec``: the torchao spec a recording describes."""
        from torchao.quantization.pt2e.quantizer import (
            DerivedQuantizationSpec,
            FixedQParamsQuantizationSpec,
            QuantizationSpec,
            SharedQuantizationSpec,
        )

        if data is None:
            return None
        if not isinstance(data, dict):
            raise _fail("規格格式不對")
        kind = data.get("kind")
        if kind == "shared":
            return SharedQuantizationSpec(_edge(gm, data.get("of")))
        if kind not in SPEC_KINDS:
            raise EvidenceError(f"不支援的規格種類 {str(data.get('type', kind))[:40]}")
        decoders = {"dtype": _dtype, "qmin": _optional_int, "qmax": _optional_int, "is_dynamic": bool}
        decoders["qscheme"] = lambda value: _qscheme(value) if value is not None else None
        fields = {attribute: decoders[key](data.get(key)) for key, attribute in SPEC_FIELDS.items()}
        try:
            if kind == "spec":
                return QuantizationSpec(
                    **fields,
                    ch_axis=_optional_int(data.get("ch_axis")),
                    observer_or_fake_quant_ctr=_observer_ctor(data.get("observer")),
                )
            if kind == "fixed":
                return FixedQParamsQuantizationSpec(
                    **fields, scale=_number(data.get("scale")), zero_point=int(_number(data.get("zero_point")))
                )
            number = data.get("fn")
            if type(number) is not int:
                raise _fail("derive_qparams_fn 的紀錄格式不對")
            return DerivedQuantizationSpec(
                **fields,
                ch_axis=_optional_int(data.get("ch_axis")),
                derived_from=[_edge(gm, e) for e in _list(data.get("from"))],
                derive_qparams_fn=self.derive_fn(number),
            )
        except (TypeError, ValueError, AssertionError) as exc:
            raise EvidenceError(f"規格不合法：{str(exc)[:120]}") from None


WRITES_KEY = "writes_replayed"
"""Where a replayed graph keeps the places the student's code wrote into (``GraphModule.meta``; M06-3's cases
read it: ``selfcheck.public.m06_3.REPLAYED_WRITES``)."""


def mark_writes(gm: GraphModule, writes: Any) -> None:
    """Note in ``gm.meta[WRITES_KEY]`` where the recorded call wrote into its graph (node ``meta``, attributes):
    the values themselves are not replayed, only that the graph changed there (a case can see it)."""
    places = [safe_text(place, 80) for place in _list(writes)[:20] if isinstance(place, str)]
    gm.meta[WRITES_KEY] = [*gm.meta.get(WRITES_KEY, []), *places][:200]


def _replay_instance(replay: Replay, channel: str) -> Any:
    from torchao.quantization.pt2e.quantizer import Quantizer

    class ReplayedInstance(Quantizer):
        """The grader's stand-in for an instance of the student's class: its calls are replayed."""

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return functools.partial(replay.call, f"{channel}.{name}")

        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return replay.call(f"{channel}.transform_for_annotation", model)

        def annotate(self, model: GraphModule) -> GraphModule:
            return replay.call(f"{channel}.annotate", model)

        def validate(self, model: GraphModule) -> None:
            return replay.call(f"{channel}.validate", model)

    return ReplayedInstance()


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _fail("預期是串列")
    return value


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise _fail("預期是整數")
    return value


def _node(gm: GraphModule, name: Any) -> Node:
    if isinstance(name, str):
        for node in gm.graph.nodes:
            if node.name == name:
                return node
    raise _fail(f"圖上沒有 node {str(name)[:60]}")


def _edge(gm: GraphModule, data: Any) -> Any:
    if isinstance(data, dict) and "node" in data:
        return _node(gm, data["node"])
    if isinstance(data, dict) and isinstance(data.get("edge"), list) and len(data["edge"]) == 2:
        return (_node(gm, data["edge"][0]), _node(gm, data["edge"][1]))
    raise EvidenceError("SharedQuantizationSpec / derived_from 必須指向 node 或 (node, node) 邊")


def _exception(data: Any) -> BaseException:
    if not isinstance(data, dict):
        return _fail("例外的紀錄格式不對")
    name, message = str(data.get("type", "Exception"))[:60], str(data.get("message", ""))[:520]
    if name == "Timeout":
        return CaseTimeout()
    if name == "TamperingSuspected":
        return TamperingSuspected(message)
    if name in EXCEPTIONS:
        exc = EXCEPTIONS[name](message)
    else:
        safe = name if IDENTIFIER.match(name) else "Exception"
        exc = types.new_class(safe, (Exception,))(message)
    where = clean_where(data.get("where"))
    if where is not None:  # the student's line that raised it, shown in the feedback instead of the replay's
        exc.student_where = where  # type: ignore[attr-defined]
    return exc


# --- rebuilding an edited graph ------------------------------------------------------------------


def _target(op: str, data: Any) -> Any:
    """The target of a recorded node: a name (checked), or an op or callable of the allow-list (``allowed``).

    Nothing is looked up by a name the recording chose: an op is taken from ``torch.ops`` only when
    its full name is on the list, a Python callable only from ``allowed.PYTHON``.
    """
    if not isinstance(data, dict):
        raise _fail("target 格式不對")
    if op in ("placeholder", "output", "get_attr", "call_module", "call_method"):
        name = data.get("name")
        if not isinstance(name, str) or not all(
            IDENTIFIER.match(p) and not p.startswith("__") for p in name.split(".")
        ):
            raise _fail(f"{op} 的 target 格式不對")
        if op == "call_method" and name not in allowed.METHODS:
            raise EvidenceError(f"tensor 方法 {name[:40]} 不是課程允許的運算")
        return name
    name = data.get("op") or data.get("packet") or data.get("py")
    if not isinstance(name, str):
        raise _fail("target 格式不對")
    if name in allowed.PYTHON and "py" in data:
        return allowed.PYTHON[name]
    packet = "packet" in data
    if (name in allowed.PACKETS) if packet else (name in allowed.OPS):
        namespace, opname, *overload = name.split(".")
        item = getattr(getattr(torch.ops, namespace), opname)
        return getattr(item, overload[0]) if overload else item
    raise EvidenceError(f"{name[:60]} 不是課程允許的運算")


class UnknownTarget:
    """A target a student's function returned that is not on the allow-list: comparable by name, never callable."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownTarget) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("UnknownTarget", self.name))


def _returned_target(data: Any) -> Any:
    """A target returned as a value: the allowed op itself, else an inert name for it."""
    try:
        return _target("call_function", data)
    except EvidenceError:
        name = (data.get("op") or data.get("packet") or data.get("py")) if isinstance(data, dict) else None
        return UnknownTarget(str(name)[:80])


def _argument(data: Any, nodes: dict[str, Node], depth: int = 0) -> Any:
    if depth > 8:
        raise _fail("引數巢狀太深")
    if data is None or type(data) in (bool, int, str, float):
        return data
    if type(data) is list:
        return [_argument(v, nodes, depth + 1) for v in data]
    if type(data) is not dict:
        raise _fail("引數格式不對")
    if "n" in data:
        if data["n"] not in nodes:
            raise _fail(f"引數參照了不存在的 node {str(data['n'])[:60]}")
        return nodes[data["n"]]
    if "tuple" in data:
        return tuple(_argument(v, nodes, depth + 1) for v in _list(data["tuple"]))
    if "dict" in data:
        return {str(k): _argument(v, nodes, depth + 1) for k, v in _list(data["dict"])}
    if "float" in data:
        return _number(data)
    if "torch_dtype" in data:
        return _dtype(data)
    if "memory_format" in data:
        item = getattr(torch, str(data["memory_format"]), None)
        if not isinstance(item, torch.memory_format):
            raise _fail("memory_format 格式不對")
        return item
    if "layout" in data:
        item = getattr(torch, str(data["layout"]), None)
        if not isinstance(item, torch.layout):
            raise _fail("layout 格式不對")
        return item
    if "device" in data:
        if data["device"] != "cpu":
            raise _fail("只接受 cpu")
        return torch.device("cpu")
    if "slice" in data:
        start, stop, step = (_argument(v, nodes, depth + 1) for v in _list(data["slice"]))
        return slice(start, stop, step)
    raise EvidenceError(f"圖上有無法重現的引數（{str(data.get('unsupported', '?'))[:40]}）")


def _rebuild(gm: GraphModule, state: dict[str, Any], call: Any, inputs: list[Any] | None = None) -> None:
    """Make ``gm``'s graph the recorded one, in place, keeping the nodes that kept their names.

    The code is recompiled only when the student's was (``stale`` says it was not). Either way the graph
    is judged by ``allowed.check_cost`` before anything runs it, on ``inputs`` (what the graph's inputs
    held before, by position): a stale graph runs too, as soon as anything recompiles it (``prepare_pt2e``
    does), and what the recording says about it is the student's claim.
    """
    records = _list(state.get("nodes"))
    if len(records) > 5_000:
        raise _fail("圖太大")
    graph = gm.graph
    existing = {n.name: n for n in graph.nodes}
    wanted: list[tuple[Node, dict[str, Any]]] = []
    by_name: dict[str, Node] = {}
    for record in records:
        if not isinstance(record, dict) or record.get("op") not in (
            "placeholder",
            "get_attr",
            "call_function",
            "call_method",
            "call_module",
            "output",
        ):
            raise _fail("node 的紀錄格式不對")
        name = record.get("name")
        if not isinstance(name, str) or not IDENTIFIER.match(name) or name in by_name:
            raise _fail("node 名稱格式不對")
        target = _target(record["op"], record.get("target"))
        node = existing.get(name)
        if node is None:
            node = graph.create_node(record["op"], target, (), {}, name=name)
        else:
            node.op, node.target = record["op"], target
        by_name[name] = node
        wanted.append((node, record))
    _install_modules(gm, state.get("modules", {}), call)
    for node, record in wanted:
        args = _argument(record.get("args", []), by_name)
        kwargs = _argument(record.get("kwargs", {"dict": []}), by_name)
        node.args = tuple(args) if isinstance(args, list | tuple) else (args,)
        node.kwargs = kwargs if isinstance(kwargs, dict) else {}
    keep = {id(n) for n, _ in wanted}
    for node in reversed(list(graph.nodes)):
        if id(node) not in keep:
            node.args, node.kwargs = (), {}
    for node in reversed(list(graph.nodes)):
        if id(node) not in keep:
            for user in list(node.users):
                if id(user) in keep:
                    raise _fail("紀錄裡的 node 仍在使用被刪掉的 node")
            graph.erase_node(node)
    for node, record in wanted:
        if node.name != record["name"]:
            node._rename(record["name"])
    previous = None
    for node, _ in wanted:
        if previous is not None and previous.next is not node:
            previous.append(node)
        previous = node
    _check_attributes(gm)
    allowed.check_cost(gm, inputs)  # before anything runs it: the outputs' bytes and the flops of one run
    if not state.get("stale", True):
        gm.recompile()


def _check_attributes(gm: GraphModule) -> None:
    """A rebuilt graph's ``get_attr`` nodes may reach the grader's tensors and submodules, nothing else
    (not ``graph``, ``forward``, ``_modules`` or any other Python object of the module: a name is looked
    up only among the submodules, parameters, buffers and attributes the modules hold themselves)."""
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        owner: Any = gm
        for part in str(node.target).split("."):
            if not isinstance(owner, torch.nn.Module):
                raise allowed.Refused(f"get_attr {str(node.target)[:60]} 經過的不是子模組")
            found = [
                table[part]
                for table in (owner._modules, owner._parameters, owner._buffers, vars(owner))
                if part in table
            ]
            if not found:
                raise allowed.Refused(
                    f"圖上的 get_attr {str(node.target)[:60]} 讀的不是這個模型原有的 tensor 或子模組："
                    "你的程式可能在圖上加了新的參數或常數（例如呼叫了會改圖的 torchao 函式），或改了圖的複本"
                    "（例如 copy.deepcopy(gm)）再回傳"
                )
            owner = found[0]
        if not isinstance(owner, torch.Tensor | torch.nn.Module):
            raise allowed.Refused(f"get_attr {str(node.target)[:60]} 指向的不是 tensor 或子模組")


def _install_modules(gm: GraphModule, modules: Any, call: Any) -> None:
    if not isinstance(modules, dict):
        raise _fail("模組紀錄格式不對")
    made: dict[str, torch.nn.Module] = {}
    for path, data in modules.items():
        if not isinstance(path, str) or not all(
            IDENTIFIER.match(p) and not p.startswith("__") for p in path.split(".")
        ):
            raise _fail("模組名稱格式不對")
        if not isinstance(data, dict):
            raise _fail("模組紀錄格式不對")
        if data.get("missing"):
            continue
        if "argument" in data:
            module = _at(call, data["argument"])
            if not isinstance(module, torch.nn.Module):
                raise _fail("模組不是傳進去的那個物件")
        elif "same_as" in data:
            module = made.get(str(data["same_as"]))
            if module is None:
                raise _fail("共用的模組找不到")
        elif "new" in data:
            module = _new_observer(data["new"])
        else:
            raise _fail("模組紀錄格式不對")
        made[path] = module
        gm.add_submodule(path, module)


def _at(value: Any, path: Any) -> Any:
    for step in _list(path)[:8]:
        if type(step) is int and isinstance(value, list | tuple) and 0 <= step < len(value):
            value = value[step]
        elif type(step) is str and isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise _fail("模組的位置格式不對")
    return value


def _new_observer(data: Any) -> torch.nn.Module:
    if not isinstance(data, dict) or not isinstance(data.get("settings"), dict):
        raise _fail("observer 紀錄格式不對")
    cls = _observer_class(data.get("class"))
    settings = {k: _setting(v) for k, v in data["settings"].items() if isinstance(k, str) and IDENTIFIER.match(k)}
    import inspect

    try:
        accepted = set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        accepted = set()
    kwargs = {k: v for k, v in settings.items() if k in accepted}
    if "eps" in kwargs and isinstance(kwargs["eps"], float):
        kwargs["eps"] = kwargs["eps"]
    try:
        return cls(**kwargs)
    except Exception as exc:
        raise EvidenceError(f"無法重建 observer {cls.__name__}：{str(exc)[:100]}") from None


# --- one exercise ------------------------------------------------------------------------------------


def derive(exercise: Exercise, recorded: Any, seed: int) -> dict[str, Any]:
    """The evidence of ``exercise`` from a sandbox's recordings: the cases re-run here, replaying them.

    ``{"refused": sentence}`` instead when the recording names anything outside the allow-list or
    asks for more than the budgets (``allowed``): checked on the data before anything runs, and for
    each rebuilt graph before it runs.
    """
    if not isinstance(recorded, dict):
        raise _fail("紀錄格式不對")
    try:
        allowed.check_recording(recorded)
    except allowed.Refused as exc:
        return {"refused": refusal_text(exc)}
    if "unrecorded" in recorded:
        return {"refused": unrecorded_text(recorded["unrecorded"])}
    if "missing" in recorded:
        names = [n for n in _list(recorded["missing"]) if n in exercise.names]
        return {"missing": names or list(exercise.names)}
    kinds = recorded.get("kinds")
    cases = recorded.get("cases")
    if not isinstance(kinds, dict) or not isinstance(cases, dict):
        raise _fail("紀錄格式不對")
    kinds = {n: kinds.get(n) for n in exercise.names}
    replays: dict[str, Replay] = {}

    def for_case(case: str) -> dict[str, Any]:
        if case not in cases:
            return _FailingNamespace(exercise.names, _fail("沒有收到這一項的紀錄"))
        try:
            replays[case] = Replay(cases[case], kinds)
        except EvidenceError as exc:
            return _FailingNamespace(exercise.names, exc)
        return replays[case].namespace(exercise.names)

    evidence = collect(exercise, dict.fromkeys(exercise.names), seed, namespace_for_case=for_case)
    refused = [replay.refusal for replay in replays.values() if replay.refusal]
    return {"refused": refused[0]} if refused else evidence


def refusal_text(exc: BaseException) -> str:
    """The one sentence a student reads when their recording was refused."""
    return f"評分時沒有執行你的答案留下的圖，因為{safe_text(exc, 300)}"


def unrecorded_text(account: Any) -> str:
    """The one sentence a student reads when recording the exercise raised outside its cases
    (``runner._record_guarded``): the course's recording code was changed, or failed."""
    account = account if isinstance(account, dict) else {}
    error = safe_text(account.get("error", "?"), 60)
    named = account.get("changed")
    changed = [safe_text(c, 120) for c in named if isinstance(c, str)][:3] if isinstance(named, list) else []
    if changed:
        return (
            f"評分時無法記錄這一題的答案：你的程式改了課程記錄答案用的 {'、'.join(changed)}，記錄時出錯（{error}）；"
            "作答時不要修改 selfcheck 或 autograder 裡的東西"
        )
    return (
        f"評分時無法記錄這一題的答案：課程記錄答案的程式出錯（{error}），多半是你的程式改了 selfcheck、autograder "
        "或 torch 裡的東西；作答時不要修改它們"
    )


class _FailingNamespace(dict):
    """The namespace of a case the sandbox sent no recording for: every call is an error."""

    def __init__(self, names: tuple[str, ...], error: Exception) -> None:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise error

        super().__init__(dict.fromkeys(names, fail))


def record_and_derive(exercise: Exercise, namespace: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Record ``namespace``'s answers in this process, then derive the evidence by replaying them.

    The answer key's evidence is made this way, so that it goes through exactly the same
    path as a student's.
    """
    import json

    from autograder.sandboxed.record import record_exercise

    recorded = json.loads(json.dumps(record_exercise(exercise, namespace, seed)))
    return derive(exercise, recorded, seed)
