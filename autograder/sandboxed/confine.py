"""Confining one submission inside the sandbox: namespaces, private temporary folders, its own user, limits.

The fork server (``autograder.sandboxed.server``) runs each job in two processes, and each
calls one half of this module:

- ``isolate`` in the *middle* process (the server's child, still trusted): new mount, pid,
  network and IPC namespaces, fresh size-capped tmpfs on ``/tmp``, ``/var/tmp`` and
  ``/dev/shm``, and (when the server is not already in bubblewrap) empty mounts over the
  course's secrets. The process it forks next is pid 1 of the new pid namespace: when it
  ends, the kernel kills everything it started, double-forked daemons included.
- ``confine`` in that *student* process, before the first student cell: its own ``/proc``,
  a user id of its own (one per job, so no sandbox can signal another), no capabilities,
  ``no_new_privs``, death with the middle process, resource limits, a fresh work folder.

Each measure is applied where the OS allows it; the ones that could not be are returned by
name (in Chinese, for the feedback), and grading goes on with the rest.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.sandboxed.limits import Limits

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SETUID, CAP_SETPCAP, CAP_SYS_ADMIN = 7, 8, 21
CAP_LAST = 63
LINUX_CAPABILITY_VERSION_3 = 0x20080522

PRIVATE_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
TMP_FILES = 8192
"""Files (inodes) in each private tmpfs: a file holds kernel memory even when empty, which no size cap counts."""

OPEN_FILES = 256
"""Open files per process of a job. Python, torch and the course's cases use a few dozen; the bound keeps the
kernel buffers a job can fill without showing them in any resident set (pipes, socket pairs) to tens of MB."""

JOB_UID_BASE = 200_000
JOBS_PER_SLOT = 1024
SERVER_SLOT = int.from_bytes(os.urandom(4), "little") % 30_000
"""Job n of a sandbox server runs as user 200000 + 1024 × slot + n mod 1024, the slot drawn when the server
starts: no two jobs of one server that can run at once share a user, nor (but once in 30,000) do the jobs of
two servers on one machine (two grading runs at once), so no job can signal another."""


def job_uid(job: int) -> int:
    """The user job number ``job`` of this server runs as (``SERVER_SLOT``)."""
    return JOB_UID_BASE + JOBS_PER_SLOT * SERVER_SLOT + job % JOBS_PER_SLOT


# Names of the measures, for the feedback and the command's output.
BWRAP = "只看得到課程程式的唯讀檔案系統（bubblewrap）"
HIDDEN = "藏起答案、隱藏測試與其他學生的檔案"
READ_ONLY = "唯讀的檔案系統（/tmp 等私有資料夾之外）"
PRIVATE_TMP = "每份作業私有、有大小上限的 /tmp、/var/tmp、/dev/shm"
PID_NS = "獨立的行程空間（作業啟動的行程都跟著結束，也看不到、碰不到其他行程）"
NET_NS = "斷網（network namespace）"
IPC_NS = "獨立的 IPC（System V／POSIX 共用記憶體）"
OWN_PROC = "只看得到自己行程的 /proc"
OWN_USER = "每份作業各自的無權限使用者"
NO_CAPS = "拿掉所有特權（capabilities）"
NO_NEW_PRIVS = "禁止取得新權限（no_new_privs）"
DIES_WITH_GRADER = "評分程式結束時作業跟著結束"
MEMORY = "記憶體上限"
JOB_CGROUP = "這份作業自己的記憶體 cgroup（建立失敗，這份改用每 0.2 秒加總）"
LIMITS = "CPU 時間、檔案大小、行程數、開啟檔案數上限"
UNCOUNTED_MEMORY = "拒絕任何行程的記憶體都不會顯示的配置（memfd、System V IPC、POSIX 訊息佇列；seccomp）"

DISABLE_ENV = "PT2E_SANDBOX_DISABLE"
"""Comma-separated measures to leave out on purpose, to test the fallbacks: ``bwrap`` (run the
server directly), ``sys_admin`` (the server drops CAP_SYS_ADMIN, as in a container),
``userns`` (no unprivileged user namespace), ``setuid`` (the server drops CAP_SETUID), ``seccomp`` (no
seccomp filter: memfd and System V IPC allowed), ``cgroup`` (no memory cgroup: the summing fallback),
``job_cgroup`` (the run's cgroup is made, each job's is not: that job falls back to the sum and says so)."""


@dataclass
class Isolation:
    """What the middle process managed to set up for one job."""

    uid: int
    missing: list[str] = field(default_factory=list)
    pid_namespace: bool = False
    mount_namespace: bool = False
    uid_dropped: bool = False
    """True when the middle process already runs as the job's user (the user-namespace fallback)."""
    private: list[str] = field(default_factory=list)
    """The private, size-capped tmpfs folders made for the job (``PRIVATE_FOLDERS``): what the job writes there
    is memory, which the summing fallback of ``memory`` adds to the job's resident sets."""


_libc = ctypes.CDLL(None, use_errno=True)


def _call(result: int) -> int:
    """0 when a libc call succeeded, else its errno."""
    return 0 if result == 0 else (ctypes.get_errno() or errno.EPERM)


def unshare(flags: int) -> int:
    return _call(_libc.unshare(ctypes.c_int(flags)))


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> int:
    encode = lambda text: None if text is None else text.encode()  # noqa: E731
    return _call(_libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)))


def prctl(option: int, arg: int = 0) -> int:
    return _call(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), 0))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def capabilities() -> int:
    """The effective capability set of this process, as a bit mask."""
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        return 0
    return data[0].effective | (data[1].effective << 32)


def has_capability(cap: int) -> bool:
    return bool(capabilities() >> cap & 1)


def drop_capabilities(only: tuple[int, ...] | None = None) -> bool:
    """Remove ``only`` (or every) capability from the bounding, ambient, effective, permitted and
    inheritable sets. True when the effective set no longer holds any of them."""
    caps = range(CAP_LAST + 1) if only is None else only
    for cap in caps:
        prctl(PR_CAPBSET_DROP, cap)  # needs CAP_SETPCAP; unknown numbers fail harmlessly
    if only is None:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        return False
    for cap in caps:
        word, bit = divmod(cap, 32)
        if word < 2:
            mask = ~(1 << bit) & 0xFFFFFFFF
            data[word].effective &= mask
            data[word].permitted &= mask
            data[word].inheritable &= mask
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    _libc.capset(ctypes.byref(header), data)
    left = capabilities()
    return not any(left >> cap & 1 for cap in caps)


def disabled() -> set[str]:
    """The measures left out on purpose (``PT2E_SANDBOX_DISABLE``), to test the fallbacks."""
    return {part.strip() for part in os.environ.get(DISABLE_ENV, "").split(",") if part.strip()}


# --- memory that no process's RSS shows: refused at the system call (seccomp) -----------------------

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
X32_SYSCALL_BIT = 0x40000000

REFUSED_CALLS = (
    "memfd_create",
    "memfd_secret",
    "shmget",
    "shmat",
    "shmctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
)
"""System calls a job is refused (``EPERM``, so Python raises ``PermissionError``): each makes memory that
no process's resident set shows (an anonymous in-memory file; System V shared memory, semaphore sets and
message queues, up to gigabytes of them per IPC namespace; POSIX message queues). Under the summing fallback
of ``memory`` nothing would count them; under a cgroup they are refused as well. Neither torch, torchao,
ExecuTorch's import nor the course's cases use them (``tests/test_memory_escape.py`` grades with the filter
on); POSIX shared memory and semaphores are files in the job's capped ``/dev/shm`` and stay allowed."""

SYSCALL_NUMBERS = {
    # (AUDIT_ARCH_*, system call numbers of that ABI)
    "x86_64": (
        0xC000003E,
        {
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "semtimedop": 220,
            "mq_open": 240,
            "memfd_create": 319,
            "memfd_secret": 447,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "mq_open": 180,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "memfd_create": 279,
            "memfd_secret": 447,
        },
    ),
}


def _instruction(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The classic BPF program of the job's seccomp filter for ``machine`` (this one by default), or None
    on an architecture this module does not know.

    It refuses ``REFUSED_CALLS`` with ``EPERM`` and every system call made through another ABI than the
    native one (``int 0x80`` on x86-64, the x32 numbers), which would otherwise reach the same calls under
    other numbers; everything else is allowed.
    """
    arch, numbers = SYSCALL_NUMBERS.get(machine or os.uname().machine, (0, {}))
    if not numbers:
        return None
    refused = sorted({numbers[name] for name in REFUSED_CALLS})
    deny = _instruction(_RET_K, SECCOMP_RET_ERRNO | errno.EPERM)
    # seccomp_data: int nr at offset 0, u32 arch at offset 4
    checks = [_instruction(_LD_W_ABS, 0)]
    if arch == SYSCALL_NUMBERS["x86_64"][0]:
        checks.append(_instruction(_JGE_K, X32_SYSCALL_BIT, jt=len(refused) + 1))
    for index, number in enumerate(refused):
        checks.append(_instruction(_JEQ_K, number, jt=len(refused) - index))
    head = [_instruction(_LD_W_ABS, 4), _instruction(_JEQ_K, arch, jt=1), deny]
    return b"".join([*head, *checks, _instruction(_RET_K, SECCOMP_RET_ALLOW), deny])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def refuse_uncounted_memory() -> bool:
    """Install the job's seccomp filter (``seccomp_program``) on this process and all it will start; needs
    ``no_new_privs`` (or CAP_SYS_ADMIN). True when it is in force."""
    program = seccomp_program()
    if program is None or "seccomp" in disabled():
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    result = _libc.prctl(
        ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), ctypes.c_ulong(0), 0
    )
    return result == 0


# --- the middle process -----------------------------------------------------------------------------


def _needed() -> list[str]:
    """Folders a job imports from: the Python environment and the course's packages."""
    import autograder
    import common
    import selfcheck

    folders = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    folders |= {os.path.dirname(os.path.realpath(m.__file__ or "")) for m in (autograder, common, selfcheck)}
    return sorted(folders)


def _under(folder: str, path: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _fresh_tmpfs(path: str, megabytes: int) -> bool:
    """A new, size-capped tmpfs on ``path``. What the job needs from under ``path`` (a course
    checked out in /tmp) is bound back into it, read-only, through handles opened before."""
    try:
        os.makedirs(path, exist_ok=True)
        handles = [
            (folder, os.open(folder, os.O_PATH | os.O_DIRECTORY)) for folder in _needed() if _under(path, folder)
        ]
    except OSError:
        return False
    try:
        options = f"size={megabytes}m,nr_inodes={TMP_FILES},mode=1777"
        if mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            return False
        folders = {folder for folder, _ in handles}
        tops = {os.path.join(path, os.path.relpath(f, path).split(os.sep)[0]) for f in folders} - folders
        for top in tops:  # the folders on the way are a read-only skeleton, not the job's to write in
            os.makedirs(top, mode=0o755, exist_ok=True)
            if mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=1024,mode=0755") != 0:
                raise OSError("skeleton")
        for folder, handle in handles:
            os.makedirs(folder, mode=0o755, exist_ok=True)
            if mount(f"/proc/self/fd/{handle}", folder, None, MS_BIND | MS_REC) != 0:
                raise OSError("bind")
            mount(None, folder, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        for top in tops:
            mount(None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        return True
    except OSError:  # MNT_DETACH: the job must find its code, private /tmp or not
        _libc.umount2(path.encode(), 2)
        return False
    finally:
        for _, handle in handles:
            os.close(handle)


def tmp_megabytes(limits: Limits) -> int:
    """The size of each private tmpfs: ``tmp_mb``, and at most a quarter of the job's memory limit, so that the
    three of them stay within it (their pages count against it in both memory modes)."""
    return max(1, min(limits.tmp_mb, limits.memory_mb // 4))


def _read_only_dev() -> None:
    """Remount ``/dev`` read-only in the job's mount namespace (bubblewrap's ``--dev`` is a tmpfs without a size
    cap; the device nodes on it stay usable). Nothing to name when it fails: a job's user cannot write there."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[4] == "/dev":
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for option in fields[5].split(","):
                flags |= MOUNT_FLAGS.get(option, 0)
            mount(None, "/dev", None, flags)


def _hide(path: str) -> bool:
    """Put an empty read-only mount over ``path`` (a folder) or ``/dev/null`` over it (a file)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISDIR(mode):
        return mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") == 0
    if stat.S_ISLNK(mode):
        return True  # a link only leads somewhere that is hidden on its own or was never secret
    return mount("/dev/null", path, None, MS_BIND) == 0


MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048}
MOUNT_FLAGS |= {"relatime": 1 << 21, "strictatime": 1 << 24}
MS_REMOUNT = 32


def _read_only_everywhere() -> bool:
    """Remount every mount of this (private) mount namespace read-only, except /proc, /sys and /dev
    (without bubblewrap, the only way a job cannot write on the grader's files)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    ok = True
    for line in lines:
        fields = line.split()
        target = fields[4].encode().decode("unicode_escape")
        if any(target == top or target.startswith(top + "/") for top in ("/proc", "/sys", "/dev")):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in fields[5].split(","):
            flags |= MOUNT_FLAGS.get(option, 0)
        if mount(None, target, None, flags) != 0:
            ok = False
    return ok


def _user_namespace(uid: int, flags: int) -> tuple[bool, bool]:
    """Become ``uid`` (when allowed), then enter a user namespace of its own with ``flags``.

    Returns (namespaces entered, user ids mapped): once ``unshare`` succeeded there is no way back,
    even when writing the maps fails.
    """
    if os.getuid() != uid and not _become(uid):
        return False, False
    user, group = os.getuid(), os.getgid()
    if unshare(CLONE_NEWUSER | flags) != 0:
        return False, False
    prctl(PR_SET_DUMPABLE, 1)  # a change of user made /proc/self root's: make it ours to write the maps
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{user} {user} 1")
        Path("/proc/self/gid_map").write_text(f"{group} {group} 1")
        return True, True
    except OSError:
        return True, False
    finally:
        prctl(PR_SET_DUMPABLE, 0)


_user_namespaces: bool | None = None


def user_namespaces_work() -> bool:
    """Whether this process could enter a user namespace with the job's namespaces (tried once, in a
    throwaway child: changing users first is irreversible, so it is done only when this works)."""
    global _user_namespaces
    if _user_namespaces is None:
        pid = os.fork()
        if pid == 0:
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
            os._exit(0 if unshare(flags) == 0 else 1)
        _user_namespaces = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    return _user_namespaces


def isolate(job: int, limits: Limits, hide: list[str], *, in_bwrap: bool) -> Isolation:
    """Called in the middle process, before it forks the student: namespaces and private mounts."""
    iso = Isolation(uid=job_uid(job))
    off = disabled()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
    entered = unshare(flags) == 0
    if not entered and "userns" not in off and user_namespaces_work():
        # No CAP_SYS_ADMIN (a container): an unprivileged user namespace gives the same namespaces,
        # entered as the job's own user when this process may still change users.
        switch = has_capability(CAP_SETUID) and "setuid" not in off and unreadable_by_others(code_paths()) is None
        entered, mapped = _user_namespace(iso.uid if switch else os.getuid(), flags)
        iso.uid_dropped = os.getuid() == iso.uid
        if entered and not mapped:
            iso.missing.append(PRIVATE_TMP)
            iso.pid_namespace = True
            return iso  # unmapped: no mount can be made; only the namespaces themselves hold
    if not entered:
        iso.missing += [PID_NS, NET_NS, IPC_NS, PRIVATE_TMP, OWN_PROC]
        if not in_bwrap:
            iso.missing += [HIDDEN, READ_ONLY]
        return iso
    iso.pid_namespace = iso.mount_namespace = True
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    if not in_bwrap and not _read_only_everywhere():
        iso.missing.append(READ_ONLY)
    private = [_fresh_tmpfs(path, tmp_megabytes(limits)) for path in PRIVATE_FOLDERS]
    if not all(private):
        iso.missing.append(PRIVATE_TMP)
    iso.private = [path for path, made in zip(PRIVATE_FOLDERS, private, strict=True) if made]
    _read_only_dev()
    if hide and not all([_hide(path) for path in hide]):
        iso.missing.append(HIDDEN)
    return iso


def kill_user(uid: int) -> None:
    """Kill every process of ``uid`` (the fallback when there is no pid namespace): a child that
    becomes ``uid`` and signals all it may signal, until nothing is left."""
    if uid == 0:
        return
    if os.getuid() == uid:  # already that user (the user-namespace fallback): kill(-1) spares the caller
        try:
            for _ in range(1000):
                os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(1000):
                os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


# --- the student process ----------------------------------------------------------------------------


def _virtual_size_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _set(limit: int, value: int) -> bool:
    try:
        _soft, hard = resource.getrlimit(limit)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(limit, (value, value))
        return True
    except (ValueError, OSError):
        return False


def unreadable_by_others(paths: list[Path]) -> Path | None:
    """The first of ``paths`` another user could not read (a directory on the way not
    traversable, or the path itself not readable), or None when all are readable."""
    for path in paths:
        path = path.resolve()
        for parent in reversed(path.parents):
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return parent
        mode = os.stat(path).st_mode
        if not mode & stat.S_IROTH or (stat.S_ISDIR(mode) and not mode & stat.S_IXOTH):
            return path
    return None


def code_paths() -> list[Path]:
    """Where the Python code a submission may still import lives."""
    import sys
    import sysconfig

    import common
    import selfcheck

    paths = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    paths |= {Path(common.__file__).parent, Path(selfcheck.__file__).parent, Path(__file__).parent}
    torch = sys.modules.get("torch")
    if torch is not None and torch.__file__:
        paths.add(Path(torch.__file__).parent)
    return sorted(paths)


def _become(uid: int) -> bool:
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        return os.getuid() == os.geteuid() == uid
    except OSError:
        return False


def confine(limits: Limits, iso: Isolation, workdir: str) -> list[str]:
    """Called in the student process before its first cell; returns the measures not applied."""
    missing = list(iso.missing)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the grader's terminal is not the submission's to write on
        os.dup2(devnull, fd)
    os.close(devnull)
    if not iso.pid_namespace:
        os.setsid()  # at least its process group can be killed as a whole
    elif mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC) != 0:
        missing.append(OWN_PROC)
    memory = _virtual_size_bytes() + limits.memory_mb * 1024 * 1024
    if not _set(resource.RLIMIT_AS, memory):
        missing.append(MEMORY)
    counted = [
        _set(resource.RLIMIT_FSIZE, limits.file_mb * 1024 * 1024),
        _set(resource.RLIMIT_CORE, 0),
        _set(resource.RLIMIT_CPU, limits.notebook_seconds * 2),
        _set(resource.RLIMIT_NOFILE, OPEN_FILES),
    ]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing
    own_user = iso.uid_dropped
    if not own_user and os.getuid() == 0 and "setuid" not in disabled():
        blocked = unreadable_by_others(code_paths())
        if blocked is not None:
            missing.append(f"{OWN_USER}（其他使用者讀不到 {blocked}，Python 或課程裝在那裡）")
        else:
            for cap in range(CAP_LAST + 1):  # the bounding set: nothing a later exec could regain
                prctl(PR_CAPBSET_DROP, cap)
            own_user = _become(iso.uid)  # clears the effective, permitted and ambient sets
            if not own_user:
                missing.append(OWN_USER)
    elif not own_user:
        missing.append(OWN_USER)
    if own_user:
        counted.append(_set(resource.RLIMIT_NPROC, limits.processes))  # counts this job's user only
    if not all(counted):
        missing.append(LIMITS)
    if capabilities() and not drop_capabilities():
        missing.append(NO_CAPS)
    if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        missing.append(NO_NEW_PRIVS)
    if not refuse_uncounted_memory():
        missing.append(UNCOUNTED_MEMORY)
    # after the last change of user, which clears it: die when the middle process dies
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        missing.append(DIES_WITH_GRADER)
    os.mkdir(workdir, 0o700)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(
        HOME=workdir,
        TMPDIR=workdir,
        USER="student",
        LOGNAME="student",
        PATH="/usr/local/bin:/usr/bin:/bin",
        LANG="C.UTF-8",
        MPLCONFIGDIR=os.path.join(workdir, ".matplotlib"),
        XDG_CACHE_HOME=os.path.join(workdir, ".cache"),
        MPLBACKEND="Agg",
    )
    return missing
