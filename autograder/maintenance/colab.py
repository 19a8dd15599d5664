"""Colab: the setup cell of every release notebook, the README's "Open in Colab" links and site address.

All are generated from ``pyproject.toml`` (``[project.urls]`` Repository and Homepage, the
project's version), so the course's addresses live in one place; the course site
(``docs/site``) reads them from here too. The setup cell is put into each release notebook by
``pt2e-course release``; nobody copies it by hand.

The cell comes right after the chapter's title. On Colab it installs, once, what the notebook
needs: torch 2.13.0 (the CPU build, from PyTorch's CPU wheel index), then torchao 0.18.0, the
student side of this course (and the module's extra) in one pip call, then the system packages
for drawings (graphviz's ``dot`` and a font with Chinese glyphs) after one ``apt-get update``.
It prints one line per step and the output of pip or apt only when a step fails. Anywhere else
it says in one line that it does nothing. Colab shows it as a form with its title (the code
folded), JupyterLab with its code folded.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from autograder.course import RELEASE, ROOT

SETUP_CELL_ID = "colab-setup"
README_START = "<!-- colab-links:start (pt2e-course release 產生，不要手改) -->"
README_END = "<!-- colab-links:end -->"
SITE_START = "<!-- site-link:start (pt2e-course release 產生，不要手改) -->"
SITE_END = "<!-- site-link:end -->"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository() -> str:
    """The repository's address, from ``[project.urls] Repository`` (no trailing slash or .git)."""
    url = str(project()["urls"]["Repository"]).rstrip("/")
    return url.removesuffix(".git")


def site_url() -> str:
    """The course site's address, from ``[project.urls] Homepage``, ending with a slash."""
    return str(project()["urls"]["Homepage"]).rstrip("/") + "/"


def github_path(url: str) -> str:
    """``https://github.com/owner/name`` → ``owner/name``."""
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", url)
    if not match:
        raise ValueError(f"[project.urls] Repository 必須是 https://github.com/<owner>/<name>，看到 {url}")
    return match.group(1)


SETUP_TITLE = "環境設定：在 Colab 上安裝這本 notebook 需要的套件（其他地方什麼都不做）"

SETUP_TEMPLATE = """#@title {title}
# pt2e-course release 產生，不要改。每一步印一行，pip 或 apt 的輸出只在失敗時印出；
# 已經裝好的不重裝；不在 Colab 上時什麼都不做（本機請照 README 執行 make setup）。
import importlib.metadata, os, shutil, subprocess, sys, time


def _pt2e_colab_setup(run=subprocess.run):
    if "google.colab" not in sys.modules:
        print("不在 Colab 上：這一格不安裝任何東西")
        return

    def missing(name, version):
        try:
            return importlib.metadata.version(name).split("+")[0] != version
        except importlib.metadata.PackageNotFoundError:
            return True

    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    plan = []  # (what one line says, the commands of that step)
    if missing("torch", "2.13.0"):  # first, from the CPU index, so that nothing pulls in another torch
        plan.append(("torch 2.13.0（CPU 版）", [pip + ["torch==2.13.0", "--index-url", "{torch_index}"]]))
    wanted = [  # the notebook's other packages, in one pip call
{packages}    ]
    wanted = [p for p in wanted if missing(p[0], p[1])]
    if wanted:
        plan.append(("、".join(f"{n} {v}" for n, v, _ in wanted), [pip + [r for _, _, r in wanted]]))
    fonts = run(["fc-list", ":lang=zh-tw"], capture_output=True, text=True, check=False).stdout
    apt = ["graphviz"] if shutil.which("dot") is None else []
    apt += [] if fonts.strip() else ["fonts-noto-cjk"]
    if apt:  # the package lists first, once: a runtime's lists may be stale
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *apt]
        plan.append(("、".join(apt) + "（畫圖用）", [["apt-get", "update", "-qq"], install]))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for what, commands in plan:
        print(f"安裝 {what}…", end=" ", flush=True)
        start = time.monotonic()
        for command in commands:
            done = run(command, capture_output=True, text=True, check=False, env=env)
            if done.returncode != 0:
                print("失敗：" + " ".join(command) + "\\n" + (done.stdout + done.stderr)[-4000:])
                raise RuntimeError(f"安裝 {what} 失敗（輸出見上面）")
        print(f"完成（{time.monotonic() - start:.0f} 秒）")
    print("Colab 環境就緒" + ("" if plan else "（都已經裝好了）"))


_pt2e_colab_setup()
"""


MODULE_EXTRAS = {"M08": "backends", "M09": "backends"}
"""Modules whose notebooks need an optional extra of ``pyproject.toml`` (M08 and M09: ExecuTorch, about
40 packages and 180 MB as M08-1's first code cell measures, which the other modules do without)."""


def extra_requirements(module: str | None) -> list[str]:
    """The pinned requirements of ``module``'s extra (``["executorch==1.5.1"]`` for M08), else none."""
    extra = MODULE_EXTRAS.get(module or "")
    if extra is None:
        return []
    requirements = [str(r) for r in project()["optional-dependencies"][extra]]
    for requirement in requirements:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+", requirement):
            raise ValueError(f"extra {extra}: the Colab cell installs pinned requirements only, not {requirement}")
    return requirements


def setup_packages(module: str | None = None) -> list[tuple[str, str, str]]:
    """What the cell installs after torch, each ``(name, version, pip requirement)``: torchao, this
    course's student side (from the repository), and ``module``'s pinned extra (M08: ExecuTorch)."""
    packages = [("torchao", "0.18.0", "torchao==0.18.0")]
    packages.append(("pt2e-course", str(project()["version"]), f"pt2e-course @ git+{repository()}.git"))
    packages += [(*r.split("=="), r) for r in extra_requirements(module)]  # type: ignore[misc]
    return packages


def setup_source(module: str | None = None) -> str:
    """The setup cell's code, with this course's repository and version (and ``module``'s extra) filled in."""
    packages = "".join(
        f'        ("{name}", "{version}", "{requirement}"),\n' for name, version, requirement in setup_packages(module)
    )
    return (
        SETUP_TEMPLATE.replace("{title}", SETUP_TITLE)
        .replace("{torch_index}", TORCH_CPU_INDEX)
        .replace("{packages}", packages)
        .rstrip("\n")
    )


def add_setup_cell(nb: Any, module: str | None = None) -> None:
    """Put the setup cell of ``module`` in ``nb`` (an nbformat notebook) right after the chapter's title
    cell (the first cell, when it is markdown with a ``# `` heading; else first), replacing an older one.

    Colab shows it as a form (its ``#@title`` and a ▶ button, the code folded); JupyterLab folds its code.
    """
    import nbformat

    nb.cells = [c for c in nb.cells if c.get("id") != SETUP_CELL_ID]
    cell = nbformat.v4.new_code_cell(setup_source(module))
    cell["id"] = SETUP_CELL_ID
    cell.metadata["cellView"] = "form"
    cell.metadata["jupyter"] = {"source_hidden": True}
    titled = bool(nb.cells) and nb.cells[0].cell_type == "markdown" and nb.cells[0].source.lstrip().startswith("# ")
    nb.cells.insert(1 if titled else 0, cell)


def colab_url(path: Path, branch: str = "main") -> str:
    """The "Open in Colab" address of a release notebook."""
    relative = path.resolve().relative_to(ROOT).as_posix()
    return f"https://colab.research.google.com/github/{github_path(repository())}/blob/{branch}/{relative}"


def readme_links() -> str:
    """The README's table of release notebooks with their Colab links."""
    lines = [README_START, "", "| notebook | 在 Colab 打開 |", "|---|---|"]
    for path in sorted(RELEASE.glob("M*/*.ipynb")):
        lines.append(f"| `{path.relative_to(ROOT).as_posix()}` | [Open in Colab]({colab_url(path)}) |")
    lines += ["", README_END]
    return "\n".join(lines)


def readme_site_link() -> str:
    """The README's line with the course site's address."""
    return f"{SITE_START}\n課程網站：<{site_url()}>\n{SITE_END}"


def update_readme(readme: Path | None = None) -> bool:
    """Rewrite the Colab links and the site's address between the README's markers; True when it changed."""
    readme = readme or ROOT / "README.md"
    text = updated = readme.read_text(encoding="utf-8")
    for start_marker, end_marker, block in (
        (README_START, README_END, readme_links()),
        (SITE_START, SITE_END, readme_site_link()),
    ):
        start, end = updated.index(start_marker), updated.index(end_marker) + len(end_marker)
        updated = updated[:start] + block + updated[end:]
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return updated != text
