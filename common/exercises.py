"""Cells that need an exercise's answer say so, in one line, before the exercise is answered.

A student runs a notebook top to bottom before answering it. A demonstration cell that uses
an answer would then fail somewhere inside, with an IndexError or a NameError that says
nothing useful. Wrapped in ``after_exercise``, it stops with one Chinese line instead::

    with after_exercise(1, "AddQuantizer"):
        prepared = prepare_pt2e(export_module(model, inputs), AddQuantizer(share=True))

shows ``先完成練習 1：AddQuantizer（這一格要用到它）`` while the answer is missing or still a
stub, and does nothing once it is answered. Errors of a finished answer are left alone: they
are the student's to see.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class ExerciseNotDone(Exception):
    """Raised by a cell that needs an exercise the student has not finished yet."""

    def __init__(self, number: int, name: str) -> None:
        self.number, self.name = number, name
        super().__init__(f"先完成練習 {number}：{name}（這一格要用到它）")

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return [str(self)]


def _unfinished(error: BaseException) -> bool:
    """True for what an unanswered exercise raises: its stub's NotImplementedError or a missing name."""
    while error is not None:
        if isinstance(error, NotImplementedError | NameError | ExerciseNotDone):
            return True
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def after_exercise(number: int, name: str) -> Iterator[None]:
    """Turn "the exercise is not answered yet" into ``ExerciseNotDone`` for the cell inside."""
    try:
        yield
    except Exception as error:
        if _unfinished(error):
            raise ExerciseNotDone(number, name) from None
        raise
