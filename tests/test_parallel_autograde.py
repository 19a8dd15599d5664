"""``nbgrader autograde`` in parallel (issue 51, ``autograder.integrations.parallel_autograde``): the same class,
graded with one job (nbgrader's own order) and with two, leaves the same gradebook and the same ``autograded/``
notebooks; the parallel run grades every notebook once, before nbgrader's loop reaches it; ``--student`` and a
second run without ``--force`` behave as nbgrader's."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import make_course, tool_env
from nbgrader.api import Gradebook
from submissions import release_notebook, solved, with_wrong, write, wrong_packs

MODULE = "M01"
SEED = 5
STUDENTS = ("ada", "bo", "chen")


def _class(course: Path) -> None:
    """ada hands in the solutions, bo the untouched release notebooks, chen one wrong answer per notebook."""
    from autograder.course import notebook_id, source_notebooks

    for path in source_notebooks(MODULE):
        notebook = notebook_id(path)
        folder = course / "submitted"
        write(solved(notebook), folder / "ada" / MODULE / f"{notebook}.ipynb")
        write(release_notebook(notebook), folder / "bo" / MODULE / f"{notebook}.ipynb")
        pack = (wrong_packs(notebook, everything=True) or [{}])[0]
        write(with_wrong(notebook, pack), folder / "chen" / MODULE / f"{notebook}.ipynb")


def _autograde(course: Path, jobs: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**tool_env(course / "gradebook.db"), "PT2E_SEED": str(SEED), "PT2E_JOBS": str(jobs)}
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", MODULE, *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _scores(course: Path) -> dict[tuple[str, str], tuple[float, float]]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {
            (s.student.id, nb.name): (nb.score, nb.max_score)
            for s in gb.assignment_submissions(MODULE)
            for nb in s.notebooks
        }


def _graded_outputs(course: Path, student: str) -> dict[str, list]:
    """Per notebook, the outputs of its graded cells in autograded/ (what generate_feedback shows)."""
    found = {}
    for path in sorted((course / "autograded" / student / MODULE).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        found[path.stem] = [
            cell.outputs
            for cell in nb.cells
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
        ]
    return found


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    serial = make_course(tmp_path_factory.mktemp("serial"), [MODULE])
    _class(serial)
    parallel = tmp_path_factory.mktemp("parallel")
    shutil.copytree(serial, parallel, dirs_exist_ok=True)
    _autograde(serial, 1)
    run = _autograde(parallel, 2)
    return serial, parallel, run


def test_the_parallel_run_leaves_what_the_serial_run_leaves(two_runs) -> None:
    serial, parallel, _ = two_runs
    scores = _scores(serial)
    assert scores == _scores(parallel)
    assert {s for s, _ in scores} == set(STUDENTS)
    full = {nb: total for (s, nb), (score, total) in scores.items() if s == "ada"}
    assert all(scores[("ada", nb)][0] == full[nb] > 0 for nb in full), scores
    assert all(scores[("bo", nb)][0] == 0 for nb in full), scores
    assert sum(scores[("chen", nb)][0] for nb in full) < sum(full.values()), scores
    for student in STUDENTS:
        assert _graded_outputs(serial, student) == _graded_outputs(parallel, student), student


def test_the_parallel_run_grades_each_notebook_before_nbgraders_loop_and_once(two_runs) -> None:
    _, _, run = two_runs
    log = run.stdout + run.stderr
    assert "平行評分：9 本 notebook，同時 2 本" in log, log[-3000:]
    assert "[9/9]" in log  # the progress display of pt2e-course grade
    # each notebook was graded once: the loop took every prefetched result (none graded again)
    assert "稍後再評一次" not in log and "改成一本一本評" not in log


def test_student_and_a_second_run_behave_as_nbgraders(two_runs) -> None:
    _, parallel, _ = two_runs
    again = _autograde(parallel, 2)
    assert "Skipping existing assignment" in again.stdout + again.stderr
    assert "平行評分" not in again.stdout + again.stderr, "nothing to grade: nothing graded"
    before = _scores(parallel)
    one = _autograde(parallel, 2, "--student=chen", "--force")
    log = one.stdout + one.stderr
    assert "平行評分：3 本 notebook" in log, log[-2000:]  # chen's three, no one else's
    assert _scores(parallel) == before  # the same seed: the same grades
