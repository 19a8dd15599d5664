"""The student's own working copy: ``work/``, made from ``release/``, never overwritten.

``pt2e-course release`` and ``make grade`` rewrite ``release/``; answers written there would be
lost. ``pt2e-course lab`` therefore opens ``work/`` (ignored by git): each release notebook is
copied there the first time, and a copy that exists is left as the student left it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from autograder.course import RELEASE, ROOT, SOURCE

WORK = ROOT / "work"


def make_working_copy(work: Path | None = None) -> list[Path]:
    """Copy the release notebooks that are not in ``work`` (default ``WORK``, read when called) yet; returns
    the ones copied."""
    work = WORK if work is None else work
    copied = []
    for path in sorted(RELEASE.glob("M*/*.ipynb")):
        target = work / path.relative_to(RELEASE)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            copied.append(target)
    return copied


def trust_solutions() -> int:
    """Sign the executed source notebooks, so JupyterLab shows their drawings as they are."""
    import nbformat
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary()
    paths = sorted(SOURCE.glob("M*/*.ipynb"))
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if not notary.check_signature(nb):
            notary.sign(nb)
    return len(paths)


def lab_command(folder: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}", *extra]


def open_lab(solutions: bool = False, extra: list[str] | None = None) -> int:
    """Start JupyterLab on ``work/`` (or on ``source/`` with ``solutions``), options passed through."""
    if solutions:
        print(f"打開 source/（含解答；{trust_solutions()} 本已執行的 notebook 已信任，圖會直接顯示）")
        folder = SOURCE
    else:
        folder = WORK
        copied = make_working_copy(folder)
        print(f"打開你的作業副本 {folder}（新複製了 {len(copied)} 本；已經在的不會被覆蓋）")
    return subprocess.call(lab_command(folder, list(extra or [])))
