"""The student process: runs one submission's cells and reports up a framed pipe (the untrusted side).

It is forked (through a middle process, see ``autograder.sandboxed.server``) from a fork
server that has already imported torch, torchao, IPython and the course packages, so a
submission pays for its own cells and nothing else. After ``confine`` it runs the cells in
an IPython shell with a time limit per cell, records each exercise's evidence where the
hidden test cell stood, and writes messages up a pipe as frames: a 4-byte big-endian
length, then UTF-8 JSON. The student's code can write on that pipe too, so the parent
trusts none of it: it checks that each message fits the order of the prepared cells
(``autograder.engine.sandbox``) and judges only plain data.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import traceback
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from autograder.sandboxed import protocol
from autograder.sandboxed.limits import Limits
from selfcheck.evidence import safe_text

ERROR_CHARS = 120
"""A cell error keeps its type, this many characters of its first line, and the line number."""


@dataclass(frozen=True)
class Cell:
    """One cell to run: ordinary code, or the place to record an exercise's evidence."""

    kind: str  # "code", "collect" or "practice"
    source: str
    label: str
    exercise: str | None = None


@dataclass(frozen=True)
class Job:
    """What to run: a notebook's cells (``RunCell``-like), the seed of the hidden cases, the limits."""

    notebook: str
    cells: tuple[Any, ...]
    seed: int
    limits: Limits

    def wire(self) -> dict[str, Any]:
        """The job as JSON data, for the fork server."""
        return {
            "notebook": self.notebook,
            "cells": [[c.kind, c.source, c.label, c.exercise] for c in self.cells],
            "seed": self.seed,
            "limits": vars(self.limits),
        }

    @staticmethod
    def from_wire(data: dict[str, Any]) -> Job:
        cells = tuple(Cell(*cell) for cell in data["cells"])
        return Job(str(data["notebook"]), cells, int(data["seed"]), Limits(**data["limits"]))


class Reporter:
    """Writes frames on the write end of the job's pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict[str, Any]) -> bool:
        """False when the message is too large to send (nothing is written then)."""
        try:
            data = protocol.encode(message)
        except (TypeError, ValueError, RecursionError):
            return False
        if len(data) - protocol.HEADER.size > protocol.MAX_FRAME_BYTES:
            return False
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:  # a student may have closed or replaced the pipe: nothing left to report to
            pass
        return True


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


def _on_alarm(signum: int, frame: Any) -> None:
    signal.alarm(1)  # keep interrupting a cell that swallows the first one
    raise CellTimeout()


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="nocolor", autocall=0)
    shell.history_manager.enabled = False
    # nobody sees a graded run's outputs: show values as text, never render drawings or tables
    shell.display_formatter.active_types = ["text/plain"]
    shell.display_formatter.mimebundle_formatter.enabled = False
    return shell


def _error_text(error: BaseException | None) -> str:
    """What the student reads about a cell that raised: the type (with what it means when the message is empty),
    the start of the message's first line, and the cell's line that raised it: nothing else."""
    from common.explain import meaning

    if isinstance(error, CellTimeout):
        return "超過每格的時間上限"
    if error is None:
        return ""
    lines = getattr(type(error), "_render_traceback_", None) and getattr(error, "lines", None)
    if isinstance(lines, list) and lines and all(type(line) is str for line in lines):
        # the course's own short failure (a self-check, a cell that needs an answer): its first line says it all
        return safe_text(lines[0].removeprefix("✗ "), ERROR_CHARS)
    where = ""
    try:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<ipython-input")]
        if frames:
            code = " ".join(str(frames[-1].line or "").split())[:80]
            where = f"（第 {int(frames[-1].lineno or 0)} 行" + (f"：{code}）" if code else "）")
    except BaseException:
        where = ""
    lines = safe_text(error, ERROR_CHARS).splitlines()
    name = safe_text(type(error).__name__, 60)
    if lines and lines[0].strip():
        return f"{name}：{lines[0].strip()}{where}"
    gloss = meaning(name)
    return f"{name}{f'（{gloss}）' if gloss else ''}{where}"


def _recorder() -> Any:
    """``record_exercise(exercise, namespace, seed)``: what the student's code produced, as plain data."""
    try:
        from autograder.sandboxed.record import record_exercise  # type: ignore[import-not-found]
    except ImportError:  # until the recording namespace lands: the evidence the cases compute
        from autograder.sandboxed.cases.base import collect as record_exercise
    return record_exercise


RECORDING_MODULES = ("autograder.sandboxed.record", "selfcheck.casekit", "selfcheck.evidence")
"""The course's code that records an exercise's answers in the sandbox (``record_exercise``, the
``collect`` it runs and its ``run_case``): what ``RecordingHelpers`` keeps as it was before the first cell."""

_MISSING = object()


class RecordingHelpers:
    """The recording code as it was before any cell ran: the functions and classes of ``RECORDING_MODULES``,
    each class's attributes and each function's code. ``restore()`` puts back what a cell changed.

    ``tamper.Snapshot`` watches the module dictionaries of ``autograder``; this also covers ``selfcheck.casekit``
    and what a submission can change without rebinding a name (a method of ``Recorder``, a function's
    ``__code__``). A change it cannot see still costs only the exercise whose recording it breaks (``run``).
    """

    def __init__(self) -> None:
        self.modules: dict[str, dict[str, Any]] = {}
        self.classes: dict[type, dict[str, Any]] = {}
        self.code: dict[Any, Any] = {}
        for name in RECORDING_MODULES:
            module = sys.modules.get(name)
            if module is None:
                continue
            items = {k: v for k, v in vars(module).items() if callable(v)}
            self.modules[name] = items
            for value in items.values():
                if isinstance(value, type) and value.__module__ == name:
                    self.classes[value] = dict(vars(value))
                    self.code.update((f, f.__code__) for f in vars(value).values() if isinstance(f, types.FunctionType))
                elif isinstance(value, types.FunctionType):  # its own or one it imported (``run_case``)
                    self.code[value] = value.__code__

    def restore(self) -> list[str]:
        """Put back every function, class attribute and code object a cell changed; their names."""
        try:
            return self._restore()
        except Exception:  # something that cannot be put back: the guard in ``run`` still holds
            return ["?"]

    def _restore(self) -> list[str]:
        repaired: list[str] = []
        for name, items in self.modules.items():
            namespace = vars(sys.modules[name]) if name in sys.modules else {}
            for key, value in items.items():
                if namespace.get(key, _MISSING) is not value:
                    namespace[key] = value
                    repaired.append(f"{name}.{key}")
        for cls, attributes in self.classes.items():
            label = f"{cls.__module__}.{cls.__qualname__}"
            for key in [k for k in vars(cls) if k not in attributes]:
                delattr(cls, key)
                repaired.append(f"{label}.{key}")
            for key, value in attributes.items():
                if vars(cls).get(key, _MISSING) is not value:
                    setattr(cls, key, value)
                    repaired.append(f"{label}.{key}")
        for function, code in self.code.items():
            if function.__code__ is not code:
                function.__code__ = code
                repaired.append(f"{function.__module__}.{function.__qualname__}")
        return repaired


def _record_guarded(
    record: Any, exercise: Any, namespace: dict[str, Any], seed: int, restore: Callable[[], list[str]]
) -> Any:
    """``record(exercise, namespace, seed)``; when the recording itself raises (outside any case: each case
    is guarded on its own), a plain account of it instead, which costs this exercise only, and the
    recording code is put back for the next one."""
    try:
        return record(exercise, namespace, seed)
    except BaseException as exc:  # a submission can make it raise anything, SystemExit included
        changed = restore()
        try:
            error = safe_text(type(exc).__name__, 60)
        except BaseException:
            error = "?"
        return {"unrecorded": {"error": error, "changed": [safe_text(c, 120) for c in changed[:5]]}}


def _judge_practices(notebook: str, names: list[str], namespace: dict[str, Any]) -> dict[str, bool]:
    """Each practice in ``names`` the student's cells defined: whether its check passes (``selfcheck.practice``).
    A practice whose judging raises anything (the time limit included) did not pass."""
    try:
        from selfcheck.practice import judge_practices

        mine = {name: namespace[name] for name in names if name in namespace}
        return {str(name)[:80]: bool(passed) is True for name, passed in judge_practices(notebook, mine).items()}
    except BaseException:  # a submission can make its own definitions raise anything, SystemExit included
        return dict.fromkeys(names, False)


def _snapshot() -> Any:
    try:
        from autograder.sandboxed.tamper import Snapshot
    except ImportError:
        return None
    return Snapshot()


def run(job: Job, fd: int, unconfined: Iterable[str] = ()) -> None:
    """Run the cells of ``job``; messages go to ``fd``. Called in the confined student process."""
    from autograder.sandboxed.cases.base import exercises_of

    reporter = Reporter(fd)
    record = _recorder()
    import selfcheck.self_check

    selfcheck.self_check.DIAGNOSE = False  # nobody reads a graded run's outputs: no public cases on a failed self-check
    reporter.send(protocol.message(protocol.START, unconfined=list(unconfined)))
    output = CappedStream(job.limits.output_kb * 1024)
    sys.stdout = sys.stderr = output  # what cells print stays here, capped
    shell = _shell()
    signal.signal(signal.SIGALRM, _on_alarm)
    exercises = exercises_of(job.notebook) if any(c.kind == "collect" for c in job.cells) else {}
    snapshot = _snapshot()
    restore_recording = RecordingHelpers().restore  # bound now: a cell that patches the class changes nothing
    for index, cell in enumerate(job.cells):
        if cell.kind == "collect":
            signal.alarm(0)
            repaired = snapshot.restore() if snapshot is not None else []
            repaired += restore_recording()
            sys.stdout = sys.stderr = output
            exercise = exercises.get(cell.exercise or "")
            if exercise:
                evidence = _record_guarded(record, exercise, dict(shell.user_ns), job.seed, restore_recording)
            else:
                evidence = {"missing": [cell.label]}
            message = protocol.message(protocol.EVIDENCE, index=index, exercise=cell.exercise, data=evidence)
            if not reporter.send({**message, "repaired": repaired[:20]}):
                reporter.send({**message, "data": None, "problem": "too_large"})
            continue
        if cell.kind == "practice":
            if snapshot is not None:
                snapshot.restore()
            sys.stdout = sys.stderr = output
            signal.alarm(job.limits.cell_seconds)
            try:
                judged = _judge_practices(job.notebook, cell.source.split("\n"), dict(shell.user_ns))
            finally:
                signal.alarm(0)
            reporter.send(protocol.message(protocol.PRACTICED, index=index, data=judged))
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
            reporter.send(protocol.message(protocol.CELL, index=index, label=cell.label, error=_error_text(error)))
    reporter.send(protocol.message(protocol.DONE, index=len(job.cells), output_dropped=output.dropped))
