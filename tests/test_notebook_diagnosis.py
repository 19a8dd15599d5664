"""The notebook teaches before grading (issue 49): what a wrong answer shows where the student works.

Each wrong fixture runs through its exercise's public cases, as the preview cell of the notebook and a
failed self-check run them (``autograder.maintenance.fixtures.notebook_diagnosis``, the preview's own
code). A fixture's ``# notebook: no`` line says the notebook does not name its misconception first yet;
every other fixture must fail a public case and have its misconception named first, in the same words
the grader's feedback uses. Both directions are held, so the rates counted from those lines
(``pt2e-course diagnoses --notebook``, ``bench/notebook_diagnosis.py``) are true.
"""

from __future__ import annotations

import contextlib
import io

import pytest
from conftest import WrongSolution, wrong_solutions

from autograder.maintenance.fixtures import notebook_diagnosis


@pytest.mark.parametrize("wrong", wrong_solutions(), ids=lambda w: w.id)
def test_the_notebook_names_what_its_fixture_line_says(wrong: WrongSolution) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        seen = notebook_diagnosis(wrong)
    assert not seen.refused, f"{wrong.id}: the preview did not run it ({seen.refused})"
    if wrong.in_notebook:
        assert seen.failed_cases, f"{wrong.id}: every public case passes, so the notebook says nothing"
        assert seen.names(wrong.misconception), (
            f"{wrong.id}: the notebook should name {wrong.misconception!r} first, it names {list(seen.causes)}"
        )
    else:
        assert not seen.names(wrong.misconception), (
            f"{wrong.id}: the notebook names {wrong.misconception!r} now: remove its '# notebook: no' line"
        )


def test_the_reports_count_what_the_notebook_and_the_grader_say() -> None:
    """``pt2e-course diagnoses --notebook`` and ``--once`` on one notebook: a line per fixture and the module's rate."""
    from autograder.maintenance.fixtures import notebook_report, once_report

    fixtures = [w for w in wrong_solutions() if w.notebook == "M02-2"]
    named = notebook_report(["M02-2"])
    rows = [line for line in named.splitlines() if line.startswith(("✓", "✗"))]
    assert len(rows) == len(fixtures)
    assert sum(line.startswith("✓") for line in rows) == sum(w.in_notebook for w in fixtures)
    assert f"M02：筆記本點名對 {sum(w.in_notebook for w in fixtures)} / {len(fixtures)}" in named
    once = once_report(["M02-2"])
    rows = [line for line in once.splitlines() if line.startswith(("✓", "✗"))]
    assert len(rows) == len(fixtures) and all(" / " in line for line in rows)
    clean = sum(line.startswith("✓") for line in rows)
    assert f"M02：沒有通過的檢查都在它的原因底下 {clean} / {len(fixtures)}" in once
    assert all(("其他沒有通過的" in line) == line.startswith("✗") for line in rows)
