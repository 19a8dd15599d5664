"""What the check modules share: the ``check`` decorator and readable comparisons.

A failed comparison raises ``AssertionError`` whose message is written for the
student: what was expected and what was seen, in Chinese, with no check source.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

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
        raise Fail(f"執行時出錯：{result.get('error')}: {result.get('message', '')}")
    if "value" not in result:
        raise Fail("證據格式不對")
    return result["value"]


def expect(condition: bool, message: str) -> None:
    """Fail with ``message`` unless ``condition``."""
    if not condition:
        raise Fail(message)


def expect_equal(got: Any, want: Any, what: str) -> None:
    """Fail with "what：預期 want，看到 got" unless the two are equal."""
    if got != want:
        raise Fail(f"{what}：預期 {want!r}，看到 {got!r}")


# --- prepared graphs ------------------------------------------------------------------------------


def chain_text(chain: list[int]) -> str:
    """How an edge is observed: ``不量化`` or ``observer 實例 #0 → #1``."""
    if not chain:
        return "不量化（沒有 observer）"
    return "observer 實例 " + " → ".join(f"#{i}" for i in chain)


def instance_text(record: dict[str, Any]) -> str:
    text = f"{record.get('dtype')} [{record.get('qmin')},{record.get('qmax')}] {record.get('qscheme')}"
    if record.get("ch_axis") is not None and "channel" in str(record.get("qscheme")):
        text += f" ch_axis={record.get('ch_axis')}"
    return text


def counts_text(prepared: dict[str, Any]) -> str:
    observers = prepared.get("observers", [])
    return f"observer node {len(observers)} 個、實例 {len(prepared.get('instances', []))} 個"


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
                    f"{where}：邊 {source} → {consumer} 預期 {chain_text(want_chain)}，看到 {seen}"
                    f"（預期 {counts_text(want)}，看到 {counts_text(got)}）"
                )
    if len(got_edges) != len(want_edges) or counts_text(got) != counts_text(want):
        raise Fail(f"{where}：預期 {counts_text(want)}，看到 {counts_text(got)}")
    if records:
        for index, want_record in enumerate(want["instances"]):
            got_record = got_instances[index]
            got_kind, want_kind = instance_text(got_record), instance_text(want_record)
            if got_kind != want_kind:
                raise Fail(f"{where}：observer 實例 #{index} 預期 {want_kind}，看到 {got_kind}")


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
    return " → ".join(step_text(s) for s in steps) if steps else "沒有 q/dq"


def _close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
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
            if got_steps is None or not _close(got_steps, want_steps, 1e-5):
                seen = path_text(got_steps) if got_steps is not None else "這條邊不見了"
                raise Fail(f"{where}：{source} → {consumer} 預期 {path_text(want_steps)}，看到 {seen}")


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
                raise Fail(f"{where}：邊 {source} → {consumer} 預期 {chain_text(want_chain)}，看到 {seen}")
    for index, want_record in enumerate(want_records):
        got_kind, want_kind = instance_text(got_records[index]), instance_text(want_record)
        if got_kind != want_kind:
            raise Fail(f"{where}：observer 實例 #{index} 預期 {want_kind}，看到 {got_kind}")


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
