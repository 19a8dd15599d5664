"""A notebook is read before it is answered: run unanswered, it explains itself.

The release notebooks ship the outputs of such a run (drawings and tables that need no
answer), and those outputs are checked to be what the run shows today.

Every release notebook runs top to bottom with no answer filled in, as another CPU would run it
(``isa.rotation(module, 2)``: with ``test_autograde``'s turn 0 and ``test_notebooks``' turn 1, each
module runs under every capped profile this CPU offers, up to three); every graded test cell
fails (what ``nbgrader validate --invert`` checks, from the same run). The only errors allowed
are the stubs' ``NotImplementedError``, the preview's failed checks, and the one-line
"先完成練習 N" of a cell that needs an answer (``common.exercises.after_exercise``).
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest

from autograder.course import RELEASE
from autograder.maintenance import isa
from autograder.maintenance.outputs import notebook_difference
from autograder.maintenance.release import run_unanswered, without_answers_outputs
from common.exercises import ExerciseNotDone, after_exercise

ALLOWED = {"NotImplementedError", "ChecksFailed", "ExerciseNotDone"}
RELEASED = sorted(RELEASE.glob("M*/*.ipynb"))


def errors_of(nb: nbformat.NotebookNode) -> list[tuple[int, str, str]]:
    return [
        (index, output.ename, output.evalue)
        for index, cell in enumerate(nb.cells)
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]


@pytest.mark.parametrize("path", RELEASED, ids=lambda p: p.stem)
@pytest.mark.usefixtures("forked_kernel")  # a new process forked with torch imported: tests/forked_kernels.py
def test_release_notebook_runs_unanswered_with_only_explained_errors(path: Path) -> None:
    committed = nbformat.read(path, as_version=4)
    nb = run_unanswered(copy.deepcopy(committed), isa.rotation(path.parent.name, 2))
    unexplained = [(i, name, value[:200]) for i, name, value in errors_of(nb) if name not in ALLOWED]
    assert not unexplained, f"{path.stem}: cells fail unanswered with errors that do not say what to do: {unexplained}"
    passing = [  # what `nbgrader validate --invert` asks: no graded test cell passes before it is answered
        cell.metadata.nbgrader.get("grade_id")
        for cell in nb.cells
        if cell.cell_type == "code"
        and cell.metadata.get("nbgrader", {}).get("grade")
        and not cell.metadata.nbgrader.get("solution")
        and not any(output.output_type == "error" for output in cell.get("outputs", []))
    ]
    assert not passing, f"{path.stem}: graded cells pass before the exercise is answered: {passing}"
    for index, name, value in errors_of(nb):
        if name == "ExerciseNotDone":
            assert value.startswith("先完成練習"), (index, value)
            tracebacks = [o.traceback for o in nb.cells[index].outputs if o.output_type == "error"]
            assert all(len(t) == 1 for t in tracebacks), "a 先完成練習 cell shows one line, not a traceback"
    shown = without_answers_outputs(nb)
    stale = notebook_difference(committed, shown)
    assert stale is None, (
        f"{path.stem}: the outputs shipped are not what an unanswered run shows ({stale}): run pt2e-course release"
    )
    assert any(cell.get("outputs") for cell in shown.cells), (
        f"{path.stem}: a student opening the notebook sees no output"
    )


def test_release_notebooks_exist() -> None:
    assert len(RELEASED) >= 16


# --- the helper itself ----------------------------------------------------------------------------


def _stub() -> None:
    raise NotImplementedError()


def _run(source: str, cell: str, namespace: dict) -> None:
    exec(compile(source, cell, "exec"), namespace)


def test_a_cell_that_needs_an_unanswered_exercise_says_so_in_one_line() -> None:
    namespace = {"after_exercise": after_exercise, "answer": _stub}
    with pytest.raises(ExerciseNotDone) as caught:
        _run("with after_exercise(2, 'neighbors'):\n    answer()\n", "<cell-a>", namespace)
    assert str(caught.value) == "先完成練習 2：neighbors（這一格要用到它）"
    assert caught.value._render_traceback_() == [str(caught.value)]


def test_the_pins_after_it_say_the_same_until_that_cell_runs() -> None:
    namespace = {"after_exercise": after_exercise, "answer": _stub}
    with pytest.raises(ExerciseNotDone):
        _run("with after_exercise(7, 'f'):\n    answer()\n", "<cell-show>", namespace)
    _run("with after_exercise(7, 'f'):\n    rows = []\n", "<cell-ok>", namespace)  # succeeds on stale data
    with pytest.raises(ExerciseNotDone, match="重新執行"):
        _run("with after_exercise(7, 'f'):\n    assert rows\n", "<cell-pin>", namespace)
    namespace["answer"] = lambda: None
    _run("with after_exercise(7, 'f'):\n    answer()\n", "<cell-show>", namespace)
    with pytest.raises(AssertionError) as caught:  # answered: a real failure is the student's to see, in words
        _run("with after_exercise(7, 'f'):\n    assert rows, '結果應該有幾列'\n", "<cell-pin>", namespace)
    assert caught.value._render_traceback_()[0] == "✗ 這一格沒有通過：結果應該有幾列"
    assert "練習 7" in caught.value._render_traceback_()[1]


def test_a_later_cell_missing_what_the_first_one_computes_says_where_to_rerun() -> None:
    namespace = {"after_exercise": after_exercise, "answer": _stub}
    with pytest.raises(ExerciseNotDone, match="這一格要用到它"):
        _run("with after_exercise(5, 'h'):\n    table = answer()\n", "<cell-compute>", namespace)
    with pytest.raises(ExerciseNotDone, match="完成後從用到它的第一格重新執行"):  # a NameError of `table`
        _run("with after_exercise(5, 'h'):\n    assert table\n", "<cell-pin-name>", namespace)


def test_errors_of_a_finished_answer_say_what_they_mean_without_a_traceback() -> None:
    from common.exercises import AnswerBreaksCell

    with pytest.raises(AnswerBreaksCell) as caught, after_exercise(9, "g"):
        [][1]
    first, second = caught.value._render_traceback_()
    assert first.startswith("✗ 這一格執行時出錯：IndexError（索引超出範圍") and "list index out of range" in first
    assert "練習 9" in second and "g" in second
