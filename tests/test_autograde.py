"""nbgrader autograde grades the sample submissions with the hidden checks.

Solutions get full marks, untouched release notebooks get zero for every exercise, and
every wrong-solution fixture loses points on its exercise, graded by nbgrader itself
through the hidden test cells.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_course, nbgrader
from nbgrader.api import Gradebook
from submissions import release_notebook, solved, with_wrong, write, wrong_packs

from autograder.course import modules, notebook_id, source_notebooks


def exercise_scores(course: Path, module: str, student: str, notebook: str) -> dict[str, tuple[float, float]]:
    """grade_id of each hidden cell → (score, max score) as nbgrader recorded them."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(notebook, module, student)
        return {g.name.removesuffix("_hidden"): (g.score, g.max_score) for g in nb.grades if g.name.endswith("_hidden")}


@pytest.fixture(
    scope="module", params=[pytest.param(m, marks=pytest.mark.xdist_group(f"autograde-{m}")) for m in modules()]
)
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A course for one module with its sample class autograded by nbgrader."""
    module = request.param
    course = make_course(tmp_path_factory.mktemp(f"course-{module}"), [module])
    nbgrader(course, "generate_assignment", module, "--force")
    students: dict[str, dict] = {}
    for path in source_notebooks(module):
        notebook = notebook_id(path)
        write(solved(notebook), course / "submitted" / "solution" / module / path.name)
        write(release_notebook(notebook), course / "submitted" / "untouched" / module / path.name)
        for k, pack in enumerate(wrong_packs(notebook)):
            student = f"wrong-{notebook}-{k}"
            write(with_wrong(notebook, pack), course / "submitted" / student / module / path.name)
            students[student] = {"notebook": notebook, "pack": pack}
    nbgrader(course, "autograde", module, "--force")
    return module, course, students


def test_solutions_get_full_marks(graded) -> None:
    module, course, _ = graded
    for path in source_notebooks(module):
        scores = exercise_scores(course, module, "solution", notebook_id(path))
        assert scores, f"{path.stem}: no graded cells"
        for exercise, (score, maximum) in scores.items():
            assert maximum > 0 and score == maximum, f"{path.stem} {exercise}: {score} / {maximum}"


def test_untouched_notebooks_get_zero(graded) -> None:
    module, course, _ = graded
    for path in source_notebooks(module):
        for exercise, (score, maximum) in exercise_scores(course, module, "untouched", notebook_id(path)).items():
            assert score == 0, f"{path.stem} {exercise}: untouched notebook got {score} / {maximum}"


def test_wrong_solutions_lose_points(graded) -> None:
    module, course, students = graded
    for student, info in students.items():
        scores = exercise_scores(course, module, student, info["notebook"])
        for exercise, wrong in info["pack"].items():
            score, maximum = scores[exercise]
            assert score < maximum, f"{wrong.id} ({wrong.description}) kept full marks {score} / {maximum}"


def test_grade_gives_the_scores_nbgrader_gives(graded) -> None:
    """The sandboxed grader and nbgrader's hidden cells judge with the same checks."""
    from autograder.grading import class_folders, grade_class
    from autograder.notebook import NOTEBOOK_SEED

    module, course, _ = graded
    students, _ = grade_class(module, class_folders(course / "submitted", module), jobs=2, seed=NOTEBOOK_SEED)
    for student in students:
        for result in student.notebooks:
            if result.file is None:
                continue
            ours = {}
            for verdict in result.verdicts:
                ours[verdict["exercise"]] = ours.get(verdict["exercise"], 0.0) + verdict["score"]
            theirs = {
                ex: score
                for ex, (score, _) in exercise_scores(course, module, student.student, result.notebook).items()
            }
            assert ours == theirs, f"{student.student} {result.notebook}: grade {ours} vs nbgrader {theirs}"
