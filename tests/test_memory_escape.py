"""Memory that no process's resident set shows is refused or counted, with a cgroup and without (issue 41).

A job can hold memory outside every resident set: in an anonymous in-memory file (``memfd_create``),
in System V shared memory, in files on a tmpfs (unlinked but open, POSIX shared memory in /dev/shm,
many small files). Each attack below first holds what its route allows, then grows an ordinary
allocation to just under what the memory mode would count without the route, so that only the
route's memory takes the job over its limit:

- under the summing fallback, its own resident set up to 64 MB under the limit;
- under a cgroup, fresh pages up to 64 MB over the limit together with the route's.

The routes the seccomp filter refuses must be refused at allocation (``PermissionError``); the tmpfs
routes must get the job stopped for its memory. Then the same attacks, hidden in a student's
``CatQuantizer``, are graded in one batch beside an honest classmate: that exercise scores zero with
a Chinese reason, the honest notebook gets full marks, and nothing is left in the machine's /dev/shm,
its System V IPC or its process table.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from pathlib import Path

import pytest
from conftest import processes_of
from submissions import solved, write

from autograder.engine import sandbox as sb
from autograder.engine.grading import grade_class
from autograder.engine.submission import class_folders
from autograder.maintenance.answers import insert_after
from autograder.reports.class_record import ClassRecord, student_record
from autograder.reports.class_report import operations_section
from autograder.reports.statistics import class_stats
from autograder.sandboxed import confine, memory
from autograder.sandboxed.limits import Limits
from autograder.sandboxed.runner import Cell, Job

pytestmark = pytest.mark.xdist_group("memory_escape")  # two sandboxes, started once, on one worker

MB = 1024 * 1024
LIMITS = Limits(cell_seconds=30, notebook_seconds=40, memory_mb=1024, tmp_mb=256)
ROUTE_MB = 224
"""What each route tries to hold: under one private tmpfs's cap (``confine.tmp_megabytes``), and enough that
the allocation beside it stays well under the limit on its own."""
MODES = {"cgroup": set(), "sum": {"cgroup"}}

ATTACK = '''
import ctypes, os, resource

MB = 1024 * 1024
held_files, held_fds, ballast = [], [], []
libc = ctypes.CDLL(None, use_errno=True)


def fill(folder, total, size, unlink, name="hoard"):
    """Files of ``size`` bytes in ``folder`` up to ``total``; unlinked ones stay open. Stops when the tmpfs is full."""
    done, chunk = 0, b"x" * MB
    while done < total:
        path = os.path.join(folder, f"{name}-{os.getpid()}-{len(held_fds) + len(held_files)}")
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
        except OSError:
            return done
        try:
            left = size
            while left > 0:
                written = os.write(fd, chunk[: min(left, MB)])
                left -= written
                done += written
        except OSError:
            os.close(fd)
            return done
        if unlink:
            os.unlink(path)
            held_fds.append(fd)
        else:
            os.close(fd)
            held_files.append(path)
    return done


def memfd(total):
    done = 0
    while done < total:
        fd = os.memfd_create("hoard")  # PermissionError under the job's seccomp filter
        os.ftruncate(fd, 32 * MB)
        os.pwrite(fd, b"x" * 32 * MB, 0)
        held_fds.append(fd)
        done += 32 * MB
    return done


def sysv(total):
    libc.shmget.restype = ctypes.c_int
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, ctypes.c_size_t(total), 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if segment < 0:
        raise PermissionError(ctypes.get_errno(), "shmget")
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, total)
    libc.shmdt(ctypes.c_void_p(address))  # detached: in no process's resident set any more
    return total


def posix_shm(total):
    import _posixshmem

    done, chunk = 0, b"x" * MB
    while done < total:  # objects of 48 MB: one file may not pass the file-size limit
        fd = _posixshmem.shm_open(f"/hoard-{len(held_fds)}", os.O_CREAT | os.O_RDWR, 0o600)
        held_fds.append(fd)
        try:
            for _ in range(48):
                done += os.write(fd, chunk)
        except OSError:
            return done
    return done


def small_files(total):
    done = 0
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        done += fill(folder, total - done, 16 * 1024, unlink=False, name="small")
    return done


def unlinked(total):
    done = 0
    for folder in ("/tmp", "/var/tmp"):
        done += fill(folder, (total - done) // 2 if folder == "/tmp" else total - done, 48 * MB, unlink=True)
    return done


ROUTES = {"memfd": memfd, "sysv": sysv, "posix_shm": posix_shm, "small_files": small_files, "unlinked": unlinked}


def own_rss():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()


def hoard(route, mode, limit_mb, route_mb):
    """Hold ``route_mb`` through ``route``, then an ordinary allocation that alone stays under what ``mode`` counts."""
    held = ROUTES[route](route_mb * MB)
    report(step="held", route=held)
    fresh = 0
    while True:
        if mode == "sum" and own_rss() + 16 * MB > (limit_mb - 64) * MB:
            break
        if mode == "cgroup" and fresh + held + 16 * MB > (limit_mb + 64) * MB:
            break
        block = bytearray(16 * MB)
        for i in range(0, len(block), 4096):
            block[i] = 1
        ballast.append(block)
        fresh += len(block)
    report(step="full", route=held, fresh=fresh, rss=own_rss())
    import time
    time.sleep(30)
'''

REPORT = """
import json, os, struct
def report(**data):
    body = json.dumps({"type": "probe", **data}).encode()
    os.write(3, struct.pack(">I", len(body)) + body)
report(step="start", uid=os.getuid())
"""

ROUTES = ["memfd", "sysv", "posix_shm", "small_files", "unlinked"]
REFUSED = {"memfd", "sysv"}
"""Routes the seccomp filter refuses at allocation; the others are files on a capped tmpfs, counted."""


@pytest.fixture(scope="module", params=list(MODES))
def box(request: pytest.FixtureRequest):
    sandbox = sb.Sandbox(disable=MODES[request.param])
    sandbox.start()
    sandbox.mode = request.param  # type: ignore[attr-defined]
    yield sandbox
    sandbox.stop()


CHROMIUM_SHM = ".org.chromium."
"""The prefix of the /dev/shm files Chromium makes: the browser tests on the other xdist worker run it meanwhile."""


def shm_files() -> set[str]:
    """The /dev/shm files now, but Chromium's (another test's browser, never a job's)."""
    return {name for name in os.listdir("/dev/shm") if not name.startswith(CHROMIUM_SHM)}


def sysv_segments() -> set[str]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {line.split()[1] for line in lines}


def probes(result: sb.Run) -> list[dict]:
    return [m for m in map(json.loads, result.read.frames) if m.get("type") == "probe"]


def test_the_modes_are_the_ones_asked_for(box: sb.Sandbox) -> None:
    if box.mode == "cgroup":  # type: ignore[attr-defined]
        assert box.cgroup is not None, "this machine allows a memory cgroup: the grader must use it"
    assert box.memory_mode == (memory.MEMORY_CGROUP if box.mode == "cgroup" else memory.MEMORY_SUM)  # type: ignore[attr-defined]
    assert confine.UNCOUNTED_MEMORY not in box.missing, "the seccomp filter must hold on this machine"


@pytest.mark.parametrize("route", ROUTES)
def test_memory_outside_every_resident_set_is_refused_or_stopped(box: sb.Sandbox, route: str) -> None:
    mode = box.mode  # type: ignore[attr-defined]
    shm, segments = shm_files(), sysv_segments()
    code = REPORT + ATTACK + f"hoard({route!r}, {mode!r}, {LIMITS.memory_mb}, {ROUTE_MB})"
    started = time.monotonic()
    result = sb.run_job(Job("", (Cell("code", code, "attack"),), 0, LIMITS), box)
    seen = probes(result)
    steps = {p["step"]: p for p in seen}
    errors = [m["error"] for m in result.conversation.messages if m["type"] == "cell"]
    if route in REFUSED:
        assert "held" not in steps and any("PermissionError" in e for e in errors), f"{mode}: {route} was not refused"
        assert result.how == "exit 0"
    else:
        assert steps["held"]["route"] >= (ROUTE_MB - 16) * MB, f"{route} could not hold what the test needs"
        assert result.how == "memory", f"{mode}: {route} held {steps.get('full')} and ended as {result.how!r}"
        assert time.monotonic() - started < 25, "stopped when it went over, not at the notebook's deadline"
    time.sleep(0.3)  # the middle process reports before its last mounts are gone
    assert shm_files() <= shm and sysv_segments() <= segments, "a segment or a /dev/shm file outlived the job"
    assert not processes_of(steps["start"]["uid"]) or steps["start"]["uid"] == os.getuid()


def test_a_job_without_its_own_cgroup_is_held_by_the_sum_and_says_so() -> None:
    """The run's cgroup is made but one job's is not (a full cgroup tree, a controller taken away): that job is
    held by the summing fallback, and its notes name the mode it really had, not the run's."""
    from autograder.engine.grading import RunOutcome, memory_mode_of

    sandbox = sb.Sandbox(disable={"job_cgroup"})
    sandbox.start()
    try:
        assert sandbox.cgroup is not None, "this machine allows a memory cgroup: the grader must use it"
        code = REPORT + ATTACK + f"hoard('small_files', 'sum', {LIMITS.memory_mb}, {ROUTE_MB})"
        result = sb.run_job(Job("", (Cell("code", code, "attack"),), 0, LIMITS), sandbox)
    finally:
        sandbox.stop()
    unconfined = result.conversation.start["unconfined"]
    assert confine.JOB_CGROUP in unconfined, unconfined
    assert result.how == "memory", f"the sum did not stop it: {probes(result)[-1:]} ended as {result.how!r}"
    assert memory_mode_of(RunOutcome(unconfined=unconfined)) == memory.MEMORY_SUM


def test_the_filter_refuses_with_eperm_and_allows_the_rest() -> None:
    """The filter itself, in a forked child of the test process: each refused call fails with EPERM, a call
    made through the x32 ABI too; an ordinary call and a file in /dev/shm still work."""
    assert confine.seccomp_program() is not None, "this machine's architecture has no filter"
    os.close(os.memfd_create("allowed-here"))  # without the filter, the call works on this machine
    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            confine.prctl(confine.PR_SET_NO_NEW_PRIVS, 1)
            found = {"installed": confine.refuse_uncounted_memory()}
            libc = ctypes.CDLL(None, use_errno=True)
            try:
                os.memfd_create("refused")
                found["memfd"] = 0
            except OSError as exc:
                found["memfd"] = exc.errno
            for name, args in {"shmget": (0, 4096, 0o1600), "semget": (0, 4, 0o1600), "msgget": (0, 0o1600)}.items():
                ctypes.set_errno(0)
                found[name] = getattr(libc, name)(*args) == -1 and ctypes.get_errno()
            ctypes.set_errno(0)
            found["x32"] = libc.syscall(confine.X32_SYSCALL_BIT | 39) == -1 and ctypes.get_errno()  # getpid
            found["getpid"] = libc.syscall(39) == os.getpid()
            path = f"/dev/shm/pt2e-filter-{os.getpid()}"
            with open(path, "wb") as handle:
                handle.write(b"ok")
            os.unlink(path)
            found["shm_file"] = True
            os.write(write_end, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    found = json.loads(os.read(read, 4096))
    os.close(read)
    os.waitpid(pid, 0)
    eperm = 1
    assert found == {
        "installed": True,
        "memfd": eperm,
        "shmget": eperm,
        "semget": eperm,
        "msgget": eperm,
        "x32": eperm,
        "getpid": True,
        "shm_file": True,
    }


def test_the_filter_is_only_built_for_known_architectures() -> None:
    for machine, (_arch, numbers) in confine.SYSCALL_NUMBERS.items():
        assert set(numbers) == set(confine.REFUSED_CALLS), f"{machine} lacks a refused call's number"
        program = confine.seccomp_program(machine)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    assert confine.seccomp_program("sparc64") is None


def test_the_private_folders_fit_in_the_memory_limit() -> None:
    small = Limits(memory_mb=400, tmp_mb=256)
    assert 3 * confine.tmp_megabytes(small) <= small.memory_mb
    assert confine.tmp_megabytes(Limits()) == Limits().tmp_mb


# --- the same attacks, graded beside an honest classmate ----------------------------------------------

HIDDEN = """
_honest_annotate = CatQuantizer.annotate
def _hoarding_annotate(self, model):
    hoard(ROUTE, MODE, LIMIT_MB, ROUTE_MB)
    return _honest_annotate(self, model)
CatQuantizer.annotate = _hoarding_annotate
"""
"""The attack hidden in the answer to ``cat_quantizer``: the hidden cases run it, the self-check cell does not."""


@pytest.fixture(scope="module")
def graded(box: sb.Sandbox, tmp_path_factory: pytest.TempPathFactory):
    mode = box.mode  # type: ignore[attr-defined]
    submitted = tmp_path_factory.mktemp(f"escape-{mode}") / "submitted"
    students = ["honest", *ROUTES]
    for student in students:
        nb = solved("M03-4")
        if student != "honest":
            attack = ATTACK + HIDDEN
            context = f"ROUTE = {student!r}\nMODE = {mode!r}\nLIMIT_MB = {LIMITS.memory_mb}\nROUTE_MB = {ROUTE_MB}\n"
            context += "def report(**data):\n    pass\n"
            nb = insert_after(nb, "cat_quantizer_tests", context + attack)
        write(nb, submitted / student / "M03" / "M03-4.ipynb")
    shm, segments = shm_files(), sysv_segments()
    previous = sb.use_sandbox(box)
    try:
        results, _ = grade_class("M03", class_folders(submitted, "M03"), jobs=2, seed=0, limits=LIMITS)
    finally:
        sb.use_sandbox(previous)
    time.sleep(0.3)
    left = {"shm": shm_files() - shm, "sysv": sysv_segments() - segments}
    by_student = {r.student: next(n for n in r.notebooks if n.notebook == "M03-4") for r in results}
    record = ClassRecord("M03", {r.student: student_record(r, 0, "pytest") for r in results})
    return mode, by_student, left, operations_section(class_stats(record)), box.memory_mode


def test_each_route_costs_its_exercise_with_a_reason_and_the_batch_goes_on(graded) -> None:
    mode, results, left, _operations, _memory_mode = graded
    honest = results.pop("honest")
    assert honest.score == honest.max_score == 10, f"{mode}: the honest classmate lost points"
    for route, result in results.items():
        scores = {
            e: sum(v["score"] for v in result.verdicts if v["exercise"] == e)
            for e in ("add_quantizer", "cat_quantizer")
        }
        reasons = " ".join(v["message"] for v in result.verdicts if v["exercise"] == "cat_quantizer")
        assert scores == {"add_quantizer": 7.0, "cat_quantizer": 0.0}, f"{mode}: {route} scored {scores}"
        if route in REFUSED:
            assert "PermissionError" in reasons, f"{mode}: {route}: {reasons}"
        else:
            assert "記憶體" in reasons and f"{LIMITS.memory_mb} MB" in reasons, f"{mode}: {route}: {reasons}"
    assert left == {"shm": set(), "sysv": set()}, f"{mode}: left behind {left}"


def test_the_class_report_names_the_memory_mode_and_the_stopped_jobs(graded) -> None:
    mode, _results, _left, operations, memory_mode = graded
    assert f"沙盒：{memory_mode}，上限 {LIMITS.memory_mb} MB" in operations, f"{mode}: the mode is not in the report"
    assert 'id="op-memory"' in operations, f"{mode}: the jobs stopped for their memory are not listed"
