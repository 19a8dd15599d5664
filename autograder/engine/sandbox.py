"""The grader's side of the sandbox: the fork server, its launch, the framed channel, the kill.

One fork server (``autograder.sandboxed.server``) runs per grading run, under bubblewrap
where the machine allows it: a read-only file system holding only ``/usr``, the Python
environment and the parts of the course that run beside student code (``common``,
``selfcheck``, ``autograder/sandboxed``; never ``autograder/keys``, ``autograder/checks``,
``source/``, ``release/``, submissions or grading output), its own pid, network, IPC and
UTS namespaces, no environment but a few variables, and only the capabilities it needs to
confine each job. Where bubblewrap is missing or refused, the server runs directly and
each job hides the secrets with mounts of its own; every measure that could not be
applied is named (``missing``) in the command's output and in the class report (not in students' feedback).

Starting a job: the grader sends the server a fixed-size command; the server forks the job's middle
process and hands over the job's request pipe, into which the grader writes the request (the server never
holds a submission's bytes, so no later job can inherit them: ``SECURITY.md``).

Talking to a job: the server hands over the read end of the job's pipe; ``read_frames``
reads it without blocking, with a deadline for every read, and bounds the size of a frame,
the number of frames and the total bytes. ``Conversation`` checks that each message fits
the order of the prepared cells. The child's ``done`` does not end the reading: only the
end of every writer (or the deadline) does, and then the job is killed.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.course import ROOT
from autograder.maintenance.isa import VARIABLES
from autograder.sandboxed import confine, memory, protocol
from autograder.sandboxed.limits import Limits
from autograder.sandboxed.protocol import COMMAND, HEADER, MAX_FRAME_BYTES, START_JOB, WARM
from autograder.sandboxed.replay_job import ReplayJob
from autograder.sandboxed.runner import Job

MAX_TOTAL_BYTES = 64 * 1024 * 1024
EXTRA_FRAMES = 16
"""Frames allowed beyond one per prepared cell plus start and done; more is a flood."""
WARM_AFTER_JOBS = 2
"""The job of a (notebook, seed) whose start warms the server for the ones after it."""
WARM_SECONDS = 600
"""The server's warm-up of one grading run (``Sandbox.warm``): a few seconds per notebook."""
HELLO_SECONDS = 300  # importing torch on a busy 2-core machine can take a while
STATUS_SECONDS = 2.0
REQUEST_SECONDS = 60
"""How long the grader waits for a job's middle process to read its request."""
KILL_SECONDS = 10.0

VISIBLE = ("common", "selfcheck", "autograder/__init__.py", "autograder/sandboxed")
"""The only parts of the course's code the sandbox sees (read-only, at their real paths)."""


def visible_paths() -> list[Path]:
    """``VISIBLE`` where the code is actually imported from (normally the course checkout)."""
    import autograder
    import common
    import selfcheck

    packages = {
        "common": Path(common.__file__).parent,
        "selfcheck": Path(selfcheck.__file__).parent,
        "autograder": Path(autograder.__file__).parent,
    }
    paths = []
    for part in VISIBLE:
        top, _, rest = part.partition("/")
        path = packages[top] / rest if rest else packages[top]
        if path.exists():
            paths.append(path.resolve())
    return paths


CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_SETPCAP")
"""What the server keeps inside bubblewrap, and why: SYS_ADMIN to give each job its own
namespaces and tmpfs mounts and mount its /proc; SETUID/SETGID to run each job as a user of
its own; KILL to kill a job running as that user; SETPCAP to empty the job's bounding set.
The student process keeps none of them."""

ETC = ("ld.so.cache", "fonts", "localtime", "alternatives", "mime.types")
ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/tmp",
    "PYTHONDONTWRITEBYTECODE": "1",
    # One intra-op thread per job: jobs run side by side (``--jobs``), so threads within a job only
    # fight over the same cores. It also keeps OpenMP from starting a thread pool in the fork
    # server, which a forked job would inherit broken. The trusted side derives on one thread too
    # (grading.grade_notebook), so the sandbox's numbers and the key's are computed alike.
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
PASSED_ENVIRONMENT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ", confine.DISABLE_ENV, *VARIABLES)
"""Passed on when set: thread counts, the time zone, measures disabled on purpose, and the instruction-set
caps of ``autograder.maintenance.isa`` (so that a grading run can compute as another CPU would, on both sides)."""


class SandboxError(RuntimeError):
    """The fork server could not be started or stopped answering."""


# --- launching the fork server ----------------------------------------------------------------------


def _mirror(path: str) -> list[str]:
    """bwrap arguments that recreate ``/bin``-like top-level paths as they are on this machine."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.isdir(path):
        return ["--ro-bind", path, path]
    return []


def bwrap_command(server: list[str], writable: Iterable[Path] = ()) -> list[str]:
    """The bubblewrap command line that runs ``server`` in the grading sandbox (``writable``: folders it
    may write in, at their own paths: the grading run's memory cgroup)."""
    command = ["bwrap", "--die-with-parent", "--new-session"]
    command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    command += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        command += _mirror(top)
    for name in ETC:
        command += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    binds = [p for p in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)} if not _under("/usr", p)]
    binds += [str(path) for path in visible_paths()]
    # bwrap would create the folders on the way with mode 0700, which the job's user cannot cross
    ancestors = {str(a) for b in binds for a in Path(b).parents if str(a) != "/"}
    command += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/var/tmp"]
    for folder in sorted(ancestors - set(binds)):  # after /tmp: a course checked out in /tmp stays visible
        command += ["--dir", folder]
    for path in sorted(binds):
        command += ["--ro-bind", path, path]
    for path in writable:
        command += ["--bind", str(path), str(path)]
    command += ["--chdir", "/tmp"]
    command += ["--remount-ro", "/"]
    command += ["--cap-drop", "ALL"]
    for cap in CAPABILITIES:
        command += ["--cap-add", cap]
    command += ["--clearenv"]
    for name, value in _environment().items():
        command += ["--setenv", name, value]
    return [*command, "--", *server]


def _under(folder: str, path: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _environment() -> dict[str, str]:
    env = dict(ENVIRONMENT)
    env.update({name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ})
    if "OMP_NUM_THREADS" in os.environ and "MKL_NUM_THREADS" not in os.environ:
        env["MKL_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]  # torch takes the smaller of the two
    return env


def hidden_paths(extra: Iterable[Path] = ()) -> list[str]:
    """What a job must not see when there is no bubblewrap: everything of the repository but
    ``VISIBLE`` and the Python environment, and ``extra`` (submissions, output)."""
    keep = {*visible_paths(), Path(sys.prefix).resolve()}
    code = Path(__file__).resolve().parent
    hide: set[Path] = set()
    for folder in {ROOT.resolve(), ROOT.resolve() / "autograder", code, code.parent}:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry in keep or any(k.is_relative_to(entry) for k in keep):
                continue
            hide.add(entry)
    hide |= {Path(p).resolve() for p in extra}
    return sorted(str(p) for p in hide if not any(p.is_relative_to(k) for k in keep if p != k))


@dataclass
class Ticket:
    """One running job: its pipe, its status socket (closing it kills the job), its number, and which
    server (``Sandbox.generation``) took it."""

    number: int
    frames: int
    status: socket.socket
    generation: int = 0

    def close(self) -> None:
        try:
            os.close(self.frames)
        except OSError:
            pass
        self.status.close()


class Sandbox:
    """The fork server of one grading run and how to reach it."""

    def __init__(self, disable: Iterable[str] | None = None) -> None:
        self.disable = set(confine.disabled() if disable is None else disable)
        self.process: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.in_bwrap = False
        self.missing: list[str] = []
        """Measures not applied on this machine (server level and those of a probe job)."""
        self.hide_also: set[Path] = set()
        self.generation = 0
        """Counts the servers started, so that one that died is replaced once, not once per thread."""
        self.warmed: set[tuple[str, int]] = set()
        """(notebook, seed) whose hidden models the server has exported ahead of the jobs (``warm``)."""
        self.jobs: Counter[tuple[str, int]] = Counter()
        self.cgroup: memory.Controller | None = None
        """The grading run's memory cgroup; each job gets one below it (``autograder.sandboxed.memory``)."""
        self._lock = threading.Lock()
        self._restart_lock = threading.Lock()

    # starting and stopping

    @property
    def memory_mode(self) -> str:
        """How each job's memory is limited, in words for the feedback and the command's output."""
        return memory.MEMORY_CGROUP if self.cgroup is not None else memory.MEMORY_SUM

    def _launch(self, use_bwrap: bool) -> bool:
        grader, server = socket.socketpair()
        python = [sys.executable, "-I", "-B", "-m", "autograder.sandboxed.server", str(server.fileno())]
        python.append("bwrap" if use_bwrap else "plain")
        if self.cgroup is not None:
            python += [str(self.cgroup.root), str(self.cgroup.version)]
        writable = [self.cgroup.root] if self.cgroup is not None else []
        command = bwrap_command(python, writable) if use_bwrap else python
        env = None if use_bwrap else {**_environment(), "PYTHONPATH": ""}
        try:
            self.process = subprocess.Popen(
                command, pass_fds=[server.fileno()], env=env, cwd="/", stdin=subprocess.DEVNULL
            )
        except OSError:
            grader.close()
            server.close()
            return False
        server.close()
        self.control, self.in_bwrap = grader, use_bwrap
        hello = self._read_control_frame(HELLO_SECONDS)
        if hello is None or hello.get("type") != protocol.HELLO:
            self._stop_server()
            return False
        if hello.get("v") != protocol.VERSION:  # a server of another checkout would misread our requests
            self._stop_server()
            raise SandboxError(
                f"評分沙箱的 fork server 說的是第 {str(hello.get('v'))[:10]} 版的協定，"
                f"這個評分程式是第 {protocol.VERSION} 版：請用同一份 checkout 的 pt2e-course"
            )
        return True

    def start(self) -> None:
        """Start the fork server (under bubblewrap when possible) and probe what a job gets."""
        if self.control is not None:
            return
        if self.cgroup is None and "cgroup" not in self.disable:
            self.cgroup = memory.create_run_cgroup()
        server_missing: list[str] = []
        started = False
        if "bwrap" not in self.disable and shutil.which("bwrap"):
            with _disabled_env(self.disable):
                started = self._launch(True) and self._probe() is not None
            if not started:
                self._stop_server()
        if not started:
            server_missing.append(confine.BWRAP)
            with _disabled_env(self.disable):
                started = self._launch(False)
            if not started:
                raise SandboxError("評分沙箱的 fork server 無法啟動")
        probe = self._probe()
        if probe is None:
            self._stop_server()
            raise SandboxError("評分沙箱無法執行測試用的作業")
        self.missing = _unique([*server_missing, *probe])
        self.generation += 1
        self.warmed = set()  # a new server starts cold
        if self.missing:
            print(
                "評分沙箱：這台機器無法套用 "
                + "、".join(self.missing)
                + "（評分照常進行，全班報告的「需要處理的學生」一節也會註明）",
                file=sys.stderr,
            )
        print(f"評分沙箱：{self.memory_mode}", file=sys.stderr)
        if self.cgroup is None and "cgroup" not in self.disable:
            print(f"評分沙箱：{memory.advice()}", file=sys.stderr)

    def restart(self, generation: int) -> None:
        """Replace server number ``generation`` (it stopped answering), unless another thread did."""
        with self._restart_lock:
            if self.generation == generation:
                self._stop_server()  # the run's cgroup stays: the new server's jobs go there too
                self.start()

    def hung_up(self) -> bool:
        """Whether the server is gone: its end of the control socket is closed (or there is none)."""
        with self._lock:
            if self.control is None:
                return True
            try:
                if not select.select([self.control], [], [], 0)[0]:
                    return False  # alive, with nothing to say
                return self.control.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

    def stop(self) -> None:
        """Stop the fork server and remove the run's memory cgroup."""
        self._stop_server()
        if self.cgroup is not None:
            memory.remove(self.cgroup.root)
            self.cgroup = None

    def _stop_server(self) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.process is not None:
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def _probe(self) -> list[str] | None:
        """Run an empty job; the measures it reports as not applied, or None when it failed."""
        job = Job("", (), 0, Limits(notebook_seconds=30))
        try:
            ticket = self.submit(job)
        except SandboxError:
            return None
        read = FrameRead(ended="deadline")
        try:
            read = read_frames(ticket.frames, time.monotonic() + 60, max_frames=4)
        finally:
            finish(ticket, read.ended == "eof")
            ticket.close()
        conversation = Conversation([])
        conversation.feed_all(read.frames)
        if not conversation.done or conversation.start is None:
            return None
        return [str(m) for m in conversation.start.get("unconfined", [])]

    # talking to it

    def count_job(self, job: Job) -> bool:
        """Count a job of (notebook, seed); True for the second one: from then on, warming the server
        for that notebook pays (a single ``check`` or one Gradescope student never waits for it)."""
        if not any(cell.kind == "collect" for cell in job.cells):
            return False
        with self._lock:
            self.jobs[(job.notebook, job.seed)] += 1
            return self.jobs[(job.notebook, job.seed)] == WARM_AFTER_JOBS

    def warm(self, notebooks: Iterable[str], seed: int) -> None:
        """Have the server export the hidden models of ``notebooks`` on ``seed`` once, before the jobs
        that will need them (``autograder.sandboxed.warm``); each (notebook, seed) is warmed once.

        Only speed depends on it: a server that does not answer in time is replaced by a cold one.
        """
        new = [n for n in dict.fromkeys(notebooks) if (n, seed) not in self.warmed]
        if not new:
            return
        body = json.dumps({"notebooks": new, "seed": int(seed)}).encode("utf-8")
        with self._lock:
            if self.control is None:
                return
            generation = self.generation
            try:
                self.control.settimeout(60)
                self.control.sendall(COMMAND.pack(WARM, len(body)) + body)
            except OSError:
                reply = None
            else:
                reply = self._read_control_frame(WARM_SECONDS)
        if reply is None or reply.get("type") != protocol.WARMED:  # out of step with us: start afresh, cold
            self.restart(generation)
            return
        self.warmed.update((n, seed) for n in new)

    def _read_control_frame(self, seconds: float) -> dict[str, Any] | None:
        assert self.control is not None
        self.control.settimeout(seconds)
        try:
            header = _recv_exactly(self.control, HEADER.size)
            (size,) = HEADER.unpack(header)
            return json.loads(_recv_exactly(self.control, size).decode("utf-8"))
        except (OSError, ValueError, EOFError):
            return None

    def submit(self, job: Job | ReplayJob) -> Ticket:
        """Start ``job`` in a new confined process; the caller reads its frames, then ``finish``es.

        The server gets a fixed-size command only; the job's request goes into the request pipe of the
        middle process it forked for this job (``autograder.sandboxed.server``), so the server never holds
        a submission's bytes and cannot pass them on to a later job."""
        request = {"replay": job.wire()} if isinstance(job, ReplayJob) else {"job": job.wire()}
        if not self.in_bwrap:
            request["hide"] = hidden_paths(self.hide_also)
        body = json.dumps(request).encode("utf-8")
        with self._lock:
            if self.control is None:
                raise SandboxError("評分沙箱沒有在執行")
            generation = self.generation
            try:
                self.control.settimeout(60)
                self.control.sendall(COMMAND.pack(START_JOB, 0))
                data, fds, _flags, _addr = socket.recv_fds(self.control, HEADER.size, 3)
            except OSError as exc:
                raise SandboxError(f"評分沙箱沒有回應（{type(exc).__name__}）") from None
        if len(data) != HEADER.size or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            raise SandboxError("評分沙箱的回應不完整")
        (number,) = HEADER.unpack(data)
        frames, status, requests = fds
        try:
            _write_all(requests, HEADER.pack(len(body)) + body, time.monotonic() + REQUEST_SECONDS)
        except OSError:
            pass  # the middle process is gone: the job says nothing, and is handled as one that ended silent
        finally:
            os.close(requests)
        return Ticket(number, frames, socket.socket(fileno=status), generation)


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    """Write ``data`` to the pipe ``fd`` without blocking past ``deadline`` (``TimeoutError`` then)."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([], [fd], [], remaining)[1]:
            raise TimeoutError("the job's request pipe was not read in time")
        try:
            view = view[os.write(fd, view[: 1 << 16]) :]
        except BlockingIOError:
            continue


class _disabled_env:
    """Pass the measures disabled for this sandbox to the server through its environment."""

    def __init__(self, disable: set[str]) -> None:
        self.disable, self.saved = disable, os.environ.get(confine.DISABLE_ENV)

    def __enter__(self) -> None:
        if self.disable:
            os.environ[confine.DISABLE_ENV] = ",".join(sorted(self.disable))
        else:
            os.environ.pop(confine.DISABLE_ENV, None)

    def __exit__(self, *exc: object) -> None:
        if self.saved is None:
            os.environ.pop(confine.DISABLE_ENV, None)
        else:
            os.environ[confine.DISABLE_ENV] = self.saved


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# --- reading a job's frames -------------------------------------------------------------------------


@dataclass
class FrameRead:
    """The frames one job wrote, and why reading stopped: "eof", "deadline" or "flood"."""

    frames: list[bytes] = field(default_factory=list)
    ended: str = "eof"
    partial: int = 0
    """Bytes of an unfinished frame left when reading stopped."""
    total: int = 0


def read_frames(
    fd: int,
    deadline: float,
    *,
    max_frames: int,
    max_frame_bytes: int = MAX_FRAME_BYTES,
    max_total: int = MAX_TOTAL_BYTES,
) -> FrameRead:
    """Read length-prefixed frames from ``fd`` until every writer is gone, the deadline passes,
    or a bound is crossed. Never blocks past ``deadline``."""
    os.set_blocking(fd, False)
    read = FrameRead()
    buffer = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            read.ended = "deadline"
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            read.ended = "eof"
            break
        read.total += len(chunk)
        if read.total > max_total:
            read.ended = "flood"
            break
        buffer += chunk
        while len(buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer)
            if size > max_frame_bytes:
                read.ended = "flood"
                break
            if len(buffer) < HEADER.size + size:
                break
            read.frames.append(bytes(buffer[HEADER.size : HEADER.size + size]))
            del buffer[: HEADER.size + size]
            if len(read.frames) > max_frames:
                read.ended = "flood"
                break
        if read.ended == "flood":
            break
    read.partial = len(buffer)
    return read


def finish(ticket: Ticket, eof: bool) -> str:
    """Make sure the job is dead and return how it ended, as its middle process saw it:
    "exit N", "signal N", "timeout" (its deadline), "killed" (we hung up first), or ""."""
    if eof:  # the student process ended on its own, or closed its pipe: wait a moment for which
        how = _status(ticket.status, STATUS_SECONDS)
        if how:
            return how
    try:
        ticket.status.shutdown(socket.SHUT_WR)  # the middle process kills the job when we hang up
    except OSError:
        pass
    return _status(ticket.status, KILL_SECONDS)


def _status(sock: socket.socket, seconds: float) -> str:
    sock.settimeout(seconds)
    try:
        data = sock.recv(64)
    except OSError:
        return ""
    text = data.decode("ascii", "replace")
    return text if text.replace(" ", "").replace("-", "").isalnum() else ""


# --- checking the order of the messages -------------------------------------------------------------


class Conversation:
    """The messages of one job, each checked against where the runner can be.

    The runner sends exactly one ``start`` first; then, with strictly increasing cell
    indexes, ``cell`` (a code cell that raised), ``evidence`` (at each collect cell,
    for that cell's exercise) and ``practiced`` (at the practice cell); then one ``done`` with the number of cells, as the very last
    frame. Anything else came from the student's code: it is not used and is counted in
    ``rejected`` (a ``done`` that more frames follow included). Every
    evidence message that names an exercise is counted in ``evidence_count``, whether it
    was accepted or not (the runner sends one per exercise; more means a forgery).
    """

    def __init__(self, plan: list[tuple[str, str | None]]) -> None:
        self.plan = plan
        self.start: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = []
        self.done = False
        self.position = -1
        self.garbage = 0
        self.rejected: Counter[str] = Counter()
        self.evidence_count: Counter[str] = Counter()
        self.collected: set[str] = set()

    def feed_all(self, frames: Iterable[bytes]) -> None:
        for data in frames:
            self.feed(data)

    def feed(self, data: bytes) -> None:
        try:
            message = protocol.decode(data)
        except protocol.ProtocolError:  # not JSON, not a message, or another version: never the runner's
            self.garbage += 1
            return
        kind = message["type"]
        exercises = {exercise for k, exercise in self.plan if k == "collect"}
        named = message.get("exercise")
        if kind == "evidence" and isinstance(named, str) and named in exercises:
            self.evidence_count[named] += 1
        if self.start is None:
            if kind == "start":
                self.start = message
                self.messages.append(message)
            else:
                self.rejected["before_start"] += 1
            return
        if self.done:  # the runner's done is the last frame: one followed by anything was not the runner's
            self.rejected["early_done"] += 1
            self.messages.pop()
            self.done = False
        if kind == "start":
            self.rejected["second_start"] += 1
        elif kind == "done":
            if message.get("index") == len(self.plan):
                self.done = True
                self.messages.append(message)
            else:
                self.rejected["out_of_order"] += 1
        elif kind in ("cell", "evidence", "practiced"):
            index = message.get("index")
            if type(index) is not int or not self.position < index < len(self.plan):
                self.rejected["out_of_order"] += 1
                return
            planned_kind, planned_exercise = self.plan[index]
            fits = {
                "cell": planned_kind == "code",
                "evidence": planned_kind == "collect" and named == planned_exercise,
                "practiced": planned_kind == "practice",
            }[kind]
            if not fits or (kind == "evidence" and named in self.collected):
                self.rejected["out_of_order"] += 1
                return
            if kind == "evidence":
                self.collected.add(str(named))
            self.position = index
            self.messages.append(message)
        else:
            self.rejected["unknown"] += 1


# --- one run ----------------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything the grader learned from one job."""

    conversation: Conversation
    read: FrameRead
    how: str
    missing: list[str]


_default: Sandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The fork server of this grading run, started on first use."""
    global _default
    with _default_lock:
        if _default is None:
            sandbox = Sandbox()
            sandbox.start()
            atexit.register(sandbox.stop)  # the server and the run's cgroup end with this process
            _default = sandbox
        return _default


def use_sandbox(sandbox: Sandbox | None) -> Sandbox | None:
    """Make ``sandbox`` the one jobs run in (tests of the fallbacks); returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, sandbox
    return previous


def hide_also(paths: Iterable[Path]) -> None:
    """Folders a job must not see even without bubblewrap (the class's submissions)."""
    default_sandbox().hide_also.update(Path(p) for p in paths)


def _submit_and_read(sandbox: Sandbox, job: Job | ReplayJob, seconds: float, max_frames: int) -> tuple[FrameRead, str]:
    """Hand ``job`` to the server and read its frames for at most ``seconds``; returns them and how the job ended.

    A server that is gone is replaced once: before the job is handed over (it does not answer), or after,
    when the job said nothing at all and the server that took it has hung up or was already replaced by
    another thread (a loaded machine can hand a job to a server in its last milliseconds). A job cannot
    end the server (``tests/test_isolation.py``), so a job that ends itself early is never run twice."""
    for attempt in (1, 2):
        generation = sandbox.generation
        try:
            ticket = sandbox.submit(job)
        except SandboxError:
            sandbox.restart(generation)  # a dead server: start a new one, once
            ticket = sandbox.submit(job)
        read = FrameRead(ended="deadline")
        try:
            read = read_frames(ticket.frames, time.monotonic() + seconds, max_frames=max_frames)
        finally:
            how = finish(ticket, read.ended == "eof")
            ticket.close()
        silent = read.ended == "eof" and not read.frames and not read.partial
        if attempt == 1 and silent and (sandbox.generation != ticket.generation or sandbox.hung_up()):
            sandbox.restart(ticket.generation)  # nothing if another thread replaced it already
            continue
        break
    return read, how


def run_job(job: Job, sandbox: Sandbox | None = None, startup_seconds: float = 10) -> Run:
    """Run ``job`` confined and read what it says, within its time limit plus ``startup_seconds``."""
    sandbox = sandbox or default_sandbox()
    if sandbox.count_job(job):
        sandbox.warm([job.notebook], job.seed)
    read, how = _submit_and_read(
        sandbox, job, job.limits.notebook_seconds + startup_seconds, len(job.cells) + 2 + EXTRA_FRAMES
    )
    conversation = Conversation([(c.kind, c.exercise) for c in job.cells])
    conversation.feed_all(read.frames)
    return Run(conversation, read, how, list(sandbox.missing))


# --- one replay ---------------------------------------------------------------------------------------


@dataclass
class ReplayRun:
    """What a replay worker sent: per exercise its evidence or its error, and how the worker ended."""

    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    """exercise → ``{"evidence": …}`` or ``{"error": text}``."""
    ended: str = "done"  # "done", "timeout", "memory", "crashed", "flood"
    unfit: int = 0
    """Frames that were not this protocol's messages in the worker's order (the worker runs no student
    code: a sign that a recording took it over)."""
    state: dict[str, Any] = field(default_factory=dict)
    """The global torch settings the worker started from (``replay_job.torch_state``)."""


def run_replay(job: ReplayJob, sandbox: Sandbox | None = None, startup_seconds: float = 10) -> ReplayRun:
    """Derive ``job``'s evidence in a confined replay worker (``autograder.sandboxed.replay_job``)."""
    sandbox = sandbox or default_sandbox()
    expected = list(job.recorded)
    read, how = _submit_and_read(sandbox, job, job.seconds + startup_seconds, len(expected) + 2)
    run = ReplayRun(unfit=1 if read.partial else 0)
    started = done = False
    for data in read.frames:
        try:
            message = protocol.decode(data)
        except protocol.ProtocolError:
            run.unfit += 1
            continue
        kind, exercise = message["type"], message.get("exercise")
        if not started:
            started = kind == protocol.START
            run.unfit += not started
            if started and isinstance(message.get("state"), dict):
                run.state = message["state"]
        elif kind == protocol.DERIVED and not done and exercise in expected and exercise not in run.derived:
            evidence, error = message.get("evidence"), message.get("error")
            if isinstance(evidence, dict):
                run.derived[exercise] = {"evidence": evidence}
            else:
                run.derived[exercise] = {"error": str(error)[:400] if isinstance(error, str) else "格式不對"}
        elif kind == protocol.DONE and not done:
            done = True
        else:
            run.unfit += 1
    if how == "memory":
        run.ended = "memory"
    elif read.ended == "flood":
        run.ended = "flood"
    elif read.ended == "deadline" or how == "timeout":
        run.ended = "timeout"
    elif not done:
        run.ended = "crashed"
    return run
