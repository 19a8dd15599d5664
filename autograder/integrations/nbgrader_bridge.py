"""``nbgrader autograde`` without a kernel: the student's code runs in our sandbox, the checks judge here.

nbgrader's workflow stays (``nbgrader autograde M03`` with its gradebook, then
``generate_feedback`` and ``export``); ``nbgrader_config.py`` swaps two of its steps:

- ``RecordSubmission`` runs first among the *sanitize* preprocessors, on the notebook as the
  student handed it in: it notes what ``pt2e-course grade`` would call tampering (edited or
  deleted locked cells, changed points) before nbgrader quietly restores those cells.
- ``SandboxedExecute`` replaces nbgrader's ``Execute`` among the *autograde* preprocessors. It
  never starts a Jupyter kernel. It grades the notebook nbgrader prepared the way
  ``pt2e-course grade`` grades a file (``autograder.engine.grading.grade_notebook_node``): cells rebuilt
  against the course's source notebook, run in a confined child that sees no answer key, evidence
  judged by the hidden checks in this process (which never runs student code). Then it writes
  what nbgrader reads: on each graded cell a report (stdout) and an ``execute_result`` holding
  the points earned (nbgrader's partial credit); on a student cell that raised, an error output.

A submission that kills its process keeps what it earned before, as with ``grade``. The seed
of the hidden cases is chosen once per nbgrader run, or read from ``PT2E_SEED``.

``generate_feedback`` writes the course's own page for each notebook (``nbgrader_feedback``): ``SandboxedExecute``
keeps its result in the autograded notebook's metadata for it, and ``configure`` makes
``nbgrader_feedback.CourseFeedbackExporter`` the converter's exporter.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_code_cell, new_output
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer, List, Unicode

from autograder.course import venv_tools_on_path
from autograder.integrations.nbgrader_feedback import RECORD_KEY, cell_score, feedback_record

SEED_ENV = "PT2E_SEED"
META_KEY = "pt2e_submission"
"""Notebook metadata where ``RecordSubmission`` leaves its notes for ``SandboxedExecute``."""
HIDDEN_SUFFIX = "_hidden"
ERROR_CHARS = 500

_seed: int | None = None


def run_seed() -> int:
    """The seed of the hidden cases for this nbgrader run: ``$PT2E_SEED``, else one fresh seed per process."""
    global _seed
    if _seed is None:
        from autograder.engine.grading import new_seed

        text = os.environ.get(SEED_ENV, "").strip()
        _seed = int(text) if text else new_seed()
    return _seed


def _grade_id(cell: Any) -> str:
    return str(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") or "")


def _source_notebook(notebook: str) -> NotebookNode | None:
    import nbformat

    from autograder.engine.submission import source_path

    path = source_path(notebook)
    return nbformat.read(path, as_version=4) if path.is_file() else None


FLAGS = ("grade", "solution", "locked", "task", "points")
"""The nbgrader metadata of a course cell that a submission may not change."""


class RecordSubmission(NbGraderPreprocessor):
    """First sanitize step: note what the submission changed in the course's cells, then put back their
    nbgrader metadata.

    nbgrader restores a locked cell's source but not its ``grade`` flag, and stops grading the
    student (every notebook) when a flag was changed ("Inconsistent checksums"); with the
    flags put back first, nbgrader restores the cell and grading goes on, as with ``grade``.
    """

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        from autograder.engine.submission import prepare

        nb.metadata.pop(META_KEY, None)  # only this step writes it
        nb.metadata.pop(RECORD_KEY, None)  # only SandboxedExecute writes it
        try:
            source = _source_notebook(str(resources.get("nbgrader", {}).get("notebook", "")))
            if source is None:
                return nb, resources
            prepared = prepare(nb, source)
            tampering = list(prepared.tampering)
            course = {_grade_id(c): c.metadata["nbgrader"] for c in source.cells if _grade_id(c)}
            sources = {_grade_id(c): c.source for c in source.cells if _grade_id(c)}
            for cell in nb.cells:
                original = course.get(_grade_id(cell))
                meta = cell.get("metadata", {}).get("nbgrader")
                if original is None or not isinstance(meta, dict):
                    continue
                changed = [f for f in FLAGS if f != "points" and bool(meta.get(f)) != bool(original.get(f))]
                if changed:
                    tampering.append(
                        f"{_grade_id(cell)} 的 nbgrader 設定被改過（{'、'.join(changed)}）：照原本的設定評分"
                    )
                meta.update({f: copy.deepcopy(original[f]) for f in FLAGS if f in original})
                for flag in FLAGS:
                    if flag not in original:
                        meta.pop(flag, None)
                _restore_hidden_tests(cell, sources[_grade_id(cell)])
            nb.metadata[META_KEY] = {"tampering": tampering, "notes": list(prepared.notes)}
        except Exception:  # the notes are a courtesy: grading goes on without them
            self.log.exception("讀不出 %s 交來的 notebook 改了哪些鎖定的儲存格", resources.get("nbgrader", {}))
        return nb, resources


def _restore_hidden_tests(cell: NotebookNode, original: str) -> None:
    """A locked cell the student left as released gets its hidden tests back before nbgrader's OverwriteCells
    compares checksums: the release never had them, so nbgrader would warn "checksum has changed" for every
    graded cell of every student and bury the warnings about cells that really were edited."""
    from autograder.engine.submission import as_released

    if original != cell.source and _same_text(as_released(original), str(cell.source)):
        cell.source = original


def _same_text(a: str, b: str) -> bool:
    return [line.rstrip() for line in a.strip().splitlines()] == [line.rstrip() for line in b.strip().splitlines()]


def _limit_traits(cls: type) -> type:
    """Give ``cls`` one configurable trait per limit of ``Limits``, with its default and help from there."""
    from autograder.sandboxed.limits import described

    for name, default, text, unit in described():
        trait = Integer(default, help=f"{text}（{unit}）").tag(config=True)
        setattr(cls, name, trait)
    cls.setup_class(cls.__dict__)  # traitlets reads traits added after the class statement only then
    return cls


@_limit_traits
class SandboxedExecute(NbGraderPreprocessor):
    """Autograde step in place of nbgrader's ``Execute``: run in the sandbox, judge here, write scores.

    Its settings (``c.SandboxedExecute.memory_mb = …``) are the limits of ``autograder.sandboxed.limits``.
    """

    record_dir = Unicode(
        "",
        help="全班報告的評分紀錄寫在哪個資料夾（<assignment>-class.d/，每本 notebook 一個檔；預設：課程的 autograded/）",
    ).tag(config=True)
    _announced = False
    _reported = False

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        from autograder.sandboxed.limits import Limits, described

        info = resources.get("nbgrader", {})
        notebook, student = str(info.get("notebook", "")), str(info.get("student", ""))
        recorded = nb.metadata.pop(META_KEY, None)
        nb.metadata.pop(RECORD_KEY, None)  # the feedback page's record is the grader's, written below
        for cell in nb.cells:  # nothing the student saved may stand as an output (nor a score)
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        seed = run_seed()
        if not SandboxedExecute._announced:
            SandboxedExecute._announced = True
            self.log.info("隱藏測試的亂數種子：%s（%s=%s 可重現這次評分）", seed, SEED_ENV, seed)
        limits = Limits(**{name: getattr(self, name) for name, *_ in described()})
        source = _source_notebook(notebook)
        if source is None:
            self.log.error("%s 不是本課程的 notebook（source/ 裡沒有）：每個評分格 0 分", notebook)
            write_zero(nb, f"評分程式不認得 {notebook}，這一格 0 分，請通知助教")
            return nb, resources
        try:
            from autograder.integrations.parallel_autograde import take

            prefetched = take(student, notebook, nb)  # graded already, in parallel, from these very bytes
            result = prefetched if prefetched is not None else self._grade(notebook, nb, source, seed, limits, recorded)
        except Exception:  # a grader bug costs no one the batch, and never gives points
            self.log.exception("評分 %s 的 %s 時評分程式出錯", student, notebook)
            write_zero(nb, GRADER_FAILED)
            _keep_zero_record(nb, notebook, seed)
            return nb, resources
        write_results(nb, source, result, seed)
        nb.metadata[RECORD_KEY] = feedback_record(result, seed)  # what generate_feedback draws the page from
        self._keep_for_report(info, student, result, seed)
        self.log.info("%s %s：%g / %g 分", student, notebook, result.score, result.max_score)
        for warning in result.tampering:
            self.log.warning("%s %s：%s", student, notebook, warning)
        return nb, resources

    def _keep_for_report(self, info: dict[str, Any], student: str, result: Any, seed: int) -> None:
        """Keep the notebook in ``autograded/<assignment>-class.d/`` (``class_record.add_notebook``), which
        ``pt2e-course report <assignment> --out autograded`` turns into the class report (a failure here costs no
        score)."""
        from autograder.reports.class_record import add_notebook

        assignment = str(info.get("assignment", "")) or result.notebook.split("-")[0]
        try:
            add_notebook(
                Path(self.record_dir or "autograded"),
                assignment,
                student,
                result,
                seed,
                f"{SEED_ENV}={seed} nbgrader autograde {assignment}",
            )
        except Exception:
            self.log.exception("沒能把 %s 的 %s 寫進全班報告的紀錄", student, result.notebook)
            return
        if not SandboxedExecute._reported:
            SandboxedExecute._reported = True
            self.log.info(
                "全班報告：評完後執行 pt2e-course report %s --out %s", assignment, self.record_dir or "autograded"
            )

    def _grade(
        self, notebook: str, nb: NotebookNode, source: NotebookNode, seed: int, limits: Any, recorded: Any
    ) -> Any:
        from autograder.engine.grading import grade_notebook_node
        from autograder.engine.submission import prepare

        result = grade_notebook_node(notebook, nb, seed, limits)
        if isinstance(recorded, dict):
            # nbgrader already restored the locked cells: say what the student had handed in instead
            restored = prepare(nb, source)
            result.tampering = [str(t) for t in recorded.get("tampering", [])] + [
                t for t in result.tampering if t not in restored.tampering
            ]
            result.notes = [str(n) for n in recorded.get("notes", [])] + [
                n for n in result.notes if n not in restored.notes
            ]
        return result


GRADER_FAILED = "評分程式出錯，這一格 0 分，請通知助教"


def _keep_zero_record(nb: NotebookNode, notebook: str, seed: int) -> None:
    """The feedback page's record of a notebook the grader failed on: every check 0 points, saying so."""
    from autograder.checks.support import checks_of
    from autograder.engine.grading import NotebookResult, zero_verdicts

    try:
        result = NotebookResult(notebook, None)
        for exercise in checks_of(notebook):
            result.verdicts += zero_verdicts(notebook, exercise, GRADER_FAILED)
        nb.metadata[RECORD_KEY] = feedback_record(result, seed)
    except Exception:  # without a record the student gets nbgrader's page, which says the same in each cell
        pass


def _stream(text: str) -> NotebookNode:
    return new_output("stream", name="stdout", text=text if text.endswith("\n") else text + "\n")


def _score(points: float) -> NotebookNode:
    from autograder.reports.report import points_text

    return new_output("execute_result", data={"text/plain": points_text(points)}, metadata={}, execution_count=None)


def _graded_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and utils.is_grade(c)]


def write_zero(nb: NotebookNode, message: str) -> None:
    """Every graded code cell: ``message`` and 0 points (an empty output would be full marks to nbgrader)."""
    for cell in _graded_cells(nb):
        cell.outputs = [_stream(message), _score(0.0)]


def _restore_graded_cells(nb: NotebookNode, source: NotebookNode) -> None:
    """Every graded cell of the source, marked as graded in ``nb``, so that nbgrader records the score
    the sandbox gave it. nbgrader restores a graded cell's source and points, not its ``grade`` flag,
    and does not put back one the student deleted: those come back here (after their exercise's cells)."""
    present = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    for original in source.cells:
        grade_id = _grade_id(original)
        if not grade_id or not utils.is_grade(original) or original.cell_type != "code":
            continue
        if grade_id in present:
            cell = present[grade_id]
            if cell.cell_type == "code" and not utils.is_grade(cell):
                cell.metadata.nbgrader.update(grade=True, points=original.metadata.nbgrader.get("points", 0))
            continue
        cell = new_code_cell(original.source, metadata=copy.deepcopy(original.metadata))
        exercise = grade_id.removesuffix(HIDDEN_SUFFIX)
        anchors = [i for i, c in enumerate(nb.cells) if _grade_id(c) in (exercise, f"{exercise}_tests")]
        nb.cells.insert(anchors[-1] + 1 if anchors else len(nb.cells), cell)


_CELL_LABEL = re.compile(r"^第 (\d+) 格$")


def _error_output(text: str) -> NotebookNode:
    text = text[:ERROR_CHARS]
    name, _, message = text.partition("：") if "：" in text.split(": ", 1)[0] else text.partition(": ")
    name = name.split("（", 1)[0]
    if not name.isidentifier():
        name, message = "Error", text
    return new_output("error", ename=name, evalue=message, traceback=[text])


def write_results(nb: NotebookNode, source: NotebookNode, result: Any, seed: int) -> None:
    """Write a ``NotebookResult`` into the cells nbgrader reads: reports and scores, errors, notes."""
    from autograder.reports.hygiene import clean
    from autograder.reports.report import exercise_report
    from autograder.reports.results import drawings
    from autograder.sandboxed.cases.base import exercises_of

    # errors where they happened: the student's own cells are labelled by their position in ``nb`` as graded
    by_id = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    unplaced = []
    for entry in result.cell_errors:
        label, _, text = str(entry).partition("：")
        match = _CELL_LABEL.match(label)
        cell = by_id.get(label)
        if match and 1 <= int(match.group(1)) <= len(nb.cells):
            cell = nb.cells[int(match.group(1)) - 1]
        if cell is None or cell.cell_type != "code" or utils.is_grade(cell):
            unplaced.append(clean(entry, ERROR_CHARS))
        else:
            cell.outputs.append(_error_output(clean(text, ERROR_CHARS)))
    _restore_graded_cells(nb, source)
    header = [f"⚠ {clean(t)}" for t in result.tampering] + [f"・{clean(n)}" for n in result.notes]
    header += [f"執行時出錯：{e}" for e in unplaced]
    header.append(f"（隱藏測試的亂數種子：{seed}）")
    titles = {key: exercise.title for key, exercise in exercises_of(result.notebook).items()}
    pictures = drawings([result]).get(result.notebook, {})
    for index, cell in enumerate(_graded_cells(nb)):
        exercise = _grade_id(cell).removesuffix(HIDDEN_SUFFIX)
        verdicts = [v for v in result.verdicts if v["exercise"] == exercise]
        lines = [*header, ""] if index == 0 else []
        points = _cell_points(cell)
        score = 0.0
        if verdicts:
            lines.append(exercise_report(titles.get(exercise, exercise), verdicts))
            # the cell's points are the sum of its checks; if the two ever differ, scale (nbgrader refuses more)
            score = cell_score(verdicts, points)
        else:
            lines.append("評分程式沒有這一格的檢查：這一格 0 分，請通知助教")
        outputs = [_stream("\n".join(lines))]
        picture = pictures.get(exercise)
        if picture is not None:  # the smallest failing hidden case, as the student's program labelled it
            outputs.append(
                new_output("display_data", data={"image/svg+xml": picture["svg"], "text/plain": picture["caption"]})
            )
        cell.outputs = [*outputs, _score(score)]


def _cell_points(cell: NotebookNode) -> float:
    """The points of a graded cell as the gradebook has them (nbgrader restored them)."""
    try:
        return max(float(cell.metadata["nbgrader"]["points"]), 0.0)
    except (KeyError, TypeError, ValueError):
        return 0.0


# --- nbgrader configuration -------------------------------------------------------------------------


class CleanFeedback(NbGraderPreprocessor):
    """A ``generate_feedback`` step for a notebook of the course that has no feedback record (autograded before
    ``nbgrader_feedback`` existed), which gets nbgrader's own page: no hidden tests there either.

    A graded cell keeps its report (stdout) and loses the hidden-test region of its source (``grade(...)``,
    which the release never showed) and the ``execute_result`` that holds the points for nbgrader (the
    feedback page shows them in the cell's header already, and a bare ``Out[ ]: 1`` reads as noise). A notebook
    that is not the course's is left as nbgrader has it.
    """

    # configurable, as in nbgrader's GetGrades: nbconvert's HTML exporter configures it for every step, and an
    # unconfigurable one logs "Config option `display_data_priority` not recognized" on each generate_feedback
    display_data_priority = List(NbGraderPreprocessor.class_traits()["display_data_priority"].default(), config=True)

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        from autograder.engine.submission import source_path

        notebook = str(resources.get("nbgrader", {}).get("notebook", ""))
        if RECORD_KEY in nb.metadata or not notebook or not source_path(notebook).is_file():
            return nb, resources  # the course's page (nbgrader_feedback), or another course's notebook
        return super().preprocess(nb, resources)

    def preprocess_cell(
        self, cell: NotebookNode, resources: ResourcesDict, index: int
    ) -> tuple[NotebookNode, ResourcesDict]:
        from autograder.engine.submission import as_released

        if cell.cell_type == "code" and utils.is_grade(cell):
            cell.source = as_released(str(cell.source))
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "execute_result"]
        return cell, resources


def feedback_preprocessors() -> list[Any]:
    """nbgrader's generate_feedback steps, then ``CleanFeedback``."""
    from nbgrader.converters.generate_feedback import GenerateFeedback

    return [*GenerateFeedback.class_traits()["preprocessors"].default(), CleanFeedback]


def sanitize_preprocessors() -> list[Any]:
    """nbgrader's sanitize steps, with ``RecordSubmission`` first."""
    from nbgrader.converters.autograde import Autograde

    return [RecordSubmission, *Autograde.class_traits()["sanitize_preprocessors"].default()]


def autograde_preprocessors() -> list[Any]:
    """nbgrader's autograde steps with ``SandboxedExecute`` in place of ``Execute``."""
    from nbgrader.converters.autograde import Autograde

    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    if Execute not in steps:
        raise RuntimeError("nbgrader's autograde steps have no Execute to replace: check the nbgrader version")
    return [SandboxedExecute if step is Execute else step for step in steps]


_VALUE_OPTIONS = {"--log-level", "--student", "--assignment", "--notebook", "--db", "--course-dir", "--course"}


def autograde_arguments(argv: list[str]) -> dict[str, str] | None:
    """For ``nbgrader autograde ...``: its assignment and ``--db`` (when given); None for other commands."""
    if len(argv) < 2 or argv[1] != "autograde":
        return None
    found: dict[str, str] = {}
    args = iter(argv[2:])
    for arg in args:
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if not has_value and (name in _VALUE_OPTIONS or "." in name):
                value = next(args, "")
            if name in ("--assignment", "--CourseDirectory.assignment_id"):
                found["assignment"] = value
            elif name in ("--db", "--CourseDirectory.db_url"):
                found["db"] = value
        elif not arg.startswith("-") and "assignment" not in found:
            found["assignment"] = arg
    return found


def ensure_assignment(assignment: str, root: Path, db_url: str) -> None:
    """Register ``assignment`` in the gradebook when it is not there (a fresh clone has no gradebook).

    What ``nbgrader generate_assignment`` records (notebooks, graded cells, hidden tests), with
    the students' copies written to a temporary folder: ``release/`` is left as committed.
    """
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            if gb.find_assignment(assignment).notebooks:
                return
        except MissingEntry:
            pass
    hint = f"請先執行 nbgrader generate_assignment {assignment}（或 pt2e-course release {assignment}）再評分"
    if not (root / "source" / assignment).is_dir():
        print(f"gradebook 裡沒有作業 {assignment}，source/{assignment} 也不存在：{hint}", file=sys.stderr)
        return
    print(
        f"gradebook 裡還沒有作業 {assignment}：先從 source/{assignment} 登記（nbgrader generate_assignment，release/ 不變）",
        file=sys.stderr,
    )
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="pt2e-register-") as tmp:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "nbgrader",
                "generate_assignment",
                assignment,
                "--force",
                "--log-level=ERROR",
                f"--db={db_url}",
                f"--CourseDirectory.release_directory={tmp}",
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if run.returncode != 0:
        print(f"登記作業 {assignment} 失敗：{hint}", file=sys.stderr)


def configure(c: Any, root: str, db_url: str, argv: list[str] | None = None) -> None:
    """Called by ``nbgrader_config.py``: the sandboxed autograde steps, and the assignment registered."""
    venv_tools_on_path()  # nbgrader started by its full path, the venv not activated, still finds `alembic`
    c.GenerateFeedback.preprocessors = feedback_preprocessors()
    # the course's own page for the course's notebooks (by name: the page's modules load only for generate_feedback)
    c.GenerateFeedback.exporter_class = "autograder.integrations.nbgrader_feedback.CourseFeedbackExporter"
    c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
    c.Autograde.autograde_preprocessors = autograde_preprocessors()
    c.SandboxedExecute.record_dir = str(Path(root) / "autograded")
    # nbgrader's own gradebook code warns about its session on every student; judging (pytest)
    # resets Python's once-per-place memory of warnings, so they would fill the log
    warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w*> not in session")
    arguments = autograde_arguments(sys.argv if argv is None else argv)
    if arguments is not None:
        from autograder.integrations.parallel_autograde import install

        install()  # nbgrader's loop stays; the sandboxed grading of its submissions runs first, in parallel
    if arguments and arguments.get("assignment"):
        ensure_assignment(arguments["assignment"], Path(root), arguments.get("db") or db_url)
