"""What a graded run executes of a submission (``autograder.engine.submission.prepare``)."""

from __future__ import annotations

import nbformat
import pytest
from submissions import solved

from autograder.engine.submission import prepare, source_path
from autograder.maintenance.answers import insert_after


def _source(notebook: str) -> nbformat.NotebookNode:
    return nbformat.read(source_path(notebook), as_version=4)


@pytest.mark.parametrize("notebook", ["M03-4", "M08-3", "M02-3"])
def test_a_graded_run_stops_after_the_last_graded_cell(notebook: str) -> None:
    source = _source(notebook)
    cells = prepare(solved(notebook), source).cells
    graded = [c.metadata.nbgrader["grade_id"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert cells[-1].kind == "collect" and cells[-1].label == graded[-1]
    assert [c.label for c in cells if c.kind == "collect"] == graded, "every graded cell is still collected"


def test_a_student_cell_before_the_last_graded_cell_still_runs() -> None:
    source = _source("M03-4")
    nb = insert_after(solved("M03-4"), "add_quantizer_hidden", "SENTINEL = 1")
    cells = prepare(nb, source).cells
    assert any(c.source == "SENTINEL = 1" for c in cells)
    trailing = solved("M03-4")
    trailing.cells.append(nbformat.v4.new_code_cell("SENTINEL = 2"))
    assert not any(c.source == "SENTINEL = 2" for c in prepare(trailing, source).cells)


def test_deleted_graded_cells_are_put_back_and_collected() -> None:
    source = _source("M03-4")
    nb = solved("M03-4")
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "cat_quantizer_hidden"]
    prepared = prepare(nb, source)
    assert prepared.cells[-1].label == "cat_quantizer_hidden"
    assert any("被刪除" in t for t in prepared.tampering)
