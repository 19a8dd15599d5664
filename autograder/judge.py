"""Judging evidence: run a notebook's hidden checks (pytest) and return their verdicts.

``judge(evidence)`` runs in the calling process; the grading commands call it in a
process that never ran the student's code. ``python -m autograder.judge < evidence.json``
does the same in a fresh process and prints the verdicts as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autograder.untrusted.cases.base import module_name


@contextlib.contextmanager
def _plugin_autoload_disabled() -> Iterator[None]:
    previous = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = previous


def checks_module(notebook: str) -> str:
    """The pytest module with the hidden checks of ``notebook``."""
    return f"autograder.checks.test_{module_name(notebook)}"


def judge(evidence: dict[str, Any], exercises: list[str] | None = None) -> list[dict[str, Any]]:
    """Verdicts of the hidden checks of ``evidence["notebook"]`` (only ``exercises`` when given)."""
    import pytest

    notebook = str(evidence.get("notebook"))
    with tempfile.TemporaryDirectory(prefix="pt2e-judge-") as tmp:
        evidence_path = Path(tmp, "evidence.json")
        verdicts_path = Path(tmp, "verdicts.json")
        evidence_path.write_text(json.dumps(evidence, ensure_ascii=False), encoding="utf-8")
        args = [
            "-p",
            "autograder.pytest_plugin",
            "--pyargs",
            checks_module(notebook),
            "-q",
            "--assert=plain",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:logging",
            "-p",
            "no:faulthandler",
            "-p",
            "no:unraisableexception",  # its gc.collect() calls cost most of a run
            "-p",
            "no:threadexception",
            "--capture=no",
            "--rootdir",
            tmp,
            "-c",
            str(Path(tmp, "none.ini")),
            f"--evidence={evidence_path}",
            f"--verdicts={verdicts_path}",
        ]
        if exercises:
            args.append(f"--exercises={','.join(exercises)}")
        Path(tmp, "none.ini").write_text("[pytest]\n", encoding="utf-8")
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
            stack.enter_context(_plugin_autoload_disabled())  # only our plugin: pytest starts in a fraction
            pytest.main(args)
        if not verdicts_path.exists():
            raise RuntimeError(f"the hidden checks of {notebook} did not run")
        verdicts = json.loads(verdicts_path.read_text(encoding="utf-8"))
    return verdicts


def main() -> None:
    evidence = json.loads(sys.stdin.read())
    exercises = sys.argv[1:] or None
    json.dump(judge(evidence, exercises), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
