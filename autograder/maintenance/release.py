"""Releasing the course: the preview's expected evidence, release/ from source/ with nbgrader, validation."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from autograder.course import RELEASE, ROOT, SOURCE, notebook_id, source_notebooks

EXPECTED = ROOT / "selfcheck" / "expected"
"""The preview's expected evidence, one JSON file per notebook; shipped to students as package data."""


def expected_evidence(notebook: str) -> dict[str, Any]:
    """The answer key's evidence on the public cases of ``notebook``, at the preview seed.

    The same collection the student's preview runs (``selfcheck.casekit.collect``), on the
    key's definitions (``autograder.keys``). Raises if the key fails a public case: shipping
    an error as the expected result would let any error pass.
    """
    from selfcheck.casekit import collect, module_name
    from selfcheck.preview import PREVIEW_SEED, public_exercises

    key = vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))
    exercises = {}
    for name, exercise in public_exercises(notebook).items():
        evidence = collect(exercise, key, PREVIEW_SEED)
        errors = {case: record for case, record in evidence.get("cases", {}).items() if "value" not in record}
        if "missing" in evidence or errors:
            raise RuntimeError(
                f"{notebook} {name}: the answer key fails public cases: {evidence.get('missing') or errors}"
            )
        exercises[name] = evidence
    return {"notebook": notebook, "seed": PREVIEW_SEED, "exercises": exercises}


def expected_text(evidence: dict[str, Any]) -> str:
    """The expected evidence as the JSON text that is shipped."""
    return json.dumps(evidence, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def write_expected(module: str) -> list[Path]:
    """Write ``selfcheck/expected/<NB>.json`` for every notebook of ``module``; returns the paths."""
    EXPECTED.mkdir(exist_ok=True)
    written = []
    for path in source_notebooks(module):
        target = EXPECTED / f"{notebook_id(path)}.json"
        target.write_text(expected_text(expected_evidence(notebook_id(path))), encoding="utf-8")
        written.append(target)
    return written


def tool_env() -> dict[str, str]:
    """The environment with this interpreter's bin/ first on PATH (nbgrader calls ``alembic``)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def nbgrader(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``nbgrader ARGS`` from the course root, where nbgrader_config.py is."""
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=ROOT, capture_output=True, text=True, check=False, env=tool_env()
    )


def generate_release(module: str) -> None:
    """``nbgrader generate_assignment MODULE --force``; raises with nbgrader's log on failure."""
    result = nbgrader("generate_assignment", module, "--force", "--log-level=WARN")
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment {module} failed:\n{result.stdout}\n{result.stderr}")


def without_answers_outputs(nb: Any) -> Any:
    """Keep only the outputs a student may see before answering (see ``run_unanswered``)."""
    from autograder.maintenance.colab import SETUP_CELL_ID

    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        meta = cell.metadata.get("nbgrader", {})
        grade_id = str(meta.get("grade_id", ""))
        exercise_cell = meta.get("solution") or meta.get("grade") or grade_id.endswith("_tests")
        failed = any(o.output_type == "error" for o in cell.outputs)
        if cell.get("id") == SETUP_CELL_ID or exercise_cell or failed:
            cell.outputs = []
        for output in cell.outputs:
            if "execution_count" in output:
                output.execution_count = None
    nb.metadata.get("language_info", {}).pop("version", None)
    return nb


def run_unanswered(nb: Any, profile: str = "native") -> Any:
    """Run ``nb`` as handed out (nothing answered) in a scratch folder, errors allowed, on a CPU capped
    to ``profile`` (``autograder.maintenance.isa``; ``native``: this machine as it is)."""
    import tempfile

    from autograder.maintenance.isa import execute_under

    with tempfile.TemporaryDirectory(prefix="pt2e-unanswered-") as folder:
        execute_under(nb, Path(folder), profile, allow_errors=True)
    return nb


def finish_release(module: str) -> None:
    """Give each release notebook of ``module`` its Colab setup cell (right after the chapter's title:
    ``autograder.maintenance.colab.add_setup_cell``) and the outputs of an unanswered run."""
    import nbformat

    from autograder.maintenance.colab import add_setup_cell

    for path in sorted((RELEASE / module).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        add_setup_cell(nb, module)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        nbformat.write(without_answers_outputs(run_unanswered(nb)), path)


def validation_config(invert: bool) -> Any:
    """nbgrader validate's settings: ``invert`` for a release notebook (every test must fail), ten minutes a
    cell, and the kernel killed at the end (as ``autograder.maintenance.execute``: 1.5 s less per notebook)."""
    from traitlets.config import Config

    config = Config()
    config.Validator.invert = invert
    config.Execute.timeout = 600
    config.Execute.shutdown_kernel = "immediate"
    return config


def _validate(path: str, invert: bool) -> dict[str, object]:
    from nbgrader.validator import Validator

    return Validator(config=validation_config(invert)).validate(path)


def validate_release(module: str) -> list[str]:
    """Problems found: source notebooks must pass every test, release notebooks must fail every test."""
    problems = []
    for path in sorted((SOURCE / module).glob("*.ipynb")):
        report = _validate(str(path), invert=False)
        if report:
            problems.append(f"{path.relative_to(ROOT)}: nbgrader validate 沒有通過（{', '.join(report)}）")
    for path in sorted((RELEASE / module).glob("*.ipynb")):
        report = _validate(str(path), invert=True)
        if report:
            problems.append(
                f"{path.relative_to(ROOT)}: 未作答就有測試通過（nbgrader validate --invert：{', '.join(report)}）"
            )
    return problems
