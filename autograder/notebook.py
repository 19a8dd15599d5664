"""Grading from inside a notebook: what nbgrader's hidden test cells call.

A hidden test cell runs ``grade("M03-4", "add_quantizer", globals(), final=True)``. As
everywhere in nbgrader, this runs in the student's own kernel: evidence is collected and
the hidden checks judge it right there. The cell prints one line per check and evaluates
to the points earned, which nbgrader reads as partial credit. (``pt2e-course grade``
does better: it runs the student's code in a sandbox and judges in a clean process.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autograder.judge import judge
from autograder.report import exercise_report
from autograder.untrusted.cases.base import collect, exercises_of

NOTEBOOK_SEED = 0
"""Seed of the hidden cases in notebooks, fixed so that committed outputs are reproducible."""


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
    verdicts = judge(evidence, [exercise])
    print(exercise_report(spec.title, verdicts))
    score = float(sum(v["score"] for v in verdicts))
    failed = [v for v in verdicts if not v["passed"]]
    if failed and not final:
        raise ChecksFailed(f"還有 {len(failed)} 項檢查沒有通過（見上面的 ✗）")
    return score
