"""Jupyter kernels forked from a process that has already imported torch: for the tests that run notebooks.

``test_notebooks`` and ``test_unanswered`` run every notebook in a fresh python3 kernel, and a
fresh kernel spends about 2.7 s importing torch (``torch._dynamo`` and ``torch.export`` come with
the first export) before the notebook's first cell does anything: two minutes of each suite run.
Here a kernel is a fork of a *zygote* that imported those modules once (the sandbox's fork server
does the same for graded runs). Each kernel is still a new process with nothing of another
notebook: the zygote runs no notebook code and starts no thread.

Only modules that import silently are preloaded (``PRELOADED``; ``test_forked_kernels`` checks
it), so a notebook's import noise still reaches its cells: ``torchao``, ``matplotlib`` and the
course's own packages are imported by the notebook, as in a fresh kernel.

How a kernel starts: jupyter_client runs this file as the kernelspec's command (``launch``). The
launcher finds the zygote of its environment (the variables torch reads when it is imported:
``KEYED``), starting one if there is none, and hands it the connection file, the working folder,
the environment and its own stdin / stdout / stderr. The zygote forks; the child becomes the
kernel. The launcher stays as the process jupyter_client knows: it passes interrupts on to the
kernel and exits with the kernel's exit code. Killed, it closes a pipe whose other end the kernel
watches, and the kernel ends too. Whatever goes wrong before the fork, the launcher becomes an
ordinary kernel instead (``os.execv``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

DIRECTORY = "PT2E_KERNEL_ZYGOTES"
"""The environment variable naming the folder of the zygotes' sockets (set by ``kernelspec``)."""

PRELOADED = ("torch", "torch._dynamo", "torch.export", "ipykernel.kernelapp")
"""What a zygote imports before it forks: each imports without a word on stdout, stderr or warnings."""

KEYED_NAMES = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "LD_PRELOAD", "LD_LIBRARY_PATH")
KEYED_PREFIXES = ("ATEN_", "ONEDNN_", "DNNL_", "MKL_", "OMP_", "KMP_", "TORCH", "PYTORCH_")
"""Variables a zygote's imports may read: kernels whose values differ come from different zygotes."""

IDLE_SECONDS = 900
"""A zygote with no kernel and no request for this long exits (the tests stop it sooner)."""


def key_of(environment: dict[str, str]) -> str:
    """The zygote of ``environment``: a digest of the variables its imports may read."""
    keyed = sorted(
        (name, value) for name, value in environment.items() if name in KEYED_NAMES or name.startswith(KEYED_PREFIXES)
    )
    return hashlib.sha256(json.dumps(keyed).encode()).hexdigest()[:16]


def kernelspec(folder: Path) -> Path:
    """A Jupyter data folder under ``folder`` whose ``python3`` kernel is forked from a zygote.

    Put it first in ``JUPYTER_PATH`` and set ``DIRECTORY`` to ``folder`` (``conftest.forked_kernel``)."""
    spec = folder / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "launch", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python"}),
        encoding="utf-8",
    )
    return folder / "jupyter"


def stop_zygotes(folder: Path) -> None:
    """End every zygote of ``folder`` (kernels forked from them end with their launchers)."""
    for pid_file in folder.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except (ValueError, OSError):
            pass
        pid_file.unlink(missing_ok=True)


# --- the launcher: the process jupyter_client starts ------------------------------------------------


def _fresh_kernel(connection_file: str) -> None:
    """Become an ordinary kernel, as the default kernelspec starts one."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file])


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except OSError:
        sock.close()
        return None


def _zygote_socket(folder: Path, key: str) -> socket.socket | None:
    """A connection to the zygote of ``key``, started first if there is none (one starter at a time)."""
    path = folder / f"{key}.sock"
    sock = _connect(path)
    if sock is not None:
        return sock
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _connect(path)
        if sock is not None:
            return sock
        path.unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "zygote", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        (folder / f"{key}.pid").write_text(str(process.pid))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            sock = _connect(path)
            if sock is not None:
                return sock
            time.sleep(0.05)
    return None


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def launch(connection_file: str) -> None:
    """Start a kernel forked from this environment's zygote, then stand for it until it ends."""
    folder = os.environ.get(DIRECTORY)
    sock = _zygote_socket(Path(folder), key_of(dict(os.environ))) if folder else None
    if sock is None:
        _fresh_kernel(connection_file)
    lifeline_read, _lifeline_write = os.pipe()  # the write end stays open as long as this process lives
    request = {"connection_file": connection_file, "cwd": os.getcwd(), "environment": dict(os.environ)}
    try:
        socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], [0, 1, 2, lifeline_read])
        reply = _read_line(sock)
        kernel = int(json.loads(reply)["pid"])
    except (OSError, ValueError, KeyError):
        _fresh_kernel(connection_file)
    os.close(lifeline_read)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(kernel, signum)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, forward)
    status = _read_line(sock)
    try:
        code = int(json.loads(status)["code"])
    except (ValueError, KeyError):
        code = 1
    os._exit(code)


# --- the zygote ----------------------------------------------------------------------------------


def _kernel(connection: socket.socket, listener: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: take the launcher's streams, folder and environment; run the kernel."""
    listener.close()
    connection.close()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    lifeline = fds[3]
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)

    def watch() -> None:
        while os.read(lifeline, 1):
            pass
        os._exit(1)  # the launcher is gone: jupyter_client has killed the kernel

    threading.Thread(target=watch, daemon=True).start()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["environment"])
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"]]
    sys.path[0] = request["cwd"]  # what `python -m ipykernel_launcher` puts first
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
    os._exit(0)


def _wait_and_report(pid: int, connection: socket.socket, running: set[int]) -> None:
    _, status = os.waitpid(pid, 0)
    running.discard(pid)
    code = os.waitstatus_to_exitcode(status)
    try:
        connection.sendall(json.dumps({"code": code if code >= 0 else 128 - code}).encode() + b"\n")
    except OSError:
        pass
    connection.close()


def zygote(path: str) -> None:
    """Import ``PRELOADED``, then fork a kernel for every launcher that connects to ``path``."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    listener.settimeout(30)
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    running: set[int] = set()
    idle_since = time.monotonic()
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            if running:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > IDLE_SECONDS:
                os._exit(0)
            continue
        idle_since = time.monotonic()
        connection.settimeout(None)
        try:
            message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 4)
            if not message.endswith(b"\n"):
                message += _read_line(connection)
            request = json.loads(message)
        except (OSError, ValueError):
            connection.close()
            continue
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            connection.close()
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _kernel(connection, listener, request, fds)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        running.add(pid)
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        threading.Thread(target=_wait_and_report, args=(pid, connection, running), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1:2] == ["launch"]:
        launch(sys.argv[2])
    elif sys.argv[1:2] == ["zygote"]:
        zygote(sys.argv[2])
    else:
        raise SystemExit(f"usage: {sys.argv[0]} launch CONNECTION_FILE | zygote SOCKET")
