"""Writing grades: Gradescope's results.json, a feedback page, a gradebook CSV, a terminal table.

Feedback shows each check's Chinese name, points, and on failure what was expected and
what was seen; it never shows a check's source.
"""

from __future__ import annotations

import csv
import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autograder.engine.grading import NotebookResult, StudentResult
from autograder.reports.hygiene import clean, clean_name
from autograder.reports.report import points_text


def notebook_text(result: NotebookResult) -> str:
    """The notes of a notebook as plain text (tampering first), each cleaned (``autograder.reports.hygiene``)."""
    lines = [f"⚠ {clean(t)}" for t in result.tampering] + [f"・{clean(n)}" for n in result.notes]
    if result.cell_errors:
        lines.append("執行時出錯的儲存格：")
        lines += [f"  {clean(e)}" for e in result.cell_errors]
    return "\n".join(lines)


def gradescope_results(results: Iterable[NotebookResult], seed: int | None = None) -> dict[str, Any]:
    """Gradescope's results.json: one test per check, scores in points."""
    results = list(results)
    tests = []
    for result in results:
        for number, verdict in enumerate(result.verdicts, start=1):
            tests.append(
                {
                    "name": f"{result.notebook}｜{clean(verdict['name'])}",
                    "number": f"{result.notebook}.{number}",
                    "score": verdict["score"],
                    "max_score": verdict["points"],
                    "status": "passed" if verdict["passed"] else "failed",
                    "output": clean(verdict["message"]) if not verdict["passed"] else "",
                    "visibility": "visible",
                }
            )
    summary = "\n\n".join(
        f"{r.notebook}：{points_text(r.score)} / {points_text(r.max_score)} 分\n{notebook_text(r)}".rstrip()
        for r in results
    )
    return {
        "score": sum(r.score for r in results),
        "output": summary + (f"\n\n（隱藏測試的亂數種子：{seed}）" if seed is not None else ""),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


_STYLE = """
body { font-family: "Noto Sans TC", "PingFang TC", "Microsoft JhengHei", sans-serif; max-width: 960px; margin: 2em auto; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
.pass { color: #15803d; } .fail { color: #b91c1c; } .warn { background: #fef3c7; padding: .5em 1em; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #e5e7eb; padding: .4em; vertical-align: top; }
pre { white-space: pre-wrap; margin: .3em 0 0; color: #374151; }
"""


def feedback_html(student: StudentResult) -> str:
    """One page for one student and module: scores, every check, notes.

    Every string is cleaned (``autograder.reports.hygiene.clean``) and then HTML-escaped, whoever wrote it.
    """

    def esc(text: object) -> str:
        return html.escape(clean(text))

    parts = [
        "<!DOCTYPE html>",
        '<html lang="zh-Hant-TW"><head><meta charset="utf-8">',
        f"<title>{esc(student.module)} 評分回饋：{html.escape(clean_name(student.student))}</title>"
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{esc(student.module)} 評分回饋：{html.escape(clean_name(student.student))}</h1>",
        f"<p>總分 <b>{points_text(student.score)} / {points_text(student.max_score)}</b></p>",
    ]
    for result in student.notebooks:
        parts.append(
            f"<h2>{esc(result.notebook)}：{points_text(result.score)} / {points_text(result.max_score)} 分</h2>"
        )
        for warning in result.tampering:
            parts.append(f'<p class="warn">⚠ {esc(warning)}</p>')
        for note in result.notes:
            parts.append(f"<p>・{esc(note)}</p>")
        parts.append("<table><tr><th></th><th>檢查</th><th>分數</th></tr>")
        for verdict in result.verdicts:
            mark = '<span class="pass">✓</span>' if verdict["passed"] else '<span class="fail">✗</span>'
            detail = "" if verdict["passed"] or not verdict["message"] else f"<pre>{esc(verdict['message'])}</pre>"
            parts.append(
                f"<tr><td>{mark}</td><td>{esc(verdict['name'])}{detail}</td>"
                f"<td>{points_text(verdict['score'])} / {points_text(verdict['points'])}</td></tr>"
            )
        parts.append("</table>")
        if result.cell_errors:
            parts.append("<p>執行時出錯的儲存格：</p><pre>" + esc("\n".join(result.cell_errors)) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_student(out: Path, student: StudentResult, seed: int | None) -> Path:
    """OUT/<student>/<module>/results.json and feedback.html; returns the folder."""
    folder = out / student.student / student.module
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(
        json.dumps(gradescope_results(student.notebooks, seed), ensure_ascii=False, indent=1), encoding="utf-8"
    )
    (folder / "feedback.html").write_text(feedback_html(student), encoding="utf-8")
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
