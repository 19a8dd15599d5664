"""A kernel forked from a zygote (``tests/forked_kernels.py``) runs a notebook as a fresh kernel would.

``test_notebooks`` and ``test_unanswered`` trust it with every notebook: these tests pin what that
trust rests on. The kernel computes under the profile it was started with, in its own folder, with
its own environment, as a new process that holds nothing of the notebook before it; preloading hides
no import noise; an interrupt reaches it and a killed kernel leaves no process behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from forked_kernels import PRELOADED, key_of
from jupyter_client.manager import KernelManager

from autograder.maintenance import isa
from autograder.maintenance.execute import execute

pytestmark = pytest.mark.usefixtures("forked_kernel")

PROBE = """\
import os, sys, torch
print(os.getpid(), os.getppid(), torch.backends.cpu.get_cpu_capability(), os.getcwd(), sys.path[0],
      os.environ.get("PROBE_VALUE"), torch.get_num_threads(), "leftover" in globals(), __name__)
leftover = 1
"""


def probe(folder: Path, profile: str, value: str) -> list[str]:
    """Run the probe in a kernel started as ``test_unanswered`` starts one; what it printed."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
    env = isa.environment(profile)
    env["PROBE_VALUE"] = value
    execute(nb, folder, env=env)
    return nb.cells[0].outputs[0].text.split()


def test_a_forked_kernel_is_a_new_process_under_its_profile_folder_and_environment(tmp_path: Path) -> None:
    runs = {}
    for profile, value in (("default", "a"), ("avx2", "b"), ("default", "c")):
        folder = tmp_path / value
        folder.mkdir()
        pid, parent, capability, cwd, first, seen, threads, leftover, name = probe(folder, profile, value)
        assert capability == isa.PROFILES[profile]["ATEN_CPU_CAPABILITY"].upper(), (profile, capability)
        assert (cwd, first, seen) == (str(folder), str(folder), value)
        assert threads == os.environ["OMP_NUM_THREADS"] and leftover == "False" and name == "__main__"
        runs[value] = (int(pid), int(parent))
    assert len({pid for pid, _ in runs.values()}) == 3, "every notebook gets a process of its own"
    assert runs["a"][1] == runs["c"][1] != runs["b"][1], "one zygote per profile, used again"
    assert len(list(Path(os.environ["PT2E_KERNEL_ZYGOTES"]).glob("*.sock"))) >= 2


def test_the_zygote_is_chosen_by_what_torch_reads_at_import() -> None:
    base = {"HOME": "/root", "PATH": "/usr/bin"}
    assert key_of(base) == key_of({**base, "HOME": "/tmp", "PT2E_SEED": "3"})
    for name, value in (("ATEN_CPU_CAPABILITY", "avx2"), ("OMP_NUM_THREADS", "2"), ("PYTHONPATH", "/x")):
        assert key_of(base) != key_of({**base, name: value}), name


def test_preloading_hides_no_import_noise() -> None:
    """What the zygote imports says nothing in a fresh process either, warnings included."""
    result = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import " + ", ".join(PRELOADED)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result.stderr[-2000:]
    assert "torchao" not in PRELOADED and "common" not in " ".join(PRELOADED), "noisy imports stay the notebook's"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"


def test_an_interrupt_reaches_the_kernel_and_a_killed_kernel_leaves_nothing() -> None:
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        reply = client.execute_interactive("import os; print(os.getpid())", timeout=60, output_hook=lambda m: None)
        assert reply["content"]["status"] == "ok"
        outputs: list[str] = []
        client.execute_interactive(
            "print(os.getpid())",
            timeout=60,
            output_hook=lambda m: outputs.append(m["content"].get("text", "")),
        )
        kernel = int("".join(outputs).split()[0])
        assert kernel != manager.provisioner.process.pid, "the kernel is the zygote's child, not the launcher"
        started = time.monotonic()
        message_id = client.execute("import time; time.sleep(60)")
        time.sleep(1)
        manager.interrupt_kernel()
        while True:
            message = client.get_iopub_msg(timeout=30)
            if message["parent_header"].get("msg_id") == message_id and message["msg_type"] == "error":
                assert message["content"]["ename"] == "KeyboardInterrupt"
                break
        assert time.monotonic() - started < 30
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    deadline = time.monotonic() + 10
    while _alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(kernel), "the kernel outlived its launcher"


def test_without_a_zygote_folder_the_kernel_starts_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PT2E_KERNEL_ZYGOTES")
    _, parent, capability, *_ = probe(tmp_path, "default", "x")
    assert int(parent) == os.getpid(), "the launcher became the kernel itself"
    assert capability == "DEFAULT"
