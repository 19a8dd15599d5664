"""The demo JupyterHub of ``make hub``: students log in, get their own server as their own user, and fetch
and submit M03 through the Assignments tab's API; the instructor releases through nbgrader's exchange.

The rest of nbgrader's cycle (collect, autograde, feedback) is ``tests/test_exchange.py``'s, on the same
exchange layout. Needs root (the demo's local users), as ``make hub`` does; CI runs as root.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

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
        time.sleep(1)
        left = subprocess.run(["pgrep", "-f", str(base)], capture_output=True, text=True).stdout.split()
        for user in STUDENTS:
            left += subprocess.run(["pgrep", "-u", user], capture_output=True, text=True).stdout.split()
        for pid in left:  # never leave a process behind, even when the assertion below fails
            subprocess.run(["kill", pid], capture_output=True)
        for user in (INSTRUCTOR, *STUDENTS):
            subprocess.run([shutil.which("userdel") or "/usr/sbin/userdel", "--remove", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"processes outlived the hub: {left}"


def login(url: str, user: str) -> tuple[requests.Session, str]:
    """Log in through the hub's form, wait for the user's own server; returns the session and its xsrf token."""
    session = requests.Session()
    session.get(f"{url}/hub/login", timeout=30)
    xsrf = next(c.value for c in session.cookies if c.name == "_xsrf")
    form = {"username": user, "password": hub.PASSWORD, "_xsrf": xsrf}
    assert session.post(f"{url}/hub/login", data=form, timeout=180).status_code == 200
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


def test_a_student_logs_in_fetches_and_submits_through_the_hub(running) -> None:
    url, base = running
    student = STUDENTS[0]
    session, xsrf = login(url, student)
    # a student's lab: the Assignments tab and Validate, not the instructor's tools
    page = session.get(f"{url}/user/{student}/lab", timeout=30).text
    disabled = page.split("disabledExtensions", 1)[1].split("]", 1)[0]
    assert "@jupyter/nbgrader:menu" in disabled and "@jupyter/nbgrader:create-assignment" in disabled
    assert "assignment-list" not in disabled and "validate-assignment" not in disabled
    assert session.get(f"{url}/user/{student}/formgrader", timeout=30).status_code == 404
    for step in (("generate_assignment", "M03", "--force"), ("release_assignment", "M03", "--force")):
        done = as_instructor(base, *step)
        assert done.returncode == 0, done.stderr[-3000:]
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
    assert [p.name.split("+")[:2] for p in inbound.iterdir()] == [[student, "M03"]]
    # the other student can neither list the inbound nor read the first student's home
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    for target in (inbound, home):
        peek = subprocess.run([runuser, "-u", STUDENTS[1], "--", "ls", str(target)], capture_output=True, text=True)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, (target, peek.stdout)
