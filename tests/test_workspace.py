"""pt2e-course lab: the student's own copy is never overwritten, JupyterLab's options pass through."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.course import RELEASE
from autograder.maintenance import workspace


def test_working_copy_is_made_once_and_never_overwritten(tmp_path: Path) -> None:
    work = tmp_path / "work"
    copied = workspace.make_working_copy(work)
    assert len(copied) == len(list(RELEASE.glob("M*/*.ipynb"))) > 0
    mine = copied[0]
    nb = nbformat.read(mine, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("my_answer = 42"))
    nbformat.write(nb, mine)
    assert workspace.make_working_copy(work) == []
    assert "my_answer = 42" in mine.read_text(encoding="utf-8")


def test_lab_passes_jupyterlab_options_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(workspace, "WORK", tmp_path / "work")
    monkeypatch.setattr(workspace.subprocess, "call", lambda command: calls.append(command) or 0)
    with pytest.raises(SystemExit) as done:
        cli.main(["lab", "--no-browser", "--ip", "0.0.0.0", "--port=8899"])
    assert done.value.code == 0
    assert calls and calls[0][-4:] == ["--no-browser", "--ip", "0.0.0.0", "--port=8899"]
    assert f"--ServerApp.root_dir={tmp_path / 'work'}" in calls[0]
    assert sorted((tmp_path / "work").glob("M*/*.ipynb")), "the working copy is made where WORK points"


def test_other_commands_still_refuse_unknown_options() -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["release", "--no-such-option"])
    assert done.value.code == 2
