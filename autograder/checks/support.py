"""What the check modules share: the ``check`` and ``detects`` decorators and readable comparisons.

A failed comparison raises ``AssertionError`` whose message is written for the
student: what was expected and what was seen, in Chinese, with no check source.

A check module also holds the *detectors* of its exercises' misconceptions (``@detects``): predicates
over the same ``seen`` and ``expected`` evidence that recognise one misconception of the exercise's
record (``Exercise.misconceptions``, ``selfcheck.misconceptions``). They stay here, with the checks:
they judge hidden evidence. ``autograder.engine.diagnose`` runs them when a check of the exercise fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from common.explain import error_sentence
from selfcheck import diagnosis
from selfcheck.casekit import notebook_of
from selfcheck.evidence import derived_edges, spec_text

__all__ = ["derived_edges", "spec_text"]  # spec helpers live beside describe_spec; the checks import them from here

CHECKS: dict[tuple[str, str], list[CheckInfo]] = {}


@dataclass(frozen=True)
class CheckInfo:
    """One check: the exercise it judges, its points and its Chinese name."""

    notebook: str
    exercise: str
    test: str
    points: float
    name: str

    @property
    def id(self) -> str:
        return f"{self.notebook}:{self.exercise}:{self.test}"


def check(exercise: str, points: float, name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a test function as a graded check of ``exercise`` worth ``points``.

    The notebook is the check module's (``autograder.checks.test_m03_4`` judges M03-4: ``notebook_of``).
    """

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        notebook = notebook_of(fn.__module__)
        info = CheckInfo(notebook, exercise, fn.__name__, float(points), name)
        fn.check_info = info  # type: ignore[attr-defined]
        CHECKS.setdefault((notebook, exercise), []).append(info)
        return pytest.mark.pt2e_check(info)(fn)

    return wrap


def checks_of(notebook: str) -> dict[str, list[CheckInfo]]:
    """Exercise key → its checks, for ``notebook``, in the order they are written.

    Imports the notebook's check module first. The grader judges several notebooks on threads, and
    importing one notebook's checks adds to ``CHECKS`` while another thread reads it: read a copy.
    """
    import importlib

    from selfcheck.casekit import module_name

    importlib.import_module(f"autograder.checks.test_{module_name(notebook)}")
    return {exercise: list(infos) for (nb, exercise), infos in list(CHECKS.items()) if nb == notebook}


@dataclass(frozen=True)
class DetectorInfo:
    """A detector: the misconception of ``exercise`` it recognises, and the checks that misconception fails.

    ``explains``: the checks (test function names) a student with this misconception fails; empty means
    every check of the exercise. A detector is asked only when one of them failed, and the feedback lists
    the failed checks it explains under the diagnosis instead of repeating their symptoms.
    """

    notebook: str
    exercise: str
    key: str
    fn: Callable[[Any, Any], bool]
    explains: tuple[str, ...]

    def covers(self, test: str) -> bool:
        return not self.explains or test in self.explains


DETECTORS: dict[tuple[str, str], list[DetectorInfo]] = {}


def detects(
    exercise: str, key: str, *, explains: tuple[str, ...] = ()
) -> Callable[[Callable[[Any, Any], bool]], Callable[[Any, Any], bool]]:
    """Register ``fn(seen, expected) -> bool`` as the detector of misconception ``key`` of ``exercise``.

    The notebook is the module's (``notebook_of``). ``explains``: see ``DetectorInfo``. The function
    stays callable as it was (a detector may call another).
    """

    def wrap(fn: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
        notebook = notebook_of(fn.__module__)
        registered = DETECTORS.setdefault((notebook, exercise), [])
        if any(info.key == key for info in registered):
            raise ValueError(f"{notebook} {exercise}: two detectors of {key!r}")
        registered.append(DetectorInfo(notebook, exercise, key, fn, tuple(explains)))
        return fn

    return wrap


def detectors_of(notebook: str) -> dict[str, list[DetectorInfo]]:
    """Exercise key → its detectors, for ``notebook`` (importing its check module first; a copy, as ``checks_of``)."""
    checks_of(notebook)
    return {exercise: list(infos) for (nb, exercise), infos in list(DETECTORS.items()) if nb == notebook}


class Fail(AssertionError):
    """A failed check, with its message for the student."""


def value(evidence: dict[str, Any], case: str) -> Any:
    """The value one case produced; fails with the student's error when the case raised."""
    if not isinstance(evidence, dict):
        raise Fail("證據格式不對")
    if "missing" in evidence:
        names = "、".join(map(str, evidence["missing"]))
        raise Fail(f"找不到 {names}：請確認定義它的儲存格執行過、名稱沒有改")
    if "refused" in evidence:  # the recording asked for something outside the allow-list (sandboxed.allowed)
        raise Fail(str(evidence["refused"]))
    cases = evidence.get("cases")
    if not isinstance(cases, dict) or case not in cases or not isinstance(cases[case], dict):
        raise Fail("沒有收到這一項的結果（程式在這之前就停了）")
    result = cases[case]
    if "error" in result:
        if result.get("error") == "EvidenceError" and result.get("message"):
            raise Fail(str(result["message"]))  # the case's own sentence about what it expected (a wrong type, shape…)
        raise Fail(error_sentence(str(result.get("error")), str(result.get("message", ""))))
    if "value" not in result:
        raise Fail("證據格式不對")
    return result["value"]


def expect(condition: bool, message: str) -> None:
    """Fail with ``message`` unless ``condition``."""
    if not condition:
        raise Fail(message)


def expect_equal(got: Any, want: Any, what: str) -> None:
    """Fail with "what 應該是 want，你的是 got" unless the two are equal."""
    if got != want:
        raise Fail(f"{what} 應該是 {want!r}，你的是 {got!r}")


# --- prepared graphs ------------------------------------------------------------------------------


def chain_text(chain: list[int]) -> str:
    """How an edge is observed, as the end of a sentence: ``不量化（沒有 observer）`` or ``經過 observer 實例 #0 → #1``."""
    if not chain:
        return "不量化（沒有 observer）"
    return "經過 observer 實例 " + " → ".join(f"#{i}" for i in chain)


def instance_text(record: dict[str, Any]) -> str:
    text = f"{record.get('dtype')} [{record.get('qmin')},{record.get('qmax')}] {record.get('qscheme')}"
    if record.get("ch_axis") is not None and "channel" in str(record.get("qscheme")):
        text += f" ch_axis={record.get('ch_axis')}"
    return text


def counts_text(prepared: dict[str, Any]) -> str:
    observers = prepared.get("observers", [])
    return f"{len(observers)} 個 observer node、{len(prepared.get('instances', []))} 個實例"


def compare_observers(got: dict[str, Any], want: dict[str, Any], where: str, *, records: bool = True) -> None:
    """The same observers on the same edges, shared the same way (and, with ``records``, of the same kind)."""
    try:
        got_edges, want_edges = got["edges"], want["edges"]
        got_instances = got["instances"]
    except (KeyError, TypeError):
        raise Fail(f"{where}：證據格式不對") from None
    for consumer, want_inputs in want_edges.items():
        got_inputs = got_edges.get(consumer)
        if got_inputs is None:
            raise Fail(f"{where}：圖上找不到 {consumer}")
        got_by_source = {src: chain for src, chain in got_inputs}
        for source, want_chain in want_inputs:
            got_chain = got_by_source.get(source)
            if got_chain != want_chain:
                seen = chain_text(got_chain) if got_chain is not None else "這條邊不見了"
                raise Fail(
                    f"{where}：邊 {source} → {consumer} 應該{chain_text(want_chain)}，你的{seen}"
                    f"（整張圖應該有 {counts_text(want)}，你的有 {counts_text(got)}）"
                )
    if len(got_edges) != len(want_edges) or counts_text(got) != counts_text(want):
        raise Fail(f"{where}：整張圖應該有 {counts_text(want)}，你的有 {counts_text(got)}")
    if records:
        for index, want_record in enumerate(want["instances"]):
            got_record = got_instances[index]
            got_kind, want_kind = instance_text(got_record), instance_text(want_record)
            if got_kind != want_kind:
                raise Fail(f"{where}：observer 實例 #{index} 應該是 {want_kind}，你的是 {got_kind}")


def instances_reading(prepared: dict[str, Any], consumer: str) -> set[int]:
    """The observer instances on the input edges of ``consumer``."""
    return {i for _, chain in prepared["edges"].get(consumer, []) for i in chain}


# --- converted graphs -----------------------------------------------------------------------------


def step_text(step: list[Any]) -> str:
    kind, scale, zero_point, dtype = step
    return f"{kind}(scale={_short(scale)}, zp={_short(zero_point)}, {dtype})"


def _short(number: Any) -> str:
    if isinstance(number, list):
        return "[" + ", ".join(_short(n) for n in number[:4]) + (", …" if len(number) > 4 else "") + "]"
    if isinstance(number, float):
        return f"{number:.6g}"
    return str(number)


def path_text(steps: list[list[Any]]) -> str:
    """The q/dq steps on an edge, as the end of a sentence: ``經過 q(…) → dq(…)`` or ``沒有 q/dq``."""
    return "經過 " + " → ".join(step_text(s) for s in steps) if steps else "沒有 q/dq"


def close_numbers(a: Any, b: Any, rel: float) -> bool:
    """``a`` and ``b`` equal, their floats within ``rel`` (relative), lists item by item."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close_numbers(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


def compare_paths(got: dict[str, Any], want: dict[str, Any], where: str, consumers: list[str] | None = None) -> None:
    """The same q/dq steps (kind, dtype, scale and zero point within 1e-5) on every input edge."""
    try:
        got_paths, want_paths = got["paths"], want["paths"]
    except (KeyError, TypeError):
        raise Fail(f"{where}：證據格式不對") from None
    for consumer in consumers or list(want_paths):
        got_inputs = {src: steps for src, steps in got_paths.get(consumer, [])}
        for source, want_steps in want_paths[consumer]:
            got_steps = got_inputs.get(source)
            if got_steps is None or not close_numbers(got_steps, want_steps, 1e-5):
                seen = path_text(got_steps) if got_steps is not None else "這條邊不見了"
                raise Fail(f"{where}：{source} → {consumer} 應該{path_text(want_steps)}，你的{seen}")


def _relabel(prepared: dict[str, Any], consumers: list[str]) -> tuple[dict[str, dict[str, list[int]]], list[Any]]:
    """The chains into ``consumers``, instances renumbered by first appearance among them."""
    numbers: dict[int, int] = {}
    records: list[Any] = []
    chains: dict[str, dict[str, list[int]]] = {}
    for consumer in consumers:
        chains[consumer] = {}
        for source, chain in prepared["edges"].get(consumer, []):
            renumbered = []
            for instance in chain:
                if instance not in numbers:
                    numbers[instance] = len(numbers)
                    records.append(prepared["instances"][instance])
                renumbered.append(numbers[instance])
            chains[consumer][source] = renumbered
    return chains, records


def compare_edges(got: dict[str, Any], want: dict[str, Any], where: str, consumers: list[str]) -> None:
    """Like ``compare_observers``, restricted to the input edges of ``consumers``.

    Instances are renumbered within those edges, so a difference elsewhere in the
    graph does not count here.
    """
    try:
        got_chains, got_records = _relabel(got, consumers)
        want_chains, want_records = _relabel(want, consumers)
    except (KeyError, TypeError, IndexError):
        raise Fail(f"{where}：證據格式不對") from None
    for consumer in consumers:
        for source, want_chain in want_chains[consumer].items():
            got_chain = got_chains[consumer].get(source)
            if got_chain != want_chain:
                seen = chain_text(got_chain) if got_chain is not None else "這條邊不見了"
                raise Fail(f"{where}：邊 {source} → {consumer} 應該{chain_text(want_chain)}，你的{seen}")
    for index, want_record in enumerate(want_records):
        got_kind, want_kind = instance_text(got_records[index]), instance_text(want_record)
        if got_kind != want_kind:
            raise Fail(f"{where}：observer 實例 #{index} 應該是 {want_kind}，你的是 {got_kind}")


# --- arguments a reading exercise must leave alone ------------------------------------------------


def expect_unchanged(changed: Any, function: str) -> None:
    """Fail when ``function`` changed the graph it was handed.

    ``changed`` is what the cases recorded (``selfcheck.public.m01_1.graph_changes``): ``{where: [changes]}``
    (or one list of changes). Only the first changed graph is named.
    """
    if isinstance(changed, list):
        changed = {"": changed} if changed else {}
    if not isinstance(changed, dict):
        raise Fail("證據格式不對")
    for where, changes in changed.items():
        if changes:
            place = f"{where}：" if where else ""
            raise Fail(
                f"{place}{function} 改了傳進來的圖（{'；'.join(map(str, changes))}）。"
                "這個函式只該讀圖、回答問題，圖要原封不動留給呼叫的人"
            )


# --- reading evidence for detectors ---------------------------------------------------------------
# A detector never raises on purpose: evidence of an unexpected shape means "not recognised"
# (``selfcheck.diagnosis.recognises`` turns an exception into False).


def raised(seen: Any, errors: tuple[str, ...] = (), *, cases: tuple[str, ...] = (), says: str = "") -> bool:
    """True when a case (one of ``cases``, any when empty) raised one of ``errors`` (any when empty),
    with ``says`` in its message."""
    for case, error in diagnosis.errors(seen).items():
        if cases and case not in cases:
            continue
        if errors and error not in errors:
            continue
        if says and says not in diagnosis.error_message(seen, case):
            continue
        return True
    return False


def label_pairs(
    seen: Any, expected: Any, *, cases: tuple[str, ...] = ()
) -> list[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]]:
    """``(place, got, want)`` for every labels record (``label_groups``: ``positions``, ``annotated``) at the
    same place in both evidences; ``cases``: only under these cases."""
    return [
        (place, got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "positions")
        if isinstance(got.get("positions"), dict)
        and isinstance(want.get("positions"), dict)
        and (not cases or place[0] in cases)
    ]


def labelled_nodes(labels: dict[str, Any]) -> set[str]:
    """The nodes that carry a label (an input edge or their output) in a ``label_groups`` record."""
    return {str(entry.get("node")) for entry in labels["positions"].values() if isinstance(entry, dict)}


def output_labelled(labels: dict[str, Any]) -> set[str]:
    """The nodes whose output is labelled."""
    return {
        str(entry.get("node"))
        for entry in labels["positions"].values()
        if isinstance(entry, dict) and entry.get("output")
    }


def node_groups(labels: dict[str, Any], node: str) -> tuple[list[str], str | None]:
    """The sharing groups of ``node``'s input edges (in position order) and of its output (None if unlabelled)."""
    inputs, output = [], None
    for _position, entry in sorted(labels["positions"].items()):
        if not isinstance(entry, dict) or entry.get("node") != node:
            continue
        if entry.get("output"):
            output = str(entry.get("group"))
        else:
            inputs.append(str(entry.get("group")))
    return inputs, output


def shared_nodes(labels: dict[str, Any]) -> list[str]:
    """The nodes whose labelled positions (inputs and output) all share one group, at least two of them."""
    found = []
    for node in sorted(labelled_nodes(labels)):
        inputs, output = node_groups(labels, node)
        groups = [*inputs, *([output] if output is not None else [])]
        if len(groups) >= 2 and len(set(groups)) == 1:
            found.append(node)
    return found


def constant_labelled(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """The student labelled an edge from a model constant (``get_attr``) that the key leaves alone."""
    return any(
        isinstance(entry, dict) and entry.get("constant") and position not in want["positions"]
        for position, entry in got["positions"].items()
    )


def marks_missing(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """A node the key marks ``_annotated`` is not marked by the student (while it is labelled)."""
    got_marks, want_marks = got.get("annotated") or {}, want.get("annotated") or {}
    return any(want_marks.get(node) and not got_marks.get(node) and node in got_marks for node in want_marks)


def spec_field(entry: Any, field: str) -> Any:
    """A field of the spec of a ``label_groups`` position (``qmin``, ``qmax``, …)."""
    spec = entry.get("spec") if isinstance(entry, dict) else None
    return spec.get(field) if isinstance(spec, dict) else None


def observer_classes(prepared: dict[str, Any]) -> set[str]:
    """The observer classes of a ``describe_prepared`` record."""
    return {str(record.get("class")) for record in prepared.get("instances", []) if isinstance(record, dict)}


def other_observer_class(seen: Any, expected: Any) -> bool:
    """Some prepared graph's observers are of another class than the key's (at the same place)."""
    return any(
        observer_classes(got) and observer_classes(got) != observer_classes(want)
        for _, got, want in diagnosis.aligned(seen, expected, "instances")
    )
