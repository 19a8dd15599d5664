"""The child process that runs one submission and reports evidence (the untrusted side).

It is forked from a server that has already imported torch, torchao, IPython and the
course packages, so a submission pays for its own cells and nothing else. It confines
itself (``sandbox.confine``), runs the cells in an IPython shell with a time limit per
cell, collects each exercise's evidence where the hidden test cell stood, and sends
JSON messages up a pipe. It never receives anything it must trust, and the parent
never unpickles what it sends.
"""

from __future__ import annotations

import io
import json
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Imported here so that the fork server preloads them (see autograder.grading).
import IPython.core.interactiveshell  # noqa: F401
import torch  # noqa: F401

import common.graph_utils
import common.models
import common.pt2e
import common.qspecs
import common.viz  # noqa: F401
from autograder.course import preload_sandbox_modules
from autograder.submission import RunCell
from autograder.untrusted.cases.base import collect, exercises_of
from autograder.untrusted.confine import Limits, confine
from selfcheck.evidence import safe_text

preload_sandbox_modules()


@dataclass(frozen=True)
class Job:
    """What to run: a notebook's cells, which exercises to collect, the seed, the limits."""

    notebook: str
    cells: tuple[RunCell, ...]
    seed: int
    limits: Limits


class CellTimeout(BaseException):
    """Raised in the main thread when a cell runs past its limit."""


class CappedStream(io.TextIOBase):
    """Where cells print: nothing is kept; what goes past ``limit`` characters is counted."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size, self.dropped = limit, 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text: Any) -> int:
        length = len(str(text))
        self.dropped += max(0, self.size + length - max(self.size, self.limit))
        self.size += length
        return length

    def flush(self) -> None:
        pass


class Reporter:
    """Sends JSON messages to the parent over the write end of a pipe."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.conn.send_bytes(json.dumps(message, ensure_ascii=False).encode("utf-8"))
        except Exception:  # a student may have closed or broken the pipe: nothing left to report to
            pass


def _on_alarm(signum: int, frame: Any) -> None:
    signal.alarm(1)  # keep interrupting a cell that swallows the first one
    raise CellTimeout()


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="nocolor", autocall=0)
    shell.history_manager.enabled = False
    return shell


def _error_text(error: BaseException | None) -> str:
    if isinstance(error, CellTimeout):
        return "超過每格的時間上限"
    if error is None:
        return ""
    where = ""
    try:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<ipython-input")]
        if frames:
            where = f"（第 {frames[-1].lineno} 行）"
    except BaseException:
        where = ""
    return f"{type(error).__name__}: {safe_text(error, 300)}{where}"


def run(job: Job, conn: Any) -> None:
    """Entry point of the child process (``multiprocessing`` target)."""
    from autograder.tamper import Snapshot

    reporter = Reporter(conn)
    workdir = Path(tempfile.mkdtemp(prefix="pt2e-submission-"))
    missing = confine(job.limits, workdir)
    reporter.send({"type": "start", "unconfined": missing})
    output = CappedStream(job.limits.output_kb * 1024)
    sys.stdout = sys.stderr = output  # what cells print stays here, capped
    shell = _shell()
    signal.signal(signal.SIGALRM, _on_alarm)
    exercises = exercises_of(job.notebook)
    snapshot = Snapshot()
    for index, cell in enumerate(job.cells):
        if cell.kind == "collect":
            signal.alarm(0)
            repaired = snapshot.restore()
            sys.stdout = sys.stderr = output
            exercise = exercises.get(cell.exercise or "")
            evidence = collect(exercise, dict(shell.user_ns), job.seed) if exercise else {"missing": [cell.label]}
            reporter.send({"type": "evidence", "exercise": cell.exercise, "data": evidence, "repaired": repaired})
            continue
        signal.alarm(job.limits.cell_seconds)
        try:
            result = shell.run_cell(cell.source, store_history=False, silent=False)
            error = result.error_in_exec or result.error_before_exec
        except BaseException as exc:  # CellTimeout raised outside the shell's own handler
            error = exc
        finally:
            signal.alarm(0)
        if error is not None:
            reporter.send({"type": "cell", "index": index, "label": cell.label, "error": _error_text(error)})
    reporter.send({"type": "done", "output_dropped": output.dropped})
