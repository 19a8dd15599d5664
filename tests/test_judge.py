"""Judging without pytest gives exactly the verdicts pytest gives (``autograder.engine.judge``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import wrong_solutions

from autograder.engine.judge import judge, judge_with_pytest
from autograder.engine.reference_evidence import reference_evidence
from autograder.sandboxed.cases.base import exercises_of
from autograder.sandboxed.record import record_exercise
from autograder.sandboxed.replay import derive

SEED = 2
NOTEBOOKS = ("M01-3", "M03-4", "M05-2")


def evidence_of(notebook: str, namespace: dict | None) -> dict:
    exercises = {}
    for exercise, spec in exercises_of(notebook).items():
        if namespace is None:
            exercises[exercise] = reference_evidence(notebook, exercise, SEED)
        else:
            recorded = json.loads(json.dumps(record_exercise(spec, namespace, SEED)))
            exercises[exercise] = derive(spec, recorded, SEED)
    return {"notebook": notebook, "seed": SEED, "exercises": exercises}


def by_id(verdicts: list[dict]) -> dict[str, dict]:
    return {v["id"]: v for v in verdicts}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_direct_judging_gives_the_verdicts_pytest_gives(notebook: str) -> None:
    wrong = next(w for w in wrong_solutions() if w.notebook == notebook)
    namespace: dict = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    for evidence in (
        evidence_of(notebook, None),  # the key: every check passes
        evidence_of(notebook, namespace),  # a wrong answer: some fail, with their messages
        {"notebook": notebook, "seed": SEED, "exercises": {}},  # nothing: every check says what is missing
    ):
        direct, through_pytest = by_id(judge(evidence)), by_id(judge_with_pytest(evidence))
        assert direct == through_pytest
    assert any(not v["passed"] for v in direct.values())


def test_a_check_that_raises_something_else_still_gives_a_verdict_without_a_traceback() -> None:
    evidence = {"notebook": "M03-4", "seed": SEED, "exercises": {"add_quantizer": {"cases": {"x": {"value": 3}}}}}
    verdicts = [v for v in judge(evidence, ["add_quantizer"]) if not v["passed"]]
    assert verdicts and all(v["message"] and "Traceback" not in v["message"] for v in verdicts)


def test_judging_notebooks_on_threads_while_their_checks_import(tmp_path: Path) -> None:
    """``grade --jobs 2`` judges two notebooks on two threads; the first judging of a notebook imports its
    checks (which register themselves) while the other thread reads the registry. A fresh process, so
    that no check module is imported yet. Each thread judges no exercise (the race is in the imports and
    the registry, not in the answer key's evidence, which would cost M08-3 its lowerings)."""
    import subprocess
    import sys

    script = (
        "import threading\n"
        "from autograder.checks.support import checks_of\n"
        "from autograder.engine.judge import judge\n"
        "from autograder.course import source_notebooks\n"
        "errors = []\n"
        "def run(nb):\n"
        "    try:\n"
        "        assert judge({'notebook': nb, 'seed': 0, 'exercises': {}}, ['(none)']) == []\n"
        "        assert checks_of(nb)\n"
        "    except Exception as exc:\n"
        "        errors.append(f'{nb}: {exc!r}')\n"
        "threads = [threading.Thread(target=run, args=(nb,)) for nb in [p.stem for p in source_notebooks()]]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "import json, sys\n"
        "open(sys.argv[1], 'w').write(json.dumps(errors))\n"
    )
    report = tmp_path / "errors.json"
    done = subprocess.run([sys.executable, "-c", script, str(report)], capture_output=True, text=True, timeout=600)
    assert report.exists(), done.stderr[-2000:]
    assert json.loads(report.read_text()) == []


def test_the_answer_keys_evidence_leaves_the_graders_log_quiet() -> None:
    """Computing the key's evidence (the grader's side of every graded notebook) prints nothing: no torchao
    library it cannot load, no torch deprecation line in an instructor's log."""
    import subprocess
    import sys

    code = "from autograder.engine.reference_evidence import reference_evidence\n" + "".join(
        f"reference_evidence({notebook!r}, {exercise!r}, 3)\n"
        for notebook, exercise in (("M02-1", "observer_errors"), ("M06-3", next(iter(exercises_of("M06-3")))))
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result.stderr[-2000:]
