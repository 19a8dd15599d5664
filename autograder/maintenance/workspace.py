"""The student's own working copy: ``work/``, made from ``release/``, never overwritten.

``pt2e-course release`` and ``make grade`` rewrite ``release/``; answers written there would be
lost. ``pt2e-course lab`` therefore opens ``work/`` (ignored by git): each release notebook is
copied there the first time, and a copy that exists is left as the student left it.

The student's JupyterLab shows a student's tools: nbgrader's Validate button stays; its instructor
tools (the Nbgrader menu and its Formgrader, Create Assignment, the course and assignment lists that
need an exchange) are turned off through a configuration folder of its own (``student_config``) put
first on ``JUPYTER_CONFIG_PATH``. ``pt2e-course lab`` becomes the JupyterLab server (``exec``), so
stopping that process (Ctrl-C, or ``kill`` of its process id) stops the server and its kernels.
``--solutions`` opens ``source/`` with every tool.
"""

from __future__ import annotations

import json
import os
import shutil
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


INSTRUCTOR_PLUGINS = (
    "@jupyter/nbgrader:menu",
    "@jupyter/nbgrader:create-assignment",
    "@jupyter/nbgrader:course-list",
    "@jupyter/nbgrader:assignment-list",
)
"""nbgrader's JupyterLab plugins a student has no use for here (the Validate button is kept)."""
ASSIGNMENTS_MENU = {
    "@jupyterlab/mainmenu-extension:plugin": {
        "menus": [
            {
                "id": "jp-mainmenu-pt2e-assignments",
                "label": "作業",
                "rank": 1000,
                "items": [{"command": "nbgrader:open-assignment-list"}],
            }
        ]
    },
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
"""A student's way to nbgrader's Assignments tab on the hub: a "作業" menu (JupyterLab's settings overrides); and no
popup asking whether to fetch Jupyter's news, which a class cannot use."""
INSTRUCTOR_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
    "nbgrader.server_extensions.assignment_list",
)


def student_config(
    folder: Path | None = None,
    plugins: tuple[str, ...] = INSTRUCTOR_PLUGINS,
    server_extensions: tuple[str, ...] = INSTRUCTOR_SERVER_EXTENSIONS,
    assignments_menu: bool = False,
) -> Path:
    """A Jupyter configuration folder that turns nbgrader's instructor tools off (written each time); the hub
    (``autograder.maintenance.hub``) keeps the assignment list, which its exchange serves, and with
    ``assignments_menu`` gives it a menu of its own (``ASSIGNMENTS_MENU``): nbgrader's menu, which held it, also
    holds the instructor's tools and is turned off."""
    if folder is None:  # the user's own Jupyter data folder: a shared, read-only venv cannot take it
        from jupyter_core.paths import jupyter_data_dir

        folder = Path(jupyter_data_dir()) / "pt2e-student-lab"
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    page = {"disabledExtensions": dict.fromkeys(plugins, True)}
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1), encoding="utf-8")
    server: dict[str, dict] = {"ServerApp": {"jpserver_extensions": dict.fromkeys(server_extensions, False)}}
    if assignments_menu:
        settings = folder / "labsettings"
        settings.mkdir(exist_ok=True)
        (settings / "overrides.json").write_text(json.dumps(ASSIGNMENTS_MENU, indent=1), encoding="utf-8")
        server["LabApp"] = {"app_settings_dir": str(settings)}
    (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=1), encoding="utf-8")
    return folder


def lab_command(folder: Path, extra: list[str]) -> list[str]:
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}", *extra]
    if os.geteuid() == 0 and "--allow-root" not in extra:
        command.append("--allow-root")  # JupyterLab refuses root without it (a container, Colab-like machines)
    return command


def lab_environment(student: bool) -> dict[str, str]:
    """The environment of the lab: for a student, ``student_config`` first on ``JUPYTER_CONFIG_PATH``."""
    env = dict(os.environ)
    if student:
        paths = [str(student_config()), *filter(None, env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    return env


def open_lab(solutions: bool = False, extra: list[str] | None = None) -> int:
    """Become JupyterLab on ``work/`` (or on ``source/`` with ``solutions``), options passed through."""
    if solutions:
        print(f"打開 source/（含解答；{trust_solutions()} 本已執行的 notebook 已信任，圖會直接顯示）")
        folder = SOURCE
    else:
        folder = WORK
        copied = make_working_copy(folder)
        print(f"打開你的作業副本 {folder}（新複製了 {len(copied)} 本；已經在的不會被覆蓋）")
    if os.geteuid() == 0:
        print("以 root 執行：自動加上 --allow-root")
    print("停止：在這個終端機按 Ctrl-C 兩次（或結束這個行程），JupyterLab 與它的 kernel 會一起結束")
    sys.stdout.flush()
    command = lab_command(folder, list(extra or []))
    os.execve(command[0], command, lab_environment(student=not solutions))
    return 0  # not reached
