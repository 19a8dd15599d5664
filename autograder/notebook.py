"""Grading from inside a notebook: what nbgrader's hidden test cells call.

A hidden test cell runs ``grade("M03-4", "add_quantizer", globals(), final=True)``. The evidence is
collected here, in the notebook's kernel; the verdicts come from the hidden checks
run in a fresh process (``python -m autograder.judge``). The cell prints one line per
check and evaluates to the points earned, which nbgrader reads as partial credit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from autograder.exercises.base import collect, exercises_of
from autograder.report import exercise_report

NOTEBOOK_SEED = 0
"""Seed of the hidden cases in notebooks, fixed so that committed outputs are reproducible."""


def judge_in_subprocess(evidence: dict[str, Any], exercise: str) -> list[dict[str, Any]]:
    """Verdicts for ``exercise`` from a fresh Python process that never ran student code."""
    result = subprocess.run(
        [sys.executable, "-m", "autograder.judge", exercise],
        input=json.dumps(evidence, ensure_ascii=False),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"評分程式沒有正常結束：{result.stderr[-2000:]}")
    return json.loads(result.stdout)


class ChecksFailed(AssertionError):
    """Raised by a preview (``final=False``) when some checks fail."""


def grade(notebook: str, exercise: str, namespace: Mapping[str, Any], final: bool = True) -> float:
    """Collect evidence of ``exercise`` from ``namespace``, judge it, print a report, return the score.

    ``final=False`` is the preview a student runs while working: it raises
    ``ChecksFailed`` unless every check passes, so an unfinished exercise shows as a
    failing test. ``final=True`` (nbgrader's hidden test) never raises for a wrong
    answer: the score it returns is the partial credit.
    """
    spec = exercises_of(notebook)[exercise]
    evidence = {
        "notebook": notebook,
        "seed": NOTEBOOK_SEED,
        "exercises": {exercise: collect(spec, dict(namespace), NOTEBOOK_SEED)},
    }
    verdicts = judge_in_subprocess(evidence, exercise)
    print(exercise_report(spec.title, verdicts))
    score = float(sum(v["score"] for v in verdicts))
    failed = [v for v in verdicts if not v["passed"]]
    if failed and not final:
        raise ChecksFailed(f"還有 {len(failed)} 項檢查沒有通過（見上面的 ✗）")
    return score
