"""Generating release/ from source/ with nbgrader, and validating both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autograder.course import RELEASE, ROOT, SOURCE


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


def _validate(path: str, invert: bool) -> dict[str, object]:
    from nbgrader.validator import Validator
    from traitlets.config import Config

    config = Config()
    config.Validator.invert = invert
    config.Execute.timeout = 600
    return Validator(config=config).validate(path)


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
