"""``nbgrader generate_feedback`` writes the course's own feedback page for each of the course's notebooks.

nbgrader's own feedback is the whole autograded notebook through its HTML template: the setup code first, the
grading report as plain text thousands of pixels down. Here the page a student fetches (nbgrader's feedback
folder, ``<notebook>.html``, so the Assignment List's "(view feedback)" leads to it) is the page of
``pt2e-course grade``, drawn by the same code (``autograder.reports.results``: each exercise's likely cause, why,
the section to reread as a link, the drawing of its smallest failing case, then its checks), for one notebook,
with a short summary on top that links the exercises that lost points. No cell of the notebook is shown: no
setup code, no hidden tests.

How it gets there, the way nbgrader is meant to be extended:

- ``SandboxedExecute`` (autograde) keeps the ``NotebookResult`` it wrote into the cells in the autograded
  notebook's metadata (``feedback_record``, under ``RECORD_KEY``): what the page needs and the class record
  (``class_record.add_notebook``) leaves out (each failed check's message, which cause explains it, the failing
  case to draw, notes). ``RecordSubmission`` and ``SandboxedExecute`` drop whatever a submission put under that
  key, so the record is always the grader's. The autograded notebook stays in the instructor's ``autograded/``.
- ``CourseFeedbackExporter`` is ``GenerateFeedback``'s exporter (``nbgrader_config.py``): nbgrader's
  preprocessors run first (``GetGrades`` puts the gradebook's scores and the graders' comments into the cells),
  then, for a notebook with a record, the page is drawn from the record with the gradebook's scores: a score a
  TA changed in the formgrader is the page's score (the exercise says so, with the TA's comment), and the total
  is the gradebook's (a late penalty, extra credit included). A notebook without one (another course's, or one
  autograded before this existed) gets nbgrader's own page, as nbgrader makes it.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nbconvert.exporters import Exporter, HTMLExporter
from nbformat.notebooknode import NotebookNode

if TYPE_CHECKING:  # the grader's modules import torch: loaded when a page is drawn, not with the configuration
    from autograder.engine.grading import NotebookResult

RECORD_KEY = "pt2e_feedback"
"""Autograded notebook metadata holding the grader's result for the feedback page (``feedback_record``)."""
FORMAT = 1
HIDDEN_SUFFIX = "_hidden"
_RESULT_LISTS = ("notes", "tampering", "cell_errors")


def _plain(value: Any) -> Any:
    """``value`` as plain JSON (a notebook's metadata): dicts with text keys, lists, finite numbers, text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def feedback_record(result: NotebookResult, seed: int | None) -> dict[str, Any]:
    """What the feedback page of one graded notebook is drawn from (kept in the autograded notebook)."""
    return _plain(
        {
            "format": FORMAT,
            "seed": seed,
            "notebook": result.notebook,
            "file": result.file,
            "verdicts": result.verdicts,
            "failing_cases": result.failing_cases,
            **{name: getattr(result, name) for name in _RESULT_LISTS},
        }
    )


def result_of(record: Any) -> NotebookResult | None:
    """The ``NotebookResult`` of a ``feedback_record`` (None when ``record`` is not one of this format)."""
    from autograder.engine.grading import NotebookResult

    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("notebook"), str):
        return None
    try:
        verdicts = [dict(v) for v in record.get("verdicts") or []]
        for verdict in verdicts:
            verdict["points"], verdict["score"] = float(verdict["points"]), float(verdict["score"])
            verdict["passed"] = bool(verdict["passed"])
            verdict.setdefault("message", "")
        result = NotebookResult(record["notebook"], record.get("file"), verdicts=verdicts)
        result.failing_cases = {str(k): dict(v) for k, v in dict(record.get("failing_cases") or {}).items()}
        for name in _RESULT_LISTS:
            setattr(result, name, [str(line) for line in record.get(name) or []])
    except (KeyError, TypeError, ValueError):
        return None
    return result


def cell_score(verdicts: list[dict[str, Any]], points: float) -> float:
    """What a graded cell of ``points`` earns from its exercise's verdicts (nbgrader's partial credit): the sum of
    the checks' scores, scaled when the checks' points and the cell's ever differ, within [0, points]."""
    earned = sum(v["score"] for v in verdicts)
    checks = sum(v["points"] for v in verdicts)
    score = earned if checks == points else (earned * points / checks if checks else 0.0)
    return min(max(score, 0.0), points)


# --- what the gradebook says --------------------------------------------------------------------------------


@dataclass
class Grades:
    """The gradebook's side of one notebook, as nbgrader's ``GetGrades`` left it in the cells and resources."""

    score: float
    max_score: float
    late_penalty: float = 0.0
    cells: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Exercise → (score, points) of its graded cell in the gradebook (a TA's manual score when there is one)."""
    comments: dict[str, str] = field(default_factory=dict)
    """Exercise → what a grader wrote on its answer cell in the formgrader (not nbgrader's own "No response.")."""


def _number(value: Any, default: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def gradebook_grades(nb: NotebookNode, resources: dict[str, Any]) -> Grades:
    """The scores ``GetGrades`` wrote (``resources["nbgrader"]``, each graded cell's ``nbgrader`` metadata), and the
    graders' own comments from the gradebook (``GetGrades`` writes nbgrader's automatic "No response." too)."""
    info = resources.get("nbgrader", {})
    grades = Grades(_number(info.get("score")), _number(info.get("max_score")), _number(info.get("late_penalty")))
    commented = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = str(meta.get("grade_id", "") or "")
        if not grade_id:
            continue
        if meta.get("grade") and "score" in meta:
            exercise = grade_id.removesuffix(HIDDEN_SUFFIX)
            grades.cells[exercise] = (_number(meta.get("score")), _number(meta.get("points")))
        if (meta.get("solution") or meta.get("task")) and str(meta.get("comment") or "").strip():
            commented.append(grade_id)
    if commented and info.get("db_url"):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(info["db_url"]) as gb:
            for grade_id in commented:
                try:
                    comment = gb.find_comment(grade_id, info["notebook"], info["assignment"], info["student"])
                except MissingEntry:
                    continue
                if isinstance(comment.manual_comment, str) and comment.manual_comment.strip():
                    grades.comments[grade_id] = comment.manual_comment.strip()
    return grades


# --- the page ----------------------------------------------------------------------------------------------

_STYLE = """
html { scroll-behavior: smooth; }
.total { font-size: 1.15rem; margin: .4rem 0; }
nav.summary { background: #f9fafb; border: 1px solid #e5e7eb; border-radius: 8px; padding: .6em 1em; margin: 1rem 0; }
nav.summary p { margin: .3em 0; }
nav.summary ol { margin: .3em 0; padding-left: 1.4em; }
nav.summary li { margin: .35em 0; }
nav.summary .why { color: #4b5563; }
section.exercise { scroll-margin-top: 1rem; }
section.exercise:target > h3 { background: #fef9c3; }
.grader { background: #ecfdf5; border-left: 4px solid #059669; padding: .4em 1em; border-radius: 6px; margin: .6em 0; }
.grader p { margin: .3em 0; }
.seed { color: #6b7280; font-size: .85em; margin-top: 2.5rem; }
@media (max-width: 640px) {
  /* a drawing keeps its own size on a phone (shrunk to the screen its labels are too small to read): swipe it */
  .exercise figure { overflow-x: auto; }
  .exercise figure img { max-width: none; }
  .exercise figcaption::after { content: "（圖比螢幕寬時，左右滑動看整張）"; }
}
"""


def anchor_of(exercise: str) -> str:
    """The ``id`` of an exercise's section on the page (the summary links to it)."""
    return "ex-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in exercise)


def _lost_reason(section: Any) -> str:
    """Why an exercise lost points, in a few words: its likely cause, else how many checks failed."""
    from autograder.reports.hygiene import clean

    if section.causes:
        return "可能的原因：" + clean(section.causes[0].misconception.name)
    if section.shared_message:  # one reason for every failed check (not answered, a crash before it ran…)
        return clean(section.shared_message.strip().splitlines()[0], 120)
    failed = len(section.explained) + len(section.unexplained)
    return f"{failed} 項檢查沒有通過" if failed else "助教調整了分數"


def feedback_page(result: NotebookResult, student: str, grades: Grades | None = None, seed: int | None = None) -> str:
    """The feedback page of one notebook: score, a summary linking the exercises that lost points, notes, then each
    exercise as ``pt2e-course grade``'s page shows it (``results.exercise_html``), the gradebook's scores when
    ``grades`` is given."""
    from autograder.reports.hygiene import clean, clean_name
    from autograder.reports.report import points_text
    from autograder.reports.results import (
        cell_errors_html,
        drawings,
        exercise_html,
        exercise_sections,
        notes_html,
        page_html,
    )

    def esc(text: object) -> str:
        return html.escape(clean(text))

    sections = exercise_sections(result)
    extras: dict[str, str] = {}
    auto_total = result.score
    if grades is not None:
        for exercise, section in sections.items():
            notes = []
            if exercise in grades.cells:
                score, points = grades.cells[exercise]
                auto = cell_score(section.verdicts, points)
                if not math.isclose(score, auto, abs_tol=1e-6):
                    notes.append(
                        f"<p>助教調整了這一題的分數：自動評分 {points_text(auto)} 分，"
                        f'改為 <b class="score">{points_text(score)} 分</b>。</p>'
                    )
                section.score, section.total = score, points
            if exercise in grades.comments:
                notes.append(f"<p><strong>助教的評語</strong>：</p><pre>{esc(grades.comments[exercise])}</pre>")
            if notes:
                extras[exercise] = '<div class="grader">' + "".join(notes) + "</div>"
    score, max_score = (grades.score, grades.max_score) if grades is not None else (auto_total, result.max_score)

    title = f"{esc(result.notebook)} 評分回饋：{html.escape(clean_name(student))}"
    parts = [f'<p class="total">分數 <b class="score">{points_text(score)} / {points_text(max_score)}</b></p>']
    if grades is not None:
        if grades.late_penalty > 0:
            parts.append(f'<p class="warn">遲交：扣 {points_text(grades.late_penalty)} 分（已從分數扣除）</p>')
        extra = score + grades.late_penalty - sum(s for s, _ in grades.cells.values())
        if grades.cells and extra > 1e-6:
            parts.append(f'<p class="note">・助教另外加了 {points_text(extra)} 分（已算進分數）</p>')
    lost = [(e, s) for e, s in sections.items() if s.score < s.total - 1e-9]
    summary = ['<nav class="summary" aria-label="摘要">']
    if lost:
        summary.append(f"<p>{len(sections)} 題裡有 {len(lost)} 題沒拿到滿分（點題目跳到它的說明）：</p><ol>")
        for exercise, section in lost:
            summary.append(
                f'<li><a href="#{anchor_of(exercise)}">練習「{esc(section.title)}」</a>'
                f' <span class="score">{points_text(section.score)} / {points_text(section.total)} 分</span>'
                f'<br><span class="why">{esc(_lost_reason(section))}</span></li>'
            )
        summary.append("</ol>")
    else:
        summary.append(f"<p>{len(sections)} 題都拿到滿分。</p>")
    summary.append("</nav>")
    parts.append("".join(summary))
    parts += notes_html(result)
    parts.append("<h2>各題的回饋</h2>")
    pictures = drawings([result]).get(result.notebook, {})
    for exercise, section in sections.items():
        parts.append(exercise_html(section, pictures.get(exercise), anchor_of(exercise), extras.get(exercise, "")))
    if result.cell_errors:
        parts.append(cell_errors_html(result))
    if seed is not None:
        parts.append(f'<p class="seed">隱藏測試的亂數種子：{esc(seed)}（助教重現這次評分用）</p>')
    return page_html(title, parts, _STYLE)


class CourseFeedbackExporter(HTMLExporter):
    """``GenerateFeedback``'s exporter: the course's page for a notebook the course graded (a record in its
    metadata), nbgrader's own HTML for any other. nbgrader's preprocessors run first either way."""

    def from_notebook_node(
        self, nb: NotebookNode, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        record = nb.metadata.get(RECORD_KEY)
        result = None if record is None else result_of(record)
        if result is None:
            if record is not None:
                where = (resources or {}).get("nbgrader", {})
                self.log.warning(
                    "%s 的 %s 的評分紀錄讀不出來：這一本用 nbgrader 的回饋頁（請重新 autograde）",
                    where.get("student"),
                    where.get("notebook"),
                )
            return super().from_notebook_node(nb, resources, **kw)
        nb_copy, resources = Exporter.from_notebook_node(self, nb, resources, **kw)  # GetGrades and the others
        info = resources.get("nbgrader", {})
        grades = gradebook_grades(nb_copy, resources) if "score" in info else None
        seed = record.get("seed")
        page = feedback_page(result, str(info.get("student", "")), grades, seed if type(seed) is int else None)
        return page, resources
