"""The class report counts practice (issue 50, item 4): a practice the student wrote in the notebook they hand in is
judged in the sandbox by running its code, never from what the notebook printed.

Three students hand in M03-4 with the same wrong AddQuantizer (the output not shared, so the feedback names
``output_not_shared``, whose practice asks for ``annotate_shared_add``). Under their answers, in cells of their
own after the chapter's last graded cell, one writes the practice right, one writes it the way the
misconception would, and one only prints what a passed practice prints. The first counts as practised; the other
two do not. Their scores are those of the wrong answer alone: a practice changes no score.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import nbformat
import pytest
from conftest import wrong_solutions
from submissions import with_wrong, write

from autograder.engine.grading import NotebookResult, StudentResult, grade_notebook, practices_from
from autograder.engine.sandbox import Conversation
from autograder.engine.submission import RunCell, prepare, source_path, with_practices
from autograder.reports.class_record import ClassRecord, student_record
from autograder.reports.class_report import misconceptions_section
from autograder.reports.statistics import class_stats
from autograder.sandboxed import protocol
from autograder.sandboxed.limits import Limits
from selfcheck.practice import find, judge_practices, passes

NOTEBOOK = "M03-4"
KEY = "output_not_shared"
PRACTICE_FIXTURES = Path(__file__).parent / "fixtures" / "practice" / NOTEBOOK


def _task():
    return find(NOTEBOOK, KEY)[1]


def _wrong_practice() -> str:
    """A wrong answer to the practice, as a student still holding the misconception writes it."""
    task = _task()
    return next(p.read_text(encoding="utf-8") for p in sorted(PRACTICE_FIXTURES.glob(f"{task.name}_*.py")))


def _own_cells(nb: nbformat.NotebookNode, *sources: str) -> nbformat.NotebookNode:
    """``nb`` with the student's own cells appended at the end, after every graded cell."""
    nb.cells += [nbformat.v4.new_code_cell(textwrap.dedent(s)) for s in sources]
    return nb


def test_judging_runs_the_definition_not_what_was_printed() -> None:
    task = _task()
    right: dict = {}
    exec(compile(task.example, "<example>", "exec"), right)
    wrong: dict = {}
    exec(compile(_wrong_practice(), "<wrong>", "exec"), wrong)
    stub: dict = {}
    exec(compile(task.starter, "<starter>", "exec"), stub)
    assert passes(task, right[task.name]) and not passes(task, wrong[task.name]) and not passes(task, stub[task.name])
    judged = judge_practices(NOTEBOOK, {task.name: right[task.name], "print": print})
    assert judged == {task.name: True}, "only the practices defined, each judged"
    assert judge_practices(NOTEBOOK, {}) == {}


def test_only_the_students_own_cells_after_the_last_graded_cell_are_added() -> None:
    source = nbformat.read(source_path(NOTEBOOK), as_version=4)
    task = _task()
    student = with_wrong(NOTEBOOK, {})
    _own_cells(student, "print('看看')", task.example, "x = 1")
    cells = prepare(student, source, NOTEBOOK).cells
    assert cells[-1] == RunCell("practice", task.name, "再練一題")
    assert cells[-2].source.strip() == textwrap.dedent(task.example).strip(), "the cell that defines the practice"
    assert not any("看看" in c.source or c.source == "x = 1" for c in cells), "other cells after the last graded one"
    # without a practice defined, nothing changes: the run stops at the last graded cell, as before
    plain = prepare(with_wrong(NOTEBOOK, {}), source, NOTEBOOK).cells
    assert plain == prepare(with_wrong(NOTEBOOK, {}), source).cells and plain[-1].kind == "collect"
    # a name the chapter's own cells define is never taken for a practice (``practice_names``)
    cells = [RunCell("collect", "", "add_quantizer_hidden", "add_quantizer"), RunCell("code", task.example, "第 40 格")]
    assert with_practices(cells, source, NOTEBOOK) == [*cells, RunCell("practice", task.name, "再練一題")]
    chapter = copy.deepcopy(source)
    chapter.cells.append(nbformat.v4.new_code_cell(f"def {task.name}(*args):\n    return None\n"))
    assert with_practices(cells, chapter, NOTEBOOK) == cells[:1]


def test_a_practiced_message_fits_only_the_practice_cell() -> None:
    plan = [("code", None), ("collect", "add_quantizer"), ("practice", None)]
    talk = Conversation(plan)
    start = protocol.message(protocol.START, unconfined=[])
    forged = protocol.message(protocol.PRACTICED, index=0, data={"x": True})
    fits = protocol.message(protocol.PRACTICED, index=2, data={"x": True})
    for message in (start, forged, fits):
        talk.feed(protocol.encode(message)[4:])
    assert [m["type"] for m in talk.messages] == ["start", "practiced"] and talk.rejected["out_of_order"] == 1
    # what the grader keeps of one: this notebook's practices, plain booleans
    name = _task().name
    assert practices_from(NOTEBOOK, {name: True, "os": True, "x": "yes"}) == {name: True}
    assert practices_from(NOTEBOOK, {name: 1}) == {} and practices_from(NOTEBOOK, ["x"]) == {}


@pytest.mark.slow
def test_the_class_report_counts_who_passed_the_practice(tmp_path: Path) -> None:
    task = _task()
    wrong = next(w for w in wrong_solutions() if w.notebook == NOTEBOOK and w.misconception == KEY)
    printed = f"print('✓ 再練一題「輸入共用了，輸出沒有共用」通過')\n{task.name} = None\n"
    students = {
        "practised": task.example,
        "still_wrong": _wrong_practice(),
        "only_printed": printed,
    }
    results, own_label = [], ""
    for student, practice_code in students.items():
        nb = _own_cells(with_wrong(NOTEBOOK, {wrong.exercise: wrong}), practice_code)
        own_label = f"第 {len(nb.cells)} 格"
        path = write(nb, tmp_path / student / "M03" / f"{NOTEBOOK}.ipynb")
        result = grade_notebook(NOTEBOOK, path, 0, Limits())
        results.append(StudentResult(student, "M03", [result]))
    graded: dict[str, NotebookResult] = {r.student: r.notebooks[0] for r in results}
    assert graded["practised"].practices == {task.name: True}
    assert graded["still_wrong"].practices == {task.name: False}
    assert graded["only_printed"].practices == {task.name: False}, "what the notebook printed counts for nothing"
    scores = {student: r.score for student, r in graded.items()}
    assert len(set(scores.values())) == 1 and 0 < scores["practised"] < graded["practised"].max_score, scores
    errors = [e for r in graded.values() for e in r.cell_errors if e.startswith(own_label)]
    assert not errors, f"the practice cells ran without an error: {errors}"

    record = ClassRecord("M03", {r.student: student_record(r, 0, "test") for r in results})
    stats = class_stats(record)
    named = next(m for m in stats.misconceptions if m.key == KEY and m.notebook == NOTEBOOK)
    assert sorted(named.students) == sorted(students) and named.practised == ["practised"]
    page = misconceptions_section(stats)
    assert "再練一題通過" in page and "1／3" in page
