"""The fork server: runs inside the sandbox, preloads once, forks a confined process per job.

Started once per grading run by ``autograder.engine.sandbox`` (under bubblewrap where it can be),
with one end of a UNIX socket pair as its only link to the grader. It imports torch,
IPython, ``common``, ``selfcheck`` and ``autograder.sandboxed`` once (never an answer key
or a hidden check: they are not even in its file system), then for each ``START_JOB`` command:

1. creates the job's request pipe (the grader writes the job's request on it), its frame pipe
   (the student writes frames on it) and a status socket;
2. forks a *middle* process, and only then passes the request pipe's write end, the frame pipe's
   read end and the status socket's other end to the grader (``send_fds``);
3. the middle process reads its own request (a notebook's cells, or a submission's recordings)
   from its request pipe, enters new namespaces and mounts private temporary folders
   (``confine.isolate``), forks the *student* process (pid 1 of the new pid namespace), and kills
   it at the notebook's deadline or as soon as the grader closes the status socket; then it reports
   how the student ended (one short line) and exits.

The server itself never runs student code and never holds what students write: a command is a
fixed-size kind and number (``protocol.COMMAND``); only a warm-up carries a body, notebook names and
a seed. Since every job and every replay worker is forked from this process, that is what keeps a
classmate's cells and recordings out of every job's address space: the bytes of a request exist only
in the middle process that read them and in the student process it forks, the same submission's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.sandboxed import confine, memory, protocol
from autograder.sandboxed.protocol import COMMAND, HEADER, MAX_REQUEST_BYTES, MAX_WARM_BYTES, START_JOB, WARM
from autograder.sandboxed.replay_job import ReplayJob
from autograder.sandboxed.runner import Job, run

REQUEST_SECONDS = 60
"""How long a middle process waits for the grader to write its request before it gives up."""
STARTUP_SECONDS = 2
"""Added to the notebook's time limit for confining the student process (not the student's time)."""


def preload() -> None:
    """Import once what every job needs, so a forked job pays for its own cells only."""
    import importlib
    import pkgutil

    import IPython.core.interactiveshell  # noqa: F401
    import torch  # noqa: F401

    import autograder.sandboxed.cases
    import common.graph_utils
    import common.models
    import common.pt2e
    import common.qspecs
    import common.viz  # noqa: F401
    import selfcheck.casekit
    import selfcheck.evidence  # noqa: F401

    package = autograder.sandboxed.cases
    names = [f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(package.__path__)]
    extra = ["record", "tamper", "warm", "replay", "replay_job", "allowed"]
    for name in [*names, *(f"autograder.sandboxed.{module}" for module in extra)]:
        try:
            importlib.import_module(name)
        except Exception:  # one broken module costs its own notebooks (imported again there), not the run
            traceback.print_exc()
    try:
        warm_up()
    except Exception:  # only slower jobs: each pays for its own first export
        traceback.print_exc()


def warm_up() -> None:
    """Export a tiny model and prepare it, once, before any fork.

    The first ``torch.export`` of a process finishes torch's lazy imports and caches (about
    0.4 s); done here, every forked job starts warm. Nothing is computed on real tensors:
    a kernel that starts OpenMP's thread pool in the server would leave every forked job a
    pool it cannot use (the job hangs). The global RNG is left as it was, and nothing the
    warm-up built is kept.
    """
    import torch

    from common.pt2e import export_module, get_xnnpack_quantizer, prepare_pt2e

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 2, 1)
            self.linear = torch.nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x)) + x
            return self.linear(torch.cat([y, x], dim=2).mean(dim=(2, 3)))

    with torch.random.fork_rng():
        inputs = (torch.ones(1, 2, 2, 2),)
        for per_channel in (False, True):
            prepare_pt2e(export_module(Tiny().eval(), inputs), get_xnnpack_quantizer(per_channel)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_command(sock: socket.socket) -> tuple[bytes, Any] | None:
    """The next command from the grader (trusted): ``(START_JOB, None)``, ``(WARM, body)``; None when it
    closed the socket or sent what is not a command (the server then ends, and the grader starts another)."""
    header = _read_exactly(sock, COMMAND.size)
    if header is None:
        return None
    kind, size = COMMAND.unpack(header)
    if kind == START_JOB and size == 0:
        return kind, None
    if kind == WARM and size <= MAX_WARM_BYTES:
        body = _read_exactly(sock, size)
        return None if body is None else (kind, json.loads(body.decode("utf-8")))
    return None


def read_job_request(fd: int, seconds: float = REQUEST_SECONDS) -> dict[str, Any] | None:
    """The job's request, read by its middle process from its own request pipe (one frame, then the end of
    the pipe); None when the grader closed it early, sent too much or nothing in time."""
    deadline = time.monotonic() + seconds
    data = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        data += chunk
        if len(data) > HEADER.size + MAX_REQUEST_BYTES:
            return None
    if len(data) < HEADER.size:
        return None
    (size,) = HEADER.unpack_from(data)
    if len(data) != HEADER.size + size:
        return None
    return json.loads(bytes(data[HEADER.size :]).decode("utf-8"))


def _student(job: Job | ReplayJob, iso: confine.Isolation, fd: int, workdir: str) -> None:
    """The confined process: close everything but its pipe, confine itself, then run the student's
    cells (a ``Job``) or replay a submission's recordings (a ``ReplayJob``, no student code)."""
    try:
        os.dup2(fd, 3)
        os.closerange(4, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        missing = confine.confine(job.limits, iso, workdir)
        if isinstance(job, ReplayJob):
            from autograder.sandboxed import replay_job

            replay_job.run(job, 3, missing)
        else:
            run(job, 3, missing)
    except BaseException:
        pass
    finally:
        os._exit(0)


def _ended(pid: int, how: str) -> str:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return how or "exit 0"
    if how:
        return how
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0}"


def _watch(
    pid: int,
    iso: confine.Isolation,
    status: socket.socket,
    seconds: float,
    over_limit: Callable[[], bool] | None = None,
) -> str:
    """Wait for the student process; kill it (and so everything it started) at the deadline, when the
    grader hangs up, or as soon as ``over_limit()`` says the job went over its memory limit."""
    deadline = time.monotonic() + seconds
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pidfd = None
    how = ""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            how = "timeout"
            break
        waiting = [status] + ([pidfd] if pidfd is not None else [])
        wait = remaining if pidfd is not None and over_limit is None else min(remaining, memory.POLL_SECONDS)
        ready, _, _ = select.select(waiting, [], [], wait)
        if pidfd is not None and pidfd in ready:
            break
        if pidfd is None:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return (
                    f"signal {os.WTERMSIG(code)}" if os.WIFSIGNALED(code) else f"exit {os.waitstatus_to_exitcode(code)}"
                )
        if status in ready and not status.recv(64):
            how = "killed"
            break
        if over_limit is not None and over_limit():
            how = "memory"
            break
    _kill(pid, iso)
    return _ended(pid, how)


def _kill(pid: int, iso: confine.Isolation) -> None:
    """Kill the student process and, without a pid namespace, what it started."""
    try:
        os.kill(pid, signal.SIGKILL)  # pid 1 of its namespace: the kernel kills the rest
    except ProcessLookupError:
        pass
    if not iso.pid_namespace:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _middle(
    number: int,
    requests: int,
    fd: int,
    status: socket.socket,
    in_bwrap: bool,
    cgroup: memory.Controller | None,
) -> None:
    """Read the job's request from its own pipe (``requests``), set up the job's cgroup, namespaces and mounts,
    fork the confined process, watch it, report how it ended."""
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    request = read_job_request(requests)
    os.close(requests)
    if request is None:  # the grader gave up on this job: nothing to run
        return
    job: Job | ReplayJob
    if "replay" in request:
        job = ReplayJob.from_wire(request["replay"])
        seconds = job.seconds
    else:
        job = Job.from_wire(request["job"])
        seconds = job.limits.notebook_seconds
    limit = job.limits.memory_mb * 1024 * 1024
    held = None
    if cgroup is not None and "job_cgroup" not in confine.disabled():
        try:
            held = memory.JobCgroup(cgroup, number, limit)  # this process moves in: the job is born inside
        except OSError:
            held = None  # the limit is then kept by adding up (``_watch``)
    hide = [*request.get("hide", []), *([str(cgroup.root)] if cgroup is not None else [])]
    iso = confine.isolate(number, job.limits, hide, in_bwrap=in_bwrap)
    if cgroup is not None and held is None:  # reported by the job, so that its feedback names the mode it had
        iso.missing.append(confine.JOB_CGROUP)
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)  # before the job mounts its own /proc over it
    workdir = f"/tmp/pt2e-submission-{number}-{secrets.token_hex(8)}"
    pid = os.fork()
    if pid == 0:
        status.close()
        _student(job, iso, fd, workdir)
    os.close(fd)
    if held is not None:  # the kernel keeps the limit; a kill inside the job ends all of it
        over_limit = held.oom_killed
    else:
        over_limit = lambda: memory.job_bytes(pid, proc, iso.private) > limit  # noqa: E731
    how = _watch(pid, iso, status, seconds + STARTUP_SECONDS, over_limit)
    if held is not None and held.oom_killed():
        how = "memory"
    if not iso.pid_namespace:
        _kill(pid, iso)
        if iso.uid_dropped or os.getuid() == 0:
            confine.kill_user(iso.uid)  # double-forked daemons left the process group, not the user
    if not iso.mount_namespace:  # the job wrote into the machine's own temporary folders
        shutil.rmtree(workdir, ignore_errors=True)
        if iso.uid != os.getuid() or iso.uid_dropped:
            _remove_owned_by(iso.uid)
    try:
        status.sendall(how.encode())
    except OSError:
        pass


def _remove_owned_by(uid: int) -> None:
    """Remove what the job's user left at the top of /tmp, /var/tmp and /dev/shm (no links followed)."""
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _reap(jobs: dict[int, int], cgroup: memory.Controller | None) -> None:
    """Collect ended middle processes; remove the cgroup of each (empty: its pid namespace is gone)."""
    try:
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid <= 0:
                return
            number = jobs.pop(pid, None)
            if cgroup is not None and number is not None:
                with contextlib.suppress(OSError):
                    (cgroup.root / f"job-{number}").rmdir()
    except ChildProcessError:
        pass


def _warm(control: socket.socket, request: Any) -> None:
    """Warm the export cache for the notebooks and seed of a grading run (``autograder.sandboxed.warm``),
    here, before any job of that run is forked; answer with what was warmed."""
    from autograder.sandboxed.warm import warm_exports

    try:
        reply = protocol.message(
            protocol.WARMED, **warm_exports([str(n) for n in request["notebooks"]], int(request["seed"]))
        )
    except Exception as exc:  # a bug of ours: jobs only run colder
        traceback.print_exc()
        reply = protocol.message(protocol.WARMED, error=type(exc).__name__)
    control.sendall(protocol.encode(reply))


def serve(control: socket.socket, in_bwrap: bool, cgroup: memory.Controller | None = None) -> None:
    """Answer commands until the grader closes the control socket. A job's request never passes here: the
    middle process reads it from its own request pipe after the fork (the module's docstring says why)."""
    number = 0
    jobs: dict[int, int] = {}
    while True:
        _reap(jobs, cgroup)
        ready, _, _ = select.select([control], [], [], 1.0)
        if not ready:
            continue
        command = read_command(control)
        if command is None:
            return
        kind, body = command
        if kind == WARM:
            _warm(control, body)
            continue
        number += 1
        requests_read, requests_write = os.pipe()
        frames_read, frames_write = os.pipe()
        status_grader, status_middle = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                status_grader.close()
                os.close(frames_read)
                os.close(requests_write)
                _middle(number, requests_read, frames_write, status_middle, in_bwrap, cgroup)
            except BaseException:  # a bug of ours, never the student's doing: say so on the grader's stderr
                traceback.print_exc()
            finally:
                os._exit(0)
        jobs[pid] = number
        os.close(frames_write)
        os.close(requests_read)
        status_middle.close()
        try:
            socket.send_fds(control, [HEADER.pack(number)], [frames_read, status_grader.fileno(), requests_write])
        finally:
            os.close(frames_read)
            os.close(requests_write)
            status_grader.close()


def main(argv: list[str]) -> int:
    fd, in_bwrap = int(argv[0]), argv[1] == "bwrap"
    cgroup = memory.Controller(Path(argv[2]), int(argv[3])) if len(argv) >= 4 else None
    confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)
    off = confine.disabled()
    if "sys_admin" in off:  # behave like a container without CAP_SYS_ADMIN
        confine.drop_capabilities((confine.CAP_SYS_ADMIN,))
    if "setuid" in off:
        confine.drop_capabilities((confine.CAP_SETUID, 6))
    control = socket.socket(fileno=fd)
    preload()
    if not confine.has_capability(confine.CAP_SYS_ADMIN):
        confine.user_namespaces_work()  # found out once here, before any fork of a job
    control.sendall(protocol.encode(protocol.message(protocol.HELLO, pid=os.getpid())))
    serve(control, in_bwrap, cgroup)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
