"""Grading imports on one thread before it grades on several.

``grade_class`` and nbgrader's ``ParallelAutograde`` grade notebooks on threads. CPython 3.11 keeps the AST
constructor's recursion depth per interpreter, not per thread (gh-106905): two threads compiling modules at once
(a first import without a ``.pyc``, or pytest rewriting a ``test_*.py`` check module) fail with ``SystemError:
AST constructor recursion depth mismatch``. Stop 55's CI met it in ``test_autograde[M02]``. These run in a fresh
interpreter, where nothing of the course is imported yet.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

PROBE = """
import json, sys
import autograder.engine.grading as grading

MODULES = ("autograder.checks.test_m02_2", "autograder.keys.m02_2", "autograder.sandboxed.cases.m02_2",
           "selfcheck.public.m02_2", "autograder.engine.diagnose", "autograder.engine.reference_evidence")
seen = {"before": [m for m in MODULES if m in sys.modules]}


class Pool:
    \"\"\"Stands for the thread pool: notes what was imported when the pool started, grades nothing.\"\"\"

    def __init__(self, max_workers):
        seen["at_pool"] = [m for m in MODULES if m in sys.modules]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, work, tasks):
        seen["tasks"] = sorted(task[1] for task in tasks)
        raise SystemExit(0)


grading.ThreadPoolExecutor = Pool
grading.fork_context = lambda: None
try:
    grading.grade_class("M02", {"someone": None}, jobs=2, seed=1)
except SystemExit:
    pass
print(json.dumps(seen))
"""


def test_grade_class_imports_a_notebooks_checks_key_and_cases_before_its_threads_start() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["tasks"] == ["M02-1", "M02-2", "M02-3"]
    assert "autograder.checks.test_m02_2" not in seen["before"], "the probe must start before the checks are imported"
    assert len(seen["at_pool"]) == 6, f"imported only {seen['at_pool']} when the threads started"
