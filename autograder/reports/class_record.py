"""The class record: what a grading run found for each student, kept for the class report.

``pt2e-course grade`` writes ``OUT/<module>-class.json`` beside the gradebook CSV: per student, each
notebook's verdicts (check, points, score, the causes the feedback named), what happened to the run
(``NotebookResult.operations``: a limit hit, a crash, an unanswered notebook…), tampering notes, cells
that raised, and the seed and command line that reproduce the grading. A regrade of some students
replaces their entries and keeps the others, as the CSV does; nbgrader's autograde keeps each notebook in
a file of its own beside it (``add_notebook``). ``pt2e-course report`` reads both back (``load_record``); it
is the instructor's file (the students' feedback is ``feedback.html`` and ``results.json``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.engine.grading import UNANSWERED, NotebookResult, StudentResult
from autograder.reports.hygiene import clean, clean_name
from common.explain import UNFINISHED

FORMAT = 1
VERDICT_FIELDS = ("id", "exercise", "name", "points", "score", "passed")


def record_path(out: Path, module: str) -> Path:
    return out / f"{module}-class.json"


def command_line(argv: list[str] | None = None, seed: int | None = None) -> str:
    """The command that reproduces a grading run: this one, as typed, with ``--seed`` added if it was not given."""
    argv = list(sys.argv if argv is None else argv)
    program = Path(argv[0]).name if argv else "pt2e-course"
    words = ["pt2e-course" if program in ("cli.py", "__main__.py", "pt2e-course") else program, *argv[1:]]
    if seed is not None and "--seed" not in words and not any(w.startswith("--seed=") for w in words):
        words += ["--seed", str(seed)]
    return shlex.join(words)


def unfinished_exercises(result: NotebookResult) -> list[str]:
    """Exercises whose every check failed because the answer was not written (left as handed out, or reaching
    ``raise NotImplementedError()``)."""
    found: dict[str, bool] = {}
    for verdict in result.verdicts:
        message = str(verdict.get("message") or "")
        empty = message == UNANSWERED or message.startswith(UNFINISHED)
        found[verdict["exercise"]] = found.get(verdict["exercise"], True) and empty and not verdict["passed"]
    return [exercise for exercise, empty in found.items() if empty]


def notebook_record(result: NotebookResult) -> dict[str, Any]:
    """One notebook of one student, as the class record keeps it."""
    return {
        "notebook": result.notebook,
        "file": result.file,
        "score": result.score,
        "max_score": result.max_score,
        "verdicts": [
            {
                **{name: v.get(name) for name in VERDICT_FIELDS},
                "causes": [str(c) for c in v.get("causes") or []],
            }
            for v in result.verdicts
        ],
        "operations": [dict(o) for o in result.operations],
        "unfinished": unfinished_exercises(result),
        "unjudged": list(result.unjudged),
        "tampering": [clean(t) for t in result.tampering],
        "cell_errors": [clean(e) for e in result.cell_errors],
        "sandbox": list(dict.fromkeys(clean(n) for n in result.instructor_notes)),
        "practices": dict(result.practices),
    }


def student_record(student: StudentResult, seed: int | None, command: str) -> dict[str, Any]:
    return {
        "student": clean_name(student.student),
        "seed": seed,
        "command": command,
        "graded_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "notebooks": [notebook_record(n) for n in student.notebooks],
    }


@dataclass
class ClassRecord:
    """Every graded student of one module (``students``: name → ``student_record``)."""

    module: str
    students: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "module": self.module, "students": self.students}

    def notebooks(self) -> list[tuple[str, float]]:
        """Each notebook any student has, in the order first met, with its maximum."""
        found: dict[str, float] = {}
        for entry in self.students.values():
            for nb in entry["notebooks"]:
                found[nb["notebook"]] = max(found.get(nb["notebook"], 0.0), float(nb["max_score"]))
        return list(found.items())


def scores(entry: dict[str, Any]) -> dict[str, float]:
    """One student's score per notebook (a ``student_record``)."""
    return {nb["notebook"]: float(nb["score"]) for nb in entry["notebooks"]}


def read_record(path: Path) -> ClassRecord:
    """The class record at ``path``; raises ``ValueError`` with a sentence when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"讀不了 {path}（{type(exc).__name__}）") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("students"), dict):
        raise ValueError(f"{path} 不是這個版本的評分紀錄：請重新評分（pt2e-course grade）")
    return ClassRecord(str(data.get("module")), data["students"])


def recorded_seed(out: Path, module: str) -> int | None:
    """The seed the class was graded with, from ``OUT/<module>-class.json``: the one most of its students have (a
    tie: the most recent run's); None when there is no readable record or no seed in it. A regrade of some students
    (``pt2e-course grade --student``) reuses it, so that they meet the same hidden models as the class."""
    path = record_path(out, module)
    if not path.exists():
        return None
    try:
        record = read_record(path)
    except ValueError:
        return None
    runs: dict[int, tuple[int, str]] = {}
    for entry in record.students.values():
        seed = entry.get("seed")
        if type(seed) is not int:
            continue
        count, latest = runs.get(seed, (0, ""))
        runs[seed] = (count + 1, max(latest, str(entry.get("graded_at", ""))))
    return max(runs, key=lambda seed: runs[seed]) if runs else None


def write_record(
    out: Path, module: str, students: list[StudentResult], seed: int | None, command: str
) -> tuple[Path, ClassRecord]:
    """Merge ``students`` into ``OUT/<module>-class.json`` (their entries replace earlier ones; other students'
    stay) and return its path and the whole record."""

    def merge(record: ClassRecord) -> None:
        for student in students:
            record.students[clean_name(student.student)] = student_record(student, seed, command)

    return _update(out, module, merge)


def add_notebook(out: Path, module: str, student: str, result: NotebookResult, seed: int | None, command: str) -> Path:
    """Keep one graded notebook of ``student`` for the class record (nbgrader grades a notebook at a time).

    It is written to a small file of its own, ``OUT/<module>-class.d/<digest>.json``, named after the student and
    the notebook, so a regrade replaces it, and grading a class of 500 does not rewrite one growing file 2,000
    times; ``load_record`` merges them. Returns the file's path."""
    folder = out / f"{module}-class.d"
    folder.mkdir(parents=True, exist_ok=True)
    name = clean_name(student)
    entry = student_record(StudentResult(student, module, [result]), seed, command)
    digest = hashlib.sha256(f"{name}\0{result.notebook}".encode()).hexdigest()[:32]
    path = folder / f"{digest}.json"
    _write(folder, path, {"format": FORMAT, "module": module, "entry": entry})
    return path


def load_record(out: Path, module: str) -> ClassRecord:
    """The class record of ``module`` in ``out``: ``<module>-class.json`` (``pt2e-course grade``) merged with the
    notebooks nbgrader's autograde kept one by one (``add_notebook``; a notebook replaces its earlier entry, the
    student's other notebooks stay). Raises ``ValueError`` with a sentence when there is none or it is unreadable."""
    path, folder = record_path(out, module), out / f"{module}-class.d"
    if not path.exists() and not folder.is_dir():
        raise ValueError(f"找不到 {path}：先評分（pt2e-course grade {module} --out {out}），報告從評分紀錄產生")
    record = read_record(path) if path.exists() else ClassRecord(module)
    parts = sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []
    for part in parts:  # (a name starting with a dot is a file still being written)
        try:
            data = json.loads(part.read_text(encoding="utf-8"))
            entry = data["entry"]
            name, notebooks = str(entry["student"]), list(entry["notebooks"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"讀不了 {part}（{type(exc).__name__}）") from exc
        earlier = record.students.get(name, {}).get("notebooks", [])
        done = {nb.get("notebook") for nb in notebooks}
        entry["notebooks"] = sorted(
            [*(nb for nb in earlier if nb.get("notebook") not in done), *notebooks],
            key=lambda nb: str(nb.get("notebook")),
        )
        record.students[name] = entry
    record.students = dict(sorted(record.students.items()))
    return record


def _update(out: Path, module: str, merge: Callable[[ClassRecord], None]) -> tuple[Path, ClassRecord]:
    """Read, change and write the record under a lock (two graders may finish at once); written to a temporary
    file first, then renamed, so a reader never sees half a file."""
    out.mkdir(parents=True, exist_ok=True)
    path = record_path(out, module)
    with open(out / f".{module}-class.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = ClassRecord(module)
        if path.exists():
            try:
                record = read_record(path)
            except ValueError:
                record = ClassRecord(module)  # an older format: this run's students start it anew
        merge(record)
        record.students = dict(sorted(record.students.items()))
        _write(out, path, record.as_json())
    return path, record


def _write(folder: Path, path: Path, data: dict[str, Any]) -> None:
    """``data`` as JSON at ``path``, through a temporary file in ``folder`` renamed over it."""
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump(data, file, ensure_ascii=False, separators=(",", ":"))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # as an ordinary file would be (mkstemp makes it private)
    os.replace(temporary, path)
