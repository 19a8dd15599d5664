"""Building sample submissions from release/ notebooks: solved, untouched, or with a wrong solution."""

from __future__ import annotations

from pathlib import Path

import nbformat
from conftest import WrongSolution, wrong_solutions

from autograder.maintenance.answers import answered, release_notebook, source_answers  # noqa: F401 (re-exported)


def solved(notebook: str) -> nbformat.NotebookNode:
    return answered(notebook, source_answers(notebook))


def wrong_packs(notebook: str, everything: bool = False) -> list[dict[str, WrongSolution]]:
    """Submissions that each carry at most one wrong solution per exercise, covering every fixture
    marked ``via-nbgrader`` (``everything=True``: every fixture)."""
    by_exercise: dict[str, list[WrongSolution]] = {}
    for wrong in wrong_solutions():
        if wrong.notebook == notebook and (everything or wrong.via_nbgrader):
            by_exercise.setdefault(wrong.exercise, []).append(wrong)
    count = max((len(v) for v in by_exercise.values()), default=0)
    return [{e: ws[k] for e, ws in by_exercise.items() if k < len(ws)} for k in range(count)]


def with_wrong(notebook: str, pack: dict[str, WrongSolution]) -> nbformat.NotebookNode:
    answers = source_answers(notebook)
    answers.update({exercise: wrong.code for exercise, wrong in pack.items()})
    return answered(notebook, answers)


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
