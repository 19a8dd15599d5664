"""Building sample submissions from release/ notebooks: solved, untouched, or with a wrong solution."""

from __future__ import annotations

from pathlib import Path

import nbformat
from conftest import ROOT, WrongSolution, strip_markers, wrong_solutions


def release_notebook(notebook: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "release" / notebook[:3] / f"{notebook}.ipynb", as_version=4)


def source_solutions(notebook: str) -> dict[str, str]:
    """grade_id → the solution cell's code as a student would write it."""
    nb = nbformat.read(ROOT / "source" / notebook[:3] / f"{notebook}.ipynb", as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: strip_markers(c.source)
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def submission(notebook: str, answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The release notebook with the solution cells in ``answers`` (grade_id → code) filled in."""
    nb = release_notebook(notebook)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if answers and grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def solved(notebook: str) -> nbformat.NotebookNode:
    return submission(notebook, source_solutions(notebook))


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
    answers = source_solutions(notebook)
    answers.update({exercise: wrong.code for exercise, wrong in pack.items()})
    return submission(notebook, answers)


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path
