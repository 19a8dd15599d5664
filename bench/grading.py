"""Grading speed: `pt2e-course grade` against plain execution and `nbgrader autograde`.

Builds a class of N students (default 20) by copying the sample class in
examples/submitted/ round-robin (full, untouched, partial, wrong-sharing, tampered,
crashing), then times, in one run on this machine:

1. `pt2e-course grade M03 --jobs 2` (sandboxed runs, evidence, hidden checks, reports);
2. plain nbclient execution of the same notebook files, two at a time (no grading);
3. `nbgrader autograde M03` (one notebook after another, hidden test cells).

and prints the wall times and the ratios. Nothing here is a test: the numbers depend on
the machine, and only their ratios mean something.

    .venv/bin/python bench/grading.py [--students 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "submitted"
MODULE = "M03"


def build_class(submitted: Path, students: int) -> list[Path]:
    samples = sorted(p for p in SAMPLE.iterdir() if p.is_dir())
    notebooks = []
    for index in range(students):
        sample = samples[index % len(samples)]
        target = submitted / f"{sample.name}-{index:02d}" / MODULE
        shutil.copytree(sample / MODULE, target)
        notebooks += sorted(target.glob("*.ipynb"))
    return notebooks


def env() -> dict[str, str]:
    return dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def time_grade(submitted: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder.cli",
            "grade",
            MODULE,
            "--submitted",
            str(submitted),
            "--out",
            str(out),
            "--jobs",
            "2",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env=env(),
    )
    return time.perf_counter() - start


def without_heartbeat() -> None:
    """Plain execution starts no heartbeat channel.

    The tampered sample writes a forged frame on every socket it finds, the kernel's heartbeat
    among them; jupyter_client's heartbeat thread then never stops, and nbclient would wait
    forever to clean up a notebook that has finished. nbclient needs no heartbeat: it watches
    the kernel process itself.
    """
    from jupyter_client.client import KernelClient

    start = KernelClient.start_channels

    def start_channels(self, shell=True, iopub=True, stdin=True, hb=True, control=True):
        return start(self, shell, iopub, stdin, False, control)

    KernelClient.start_channels = start_channels


def run_plain(path: Path) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except Exception:  # a kernel that died (os._exit): plain execution just stops there
        pass


def time_plain(notebooks: list[Path]) -> float:
    """Wall time of executing ``notebooks`` two at a time; the kernels' own output (warnings, the
    sample attackers writing on every pipe they find) goes to /dev/null: the bench prints figures."""
    without_heartbeat()
    sys.stdout.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with open(os.devnull, "w") as devnull:
        for fd in saved:
            os.dup2(devnull.fileno(), fd)
        try:
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(run_plain, notebooks))
            return time.perf_counter() - start
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def time_nbgrader(submitted: Path, course: Path) -> float:
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / MODULE, course / "source" / MODULE)
    shutil.copytree(submitted, course / "submitted")
    run_env = dict(env(), PT2E_GRADEBOOK=str(course / "gradebook.db"))
    nbgrader = [sys.executable, "-m", "nbgrader"]
    subprocess.run(
        [*nbgrader, "generate_assignment", MODULE, "--force"], check=True, capture_output=True, cwd=course, env=run_env
    )
    start = time.perf_counter()
    # nbgrader exits 1 when a submission kills its kernel (the crashing student): time it all the same
    subprocess.run(
        [*nbgrader, "autograde", MODULE, "--force"], check=False, capture_output=True, cwd=course, env=run_env
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pt2e-bench-") as tmp:
        work = Path(tmp)
        notebooks = build_class(work / "submitted", args.students)
        print(f"{args.students} 位學生、{len(notebooks)} 本 notebook（範例班級輪流複製），機器 {os.cpu_count()} 核心")
        grade = time_grade(work / "submitted", work / "graded")
        print(f"pt2e-course grade --jobs 2      {grade:8.1f} 秒")
        plain = time_plain(notebooks)
        print(f"nbclient 直接執行（兩本同時）   {plain:8.1f} 秒")
        (work / "course").mkdir()
        autograde = time_nbgrader(work / "submitted", work / "course")
        print(f"nbgrader autograde              {autograde:8.1f} 秒")
        print()
        print(f"grade / 直接執行       = {grade / plain:.2f}×（issue 8/9 的基準：0.24×，越小越好）")
        print(f"nbgrader / grade       = {autograde / grade:.2f}×（nbgrader 也走同一個沙盒，一次一本）")


if __name__ == "__main__":
    main()
