"""nbgrader autograde grades the sample submissions with the hidden checks, in our sandbox.

``nbgrader_config.py`` replaces nbgrader's kernel (``Execute``) by
``autograder.integrations.nbgrader_bridge.SandboxedExecute``: the workflow is nbgrader's (autograde with
its gradebook, generate_feedback, export), the student's code runs where ``pt2e-course grade``
runs it. For every module, one real ``nbgrader autograde`` on a fresh course (no gradebook yet,
as in a fresh clone) grades: solutions (full marks), untouched release notebooks (zero), every
wrong-solution fixture marked via-nbgrader (loses points on its exercise), and attacks:

- a solution cell that imports the answer key (``from autograder.keys.m03_4 import ...``);
- a notebook that ends its process (``os._exit``) or kills it (SIGKILL) after exercise 1;
- a notebook that writes ``results.json`` into the instructor's home, the course and
  ``autograded/`` (by relative and absolute paths).

The attacks are in the classes of ``ATTACK_MODULES`` only (see there).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from conftest import make_course, tool_env
from nbgrader.api import Gradebook
from submissions import release_notebook, solved, with_wrong, write, wrong_packs

from autograder.course import modules, notebook_id, source_notebooks
from autograder.maintenance import isa
from autograder.maintenance.answers import answered, insert_after, source_answers
from autograder.sandboxed.cases.base import exercises_of, module_name

SEED = 3
"""PT2E_SEED of the nbgrader runs (nbgrader otherwise picks a fresh seed per run); grade uses the same."""


def profile_of(module: str) -> str:
    """The instruction-set profile a module's nbgrader run computes with: not this machine's own, and
    not the one ``test_notebooks`` runs the module's notebooks under (``isa.rotation``)."""
    return isa.rotation(module, 0)


ATTACK_MODULES = ["M01", "M03"]
"""Modules whose class also holds the attacks (key imports, process endings, a forger, unmarked
graded cells). The attacks test the grading machinery, the same for every module: M01 (three short
notebooks) and M03 (the sample class's module, four notebooks) carry them. Every other module's class
is the solutions, the untouched notebooks and the wrong solutions (every notebook graded full,
untouched and wrong); ``tests/test_hostile.py`` grades a whole class of attacks on its own."""
attack_modules = pytest.mark.parametrize("graded", ATTACK_MODULES, indirect=True)

COMPARED_NOTEBOOK = {
    "M02": "M02-3",
    "M04": "M04-2",
    "M05": "M05-1",
    "M06": "M06-2",
    "M07": "M07-3",
    "M08": "M08-1",
    "M09": "M09-2",
}
"""The notebook of a module without attacks on which ``grade`` re-grades the class to compare with nbgrader
(its solution, untouched and first wrong student): the one whose three graded runs take least time
(M08-1: 18 s here, M08-2: 35 s)."""


def only_notebook(folder: Path, notebook: str, into: Path) -> Path:
    """A copy of a student's folder with just ``notebook`` handed in."""
    into.mkdir(parents=True)
    shutil.copy(folder / f"{notebook}.ipynb", into / f"{notebook}.ipynb")
    return into


ENDINGS = {
    "exit": "import os\nos._exit(1)\n",
    # a SIGKILL it sends itself may be ignored (the first process of a pid namespace survives it): then
    # the segfault ends it, as a crashing extension would
    "kill": "import ctypes, os, signal\nos.kill(os.getpid(), signal.SIGKILL)\nctypes.string_at(0)\n",
}


@dataclass
class Graded:
    """One module's course after ``nbgrader autograde``: who handed in what, and what nbgrader said."""

    module: str
    course: Path
    home: Path
    run: subprocess.CompletedProcess[str]
    wrong: dict[str, dict] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # student → notebook whose first exercise imports the key
    crash_notebook: str = ""
    writer_notebook: str = ""
    release_before: dict[str, bytes] = field(default_factory=dict)


def run_nbgrader(course: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """nbgrader in ``course`` with its own gradebook, home folder and seed."""
    env = isa.environment(course_profile(course), tool_env(course / "gradebook.db"))
    env.update(HOME=str(home), PT2E_SEED=str(SEED))
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )


def course_profile(course: Path) -> str:
    """``profile_of`` the module a test course holds (``make_course`` copies one); native for any other course."""
    found = [p.name for p in (course / "source").iterdir() if p.is_dir()] if (course / "source").is_dir() else []
    return profile_of(found[0]) if len(found) == 1 and found[0] in modules() else isa.NATIVE


def exercise_scores(course: Path, module: str, student: str, notebook: str) -> dict[str, tuple[float, float]]:
    """grade_id of each hidden cell → (score, max score) as nbgrader recorded them."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(notebook, module, student)
        return {g.name.removesuffix("_hidden"): (g.score, g.max_score) for g in nb.grades if g.name.endswith("_hidden")}


def first_exercise(notebook: str) -> str:
    """The exercise whose solution cell comes first in the notebook."""
    for cell in release_notebook(notebook).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in exercises_of(notebook):
            return grade_id
    raise AssertionError(f"{notebook}: no solution cell")


def key_import(notebook: str, exercise: str) -> str:
    """A solution that is only an import of the answer key (which holds exactly these names)."""
    import importlib

    names = exercises_of(notebook)[exercise].names
    key = importlib.import_module(f"autograder.keys.{module_name(notebook)}")
    assert all(hasattr(key, name) for name in names), "the attack imports what the key really defines"
    return f"from autograder.keys.{module_name(notebook)} import {', '.join(names)}\n"


def writer(targets: list[str]) -> str:
    """Code that tries to leave a forged results.json in every folder of ``targets``."""
    return (
        "import json, os\n"
        "for _folder in " + repr(targets) + ":\n"
        "    try:\n"
        "        with open(os.path.join(os.path.expanduser(_folder), 'results.json'), 'w') as _handle:\n"
        "            json.dump({'score': 999, 'tests': []}, _handle)\n"
        "    except OSError:\n"
        "        pass\n"
    )


def attacks(module: str, notebooks: list[str], submitted: Path, home: Path, course: Path) -> tuple[str, str]:
    """Write the attacking students of ``module``; returns the crash and the writer notebooks."""
    # crashes: in the notebook with the most exercises, right after exercise 1's graded cell; the
    # student's next notebook is solved (a crash in one notebook costs nothing in another)
    crash_notebook = max(notebooks, key=lambda nb: len(exercises_of(nb)))
    other = notebooks[(notebooks.index(crash_notebook) + 1) % len(notebooks)]
    for ending, code in ENDINGS.items():
        nb = solved(crash_notebook)
        insert_after(nb, f"{first_exercise(crash_notebook)}_hidden", code)
        write(nb, submitted / ending / module / f"{crash_notebook}.ipynb")
        write(solved(other), submitted / ending / module / f"{other}.ipynb")
    # a forger: before defining its (correct) answer, it writes results.json wherever it can
    writer_notebook = notebooks[0]
    exercise = first_exercise(writer_notebook)
    targets = [".", "..", "../..", "~", str(home), str(course), str(course / "autograded")]
    targets += [str(course / "autograded" / "writer" / module), str(submitted / "writer" / module)]
    answers = source_answers(writer_notebook)
    answers[exercise] = writer(targets) + answers[exercise]
    write(answered(writer_notebook, answers), submitted / "writer" / module / f"{writer_notebook}.ipynb")
    # graded cells deleted, or unmarked as graded, by the student: still graded, as by grade
    nb = solved(writer_notebook)
    hidden = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    nb.cells.remove(hidden[0])
    for cell in hidden[1:]:
        cell.metadata.nbgrader["grade"] = False
    write(nb, submitted / "unmarked" / module / f"{writer_notebook}.ipynb")
    return crash_notebook, writer_notebook


@pytest.fixture(scope="module", params=modules())  # one xdist worker per module: see conftest
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Graded:
    """A course for one module with its sample class autograded by nbgrader (no generate_assignment first)."""
    module = request.param
    tmp = tmp_path_factory.mktemp(f"course-{module}")
    course, home = tmp / "course", tmp / "home"
    course.mkdir()
    home.mkdir()
    make_course(course, [module])
    release_before = {
        str(p.relative_to(course)): p.read_bytes() for p in (course / "release").rglob("*") if p.is_file()
    }
    notebooks = [notebook_id(p) for p in source_notebooks(module)]
    submitted = course / "submitted"
    wrong: dict[str, dict] = {}
    keys: dict[str, str] = {}
    for notebook in notebooks:
        name = f"{notebook}.ipynb"
        write(solved(notebook), submitted / "solution" / module / name)
        write(release_notebook(notebook), submitted / "untouched" / module / name)
        for k, pack in enumerate(wrong_packs(notebook)):
            student = f"wrong-{notebook}-{k}"
            write(with_wrong(notebook, pack), submitted / student / module / name)
            wrong[student] = {"notebook": notebook, "pack": pack}
        if module in ATTACK_MODULES:
            exercise = first_exercise(notebook)
            answers = source_answers(notebook)
            answers[exercise] = key_import(notebook, exercise)
            write(answered(notebook, answers), submitted / f"keys-{notebook}" / module / name)
            keys[f"keys-{notebook}"] = notebook
    crash_notebook = writer_notebook = ""
    if module in ATTACK_MODULES:
        crash_notebook, writer_notebook = attacks(module, notebooks, submitted, home, course)
    run = run_nbgrader(course, home, "autograde", module, "--force")
    assert run.returncode == 0, f"nbgrader autograde failed:\n{run.stdout}\n{run.stderr[-5000:]}"
    return Graded(module, course, home, run, wrong, keys, crash_notebook, writer_notebook, release_before)


def test_only_real_edits_of_locked_cells_are_logged(graded: Graded) -> None:
    # the released hidden-test cells lack their hidden region: nbgrader must not report every one as changed
    log = graded.run.stdout + graded.run.stderr
    changed = [line for line in log.splitlines() if "has changed" in line]
    assert not [line for line in changed if "_hidden" in line], changed[:5]


def test_solutions_get_full_marks(graded: Graded) -> None:
    for path in source_notebooks(graded.module):
        scores = exercise_scores(graded.course, graded.module, "solution", notebook_id(path))
        assert scores, f"{path.stem}: no graded cells"
        for exercise, (score, maximum) in scores.items():
            assert maximum > 0 and score == maximum, f"{path.stem} {exercise}: {score} / {maximum}"


def test_solutions_run_without_an_error_on_another_cpu(graded: Graded) -> None:
    """Every cell of every solution up to its last graded cell ran, and every assert of the chapter there
    held, under ``profile_of`` (a graded run stops after the last graded cell; ``test_notebooks`` runs the
    rest, under the module's other profile)."""
    for path in source_notebooks(graded.module):
        autograded = graded.course / "autograded" / "solution" / graded.module / path.name
        nb = nbformat.read(autograded, as_version=4)
        errors = [
            (index, output.get("ename"), str(output.get("evalue"))[:200])
            for index, cell in enumerate(nb.cells)
            if cell.cell_type == "code"
            for output in cell.get("outputs", [])
            if output.output_type == "error"
        ]
        report = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert not errors and "執行時出錯" not in report, (
            f"{path.stem} under the {profile_of(graded.module)} profile: {errors or report[:1000]}"
        )


def test_untouched_notebooks_get_zero(graded: Graded) -> None:
    for path in source_notebooks(graded.module):
        scores = exercise_scores(graded.course, graded.module, "untouched", notebook_id(path))
        for exercise, (score, maximum) in scores.items():
            assert score == 0, f"{path.stem} {exercise}: untouched notebook got {score} / {maximum}"


def test_wrong_solutions_lose_points(graded: Graded) -> None:
    covered = {info["notebook"] for info in graded.wrong.values()}
    assert covered == {notebook_id(p) for p in source_notebooks(graded.module)}, "a wrong submission per notebook"
    for student, info in graded.wrong.items():
        scores = exercise_scores(graded.course, graded.module, student, info["notebook"])
        for exercise, wrong in info["pack"].items():
            score, maximum = scores[exercise]
            assert score < maximum, f"{wrong.id} ({wrong.description}) kept full marks {score} / {maximum}"


@attack_modules
def test_importing_the_answer_key_earns_nothing(graded: Graded) -> None:
    """The graded run cannot import autograder.keys: the imported 'solution' does not exist there."""
    for student, notebook in graded.keys.items():
        exercise = first_exercise(notebook)
        score, maximum = exercise_scores(graded.course, graded.module, student, notebook)[exercise]
        assert score == 0, f"{notebook} {exercise}: importing the answer key scored {score} / {maximum}"


@attack_modules
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_notebook_that_ends_its_process_keeps_what_it_earned(graded: Graded, ending: str) -> None:
    first = first_exercise(graded.crash_notebook)
    handed_in = sorted((graded.course / "submitted" / ending / graded.module).glob("*.ipynb"))
    assert len(handed_in) == min(2, len(source_notebooks(graded.module)))
    for notebook in (p.stem for p in handed_in):
        scores = exercise_scores(graded.course, graded.module, ending, notebook)
        for exercise, (score, maximum) in scores.items():
            if notebook != graded.crash_notebook or exercise == first:
                assert score == maximum > 0, f"{ending}: {notebook} {exercise} {score} / {maximum} (earned before)"
            else:
                assert score == 0, f"{ending}: {notebook} {exercise} ran after the process ended"
    autograded = nbformat.read(
        graded.course / "autograded" / ending / graded.module / f"{graded.crash_notebook}.ipynb", as_version=4
    )
    report = "".join(o.get("text", "") for c in autograded.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "程式讓行程結束了" in report, "the feedback says why the rest scored nothing"


@attack_modules
def test_a_forged_results_json_lands_nowhere(graded: Graded) -> None:
    exercise = first_exercise(graded.writer_notebook)
    score, maximum = exercise_scores(graded.course, graded.module, "writer", graded.writer_notebook)[exercise]
    assert score == maximum > 0, "the forging code ran to the end (the answer after it was graded)"
    leaked = sorted(p for folder in (graded.home, graded.course) for p in folder.rglob("results.json"))
    assert not leaked, f"a submission wrote outside its sandbox: {leaked}"


@attack_modules
def test_graded_cells_the_student_deleted_or_unmarked_are_graded(graded: Graded) -> None:
    scores = exercise_scores(graded.course, graded.module, "unmarked", graded.writer_notebook)
    assert set(scores) == set(exercises_of(graded.writer_notebook))
    for exercise, (score, maximum) in scores.items():
        assert score == maximum > 0, f"{exercise}: {score} / {maximum}"
    autograded = nbformat.read(
        graded.course / "autograded" / "unmarked" / graded.module / f"{graded.writer_notebook}.ipynb", as_version=4
    )
    report = "".join(o.get("text", "") for c in autograded.cells if c.cell_type == "code" for o in c.outputs)
    assert "被刪除" in report, "the feedback says what the student did"


def test_a_fresh_clone_needs_no_generate_assignment(graded: Graded) -> None:
    """autograde registered the assignment itself, and left the committed release/ as it was."""
    assert "gradebook 裡還沒有作業" in graded.run.stderr
    after = {
        str(p.relative_to(graded.course)): p.read_bytes() for p in (graded.course / "release").rglob("*") if p.is_file()
    }
    assert after == graded.release_before


def test_grade_gives_the_scores_nbgrader_gives(graded: Graded, tmp_path: Path) -> None:
    """The sandboxed grader and nbgrader's sandboxed autograde give the same scores on the same seed."""
    from autograder.engine.grading import grade_class
    from autograder.engine.submission import class_folders

    folders = class_folders(graded.course / "submitted", graded.module)
    # grading twice costs: the attack modules compare attackers and wrong students too, on every notebook;
    # every other module (the same machinery: training, lowering to ExecuTorch, ten times the seconds)
    # compares full, untouched and wrong marks on its notebook that grades fastest (``COMPARED_NOTEBOOK``)
    notebook = COMPARED_NOTEBOOK.get(graded.module)
    if notebook is None:
        compared_students = {"solution", "untouched", "exit", "writer", *list(graded.wrong)[:2]}
    else:
        compared_students = {"solution", "untouched", f"wrong-{notebook}-0"}
    assert compared_students <= set(folders), f"{graded.module}: {compared_students - set(folders)} not in the class"
    folders = {student: folder for student, folder in folders.items() if student in compared_students}
    if notebook is not None:
        folders = {
            student: folder and only_notebook(folder, notebook, tmp_path / student)
            for student, folder in folders.items()
        }
    students, _ = grade_class(graded.module, folders, jobs=2, seed=SEED)
    compared = 0
    for student in students:
        for result in student.notebooks:
            if result.file is None:
                continue
            ours: dict[str, float] = {}
            for verdict in result.verdicts:
                ours[verdict["exercise"]] = ours.get(verdict["exercise"], 0.0) + verdict["score"]
            theirs = {
                ex: score
                for ex, (score, _) in exercise_scores(
                    graded.course, graded.module, student.student, result.notebook
                ).items()
            }
            assert ours == theirs, (
                f"{student.student} {result.notebook}: grade {ours} vs nbgrader {theirs}; grade's notes:"
                f" {result.notes} {result.tampering} {result.cell_errors[:5]}"
                f" {[v['message'] for v in result.verdicts if not v['passed']][:5]}"
            )
            compared += 1
    assert compared >= len(folders)


SETUP_CODE = ("_pt2e_colab_setup", "環境設定：在 Colab 上", "pip install")
"""Words of the release's setup cell (the Colab install), which nbgrader's own feedback page showed first."""
HIDDEN_CODE = ("def test_", "compare_observers", "autograder.keys", "BEGIN HIDDEN TESTS", "autograder.notebook")


@attack_modules
def test_feedback_and_export_work_on_the_sandboxed_grades(graded: Graded) -> None:
    """generate_feedback writes the course's page (``nbgrader_feedback``): the score, a summary linking the
    exercises that lost points, each exercise's report; no cell of the notebook, no setup code, no hidden test."""
    feedback = run_nbgrader(graded.course, graded.home, "generate_feedback", graded.module, "--force")
    assert feedback.returncode == 0, feedback.stderr[-3000:]
    crashed = (graded.course / "feedback" / "exit" / graded.module / f"{graded.crash_notebook}.html").read_text(
        encoding="utf-8"
    )
    solution = (graded.course / "feedback" / "solution" / graded.module / f"{graded.crash_notebook}.html").read_text(
        encoding="utf-8"
    )
    untouched = (graded.course / "feedback" / "untouched" / graded.module / f"{graded.crash_notebook}.html").read_text(
        encoding="utf-8"
    )
    for page in (crashed, solution, untouched):
        assert '<nav class="summary"' in page and "練習「" in page and f"隱藏測試的亂數種子：{SEED}" in page
        assert 'class="output_area"' not in page and "jp-Cell" not in page, "no cell of the notebook"
        for secret in (*HIDDEN_CODE, *SETUP_CODE):
            assert secret not in page, secret
    assert "程式讓行程結束了" in crashed
    scores = exercise_scores(graded.course, graded.module, "exit", graded.crash_notebook)
    earned, total = sum(s for s, _ in scores.values()), sum(m for _, m in scores.values())
    assert f'分數 <b class="score">{earned:g} / {total:g}</b>' in crashed, "the gradebook's score"
    lost = [exercise for exercise, (score, maximum) in scores.items() if score < maximum]
    assert lost and all(f'<a href="#ex-{e}">' in crashed and f'id="ex-{e}"' in crashed for e in lost), lost
    assert "都拿到滿分" in solution and '<a href="#ex-' not in solution
    # nbgrader's own comment on an answer cell left as handed out is not a grader's
    assert "還沒有作答" in untouched and "No response" not in untouched and "助教的評語" not in untouched
    export = run_nbgrader(graded.course, graded.home, "export", "--to", str(graded.course / "grades.csv"))
    assert export.returncode == 0, export.stderr[-3000:]
    with (graded.course / "grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    for student in ("solution", "untouched", "exit"):
        total = sum(
            score
            for path in source_notebooks(graded.module)
            for score, _ in exercise_scores(graded.course, graded.module, student, notebook_id(path)).values()
        )
        assert float(rows[student]["score"]) == total, student
    assert float(rows["solution"]["score"]) == float(rows["solution"]["max_score"]) > 0


@attack_modules
def test_feedback_shows_the_gradebooks_manual_grading(graded: Graded, tmp_path: Path) -> None:
    """A TA's score and comment in the formgrader (the gradebook) are the page's; a notebook of the course without
    the grader's record (autograded before the course's page existed) gets nbgrader's page, without hidden tests."""
    from autograder.integrations.nbgrader_feedback import RECORD_KEY

    course = tmp_path / "course"  # a copy: the other tests read the gradebook as autograde left it
    shutil.copytree(graded.course, course, ignore=shutil.ignore_patterns("feedback"))
    notebook, exercise = graded.crash_notebook, first_exercise(graded.crash_notebook)
    total = sum(m for _, m in exercise_scores(course, graded.module, "solution", notebook).values())
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade(f"{exercise}_hidden", notebook, graded.module, "solution")
        grade.manual_score = grade.max_score - 1
        comment = gb.find_comment(exercise, notebook, graded.module, "solution")
        comment.manual_comment = "寫得很好，<b>但</b>少了說明"
        gb.db.commit()
    old = course / "autograded" / "untouched" / graded.module / f"{notebook}.ipynb"
    nb = nbformat.read(old, as_version=4)
    assert RECORD_KEY in nb.metadata, "autograde keeps the grader's record for the page"
    del nb.metadata[RECORD_KEY]
    nbformat.write(nb, old)
    for student in ("solution", "untouched"):
        run = run_nbgrader(course, graded.home, "generate_feedback", graded.module, "--student", student, "--force")
        assert run.returncode == 0, run.stderr[-3000:]
    page = (course / "feedback" / "solution" / graded.module / f"{notebook}.html").read_text(encoding="utf-8")
    assert f'分數 <b class="score">{total - 1:g} / {total:g}</b>' in page
    assert "助教調整了這一題的分數" in page and f'<a href="#ex-{exercise}">' in page
    assert "寫得很好，&lt;b&gt;但&lt;/b&gt;少了說明" in page, "the TA's comment, as text"
    nbgraders = (course / "feedback" / "untouched" / graded.module / f"{notebook}.html").read_text(encoding="utf-8")
    assert f"{notebook} (Score: 0.0 / {total:.1f})" in nbgraders and '<nav class="summary"' not in nbgraders
    assert "BEGIN HIDDEN TESTS" not in nbgraders


def test_another_courses_notebook_gets_nbgraders_feedback_page() -> None:
    """The exporter changes nothing for a notebook without the grader's record; a submission's own record is
    dropped when it is graded (the page's record is always the grader's)."""
    from nbconvert.exporters import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook
    from traitlets.config import Config

    from autograder.integrations.nbgrader_bridge import RecordSubmission
    from autograder.integrations.nbgrader_feedback import RECORD_KEY, CourseFeedbackExporter

    nb = new_notebook(cells=[new_code_cell("print('another course')")])
    config = Config()
    config.HTMLExporter.template_name = "lab"
    theirs, _ = HTMLExporter(config=config).from_notebook_node(nb)
    ours, _ = CourseFeedbackExporter(config=config).from_notebook_node(nb)
    assert ours == theirs and "another course" in ours
    forged = solved("M03-4")
    forged.metadata[RECORD_KEY] = {"format": 1, "notebook": "M03-4", "verdicts": []}
    resources = {"nbgrader": {"notebook": "M03-4", "student": "s", "assignment": "M03"}}
    forged, _ = RecordSubmission(config=Config()).preprocess(forged, resources)
    assert RECORD_KEY not in forged.metadata


def test_autograde_keeps_the_class_record_for_the_report(graded: Graded) -> None:
    from autograder.reports.class_record import load_record

    autograded = graded.course / "autograded"
    record = load_record(autograded, graded.module)
    assert set(record.students) == {p.name for p in (graded.course / "submitted").iterdir() if p.is_dir()}
    for name in ("solution", "untouched"):
        entry = record.students[name]
        assert [nb["notebook"] for nb in entry["notebooks"]] == [
            notebook_id(p) for p in source_notebooks(graded.module)
        ]
        for nb in entry["notebooks"]:
            scores = exercise_scores(graded.course, graded.module, name, nb["notebook"])
            assert nb["score"] == sum(score for score, _ in scores.values()), (name, nb["notebook"])
    assert f"PT2E_SEED={SEED}" in record.students["solution"]["command"]
    from autograder.cli import write_outputs

    write_outputs(autograded, record)  # what pt2e-course report does with it
    page = (autograded / f"{graded.module}-report.html").read_text(encoding="utf-8")
    assert f"交了作業的學生：<b>{len(record.students)}</b> 位" in page


def test_without_the_sandbox_nbgrader_autograde_refuses_to_run(tmp_path: Path) -> None:
    """If the course's packages cannot be loaded, autograde stops instead of grading in a kernel."""
    course = tmp_path / "course"
    course.mkdir()
    make_course(course, [])
    shadow = tmp_path / "shadow" / "autograder"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # an `autograder` without the bridge
    env = {**tool_env(course / "gradebook.db"), "PYTHONPATH": str(shadow.parent), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "autograde", "M03"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0
    assert "nbgrader autograde 不執行" in result.stderr
    assert not (course / "autograded").exists()


def test_a_fresh_course_autogrades_on_the_first_run_without_the_venv_on_path(tmp_path: Path) -> None:
    """nbgrader's gradebook runs `alembic` when it makes gradebook.db: found without an activated venv."""
    course = tmp_path / "course"
    course.mkdir()
    make_course(course, ["M01"])
    for path in source_notebooks("M01"):
        write(release_notebook(notebook_id(path)), course / "submitted" / "untouched" / "M01" / path.name)
    env = {**tool_env(course / "gradebook.db"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "nbgrader"), "autograde", "M01"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "無法設定沙盒評分" not in result.stderr
    assert (course / "gradebook.db").is_file()
    assert sorted(p.name for p in (course / "autograded" / "untouched" / "M01").glob("*.ipynb")) == sorted(
        p.name for p in source_notebooks("M01")
    )


def test_the_assignment_is_read_from_nbgrader_arguments() -> None:
    from autograder.integrations.nbgrader_bridge import autograde_arguments

    assert autograde_arguments(["nbgrader", "autograde", "M03", "--force"]) == {"assignment": "M03"}
    assert autograde_arguments(["nbgrader", "autograde", "--student", "bob", "M03"]) == {"assignment": "M03"}
    assert autograde_arguments(["nbgrader", "autograde", "--assignment=M04", "--db", "sqlite:///x.db"]) == {
        "assignment": "M04",
        "db": "sqlite:///x.db",
    }
    assert autograde_arguments(["nbgrader", "generate_assignment", "M03"]) is None


def test_a_graded_cell_never_keeps_an_output_or_stays_empty() -> None:
    """An empty graded cell is full marks to nbgrader, and a saved output would be read as a score:
    whatever happens, every graded cell ends with the points the grader gave (here: none)."""
    from nbformat.v4 import new_output
    from nbgrader.utils import determine_grade, is_grade
    from traitlets.config import Config

    from autograder.integrations.nbgrader_bridge import SandboxedExecute

    nb = solved("M03-4")
    graded = [c for c in nb.cells if c.cell_type == "code" and is_grade(c)]
    assert graded
    for cell in graded:  # a student's saved output claiming full marks
        cell.outputs = [new_output("execute_result", data={"text/plain": str(cell.metadata.nbgrader.points)})]
    resources = {"nbgrader": {"notebook": "M99-9", "student": "s", "assignment": "M03"}}
    nb, _ = SandboxedExecute(config=Config()).preprocess(nb, resources)  # a notebook the grader does not know
    for cell in graded:
        assert determine_grade(cell)[0] == 0, cell.outputs
