"""The ``pt2e-course`` command line: what it says and refuses before any grading starts.

Its audience is the course's (Taiwanese) instructors: help and messages in Chinese, option
names in English. Wrong input ends with a non-zero exit and one Chinese line, never a
traceback and never a report or a gradebook written for nothing. (Grading itself is tested
in test_grading.py.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

COMMANDS = ["execute", "release", "grade", "check", "gradescope", "lab"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def option_help(text: str) -> dict[str, str]:
    """Option or command → its help text, from argparse's help output (help may wrap to the next line)."""
    found: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = re.match(r"^ {2,4}(-[-\w, ]+?|[a-z]+)(?: [A-Z_]+)?(?: {2,}(.*))?$", line)
        if match and not line.startswith(" " * 6):
            current = match.group(1).split(",")[-1].strip()
            found[current] = match.group(2) or ""
        elif current is not None and line.startswith(" " * 6):
            found[current] += line.strip()
        else:
            current = None
    return found


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_chinese_with_english_option_names(command: str | None) -> None:
    result = cli(*([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("用法："), result.stdout[:80]
    helps = option_help(result.stdout)
    assert "--help" in helps and helps, result.stdout
    for name, text in helps.items():
        assert CJK.search(text), f"{command or 'pt2e-course'} {name}: help is not in Chinese: {text!r}"
    if command is None:
        assert set(COMMANDS) <= set(helps), "every command is listed with a Chinese line"
    if command == "grade":
        assert {"--student", "--jobs", "--submitted", "--out", "--seed"} <= set(helps)


def test_version_is_the_package_version() -> None:
    result = cli("--version")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert result.returncode == 0 and result.stdout.strip() == f"pt2e-course {project['version']}"


@pytest.mark.parametrize("option", ["--jobs", "--cell-seconds", "--notebook-seconds", "--memory-mb"])
@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_counts_must_be_positive_integers(option: str, value: str, tmp_path: Path) -> None:
    result = cli(
        "grade",
        "M03",
        "--submitted",
        str(ROOT / "examples" / "submitted"),
        "--out",
        str(tmp_path / "out"),
        option,
        value,
    )
    assert result.returncode == 2
    assert option in result.stderr and ("正整數" in result.stderr or "不是整數" in result.stderr), result.stderr
    assert not (tmp_path / "out").exists(), "nothing is graded"


def test_check_on_a_missing_file_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "M03-4.ipynb"  # a name the course knows: it used to be graded as an empty notebook
    result = cli("check", str(missing))
    assert result.returncode != 0
    assert result.stdout == "", "no report for a file that does not exist"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and CJK.search(lines[0]), result.stderr


def test_grade_without_the_submitted_folder_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "graded"
    result = cli("grade", "M03", "--submitted", str(tmp_path / "nowhere"), "--out", str(out))
    assert result.returncode != 0
    assert "nowhere" in result.stderr and CJK.search(result.stderr) and "Traceback" not in result.stderr
    assert not out.exists(), "no CSV for a class that was not found"


def test_grade_with_an_empty_submitted_folder_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "submitted").mkdir()
    out = tmp_path / "graded"
    result = cli("grade", "M03", "--submitted", str(tmp_path / "submitted"), "--out", str(out))
    assert result.returncode != 0 and CJK.search(result.stderr)
    assert not out.exists()


def test_grade_refuses_an_unknown_student(tmp_path: Path) -> None:
    out = tmp_path / "graded"
    sample = ROOT / "examples" / "submitted"
    result = cli("grade", "M03", "--submitted", str(sample), "--out", str(out), "--student", "nobody-here")
    assert result.returncode != 0 and "nobody-here" in result.stderr
    assert not out.exists()


def installed_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The course's packages copied into a bare folder, as a wheel puts them in site-packages."""
    site = tmp_path / "site-packages"
    for package in ("autograder", "common", "selfcheck"):
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PT2E_COURSE_ROOT", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    return site, env


@pytest.mark.parametrize(
    "command", [["check", "M03-4.ipynb"], ["grade", "M03"], ["release", "M03"], ["gradescope", "M03"]]
)
def test_outside_a_checkout_says_so_in_one_line(command: list[str], tmp_path: Path) -> None:
    site, env = installed_copy(tmp_path)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "M03-4.ipynb").write_text("{}")
    probe = subprocess.run(
        [sys.executable, "-c", "import autograder; print(autograder.__file__)"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert probe.stdout.startswith(str(site)), "the copy is what runs, not the checkout"
    result = subprocess.run(
        [sys.executable, "-c", "from autograder.cli import main; main()", *command],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "checkout" in lines[0] and "PT2E_COURSE_ROOT" in lines[0], result.stderr
    assert str(elsewhere) in lines[0], "it says where it looked"


def test_a_course_root_that_is_not_a_checkout_is_named(tmp_path: Path) -> None:
    _, env = installed_copy(tmp_path)
    env["PT2E_COURSE_ROOT"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", "from autograder.cli import main; main()", "check", "x.ipynb"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"PT2E_COURSE_ROOT={tmp_path}" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_checkout_is_found_from_inside_it(tmp_path: Path) -> None:
    """Run from the checkout (or a folder in it), a copy installed elsewhere still finds the course."""
    _, env = installed_copy(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", "from autograder.course import require_root; print(require_root())"],
        capture_output=True,
        text=True,
        cwd=ROOT / "source",
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == ROOT.resolve()
