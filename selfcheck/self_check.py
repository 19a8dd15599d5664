"""The self-check cell of an exercise: when it fails, say why in a few lines, not in a torchao traceback.

A self-check cell runs the student's answer on the chapter's own models and asserts what it should do::

    with self_check("M03-4", "add_quantizer"):
        prepared = prepare_pt2e(export_module(AddSelf(), x), AddQuantizer(share=True))
        assert ..., "add(r, r)：兩個輸入是同一個 node，只貼一條邊"
        print("自我檢查通過")

When the block raises, the student reads:

- for an exercise not answered yet (its stub's ``NotImplementedError``, a name not defined): one line,
  ``先完成練習：…（這一格要用到它）`` (``common.exercises.ExerciseNotDone``);
- for a failed assert: its message (or the line of the assert that has none) and the exercise it concerns;
- for anything else the answer raised: the exception, what it means, and the innermost line of notebook
  code that raised it (``common.explain``), not torchao's;
- then, when the exercise's public cases show a known misconception, its name, why it is wrong and the
  section to reread (the same words as the preview and the grader's feedback);
- and the full traceback folded, one click away, for whoever wants it.

The cell still fails (``SelfCheckFailed``), so "run all" stops there; IPython shows the lines of
``_render_traceback_`` instead of a traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from common.explain import ShortFailure, failure_head, show_traceback_folded

DIAGNOSE = True
"""Run the public cases to name a misconception when a self-check fails. The grader's sandbox turns it off:
nobody reads a graded run's outputs, and the public cases would cost each wrong submission seconds."""


class SelfCheckFailed(ShortFailure):
    """A self-check that did not pass; ``lines`` is what the student reads (no traceback)."""


def _record(notebook: str, exercise: str) -> tuple[str, tuple[str, ...]]:
    """The exercise's title and the names the student defines (the key and nothing when unknown)."""
    from selfcheck.preview import public_exercises

    try:
        spec = public_exercises(notebook)[exercise]
        return spec.title, tuple(spec.names)
    except Exception:
        return exercise, ()


def _title(notebook: str, exercise: str) -> str:
    return _record(notebook, exercise)[0]


def unanswered(error: BaseException | None, names: tuple[str, ...]) -> bool:
    """True for what an exercise not answered yet raises: its stub's ``NotImplementedError``, a ``NameError`` of
    one of its ``names``, or a cell's ``ExerciseNotDone`` (a typo in a finished answer is the student's to see)."""
    from common.exercises import ExerciseNotDone

    while error is not None:
        if isinstance(error, NotImplementedError | ExerciseNotDone):
            return True
        if isinstance(error, NameError) and getattr(error, "name", None) in names:
            return True
        error = error.__cause__ or error.__context__
    return False


def failure_lines(notebook: str, exercise: str, error: BaseException) -> list[str]:
    """What a student reads when ``exercise``'s self-check raised ``error`` (without the diagnosis)."""
    return [failure_head(error), f"  這一格檢查的是練習「{_title(notebook, exercise)}」：先把它修好，再往下執行。"]


def diagnosis_lines(notebook: str, exercise: str, namespace: dict[str, Any]) -> list[str]:
    """The misconceptions the exercise's public cases recognise in ``namespace``'s answer, in the feedback's words."""
    from selfcheck.diagnosis import public_causes
    from selfcheck.misconceptions import causes_block
    from selfcheck.preview import public_exercises, run_public

    try:
        if not any(m.public for m in public_exercises(notebook)[exercise].misconceptions):
            return []
        run = run_public(notebook, exercise, namespace)
        failing = [name for name, problem in run.problems.items() if problem is not None]
        return causes_block(notebook, public_causes(run.spec.misconceptions, run.evidence, run.expected, failing), "  ")
    except Exception:  # a diagnosis is a courtesy: the failure is already said
        return []


@contextlib.contextmanager
def self_check(notebook: str, exercise: str, namespace: dict[str, Any] | None = None) -> Iterator[None]:
    """Run a self-check block; on failure raise ``SelfCheckFailed`` with lines a student can act on.

    ``namespace``: where the student's answer lives, for the diagnosis (the caller's globals by default).
    """
    import sys

    from common.exercises import self_check_failed

    names = namespace if namespace is not None else sys._getframe(2).f_globals
    try:
        yield
    except Exception as error:
        from common.exercises import ExerciseNotDone

        title, defined = _record(notebook, exercise)
        if unanswered(error, defined):
            raise ExerciseNotDone(None, "、".join(defined) or title) from None
        self_check_failed(defined, True)
        lines = failure_lines(notebook, exercise, error)
        if DIAGNOSE:
            lines += diagnosis_lines(notebook, exercise, dict(names))
        show_traceback_folded(error)
        raise SelfCheckFailed(lines) from None
    self_check_failed(_record(notebook, exercise)[1], False)
