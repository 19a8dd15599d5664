"""Student notebooks built from the course: the release copy, answered with given code.

The sample class (examples/), the tests and the benchmarks all need "what a student would
hand in": the release notebook with some solution cells filled in, sometimes with cells of
the student's own. These helpers are the one way to make them.
"""

from __future__ import annotations

import hashlib

import nbformat

from autograder.course import RELEASE, SOURCE, notebook_path


def _grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def release_notebook(notebook: str) -> nbformat.NotebookNode:
    """The notebook as handed out, e.g. ``release/M03/M03-4.ipynb``."""
    return nbformat.read(notebook_path(RELEASE, notebook), as_version=4)


def without_markers(source: str) -> str:
    """A solution cell as a student would write it: without nbgrader's solution markers."""
    return "\n".join(
        line for line in source.splitlines() if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
    )


def source_answers(notebook: str) -> dict[str, str]:
    """grade_id → the code of each solution cell of ``source/``, as a student would write it."""
    nb = nbformat.read(notebook_path(SOURCE, notebook), as_version=4)
    return {_grade_id(c): without_markers(c.source) for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def answered(notebook: str, answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The release notebook with the cells named in ``answers`` (grade_id → code) replaced."""
    nb = release_notebook(notebook)
    for cell in nb.cells:
        if answers and _grade_id(cell) in answers:
            cell.source = answers[_grade_id(cell)]
    return nb


def cell_with_id(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    """The cell whose nbgrader grade_id is ``grade_id``."""
    return next(c for c in nb.cells if _grade_id(c) == grade_id)


def insert_after(nb: nbformat.NotebookNode, grade_id: str, source: str) -> nbformat.NotebookNode:
    """Add a student's own code cell right after the cell ``grade_id``; returns ``nb``."""
    cell = nbformat.v4.new_code_cell(source)
    taken = {c.get("id") for c in nb.cells}
    for n in range(len(nb.cells) + 1):  # the same sample class every time, and no id twice
        cell.id = hashlib.sha256(f"{grade_id}\n{n}\n{source}".encode()).hexdigest()[:8]
        if cell.id not in taken:
            break
    nb.cells.insert(nb.cells.index(cell_with_id(nb, grade_id)) + 1, cell)
    return nb
