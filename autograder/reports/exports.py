"""Gradebook exports in the shapes learning-management systems import.

- **Canvas** (Grades → Import): the columns of Canvas's own gradebook export, ``Student``, ``ID``,
  ``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per assignment, and a second row
  ``Points Possible``. Canvas matches a row to a student by ``ID``, else ``SIS User ID``, else
  ``SIS Login ID``; the course knows only the folder name of a submission, which is the student's
  login in nbgrader and Gradescope, so it goes in both SIS columns and ``ID`` stays empty. A column
  Canvas has no assignment for becomes a new assignment on import.
- **Moodle** (Grades → Import → CSV file): one row per student, a column that identifies the user
  (``Username``: mapped to "username" on the import page) and one column per grade item, which the
  import page maps to existing or new grade items.

Both come from the class record, so a partial regrade that merged into it exports the whole class.
"""

from __future__ import annotations

import csv
from pathlib import Path

from autograder.reports.class_record import ClassRecord
from autograder.reports.hygiene import clean_name


def _points(value: float) -> str:
    return f"{value:g}"


def _notebooks(record: ClassRecord) -> list[tuple[str, float]]:
    found: dict[str, float] = {}
    for entry in record.students.values():
        for nb in entry["notebooks"]:
            found[nb["notebook"]] = max(found.get(nb["notebook"], 0.0), float(nb["max_score"]))
    return list(found.items())


def _scores(entry: dict) -> dict[str, float]:
    return {nb["notebook"]: float(nb["score"]) for nb in entry["notebooks"]}


def _safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (a name starting with = + - @)."""
    text = clean_name(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def write_canvas(out: Path, record: ClassRecord) -> Path:
    path = out / f"{record.module}-canvas.csv"
    notebooks = _notebooks(record)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(nb for nb, _ in notebooks)])
        writer.writerow(["Points Possible", "", "", "", "", *(_points(m) for _, m in notebooks)])
        for name, entry in sorted(record.students.items()):
            scores = _scores(entry)
            writer.writerow(
                [_safe(name), "", _safe(name), _safe(name), "", *(_points(scores.get(nb, 0.0)) for nb, _ in notebooks)]
            )
    return path


def write_moodle(out: Path, record: ClassRecord) -> Path:
    path = out / f"{record.module}-moodle.csv"
    notebooks = _notebooks(record)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Username", *(nb for nb, _ in notebooks), f"{record.module} total"])
        for name, entry in sorted(record.students.items()):
            scores = _scores(entry)
            writer.writerow(
                [_safe(name), *(_points(scores.get(nb, 0.0)) for nb, _ in notebooks), _points(sum(scores.values()))]
            )
    return path
