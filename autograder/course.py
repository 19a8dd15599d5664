"""Where the course lives: the repository root, its modules and notebooks."""

from __future__ import annotations

import os
from pathlib import Path


def _find_root() -> Path:
    env = os.environ.get("PT2E_COURSE_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "nbgrader_config.py").exists():
        return here
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / "nbgrader_config.py").exists():
            return folder
    return here


ROOT = _find_root()
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"


def modules() -> list[str]:
    """Module folders under source/, e.g. ``["M03"]``."""
    return sorted(p.name for p in SOURCE.iterdir() if p.is_dir() and p.name.startswith("M"))


def source_notebooks(module: str | None = None) -> list[Path]:
    """Source notebooks in course order."""
    folders = [SOURCE / module] if module else [SOURCE / m for m in modules()]
    return sorted(p for folder in folders for p in folder.glob("*.ipynb"))


def notebook_id(path: Path) -> str:
    """``source/M03/M03-4.ipynb`` → ``"M03-4"``."""
    return path.stem


def preload_sandbox_modules() -> None:
    """Import every hidden-case module now (the fork server does this once).

    Only what the sandbox may see: the cases, never ``autograder.keys`` or
    ``autograder.checks``.
    """
    import importlib
    import pkgutil

    import autograder.untrusted.cases

    package = autograder.untrusted.cases
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
