"""Judging evidence: run a notebook's hidden checks and return their verdicts.

``judge(evidence)`` calls every check of the notebook (``@check`` functions of
``autograder/checks``, each taking ``seen`` and ``expected``) directly, in the calling process, and
names the likely cause of an exercise's failures (``autograder.engine.diagnose``: ``causes`` and
``explained_by`` on each verdict);
the grading commands call it in a process that never ran the student's code.
``judge_with_pytest`` runs the same checks through pytest and the plugin
(``autograder.integrations.pytest_plugin``), as ``pytest --pyargs autograder.checks`` does: the two give the
same verdicts (``tests/test_judge.py``), the first without pytest's start-up on every notebook.
``python -m autograder.engine.judge < evidence.json`` prints the verdicts as JSON.
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

from autograder.sandboxed.cases.base import module_name


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


def verdict_message(exc: BaseException | None) -> str:
    """What a failed check says to the student: its own message, never a traceback."""
    from autograder.checks.support import Fail

    if exc is None:
        return ""
    if isinstance(exc, Fail):
        return str(exc)
    if isinstance(exc, AssertionError):
        return str(exc) or "結果不符合預期"
    return f"無法判讀這一項的結果（{type(exc).__name__}）"  # evidence of an unexpected shape


def seen_evidence(evidence: dict[str, Any], notebook: str, exercise: str) -> Any:
    """The student's evidence for one exercise, or what a check reads as missing."""
    if evidence.get("notebook") != notebook:
        return {"missing": [f"{notebook} 的結果"]}
    exercises = evidence.get("exercises")
    if not isinstance(exercises, dict) or exercise not in exercises:
        return {"missing": [f"{exercise} 的結果"]}
    return exercises[exercise]


def judge(evidence: dict[str, Any], exercises: list[str] | None = None) -> list[dict[str, Any]]:
    """Verdicts of the hidden checks of ``evidence["notebook"]`` (only ``exercises`` when given), in the
    order the checks are written; each check is called with ``seen`` and ``expected``."""
    import importlib

    from autograder.checks.support import checks_of
    from autograder.engine.diagnose import attach_causes
    from autograder.engine.reference_evidence import reference_evidence

    notebook = str(evidence.get("notebook"))
    module = importlib.import_module(checks_module(notebook))
    seed = evidence.get("seed", 0)
    seed = seed if type(seed) is int else 0
    verdicts = []
    for exercise, infos in checks_of(notebook).items():
        if exercises and exercise not in exercises:
            continue
        expected = reference_evidence(notebook, exercise, seed)
        seen = seen_evidence(evidence, notebook, exercise)
        first = len(verdicts)
        for info in infos:
            failure: BaseException | None = None
            try:
                getattr(module, info.test)(seen=seen, expected=expected)
            except Exception as exc:  # every failure of a check is a verdict, whatever it raised
                failure = exc
            verdicts.append(
                {
                    "id": info.id,
                    "notebook": info.notebook,
                    "exercise": info.exercise,
                    "name": info.name,
                    "points": info.points,
                    "score": info.points if failure is None else 0.0,
                    "passed": failure is None,
                    "message": verdict_message(failure),
                }
            )
        attach_causes(notebook, exercise, seen, expected, verdicts[first:])
    return verdicts


def judge_with_pytest(evidence: dict[str, Any], exercises: list[str] | None = None) -> list[dict[str, Any]]:
    """``judge`` through pytest and ``autograder.integrations.pytest_plugin`` (how ``pytest --pyargs autograder.checks`` runs)."""
    import pytest

    notebook = str(evidence.get("notebook"))
    with tempfile.TemporaryDirectory(prefix="pt2e-judge-") as tmp:
        evidence_path = Path(tmp, "evidence.json")
        verdicts_path = Path(tmp, "verdicts.json")
        evidence_path.write_text(json.dumps(evidence, ensure_ascii=False), encoding="utf-8")
        args = [
            "-p",
            "autograder.integrations.pytest_plugin",
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
    _attach_all_causes(evidence, verdicts)
    return verdicts


def _attach_all_causes(evidence: dict[str, Any], verdicts: list[dict[str, Any]]) -> None:
    """The diagnosis ``judge`` adds, for verdicts that pytest gave (``autograder.engine.diagnose``)."""
    from autograder.engine.diagnose import attach_causes
    from autograder.engine.reference_evidence import reference_evidence

    notebook = str(evidence.get("notebook"))
    seed = evidence.get("seed", 0)
    seed = seed if type(seed) is int else 0
    for exercise in dict.fromkeys(str(v.get("exercise")) for v in verdicts):
        seen = seen_evidence(evidence, notebook, exercise)
        attach_causes(notebook, exercise, seen, reference_evidence(notebook, exercise, seed), verdicts)


def main() -> None:
    evidence = json.loads(sys.stdin.read())
    exercises = sys.argv[1:] or None
    json.dump(judge(evidence, exercises), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
