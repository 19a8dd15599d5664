"""Cells that need an exercise's answer say so, in one line, before the exercise is answered.

A student runs a notebook top to bottom before answering it. A demonstration cell that uses
an answer would then fail somewhere inside, with an IndexError or a NameError that says
nothing useful. Wrapped in ``after_exercise``, it stops with one Chinese line instead::

    with after_exercise(1, "AddQuantizer"):
        prepared = prepare_pt2e(export_module(model, inputs), AddQuantizer(share=True))

shows ``先完成練習 1：AddQuantizer（這一格要用到它）`` while the answer is missing or still a
stub, and does nothing once it is answered. When a finished answer makes the cell fail (an assert that
pins what the chapter showed, or an error inside torchao), the student reads a few lines instead of a
traceback (``AnswerBreaksCell``): the assert's message or the line that raised and what it means, and
which exercise to go back to; the full traceback stays one click away (``common.explain``). When that
exercise's own self-check already failed (``self_check_failed``), the first line says so: the answer is there
but wrong, so "finish it first" would be untrue.

Once a cell has found exercise N unfinished, a later ``after_exercise(N, ...)`` cell (say, the
asserts that pin what it showed) that fails says the same line, instead of failing on the
results that cell never produced. The mark is cleared when that first cell runs to its end.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from common.explain import ShortFailure, failure_head, show_traceback_folded


class ExerciseNotDone(Exception):
    """Raised by a cell that needs an exercise the student has not finished yet."""

    def __init__(self, number: int | None, name: str, rerun: bool = False) -> None:
        self.number, self.name = number, name
        hint = "完成後從用到它的第一格重新執行" if rerun else "這一格要用到它"
        label = f"練習 {number}" if number is not None else "練習"
        super().__init__(f"先完成{label}：{name}（{hint}）")

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return [str(self)]


class AnswerBreaksCell(ShortFailure):
    """A cell that needs an exercise's answer failed with the answer there: the answer is likely wrong."""


def _unfinished(error: BaseException) -> bool:
    """True for what an unanswered exercise raises: its stub's NotImplementedError or a missing name."""
    while error is not None:
        if isinstance(error, NotImplementedError | NameError | ExerciseNotDone):
            return True
        error = error.__cause__ or error.__context__
    return False


_FAILED_SELF_CHECK: set[str] = set()
"""The names of exercises whose self-check last ran and failed (``selfcheck.self_check``): answered, but wrong."""


def self_check_failed(names: tuple[str, ...] | list[str], failed: bool) -> None:
    """Called by a self-check cell: remember (or forget) that the answer defining ``names`` did not pass."""
    for name in names:
        (_FAILED_SELF_CHECK.add if failed else _FAILED_SELF_CHECK.discard)(name)


_UNFINISHED: dict[int | None, str] = {}
"""Exercise → the cell that found it unfinished (its code's file name); cleared when that cell succeeds."""


def _calling_cell() -> str:
    """The file name of the code running the ``with`` block (IPython names a cell by its content)."""
    frame = sys._getframe(3)  # _calling_cell ← after_exercise ← contextlib __enter__ ← the cell
    return frame.f_code.co_filename if frame is not None else ""


@contextlib.contextmanager
def after_exercise(number: int | None, name: str) -> Iterator[None]:
    """Turn "the exercise is not answered yet" into ``ExerciseNotDone`` for the cell inside.

    ``number`` is the exercise's number in the notebook (``None`` where the notebook has one
    unnumbered exercise); ``name`` is what the student writes there.
    """
    cell = _calling_cell()
    try:
        yield
    except Exception as error:
        if _UNFINISHED.get(number, cell) != cell:  # failing on what an earlier cell could not compute
            raise ExerciseNotDone(number, name, rerun=True) from None
        if _unfinished(error):
            _UNFINISHED[number] = cell
            raise ExerciseNotDone(number, name) from None
        label = f"練習 {number}" if number is not None else "練習"
        show_traceback_folded(error)
        if any(part.strip() in _FAILED_SELF_CHECK for part in name.split("、")):
            raise AnswerBreaksCell(
                [
                    f"{label} 的答案（{name}）還沒通過自我檢查，先修好它：這一格用到它，出錯是因為答案還不對。",
                    "  " + failure_head(error, failed="這一格沒有通過", crashed="這一格執行時出錯"),
                ]
            ) from None
        raise AnswerBreaksCell(
            [
                failure_head(error, failed="這一格沒有通過", crashed="這一格執行時出錯"),
                f"  這一格用到{label}的 {name}，上面的結果要你的答案對才成立：回到{label}，看它的自我檢查與評分預覽怎麼說。",
            ]
        ) from None
    if _UNFINISHED.get(number) == cell:  # the cell that needed the answer now runs: it is there
        del _UNFINISHED[number]
