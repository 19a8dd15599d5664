"""Confining the process that runs a submission: limits, no network, no privileges.

``confine`` is called in the child process just before the first student cell runs.
Each measure is applied where the OS allows it and reported either way, so a grader
running unprivileged still gets the limits it can have.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import stat
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Limits:
    """What one submission may use."""

    cell_seconds: int = 120
    notebook_seconds: int = 600
    memory_mb: int = 3072
    output_kb: int = 256
    file_mb: int = 64
    processes: int = 512


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


def _no_network() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(CLONE_NEWNET) == 0
    except (OSError, AttributeError):
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
    import sysconfig

    import torch

    import autograder

    paths = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    paths |= {Path(torch.__file__).parent, Path(autograder.__file__).parent.parent}
    return sorted(paths)


def _drop_privileges(workdir: Path) -> bool:
    try:
        for path in [workdir, *workdir.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        return True
    except (OSError, PermissionError):
        return False


def confine(limits: Limits, workdir: Path) -> list[str]:
    """Apply every measure this OS allows; returns the ones that could not be applied."""
    missing = []
    os.chdir(workdir)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the grader's terminal is not the submission's to write on
        os.dup2(devnull, fd)
    os.close(devnull)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails instead of killing
    memory = _virtual_size_bytes() + limits.memory_mb * 1024 * 1024
    if not _set(resource.RLIMIT_AS, memory):
        missing.append("記憶體上限")
    _set(resource.RLIMIT_FSIZE, limits.file_mb * 1024 * 1024)
    _set(resource.RLIMIT_CORE, 0)
    _set(resource.RLIMIT_CPU, limits.notebook_seconds * 2)
    if os.getuid() == 0:
        if not _no_network():
            missing.append("斷網（network namespace）")
        blocked = unreadable_by_others(code_paths())
        if blocked is not None:
            missing.append(f"改用無權限的使用者（其他使用者讀不到 {blocked}，Python 或課程裝在那裡）")
        elif not _drop_privileges(workdir):
            missing.append("改用無權限的使用者")
        _set(resource.RLIMIT_NPROC, limits.processes)
    else:
        if not _no_network():
            missing.append("斷網（需要 root 才能建立 network namespace）")
    home = str(workdir)
    os.environ.update(
        HOME=home,
        TMPDIR=home,
        MPLCONFIGDIR=str(workdir / ".matplotlib"),
        XDG_CACHE_HOME=str(workdir / ".cache"),
        MPLBACKEND="Agg",
    )
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        os.environ.pop(proxy, None)
    return missing
