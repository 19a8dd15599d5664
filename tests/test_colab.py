"""Where the course gets set up for a student or a grader, tried without the real machines.

Colab: the generated setup cell, run with a fake ``google.colab`` module and fake commands (pip and
apt answer with as much output as the real ones), installs what is missing there once, quietly,
and nothing elsewhere; it comes right after each release notebook's title. Gradescope: the
bundle's ``setup.sh``, run with fake ``python3``/``apt-get`` binaries standing for each base image,
uses the image's own Python when the course supports it and installs one only when not.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import types
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import nbformat
import pytest

from autograder.course import RELEASE, ROOT
from autograder.maintenance.colab import (
    README_END,
    README_START,
    SETUP_CELL_ID,
    SETUP_TITLE,
    SITE_END,
    SITE_START,
    colab_url,
    extra_requirements,
    readme_links,
    readme_site_link,
    repository,
    setup_packages,
    setup_source,
    site_url,
)
from autograder.reports.gradescope import setup_script

NOISE = 150
"""Lines a real step prints: ``apt-get install`` of graphviz and fonts-noto-cjk prints about this many
("Unpacking…", "Setting up…", debconf) even with ``-qq``; pip's resolver and wheel lines are fewer."""


class FakeRun:
    """Stands in for subprocess.run: records the commands and their environment, answers each with
    ``NOISE`` lines of output; ``fc-list`` answers with ``fonts``; a command containing ``fail`` fails."""

    def __init__(self, fonts: str = "", fail: str | None = None) -> None:
        self.fonts, self.fail = fonts, fail
        self.commands: list[list[str]] = []
        self.envs: list[dict[str, str] | None] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(command))
        self.envs.append(kwargs.get("env"))
        if command[0] == "fc-list":
            return subprocess.CompletedProcess(command, 0, stdout=self.fonts, stderr="")
        noise = "".join(f"Setting up package-{i} ...\n" for i in range(NOISE))
        failed = self.fail is not None and self.fail in " ".join(command)
        stderr = "E: Unable to locate package\n" if failed else "debconf: unable to initialize frontend\n"
        return subprocess.CompletedProcess(command, 100 if failed else 0, stdout=noise, stderr=stderr)


def run_cell(
    monkeypatch: pytest.MonkeyPatch,
    *,
    colab: bool,
    versions: dict[str, str],
    dot: bool,
    fonts: str,
    module: str | None = None,
    fail: str | None = None,
) -> tuple[str, FakeRun]:
    import importlib.metadata

    fake = FakeRun(fonts, fail)
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


def course_version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_outside_colab_the_cell_does_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    out, fake = run_cell(monkeypatch, colab=False, versions={}, dot=False, fonts="")
    assert fake.commands == []
    assert out.strip() == "不在 Colab 上：這一格不安裝任何東西"


def test_on_a_fresh_colab_it_installs_everything_in_four_quiet_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colab's own torch is a CUDA build of another version; no dot, no CJK font: every step runs."""
    out, fake = run_cell(monkeypatch, colab=True, versions={"torch": "2.9.0+cu126"}, dot=False, fonts="")
    lines = out.splitlines()
    assert len(lines) == 4, out  # torch; torchao and the course; graphviz and the font; ready
    assert lines[0].startswith("安裝 torch 2.13.0（CPU 版）… 完成（")
    assert lines[1].startswith(f"安裝 torchao 0.18.0、pt2e-course {course_version()}… 完成（")
    assert lines[2].startswith("安裝 graphviz、fonts-noto-cjk（畫圖用）… 完成（")
    assert lines[3] == "Colab 環境就緒"
    assert "Setting up" not in out and "debconf" not in out, "pip's and apt's output only when a step fails"
    commands = [" ".join(c) for c in installs(fake)]
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in commands[0], "the CPU torch first"
    assert commands[1].endswith(f"torchao==0.18.0 pt2e-course @ git+{repository()}.git")
    assert commands[2:] == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends graphviz fonts-noto-cjk",
    ], "apt-get update once, right before the install"
    assert all(
        env and env["DEBIAN_FRONTEND"] == "noninteractive"
        for c, env in zip(fake.commands, fake.envs, strict=True)
        if c[0] == "apt-get"
    )


def test_run_again_it_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    present = {"torch": "2.13.0+cpu", "torchao": "0.18.0", "pt2e-course": course_version()}
    out, fake = run_cell(monkeypatch, colab=True, versions=present, dot=True, fonts="Noto Sans CJK TC:style=Regular\n")
    assert installs(fake) == []
    assert out.splitlines() == ["Colab 環境就緒（都已經裝好了）"]


def test_only_what_is_missing_is_installed_and_apt_only_when_a_system_package_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    present = {"torch": "2.13.0+cpu", "torchao": "0.18.0"}
    out, fake = run_cell(monkeypatch, colab=True, versions=present, dot=True, fonts="")
    commands = [" ".join(c) for c in installs(fake)]
    assert len(commands) == 3 and commands[0].endswith(f"pt2e-course @ git+{repository()}.git")
    assert "torchao" not in commands[0] and "torch==" not in commands[0]
    assert commands[1:] == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends fonts-noto-cjk"]
    assert len(out.splitlines()) == 3


def test_a_failing_step_shows_its_output_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="安裝 graphviz（畫圖用） 失敗"):
        run_cell(
            monkeypatch,
            colab=True,
            versions={"torch": "2.13.0", "torchao": "0.18.0", "pt2e-course": course_version()},
            dot=False,
            fonts="Noto Sans CJK TC\n",
            fail="install -y",
        )
    out, fake = io.StringIO(), FakeRun("Noto Sans CJK TC\n", "install -y")
    # the same again, keeping what it printed before raising
    monkeypatch.setattr(subprocess, "run", fake)
    with redirect_stdout(out), pytest.raises(RuntimeError):
        exec(compile(setup_source(), "<setup cell>", "exec"), {})
    printed = out.getvalue()
    assert "失敗：apt-get install -y -qq --no-install-recommends graphviz" in printed
    assert "E: Unable to locate package" in printed and "Setting up package-149" in printed
    assert "Colab 環境就緒" not in printed


def test_a_module_with_an_extra_installs_its_pinned_requirements_after_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """M08 and M09 need ExecuTorch (the ``backends`` extra); the other modules' cells never install it."""
    requirements = extra_requirements("M08")
    assert extra_requirements("M09") == requirements and "executorch" in setup_source("M09")
    assert requirements and all("==" in r for r in requirements)
    assert "executorch" not in setup_source("M03") and extra_requirements("M03") == []
    assert [r for _, _, r in setup_packages("M08")][-len(requirements) :] == requirements
    out, fake = run_cell(monkeypatch, colab=True, versions={}, dot=True, fonts="Noto Sans CJK TC\n", module="M08")
    commands = [" ".join(c) for c in installs(fake)]
    assert "torch==2.13.0" in commands[0], "the CPU torch first, or pip pulls another torch"
    assert all(r in commands[1] for r in requirements)
    assert len(out.splitlines()) == 3
    present = {"torch": "2.13.0+cpu", "torchao": "0.18.0", **dict(r.split("==") for r in requirements)}
    _, fake = run_cell(monkeypatch, colab=True, versions=present, dot=True, fonts="Noto Sans CJK TC\n", module="M08")
    assert not any(r in " ".join(c) for c in installs(fake) for r in requirements)


def test_every_release_notebook_starts_with_its_title_then_the_current_setup_cell() -> None:
    paths = sorted(RELEASE.glob("M*/*.ipynb"))
    assert paths
    for path in paths:
        cells = nbformat.read(path, as_version=4).cells
        title, setup = cells[0], cells[1]
        assert title.cell_type == "markdown" and re.match(r"# \S", title.source), f"{path}: the title comes first"
        assert setup.get("id") == SETUP_CELL_ID, f"{path}: run pt2e-course release"
        assert setup.source == setup_source(path.parent.name), f"{path}: run pt2e-course release"
        assert setup.source.splitlines()[0] == f"#@title {SETUP_TITLE}"
        assert setup.metadata.get("cellView") == "form", "Colab shows the cell as its title"
        assert setup.metadata.get("jupyter", {}).get("source_hidden") is True, "JupyterLab folds its code"
        assert sum(c.get("id") == SETUP_CELL_ID for c in cells) == 1


def test_the_setup_cell_is_short_to_read() -> None:
    source = setup_source("M08")
    assert len(source.splitlines()) <= 50
    assert max(len(line) for line in source.splitlines()) <= 130


def test_readme_links_every_release_notebook_to_colab_and_the_site() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_links() in readme, "README 的 Colab 連結過期：執行 pt2e-course release"
    assert readme_site_link() in readme and site_url() in readme_site_link(), "README 的網站連結過期"
    for path in sorted(RELEASE.glob("M*/*.ipynb")):
        assert colab_url(path) in readme
        assert colab_url(path).startswith("https://colab.research.google.com/github/")
    outside = readme
    for start, end in ((README_START, README_END), (SITE_START, SITE_END)):
        outside = outside[: outside.index(start)] + outside[outside.index(end) + len(end) :]
    assert repository() not in outside and site_url().rstrip("/") not in outside, "addresses typed by hand"


def test_the_addresses_live_only_in_pyproject() -> None:
    paths = [
        ROOT / "autograder" / "maintenance" / "colab.py",
        ROOT / "autograder" / "reports" / "gradescope.py",
        *Path(ROOT, "scripts").glob("*"),
        *Path(ROOT, "docs", "site").rglob("*.py"),
        *Path(ROOT, ".github").rglob("*.yml"),
        ROOT / "Makefile",
    ]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for url in (repository(), site_url().rstrip("/")):
            assert url not in text, f"{path} repeats the address {url}"


# Gradescope's setup.sh on each base image, with fake binaries: python3 answers as the image's Python,
# apt-cache knows the image's packages, apt-get "installs" a python3.X by writing its fake.

FAKE_PYTHON = """#!/bin/bash
# A fake python{version}: the version check, -m venv (only with venv's package installed) and sysconfig.
echo "$(basename "$0") $*" >> "$FAKE_LOG"
case "$1" in
  --version) echo "Python {version}.0" ;;
  -c)
    case "$2" in
      *"sys.exit(not (3, 11)"*) [ "{supported}" = yes ] ;;
      *"sys.version_info[:2])"*) echo "{version}" ;;
      *sysconfig*) mkdir -p "$FAKE_ROOT/site" && echo "$FAKE_ROOT/site" ;;
      *) exit 2 ;;
    esac ;;
  -m)
    [ "$2" = venv ] || exit 2
    [ -e "$FAKE_BIN/.venv-{version}" ] || {{ echo "ensurepip is not available" >&2; exit 1; }}
    mkdir -p "$3/bin"
    printf '#!/bin/bash\\necho "venv-pip $*" >> "$FAKE_LOG"\\n' > "$3/bin/pip"
    cp "$0" "$3/bin/python"
    chmod +x "$3/bin/pip" ;;
  *) exit 2 ;;
esac
"""

FAKE_APT_GET = """#!/bin/bash
# Installing python3.X writes its fake; python3.X-venv lets that Python make a venv.
echo "apt-get $*" >> "$FAKE_LOG"
[ "$1" = install ] || exit 0
for package in "$@"; do
  version="${package#python}"
  case "$package" in
    python3.*-venv) touch "$FAKE_BIN/.venv-${version%-venv}" ;;
    python3.*) cp "$FAKE_BIN/.python$version" "$FAKE_BIN/python$version" && chmod +x "$FAKE_BIN/python$version" ;;
  esac
done
"""

FAKE_APT_CACHE = """#!/bin/bash
echo "apt-cache $*" >> "$FAKE_LOG"
[ "$1" = show ] && [[ " $FAKE_APT_HAS " == *" $2 "* ]]
"""


def fake_python(version: str) -> str:
    major, minor = (int(n) for n in version.split("."))
    return FAKE_PYTHON.format(version=version, supported="yes" if (3, 11) <= (major, minor) <= (3, 13) else "no")


@pytest.fixture
def image(tmp_path: Path):
    """Returns run(python3, apt_has, venv) -> (exit code, log lines, output): setup.sh on a fake image
    whose python3 is ``python3`` (a version, or None), whose package lists hold ``apt_has`` and whose
    python3 has venv's package already when ``venv``."""

    def run(python3: str | None, apt_has: list[str], venv: bool = False) -> tuple[int, list[str], str]:
        fake_bin, root = tmp_path / "bin", tmp_path / "autograder"
        fake_bin.mkdir()
        (root / "source" / "course").mkdir(parents=True)
        for tool in ("bash", "env", "rm", "mkdir", "cp", "chmod", "basename", "touch", "cat"):
            (fake_bin / tool).symlink_to(shutil.which(tool))
        (fake_bin / "apt-get").write_text(FAKE_APT_GET)
        (fake_bin / "apt-cache").write_text(FAKE_APT_CACHE)
        for version in ("3.11", "3.12", "3.13"):  # what apt-get install python3.X writes
            (fake_bin / f".python{version}").write_text(fake_python(version))
        if python3:
            (fake_bin / "python3").write_text(fake_python(python3))
            (fake_bin / f"python{python3}").write_text(fake_python(python3))
            if venv:
                (fake_bin / f".venv-{python3}").touch()
        for path in fake_bin.iterdir():
            if not path.is_symlink():
                path.chmod(0o755)
        script = tmp_path / "setup.sh"
        script.write_text(setup_script("M03"))
        env = {
            "PATH": str(fake_bin),
            "AUTOGRADER_ROOT": str(root),
            "FAKE_BIN": str(fake_bin),
            "FAKE_ROOT": str(tmp_path),
            "FAKE_LOG": str(tmp_path / "log"),
            "FAKE_APT_HAS": " ".join(apt_has),
        }
        done = subprocess.run(
            [str(fake_bin / "bash"), str(script)], env=env, capture_output=True, text=True, timeout=60
        )
        log = (tmp_path / "log").read_text().splitlines() if (tmp_path / "log").exists() else []
        return done.returncode, log, done.stdout + done.stderr

    return run


def venv_made_by(log: list[str]) -> str:
    return next(line.split()[0] for line in log if " -m venv " in line and not line.startswith("apt"))


def test_gradescope_ubuntu_24_04_uses_its_python_3_12(image) -> None:
    """noble: python3 is 3.12, python3.12-venv is a separate package, there is no python3.11."""
    code, log, out = image("3.12", ["python3.12", "python3.12-venv", "python3-venv"])
    assert code == 0, out
    assert not any("python3.11" in line for line in log), "Ubuntu 24.04 has no python3.11 package"
    assert "apt-get install -y -qq python3.12-venv" in log
    assert [line.split()[0] for line in log if " -m venv " in line] == ["python3", "python3"]  # failed, then made
    assert any(line.startswith("venv-pip install --quiet torch==2.13.0") for line in log)
    assert "用 Python 3.12：" in out


def test_gradescope_ubuntu_22_04_installs_python_3_11(image) -> None:
    """jammy: python3 is 3.10; python3.11 and python3.11-venv are in its package lists."""
    code, log, out = image("3.10", ["python3.10", "python3.10-venv", "python3.11", "python3.11-venv"])
    assert code == 0, out
    assert "apt-get install -y -qq python3.11 python3.11-venv" in log
    assert venv_made_by(log) == "python3.11"
    assert any(line.startswith("venv-pip install --quiet /") and line.endswith("source/course") for line in log)


@pytest.mark.parametrize("version", ["3.11", "3.13"])
def test_gradescope_a_supported_python_with_venv_installs_no_python(image, version: str) -> None:
    """Debian 12 (3.11) and Debian 13 (3.13), or an image whose python3 already has venv."""
    code, log, out = image(version, [f"python{version}", f"python{version}-venv"], venv=True)
    assert code == 0, out
    assert not any(line.startswith("apt-get install") and "python3" in line for line in log)
    assert venv_made_by(log) == "python3"


def test_gradescope_an_image_without_any_supported_python_says_which_to_choose(image) -> None:
    """Ubuntu 20.04: python3 is 3.8 and its lists stop at python3.9."""
    code, log, out = image("3.8", ["python3.8", "python3.9"])
    assert code == 1
    assert "請選 Ubuntu 22.04 或 24.04" in out
    assert not any(" -m venv " in line for line in log)


def test_gradescope_setup_installs_the_module_extra() -> None:
    assert '"$ROOT/source/course[backends]"' in setup_script("M08")
    assert '"$ROOT/source/course[backends]"' in setup_script("M09"), "M09-3 lowers to XNNPACK: ExecuTorch"
    assert '"$ROOT/source/course"' in setup_script("M03")
    assert "python3.11 python3.11-venv" not in setup_script("M03"), "no Python is installed by name"


def test_the_setup_cell_in_a_fresh_interpreter_prints_four_lines(tmp_path: Path) -> None:
    """The cell as a fresh Colab kernel runs it: an interpreter with nothing installed (a new venv),
    ``google.colab`` importable, and every command a fake that prints as much as the real one:
    ``apt-get`` and ``fc-list`` on PATH (no ``dot`` there), ``python -m pip`` a fake pip module."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "kernel")], check=True)
    fake_bin, site = tmp_path / "bin", tmp_path / "site"
    fake_bin.mkdir()
    (fake_bin / "apt-get").write_text('#!/bin/sh\necho "apt-get $*" >> "$FAKE_LOG"\nseq 150 | sed "s/^/Setting up /"\n')
    (fake_bin / "fc-list").write_text("#!/bin/sh\nexit 0\n")  # no font with Chinese glyphs
    for tool in ("sed", "seq"):
        (fake_bin / tool).symlink_to(shutil.which(tool))
    for path in (fake_bin / "apt-get", fake_bin / "fc-list"):
        path.chmod(0o755)
    for package, text in (("google", ""), ("pip", "")):
        (site / package).mkdir(parents=True)
        (site / package / "__init__.py").write_text(text)
    (site / "google" / "colab.py").write_text("")
    (site / "pip" / "__main__.py").write_text(
        "import os, sys\n"
        "open(os.environ['FAKE_LOG'], 'a').write('pip ' + ' '.join(sys.argv[1:]) + '\\n')\n"
        "for i in range(40):\n    print(f'Collecting thing-{i}')\n"
    )
    env = {"PATH": str(fake_bin), "PYTHONPATH": str(site), "FAKE_LOG": str(tmp_path / "log"), "HOME": str(tmp_path)}
    cell = "import google.colab  # Colab's kernel has it\n" + setup_source("M03")
    python = tmp_path / "kernel" / "bin" / "python"
    done = subprocess.run([str(python), "-c", cell], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and lines[-1] == "Colab 環境就緒", done.stdout
    assert "Setting up" not in done.stdout and "Collecting" not in done.stdout
    log = (tmp_path / "log").read_text().splitlines()
    assert [line.split()[0] for line in log] == ["pip", "pip", "apt-get", "apt-get"]
    assert log[2] == "apt-get update -qq" and log[3].endswith("graphviz fonts-noto-cjk")
