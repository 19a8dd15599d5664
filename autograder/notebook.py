"""Grading from inside a notebook: what the hidden part of the graded cells calls in ``source/``.

A graded cell first runs the student-side preview (``selfcheck.preview``: public cases,
shipped with the course). Inside ``### BEGIN HIDDEN TESTS`` (removed from the students'
copy) it then runs ``grade("M03-4", "add_quantizer", globals())``: the hidden cases on the
notebook seed, judged by the hidden checks, with one line printed per check. This runs only
where the checks are, in the instructor's checkout (``pt2e-course execute``, ``nbgrader
validate`` of ``source/``). A student's submission never reaches it: ``pt2e-course grade``
and ``nbgrader autograde`` (``autograder.integrations.nbgrader_bridge``) replace the hidden part by a
recording point in the sandbox and judge on the trusted side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autograder.engine.judge import judge
from autograder.reports.report import exercise_report
from autograder.sandboxed.cases.base import collect, exercises_of

NOTEBOOK_SEED = 0
"""Seed of the hidden cases in notebooks, fixed so that committed outputs are reproducible."""


def grade(notebook: str, exercise: str, namespace: Mapping[str, Any]) -> None:
    """Collect evidence of ``exercise`` from ``namespace`` on the hidden cases, judge it, print the report.

    Returns None (the cell shows no ``Out:`` value) and never raises for a wrong answer.
    """
    spec = exercises_of(notebook)[exercise]
    evidence = {
        "notebook": notebook,
        "seed": NOTEBOOK_SEED,
        "exercises": {exercise: collect(spec, dict(namespace), NOTEBOOK_SEED)},
    }
    verdicts = judge(evidence, [exercise])
    print(exercise_report(spec.title, verdicts))
