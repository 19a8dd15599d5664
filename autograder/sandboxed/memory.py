"""One memory limit for a whole submission, whatever number of processes it starts.

``RLIMIT_AS`` bounds each process on its own: three processes of one submission may hold three
times the limit. So each job gets one of two whole-job limits:

- **cgroup** (``MEMORY_CGROUP``): the grader makes a memory cgroup for the grading run (below its
  own, so that a delegated container works too; cgroup v1's memory controller or v2 with the
  memory controller enabled), and every job runs in a child cgroup of its own with the limit on
  it. The kernel counts every page the job's processes use, shared memory in its private
  ``/dev/shm`` included, and kills inside that job only when the total passes the limit.
- **sum** (``MEMORY_SUM``), where no cgroup can be made: the middle process adds up the resident
  memory of every process of the job and the files in its private temporary folders every
  ``POLL_SECONDS`` (``job_bytes``) and kills the whole job when the sum passes the limit.

Memory that no process's resident set shows, and no folder either, is refused before it exists, in
both modes: ``memfd_create`` and System V IPC by the job's seccomp filter (``confine.REFUSED_CALLS``),
kernel buffers bounded by a low limit on open files (``confine.OPEN_FILES``), files by size-capped
tmpfs folders only (``confine.tmp_megabytes``, ``confine.TMP_FILES``). SECURITY.md says what each
mode guarantees and what it does not.

Either way the job's end says ``memory``, and the feedback names the mode that applied.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

MEMORY_CGROUP = "記憶體上限：整份作業所有行程合計（cgroup）"
MEMORY_SUM = (
    "記憶體上限：整份作業所有行程的常駐記憶體加上私有暫存資料夾裡的檔案"
    "（每 0.2 秒加總，超過就整份中止；這台機器無法建立 cgroup）"
)
POLL_SECONDS = 0.2
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Controller:
    """Where this grading run's cgroups live: a folder we may create cgroups in, and its version."""

    root: Path
    version: int  # 1 or 2

    @property
    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"


def _own_path(controller: str | None) -> str | None:
    """This process's cgroup path for ``controller`` (v1) or the unified hierarchy (``None``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if controller is None and number == "0" and names == "":
            return path
        if controller is not None and controller in names.split(","):
            return path
    return None


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every cgroup file system."""
    found = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return found


def _usable(folder: Path, version: int) -> Path | None:
    """A fresh cgroup for this grading run below ``folder``, or None when we may not make one."""
    _remove_stale(folder)
    probe = folder / f"pt2e-grading-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        probe.mkdir(mode=0o755)
    except OSError:
        return None
    limit = "memory.limit_in_bytes" if version == 1 else "memory.max"
    if not (probe / limit).exists():  # v2 without the memory controller delegated here
        with contextlib.suppress(OSError):
            probe.rmdir()
        return None
    if version == 2:  # children of the run's cgroup need the memory controller too
        try:
            (probe / "cgroup.subtree_control").write_text("+memory")
        except OSError:
            with contextlib.suppress(OSError):
                probe.rmdir()
            return None
    return probe


def _remove_stale(folder: Path) -> None:
    """Remove the run cgroups of graders that ended without removing theirs (killed, say)."""
    try:
        entries = list(folder.glob("pt2e-grading-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-")[2] if entry.name.count("-") >= 3 else ""
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            remove(entry)


def create_run_cgroup() -> Controller | None:
    """A memory cgroup for this grading run (removed by ``remove``), or None where none can be made."""
    for mount, kind, options in _mounts():
        if kind == "cgroup" and "memory" in options.split(","):
            own = _own_path("memory")
            if own is None:
                continue
            made = _usable(Path(mount) / own.lstrip("/"), 1) or _usable(Path(mount), 1)
            if made is not None:
                return Controller(made, 1)
    for mount, kind, _ in _mounts():
        if kind == "cgroup2":
            own = _own_path(None)
            if own is None:
                continue
            _enable_memory_below(Path(mount) / own.lstrip("/"))
            made = _usable(Path(mount) / own.lstrip("/"), 2)
            if made is not None:
                return Controller(made, 2)
    return None


def _enable_memory_below(own: Path) -> None:
    """Make the memory controller available to new cgroups below ``own`` (cgroup v2) where it is offered to
    ``own`` but not passed on, and this process is the only one in ``own``: a scope made for the grader
    (``systemd-run --user --scope -p Delegate=yes pt2e-course grade …``) or a container's delegated cgroup.

    cgroup v2 passes a controller on only from a cgroup that holds no process itself, so this process first
    moves into a leaf of its own (``pt2e-grading-<pid>-grader``, removed by a later run once it has ended).
    Nothing changes where other processes share ``own`` (moving them is not ours to decide) or ``own`` is
    not ours to write.
    """
    try:
        if "memory" not in (own / "cgroup.controllers").read_text().split():
            return
        if "memory" in (own / "cgroup.subtree_control").read_text().split():
            return
        if (own / "cgroup.procs").read_text().split() != [str(os.getpid())]:
            return
    except OSError:
        return
    leaf = own / f"pt2e-grading-{os.getpid()}-grader"
    try:
        leaf.mkdir(mode=0o755)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        with contextlib.suppress(OSError):
            leaf.rmdir()
        return
    try:
        (own / "cgroup.subtree_control").write_text("+memory")
    except OSError:  # back where it was: nothing of the machine's is left changed
        with contextlib.suppress(OSError):
            (own / "cgroup.procs").write_text(str(os.getpid()))
            leaf.rmdir()


def advice() -> str:
    """What the instructor can do to get the cgroup mode, in one Chinese sentence (printed with ``MEMORY_SUM``)."""
    if shutil.which("systemd-run"):
        return (
            "要讓核心直接計算每份作業的記憶體（cgroup），請用 "
            "systemd-run --user --scope -p Delegate=yes pt2e-course grade … 執行評分（SECURITY.md 有說明）"
        )
    return "要讓核心直接計算每份作業的記憶體（cgroup），請把可寫的 cgroup 委派給評分程式（SECURITY.md 有說明）"


def remove(folder: Path) -> None:
    """Remove a cgroup folder and the empty job cgroups left in it (a cgroup holds no files to delete)."""
    for child in sorted(folder.glob("job-*"), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        folder.rmdir()


class JobCgroup:
    """The cgroup of one job, made by its middle process, which moves itself into it before it forks
    the student (so every process of the job is inside from its first instruction)."""

    def __init__(self, controller: Controller, number: int, limit_bytes: int) -> None:
        self.path = controller.root / f"job-{number}"
        self.version = controller.version
        self.path.mkdir(mode=0o700)
        (self.path / controller.limit_file).write_text(str(limit_bytes))
        if self.version == 1 and (self.path / "memory.memsw.limit_in_bytes").exists():
            with contextlib.suppress(OSError):  # no swap to escape to
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        events = "memory.oom_control" if self.version == 1 else "memory.events"
        self._events = os.open(self.path / events, os.O_RDONLY)  # readable after the folder is hidden
        (self.path / "cgroup.procs").write_text("0")  # this process; its children inherit it

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this job for going over the limit."""
        try:
            text = os.pread(self._events, 4096, 0).decode("ascii", "replace")
        except OSError:
            return False
        for line in text.splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill" and count.strip().isdigit():
                return int(count) > 0
        return False


def _read(proc: int, path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY, dir_fd=proc)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def tree_rss(root: int, proc: int) -> int:
    """Resident bytes of process ``root`` and every process below it.

    ``proc`` is a descriptor of the ``/proc`` the caller saw when it forked ``root``: the job mounts
    a ``/proc`` of its own pid namespace over it later, in the mount namespace the two share.
    """
    children: dict[int, list[int]] = {}
    try:
        entries = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return 0
    for pid in entries:
        try:
            stat = _read(proc, f"{pid}/stat")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            total += int(_read(proc, f"{pid}/statm").split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
        stack += children.get(pid, [])
    return total


def folder_bytes(folders: list[str]) -> int:
    """Bytes held by the files in ``folders`` (each a private tmpfs of the job; unlinked files still open
    included): memory that no process's resident set shows."""
    total = 0
    for folder in folders:
        try:
            usage = os.statvfs(folder)
        except OSError:
            continue
        total += (usage.f_blocks - usage.f_bfree) * usage.f_frsize
    return total


def job_bytes(root: int, proc: int, folders: list[str]) -> int:
    """What the summing fallback holds against the job's limit: the resident bytes of its processes
    (``tree_rss``) and the files in its private tmpfs folders (``folder_bytes``). A tmpfs page a process also
    maps counts twice: the sum errs on the job's side of the limit, never on the machine's."""
    return tree_rss(root, proc) + folder_bytes(folders)
