"""The sandbox isolates each job, and says truthfully which measures it could not apply.

Each job here is a few cells of plain Python run by the real fork server (no notebook, no
grading), so a test costs a fraction of a second. A probe cell writes what it sees as an
extra frame on the job's pipe (the parent rejects it, but the test reads the raw frames).
The same probes run in four modes: as this machine allows (bubblewrap where it can), and
with the fallbacks forced: no bubblewrap; no bubblewrap and no CAP_SYS_ADMIN (a container;
an unprivileged user namespace takes over); and no namespaces at all. In every mode, each
measure is either observed in force or named in ``sandbox.missing``.

The protocol checks (frames, order, bounds) and the reading of untrusted files are tested
without a sandbox.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, processes_of

from autograder.engine import sandbox as sb
from autograder.engine.grading import RunOutcome, read_outcome
from autograder.engine.submission import UnreadableNotebook, find_notebooks, read_untrusted, scan_notebooks
from autograder.sandboxed import confine, memory, protocol
from autograder.sandboxed.limits import Limits
from autograder.sandboxed.runner import Cell, Job
from common.data import one_thread

LIMITS = Limits(cell_seconds=20, notebook_seconds=30, tmp_mb=16, file_mb=64)

MODES = {
    "machine": set(),
    "no-bwrap": {"bwrap"},
    "container": {"bwrap", "sys_admin"},
    "no-namespaces": {"bwrap", "sys_admin", "userns"},
}

pytestmark = pytest.mark.xdist_group("isolation")  # the sandboxes of each mode start once, on one worker

REPORT = """
import json, os, struct
def report(**data):
    body = json.dumps({"type": "probe", **data}).encode()
    os.write(3, struct.pack(">I", len(body)) + body)
"""


@pytest.fixture(scope="module", params=list(MODES))
def sandbox(request: pytest.FixtureRequest):
    box = sb.Sandbox(disable=MODES[request.param])
    box.start()
    yield box
    box.stop()


@pytest.fixture(scope="module")
def machine() -> sb.Sandbox:
    """The grading run's own sandbox, as this machine allows."""
    return sb.default_sandbox()


def run(box: sb.Sandbox, *sources: str, limits: Limits = LIMITS) -> sb.Run:
    cells = tuple(Cell("code", source, f"c{i}") for i, source in enumerate(sources))
    return sb.run_job(Job("", cells, 0, limits), box)


def probes(result: sb.Run) -> dict:
    found = {}
    for data in result.read.frames:
        message = json.loads(data)
        if message.get("type") == "probe":
            found.update(message)
    return found


def errors(result: sb.Run) -> list[str]:
    return [m["error"] for m in result.conversation.messages if m["type"] == "cell"]


def work_folders() -> set[str]:
    """The sandbox's work folders in the real /tmp (``pt2e-submission-<job>-<token>``)."""
    return {
        p.name
        for p in Path("/tmp").glob("pt2e-submission-*")
        if re.fullmatch(r"pt2e-submission-\d+-[0-9a-f]{16}", p.name)
    }


# --- what a job can see -----------------------------------------------------------------------------

SECRETS = ["source", "release", "autograder/keys", "autograder/checks", "tests", "examples", ".git"]

SEES = """
import importlib, os
def imports(name):
    try:
        importlib.import_module(name)
        return True
    except Exception:
        return False
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None
def readable(path):
    try:
        with open(path, "rb") as handle:
            return len(handle.read(10)) > 0
    except OSError:
        return False
report(
    imports={name: imports(name) for name in NAMES},
    listings={path: listing(os.path.join(ROOT, path)) for path in SECRETS},
    key_file=readable(os.path.join(ROOT, "autograder", "keys", "m03_4.py")),
    root=listing(ROOT),
)
"""


def test_no_answer_key_hidden_check_or_course_file_is_reachable(sandbox: sb.Sandbox) -> None:
    names = [
        "autograder.keys.m03_4",
        "autograder.checks.test_m03_4",
        "autograder.checks.support",
        "autograder.engine.grading",
        "autograder.sandboxed.cases.m03_4",  # what must be there: the test could fail
        "selfcheck.evidence",
        "common.pt2e",
    ]
    context = f"ROOT = {str(ROOT)!r}\nNAMES = {names!r}\nSECRETS = {SECRETS!r}\n"
    seen = probes(run(sandbox, REPORT + context + SEES))
    if confine.HIDDEN in sandbox.missing:  # no mount namespace: the report must say so, and it does
        assert seen["imports"]["autograder.sandboxed.cases.m03_4"]
        return
    assert seen["imports"] == {name: name.startswith(("autograder.sandboxed", "selfcheck", "common")) for name in names}
    assert not seen["key_file"]
    assert all(not entries for entries in seen["listings"].values()), seen["listings"]
    if sandbox.in_bwrap:
        assert set(seen["root"]) <= {"common", "selfcheck", "autograder", ".venv"}, seen["root"]
        attempt = "try:\n    import autograder.keys\n    imported = True\nexcept ImportError:\n    imported = False\n"
        attempt += (
            "import importlib.util\nreport(imported=imported, spec=repr(importlib.util.find_spec('autograder.checks')))"
        )
        assert probes(run(sandbox, REPORT + attempt)) == {"type": "probe", "imported": False, "spec": "None"}


PROBE = """
import os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
def fstype(path):
    best, kind = "", ""
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        target = fields[4]
        if (path == target or path.startswith(target.rstrip("/") + "/")) and len(target) >= len(best):
            best, kind = target, fields[fields.index("-") + 1]
    return [best, kind]
def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
def writable(folder):
    try:
        path = os.path.join(folder, "pt2e-probe")
        with open(path, "w") as handle:
            handle.write("x")
        os.unlink(path)
        return True
    except OSError:
        return False
try:
    os.kill(GRADER, 0)
    grader = "visible"
except ProcessLookupError:
    grader = "absent"
except PermissionError:
    grader = "denied"
report(
    uid=os.getuid(),
    pid=os.getpid(),
    pids=sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:20],
    cap_eff=int(status["CapEff"], 16),
    cap_bnd=int(status["CapBnd"], 16),
    no_new_privs=int(status["NoNewPrivs"]),
    mounts={p: fstype(p) for p in ("/tmp", "/var/tmp", "/dev/shm")},
    network=connects(PORT),
    grader=grader,
    writes={p: writable(p) for p in WRITE},
    cwd=os.getcwd(),
)
"""


@pytest.fixture(scope="module")
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


def test_two_grading_runs_at_once_give_their_jobs_other_users(
    sandbox: sb.Sandbox, without_cgroup: sb.Sandbox, listener: int
) -> None:
    """Each server numbers its jobs from 0; their users differ all the same (``confine.SERVER_SLOT``), so a job
    of one run cannot signal one of the other's, nor be killed with it."""
    if confine.OWN_USER in sandbox.missing or confine.OWN_USER in without_cgroup.missing:
        assert os.getuid() != 0, "as root every job gets its own user"
        return
    write = [str(ROOT), sys.prefix, "/usr/lib", "/etc"]
    context = f"GRADER = {os.getpid()}\nPORT = {listener}\nWRITE = {write!r}\n"
    uids = {box: probes(run(box, REPORT + context + PROBE))["uid"] for box in (sandbox, without_cgroup)}
    assert uids[sandbox] != uids[without_cgroup]


def test_each_measure_is_in_force_or_named(sandbox: sb.Sandbox, listener: int) -> None:
    write = [str(ROOT), sys.prefix, "/usr/lib", "/etc"]
    context = f"GRADER = {os.getpid()}\nPORT = {listener}\nWRITE = {write!r}\n"
    first, second = (probes(run(sandbox, REPORT + context + PROBE)) for _ in range(2))
    missing = set(sandbox.missing)
    assert first["cap_eff"] == 0 or confine.NO_CAPS in missing
    assert first["no_new_privs"] == 1 or confine.NO_NEW_PRIVS in missing
    assert first["cwd"].startswith("/tmp/pt2e-submission-")
    if confine.OWN_USER not in missing:
        assert first["uid"] >= confine.JOB_UID_BASE and second["uid"] >= confine.JOB_UID_BASE
        assert first["uid"] != second["uid"], "no two jobs share a user"
        assert first["grader"] != "visible", "a job can signal the grader"
    if confine.PID_NS not in missing:
        assert first["pid"] == 1 and first["grader"] == "absent"
    if confine.OWN_PROC not in missing:
        assert first["pids"] == [1], "the job sees processes other than its own"
    if confine.NET_NS not in missing:
        assert not first["network"], "the job reached the grader's loopback"
    if confine.PRIVATE_TMP not in missing:
        assert all(kind == "tmpfs" and target == path for path, (target, kind) in first["mounts"].items())
    if confine.BWRAP not in missing or confine.READ_ONLY not in missing:
        assert not any(first["writes"].values()), first["writes"]
    if os.geteuid() == 0 and shutil.which("bwrap") and confine.has_capability(confine.CAP_SYS_ADMIN):
        expected = {"machine": set(), "no-bwrap": {confine.BWRAP}, "container": {confine.BWRAP}}
        mode = next(m for m, off in MODES.items() if off == sandbox.disable)
        if mode in expected:
            assert missing == expected[mode], "on a root machine with bubblewrap, every other measure applies"
        else:
            assert {confine.PID_NS, confine.PRIVATE_TMP, confine.HIDDEN, confine.BWRAP} <= missing


TEMP = """
import os
written = {}
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    total = 0
    try:
        for n in range(64):
            with open(os.path.join(folder, f"{MARK}-{n}"), "wb") as handle:
                for _ in range(8):
                    handle.write(b"x" * 1024 * 1024)
                    total += 1
    except OSError:
        pass
    written[folder] = total
report(written=written)
"""


def test_temporary_folders_are_private_capped_and_gone(sandbox: sb.Sandbox) -> None:
    mark = f"pt2e-isolation-{os.getpid()}-{time.monotonic_ns()}"
    before = work_folders()
    result = run(sandbox, REPORT + f"MARK = {mark!r}\n" + TEMP)
    written = probes(result)["written"]
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        left = list(Path(folder).glob(f"{mark}-*"))
        for path in left:
            path.unlink()
        assert not left, f"{folder} kept what a job wrote"
        if confine.PRIVATE_TMP not in sandbox.missing:
            assert written[folder] <= LIMITS.tmp_mb, f"{folder} holds more than its cap"
    assert work_folders() <= before, "a work folder was left behind"


DAEMON = """
import os, signal, subprocess, time
read, write = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, signal.SIG_IGN)
        os.write(write, b"up")
        while True:
            time.sleep(0.05)
    os._exit(0)
os.waitpid(child, 0)
os.read(read, 2)
subprocess.Popen(["sleep", "600"], start_new_session=True)
report(uid=os.getuid())
"""


def test_no_process_outlives_its_job(sandbox: sb.Sandbox) -> None:
    result = run(sandbox, REPORT + DAEMON)
    uid = probes(result)["uid"]
    assert uid >= confine.JOB_UID_BASE or confine.OWN_USER in sandbox.missing
    deadline = time.monotonic() + 5
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_of(uid), "a daemon or subprocess survived its job"


KILLER = """
import os, signal
for _ in range(3):
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
def own_session(pid):  # its own job's processes: killing them only ends itself
    try:
        return os.getsid(pid) == os.getsid(0)
    except OSError:
        return True
for pid in range(2, 4096):
    if pid != os.getpid() and not own_session(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


def test_no_job_can_kill_another(sandbox: sb.Sandbox) -> None:
    if confine.OWN_USER in sandbox.missing and confine.PID_NS in sandbox.missing:
        pytest.fail("neither a user nor a pid namespace of its own: a job could kill the grader")
    outcome: dict[str, sb.Run] = {}
    victim = threading.Thread(target=lambda: outcome.update(victim=run(sandbox, "import time\ntime.sleep(6)")))
    victim.start()
    time.sleep(2)
    killer = run(sandbox, KILLER, "x = 1")
    victim.join()
    assert killer.conversation.done and not errors(killer), "the killer killed itself"
    assert outcome["victim"].conversation.done and outcome["victim"].how == "exit 0", "the other job was killed"


def test_a_partial_frame_with_alarms_ignored_cannot_hang_the_grader(machine: sb.Sandbox) -> None:
    stall = "import os, signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    stall += "os.write(3, b'\\x00\\x00\\x10\\x00abc')\ntime.sleep(1000)"
    start = time.monotonic()
    result = run(machine, stall, limits=Limits(cell_seconds=1, notebook_seconds=3))
    assert time.monotonic() - start < 3 + 10
    assert result.how == "timeout" and result.read.partial > 0 and not result.conversation.done


def test_a_job_that_closes_its_pipe_is_stopped_and_named(machine: sb.Sandbox) -> None:
    from autograder.engine.grading import ENDINGS, run_sandboxed

    limits = Limits(cell_seconds=60, notebook_seconds=60)
    cells = (Cell("code", "import os, time\nos.close(3)\ntime.sleep(60)", "c0"),)
    start = time.monotonic()
    outcome = run_sandboxed(Job("", cells, 0, limits), limits)
    assert outcome.ended == "closed" and "通道" in ENDINGS["closed"]
    assert time.monotonic() - start < 20, "the job was left running after it hung up"


def test_a_server_that_died_is_replaced(machine: sb.Sandbox) -> None:
    assert machine.process is not None and machine.control is not None
    machine.process.kill()
    machine.process.wait()
    # under bubblewrap the server inside dies with it a moment later (--die-with-parent): wait until it hung
    # up, or a loaded machine hands the next job to a server in its last milliseconds (a race, not a replacement)
    readable, _, _ = select.select([machine.control], [], [], 30)
    assert readable and machine.control.recv(1, socket.MSG_PEEK) == b"", "the server inside is still there"
    result = run(machine, "x = 1")
    assert result.conversation.done and machine.process.poll() is None


def _silent_ticket(generation: int) -> sb.Ticket:
    """What the grader holds for a job that server ``generation`` took and that ended before it said anything:
    a pipe at its end, no status."""
    frames, writer = os.pipe()
    os.close(writer)
    status, other = socket.socketpair()
    other.close()
    return sb.Ticket(0, frames, status, generation)


@pytest.mark.parametrize("server", ["dies", "lives", "replaced"])
def test_a_job_handed_to_a_dying_server_runs_again_on_a_new_one(
    machine: sb.Sandbox, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """The race the test above waits out: the server takes the job and dies before the job says anything.
    The job runs again, once, on a new server, also when another thread's job replaced the dead server
    first; a silent job of a server that lives is not run again."""
    real_submit, generations = machine.submit, []

    def submit(job: Job) -> sb.Ticket:
        if not job.cells:  # a new server's probe
            return real_submit(job)
        generations.append(machine.generation)
        if len(generations) > 1:
            return real_submit(job)
        if server != "lives":
            assert machine.process is not None and machine.control is not None
            machine.process.kill()
            machine.process.wait()
            assert select.select([machine.control], [], [], 30)[0], "the server inside hung up"
        took = machine.generation
        if server == "replaced":  # another thread's job found it dead and started a new one
            machine.restart(took)
        return _silent_ticket(took)

    monkeypatch.setattr(machine, "submit", submit)
    result = run(machine, "x = 1")
    if server != "lives":
        assert generations[1] == generations[0] + 1 and result.conversation.done
    else:
        assert generations == [machine.generation] and not result.conversation.done
        assert result.read.ended == "eof" and not result.read.frames


def test_the_missing_measures_reach_the_feedback(tmp_path: Path) -> None:
    from submissions import solved, write

    from autograder.engine.grading import grade_notebook

    box = sb.Sandbox(disable={"bwrap"})
    box.start()
    previous = sb.use_sandbox(box)
    try:
        path = tmp_path / "M03-4.ipynb"
        write(solved("M03-4"), path)
        result = grade_notebook("M03-4", path, 0, Limits(notebook_seconds=120))
    finally:
        sb.use_sandbox(previous)
        box.stop()
    assert result.score == result.max_score > 0
    assert any(confine.BWRAP in note and "無法套用" in note for note in result.instructor_notes)


# --- the protocol, without a sandbox ----------------------------------------------------------------

PLAN = [("code", None), ("collect", "a"), ("code", None), ("collect", "b")]


def talk(*messages: object) -> sb.Conversation:
    """Feed ``messages`` as the runner would frame them (this protocol's version added to each dict)."""
    conversation = sb.Conversation(PLAN)
    for message in messages:
        if isinstance(message, dict):
            message = json.dumps({"v": protocol.VERSION, **message}).encode()
        conversation.feed(message)
    return conversation


START = {"type": "start", "unconfined": []}


def evidence(index: int, exercise: str) -> dict:
    return {"type": "evidence", "index": index, "exercise": exercise, "data": {"cases": {}}}


def test_messages_in_the_runners_order_are_accepted() -> None:
    done = {"type": "done", "index": 4, "output_dropped": 0}
    conversation = talk(START, {"type": "cell", "index": 0, "error": "x"}, evidence(1, "a"), evidence(3, "b"), done)
    assert conversation.done and not conversation.rejected and not conversation.garbage
    assert [m["type"] for m in conversation.messages] == ["start", "cell", "evidence", "evidence", "done"]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([evidence(1, "a"), START], "before_start"),
        ([START, START], "second_start"),
        ([START, evidence(3, "b"), evidence(1, "a")], "out_of_order"),
        ([START, evidence(1, "b")], "out_of_order"),
        ([START, {"type": "cell", "index": 1}], "out_of_order"),
        ([START, {"type": "done", "index": 2}], "out_of_order"),
        ([START, {"type": "done", "index": 4}, evidence(1, "a")], "early_done"),
        ([START, {"type": "hello"}], "unknown"),
    ],
)
def test_a_message_that_does_not_fit_is_rejected(messages: list, reason: str) -> None:
    conversation = talk(*messages)
    assert conversation.rejected[reason] >= 1
    assert all(m["type"] == "start" for m in conversation.messages[:1])


def test_only_a_done_that_ends_the_frames_counts() -> None:
    done = {"type": "done", "index": 4, "output_dropped": 0}
    conversation = talk(START, done, evidence(1, "a"), {"type": "cell", "index": 2, "error": "x"})
    assert not conversation.done and conversation.rejected == {"early_done": 1}
    assert [m["type"] for m in conversation.messages] == ["start", "evidence", "cell"]
    conversation.feed(json.dumps({"v": protocol.VERSION, **done}).encode())
    assert conversation.done


def test_a_message_of_another_protocol_version_is_not_used() -> None:
    old = json.dumps({**START, "v": protocol.VERSION - 1}).encode()
    conversation = talk(old, START, json.dumps({**evidence(1, "a"), "v": 1}).encode())
    assert conversation.garbage == 2 and [m["type"] for m in conversation.messages] == ["start"]


def test_every_evidence_for_an_exercise_is_counted() -> None:
    conversation = talk(START, evidence(1, "a"), evidence(1, "a"), evidence(3, "a"), b"\xff", b"[1]", b"{}")
    assert conversation.evidence_count["a"] == 3 and conversation.garbage == 3


def pipe_with(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def test_frames_are_read_with_bounds_and_a_deadline() -> None:
    good = protocol.encode(protocol.message(protocol.START, unconfined=[]))
    read = sb.read_frames(pipe_with(good * 3), time.monotonic() + 5, max_frames=10)
    assert read.ended == "eof" and len(read.frames) == 3 and read.partial == 0
    assert sb.read_frames(pipe_with(good * 3), time.monotonic() + 5, max_frames=2).ended == "flood"
    huge = struct.pack(">I", 100_000) + b"x" * 10
    assert sb.read_frames(pipe_with(huge), time.monotonic() + 5, max_frames=9, max_frame_bytes=1000).ended == "flood"
    assert (
        sb.read_frames(pipe_with(good * 9), time.monotonic() + 5, max_frames=99, max_total=len(good)).ended == "flood"
    )
    read_end, write_end = os.pipe()
    os.write(write_end, good + good[:7])  # a frame and a half, and the writer stays
    start = time.monotonic()
    stalled = sb.read_frames(read_end, time.monotonic() + 1, max_frames=9)
    assert stalled.ended == "deadline" and stalled.partial == 7 and len(stalled.frames) == 1
    assert time.monotonic() - start < 3
    os.close(read_end)
    os.close(write_end)


def test_feedback_from_a_flood_of_bad_messages_and_errors_is_bounded() -> None:
    from autograder.engine.grading import CELL_ERROR_CHARS, MAX_CELL_ERRORS, STUDENT_TEXT_CHARS, NotebookResult

    cells = [{"type": "cell", "index": i, "label": "L" * 500, "error": "E" * 5000} for i in range(500)]
    outcome = RunOutcome(messages=[START, *cells], ended="done", malformed=10_000, out_of_order=90_000)
    result = NotebookResult("M03-4", "M03-4.ipynb")
    read_outcome(outcome, result, LIMITS)
    assert len(result.cell_errors) <= MAX_CELL_ERRORS + 1
    assert all(len(e) <= CELL_ERROR_CHARS for e in result.cell_errors)
    assert sum(len(e) for e in result.cell_errors) <= STUDENT_TEXT_CHARS + 100
    assert len(result.tampering) == 1 and "100000" in result.tampering[0]


# --- untrusted files --------------------------------------------------------------------------------


def test_untrusted_files_are_read_without_following_or_blocking(tmp_path: Path) -> None:
    regular = tmp_path / "a.ipynb"
    regular.write_bytes(b"x" * 5000)
    assert read_untrusted(regular) == b"x" * 5000
    with pytest.raises(UnreadableNotebook, match="上限"):
        read_untrusted(regular, limit=1000)
    sparse = tmp_path / "sparse.ipynb"
    with sparse.open("wb") as handle:
        handle.truncate(50 * 1024**3)
    start = time.monotonic()
    with pytest.raises(UnreadableNotebook, match="上限"):
        read_untrusted(sparse)
    assert time.monotonic() - start < 5
    (tmp_path / "link.ipynb").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.ipynb")
    (tmp_path / "folder.ipynb").mkdir()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "sock.ipynb"))
    for name, phrase in [("link", "捷徑"), ("fifo", "一般檔案"), ("folder", "一般檔案"), ("sock", "一般檔案")]:
        with pytest.raises(UnreadableNotebook, match=phrase):
            read_untrusted(tmp_path / f"{name}.ipynb")
    unix.close()


def test_finding_notebooks_survives_deep_folders_and_refuses_odd_entries(tmp_path: Path) -> None:
    folder = tmp_path / "student" / "M03"
    folder.mkdir(parents=True)
    (nested(folder, 1500) / "M03-2.ipynb").write_text("{}")
    try:
        check_refusals(folder, tmp_path)
    finally:
        remove_nested(folder)  # pytest's own cleanup would recurse too deep


def check_refusals(folder: Path, tmp_path: Path) -> None:
    (folder / "M03-1.ipynb").mkdir()
    os.mkfifo(folder / "M03-3.ipynb")
    (folder / "M03-4.ipynb").symlink_to(ROOT / "source" / "M03" / "M03-4.ipynb")
    start = time.monotonic()
    files, refused = scan_notebooks(folder)
    assert time.monotonic() - start < 10
    assert files == [] and {name for name, _ in refused} == {"M03-1.ipynb", "M03-3.ipynb", "M03-4.ipynb", ""}
    found, notes = find_notebooks(folder, "M03")
    assert not any(found.values())
    assert "資料夾" in " ".join(notes["M03-1"]) and "FIFO" in " ".join(notes["M03-3"])
    assert "捷徑" in " ".join(notes["M03-4"])
    linked = tmp_path / "linked" / "M03"
    linked.parent.mkdir()
    linked.symlink_to(ROOT / "source" / "M03")
    found, notes = find_notebooks(linked, "M03")
    assert not any(found.values()) and all("捷徑" in " ".join(n) for n in notes.values())


def nested(folder: Path, depth: int) -> Path:
    """``folder/d/d/…/d`` ``depth`` levels deep (pathlib and os.makedirs would recurse too deep)."""
    for _ in range(depth):
        folder = folder / "d"
        os.mkdir(folder)
    return folder


def remove_nested(folder: Path) -> None:
    """Remove what ``nested`` made, deepest first, without recursion."""
    chain = [folder / "d"]
    while (chain[-1] / "d").is_dir():
        chain.append(chain[-1] / "d")
    for path in reversed(chain):
        for entry in path.iterdir():
            if not entry.is_dir():
                entry.unlink()
        path.rmdir()


def test_a_job_computes_on_one_thread_and_its_convolutions_do_not_hang(machine: sb.Sandbox) -> None:
    """Jobs run side by side, one intra-op thread each, forked from a warmed-up server.

    A server whose warm-up had started OpenMP's thread pool would hand every forked job a pool
    it cannot use: the conv below would hang until the cell's time limit. The trusted side,
    also on one thread, computes the same sum to the last bit.
    """
    code = REPORT + (
        "import torch\n"
        "torch.manual_seed(3)\n"
        "conv = torch.nn.Conv2d(8, 16, 3)\n"
        "y = conv(torch.randn(4, 8, 32, 32))\n"
        "report(threads=torch.get_num_threads(), total=float(y.double().sum()))\n"
    )
    limits = Limits(cell_seconds=30, notebook_seconds=60)
    result = run(machine, code, limits=limits)
    found = probes(result)
    assert not errors(result) and found, errors(result) or "the job reported nothing"
    assert found["threads"] == 1
    with torch.random.fork_rng():
        torch.manual_seed(3)
        conv = torch.nn.Conv2d(8, 16, 3)
        with one_thread(), torch.no_grad():
            expected = float(conv(torch.randn(4, 8, 32, 32)).double().sum())
    assert found["total"] == expected, "the trusted side on one thread computes the sandbox's numbers"


# --- one memory limit for all the processes of a job (issue 18.4) -----------------------------------

SPREAD = """
import os, time
for _ in range(3):  # three processes, each well under the limit, together over it
    if os.fork() == 0:
        block = bytearray(450 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(60)
        os._exit(0)
time.sleep(60)
"""


@pytest.fixture(scope="module")
def without_cgroup() -> sb.Sandbox:
    """A sandbox that may not make cgroups: the middle process adds the job's memory up instead."""
    box = sb.Sandbox(disable={"cgroup"})
    box.start()
    yield box
    box.stop()


@pytest.mark.parametrize("mode", ["cgroup", "sum"])
def test_a_job_cannot_hold_more_than_its_limit_in_several_processes(
    mode: str, machine: sb.Sandbox, without_cgroup: sb.Sandbox
) -> None:
    box = machine if mode == "cgroup" else without_cgroup
    if mode == "cgroup":
        assert box.cgroup is not None, "this machine allows a memory cgroup: the grader must use it"
    assert box.memory_mode == (memory.MEMORY_CGROUP if mode == "cgroup" else memory.MEMORY_SUM)
    limits = Limits(cell_seconds=120, notebook_seconds=120, memory_mb=1024)
    started = time.monotonic()
    result = run(box, SPREAD, limits=limits)
    assert result.how == "memory", f"{mode}: the job ended as {result.how!r}, not stopped for its memory"
    assert time.monotonic() - started < 50, "stopped as soon as it went over, not at the notebook's deadline"


def test_the_run_cgroup_is_removed_with_the_sandbox() -> None:
    box = sb.Sandbox()
    box.start()
    folder = box.cgroup.root if box.cgroup is not None else None
    run(box, "x = 1")
    box.stop()
    assert folder is None or not folder.exists()


def cgroup_like(folder: Path, procs: list[int], controllers: str = "cpu memory pids") -> Path:
    """A folder with the files ``_enable_memory_below`` reads and writes in a cgroup v2 directory."""
    folder.mkdir()
    (folder / "cgroup.controllers").write_text(controllers + "\n")
    (folder / "cgroup.subtree_control").write_text("\n")
    (folder / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in procs))
    return folder


def test_a_grader_alone_in_a_delegated_cgroup_moves_into_a_leaf_and_passes_memory_on(tmp_path: Path) -> None:
    own = cgroup_like(tmp_path / "scope", [os.getpid()])
    memory._enable_memory_below(own)
    leaf = own / f"pt2e-grading-{os.getpid()}-grader"
    assert (leaf / "cgroup.procs").read_text() == str(os.getpid()), "the grader moves into a leaf of its own"
    assert (own / "cgroup.subtree_control").read_text() == "+memory", "then memory is enabled below its cgroup"


@pytest.mark.parametrize("case", ["shared with another process", "memory not offered", "memory already passed on"])
def test_the_grader_changes_no_cgroup_it_does_not_own_alone(tmp_path: Path, case: str) -> None:
    procs = [os.getpid(), 1] if case == "shared with another process" else [os.getpid()]
    own = cgroup_like(tmp_path / "scope", procs, "cpu pids" if case == "memory not offered" else "cpu memory pids")
    if case == "memory already passed on":
        (own / "cgroup.subtree_control").write_text("memory\n")
    before = {path.name: path.read_text() for path in own.iterdir()}
    memory._enable_memory_below(own)
    assert {path.name: path.read_text() for path in own.iterdir()} == before, f"{case}: nothing may change"


def test_a_grader_that_may_not_pass_memory_on_moves_back(tmp_path: Path, monkeypatch) -> None:
    own = cgroup_like(tmp_path / "scope", [os.getpid()])
    writes: list[str] = []
    write_text = Path.write_text

    def refusing(path: Path, text: str, *args, **kwargs) -> int:
        writes.append(f"{path.relative_to(own)} <- {text}")
        if path.name == "cgroup.subtree_control":  # as in a cgroup that was not delegated to us
            raise PermissionError(13, "Permission denied")
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refusing)
    memory._enable_memory_below(own)
    leaf = f"pt2e-grading-{os.getpid()}-grader"
    assert writes == [
        f"{leaf}/cgroup.procs <- {os.getpid()}",
        "cgroup.subtree_control <- +memory",
        f"cgroup.procs <- {os.getpid()}",
    ], "moved into the leaf, refused, moved back"
    assert (own / "cgroup.subtree_control").read_text() == "\n"


def test_without_a_cgroup_the_advice_names_the_command_that_gives_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "systemd-run" not in memory.advice() and "委派" in memory.advice()
    fake = tmp_path / "systemd-run"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert "systemd-run --user --scope -p Delegate=yes pt2e-course grade" in memory.advice()


def test_each_replay_starts_from_the_same_torch_state(machine: sb.Sandbox) -> None:
    """A fresh fork per submission: what one job did to torch's global state never reaches the next."""
    from autograder.engine.sandbox import run_replay
    from autograder.sandboxed.replay_job import ReplayJob

    states = []
    for _ in range(2):
        run(
            machine,
            "import torch\ntorch.set_grad_enabled(False)\ntorch.set_default_dtype(torch.float64)\n"
            "torch.set_autocast_enabled('cpu', True)\ntorch.use_deterministic_algorithms(True)\ntorch.manual_seed(99)",
        )
        replayed = run_replay(ReplayJob("M01-3", 0, {}, LIMITS), machine)
        assert replayed.ended == "done" and not replayed.unfit
        states.append(replayed.state)
    assert states[0] == states[1] and states[0]["grad"] is True and states[0]["autocast"] is False
    assert states[0]["default_dtype"] == "torch.float32" and states[0]["deterministic"] is False
