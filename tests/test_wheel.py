"""What a student installs: the wheel holds the student side only, and it is enough.

The wheel is built from a clean copy of this repository (what ``pip install git+…`` builds).
It must hold no answer key, hidden case, check or grader, and no solution code; and a
release notebook with its answers filled in must run, previews included, in a fresh virtual
environment outside the repository with only the wheel installed, offline, where
``import autograder`` fails.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import ROOT, solution_lines, text_outputs

from autograder.course import notebook_id, source_notebooks
from autograder.maintenance.answers import answered, source_answers
from selfcheck.casekit import module_name
from selfcheck.compare import MISSING, case_difference, first_difference
from selfcheck.preview import ChecksFailed, expected_evidence, preview, public_exercises

pytestmark = pytest.mark.xdist_group("wheel")
preview_module = importlib.import_module("selfcheck.preview")  # `selfcheck.preview` is the function

STUDENT_PACKAGES = {"common", "selfcheck"}
PIP = (sys.executable, "-m", "pip", "-q", "--disable-pip-version-check")
NOTEBOOK = "M03-4"
"""The release notebook run in the fresh environment."""


# --- the wheel --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clean copy of the repository (tracked and new files, nothing ignored)."""
    clone = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out), str(clone)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    (built,) = out.glob("*.whl")
    return built


def wheel_files(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}


def test_wheel_holds_the_student_side_only(wheel: Path) -> None:
    files = wheel_files(wheel)
    packages = {name.split("/")[0] for name in files if ".dist-info/" not in name}
    assert packages == STUDENT_PACKAGES, f"the wheel holds {sorted(packages)}, students get only {STUDENT_PACKAGES}"
    instructor = {
        path.read_bytes()
        for path in (ROOT / "autograder").rglob("*.py")
        if path.stat().st_size > 200  # keys, cases, checks, grader: none may be in the wheel, under any name
    }
    copied = [name for name, data in files.items() if data in instructor]
    assert not copied, f"the wheel holds copies of autograder modules: {copied}"
    importing = [
        name
        for name, data in files.items()
        if name.endswith(".py") and any(s in data for s in (b"import autograder", b"from autograder"))
    ]
    assert not importing, f"wheel modules import autograder (not installed for students): {importing}"
    entry_points = [data for name, data in files.items() if name.endswith(".dist-info/entry_points.txt")]
    assert not any(b"autograder" in data for data in entry_points), "the wheel declares an entry point into autograder"
    needed = [
        name
        for notebook in map(notebook_id, source_notebooks())
        for name in (f"selfcheck/public/{module_name(notebook)}.py", f"selfcheck/expected/{notebook}.json")
    ]
    lacking = [name for name in needed if name not in files]
    assert not lacking, f"the wheel lacks what the previews need: {lacking}"
    weights = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "common").glob("*.pt"))
    assert {"common/digits_weights.pt", "common/tinylm_weights.pt"} <= set(weights)
    lacking = [name for name in weights if files.get(name) != (ROOT / name).read_bytes()]
    assert not lacking, f"the wheel lacks the shipped weights (pyproject.toml's package-data): {lacking}"


def _code_lines(lines: list[str]) -> list[str]:
    """Lines that carry code: whitespace collapsed; blanks, comments and short lines (`else:`, `continue`) dropped."""
    kept = []
    for line in lines:
        text = " ".join(line.split())
        if text and not text.startswith("#") and len(text.replace(" ", "")) >= 12:
            kept.append(text)
    return kept


def _runs(lines: list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(lines[i : i + size]) for i in range(len(lines) - size + 1)}


def _solutions() -> list[tuple[str, str, list[str]]]:
    """(notebook, grade_id, code lines) of every solution cell of source/."""
    found = []
    for path in source_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            lines = _code_lines(solution_lines(cell.source))
            if lines:
                found.append((notebook_id(path), cell.metadata["nbgrader"]["grade_id"], lines))
    return found


def _leaks(solutions: list[tuple[str, str, list[str]]], files: dict[str, bytes]) -> list[tuple[str, str, str]]:
    """(notebook, grade_id, file) where a run of three solution lines (or a whole shorter solution) appears."""
    texts = {name: _code_lines(data.decode("utf-8", "ignore").splitlines()) for name, data in files.items()}
    leaks = []
    for notebook, grade_id, lines in solutions:
        size = min(3, len(lines))
        wanted = _runs(lines, size)
        leaks += [(notebook, grade_id, name) for name, text in texts.items() if wanted & _runs(text, size)]
    return leaks


def test_wheel_holds_no_solution_code(wheel: Path) -> None:
    solutions = _solutions()
    # The same search finds the solutions in the answer keys (which students must not get): it can see a leak.
    keys = {str(p): p.read_bytes() for p in (ROOT / "autograder" / "keys").glob("m*.py")}
    found_in_keys = {notebook for notebook, _, _ in _leaks(solutions, keys)}
    assert found_in_keys == {notebook_id(p) for p in source_notebooks()}, "the leak search no longer finds the keys"
    leaks = _leaks(solutions, wheel_files(wheel))
    assert not leaks, f"solution code in the wheel (notebook, solution cell, file): {leaks}"


# --- a release notebook with only the wheel ---------------------------------------------------------

RUNNER = """
import sys
import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": sys.argv[3]}}).execute()
nbformat.write(nb, sys.argv[2])
"""

PROBE = """
import importlib.util, socket, selfcheck
print("autograder:", importlib.util.find_spec("autograder") is not None)
print("selfcheck from:", selfcheck.__file__)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2).close()
    print("network: up")
except OSError:
    print("network: down")
try:
    import autograder
except ModuleNotFoundError:
    print("import autograder: ModuleNotFoundError")
"""


def _offline() -> list[str]:
    """The command prefix that runs a process in its own network namespace (loopback only)."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False).returncode:
        pytest.fail("needs `unshare -rn` (util-linux, user namespaces) to run the notebook offline")
    return [unshare, "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def fresh_environment(wheel: Path, where: Path) -> Path:
    """A virtual environment with only ``wheel`` installed; third-party packages read from this venv.

    The .pth adds this venv's site-packages as a plain folder, so its own .pth files (the
    editable install, the instructor's repository root) are not processed there.
    """
    venv = where / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [*PIP, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, f"installing the wheel failed:\n{install.stdout}\n{install.stderr}"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    kernel = venv / "share" / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True)
    spec = {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "python"}
    (kernel / "kernel.json").write_text(json.dumps({**spec, "display_name": "wheel only"}), encoding="utf-8")
    return venv


def run_outside(venv: Path, nb: nbformat.NotebookNode, where: Path) -> nbformat.NotebookNode:
    """Execute ``nb`` with ``venv``'s kernel, from ``where`` (outside the repository), offline."""
    work = where / "work"
    work.mkdir()
    nbformat.write(nb, work / "in.ipynb")
    (where / "run.py").write_text(RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PT2E_COURSE_ROOT", "VIRTUAL_ENV")}
    env.update(
        JUPYTER_PATH=str(venv / "share" / "jupyter"),
        JUPYTER_RUNTIME_DIR=str(where / "runtime"),
        IPYTHONDIR=str(where / "ipython"),
        PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
    )
    command = [*_offline(), str(venv / "bin" / "python"), str(where / "run.py")]
    result = subprocess.run(
        [*command, str(work / "in.ipynb"), str(work / "out.ipynb"), str(work)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, f"running the notebook failed:\n{result.stdout}\n{result.stderr[-3000:]}"
    return nbformat.read(work / "out.ipynb", as_version=4)


@pytest.mark.slow  # a whole notebook in a kernel of its own
def test_answered_release_notebook_runs_with_only_the_wheel(wheel: Path, tmp_path_factory) -> None:
    where = tmp_path_factory.mktemp("student")
    assert not where.resolve().is_relative_to(ROOT)
    venv = fresh_environment(wheel, where)
    nb = answered(NOTEBOOK, source_answers(NOTEBOOK))
    graded = [
        i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden")
    ]
    assert graded, f"{NOTEBOOK} has no graded cell"
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    executed = run_outside(venv, nb, where)
    outputs = text_outputs(executed)
    code_index = {id(c): i for i, c in enumerate(c for c in executed.cells if c.cell_type == "code")}
    errors = [(i, text) for i, cell in enumerate(outputs) for kind, text in cell if kind == "error"]
    assert not errors, (
        f"cells of release/{NOTEBOOK} failed with only the wheel installed (code cell, error): {errors}"
        " (an import of autograder outside the hidden region, or a release/ older than source/?)"
    )
    for index in graded:
        cell = executed.cells[index]
        printed = "".join(text for kind, text in outputs[code_index[id(cell)]] if kind == "stdout")
        lines = printed.splitlines()
        exercise = cell.metadata["nbgrader"]["grade_id"].removesuffix("_hidden")
        cases = public_exercises(NOTEBOOK)[exercise].cases
        assert len(lines) == len(cases) and all(line.startswith("✓") for line in lines), (
            f"preview of {exercise}: expected one ✓ per public case ({len(cases)}), got {printed!r}"
        )
        assert not [k for k, _ in outputs[code_index[id(cell)]] if k == "result"], "the preview shows an Out: value"
    probe = "".join(text for kind, text in outputs[-1] if kind == "stdout")
    assert "import autograder: ModuleNotFoundError" in probe and "autograder: False" in probe, probe
    assert "network: down" in probe, probe
    selfcheck_file = next(line for line in probe.splitlines() if line.startswith("selfcheck from:"))
    assert str(venv) in selfcheck_file and str(ROOT) not in selfcheck_file, selfcheck_file


# --- the preview and its comparison, in this process ------------------------------------------------


def test_compare_floats_dicts_lists() -> None:
    assert first_difference({"a": 1.0, "b": [1, 2]}, {"b": [1, 2], "a": 1.0 + 1e-7}) is None
    assert first_difference({"a": 1.0}, {"a": 1.001}) is not None
    assert first_difference([1, 2], [2, 1]) is not None
    assert first_difference([True], [1]) is not None
    difference = first_difference({"obs": {"add": [3, 4]}}, {"obs": {"add": [3, 5]}})
    assert difference is not None and difference.where == "「obs」的「add」的第 2 項"
    assert (difference.expected, difference.seen) == ("4", "5")
    # a list of groups names the group and shows it whole, not an index path into it
    groups = first_difference({"s": {"shared": [["x → add", "add → relu"]]}}, {"s": {"shared": [["x → add"]]}})
    assert groups is not None and groups.where == "「s」中共用同一個 observer 的第 1 組位置", groups
    assert groups.seen == '["x → add"]' and "第 1 項" not in str(groups)
    extra = first_difference({"edges": [["a", "b"]]}, {"edges": [["a", "b"], ["b", "c"]]})
    assert extra is not None and extra.where == "第 2 條邊" and extra.expected == MISSING
    missing = first_difference({"x": 1, "y": 2}, {"x": 1})
    assert missing is not None and missing.where == "「y」" and "沒有" in missing.seen
    assert str(missing) == "「y」：你的結果少了這一項（應該是 2）"
    assert first_difference([1, 2, 3], [1, 2]) is not None
    assert "執行時出錯" in (case_difference({"value": 1}, {"error": "TypeError", "message": "boom"}) or "")


def _key(notebook: str) -> dict[str, Any]:
    return vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))


def _first_leaf_changed(data: Any) -> tuple[Any, bool]:
    """A copy of ``data`` with its first bool, number or string changed."""
    if isinstance(data, dict):
        out = dict(data)
        for key in sorted(out):
            out[key], done = _first_leaf_changed(out[key])
            if done:
                return out, True
        return out, False
    if isinstance(data, list):
        out = list(data)
        for index, item in enumerate(out):
            out[index], done = _first_leaf_changed(item)
            if done:
                return out, True
        return out, False
    if type(data) is bool:
        return not data, True
    if type(data) in (int, float):
        return data + 7, True
    if type(data) is str:
        return data + "_changed", True
    return data, False


def test_preview_passes_the_key_and_prints_one_line_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    for exercise, spec in public_exercises(NOTEBOOK).items():
        assert preview(NOTEBOOK, exercise, _key(NOTEBOOK)) is None
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == len(spec.cases) and all(line.startswith("✓") for line in lines), lines


def test_preview_names_what_is_missing() -> None:
    exercise, spec = next(iter(public_exercises(NOTEBOOK).items()))
    with pytest.raises(ChecksFailed, match="先完成練習") as raised:
        preview(NOTEBOOK, exercise, {})
    assert all(name in str(raised.value) for name in spec.names) and "\n" not in str(raised.value)


def test_preview_shows_the_first_difference(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    exercise, spec = next(iter(public_exercises(NOTEBOOK).items()))
    shipped = expected_evidence(NOTEBOOK)
    changed = copy.deepcopy(shipped)
    case = next(iter(spec.cases))
    record = changed["exercises"][exercise]["cases"][case]
    record["value"], done = _first_leaf_changed(record["value"])
    assert done
    monkeypatch.setattr(preview_module, "expected_evidence", lambda notebook: changed)
    with pytest.raises(ChecksFailed) as raised:
        preview(NOTEBOOK, exercise, _key(NOTEBOOK))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(spec.cases) and "\n" not in str(raised.value)
    assert lines[0].startswith("✗") and "應該是" in lines[0] and "你的是" in lines[0], lines[0]
    assert all(line.startswith("✓") for line in lines[1:]), lines


def test_preview_reports_errors_of_student_code(capsys) -> None:
    exercise, spec = next(iter(public_exercises(NOTEBOOK).items()))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("壞了")

    with pytest.raises(ChecksFailed):
        preview(NOTEBOOK, exercise, dict.fromkeys(spec.names, broken))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(spec.cases) and all(line.startswith("✗") and "執行時出錯" in line for line in lines), lines


def test_preview_of_an_unanswered_exercise_says_so_in_one_line(capsys) -> None:
    exercise, spec = next(iter(public_exercises(NOTEBOOK).items()))

    def stub(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError()

    with pytest.raises(ChecksFailed, match="還沒有作答") as raised:
        preview(NOTEBOOK, exercise, dict.fromkeys(spec.names, stub))
    assert capsys.readouterr().out == "" and raised.value._render_traceback_() == [str(raised.value)]
