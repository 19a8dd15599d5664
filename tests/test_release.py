"""release/ is what nbgrader generates from source/ today, and nothing secret is in it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, make_course, nbgrader, read_json, solution_lines

from autograder.course import modules, notebook_id, source_notebooks
from autograder.maintenance.colab import add_setup_cell
from autograder.maintenance.release import EXPECTED, expected_evidence
from selfcheck.compare import first_difference
from selfcheck.preview import public_exercises

MODULES = modules()


def without_outputs(nb: nbformat.NotebookNode) -> dict:
    """A notebook's cells and their sources, metadata included, outputs left out."""
    cells = []
    for cell in nb.cells:
        cell = dict(cell)
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
        cells.append(cell)
    return {"cells": cells, "nbformat": nb.nbformat}


@pytest.mark.parametrize("module", MODULES)
def test_release_is_up_to_date(module: str, tmp_path: Path) -> None:
    course = make_course(tmp_path, [module])
    nbgrader(course, "generate_assignment", module, "--force")
    fresh = sorted(p.relative_to(course / "release") for p in (course / "release" / module).rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT / "release") for p in (ROOT / "release" / module).rglob("*") if p.is_file())
    assert fresh == committed, "release/ has other files than a fresh generate_assignment"
    for relative in fresh:  # the outputs of the unanswered run are checked by test_unanswered.py
        generated = nbformat.read(course / "release" / relative, as_version=4)
        add_setup_cell(generated, module)
        assert without_outputs(generated) == without_outputs(
            nbformat.read(ROOT / "release" / relative, as_version=4)
        ), f"release/{relative} differs from a fresh `nbgrader generate_assignment`: run `pt2e-course release {module}`"
    for path in source_notebooks(module):  # the preview's expected evidence, shipped in the wheel
        notebook = notebook_id(path)
        shipped = EXPECTED / f"{notebook}.json"
        assert shipped.is_file(), f"selfcheck/expected/{notebook}.json is missing: run `pt2e-course release {module}`"
        fresh_evidence, shipped_evidence = expected_evidence(notebook), read_json(shipped)
        difference = first_difference(
            {k: v for k, v in fresh_evidence.items() if k != "exercises"},
            {k: v for k, v in shipped_evidence.items() if k != "exercises"},
        )
        for exercise, spec in public_exercises(notebook).items():  # floats as the preview compares them
            difference = difference or first_difference(
                fresh_evidence["exercises"].get(exercise),
                shipped_evidence["exercises"].get(exercise),
                exercise,
                tolerances=spec.tolerances,
            )
        assert difference is None, (
            f"selfcheck/expected/{notebook}.json is not what the answer key gives now ({difference}): "
            f"run `pt2e-course release {module}`"
        )


@pytest.mark.parametrize("module", MODULES)
def test_release_leaks_no_solution_or_hidden_check(module: str) -> None:
    for path in sorted((ROOT / "source" / module).glob("*.ipynb")):
        source = nbformat.read(path, as_version=4)
        release_path = ROOT / "release" / module / path.name
        text = release_path.read_text(encoding="utf-8")
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "autograder"):
            assert marker not in text, f"{release_path.name} contains {marker!r} (students have no autograder)"
        release = nbformat.read(release_path, as_version=4)
        release_lines = [line.strip() for c in release.cells for line in c.source.splitlines() if line.strip()]
        release_runs = {tuple(release_lines[i : i + 3]) for i in range(len(release_lines))}
        for cell in source.cells:
            solution = [line.strip() for line in solution_lines(cell.source) if line.strip()]
            for i in range(len(solution) - 2):  # three solution lines in a row give a solution away
                run = tuple(solution[i : i + 3])
                assert run not in release_runs, f"{release_path.name} leaks solution lines {run}"
        for cell in release.cells:  # outputs of an unanswered run only: none on the exercises' own cells
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") or meta.get("grade") or str(meta.get("grade_id", "")).endswith("_tests"):
                assert not cell.get("outputs"), f"{release_path.name} ships outputs of {meta.get('grade_id')}"


def test_release_holds_only_notebooks() -> None:
    others = [p for p in (ROOT / "release").rglob("*") if p.is_file() and p.suffix != ".ipynb"]
    assert not others, f"release/ ships non-notebook files: {others}"


def test_expected_evidence_is_only_for_course_notebooks() -> None:
    notebooks = {notebook_id(p) for p in source_notebooks()}
    stale = [p.name for p in EXPECTED.glob("*") if p.suffix != ".json" or p.stem not in notebooks]
    assert not stale, f"selfcheck/expected/ ships files for no notebook: {stale}"
