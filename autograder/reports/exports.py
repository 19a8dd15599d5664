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

from autograder.reports.class_record import ClassRecord, scores
from autograder.reports.hygiene import clean_name
from autograder.reports.report import points_text


def _safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (a name starting with = + - @)."""
    text = clean_name(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def write_canvas(out: Path, record: ClassRecord) -> Path:
    path = out / f"{record.module}-canvas.csv"
    notebooks = record.notebooks()
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(nb for nb, _ in notebooks)])
        writer.writerow(["Points Possible", "", "", "", "", *(points_text(m) for _, m in notebooks)])
        for name, entry in sorted(record.students.items()):
            got = scores(entry)
            writer.writerow(
                [_safe(name), "", _safe(name), _safe(name), "", *(points_text(got.get(nb, 0.0)) for nb, _ in notebooks)]
            )
    return path


def write_moodle(out: Path, record: ClassRecord) -> Path:
    path = out / f"{record.module}-moodle.csv"
    notebooks = record.notebooks()
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Username", *(nb for nb, _ in notebooks), f"{record.module} total"])
        for name, entry in sorted(record.students.items()):
            got = scores(entry)
            writer.writerow(
                [_safe(name), *(points_text(got.get(nb, 0.0)) for nb, _ in notebooks), points_text(sum(got.values()))]
            )
    return path
