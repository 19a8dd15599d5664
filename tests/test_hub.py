"""The demo JupyterHub of ``make hub``: students log in, get their own server as their own user, and fetch
and submit M03; the instructor releases, collects, autogrades and sends feedback through nbgrader's exchange.

Two tests share one hub, one release of M03 and one instructor's browser: one student through the Assignments
tab's API (and the file permissions between students); the other student, and the instructor, through headless
Chromium, clicking and typing as people do (``tests/lab_browser.py``), the whole cycle from logging in to
reading the feedback. The instructor types the README's own commands into File > New > Terminal and the test
reads what the terminal shows: the shell opens in the course, finds nbgrader, says what the hub's grading lacks
(``hub.ISOLATION``), and each command ends well. Tearing the hub down is ``make hub-clean``'s ``hub.remove``.
``tests/test_exchange.py`` runs the same cycle on the command line with more students and late work. Needs
root (the demo's local users), as ``make hub`` does; CI runs as root and installs Chromium.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from lab_browser import TERMINAL_READABLE, Browser, Lab, Terminal

from autograder.course import ROOT, SOURCE
from autograder.maintenance import hub
from autograder.sandboxed import confine, memory

pytestmark = [
    pytest.mark.xdist_group("hub"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the demo hub makes local users and runs servers as them: root only"),
]

requests = pytest.importorskip("requests")

# users of this run only (made by hub.prepare, removed afterwards), not the demo's, which `make hub` may have used
_SUFFIX = str(os.getpid())[-5:]
INSTRUCTOR = f"pt2e-t{_SUFFIX}"
STUDENTS = (f"pt2e-a{_SUFFIX}", f"pt2e-b{_SUFFIX}")
PROFILE = Path(f"/etc/profile.d/pt2e-course-hub-{_SUFFIX}.sh")
"""This run's login profile script, beside the demo's, which `make hub` may have written."""
SHOTS_KEPT = Path("/tmp/hub-shots")
"""Where the browser test's screenshots are copied for the maintainer's notes (outside the repository)."""


def readme_hub_section() -> str:
    """The README's section on the hub, up to the next section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("### 在 JupyterHub 上", 1)[1].split("\n### ", 1)[0]


def squeezed(text: str) -> str:
    """``text`` without whitespace: a sentence the terminal wrapped over several rows reads as written."""
    return re.sub(r"\s+", "", text)


def test_the_readme_and_the_makefile_say_what_the_hub_does() -> None:
    """The README's hub section: no sudo (as root), the hub's isolation sentence as the terminal prints it, how
    to release a changed module, how to clean up; `make hub-clean` is `hub --remove`; the full sandbox's command
    is one `pt2e-course grade` takes."""
    from autograder.cli import build_parser

    section = readme_hub_section()
    assert "sudo" not in section
    assert hub.ISOLATION in section
    for command in ("nbgrader generate_assignment M03 --force", "nbgrader release_assignment M03 --force"):
        assert command in section, command
    assert "make hub-clean" in section
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nhub-clean:", 1)[1].split("\n\n", 1)[0]
    assert "-m autograder.maintenance.hub --remove" in target, target
    executable, *args = hub.FULL_SANDBOX.split()
    assert executable == ".venv/bin/pt2e-course"
    parsed = build_parser().parse_args(args)
    assert (parsed.module, parsed.submitted) == ("M03", "hub/course/submitted")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[str, Path]]:
    base = Path(tempfile.mkdtemp(prefix="pt2e-hub-"))
    base.chmod(0o755)
    port = free_port()
    config = hub.prepare(port, hub=base, instructor=INSTRUCTOR, students=STUDENTS, profile=PROFILE)
    # the instructor's terminal read as a screen reader reads it (lab_browser.Terminal)
    settings_file, readable = TERMINAL_READABLE
    home = Path(pwd.getpwnam(INSTRUCTOR).pw_dir)
    settings = home / settings_file
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(readable, encoding="utf-8")
    subprocess.run(["chown", "-R", f"{INSTRUCTOR}:{INSTRUCTOR}", str(home / ".jupyter")], check=True)
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
        users = (INSTRUCTOR, *STUDENTS)
        homes = [Path(pwd.getpwnam(u).pw_dir) for u in users]
        deadline = time.monotonic() + 10
        while True:  # make hub-clean: what a SIGKILL ends is gone at once, its zombies are reaped meanwhile
            try:
                removed = hub.remove(base, users, PROFILE)
                break
            except SystemExit:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert not left, f"processes outlived the hub by 20 s: {left}"
        assert sorted(removed) == sorted(users)
        for user in users:
            with pytest.raises(KeyError):
                pwd.getpwnam(user)
        gone = [base, PROFILE, *homes]
        assert not [p for p in gone if p.exists()], [p for p in gone if p.exists()]


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


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The browser's screenshots of this run, copied to ``SHOTS_KEPT`` at the end."""
    folder = tmp_path_factory.mktemp("shots")
    yield folder
    SHOTS_KEPT.mkdir(exist_ok=True)
    for shot in sorted(folder.glob("*.png")):
        shutil.copy(shot, SHOTS_KEPT / shot.name)


@pytest.fixture(scope="module")
def teacher(running: tuple[str, Path], shots: Path) -> Iterator[tuple[Lab, Terminal]]:
    """The instructor logged in, in their browser, with a terminal opened from File > New > Terminal."""
    url, _ = running
    with Browser(width=1280, height=800, timeout=60) as browser:
        lab = Lab(browser, url, shots)
        lab.login(INSTRUCTOR, hub.instructor_password(running[1]))
        yield lab, lab.new_terminal()


def typed(terminal: Terminal, command: str, seconds: float = 300.0) -> str:
    """``command`` typed into the instructor's terminal: it must end well, and no tool may be missing."""
    status, shown = terminal.run(command, seconds)
    assert status == 0 and "command not found" not in shown, (command, status, shown[-3000:])
    return shown


@pytest.fixture(scope="module")
def released(running: tuple[str, Path], teacher: tuple[Lab, Terminal]) -> tuple[str, Path]:
    """The hub with M03 generated and released by the instructor, typing the README's commands into the terminal
    of their JupyterLab: it opens in the course, finds the course's tools and says what the hub's grading lacks."""
    url, base = running
    lab, terminal = teacher
    assert squeezed(hub.ISOLATION) in squeezed("".join(terminal.rows())), terminal.rows()
    assert terminal.wait_prompt() == str(base / "course"), "the terminal opens in the course"
    tools = typed(terminal, "command -v nbgrader pt2e-course python").splitlines()
    assert [str(Path(sys.executable).parent / t) for t in ("nbgrader", "pt2e-course", "python")] == tools[-3:], tools
    section = readme_hub_section()
    for command in ("nbgrader generate_assignment M03", "nbgrader release_assignment M03"):
        assert f"`{command}`" in section, command
        shown = typed(terminal, command)
        assert "Skipping existing assignment" not in shown, shown
    lab.shot("01-terminal")
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
    # make hub-clean refuses while the hub runs (the student's server is up), and leaves everything in place
    with pytest.raises(SystemExit, match="Ctrl-C"):
        hub.remove(base, (INSTRUCTOR, *STUDENTS), PROFILE)
    assert base.is_dir() and PROFILE.is_file() and home.is_dir()


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


def test_the_whole_cycle_in_a_browser(released, teacher: tuple[Lab, Terminal], shots: Path) -> None:
    """A student logs in, fetches M03 from the "作業" menu's Assignment List, types the two answers of M03-4, saves,
    runs every cell, validates and submits; the instructor types the README's collect and autograde into their
    terminal, sees the score in the formgrader, releases feedback from it and opens it; the student fetches the
    feedback and reads it."""
    url, base = released
    student, notebook = STUDENTS[1], "M03-4"
    typed_answers = answers(ROOT / "examples" / "submitted" / "full" / "M03" / f"{notebook}.ipynb")
    assert sorted(typed_answers) == ["add_quantizer", "cat_quantizer"], "the sample answer's cells"
    home = Path(pwd.getpwnam(student).pw_dir)
    saved_path = home / "M03" / f"{notebook}.ipynb"
    with Browser(width=1280, height=800, timeout=60) as browser:
        lab = Lab(browser, url, shots)
        # 1. the hub's login form; the student's JupyterLab
        lab.login(student, hub.PASSWORD)
        lab.shot("02-lab")
        # 2. 作業 > Assignment List: fetch M03, open M03-4 from the fetched list
        lab.menu("作業", "Assignment List")
        lab.click("#released_assignments_list button", "Fetch")
        lab.click("#fetched_assignments_list a.assignment-notebooks-link", "M03")
        lab.click("#fetched_assignments_list .nested_list_item a", notebook)
        lab.shot("03-fetched")
        lab.wait(
            "[...document.querySelectorAll('.jp-NotebookPanel-toolbar .jp-ToolbarButtonComponent-label')]"
            ".some(e => e.textContent.trim() === 'Validate')",
            60,
        )
        # 3. the answers typed into their cells, saved with Ctrl+S
        lab.replace_cell("class AddQuantizer(Quantizer)", typed_answers["add_quantizer"])
        lab.replace_cell("class CatQuantizer(Quantizer)", typed_answers["cat_quantizer"])
        lab.shot("04-typed")
        lab.save()
        assert answers(saved_path) == typed_answers, "the saved notebook holds the answers as typed"
        # 4. Run > Run All Cells; saved again, every code cell ran without an error; Validate passes
        lab.run_all()
        lab.shot("05-ran")
        lab.save()
        code = [c for c in nbformat.read(saved_path, as_version=4).cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), [c.execution_count for c in code]
        errors = [o.get("ename") for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, errors
        lab.click(".jp-NotebookPanel-toolbar .jp-ToolbarButtonComponent", "Validate")
        validation = lab.dialog(300)
        lab.shot("06-validated")
        assert "Success! Your notebook passes all the tests." in validation, validation
        lab.close_dialog()
        # 5. Submit from the Assignment List: the exchange's inbound has it
        lab.click(".lm-DockPanel-tabBar .lm-TabBar-tab", "Assignments")
        lab.click("#fetched_assignments_list button", "Submit")
        lab.wait("document.querySelector('#submitted_assignments_list').innerText.includes('Fetch Feedback')", 60)
        lab.shot("07-submitted")
        inbound = base / "exchange" / hub.COURSE_ID / "inbound"
        assert [p.name.split("+")[1] for p in inbound.glob(f"{student}+*")] == ["M03"]

        # 6. the instructor types the README's collect and autograde (one student's) into their terminal
        teacher_lab, terminal = teacher
        section = readme_hub_section()
        grade_one = f"nbgrader autograde M03 --student={hub.STUDENTS[0]}"
        assert "`nbgrader collect M03`" in section and f"`{grade_one}`" in section
        typed(terminal, "nbgrader collect M03")
        graded = typed(terminal, grade_one.replace(hub.STUDENTS[0], student), 600)
        teacher_lab.shot("08-terminal-autograde")
        # what hub.ISOLATION says the hub's grading lacks is what the sandbox printed here
        assert squeezed(confine.OWN_USER) in squeezed(graded), graded[-3000:]
        assert squeezed(memory.MEMORY_SUM) in squeezed(graded), graded[-3000:]
        earned = points(SOURCE / "M03" / f"{notebook}.ipynb")
        total = sum(points(p) for p in sorted((SOURCE / "M03").glob("M03-*.ipynb")))
        assert 0 < earned < total
        instructor_browser = teacher_lab.browser
        instructor_browser.open(f"{url}/user/{INSTRUCTOR}/formgrader")
        teacher_lab.click("tr:has(td.name[data-order='M03']) td.num-submissions a")  # Manage Assignments: M03's
        teacher_lab.wait("location.pathname.endsWith('/formgrader/manage_submissions/M03')")
        row = f"[...document.querySelectorAll('tbody tr')].find(r => r.innerText.includes({student!r}))"
        score = teacher_lab.wait(f"{row} && {row}.querySelector('.score').innerText.trim()")
        teacher_lab.shot("09-formgrader")
        listed = teacher_lab.wait(f"{row} && {row}.innerText")
        assert "None" not in listed and student.removeprefix("pt2e-").capitalize() in listed, listed  # enrolled
        # only M03-4 was answered: the student earned its points, out of the module's
        assert score == f"{formgrader_number(earned)} / {formgrader_number(total)}", score
        for button, said in (("generate-feedback", "generated"), ("release-feedback", "released")):
            teacher_lab.click(f"tr:has(td.student-id[data-order={student!r}]) td.{button} a")
            answer = teacher_lab.modal()
            assert answer.startswith("success-modal") and f"Successfully {said} feedback" in answer, answer
            teacher_lab.close_modal()
        teacher_lab.shot("10-feedback-released")
        # the instructor opens the feedback the student will read (the course is the server's root)
        instructor_browser.open(f"{url}/user/{INSTRUCTOR}/files/feedback/{student}/M03/{notebook}.html")
        read_by_teacher = teacher_lab.text()
        teacher_lab.shot("11-teacher-feedback")
        assert_course_page(read_by_teacher, notebook, student, earned)

        # the student fetches the feedback from the Assignment List, opens "(view feedback)": the file browser
        # shows the fetched folder, where the notebook's page opens in JupyterLab's HTML viewer
        lab.click("#submitted_assignments_list button", "Fetch Feedback")
        lab.wait("document.querySelector('#submitted_assignments_list').innerText.includes('(view feedback)')", 60)
        lab.shot("12-feedback-fetched")
        feedback = list(home.glob(f"M03/feedback/*/{notebook}.html"))
        assert len(feedback) == 1, sorted(str(p) for p in home.glob("M03/feedback/**/*"))
        assert pwd.getpwuid(feedback[0].stat().st_uid).pw_name == student, "fetched as the student"
        lab.click("#submitted_assignments_list a", "(view feedback)")
        listing = ".jp-FileBrowser .jp-DirListing-item .jp-DirListing-itemText"
        lab.wait(f"!!{lab.find(listing, f'{notebook}.html')}", 60)
        crumbs = lab.text(".jp-FileBrowser .jp-BreadCrumbs")
        assert feedback[0].parent.name in crumbs, f"the feedback's folder ({feedback[0].parent}): {crumbs}"
        double_click(lab, listing, f"{notebook}.html")
        frame = (
            "[...document.querySelectorAll('.jp-HTMLViewer iframe')]"
            ".map(f => f.contentDocument).find(d => d && d.querySelector('nav.summary'))"
        )
        lab.wait(f"!!({frame})", 60)
        page = lab.browser.evaluate(f"({frame}).body.innerText")
        lab.shot("13-feedback")
        assert_course_page(page, notebook, student, earned)
        assert page.index("都拿到滿分") < page.index("各題的回饋"), "the summary is on top"
        assert "Traceback (most recent call last)" not in page


def assert_course_page(text: str, notebook: str, student: str, earned: float) -> None:
    """``text`` (a page's shown text) is the course's feedback page of ``notebook``, with full marks: its title,
    its score, the summary, each exercise; no cell of the notebook (setup code, hidden tests)."""
    assert f"{notebook} 評分回饋：{student}" in text, text[:500]
    assert f"分數 {formgrader_number(earned)} / {formgrader_number(earned)}" in text, text[:500]
    assert "都拿到滿分" in text and "練習「" in text, text[:1000]
    for secret in ("BEGIN HIDDEN TESTS", "def test_", "pip install", "_pt2e_colab_setup", "In\u00a0[", "In ["):
        assert secret not in text, secret


def double_click(lab: Lab, selector: str, text: str) -> None:
    """Two clicks in a row on the element (``Lab.find``), as a mouse sends them (the second with clickCount 2)."""
    element = lab.find(selector, text)
    lab.wait(f"(() => {{ const e = {element}; return !!e && e.getBoundingClientRect().width > 0 }})()")
    x, y = lab.browser.evaluate(
        f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'center'}});"
        " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2] })()"
    )
    lab.browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    for count in (1, 2):
        for kind in ("mousePressed", "mouseReleased"):
            lab.browser.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": count}
            )
