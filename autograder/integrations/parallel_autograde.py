"""``nbgrader autograde`` in parallel: the slow step of every submission runs first, several at a time.

nbgrader autogrades one notebook after another (jupyter/nbgrader#174). Here its own loop stays, so the
gradebook, ``autograded/``, late penalties, ``--student``, ``--force`` and regrades are nbgrader's: before that
loop, ``ParallelAutograde`` goes through the same submissions nbgrader is about to process, sanitizes each one
with nbgrader's own sanitize steps (in memory), and grades what comes out in the sandbox, ``jobs`` at a time
(``SandboxedExecute._grade``, the function the serial step calls). When the serial loop then reaches the
notebook, ``SandboxedExecute`` finds the result of exactly the notebook it was handed (the same bytes, by a
fingerprint) and writes it; a notebook whose fingerprint does not match, or that nothing prefetched, is graded
there as before. Every notebook is graded once, with the run's one seed, by the same code: the parallel run
writes what the serial one writes, only sooner.

``nbgrader_config.py`` installs it (``install``): ``nbgrader autograde M03`` is parallel, with one job per CPU
core; ``--ParallelAutograde.jobs=N`` (or ``PT2E_JOBS=N``) sets how many, and 1 is nbgrader's serial order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nbformat import reads
from nbformat.notebooknode import NotebookNode
from nbgrader.converters.autograde import Autograde
from traitlets import Integer

JOBS_ENV = "PT2E_JOBS"


@dataclass(frozen=True)
class Prefetched:
    """A graded notebook waiting for nbgrader's loop: the fingerprint of what was graded, and the result."""

    fingerprint: str
    result: Any


PREFETCHED: dict[tuple[str, str], Prefetched] = {}
"""(student, notebook) → its result, filled before nbgrader's loop, taken by ``SandboxedExecute``."""
TAKEN: list[tuple[str, str]] = []
"""The (student, notebook) whose prefetched result nbgrader's loop used, in its order (for the log and tests)."""
_lock = threading.Lock()


def fingerprint(nb: NotebookNode) -> str:
    """The notebook as the grader reads it (after ``SandboxedExecute`` took its metadata and outputs off)."""
    return hashlib.sha256(json.dumps(nb, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def take(student: str, notebook: str, nb: NotebookNode) -> Any | None:
    """The prefetched result of ``student``'s ``notebook`` when it graded this very notebook, else None."""
    with _lock:
        found = PREFETCHED.pop((student, notebook), None)
    if found is None or found.fingerprint != fingerprint(nb):
        return None
    with _lock:
        TAKEN.append((student, notebook))
    return found.result


def default_jobs() -> int:
    """``PT2E_JOBS`` when set, else one job per CPU core this process may use."""
    text = os.environ.get(JOBS_ENV, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class ParallelAutograde(Autograde):
    """nbgrader's ``Autograde`` with the sandboxed grading of its submissions done first, ``jobs`` at a time."""

    jobs = Integer(0, help="同時評幾本 notebook（0：PT2E_JOBS，沒有設就是 CPU 核心數）").tag(config=True)

    def convert_notebooks(self) -> None:
        try:
            self._prefetch()
        except Exception:  # a failed prefetch only costs speed: the serial loop grades what is left
            self.log.exception("平行評分的準備出錯，改成一本一本評")
        try:
            super().convert_notebooks()
        finally:
            with _lock:
                PREFETCHED.clear()

    # --- what nbgrader's loop is about to process -------------------------------------------------------

    def _would_process(self, assignment_id: str, student_id: str) -> bool:
        """``init_destination``'s decision, read only (it removes outdated output when it decides)."""
        if self.coursedir.student_id_exclude and student_id in self.coursedir.student_id_exclude.split(","):
            return False
        dest = os.path.normpath(self._format_dest(assignment_id, student_id))
        if self.coursedir.notebook_id == "*":
            if not os.path.exists(dest):
                return True
        else:
            for notebook in self.notebooks:
                name = os.path.splitext(os.path.basename(notebook))[0] + self.exporter.file_extension
                if not os.path.exists(os.path.join(dest, name)):
                    return True
        if self.force:
            return True
        new = self.coursedir.get_existing_timestamp(self._format_source(assignment_id, student_id))
        old = self.coursedir.get_existing_timestamp(dest)
        return new is not None and old is not None and new > old

    def _pending(self) -> list[tuple[str, str]]:
        """(student, submitted notebook path) of every notebook nbgrader's loop will grade, in its order."""
        pending = []
        regexp = self._format_source("(?P<assignment_id>.*)", "(?P<student_id>.*)", escape=True)
        for assignment in sorted(self.assignments.keys()):
            self.notebooks = sorted(self.assignments[assignment])
            found = re.match(regexp, assignment)
            if found is None:
                continue
            if self._would_process(found["assignment_id"], found["student_id"]):
                pending += [(found["student_id"], path) for path in self.notebooks]
        return pending

    def _sanitized(self, path: str) -> NotebookNode:
        """The notebook as nbgrader's sanitize steps leave it, which ``SandboxedExecute`` then receives."""
        resources = self.init_single_notebook_resources(path)
        output, _ = self.exporter.from_filename(path, resources=resources)
        return reads(output, as_version=4)

    # --- grading them ----------------------------------------------------------------------------------

    def _prefetch(self) -> None:
        from autograder.engine.grading import fork_context, import_for_grading
        from autograder.integrations.nbgrader_bridge import META_KEY, SandboxedExecute, _source_notebook, run_seed
        from autograder.reports.progress import Progress
        from autograder.sandboxed.limits import Limits, described

        jobs = self.jobs or default_jobs()
        pending = self._pending()
        if jobs < 2 or len(pending) < 2:
            return  # nbgrader's own order: each notebook graded when its loop reaches it
        self._sanitizing = True
        self._init_preprocessors()
        tasks = []
        for student, path in pending:
            notebook = os.path.splitext(os.path.basename(path))[0]
            source = _source_notebook(notebook)
            if source is None:
                continue  # the serial step says what is wrong with it
            nb = self._sanitized(path)
            recorded = nb.metadata.pop(META_KEY, None)
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            tasks.append((student, notebook, nb, source, recorded, fingerprint(nb)))
        self._sanitizing = False
        self._init_preprocessors()
        grader = next((p for p in self.exporter._preprocessors if isinstance(p, SandboxedExecute)), None)
        self._sanitizing = True  # nbgrader's loop starts from here (its input and output folders depend on it)
        self._init_preprocessors()
        if grader is None or not tasks:
            return
        limits = Limits(**{name: getattr(grader, name) for name, *_ in described()})
        seed = run_seed()
        progress = Progress(len(tasks), sys.stderr)
        self.log.info("平行評分：%d 本 notebook，同時 %d 本（--ParallelAutograde.jobs=N 可改）", len(tasks), jobs)
        fork_context()
        import_for_grading({task[1] for task in tasks})

        def work(task: tuple[str, str, NotebookNode, NotebookNode, Any, str]) -> None:
            student, notebook, nb, source, recorded, print_ = task
            try:
                result = grader._grade(notebook, nb, source, seed, limits, recorded)
            except Exception:  # the serial step grades it again, and says what went wrong
                self.log.exception("平行評分 %s 的 %s 時出錯，稍後再評一次", student, notebook)
                return
            with _lock:
                PREFETCHED[(student, notebook)] = Prefetched(print_, result)
            progress.update(student, result)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(work, tasks))


def install() -> None:
    """Make ``nbgrader autograde`` use ``ParallelAutograde`` (its app builds ``Autograde`` by name)."""
    import nbgrader.apps.autogradeapp as app

    app.Autograde = ParallelAutograde
