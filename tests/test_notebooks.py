"""Every source notebook runs top to bottom, passes nbgrader validate, and its committed
outputs are current. (That an untouched release notebook fails every graded cell, what
``nbgrader validate --invert`` checks, is asserted by test_unanswered on its own run.)

The kernel is forked from a process that has imported torch (``tests/forked_kernels.py``), a new process
for every notebook. One execution per notebook serves both: nbgrader's Validator executes the notebook and
we keep the executed copy to compare its outputs with the committed ones, as any CPU may
print them (``autograder.maintenance.outputs``: text exactly, numbers within what another CPU changes).

The notebook runs as another CPU would run it (``isa.rotation(module, 1)``): the committed outputs
were made on the maintainer's machine, and the nbgrader class of ``test_autograde`` runs the same
solution on a third profile up to its last graded cell (a graded run stops there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import ROOT
from nbgrader.validator import Validator

from autograder.course import source_notebooks
from autograder.maintenance import isa
from autograder.maintenance.outputs import errors_and_noise, notebook_difference
from autograder.maintenance.release import validation_config


class RecordingValidator(Validator):
    """nbgrader's Validator, keeping the notebook it executed."""

    executed: nbformat.NotebookNode | None = None

    def _preprocess(self, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
        self.executed = super()._preprocess(nb)
        return self.executed


def validator(invert: bool) -> RecordingValidator:
    return RecordingValidator(config=validation_config(invert))


def _id(path: Path) -> str:
    return path.stem


SOURCES = source_notebooks()


@pytest.mark.parametrize("path", SOURCES, ids=_id)
@pytest.mark.usefixtures("forked_kernel")
def test_source_notebook_runs_validates_and_is_current(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = isa.rotation(path.parent.name, 1)
    for variable in isa.VARIABLES:  # the kernel nbgrader starts inherits this process's environment
        monkeypatch.delenv(variable, raising=False)
    for variable, value in isa.environment(profile, {}).items():
        monkeypatch.setenv(variable, value)
    checker = validator(invert=False)
    report: dict[str, Any] = checker.validate(str(path))
    assert not report, f"nbgrader validate failed on {path.name}: {report}"
    assert checker.executed is not None
    errors = errors_and_noise(checker.executed)
    assert not errors, (
        f"{path.name} under the {profile} profile: errors or stderr output (warnings?) in cells: {errors}"
    )
    stale = notebook_difference(nbformat.read(path, as_version=4), checker.executed)
    assert stale is None, (
        f"{path.name} under the {profile} profile: committed output is stale ({stale}); run `pt2e-course execute {path.relative_to(ROOT)}`"
    )


@pytest.mark.parametrize("path", SOURCES, ids=_id)
def test_committed_notebook_is_executed_and_clean(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name} is committed without running every cell"
    noisy = errors_and_noise(nb)
    assert not noisy, f"{path.name} has errors or stderr output committed: {noisy}"
