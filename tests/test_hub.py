"""The demo JupyterHub of ``make hub``: students log in, get their own server as their own user, and fetch
and submit M03; the instructor releases, collects, autogrades and sends feedback through nbgrader's exchange.

Two tests share one hub and one release of M03: one student through the Assignments tab's API (and the file
permissions between students); the other student, and the instructor, through headless Chromium, clicking and
typing as people do (``tests/lab_browser.py``), the whole cycle from logging in to reading the feedback.
``tests/test_exchange.py`` runs the same cycle on the command line with more students and late work. Needs
root (the demo's local users), as ``make hub`` does; CI runs as root and installs Chromium.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from lab_browser import Browser, Lab

from autograder.course import ROOT, SOURCE
from autograder.maintenance import hub

pytestmark = [
    pytest.mark.xdist_group("hub"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the demo hub makes local users and runs servers as them: root only"),
]

requests = pytest.importorskip("requests")

# users of this run only (made by hub.prepare, removed afterwards), not the demo's, which `make hub` may have used
_SUFFIX = str(os.getpid())[-5:]
INSTRUCTOR = f"pt2e-t{_SUFFIX}"
STUDENTS = (f"pt2e-a{_SUFFIX}", f"pt2e-b{_SUFFIX}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[str, Path]]:
    base = Path(tempfile.mkdtemp(prefix="pt2e-hub-"))
    base.chmod(0o755)
    port = free_port()
    config = hub.prepare(port, hub=base, instructor=INSTRUCTOR, students=STUDENTS)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(config)],
        cwd=base,
        stdout=subprocess.DEVNULL,
        stderr=(base / "hub.log").open("w"),
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{url}/hub/api", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, (base / "hub.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url, base
    finally:
        process.terminate()  # kill's SIGTERM stops the hub, its proxy and the servers it started
        process.wait(timeout=60)
        deadline = time.monotonic() + 20  # a server shuts its kernels down after the hub has gone: give it time
        while (left := outliving(base)) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in left:  # never leave a process behind, even when the assertion below fails
            subprocess.run(["kill", "-KILL", pid], capture_output=True)
        for user in (INSTRUCTOR, *STUDENTS):
            subprocess.run([shutil.which("userdel") or "/usr/sbin/userdel", "--remove", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"processes outlived the hub by 20 s: {left}"


def outliving(base: Path) -> dict[str, str]:
    """The processes of this hub's folder and of its users, by pid, with their command lines (zombies, which
    have ended and wait for their parent, left out)."""
    pids = subprocess.run(["pgrep", "-f", str(base)], capture_output=True, text=True).stdout.split()
    for user in (INSTRUCTOR, *STUDENTS):
        pids += subprocess.run(["pgrep", "-u", user], capture_output=True, text=True).stdout.split()
    found = {}
    for pid in dict.fromkeys(pids):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            continue  # ended meanwhile
    return found


def post_login(url: str, user: str, password: str) -> tuple[requests.Session, requests.Response]:
    """The hub's login form, filled in and sent."""
    session = requests.Session()
    session.get(f"{url}/hub/login", timeout=30)
    xsrf = next(c.value for c in session.cookies if c.name == "_xsrf")
    form = {"username": user, "password": password, "_xsrf": xsrf}
    return session, session.post(f"{url}/hub/login", data=form, timeout=180)


def login(url: str, user: str) -> tuple[requests.Session, str]:
    """Log in through the hub's form, wait for the user's own server; returns the session and its xsrf token."""
    session, answer = post_login(url, user, hub.PASSWORD)
    assert answer.status_code == 200
    deadline = time.monotonic() + 120
    while True:  # the first visit of the server goes through the hub's OAuth, which sets the server's cookie
        page = session.get(f"{url}/user/{user}/lab", timeout=30)
        if page.status_code == 200 and page.url.endswith(f"/user/{user}/lab"):
            break
        assert time.monotonic() < deadline, f"{user}'s server did not start ({page.status_code} {page.url})"
        time.sleep(0.5)
    server_xsrf = next(c.value for c in session.cookies if c.name == "_xsrf" and c.path.startswith("/user/"))
    return session, server_xsrf


def as_instructor(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "HOME": pwd.getpwnam(INSTRUCTOR).pw_dir,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": f"{base / 'etc' / 'instructor'}:{base / 'etc' / 'everyone'}",
        "LANG": "C.UTF-8",
    }
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return subprocess.run(
        [runuser, "-u", INSTRUCTOR, "--", sys.executable, "-m", "nbgrader", *args],
        cwd=base / "course",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def released(running: tuple[str, Path]) -> tuple[str, Path]:
    """The hub with M03 generated and released by the instructor, as nbgrader's documentation does it."""
    url, base = running
    for step in (("generate_assignment", "M03", "--force"), ("release_assignment", "M03", "--force")):
        done = as_instructor(base, *step)
        assert done.returncode == 0, done.stderr[-3000:]
    return url, base


def test_a_student_logs_in_fetches_and_submits_through_the_hub(released) -> None:
    url, base = released
    student = STUDENTS[0]
    session, xsrf = login(url, student)
    # a student's lab: the Assignments tab and Validate, not the instructor's tools
    page = session.get(f"{url}/user/{student}/lab", timeout=30).text
    disabled = page.split("disabledExtensions", 1)[1].split("]", 1)[0]
    assert "@jupyter/nbgrader:menu" in disabled and "@jupyter/nbgrader:create-assignment" in disabled
    assert "assignment-list" not in disabled and "validate-assignment" not in disabled
    assert session.get(f"{url}/user/{student}/formgrader", timeout=30).status_code == 404
    headers = {"X-XSRFToken": xsrf}
    listed = session.get(f"{url}/user/{student}/assignments", params={"course_id": hub.COURSE_ID}, timeout=60).json()
    assert [(a["assignment_id"], a["status"]) for a in listed["value"]] == [("M03", "released")]
    form = {"course_id": hub.COURSE_ID, "assignment_id": "M03"}
    fetched = session.post(f"{url}/user/{student}/assignments/fetch", data=form, headers=headers, timeout=120).json()
    assert fetched["success"], fetched
    home = Path(pwd.getpwnam(student).pw_dir)
    notebooks = sorted(home.glob("M03/*.ipynb"))
    assert [p.stem for p in notebooks] == ["M03-1", "M03-2", "M03-3", "M03-4"]
    assert all(pwd.getpwuid(p.stat().st_uid).pw_name == student for p in notebooks), "fetched as the student"
    submitted = session.post(f"{url}/user/{student}/assignments/submit", data=form, headers=headers, timeout=120).json()
    assert submitted["success"], submitted
    inbound = base / "exchange" / hub.COURSE_ID / "inbound"
    mine = [p.name.split("+")[:2] for p in inbound.iterdir() if p.name.startswith(f"{student}+")]
    assert mine == [[student, "M03"]]
    # the other student can neither list the inbound nor read the first student's home
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    for target in (inbound, home):
        peek = subprocess.run([runuser, "-u", STUDENTS[1], "--", "ls", str(target)], capture_output=True, text=True)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, (target, peek.stdout)
    # the students' shared password does not open the instructor's account, nor can a student read theirs
    _, refused = post_login(url, INSTRUCTOR, hub.PASSWORD)
    assert refused.status_code == 403 and "/hub/login" in refused.url, (refused.status_code, refused.url)
    peek = subprocess.run(
        [runuser, "-u", student, "--", "cat", str(base / "instructor-password")], capture_output=True, text=True
    )
    assert peek.returncode != 0 and "Permission denied" in peek.stderr, peek.stdout


SHOTS_KEPT = Path("/tmp/hub-shots")
"""Where the browser test's screenshots are copied for the maintainer's notes (outside the repository)."""


def points(notebook: Path) -> float:
    """The notebook's points: its grade cells' ``points`` in the source's nbgrader metadata, which nbgrader's
    gradebook takes as the maximum score."""
    cells = nbformat.read(notebook, as_version=4).cells
    return sum(
        c.metadata.get("nbgrader", {}).get("points", 0.0) for c in cells if c.metadata.get("nbgrader", {}).get("grade")
    )


def answers(notebook: Path) -> dict[str, str]:
    """The answer cells' sources of a notebook, by nbgrader ``grade_id``."""
    cells = nbformat.read(notebook, as_version=4).cells
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source for c in cells if c.metadata.get("nbgrader", {}).get("solution")
    }


def formgrader_number(value: float) -> str:
    """A score as the formgrader writes it (JavaScript's number to text, rounded to 2 decimals)."""
    return f"{round(value, 2):g}"


def test_the_whole_cycle_in_a_browser(released, tmp_path: Path) -> None:
    """A student logs in, fetches M03 from the "作業" menu's Assignment List, types the two answers of M03-4, saves,
    runs every cell, validates and submits; the instructor collects and autogrades, sees the score in the
    formgrader, releases feedback from it and opens it; the student fetches the feedback and reads it."""
    url, base = released
    student, notebook = STUDENTS[1], "M03-4"
    typed = answers(ROOT / "examples" / "submitted" / "full" / "M03" / f"{notebook}.ipynb")
    assert sorted(typed) == ["add_quantizer", "cat_quantizer"], "the sample answer's cells"
    home = Path(pwd.getpwnam(student).pw_dir)
    saved_path = home / "M03" / f"{notebook}.ipynb"
    shots = tmp_path / "shots"
    try:
        with Browser(width=1280, height=800, timeout=60) as browser:
            lab = Lab(browser, url, shots)
            # 1. the hub's login form; the student's JupyterLab
            lab.login(student, hub.PASSWORD)
            lab.shot("01-lab")
            # 2. 作業 > Assignment List: fetch M03, open M03-4 from the fetched list
            lab.menu("作業", "Assignment List")
            lab.click("#released_assignments_list button", "Fetch")
            lab.click("#fetched_assignments_list a.assignment-notebooks-link", "M03")
            lab.click("#fetched_assignments_list .nested_list_item a", notebook)
            lab.shot("02-fetched")
            lab.wait(
                "[...document.querySelectorAll('.jp-NotebookPanel-toolbar .jp-ToolbarButtonComponent-label')]"
                ".some(e => e.textContent.trim() === 'Validate')",
                60,
            )
            # 3. the answers typed into their cells, saved with Ctrl+S
            lab.replace_cell("class AddQuantizer(Quantizer)", typed["add_quantizer"])
            lab.replace_cell("class CatQuantizer(Quantizer)", typed["cat_quantizer"])
            lab.shot("03-typed")
            lab.save()
            assert answers(saved_path) == typed, "the saved notebook holds the answers as typed"
            # 4. Run > Run All Cells; saved again, every code cell ran without an error; Validate passes
            lab.run_all()
            lab.shot("04-ran")
            lab.save()
            code = [c for c in nbformat.read(saved_path, as_version=4).cells if c.cell_type == "code"]
            assert all(c.execution_count for c in code), [c.execution_count for c in code]
            errors = [o.get("ename") for c in code for o in c.outputs if o.output_type == "error"]
            assert not errors, errors
            lab.click(".jp-NotebookPanel-toolbar .jp-ToolbarButtonComponent", "Validate")
            validation = lab.dialog(300)
            lab.shot("05-validated")
            assert "Success! Your notebook passes all the tests." in validation, validation
            lab.close_dialog()
            # 5. Submit from the Assignment List: the exchange's inbound has it
            lab.click(".lm-DockPanel-tabBar .lm-TabBar-tab", "Assignments")
            lab.click("#fetched_assignments_list button", "Submit")
            lab.wait("document.querySelector('#submitted_assignments_list').innerText.includes('Fetch Feedback')", 60)
            lab.shot("06-submitted")
            inbound = base / "exchange" / hub.COURSE_ID / "inbound"
            assert [p.name.split("+")[1] for p in inbound.glob(f"{student}+*")] == ["M03"]

            # 6. the instructor collects and autogrades (the course's sandbox), then uses the formgrader
            for step in ("collect", "autograde"):
                done = as_instructor(base, step, "M03", f"--student={student}")
                assert done.returncode == 0, done.stderr[-3000:]
            earned = points(SOURCE / "M03" / f"{notebook}.ipynb")
            total = sum(points(p) for p in sorted((SOURCE / "M03").glob("M03-*.ipynb")))
            assert 0 < earned < total
            with Browser(width=1280, height=800, timeout=60) as instructor_browser:
                teacher = Lab(instructor_browser, url, shots)
                teacher.login(INSTRUCTOR, hub.instructor_password(base))
                instructor_browser.open(f"{url}/user/{INSTRUCTOR}/formgrader")
                teacher.click("td.num-submissions a", "1")  # Manage Assignments: M03's submissions
                teacher.wait("location.pathname.endsWith('/formgrader/manage_submissions/M03')")
                row = f"[...document.querySelectorAll('tbody tr')].find(r => r.innerText.includes({student!r}))"
                score = teacher.wait(f"{row} && {row}.querySelector('.score').innerText.trim()")
                teacher.shot("07-formgrader")
                listed = teacher.wait(f"{row} && {row}.innerText")
                assert "None" not in listed and student.removeprefix("pt2e-").capitalize() in listed, listed  # enrolled
                # only M03-4 was answered: the student earned its points, out of the module's
                assert score == f"{formgrader_number(earned)} / {formgrader_number(total)}", score
                for button, said in (("generate-feedback", "generated"), ("release-feedback", "released")):
                    teacher.click(f"td.{button} a")
                    answer = teacher.modal()
                    assert answer.startswith("success-modal") and f"Successfully {said} feedback" in answer, answer
                    teacher.close_modal()
                teacher.shot("08-feedback-released")
                # the instructor opens the feedback the student will read (the course is the server's root)
                instructor_browser.open(f"{url}/user/{INSTRUCTOR}/files/feedback/{student}/M03/{notebook}.html")
                read_by_teacher = teacher.text()
                teacher.shot("09-teacher-feedback")
                assert f"{notebook} (Score: {earned:.1f} / {earned:.1f})" in read_by_teacher, read_by_teacher[:500]
                assert "BEGIN HIDDEN TESTS" not in read_by_teacher

            # the student fetches the feedback from the Assignment List and reads it
            lab.click("#submitted_assignments_list button", "Fetch Feedback")
            lab.wait("document.querySelector('#submitted_assignments_list').innerText.includes('(view feedback)')", 60)
            lab.shot("10-feedback-fetched")
            feedback = list(home.glob(f"M03/feedback/*/{notebook}.html"))
            assert len(feedback) == 1, sorted(str(p) for p in home.glob("M03/feedback/**/*"))
            assert pwd.getpwuid(feedback[0].stat().st_uid).pw_name == student, "fetched as the student"
            relative = urllib.parse.quote(str(feedback[0].relative_to(home)))
            browser.open(f"{url}/user/{student}/files/{relative}")
            page = lab.text()
            lab.shot("11-feedback")
            assert f"{notebook} (Score: {earned:.1f} / {earned:.1f})" in page, page[:500]
            assert "BEGIN HIDDEN TESTS" not in page and "Traceback (most recent call last)" not in page
    finally:
        SHOTS_KEPT.mkdir(exist_ok=True)
        for shot in sorted(shots.glob("*.png")):
            shutil.copy(shot, SHOTS_KEPT / shot.name)
