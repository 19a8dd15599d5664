"""pt2e-course lab: the student's own copy is never overwritten, JupyterLab's options pass through."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.course import RELEASE, ROOT
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
    monkeypatch.setattr(workspace.os, "execve", lambda path, command, env: calls.append(command))
    with pytest.raises(SystemExit) as done:
        cli.main(["lab", "--no-browser", "--ip", "0.0.0.0", "--port=8899"])
    assert done.value.code == 0
    assert calls and calls[0][4:8] == ["--no-browser", "--ip", "0.0.0.0", "--port=8899"]
    assert f"--ServerApp.root_dir={tmp_path / 'work'}" in calls[0]
    assert ("--allow-root" in calls[0]) == (os.geteuid() == 0)
    assert sorted((tmp_path / "work").glob("M*/*.ipynb")), "the working copy is made where WORK points"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""
    except (urllib.error.URLError, ConnectionError):  # not listening yet
        return 0, ""


def test_the_students_lab_has_no_instructor_tools_and_stops_with_its_kernels(tmp_path: Path) -> None:
    """As a student starts it: on work/, with Validate and without the Formgrader; stopping its process id
    stops JupyterLab and the kernel it started."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    lab = subprocess.Popen(
        [sys.executable, "-m", "autograder.cli", "lab", "--no-browser", f"--port={port}", "--ServerApp.token=t"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while _get(f"{base}/api/status?token=t")[0] != 200:
            assert lab.poll() is None and time.monotonic() < deadline, "JupyterLab did not start"
            time.sleep(0.3)
        status, page = _get(f"{base}/lab?token=t")
        assert status == 200
        for plugin in workspace.INSTRUCTOR_PLUGINS:
            assert plugin in page.split("disabledExtensions", 1)[1].split("]", 1)[0]
        assert "@jupyter/nbgrader:validate-assignment" not in page.split("disabledExtensions", 1)[1].split("]", 1)[0]
        assert _get(f"{base}/formgrader?token=t")[0] == 404
        assert _get(f"{base}/api/contents/M03?token=t")[0] == 200, "it opens the working copy (work/)"
        request = urllib.request.Request(f"{base}/api/kernels?token=t", data=b'{"name": "python3"}', method="POST")
        with urllib.request.urlopen(request, timeout=30):
            pass
        deadline = time.monotonic() + 30
        while not _children(lab.pid):
            assert time.monotonic() < deadline, "no kernel started"
            time.sleep(0.3)
        kernels = _children(lab.pid)
    finally:
        lab.terminate()  # what `kill <pid>` does
        lab.wait(timeout=60)
    time.sleep(1)
    assert not [pid for pid in kernels if Path(f"/proc/{pid}").exists()], "a kernel outlived JupyterLab"


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def test_other_commands_still_refuse_unknown_options() -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["release", "--no-such-option"])
    assert done.value.code == 2
