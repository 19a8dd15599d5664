"""Practice after a mistake (issue 50, ``selfcheck.practice``): every practice in the exercises' records is offered
where its misconception is named, its stub is not taken for an answer, its worked example passes, the wrong
answers a student who still holds the misconception would write fail, and a repeated failure shows the next step."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from autograder.course import notebook_id, source_notebooks
from selfcheck.misconceptions import cause_lines
from selfcheck.practice import Practice, PracticeFailed, _failures, practice
from selfcheck.preview import public_exercises

PRACTICE_FIXTURES = Path(__file__).parent / "fixtures" / "practice"


def _wrong_answers() -> dict[str, list[str]]:
    """Per practice, answers a student who still holds the misconception would write: the files
    ``tests/fixtures/practice/<notebook>/<name>_<n>.py``, each headed ``# practice: <name>`` and ``# wrong: …``."""
    found: dict[str, list[str]] = {}
    for path in sorted(PRACTICE_FIXTURES.glob("*/*.py")):
        code = path.read_text(encoding="utf-8")
        name = re.search(r"^# practice: (\S+)$", code, flags=re.M)
        assert name and re.search(r"^# wrong: .+$", code, flags=re.M), f"{path}: a '# practice:' and a '# wrong:' line"
        found.setdefault(name[1], []).append(code)
    return found


WRONG = _wrong_answers()


def _practices() -> list[tuple[str, str, Practice]]:
    """(notebook, misconception, practice) for every misconception with a practice."""
    found = []
    for path in source_notebooks():
        notebook = notebook_id(path)
        for exercise in public_exercises(notebook).values():
            for misconception in exercise.misconceptions:
                if misconception.practice is not None:
                    found.append((notebook, misconception.key, misconception.practice))
    return found


PRACTICES = _practices()
DISTINCT = {task.name: (notebook, key, task) for notebook, key, task in PRACTICES}


def _defined(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<cell>", "exec"), namespace)
    return namespace


def _run(notebook: str, key: str, namespace: dict[str, Any] | None = None) -> tuple[str, list[str] | None]:
    """What the cell prints, and the lines of the failure it shows (None when it passed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            practice(notebook, key, namespace)
        except PracticeFailed as failed:
            return out.getvalue(), failed.lines
    return out.getvalue(), None


def test_there_are_practices_and_every_one_has_wrong_answers_here() -> None:
    assert PRACTICES, "no misconception has a practice"
    assert set(DISTINCT) <= set(WRONG), f"practices without wrong answers in this test: {set(DISTINCT) - set(WRONG)}"


@pytest.mark.parametrize(("notebook", "key"), [(n, k) for n, k, _ in PRACTICES])
def test_the_diagnosis_offers_the_practice(notebook: str, key: str) -> None:
    misconception = next(
        m for e in public_exercises(notebook).values() for m in e.misconceptions if m.key == key and m.practice
    )
    lines = cause_lines(notebook, misconception)
    assert lines[-1].startswith("再練一題：") and f'practice("{notebook}", "{key}")' in lines[-1], lines


def test_the_preview_of_a_wrong_answer_offers_the_practice_of_the_cause_it_names() -> None:
    """Where people meet it: the preview cell of a wrong fixture whose misconception has a practice."""
    from autograder.maintenance.fixtures import wrong_solutions
    from selfcheck import ChecksFailed
    from selfcheck import preview as run_preview

    with_practice = {(n, k) for n, k, _ in PRACTICES}
    wrongs = [w for w in wrong_solutions() if w.in_notebook and (w.notebook, w.misconception) in with_practice]
    assert wrongs, "no wrong fixture is named in the notebook by a misconception with a practice"
    for wrong in wrongs[:3]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(ChecksFailed):
            run_preview(wrong.notebook, wrong.exercise, _defined(wrong.code))
        assert (
            f'再練一題：在新的一格執行 from selfcheck import practice; practice("{wrong.notebook}", "{wrong.misconception}")'
            in (out.getvalue())
        ), out.getvalue()


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_a_practice_opens_with_its_task_refuses_its_stub_and_passes_its_example(name: str) -> None:
    notebook, key, task = DISTINCT[name]
    printed, failed = _run(notebook, key)
    assert failed is None and printed.startswith("再練一題：") and task.starter.strip() in printed
    assert f'practice("{notebook}", "{key}", globals())' in printed
    _, failed = _run(notebook, key, _defined(task.starter))
    assert failed and "寫好" in failed[0], failed
    printed, failed = _run(notebook, key, _defined(task.example))
    assert failed is None and printed.startswith("✓"), (printed, failed)


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_each_wrong_answer_fails_and_a_repeated_failure_shows_the_next_step(name: str) -> None:
    notebook, key, task = DISTINCT[name]
    _failures.clear()
    for code in WRONG[name]:
        _failures.clear()
        _, failed = _run(notebook, key, _defined(code))
        assert failed and failed[0].startswith("✗"), (code, failed)
        assert "小一步" not in "\n".join(failed) and "做好的例子" not in "\n".join(failed), "the first failure: no step"
    wrong = _defined(WRONG[name][0])
    _, second = _run(notebook, key, wrong)
    assert second and any(line.startswith("小一步：") for line in second), second
    _, third = _run(notebook, key, wrong)
    assert third and any(line.startswith("看一個做好的例子") for line in third), third
    assert task.example.strip().splitlines()[-1].strip() in "\n".join(third), "the worked example is shown"
    _, fourth = _run(notebook, key, wrong)
    assert fourth == third, "after the worked example, the worked example again"
    _run(notebook, key, _defined(task.example))
    _, again = _run(notebook, key, wrong)
    assert again and "小一步" not in "\n".join(again), "a pass starts the steps over"
    _failures.clear()


def test_a_key_shared_by_two_exercises_of_a_notebook_opens_one_practice() -> None:
    """``practice(notebook, key)`` finds a practice by the misconception's key: where two exercises of a notebook use
    the same key, they must not hold two different practices."""
    for path in source_notebooks():
        notebook = notebook_id(path)
        held: dict[str, set[str]] = {}
        for exercise in public_exercises(notebook).values():
            for misconception in exercise.misconceptions:
                if misconception.practice is not None:
                    held.setdefault(misconception.key, set()).add(misconception.practice.name)
        assert all(len(names) == 1 for names in held.values()), (notebook, held)
