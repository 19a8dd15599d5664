"""Where the course lives: the repository root, its modules and notebooks."""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "PT2E_COURSE_ROOT"


class CourseNotFound(RuntimeError):
    """No checkout of the course repository here; the message (one Chinese line) says what to do."""


def is_course_root(folder: Path) -> bool:
    """A checkout of the course: ``nbgrader_config.py`` beside a ``source/`` folder."""
    return (folder / "nbgrader_config.py").is_file() and (folder / "source").is_dir()


def _find_root() -> Path | None:
    """``$PT2E_COURSE_ROOT``, else the checkout this package sits in, else the current folder or a parent.

    None when none of them is a checkout (the package was installed from a wheel and is run
    outside the repository): ``require_root`` then says so in one line.
    """
    env = os.environ.get(ROOT_ENV)
    if env:
        folder = Path(env).expanduser().resolve()
        return folder if is_course_root(folder) else None
    here = Path(__file__).resolve().parent.parent
    if is_course_root(here):
        return here
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if is_course_root(folder):
            return folder
    return None


_FOUND = _find_root()
ROOT = _FOUND or Path(__file__).resolve().parent.parent
"""The course checkout (where it would be when none was found: see ``require_root``)."""


def require_root() -> Path:
    """The course checkout; raises ``CourseNotFound`` with a one-line Chinese message when there is none."""
    if _FOUND is not None:
        return _FOUND
    env = os.environ.get(ROOT_ENV)
    if env:
        raise CourseNotFound(
            f"{ROOT_ENV}={env} 不是課程 repository 的 checkout（那裡要有 source/ 與 nbgrader_config.py）"
        )
    raise CourseNotFound(
        "這個指令要在課程 repository 的 checkout 裡執行（有 source/ 與 nbgrader_config.py 的資料夾，"
        f"例如 git clone 下來的課程 repository 根目錄），在 {Path.cwd()} 及其上層都找不到；"
        f"請 cd 到 checkout 裡，或用 {ROOT_ENV} 指定它的位置"
    )


SOURCE = ROOT / "source"
RELEASE = ROOT / "release"


def modules() -> list[str]:
    """Module folders under source/, e.g. ``["M03"]``."""
    require_root()
    return sorted(p.name for p in SOURCE.iterdir() if p.is_dir() and p.name.startswith("M"))


def source_notebooks(module: str | None = None) -> list[Path]:
    """Source notebooks in course order."""
    folders = [SOURCE / module] if module else [SOURCE / m for m in modules()]
    return sorted(p for folder in folders for p in folder.glob("*.ipynb"))


def notebook_path(folder: Path, notebook: str) -> Path:
    """``notebook_path(SOURCE, "M03-4")`` → ``source/M03/M03-4.ipynb`` (``RELEASE``: the handed-out copy)."""
    return folder / notebook.split("-")[0] / f"{notebook}.ipynb"


def notebook_id(path: Path) -> str:
    """``source/M03/M03-4.ipynb`` → ``"M03-4"``."""
    return path.stem


def venv_tools_on_path() -> None:
    """Put this Python's ``bin/`` first on PATH: nbgrader's gradebook runs ``alembic`` from PATH the first time it
    makes ``gradebook.db``, which is found then even when the venv was not activated."""
    import sys

    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
