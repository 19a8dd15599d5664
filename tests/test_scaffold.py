"""``pt2e-course scaffold``: a new exercise in all seven places, graded as students' answers are (issue 52).

Everything happens in a copy of the course in a temporary folder, never in this checkout: the command writes
the seven places there (``--root``), then, as ``pt2e-course release`` and ``execute`` would for that one
notebook, the copy gets the preview's expected evidence, the executed source notebook and its release copy.
Four students hand it in and ``pt2e-course grade`` grades them in the sandbox: the solution and the right
fixture get full marks, the release notebook as handed out gets zero, the wrong fixture loses its check and is
told its misconception. Last, ``tests/test_records.py`` runs against the copy: the new record, its hidden
record, its check, its graded cell and its fixture agree.

The sandbox's fork server runs ``python -I`` and so imports the course from the Python environment, not from
``PYTHONPATH``: the copy gets an environment of its own (``copy_python``) whose path puts the copy before this
checkout and then reads this checkout's packages. Bubblewrap would hide this checkout's packages from it, so the
copy is graded without bubblewrap (``PT2E_SANDBOX_DISABLE=bwrap``; every other measure applies as usual).
About 70 s on 2 cores (scaffold, expected evidence and one notebook executed: 20 s; nbgrader: 5 s; grading
four students: 30 s; the record tests: 12 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from autograder.course import SOURCE
from autograder.maintenance.scaffold import places

MODULE = "M01"
KEY = "count_ops"
TITLE = "count_ops：數一數圖上的 op"
NOTEBOOK = f"{MODULE}-{1 + max(int(p.stem.split('-')[1]) for p in (SOURCE / MODULE).glob('*.ipynb'))}"
"""The module's next notebook, which does not exist here."""

COPIED = ("autograder", "common", "selfcheck", "source")
"""All of source/: the existing records' sections point at headings of other modules' chapters."""


def course_copy(tmp: Path) -> Path:
    """The parts of the course the command, the release and the grader need, in ``tmp/course``."""
    copy = tmp / "course"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in COPIED:
        shutil.copytree(ROOT / folder, copy / folder, ignore=ignore)
    shutil.copytree(ROOT / "release" / MODULE, copy / "release" / MODULE)
    for name in ("nbgrader_config.py", "pyproject.toml", "tests/test_records.py"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, copy / name)
    return copy


def copy_python(tmp: Path, copy: Path) -> Path:
    """A Python environment that imports the course from ``copy`` first, then this environment's packages."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    ours = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_relative_to(sys.prefix))
    (site / "00_course_copy.pth").write_text(f"{copy}\n", encoding="utf-8")
    (site / "01_course_packages.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n", encoding="utf-8")
    # nbgrader runs ``alembic`` from PATH (the release puts the interpreter's bin/ first); this environment has no
    # scripts of its own, so it gets the one nbgrader needs
    alembic = venv / "bin" / "alembic"
    alembic.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom alembic.config import main\nsys.exit(main())\n")
    alembic.chmod(0o755)
    return venv / "bin" / "python"


PREPARE = """
import sys
from pathlib import Path

import nbformat

from autograder.course import RELEASE, SOURCE, notebook_path
from autograder.maintenance.answers import answered, release_notebook, source_answers
from autograder.maintenance.colab import add_setup_cell
from autograder.maintenance.execute import execute_in_place
from autograder.maintenance.fixtures import right_solutions, wrong_solutions
from autograder.maintenance.release import EXPECTED, expected_evidence, expected_text, nbgrader, without_answers_outputs

notebook, module = sys.argv[1:3]
(EXPECTED / f"{notebook}.json").write_text(expected_text(expected_evidence(notebook)), encoding="utf-8")
execute_in_place(notebook_path(SOURCE, notebook))  # raises when a cell does
result = nbgrader("generate_assignment", module, "--notebook", notebook, "--force", "--log-level=WARN")
assert result.returncode == 0, result.stdout + result.stderr
path = notebook_path(RELEASE, notebook)
handed_out = nbformat.read(path, as_version=4)
add_setup_cell(handed_out, module)
for cell in handed_out.cells:
    if cell.cell_type == "code":
        cell.outputs = []
nbformat.write(without_answers_outputs(handed_out), path)
students = {
    "solution": answered(notebook, source_answers(notebook)),
    "untouched": release_notebook(notebook),
    "wrong": answered(notebook, {w.exercise: w.code for w in wrong_solutions() if w.notebook == notebook}),
    "right": answered(notebook, {r.exercise: r.code for r in right_solutions() if r.notebook == notebook}),
}
for name, nb in students.items():
    target = Path("submitted") / name / module / f"{notebook}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
"""


def run(python: Path, copy: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(python), *args], cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, f"{' '.join(args[:3])} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def scaffold(copy: Path) -> subprocess.CompletedProcess[str]:
    """``pt2e-course scaffold`` run from this checkout, writing into ``copy``."""
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", "scaffold", NOTEBOOK, KEY, "--title", TITLE, "--root", str(copy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_a_scaffolded_exercise_is_released_and_graded_like_the_others(tmp_path: Path) -> None:
    if Path(sys.prefix).resolve().is_relative_to("/tmp"):
        # the copy is graded without bubblewrap, and a job without it mounts a private /tmp over this checkout's
        # packages (seen in a clone under /tmp: the sandbox's probe job fails); elsewhere the test runs whole
        pytest.skip("this checkout's Python environment is under /tmp, which a job without bubblewrap covers")
    copy = course_copy(tmp_path)
    scaffolded = scaffold(copy)
    assert scaffolded.returncode == 0, scaffolded.stderr
    seven = places(copy, NOTEBOOK)
    assert all(path.is_file() for path in seven.values()), scaffolded.stdout
    assert not any(path.exists() for path in places(ROOT, NOTEBOOK).values()), "scaffold wrote into this checkout"
    again = scaffold(copy)
    assert again.returncode == 2 and "已經有" in again.stderr, "a second scaffold must not overwrite the first"

    python = copy_python(tmp_path, copy)
    env = {k: v for k, v in os.environ.items() if k not in ("PT2E_COURSE_ROOT", "PT2E_SEED", "PT2E_SITE_URL")}
    env.update({"PYTHONPATH": str(copy), "PT2E_GRADEBOOK": str(copy / "gradebook.db"), "HOME": str(tmp_path)})
    run(python, copy, "-c", PREPARE, NOTEBOOK, MODULE, env=env)
    graded = json.dumps(
        [o for c in json.loads(seven["source"].read_text(encoding="utf-8"))["cells"] for o in c.get("outputs", [])],
        ensure_ascii=False,
    )
    assert "自我檢查通過" in graded and f"{KEY}" in graded and "2 / 2 分" in graded, "the solved chapter's own grading"

    grading = {**env, "PT2E_SANDBOX_DISABLE": "bwrap"}
    command = ["-m", "autograder.cli", "grade", MODULE, "--seed", "0", "--jobs", "1", "--no-similarity"]
    run(python, copy, *command, "--submitted", "submitted", "--out", "graded", env=grading)
    record = json.loads((copy / "graded" / f"{MODULE}-class.json").read_text(encoding="utf-8"))
    results = {
        name: next(nb for nb in student["notebooks"] if nb["notebook"] == NOTEBOOK)
        for name, student in record["students"].items()
    }
    assert set(results) == {"solution", "untouched", "wrong", "right"}
    assert all(result["max_score"] == 2 for result in results.values())
    assert results["solution"]["score"] == results["right"]["score"] == 2, results
    assert results["untouched"]["score"] == 0, results["untouched"]
    wrong = results["wrong"]
    assert wrong["score"] < 2, wrong
    assert [v["id"].split(":")[-1] for v in wrong["verdicts"] if not v["passed"]] == [f"test_{KEY}"], wrong
    assert all(v["causes"][:1] == ["counts_every_node"] for v in wrong["verdicts"] if not v["passed"]), wrong

    records = run(
        python,
        copy,
        *("-m", "pytest", "tests/test_records.py", "-q", "--noconftest", "-p", "no:cacheprovider"),
        *("-W", "ignore::pytest.PytestUnknownMarkWarning", "-k", f"{NOTEBOOK} or not ["),
        env=env,
    )
    assert " passed" in records.stdout and "failed" not in records.stdout, records.stdout
