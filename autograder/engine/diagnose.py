"""Naming the likely cause of an exercise's failed checks: the misconceptions its detectors recognise.

``attach_causes`` runs after the checks of one exercise have judged the evidence. When some check
failed, each detector of the exercise (``@detects`` in its check module) whose misconception explains
one of the failed checks looks at the same ``seen`` and ``expected`` evidence. Those that recognise it
are the exercise's causes, most likely first: the order of the exercise's record
(``Exercise.misconceptions``, most specific first). Every verdict of the exercise then carries:

- ``causes``: those keys (the same list on every verdict of the exercise; empty when none was recognised);
- ``explained_by``: on a failed verdict, the first of the *shown* causes (``SHOWN_CAUSES``) that explains
  this check, else None. The feedback states the cause once and lists the checks it explains briefly;
  a failed check no shown cause explains keeps its own message.

This runs in the judging process, on plain data; a detector that raises counts as not recognising.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import DetectorInfo, detectors_of
from selfcheck.diagnosis import recognises

SHOWN_CAUSES = 2
"""At most this many causes are named: the most likely, and a second when one is as plausible."""


def test_name(verdict: dict[str, Any]) -> str:
    """The check's test function name, from its id ``M03-4:add_quantizer:test_add_self``."""
    return str(verdict.get("id", "")).rsplit(":", 1)[-1]


def _answered(seen: Any) -> bool:
    return isinstance(seen, dict) and isinstance(seen.get("cases"), dict) and "missing" not in seen


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


def attach_causes(notebook: str, exercise: str, seen: Any, expected: Any, verdicts: list[dict[str, Any]]) -> None:
    """Write ``causes`` and ``explained_by`` (see the module docstring) into the verdicts of ``exercise``."""
    mine = [v for v in verdicts if v.get("exercise") == exercise]
    failed = {test_name(v) for v in mine if not v.get("passed")}
    found = recognised(notebook, exercise, seen, expected, failed)
    shown = found[:SHOWN_CAUSES]
    for verdict in mine:
        verdict["causes"] = [info.key for info in found]
        if verdict.get("passed"):
            verdict["explained_by"] = None
            continue
        test = test_name(verdict)
        verdict["explained_by"] = next((info.key for info in shown if info.covers(test)), None)
