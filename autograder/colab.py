"""Colab: the setup cell every release notebook starts with, and the README's "Open in Colab" links.

Both are generated from ``pyproject.toml`` (``[project.urls] Repository`` and the project's
version), so the repository's address lives in one place. The setup cell is put in front
of each release notebook by ``pt2e-course release``; nobody copies it by hand.

On Colab the cell installs, once, what the notebook needs: torch 2.13.0 (the CPU build,
from PyTorch's CPU wheel index), torchao 0.18.0, the student side of this course, and the
system packages for drawings (graphviz's ``dot`` and a font with Chinese glyphs). Anywhere
else it says in one line that it does nothing.
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
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository() -> str:
    """The repository's address, from ``[project.urls] Repository`` (no trailing slash or .git)."""
    url = str(project()["urls"]["Repository"]).rstrip("/")
    return url.removesuffix(".git")


def github_path(url: str) -> str:
    """``https://github.com/owner/name`` → ``owner/name``."""
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", url)
    if not match:
        raise ValueError(f"[project.urls] Repository 必須是 https://github.com/<owner>/<name>，看到 {url}")
    return match.group(1)


SETUP_TEMPLATE = """# 環境設定（pt2e-course release 自動產生，不要改）：在 Colab 上安裝這本 notebook 需要的套件，
# 已經裝好的不會重裝；在 Colab 以外的地方什麼都不做（本機請照 README 執行 make setup）。
import importlib.metadata
import shutil
import subprocess
import sys


def _pt2e_colab_setup(run=subprocess.run):
    if "google.colab" not in sys.modules:
        print("不在 Colab 上：這一格不安裝任何東西")
        return

    def installed(name, version):
        try:
            return importlib.metadata.version(name).split("+")[0] == version
        except importlib.metadata.PackageNotFoundError:
            return False

    pip = [sys.executable, "-m", "pip", "install", "-q"]
    steps = []
    if not installed("torch", "2.13.0"):
        steps.append(pip + ["torch==2.13.0", "--index-url", "{torch_index}"])
    if not installed("torchao", "0.18.0"):
        steps.append(pip + ["torchao==0.18.0"])
    if not installed("pt2e-course", "{version}"):
        steps.append(pip + ["pt2e-course @ git+{repository}.git"])
{extras}    apt = []
    if shutil.which("dot") is None:
        apt.append("graphviz")
    fonts = run(["fc-list", ":lang=zh-tw"], capture_output=True, text=True, check=False).stdout
    if not fonts.strip():
        apt.append("fonts-noto-cjk")
    if apt:
        steps.append(["apt-get", "install", "-y", "-qq", *apt])
    for step in steps:
        print("安裝：", " ".join(step[5:] if step[0] == sys.executable else step[4:]))
        run(step, check=True)
    print("Colab 環境就緒" + ("" if steps else "（都已經裝好了）"))


_pt2e_colab_setup()
"""


MODULE_EXTRAS = {"M08": "backends"}
"""Modules whose notebooks need an optional extra of ``pyproject.toml`` (M08: ExecuTorch, about
525 MB, which the other modules do without)."""


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


def setup_source(module: str | None = None) -> str:
    """The setup cell's code, with this course's repository and version (and ``module``'s extra) filled in."""
    extras = "".join(
        f'    if not installed("{name}", "{version}"):\n        steps.append(pip + ["{name}=={version}"])\n'
        for name, version in (r.split("==") for r in extra_requirements(module))
    )
    return (
        SETUP_TEMPLATE.replace("{torch_index}", TORCH_CPU_INDEX)
        .replace("{version}", str(project()["version"]))
        .replace("{repository}", repository())
        .replace("{extras}", extras)
        .rstrip("\n")
    )


def add_setup_cell(nb: Any, module: str | None = None) -> None:
    """Put the setup cell of ``module`` first in ``nb`` (an nbformat notebook), replacing an older one."""
    import nbformat

    nb.cells = [c for c in nb.cells if c.get("id") != SETUP_CELL_ID]
    cell = nbformat.v4.new_code_cell(setup_source(module))
    cell["id"] = SETUP_CELL_ID
    nb.cells.insert(0, cell)


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


def update_readme(readme: Path | None = None) -> bool:
    """Rewrite the links between the README's markers; True when the file changed."""
    readme = readme or ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_START), text.index(README_END) + len(README_END)
    updated = text[:start] + readme_links() + text[end:]
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return updated != text
