"""Colab: the generated setup cell installs what is missing there, once, and nothing elsewhere."""

from __future__ import annotations

import io
import subprocess
import sys
import types
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import nbformat
import pytest

from autograder.colab import SETUP_CELL_ID, colab_url, extra_requirements, readme_links, repository, setup_source
from autograder.course import RELEASE, ROOT


class FakeRun:
    """Stands in for subprocess.run: records the commands; ``fc-list`` answers with ``fonts``."""

    def __init__(self, fonts: str = "") -> None:
        self.fonts = fonts
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(command))
        stdout = self.fonts if command[0] == "fc-list" else ""
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")


def run_cell(
    monkeypatch: pytest.MonkeyPatch,
    *,
    colab: bool,
    versions: dict[str, str],
    dot: bool,
    fonts: str,
    module: str | None = None,
) -> tuple[str, FakeRun]:
    import importlib.metadata
    import shutil

    fake = FakeRun(fonts)
    monkeypatch.setattr(subprocess, "run", fake)
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)

    def version(name: str) -> str:
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/dot" if dot and name == "dot" else None)
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(setup_source(module), "<setup cell>", "exec"), {})
    return out.getvalue(), fake


def installs(fake: FakeRun) -> list[list[str]]:
    return [c for c in fake.commands if c[0] != "fc-list"]


def test_outside_colab_the_cell_does_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    out, fake = run_cell(monkeypatch, colab=False, versions={}, dot=False, fonts="")
    assert fake.commands == []
    assert out.strip() == "不在 Colab 上：這一格不安裝任何東西"


def test_on_a_fresh_colab_it_installs_the_cpu_torch_torchao_the_course_and_drawing_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, fake = run_cell(monkeypatch, colab=True, versions={"torch": "2.9.0+cu126"}, dot=False, fonts="")
    commands = [" ".join(c) for c in installs(fake)]
    assert any("torch==2.13.0" in c and "--index-url https://download.pytorch.org/whl/cpu" in c for c in commands)
    assert any(c.endswith("torchao==0.18.0") for c in commands)
    assert any(f"pt2e-course @ git+{repository()}.git" in c for c in commands)
    assert commands[-1] == "apt-get install -y -qq graphviz fonts-noto-cjk"
    assert "Colab 環境就緒" in out


def test_run_again_it_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    present = {"torch": "2.13.0+cpu", "torchao": "0.18.0", "pt2e-course": version}
    out, fake = run_cell(monkeypatch, colab=True, versions=present, dot=True, fonts="Noto Sans CJK TC:style=Regular\n")
    assert installs(fake) == []
    assert "都已經裝好了" in out


def test_every_release_notebook_starts_with_the_current_setup_cell() -> None:
    paths = sorted(RELEASE.glob("M*/*.ipynb"))
    assert paths
    for path in paths:
        first = nbformat.read(path, as_version=4).cells[0]
        expected = setup_source(path.parent.name)
        assert first.get("id") == SETUP_CELL_ID and first.source == expected, f"{path}: run pt2e-course release"


def test_a_module_with_an_extra_installs_its_pinned_requirements_after_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """M08 needs ExecuTorch (the ``backends`` extra); the other modules' cells never install it."""
    requirements = extra_requirements("M08")
    assert requirements and all("==" in r for r in requirements)
    assert "executorch" not in setup_source("M03") and extra_requirements("M03") == []
    _, fake = run_cell(monkeypatch, colab=True, versions={}, dot=True, fonts="Noto Sans CJK TC\n", module="M08")
    commands = [" ".join(c) for c in installs(fake)]
    torch_step = next(i for i, c in enumerate(commands) if "torch==2.13.0" in c)
    for requirement in requirements:
        step = next(i for i, c in enumerate(commands) if c.endswith(requirement))
        assert step > torch_step, f"{requirement} must come after the CPU torch, or pip pulls another torch"
    present = {"torch": "2.13.0+cpu", "torchao": "0.18.0", **dict(r.split("==") for r in requirements)}
    _, fake = run_cell(monkeypatch, colab=True, versions=present, dot=True, fonts="Noto Sans CJK TC\n", module="M08")
    assert not any(c.endswith(r) for c in (" ".join(c) for c in installs(fake)) for r in requirements)


def test_readme_links_every_release_notebook_to_colab() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_links() in readme, "README 的 Colab 連結過期：執行 pt2e-course release"
    for path in sorted(RELEASE.glob("M*/*.ipynb")):
        assert colab_url(path) in readme
        assert colab_url(path).startswith("https://colab.research.google.com/github/")


def test_the_repository_address_lives_only_in_pyproject() -> None:
    url = repository()
    for path in [ROOT / "autograder" / "colab.py", *Path(ROOT, "scripts").glob("*")]:
        assert url not in path.read_text(encoding="utf-8"), f"{path} repeats the repository's address"
