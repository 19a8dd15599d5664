"""nbgrader's whole exchange cycle, with students who are real local users, on the configuration ``make hub``
writes (``autograder.maintenance.hub.write_config``: its exchange, its course id, each role's Jupyter
configuration; nobody passes an option on the command line).

The instructor (this process's user, root in CI) releases M03 through the hub's exchange folder, made as
nbgrader's documentation asks (world-writable; nbgrader makes ``inbound`` writable but not listable by
students). Three students, each a local user of their own, fetch it as themselves: one answers
correctly, one hands in the sample class's ``wrong-sharing`` notebooks, then submits twice, and one
tampers (the sample class's changed locked cells, and a graded cell deleted). The instructor collects
(the later submission wins), autogrades in the sandbox, generates and releases feedback; each student
fetches theirs. The points match ``pt2e-course grade`` on the same notebooks, notebook by notebook.
A student who tries to read the exchange's ``inbound`` or another student's home is refused by the file
permissions.

The deadline passes between the two students' submissions: nbgrader records the second student as late,
and the course's late policy (nbgrader's default, no penalty) leaves the points as earned.

Creating users needs root: elsewhere the test says so and is skipped (CI runs as root).
"""

from __future__ import annotations

import csv
import html
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, make_course, tool_env
from submissions import solved, write

from autograder.course import notebook_id, source_notebooks
from autograder.maintenance import hub

pytestmark = [
    pytest.mark.xdist_group("exchange"),
    pytest.mark.skipif(os.geteuid() != 0, reason="creating the students' local users needs root (CI runs as root)"),
]

MODULE = "M03"
COURSE_ID = hub.COURSE_ID
SEED = "5"
SAMPLE = ROOT / "examples" / "submitted"


def sbin(name: str) -> str:
    """An administration command; /usr/sbin is not on every root's PATH."""
    return shutil.which(name) or f"/usr/sbin/{name}"


RUNUSER = sbin("runuser")


@dataclass
class Cycle:
    course: Path
    exchange: Path
    homes: dict[str, Path]
    log: list[tuple[str, subprocess.CompletedProcess[str]]]
    users: dict[str, str]  # role (right, wrong, tamper) -> user
    deleted: str  # the grade id of the graded cell the tamperer deleted

    def ran(self, step: str) -> subprocess.CompletedProcess[str]:
        return next(result for name, result in self.log if name == step)


def configs(base: Path, role: str) -> str:
    """JUPYTER_CONFIG_PATH of a role on the hub (its own folder, then everyone's), as the hub's spawner sets it."""
    return f"{base / 'etc' / role}:{base / 'etc' / 'everyone'}"


def instructor(course: Path, exchange: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **tool_env(course / "gradebook.db"),
        "HOME": str(course.parent / "instructor-home"),
        "PT2E_SEED": SEED,
        "JUPYTER_CONFIG_PATH": configs(exchange.parent, "instructor"),
    }
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def as_student(user: str, home: Path, exchange: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """nbgrader as the student's own user, in their home, with the hub's student configuration only."""
    env = {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "JUPYTER_CONFIG_PATH": configs(exchange.parent, "students"),
    }
    return subprocess.run(
        [RUNUSER, "-u", user, "--", sys.executable, "-m", "nbgrader", *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_as(user: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RUNUSER, "-u", user, "--", *command], capture_output=True, text=True, timeout=60)


def hand_in(user: str, home: Path, source: dict[str, Path | None]) -> None:
    """The student's answers in the fetched folder: a notebook file per notebook (None: the key's solutions)."""
    for notebook, path in source.items():
        target = home / MODULE / f"{notebook}.ipynb"
        if path is None:
            write(solved(notebook), target)
        else:
            shutil.copy(path, target)
        shutil.chown(target, user, user)


def delete_a_graded_cell(path: Path) -> str:
    """Remove the first graded test cell of the notebook at ``path`` (as a student who deletes one); its grade id."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")
    notebook.cells.remove(cell)
    nbformat.write(notebook, path)
    return cell.metadata["nbgrader"]["grade_id"]


@pytest.fixture(scope="module")
def cycle() -> Iterator[Cycle]:
    base = Path(tempfile.mkdtemp(prefix="pt2e-exchange-"))
    base.chmod(0o755)  # students must reach their homes and the exchange through it
    suffix = str(os.getpid())[-5:]
    users = {"right": f"pt2e-a{suffix}", "wrong": f"pt2e-b{suffix}", "tamper": f"pt2e-c{suffix}"}
    homes: dict[str, Path] = {}
    log: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    try:
        for role, user in users.items():
            home = base / user
            subprocess.run([sbin("useradd"), "--no-create-home", "--home-dir", str(home), user], check=True)
            home.mkdir(mode=0o700)
            shutil.chown(home, user, user)
            homes[role] = home
        # the hub's own configuration: its exchange (world-writable, as nbgrader's docs ask), course id, roles
        hub.write_config(base, 0, base / "no-proxy", f"pt2e-t{suffix}", tuple(users.values()))
        exchange = base / "exchange"
        assert exchange.stat().st_mode & 0o777 == 0o777
        course = base / "course"
        course.mkdir()
        (base / "instructor-home").mkdir()
        make_course(course, [MODULE])
        log.append(("generate", instructor(course, exchange, "generate_assignment", MODULE, "--force")))
        log.append(("release", instructor(course, exchange, "release_assignment", MODULE, "--force")))
        for role, user in users.items():
            log.append((f"fetch-{role}", as_student(user, homes[role], exchange, "fetch_assignment", MODULE)))
        notebooks = [notebook_id(p) for p in source_notebooks(MODULE)]
        hand_in(users["right"], homes["right"], dict.fromkeys(notebooks))
        log.append(("submit-right", as_student(users["right"], homes["right"], exchange, "submit", MODULE)))
        hand_in(
            users["tamper"],
            homes["tamper"],
            {nb: SAMPLE / "tampered" / MODULE / f"{nb}.ipynb" for nb in notebooks},
        )
        deleted = delete_a_graded_cell(homes["tamper"] / MODULE / "M03-3.ipynb")
        log.append(("submit-tamper", as_student(users["tamper"], homes["tamper"], exchange, "submit", MODULE)))
        # the deadline passes between the two students: the wrong student's submissions are late
        time.sleep(1.1)
        due = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        log.append(("due-date", instructor(course, exchange, "db", "assignment", "add", MODULE, f"--duedate={due}")))
        time.sleep(1.1)
        # the wrong student submits twice: first untouched notebooks, then the wrong-sharing answers
        log.append(("submit-wrong-1", as_student(users["wrong"], homes["wrong"], exchange, "submit", MODULE)))
        time.sleep(1.1)  # nbgrader's submissions are told apart by their timestamp
        hand_in(
            users["wrong"],
            homes["wrong"],
            {nb: SAMPLE / "wrong-sharing" / MODULE / f"{nb}.ipynb" for nb in notebooks},
        )
        log.append(("submit-wrong-2", as_student(users["wrong"], homes["wrong"], exchange, "submit", MODULE)))
        log.append(("list-inbound", run_as(users["wrong"], "ls", str(exchange / COURSE_ID / "inbound"))))
        log.append(("read-home", run_as(users["wrong"], "ls", str(homes["right"] / MODULE))))
        log.append(("collect", instructor(course, exchange, "collect", MODULE, "--update")))
        log.append(("autograde", instructor(course, exchange, "autograde", MODULE, "--force")))
        log.append(("feedback", instructor(course, exchange, "generate_feedback", MODULE, "--force")))
        log.append(("release-feedback", instructor(course, exchange, "release_feedback", MODULE)))
        for role, user in users.items():
            log.append((f"fetch-feedback-{role}", as_student(user, homes[role], exchange, "fetch_feedback", MODULE)))
        log.append(("export", instructor(course, exchange, "export", "--to", str(course / "grades.csv"))))
        yield Cycle(course, exchange, {users[r]: h for r, h in homes.items()}, log, users, deleted)
    finally:
        for user in users.values():
            subprocess.run([sbin("userdel"), user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_every_step_of_the_cycle_succeeds(cycle: Cycle) -> None:
    for name, result in cycle.log:
        if name in ("list-inbound", "read-home"):
            continue
        assert result.returncode == 0, f"{name}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    # an instructor reads these logs: nbgrader's and the course's configuration agree (no option left unread)
    feedback = cycle.ran("feedback")
    assert "not recognized" not in feedback.stdout + feedback.stderr, feedback.stderr[-2000:]


def test_a_student_cannot_read_the_inbound_or_another_students_work(cycle: Cycle) -> None:
    for step in ("list-inbound", "read-home"):
        result = cycle.ran(step)
        assert result.returncode != 0 and "Permission denied" in result.stderr, (step, result.stdout, result.stderr)


def test_the_later_submission_replaces_the_first(cycle: Cycle) -> None:
    wrong = cycle.users["wrong"]
    submitted = cycle.course / "submitted" / wrong / MODULE / "M03-4.ipynb"
    assert submitted.read_bytes() == (SAMPLE / "wrong-sharing" / MODULE / "M03-4.ipynb").read_bytes()


def test_each_student_fetches_feedback_that_matches_grade(cycle: Cycle, tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    notebooks = [notebook_id(p) for p in source_notebooks(MODULE)]
    with (cycle.course / "grades.csv").open(encoding="utf-8") as handle:
        nbgrader_totals = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle)}
    with Gradebook(f"sqlite:///{cycle.course / 'gradebook.db'}") as gb:
        nbgrader_scores = {
            (user, nb): gb.find_submission_notebook(nb, MODULE, user).score for user in cycle.homes for nb in notebooks
        }
        maxima = {nb: gb.find_notebook(nb, MODULE).max_score for nb in notebooks}
    folders = tmp_path / "submitted"
    for user in cycle.homes:
        shutil.copytree(cycle.course / "submitted" / user / MODULE, folders / user / MODULE)
    out = tmp_path / "graded"
    grade = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder.cli",
            "grade",
            MODULE,
            *("--submitted", str(folders), "--out", str(out)),
            "--seed",
            SEED,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    assert grade.returncode == 0, grade.stderr[-3000:]
    with (out / f"{MODULE}-grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    graded = {(user, nb): float(rows[user][nb]) for user in cycle.homes for nb in notebooks}
    assert graded == nbgrader_scores, "point for point, notebook by notebook"
    assert {user: float(row["total"]) for user, row in rows.items()} == nbgrader_totals
    right, wrong, tamper = (cycle.users[role] for role in ("right", "wrong", "tamper"))
    assert float(rows[right]["total"]) == float(rows[right]["max"])
    assert float(rows[wrong]["total"]) < float(rows[right]["total"])
    # the tamperer earns what the cells they did not touch earn, as the folder flow scores them
    assert int(rows[tamper]["tampering"]) > 0 and float(rows[tamper]["total"]) < float(rows[right]["total"])
    assert f"鎖定的儲存格 {cycle.deleted} 被刪除：評分時補回原本的內容" in rows[tamper]["tampering_reason"]
    cause = first_cause(out, wrong, "M03-4")
    for user, home in cycle.homes.items():
        pages = sorted((home / MODULE / "feedback").glob("*/*.html"))
        assert [p.stem for p in pages] == sorted(notebook_id(p) for p in source_notebooks(MODULE)), user
        assert all(pwd.getpwuid(p.stat().st_uid).pw_name == user for p in pages), "fetched as the student"
        for path in pages:  # the course's page, not nbgrader's notebook: no cell, no setup code, no hidden test
            page = path.read_text(encoding="utf-8")
            score, maximum = nbgrader_scores[(user, path.stem)], maxima[path.stem]
            assert f'分數 <b class="score">{score:g} / {maximum:g}</b>' in page, (user, path.stem, "the gradebook's")
            assert '<nav class="summary"' in page and "練習「" in page, (user, path.stem)
            for secret in ("pip install", "_pt2e_colab_setup", "BEGIN HIDDEN TESTS", "def test_", "jp-Cell"):
                assert secret not in page, (user, path.stem, secret)
        page = next(p for p in pages if p.stem == "M03-4").read_text(encoding="utf-8")
        if user == wrong:  # the cause grade names, why, a link to reread, the drawing of the failing case
            name, text, url = cause
            assert html.escape(name) in page and html.escape(text) in page, "the wrong-sharing student reads the cause"
            assert url is not None and f'<a href="{html.escape(url, quote=True)}">' in page, "a link to reread"
            assert '<img class="drawing"' in page or "<svg" in page, "the drawing of the failing case"
            assert re.search(r'<li><a href="#ex-\w+">', page), "the summary links the exercise that lost points"
        if user == tamper:
            assert "竄改" in page or "鎖定的儲存格" in page, "the tamperer reads what was put back"


def first_cause(out: Path, student: str, notebook: str) -> tuple[str, str, str | None]:
    """The first cause ``pt2e-course grade`` named for ``student``'s ``notebook`` (its class record): the
    misconception's name, why it is wrong, the address of the section to reread."""
    from autograder.reports.class_record import load_record
    from selfcheck.misconceptions import section_url
    from selfcheck.preview import public_exercises

    entry = load_record(out, MODULE).students[student]
    verdicts = next(nb["verdicts"] for nb in entry["notebooks"] if nb["notebook"] == notebook)
    failed = next(v for v in verdicts if not v["passed"] and v["causes"])
    misconception = public_exercises(notebook)[failed["exercise"]].misconception(failed["causes"][0])
    return misconception.name, misconception.text, section_url(notebook, misconception.section)


def test_a_late_submission_is_recorded_as_late_and_scored_by_the_policy(cycle: Cycle) -> None:
    from nbgrader.api import Gradebook

    right, wrong = cycle.users["right"], cycle.users["wrong"]
    with Gradebook(f"sqlite:///{cycle.course / 'gradebook.db'}") as gb:
        late = {s: gb.find_submission(MODULE, s) for s in (right, wrong)}
        assert late[wrong].total_seconds_late > 0 and late[right].total_seconds_late == 0
        assert late[wrong].late_submission_penalty == 0, "the course's policy: late work keeps its points"
