"""Collecting evidence from student code: guarded calls, plain data, graph descriptions.

Everything here runs in the process that executed the student's notebook, so it
trusts nothing it is handed: every call is guarded, every value returned by student
code is converted to plain JSON data of exactly the expected types, and graphs are
described from the FX structure, not from what student objects say about themselves.
"""

from __future__ import annotations

import collections
import functools
import math
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.fx import GraphModule, Node

MESSAGE_LIMIT = 400
CASE_SECONDS = 20


class EvidenceError(Exception):
    """A student value that cannot be turned into evidence (wrong type, too big…)."""


class TamperingSuspected(EvidenceError):
    """A student value dressed up as plain data: a subclass that may lie about equality."""


class CaseTimeout(BaseException):
    """Raised inside student code when one case runs past its time limit."""


def safe_text(value: object, limit: int = MESSAGE_LIMIT) -> str:
    """``str(value)`` that survives hostile ``__str__`` methods and is never too long."""
    try:
        text = str.__str__(value) if isinstance(value, str) else str(value)
        if type(text) is not str:
            text = object.__repr__(value)
    except BaseException:  # a student's __str__ may raise anything
        text = object.__repr__(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_error(exc: BaseException, seconds: int = CASE_SECONDS) -> dict[str, str]:
    """``{"error": type, "message": text}`` for an exception raised by student code (``seconds``: the case's limit).

    The message ends with the student's own line that raised it (``common.explain.where_text``), never
    with a line of torchao or of the grader: the place a replayed exception carries (``student_where``)
    or, for code run here, the innermost frame of student code.
    """
    from common.explain import student_frame, where_text

    if isinstance(exc, CaseTimeout):
        return {"error": "Timeout", "message": f"超過 {seconds} 秒沒有結束"}
    if isinstance(exc, EvidenceError):  # our own message says it all; where it was raised is noise
        return {"error": type(exc).__name__, "message": safe_text(exc)}
    try:  # a student's exception may make any attribute raise
        where = exc.__dict__.get("student_where") if type(getattr(exc, "__dict__", None)) is dict else None
        if type(where) is not dict:
            where = student_frame(exc.__traceback__)
    except BaseException:
        where = None
    return {"error": type(exc).__name__, "message": safe_text(exc) + cause_text(exc) + where_text(where)}


def cause_text(exc: BaseException) -> str:
    """``（原因：…）`` with the message of the exception ``exc`` was raised from (a torch pass wraps the real
    error: "An error occurred when running the 'PortNodeMetaForQDQ' pass" from "Expecting single user…")."""
    try:
        cause = exc.__cause__
        if cause is None or type(cause) is CaseTimeout:
            return ""
        return f"（原因：{type(cause).__name__}: {safe_text(cause, 200)}）"
    except BaseException:
        return ""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise ``CaseTimeout`` in the main thread after ``seconds`` (no-op off the main thread)."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout()

    try:
        previous = signal.signal(signal.SIGALRM, on_alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_case(fn: Callable[[], Any], seconds: int = CASE_SECONDS) -> dict[str, Any]:
    """Run one case of evidence collection; never raises.

    Returns ``{"value": ...}`` with the case's plain-data result, or the error.
    """
    try:
        with time_limit(seconds):
            value = fn()
        return {"value": value}
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, timeouts: all are the student's
        return describe_error(exc, seconds)


def returned_dict(value: Any, function: str, what: str, limit: int = 500) -> dict[Any, Any]:
    """``value``, what the student's ``function`` returned, if it is a real ``dict`` (no subclass) of at most
    ``limit`` items; else an ``EvidenceError`` that names ``function`` and says ``what`` the dict maps."""
    if type(value) is not dict:
        raise EvidenceError(f"{function} 應該回傳 dict（{what}），看到 {type(value).__name__}")
    if len(value) > limit:
        raise EvidenceError(f"{function} 回傳的 dict 太大（{len(value)} 項）")
    return value


def plain(value: Any, depth: int = 0) -> Any:
    """Convert a value produced by student code into plain JSON data.

    Accepts exactly ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list``,
    ``tuple`` (becomes a list), ``dict`` with ``str`` keys, and fx ``Node`` (becomes its
    name). Subclasses are refused: an object whose ``__eq__`` always answers True
    cannot pass for a right answer.
    """
    if depth > 20:
        raise EvidenceError("回傳值巢狀太深")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise EvidenceError(f"回傳了非有限的浮點數 {value!r}")
        return value
    if kind is Node:
        return value.name
    if kind in (list, tuple):
        if len(value) > 10_000:
            raise EvidenceError("回傳的 list 太長")
        return [plain(v, depth + 1) for v in value]
    if kind in (dict, collections.Counter, collections.defaultdict, collections.OrderedDict):
        if len(value) > 10_000:
            raise EvidenceError("回傳的 dict 太大")
        out = {}
        for key, item in value.items():
            key = plain(key, depth + 1)
            if type(key) is not str:
                raise EvidenceError(f"dict 的 key 必須是字串或 Node，收到 {type(key).__name__}")
            out[key] = plain(item, depth + 1)
        return out
    if getattr(kind, "__module__", "") == "numpy" and hasattr(value, "item"):  # np.float64 and friends
        return plain(value.item(), depth + 1)
    for base in (str, int, float, list, tuple, dict):
        if isinstance(value, base):
            raise TamperingSuspected(
                f"疑似竄改：回傳的是 {kind.__name__}（{base.__name__} 的子類別，可能改寫了 __eq__），只接受真正的 {base.__name__}"
            )
    raise EvidenceError(f"回傳值的型別 {kind.__name__} 不是預期的型別（str、int、float、bool、list、dict 或 Node）")


# --- graphs -----------------------------------------------------------------------------------


def is_observer_node(gm: GraphModule, node: Any) -> bool:
    """True for a ``call_module`` node of ``gm`` that runs an observer or fake-quantize module."""
    from common.graph_utils import is_observer

    if not isinstance(node, Node) or node.op != "call_module":
        return False
    try:
        return is_observer(gm.get_submodule(str(node.target)))
    except AttributeError:
        return False


def is_guard(node: Node) -> bool:
    """True for the ``_guards_fn`` node torch.export adds."""
    return node.op == "call_module" and str(node.target).startswith("_guards")


def _qscheme_name(qscheme: Any) -> str | None:
    return str(qscheme).removeprefix("torch.") if qscheme is not None else None


def observer_record(module: Any) -> dict[str, Any]:
    """What an observer instance is: class, dtype, range, scheme, and its qparams if calibrated."""
    record: dict[str, Any] = {
        "class": type(module).__name__,
        "dtype": str(getattr(module, "dtype", None)).removeprefix("torch."),
        "qmin": _int_or_none(getattr(module, "quant_min", None)),
        "qmax": _int_or_none(getattr(module, "quant_max", None)),
        "qscheme": _qscheme_name(getattr(module, "qscheme", None)),
        "ch_axis": _int_or_none(getattr(module, "ch_axis", None)),
    }
    min_val = getattr(module, "min_val", None)
    if isinstance(min_val, torch.Tensor) and min_val.numel() > 0 and bool(torch.isfinite(min_val).all()):
        scale, zero_point = module.calculate_qparams()
        record["scale"] = [round(float(s), 8) for s in scale.flatten()]
        record["zero_point"] = [int(z) for z in zero_point.flatten()]
    return record


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | torch.Tensor) and not isinstance(value, bool) else None


def describe_prepared(gm: GraphModule) -> dict[str, Any]:
    """The observers of a prepared graph and where they sit.

    ``observers``: one record per observer node in graph order: ``node``, the non-observer
    node it ``observes`` (through chained observers), ``instance`` (instances numbered in
    order of first appearance; a shared instance has one number), and the instance's record.
    ``edges``: for every non-observer node, its inputs as ``[source, [instance, ...]]``,
    the instances met walking from the source to the node (empty when unquantized).
    ``constants``: the names of the ``get_attr`` nodes.
    """
    numbers: dict[int, int] = {}
    instances: list[dict[str, Any]] = []
    observers = []
    for node in gm.graph.nodes:
        if not is_observer_node(gm, node):
            continue
        module = gm.get_submodule(str(node.target))
        if id(module) not in numbers:
            numbers[id(module)] = len(numbers)
            instances.append(observer_record(module))
        source = node.args[0]
        while isinstance(source, Node) and is_observer_node(gm, source):
            source = source.args[0]
        observers.append(
            {
                "node": node.name,
                "observes": source.name if isinstance(source, Node) else safe_text(source),
                "instance": numbers[id(module)],
            }
        )
    edges: dict[str, list[list[Any]]] = {}
    for node in gm.graph.nodes:
        if is_observer_node(gm, node) or node.op == "placeholder" or is_guard(node):
            continue
        inputs = []
        for arg in node.all_input_nodes:
            chain: list[int] = []
            source = arg
            while is_observer_node(gm, source):
                chain.append(numbers[id(gm.get_submodule(str(source.target)))])
                source = source.args[0]
            inputs.append([source.name, list(reversed(chain))])
        if inputs:
            edges[node.name] = inputs
    constants = [n.name for n in gm.graph.nodes if n.op == "get_attr"]
    return {"observers": observers, "instances": instances, "edges": edges, "constants": constants}


QDQ_WORDS = (("dequantize", "dq"), ("quantize", "q"))


def qdq_kind(node: Node) -> str | None:
    """``"q"`` / ``"dq"`` for quantize / dequantize call_function nodes, else None."""
    if node.op != "call_function":
        return None
    target = str(node.target)
    for word, kind in QDQ_WORDS:
        if word in target:
            return kind
    return None


def _qdq_step(gm: GraphModule, node: Node) -> list[Any]:
    kind = qdq_kind(node)
    scale = node.args[1] if len(node.args) > 1 else None
    zero_point = node.args[2] if len(node.args) > 2 else None
    if isinstance(scale, Node) and scale.op == "get_attr":  # per-channel: scales live in constants
        scale = getattr_value(gm, scale)
    if isinstance(zero_point, Node) and zero_point.op == "get_attr":
        zero_point = getattr_value(gm, zero_point)
    dtype = next((a for a in node.args if isinstance(a, torch.dtype)), None)
    return [kind, _number_list(scale), _number_list(zero_point), str(dtype).removeprefix("torch.")]


def getattr_value(gm: GraphModule, node: Node) -> Any:
    value: Any = gm
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value


def _number_list(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return [round(float(v), 8) for v in value.flatten()]
    if isinstance(value, float):
        return round(value, 8)
    if isinstance(value, int):
        return value
    return None


def describe_converted(gm: GraphModule) -> dict[str, Any]:
    """The quantize / dequantize paths of a converted graph.

    ``paths``: for every node that is not a q/dq op, its inputs as ``[source, [step, ...]]``
    where each step is ``[kind, scale, zero_point, dtype]`` from the source to the node.
    ``constants``: the dtype of every constant (``get_attr``) a dequantize reads.
    """
    paths: dict[str, list[list[Any]]] = {}
    constants: dict[str, str] = {}
    for node in gm.graph.nodes:
        if qdq_kind(node) is not None or node.op == "placeholder" or is_guard(node):
            continue
        inputs = []
        for arg in node.all_input_nodes:
            steps = []
            source = arg
            while qdq_kind(source) is not None:
                steps.append(_qdq_step(gm, source))
                source = source.args[0]
            if source.op == "get_attr" and steps:
                constants[source.name] = str(getattr_value(gm, source).dtype).removeprefix("torch.")
            inputs.append([source.name, list(reversed(steps))])
        if inputs:
            paths[node.name] = inputs
    return {"paths": paths, "constants": constants}


# --- annotations --------------------------------------------------------------------------------

ANNOTATION_KEY = "quantization_annotation"


def observer_ctor(ctor: Any, scalar: Callable[[Any], Any]) -> dict[str, Any]:
    """The observer (or fake-quant) a spec asks for: class path and keyword arguments (``scalar``-encoded)."""
    func, keywords = ctor, {}
    partial = getattr(ctor, "p", None)  # torchao's with_args() wrapper holds a functools.partial
    if isinstance(partial, functools.partial):
        func, keywords = partial.func, dict(partial.keywords or {})
    elif isinstance(ctor, functools.partial):
        func, keywords = ctor.func, dict(ctor.keywords or {})
    module = getattr(func, "__module__", None)
    name = getattr(func, "__qualname__", None)
    return {
        "class": f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else None,
        "kwargs": {str(key): scalar(item) for key, item in sorted(keywords.items())},
    }


def encode_scalar(value: Any) -> Any:
    """A spec field as plain data: dtypes and qschemes by name, numbers, tensors as lists."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.qscheme):
        return {"qscheme": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Tensor) and value.numel() <= 4096:
        return {"tensor": [float(v) for v in value.detach().flatten()], "shape": list(value.shape)}
    return {"unsupported": type(value).__name__}


def edge_ref(edge: Any) -> Any:
    """A spec's edge or node by name: ``{"node": n}`` or ``{"edge": [a, b]}`` (only real ``Node`` objects)."""
    if type(edge) is Node:
        return {"node": edge.name}
    if type(edge) is tuple and len(edge) == 2 and all(type(e) is Node for e in edge):
        return {"edge": [edge[0].name, edge[1].name]}
    return {"unsupported": type(edge).__name__}


SPEC_KINDS = ("spec", "shared", "derived", "fixed")
"""The ``kind`` of an encoded spec: ``QuantizationSpec``, ``SharedQuantizationSpec``,
``DerivedQuantizationSpec``, ``FixedQParamsQuantizationSpec`` (any other class: ``unsupported``)."""
SPEC_FIELDS = {
    "dtype": "dtype",
    "qmin": "quant_min",
    "qmax": "quant_max",
    "qscheme": "qscheme",
    "is_dynamic": "is_dynamic",
}
"""Key of an encoded spec → the torchao attribute it holds (every kind but ``shared`` has them all)."""
MAX_DERIVED_FROM = 16
"""Edges of a ``derived_from`` encoded at most."""


def encode_spec(
    spec: Any,
    scalar: Callable[[Any], Any] = encode_scalar,
    derive_fn: Callable[[Any], int] | None = None,
) -> Any:
    """The one encoding of a quantization spec as data (``None`` for "not quantized").

    ``kind`` is one of ``SPEC_KINDS``; the ``SPEC_FIELDS``, ``ch_axis``, ``scale`` and ``zero_point`` are read
    from the spec and written with ``scalar``; ``observer`` is the class path the spec asks for (with its
    keyword arguments), so two specs that differ only in observer differ here; ``of`` and ``from`` name edges
    (``edge_ref``). The evidence (``describe_spec``) and the sandbox's recording (``Recorder.spec`` in
    ``autograder/sandboxed/record.py``, which passes its own value encoder, and ``derive_fn`` that numbers a
    derived spec's function, written as ``fn``) both use it; ``Replay.spec`` in
    ``autograder/sandboxed/replay.py`` is its one decoder.
    """
    from torchao.quantization.pt2e.quantizer import (
        DerivedQuantizationSpec,
        FixedQParamsQuantizationSpec,
        QuantizationSpec,
        SharedQuantizationSpec,
    )

    if spec is None:
        return None
    kind = type(spec)
    if kind is SharedQuantizationSpec:
        return {"kind": "shared", "of": edge_ref(spec.edge_or_node)}
    if kind not in (QuantizationSpec, DerivedQuantizationSpec, FixedQParamsQuantizationSpec):
        return {"kind": "unsupported", "type": kind.__name__}
    fields = {key: scalar(getattr(spec, attribute, None)) for key, attribute in SPEC_FIELDS.items()}
    if kind is FixedQParamsQuantizationSpec:
        return {"kind": "fixed", **fields, "scale": scalar(spec.scale), "zero_point": scalar(spec.zero_point)}
    if kind is QuantizationSpec:
        observer = observer_ctor(spec.observer_or_fake_quant_ctr, scalar)
        return {"kind": "spec", **fields, "ch_axis": scalar(spec.ch_axis), "observer": observer}
    encoded = {
        "kind": "derived",
        **fields,
        "ch_axis": scalar(spec.ch_axis),
        "from": [edge_ref(e) for e in list(spec.derived_from)[:MAX_DERIVED_FROM]],
    }
    if derive_fn is not None:
        encoded["fn"] = derive_fn(spec)
    return encoded


def describe_spec(spec: Any) -> Any:
    """One quantization spec as evidence: ``encode_spec`` with plain scalars (dtypes and qschemes by name)."""
    return encode_spec(spec)


def sharing_groups(specs: dict[str, Any]) -> dict[str, list[str]]:
    """Positions joined by ``SharedQuantizationSpec``, from described specs by position.

    ``specs`` maps a position (an input edge ``"a → b"`` or an output ``"n 的輸出"``) to its
    ``describe_spec``. Every position, and every position a shared spec points to, maps to the members of
    its group (in the order they were met); ``min(group)`` names a group, the same however the sharing
    was written.
    """
    parent = {position: position for position in specs}

    def root(position: str) -> str:
        while parent[position] != position:
            position = parent[position]
        return position

    for position, spec in specs.items():
        if not isinstance(spec, dict) or spec.get("kind") != "shared":
            continue
        of = spec.get("of") or {}
        target = " → ".join(of["edge"]) if "edge" in of else f"{of['node']} 的輸出" if "node" in of else None
        if target is None:
            continue
        parent.setdefault(target, target)
        a, b = root(position), root(target)
        if a != b:
            parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for position in parent:
        members.setdefault(root(position), []).append(position)
    return {position: members[root(position)] for position in parent}


def edge_text(edge: Any) -> str:
    """An edge of ``describe_spec``'s evidence as a student reads it: ``a → b`` or ``a 的輸出``."""
    if isinstance(edge, dict) and isinstance(edge.get("edge"), list):
        return " → ".join(map(str, edge["edge"]))
    if isinstance(edge, dict) and "node" in edge:
        return f"{edge['node']} 的輸出"
    return repr(edge)


def derived_edges(spec: dict[str, Any]) -> list[str]:
    """The ``derived_from`` of a described derived spec, as sorted text."""
    return sorted(edge_text(edge) for edge in spec.get("from") or [])


def spec_text(spec: Any, none: str = "不量化（沒有標籤）") -> str:
    """A spec described by ``describe_spec``, in one line in the student's words:
    ``int8 [-128,127] per_tensor_affine MinMaxObserver``, ``SharedQuantizationSpec(a → b)``,
    ``DerivedQuantizationSpec(int32 [...] …，derived_from …)``. ``none`` is what ``None`` reads as."""
    if spec is None:
        return none
    if not isinstance(spec, dict):
        return repr(spec)

    def field(key: str) -> Any:
        value = spec.get(key)
        return value.get(key) if isinstance(value, dict) and key in value else value

    kind = spec.get("kind")
    if kind == "shared":
        return f"SharedQuantizationSpec({edge_text(spec.get('of'))})"
    head = f"{field('dtype')} [{spec.get('qmin')},{spec.get('qmax')}] {field('qscheme')}"
    if kind == "spec":
        observer = spec.get("observer") if isinstance(spec.get("observer"), dict) else {}
        name = str(observer.get("class")).rsplit(".", 1)[-1]
        kwargs = observer.get("kwargs") if isinstance(observer.get("kwargs"), dict) else {}
        extra = f"({', '.join(f'{k}={v}' for k, v in kwargs.items())})" if kwargs else ""
        axis = f" ch_axis={spec.get('ch_axis')}" if "channel" in head else ""
        return f"{head}{axis} {name}{extra}"
    if kind == "derived":
        return f"DerivedQuantizationSpec({head}，derived_from {'、'.join(derived_edges(spec))})"
    if kind == "fixed":
        return f"FixedQParamsQuantizationSpec({head}，scale={spec.get('scale')}，zero_point={spec.get('zero_point')})"
    return str(kind)


def describe_annotation(annotation: Any) -> Any:
    """A node's ``quantization_annotation`` as data, or ``{"kind": "unsupported"}`` for anything else."""
    from torchao.quantization.pt2e.quantizer import QuantizationAnnotation

    if annotation is None:
        return None
    if type(annotation) is not QuantizationAnnotation:
        return {"kind": "unsupported", "type": type(annotation).__name__}
    inputs = []
    mapping = annotation.input_qspec_map if isinstance(annotation.input_qspec_map, dict) else {}
    for source, spec in mapping.items():
        inputs.append([source.name if isinstance(source, Node) else safe_text(source, 80), describe_spec(spec)])
    return {
        "inputs": inputs,
        "output": describe_spec(annotation.output_qspec),
        "annotated": bool(annotation._annotated),
        "implicit_sharing": bool(annotation.allow_implicit_sharing),
    }


def describe_annotations(gm: GraphModule) -> dict[str, Any]:
    """Every annotated node of ``gm`` (by name) with its annotation as data, in graph order."""
    out: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if ANNOTATION_KEY in node.meta:
            out[node.name] = describe_annotation(node.meta[ANNOTATION_KEY])
    return out
