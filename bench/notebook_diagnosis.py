"""Issue 49's measure: how many wrong fixtures the notebook alone diagnoses with the grader's first cause.

Every wrong fixture runs through its exercise's public cases, the code the preview cell and a failed
self-check run (``autograder.maintenance.fixtures.notebook_diagnosis``); a fixture counts when a public
case fails and the first cause named is the one the fixture encodes (the grader's first cause, which
``tests/test_checks.py`` holds on every seed). Prints per module and course-wide, against the goal, and
how long the public cases took (the cost the preview adds to a notebook).

    .venv/bin/python bench/notebook_diagnosis.py [NOTEBOOK_OR_MODULE ...]
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(wanted: set[str]) -> None:
    import common.pt2e  # noqa: F401  (torchao's load messages before the table)
    from autograder.maintenance.fixtures import (
        NOTEBOOK_GOAL,
        ModuleRate,
        course_rate,
        notebook_diagnosis,
        wrong_solutions,
    )

    counts: dict[str, list[float]] = {}
    for wrong in wrong_solutions():
        if wanted and not wanted & {wrong.notebook, wrong.module}:
            continue
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            seen = notebook_diagnosis(wrong)
        tally = counts.setdefault(wrong.module, [0, 0, 0, 0.0])
        tally[0] += seen.names(wrong.misconception)
        tally[1] += 1
        tally[2] += not seen.failed_cases
        tally[3] += time.perf_counter() - start
    rates = [ModuleRate(module, int(t[0]), int(t[1])) for module, t in sorted(counts.items())]
    print(f"{'module':<8}{'named first':>14}{'rate':>7}{'all public pass':>17}{'seconds':>9}")
    for rate in rates:
        t = counts[rate.module]
        print(f"{rate.module:<8}{rate.diagnosed:>8} / {rate.total:<3}{rate.rate:>7.0%}{int(t[2]):>17}{t[3]:>9.1f}")
    whole = course_rate(rates)
    print(f"{'all':<8}{whole.diagnosed:>8} / {whole.total:<3}{whole.rate:>7.0%}")
    print(f"goal: {NOTEBOOK_GOAL[0]:.0%} course-wide, {NOTEBOOK_GOAL[1]:.0%} in every module")


if __name__ == "__main__":
    main(set(sys.argv[1:]))
