"""Writing grades: Gradescope's results.json, a feedback page, a gradebook CSV, a terminal table.

Feedback shows, per exercise, the likely cause of its failures once (the misconception, why it is wrong,
the section to reread, a drawing of the smallest failing case), then each check's Chinese name and points;
a failure no cause explains says what was expected and what was seen. It never shows a check's source.
"""

from __future__ import annotations

import base64
import csv
import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autograder.engine.grading import NotebookResult, StudentResult
from autograder.reports.drawing import draw_case
from autograder.reports.hygiene import clean, clean_name
from autograder.reports.report import (
    Cause,
    ExerciseSection,
    by_exercise,
    exercise_section,
    exercise_titles,
    points_text,
)


def notebook_text(result: NotebookResult) -> str:
    """The notes of a notebook as plain text (tampering first), each cleaned (``autograder.reports.hygiene``)."""
    lines = [f"⚠ {clean(t)}" for t in result.tampering] + [f"・{clean(n)}" for n in result.notes]
    if result.cell_errors:
        lines.append("執行時出錯的儲存格：")
        lines += [f"  {clean(e)}" for e in result.cell_errors]
    return "\n".join(lines)


def causes_text(result: NotebookResult) -> str:
    """The likely cause of each exercise's failures, once per exercise, as the feedback words it."""
    blocks = []
    titles = exercise_titles(result.notebook)
    for exercise, verdicts in by_exercise(result.verdicts).items():
        section = exercise_section(titles.get(exercise, exercise), verdicts)
        if not section.causes:
            continue
        lines = [section.headline]
        for cause in section.causes:
            first, *rest = cause.lines
            lines += [f"  {clean(first)}", *(f"    {clean(line)}" for line in rest)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _test_output(verdict: dict[str, Any], section: ExerciseSection) -> str:
    if verdict["passed"]:
        return ""
    cause = next((c for c in section.causes if c.misconception.key == verdict.get("explained_by")), None)
    if cause is not None:
        return f"可能的原因：{clean(cause.misconception.name)}（說明與要重讀的段落見最上方）"
    return clean(verdict["message"])  # Gradescope shows each test apart: every failed one keeps its sentence


def gradescope_results(
    results: Iterable[NotebookResult], seed: int | None = None, drawn: Drawings | None = None
) -> dict[str, Any]:
    """Gradescope's results.json: one test per check, scores in points; the likely causes in the summary, and
    the drawing of an exercise's smallest failing case as an image on its first failed check (HTML output)."""
    results = list(results)
    drawn = drawings(results) if drawn is None else drawn
    tests = []
    for result in results:
        titles = exercise_titles(result.notebook)
        sections = {e: exercise_section(titles.get(e, e), v) for e, v in by_exercise(result.verdicts).items()}
        pictured: set[str] = set()
        for number, verdict in enumerate(result.verdicts, start=1):
            exercise = str(verdict.get("exercise"))
            test = {
                "name": f"{result.notebook}｜{clean(verdict['name'])}",
                "number": f"{result.notebook}.{number}",
                "score": verdict["score"],
                "max_score": verdict["points"],
                "status": "passed" if verdict["passed"] else "failed",
                "output": _test_output(verdict, sections[exercise]),
                "visibility": "visible",
            }
            picture = drawn.get(result.notebook, {}).get(exercise)
            if picture and not verdict["passed"] and exercise not in pictured:
                pictured.add(exercise)
                test["output"] = (
                    f"<p>{html.escape(test['output'])}</p>"
                    f"<p>{html.escape(clean(picture['caption']))}</p>{picture_img(picture)}"
                )
                test["output_format"] = "html"
            tests.append(test)
    summary = "\n\n".join(
        "\n".join(
            part
            for part in (
                f"{r.notebook}：{points_text(r.score)} / {points_text(r.max_score)} 分",
                notebook_text(r),
                causes_text(r),
            )
            if part
        )
        for r in results
    )
    return {
        "score": sum(r.score for r in results),
        "output": summary + (f"\n\n（隱藏測試的亂數種子：{seed}）" if seed is not None else ""),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


Drawings = dict[str, dict[str, dict[str, str]]]
"""Notebook → exercise → the drawing of its smallest failing case (``{"caption", "svg"}``)."""


def drawings(results: Iterable[NotebookResult]) -> Drawings:
    """The drawings of every failing case of ``results`` (``autograder.reports.drawing.draw_case``), each drawn once."""
    found: Drawings = {}
    for result in results:
        for exercise, case in result.failing_cases.items():
            picture = draw_case(case)
            if picture is not None:
                found.setdefault(result.notebook, {})[exercise] = picture
    return found


def picture_img(picture: dict[str, str]) -> str:
    """A drawing as an ``<img>`` of an SVG data URI: it shows in any browser and in Gradescope's HTML output, and an
    SVG shown as an image runs nothing."""
    data = base64.b64encode(picture["svg"].encode("utf-8")).decode("ascii")
    alt = html.escape(clean(picture["caption"]), quote=True)
    return f'<img class="drawing" alt="{alt}" src="data:image/svg+xml;base64,{data}">'


_STYLE = """
:root { color-scheme: light; }
body { font-family: "Noto Sans TC", "Noto Sans CJK TC", "PingFang TC", "Microsoft JhengHei", sans-serif;
  max-width: 960px; margin: 0 auto; padding: 1rem 1.25rem 3rem; line-height: 1.6; color: #1f2937;
  overflow-wrap: anywhere; }
h1 { font-size: 1.45rem; margin: .5rem 0; } h2 { font-size: 1.2rem; margin-top: 2.2rem;
  border-bottom: 2px solid #e5e7eb; padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
.score { white-space: nowrap; font-variant-numeric: tabular-nums; color: #374151; }
h2 .score, h3 .score { font-weight: normal; margin-left: .5em; }
.warn { background: #fef3c7; padding: .5em 1em; border-radius: 6px; }
.cause { background: #eff6ff; border-left: 4px solid #2563eb; padding: .6em 1em; border-radius: 6px; margin: .6em 0; }
.cause p { margin: .35em 0; } .cause .also { border-top: 1px dashed #93c5fd; padding-top: .4em; }
.cause a { color: #1d4ed8; }
.group { margin: .8em 0 .2em; font-weight: bold; color: #374151; }
ul.checks { list-style: none; padding: 0; margin: 0; }
ul.checks li { display: grid; grid-template-columns: 1.4em 1fr auto; column-gap: .5em;
  padding: .35em 0; border-bottom: 1px solid #e5e7eb; }
ul.checks li .message { grid-column: 2 / 4; }
.pass .mark { color: #15803d; } .fail .mark { color: #b91c1c; }
pre { white-space: pre-wrap; margin: .2em 0 0; color: #374151; font-family: inherit; font-size: .95em; }
figure { margin: .8em 0 0; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9em; color: #4b5563; }
details { margin: .8em 0; }
@media (max-width: 480px) { body { padding: .75rem; } h1 { font-size: 1.25rem; } }
"""


def _checks_html(verdicts: list[dict[str, Any]], with_messages: bool) -> str:
    items = []
    for verdict in verdicts:
        kind = "pass" if verdict["passed"] else "fail"
        mark = "✓" if verdict["passed"] else "✗"
        message = ""
        if with_messages and not verdict["passed"] and verdict["message"]:
            message = f'<pre class="message">{html.escape(clean(verdict["message"]))}</pre>'
        items.append(
            f'<li class="{kind}"><span class="mark">{mark}</span><span class="name">{html.escape(clean(verdict["name"]))}'
            f'</span><span class="score">{points_text(verdict["score"])} / {points_text(verdict["points"])}</span>'
            f"{message}</li>"
        )
    return '<ul class="checks">' + "".join(items) + "</ul>"


def _offer_html(line: str) -> str:
    """``再練一題：在新的一格執行 <code>…</code>``: the call to copy, set as code."""
    lead, run, call = clean(line).partition("執行 ")
    if not run:
        return f"<p>{html.escape(clean(line))}</p>"
    return f'<p class="practice">{html.escape(lead)}執行 <code>{html.escape(call)}</code></p>'


def _cause_html(cause: Cause) -> str:
    name, text, _, *practice = cause.lines  # the name, why, where to reread, then the practice's offer (if any)
    lead, _, phrase = name.partition("：")
    where = html.escape(cause.where)
    link = f'<a href="{html.escape(cause.url, quote=True)}">{where}</a>' if cause.url else where
    also = "" if cause.first else ' class="also"'
    offer = "".join(_offer_html(line) for line in practice)
    return (
        f"<p{also}><strong>{html.escape(lead)}</strong>：{html.escape(clean(phrase))}</p>"
        f"<p>{html.escape(clean(text))}</p><p>重讀 {link}</p>{offer}"
    )


def exercise_html(
    section: ExerciseSection, picture: dict[str, str] | None, anchor: str | None = None, extra: str = ""
) -> str:
    """One exercise: its score, the likely cause once (with the drawing), then its checks.

    ``anchor``: the section's ``id`` (a page that links to its exercises); ``extra``: HTML shown under the heading
    (nbgrader's page: a grader's change of the score, their comment)."""
    ident = f' id="{html.escape(anchor, quote=True)}"' if anchor else ""
    parts = [
        f'<section class="exercise"{ident}><h3>練習「{html.escape(clean(section.title))}」'
        f'<span class="score">{points_text(section.score)} / {points_text(section.total)} 分</span></h3>{extra}'
    ]
    if section.causes:
        figure = ""
        if picture:
            figure = f"<figure>{picture_img(picture)}<figcaption>{html.escape(clean(picture['caption']))}</figcaption></figure>"
        parts.append('<div class="cause">' + "".join(_cause_html(c) for c in section.causes) + figure + "</div>")
        if section.explained:
            parts.append(f'<p class="group">這個原因讓 {len(section.explained)} 項檢查沒有通過：</p>')
            parts.append(_checks_html(section.explained, with_messages=False))
        if section.unexplained:
            parts.append('<p class="group">其他沒有通過的檢查：</p>' + _checks_html(section.unexplained, True))
        if section.passed:
            parts.append('<p class="group">通過的檢查：</p>' + _checks_html(section.passed, False))
    elif section.shared_message:
        parts.append(
            f'<p class="group">沒有通過的 {len(section.unexplained)} 項檢查都是同一個原因：</p>'
            f'<pre class="message">{html.escape(clean(section.shared_message))}</pre>'
        )
        parts.append(_checks_html(section.verdicts, with_messages=False))
    else:
        if picture and section.unexplained:
            parts.append(
                f"<figure>{picture_img(picture)}<figcaption>{html.escape(clean(picture['caption']))}</figcaption></figure>"
            )
        parts.append(_checks_html(section.verdicts, with_messages=True))
    parts.append("</section>")
    return "".join(parts)


def exercise_sections(result: NotebookResult) -> dict[str, ExerciseSection]:
    """Exercise key → its section of the feedback (``report.exercise_section``), in the order of the verdicts."""
    titles = exercise_titles(result.notebook)
    return {e: exercise_section(titles.get(e, e), v) for e, v in by_exercise(result.verdicts).items()}


def notes_html(result: NotebookResult) -> list[str]:
    """A notebook's tampering warnings, then its notes, a paragraph each."""
    return [f'<p class="warn">⚠ {html.escape(clean(w))}</p>' for w in result.tampering] + [
        f'<p class="note">・{html.escape(clean(n))}</p>' for n in result.notes
    ]


def cell_errors_html(result: NotebookResult) -> str:
    """The cells that raised, folded (empty when none did)."""
    if not result.cell_errors:
        return ""
    return (
        f"<details><summary>執行時出錯的儲存格（{len(result.cell_errors)}）</summary><pre>"
        + html.escape(clean("\n".join(result.cell_errors)))
        + "</pre></details>"
    )


def page_html(title: str, body: list[str], style: str = "") -> str:
    """A whole feedback page: ``title`` (already escaped) as its title and heading, then ``body``'s parts.

    ``style``: CSS added after the feedback's own (a page with more parts than ``feedback_html``'s)."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="zh-Hant-TW"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title><style>{_STYLE}{style}</style></head><body><main>",
            f"<h1>{title}</h1>",
            *body,
            "</main></body></html>",
        ]
    )


def feedback_html(student: StudentResult, drawn: Drawings | None = None) -> str:
    """One page for one student and module: scores, each exercise's likely cause and checks, notes.

    Every string is cleaned (``autograder.reports.hygiene.clean``) and then HTML-escaped, whoever wrote it.
    It reads at phone width (390 px) and at desktop width: no table, the score never wraps.
    """
    drawn = drawings(student.notebooks) if drawn is None else drawn
    title = f"{html.escape(clean(student.module))} 評分回饋：{html.escape(clean_name(student.student))}"
    parts = [f'<p>總分 <b class="score">{points_text(student.score)} / {points_text(student.max_score)}</b></p>']
    for result in student.notebooks:
        parts.append(
            f'<section class="notebook"><h2>{html.escape(clean(result.notebook))}'
            f'<span class="score">{points_text(result.score)} / {points_text(result.max_score)} 分</span></h2>'
        )
        parts += notes_html(result)
        for exercise, section in exercise_sections(result).items():
            parts.append(exercise_html(section, drawn.get(result.notebook, {}).get(exercise)))
        if result.cell_errors:
            parts.append(cell_errors_html(result))
        parts.append("</section>")
    return page_html(title, parts)


def write_student(out: Path, student: StudentResult, seed: int | None) -> Path:
    """OUT/<student>/<module>/results.json and feedback.html; returns the folder."""
    folder = out / student.student / student.module
    folder.mkdir(parents=True, exist_ok=True)
    drawn = drawings(student.notebooks)
    (folder / "results.json").write_text(
        json.dumps(gradescope_results(student.notebooks, seed, drawn), ensure_ascii=False, indent=1), encoding="utf-8"
    )
    (folder / "feedback.html").write_text(feedback_html(student, drawn), encoding="utf-8")
    return folder


TAMPERING_REASON_CHARS = 200


def tampering_summary(student: StudentResult) -> tuple[int, str]:
    """How many tampering notes the student's notebooks got, and a short reason (one note per notebook)."""
    count = sum(len(n.tampering) for n in student.notebooks)
    # per notebook the most telling note: a detected forgery before a restored locked cell
    reason = "；".join(
        f"{n.notebook}：{clean_name(next((t for t in n.tampering if '偵測到竄改' in t), n.tampering[0]), 400)}"
        for n in student.notebooks
        if n.tampering
    )
    if len(reason) > TAMPERING_REASON_CHARS:
        reason = reason[: TAMPERING_REASON_CHARS - 1] + "…"
    return count, reason


def csv_row(student: StudentResult, notebooks: list[str], seed: int | None) -> dict[str, str]:
    """One student's row of the gradebook CSV."""
    scores = {n.notebook: points_text(n.score) for n in student.notebooks}
    count, reason = tampering_summary(student)
    return {  # csv quotes the fields; clean() keeps terminal escapes out of whoever opens the file
        "student": clean_name(student.student),
        **{nb: scores.get(nb, "") for nb in notebooks},
        "total": points_text(student.score),
        "max": points_text(student.max_score),
        "tampering": str(count),
        "tampering_reason": reason,
        "seed": "" if seed is None else str(seed),
    }


def write_csv(out: Path, module: str, students: list[StudentResult], seed: int | None = None) -> tuple[Path, list[str]]:
    """OUT/<module>-grades.csv: a row a student (each notebook's score, total, maximum, tampering, seed).

    Rows of students graded now replace theirs; the rows of other students already in the
    file are kept (a regrade of some students merges into the class's gradebook). Returns
    the path and the students whose earlier rows were kept.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{module}-grades.csv"
    notebooks = [n.notebook for n in students[0].notebooks] if students else []
    rows: dict[str, dict[str, str]] = {}
    if path.exists():
        with path.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row.get("student"):
                    rows[row["student"]] = row
    kept = [name for name in rows if name not in {s.student for s in students}]
    for student in students:
        rows[student.student] = csv_row(student, notebooks, seed)
    header = ["student", *notebooks, "total", "max", "tampering", "tampering_reason", "seed"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="", extrasaction="ignore")
        writer.writeheader()
        for name in sorted(rows):
            writer.writerow(rows[name])
    return path, kept


def gradebook_table(students: list[StudentResult]) -> str:
    """A plain-text table of the class: a row a student, a column a notebook."""
    if not students:
        return "（沒有學生）"
    notebooks = [n.notebook for n in students[0].notebooks]
    maxima = [points_text(n.max_score) for n in students[0].notebooks]
    header = [
        "學生",
        *(f"{nb} /{m}" for nb, m in zip(notebooks, maxima, strict=True)),
        f"總分 /{points_text(students[0].max_score)}",
    ]
    rows = [
        [
            clean_name(s.student),
            *(points_text(n.score) + ("⚠" if n.tampering else "") for n in s.notebooks),
            points_text(s.score),
        ]
        for s in students
    ]
    widths = [max(_width(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(_pad(str(cell), widths[i], left=i == 0) for i, cell in enumerate(row)))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _width(text: str) -> int:
    """Display width: CJK characters take two columns."""
    return sum(2 if ord(ch) > 0x2E7F else 1 for ch in text)


def _pad(text: str, width: int, left: bool) -> str:
    space = " " * (width - _width(text))
    return text + space if left else space + text
