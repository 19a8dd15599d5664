"""Practice after a mistake (issue 50): a short exercise of its own for one misconception.

When the self-check, the preview or the feedback names a misconception that has a practice, its lines end
with ``再練一題：practice("M03-4", "output_not_shared")``. Run in a new cell, that prints the task (a few lines,
one idea) and a stub to copy. The student writes the stub's function in another new cell and runs
``practice("M03-4", "output_not_shared", globals())``: the practice's own public check runs on a couple of
tiny inputs and says ✓, or what is wrong. Each further failure on the same practice gives the next step
(``Practice.steps``: a smaller step, then a worked example), not the same text again.

A practice lives in its misconception's record (``Misconception.practice`` in ``selfcheck/public/mXX_Y.py``).
It is student-side teaching material: its check knows the idea, never the graded exercise's answer. Nothing
here changes the graded notebook's cells; it works wherever the course's package is installed (JupyterLab,
Colab, the hub).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from common.explain import ShortFailure, failure_head

Check = Callable[[Any], list[str]]
"""The student's definition → what is wrong with it, in Chinese (empty when it does what the task asks)."""


@dataclass(frozen=True)
class Practice:
    """One idea, practised on its own.

    ``name``: what the student defines (a function, a class, or a value such as a table of predictions); ``task``: what to write, two or three sentences;
    ``starter``: the stub to copy, which defines ``name`` and raises ``NotImplementedError``; ``check``: judges the
    student's ``name`` on its own tiny inputs; ``step``: what the second failure shows, a smaller step;
    ``example``: what the third failure shows, a worked example (code that defines ``name`` and passes ``check``);
    ``note``: a sentence after the example, on what it shows.
    """

    name: str
    task: str
    starter: str
    check: Check
    step: str
    example: str
    note: str = ""

    def __post_init__(self) -> None:
        for code, what in ((self.starter, "starter"), (self.example, "example")):
            if not any(
                f"{lead}{self.name}{tail}" in code for lead, tail in (("def ", "("), ("class ", ""), ("", " ="))
            ):
                raise ValueError(f"practice {self.name!r}: the {what} must define it")

    @property
    def steps(self) -> tuple[str, ...]:
        """What repeated failures show, in turn: the smaller step, then the worked example."""
        example = "\n".join(f"    {line}" if line else "" for line in self.example.rstrip().splitlines())
        return self.step, f"\n{example}" + (f"\n{self.note}" if self.note else "")


class PracticeFailed(ShortFailure):
    """A practice that did not pass; ``lines`` is what the student reads (no traceback)."""


_failures: dict[tuple[str, str], int] = {}
"""(notebook, misconception) → how many times its practice failed in this kernel."""


def practice_call(notebook: str, key: str) -> str:
    """The call that opens a practice: ``practice("M03-4", "output_not_shared")``."""
    return f'practice("{notebook}", "{key}")'


def offer_line(notebook: str, key: str) -> str:
    """The line a diagnosis ends with when the misconception has a practice."""
    return f"再練一題：在新的一格執行 from selfcheck import practice; {practice_call(notebook, key)}"


def find(notebook: str, key: str) -> tuple[Any, Practice]:
    """The misconception called ``key`` among ``notebook``'s exercises, and its practice; ``KeyError`` otherwise."""
    from selfcheck.preview import public_exercises

    for exercise in public_exercises(notebook).values():
        for misconception in exercise.misconceptions:
            if misconception.key == key and misconception.practice is not None:
                return misconception, misconception.practice
    raise KeyError(f"{notebook} 沒有「{key}」這個練習")


def _task_lines(notebook: str, key: str, misconception: Any, task: Practice) -> list[str]:
    return [
        f"再練一題：{misconception.name}",
        task.task,
        "把下面這段複製到新的一格，寫好以後執行它，再執行：",
        f"  {practice_call(notebook, key)[:-1]}, globals())",
        "",
        task.starter.rstrip(),
    ]


def next_step(notebook: str, key: str, task: Practice) -> str:
    """What a failure adds, by how many times this practice failed before: nothing the first time, then each
    step in turn (the last one, the worked example, from then on)."""
    count = _failures.get((notebook, key), 0)
    if count <= 1:
        return ""
    step = task.steps[min(count - 2, len(task.steps) - 1)]
    lead = "看一個做好的例子" if count - 2 >= len(task.steps) - 1 else "小一步"
    return f"{lead}：{step}"


def untouched(task: Practice, answer: Any) -> bool:
    """True for a value practice answered with the starter's own value (a function's stub raises instead)."""
    if callable(answer):
        return False
    starter: dict[str, Any] = {}
    try:
        exec(compile(task.starter, "<starter>", "exec"), starter)  # the course's own text, not the student's
        return bool(answer == starter.get(task.name))
    except Exception:
        return False


def practice(notebook: str, key: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Open the practice of misconception ``key`` of ``notebook`` (no ``namespace``, or its name not defined yet:
    print the task and the stub), or check the student's definition in ``namespace``."""
    try:
        misconception, task = find(notebook, key)
    except KeyError as missing:
        raise PracticeFailed([str(missing.args[0])]) from None
    answer = (namespace or {}).get(task.name)
    if answer is None:
        print("\n".join(_task_lines(notebook, key, misconception, task)))
        return
    if untouched(task, answer):
        raise PracticeFailed([f"先把 {task.name} 寫好（換掉題目給的 None），再執行這一格"])
    try:
        problems = task.check(answer)
    except NotImplementedError:
        raise PracticeFailed([f"先把 {task.name} 寫好（換掉 raise NotImplementedError()），再執行這一格"]) from None
    except Exception as error:  # the student's code raised inside the check
        problems = [failure_head(error, crashed="執行你的程式時出錯")]
    if not problems:
        _failures.pop((notebook, key), None)
        print(f"✓ 再練一題「{misconception.name}」通過：回到練習，用同一個想法修好它")
        return
    _failures[(notebook, key)] = _failures.get((notebook, key), 0) + 1
    lines = [f"✗ 再練一題「{misconception.name}」還沒通過：", *(f"  {p}" for p in problems)]
    step = next_step(notebook, key, task)
    if step:
        lines += ["", *step.splitlines()]
    raise PracticeFailed(lines)


def practices_of(notebook: str) -> dict[str, Practice]:
    """Every practice of ``notebook``'s exercises, by the name the student defines (one practice may serve several
    misconceptions: it is listed once)."""
    from selfcheck.preview import public_exercises

    found: dict[str, Practice] = {}
    for exercise in public_exercises(notebook).values():
        for misconception in exercise.misconceptions:
            if misconception.practice is not None:
                found.setdefault(misconception.practice.name, misconception.practice)
    return found


def passes(task: Practice, answer: Any) -> bool:
    """Whether ``answer`` (the student's definition of ``task.name``) passes the practice's own check: what
    ``practice(…, globals())`` would print ✓ for. The stub, the starter's value and a definition that raises fail."""
    if answer is None or untouched(task, answer):
        return False
    try:
        return not task.check(answer)
    except Exception:  # the stub's NotImplementedError, or the student's code raising inside the check
        return False


def judge_practices(notebook: str, namespace: Mapping[str, Any]) -> dict[str, bool]:
    """Each practice of ``notebook`` the student defined in ``namespace``: its name → whether it passes.

    The grader calls this in the sandbox, after the submission's cells ran (``autograder.sandboxed.runner``):
    the practice is judged by running the student's code, never from what the notebook printed."""
    return {name: passes(task, namespace[name]) for name, task in practices_of(notebook).items() if name in namespace}
