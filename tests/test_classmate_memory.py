"""No job's address space holds another submission's bytes (issue 48).

A hostile student scans every readable mapping of its own process (``/proc/self/maps``, then
``/proc/self/mem``, or ``process_vm_readv`` on itself where a job is not dumpable) for a marker that only an honest classmate's answer cells carry, in UTF-8,
UTF-16 and UTF-32: CPython keeps a ``str`` with Chinese characters as two bytes a character and
one with an emoji as four, and the request that carried the cells is UTF-8. The scanners are graded
after the honest student, before and beside it, in both memory modes, with ``--jobs 1`` and
``--jobs 2``; none may find the marker. The scanner never builds the whole marker itself: it looks
for the first half and compares the bytes after it with the second half.

The fork server is the parent of every job and every replay worker, so it is also scanned
directly, from outside, after a class and a replay that carried the marker: it must never have held
it (``autograder.sandboxed.server``: a job's request goes through the job's own pipe).
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from pathlib import Path

import pytest
from submissions import release_notebook, source_answers, write

from autograder.engine import sandbox as sb
from autograder.engine.grading import grade_class
from autograder.maintenance.answers import answered, insert_after
from autograder.sandboxed.limits import Limits
from autograder.sandboxed.replay_job import ReplayJob
from autograder.sandboxed.runner import Cell, Job

pytestmark = pytest.mark.xdist_group("classmate_memory")  # two sandboxes, started once, on one worker

MODES = {"cgroup": set(), "sum": {"cgroup"}}
LIMITS = Limits(cell_seconds=60, notebook_seconds=90)
ENCODINGS = ("utf-8", "utf-16-le", "utf-32-le")

FIRST, SECOND = "classmate-" + secrets.token_hex(6), secrets.token_hex(6) + "-answer"
"""The marker is FIRST + SECOND: this test process holds it, the scanners only ever hold the halves."""

SCAN = """
import ctypes, os
halves = [(name, FIRST.encode(name), SECOND.encode(name)) for name in ENCODINGS]
found, scanned, regions = [], 0, 0
with open("/proc/self/maps") as maps:
    lines = maps.read().splitlines()
try:
    memory = os.open("/proc/self/mem", os.O_RDONLY)
    read = lambda size, position: os.pread(memory, size, position)
except PermissionError:  # a job that is not dumpable: the same bytes through process_vm_readv on itself
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    buffer = ctypes.create_string_buffer((16 << 20) + 4096)
    def read(size, position):
        local, remote = IoVec(ctypes.addressof(buffer), size), IoVec(position, size)
        got = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), "process_vm_readv")
        return buffer.raw[:got]
for line in lines:
    fields = line.split()
    if not fields[1].startswith("r"):
        continue
    start, end = (int(x, 16) for x in fields[0].split("-"))
    position = start
    while position < end:
        size = min(end - position, (16 << 20) + 4096)
        try:
            chunk = read(size, position)
        except OSError:
            break
        regions += position == start
        scanned += len(chunk)
        for name, first, second in halves:
            at = chunk.find(first)
            while at >= 0:
                if chunk[at + len(first) : at + len(first) + len(second)] == second:
                    found.append(name)
                at = chunk.find(first, at + 1)
        position += 16 << 20
raise RuntimeError(f"SCAN:{','.join(sorted(set(found))) or 'nothing'}:{scanned}:{regions}:")
"""
"""A student's attack cell: what it found comes back in the cell's error, which reaches its own feedback."""


def honest_notebook():
    """A correct M03-4 whose answers carry the marker: beside Chinese (a two-byte ``str``), beside an emoji (a
    four-byte one), and in ASCII."""
    answers = source_answers("M03-4")
    marker = FIRST + SECOND
    answers["add_quantizer"] += f"\n# 這是誠實同學自己寫的答案：{marker}\n"
    answers["cat_quantizer"] += f"\n# 🙂 {marker}\n"
    nb = answered("M03-4", answers)
    return insert_after(nb, "setup", f"NOTE = {marker!r}")


def scanner_notebook():
    context = f"FIRST = {FIRST!r}\nENCODINGS = {ENCODINGS!r}\n"
    context += f"SECOND = {SECOND[:6]!r} + {SECOND[6:]!r}\n"  # no line of the scanner holds the whole marker
    return insert_after(release_notebook("M03-4"), "setup", context + SCAN)


def scan_report(result) -> tuple[str, int, int]:
    """What a scanner found, the bytes and the mappings it read."""
    for error in result.cell_errors:
        match = re.search(r"SCAN:([a-z0-9,\-]+):(\d+):(\d+):", error)
        if match:
            return match.group(1), int(match.group(2)), int(match.group(3))
    raise AssertionError(f"the scanner did not report: {result.cell_errors}")


ORDERS = {
    ("cgroup", 1): ["honest", "scan-1", "scan-2", "scan-3"],
    ("cgroup", 2): ["scan-1", "honest", "scan-2", "honest-last", "scan-3"],
    ("sum", 1): ["scan-3", "honest-last", "scan-2", "honest", "scan-1"],
    ("sum", 2): ["honest-last", "scan-2", "scan-1", "scan-3", "honest"],
}
"""Each memory mode with one and two jobs at once, each in its own order: scanners after, beside and before an
honest classmate (the sandbox lives across a module's tests, so a later order also follows the earlier ones)."""


@pytest.fixture(scope="module", params=list(MODES))
def box(request: pytest.FixtureRequest):
    sandbox = sb.Sandbox(disable=MODES[request.param])
    sandbox.start()
    sandbox.mode = request.param  # type: ignore[attr-defined]
    previous = sb.use_sandbox(sandbox)
    yield sandbox
    sb.use_sandbox(previous)
    sandbox.stop()


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("classmates") / "submitted"
    write(honest_notebook(), folder / "honest" / "M03" / "M03-4.ipynb")
    write(honest_notebook(), folder / "honest-last" / "M03" / "M03-4.ipynb")
    for name in ("scan-1", "scan-2", "scan-3"):
        write(scanner_notebook(), folder / name / "M03" / "M03-4.ipynb")
    return folder


def server_memory_holds_marker(box: sb.Sandbox) -> tuple[list[str], int]:
    """Scan the fork server's own memory from outside (this test's process is its ancestor): the encodings of
    the marker found in it, and the bytes read."""
    assert box.process is not None
    server = _python_below(box.process.pid)
    found, scanned = set(), 0
    marker = FIRST + SECOND
    needles = {name: marker.encode(name) for name in ENCODINGS}
    with open(f"/proc/{server}/maps") as maps:
        lines = maps.read().splitlines()
    memory = os.open(f"/proc/{server}/mem", os.O_RDONLY)
    try:
        for line in lines:
            fields = line.split()
            if not fields[1].startswith("r"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                chunk = os.pread(memory, end - start, start)
            except OSError:
                continue
            scanned += len(chunk)
            found |= {name for name, needle in needles.items() if needle in chunk}
    finally:
        os.close(memory)
    return sorted(found), scanned


def _python_below(pid: int) -> int:
    """The fork server's pid: ``pid`` itself when it runs directly, else bubblewrap's descendant running Python."""
    queue = [pid]
    while queue:
        current = queue.pop(0)
        if "autograder.sandboxed.server" in Path(f"/proc/{current}/cmdline").read_bytes().decode(errors="replace"):
            if Path(f"/proc/{current}/exe").resolve().name.startswith("python"):
                return current
        children = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(current)], capture_output=True, text=True, check=False
        ).stdout.split()
        queue += [int(c) for c in children]
    raise AssertionError(f"no fork server below process {pid}")


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_scanner_finds_a_classmates_answer(box: sb.Sandbox, submitted: Path, jobs: int) -> None:
    mode = box.mode  # type: ignore[attr-defined]
    order = ORDERS[(mode, jobs)]
    folders = {name: submitted / name / "M03" for name in order}
    results, _ = grade_class("M03", folders, jobs=jobs, seed=0, limits=LIMITS)
    by_student = {r.student: next(n for n in r.notebooks if n.notebook == "M03-4") for r in results}
    for name in ("honest", "honest-last"):
        if name in by_student:
            assert by_student[name].score == by_student[name].max_score, f"{mode}: {name} lost points"
    for name, result in by_student.items():
        if not name.startswith("scan"):
            continue
        found, scanned, regions = scan_report(result)
        assert scanned > 50 * 1024 * 1024 and regions > 20, f"{mode}: {name} read too little to mean anything"
        assert found == "nothing", f"{mode}, jobs={jobs}, {order}: {name} found the classmate's answer as {found}"
    found, scanned = server_memory_holds_marker(box)
    assert scanned > 50 * 1024 * 1024
    assert found == [], f"{mode}: the fork server holds the classmate's answer as {found}"


def test_a_replay_leaves_nothing_for_the_next_job(box: sb.Sandbox) -> None:
    """A replay worker's request (a submission's recordings) is read by its own middle process, not the server:
    after replaying a recording that carries the marker, neither the server nor a later job holds it. (A
    recording itself cannot read memory: the replay interprets allow-listed ops only, ``test_allowed.py``.)"""
    marker = FIRST + SECOND
    recording = {"add_quantizer": {"cases": [{"note": f"誠實同學的紀錄 🙂 {marker}"}]}}
    sb.run_replay(ReplayJob("M03-4", 0, recording, LIMITS), box)
    found, _ = server_memory_holds_marker(box)
    assert found == [], f"the fork server holds a replayed recording as {found}"
    context = f"FIRST = {FIRST!r}\nENCODINGS = {ENCODINGS!r}\nSECOND = {SECOND[:6]!r} + {SECOND[6:]!r}\n"
    run = sb.run_job(Job("", (Cell("code", context + SCAN, "scan"),), 0, LIMITS), box)
    errors = [m["error"] for m in run.conversation.messages if m["type"] == "cell"]
    match = re.search(r"SCAN:([a-z0-9,\-]+):(\d+):", " ".join(errors))
    assert match, f"the scanner did not report: {errors}"
    assert int(match.group(2)) > 50 * 1024 * 1024 and match.group(1) == "nothing", match.group(0)
