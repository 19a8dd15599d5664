"""Naming the likely cause of an exercise's failed checks: the misconceptions its detectors recognise.

``attach_causes`` runs after the checks of one exercise have judged the evidence. When some check
failed, each detector of the exercise (``@detects`` in its check module) whose misconception explains
one of the failed checks looks at the same ``seen`` and ``expected`` evidence. Those that recognise it
are the exercise's causes, most likely first: the order of the exercise's record
(``Exercise.misconceptions``, most specific first). Every verdict of the exercise then carries:

- ``causes``: the keys of the causes shown (the same list on every verdict of the exercise; empty when none
  was recognised): the most likely, then at most one more (``SHOWN_CAUSES``) and only when it explains a failed
  check the ones before it do not. A second guess whose checks the first cause already explains adds nothing the
  evidence asks for (a student whose add shares nothing is not also told "the output is not shared"); two
  independent mistakes are two causes, each with its own checks;
- ``explained_by``: on a failed verdict, the first of the shown causes that explains this check, else None.
  The feedback states the cause once and lists the checks it explains briefly; a failed check no shown cause
  explains keeps its own message.

This runs in the judging process, on plain data; a detector that raises counts as not recognising.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import DetectorInfo, detectors_of
from selfcheck import diagnosis
from selfcheck.diagnosis import recognises


def test_name(verdict: dict[str, Any]) -> str:
    """The check's test function name, from its id ``M03-4:add_quantizer:test_add_self``."""
    return str(verdict.get("id", "")).rsplit(":", 1)[-1]


def _answered(seen: Any) -> bool:
    """The student's answer ran: case by case, or refused as a whole (``selfcheck.diagnosis.refusal``)."""
    if not isinstance(seen, dict) or "missing" in seen:
        return False
    return isinstance(seen.get("cases"), dict) or isinstance(seen.get("refused"), str)


def _record_order(notebook: str, exercise: str) -> list[str]:
    from selfcheck.preview import public_exercises

    record = public_exercises(notebook).get(exercise)
    return [m.key for m in record.misconceptions] if record is not None else []


def recognised(notebook: str, exercise: str, seen: Any, expected: Any, failed: set[str]) -> list[DetectorInfo]:
    """The detectors of ``exercise`` that recognise ``seen`` and explain one of the ``failed`` checks, ranked."""
    if not failed or not _answered(seen):
        return []
    order = _record_order(notebook, exercise)
    found = [
        info
        for info in detectors_of(notebook).get(exercise, [])
        if any(info.covers(test) for test in failed) and recognises(info.fn, seen, expected)
    ]
    return sorted(found, key=lambda info: order.index(info.key) if info.key in order else len(order))


def independent(found: list[DetectorInfo], failed: set[str]) -> list[DetectorInfo]:
    """The first of ``found``, then each next one that explains a failed check none before it explains (at most
    ``SHOWN_CAUSES``): ``selfcheck.diagnosis.independent``, the rule the notebook's public causes follow too."""
    return diagnosis.independent(found, sorted(failed), lambda info, test: info.covers(test))


def attach_causes(notebook: str, exercise: str, seen: Any, expected: Any, verdicts: list[dict[str, Any]]) -> None:
    """Write ``causes`` and ``explained_by`` (see the module docstring) into the verdicts of ``exercise``."""
    mine = [v for v in verdicts if v.get("exercise") == exercise]
    failed = {test_name(v) for v in mine if not v.get("passed")}
    shown = independent(recognised(notebook, exercise, seen, expected, failed), failed)
    for verdict in mine:
        verdict["causes"] = [info.key for info in shown]
        if verdict.get("passed"):
            verdict["explained_by"] = None
            continue
        test = test_name(verdict)
        verdict["explained_by"] = next((info.key for info in shown if info.covers(test)), None)


MAX_DRAWN_POSITIONS = 40
"""A case with more labelled positions than this is not drawn: the picture would not help."""


def _shares_like(got: dict[str, Any], want: dict[str, Any], position: str) -> bool:
    def partners(positions: dict[str, Any]) -> list[str]:
        group = positions[position].get("group")
        return sorted(p for p, e in positions.items() if e.get("group") == group and p != position)

    return partners(got) == partners(want)


def _labels_differ(got: dict[str, Any], want: dict[str, Any]) -> bool:
    mine, key = got["positions"], want["positions"]
    if set(mine) != set(key):
        return True
    return any(mine[p].get("spec") != key[p].get("spec") or not _shares_like(mine, key, p) for p in key)


def failing_case(seen: Any, expected: Any) -> dict[str, Any] | None:
    """The smallest hidden case whose labels (``label_groups``) the student got wrong, for the feedback's drawing:
    ``{"place": [case, …], "got": labels, "want": labels}``; None when the exercise has no labels or none differ."""
    candidates = []
    for place, got, want in diagnosis.aligned(seen, expected, "positions"):
        records = got.get("positions"), want.get("positions")
        if not all(isinstance(r, dict) and all(isinstance(e, dict) for e in r.values()) for r in records):
            continue
        size = len(set(records[0]) | set(records[1]))
        if 0 < size <= MAX_DRAWN_POSITIONS and _labels_differ(got, want):
            candidates.append((size, [str(step) for step in place], got, want))
    if not candidates:
        return None
    _, place, got, want = min(candidates, key=lambda c: (c[0], c[1]))
    return {"place": place, "got": {"positions": got["positions"]}, "want": {"positions": want["positions"]}}
