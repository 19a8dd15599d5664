"""Every limit is declared once (``autograder/sandboxed/limits.py``) and read from there.

The command line, nbgrader's bridge and the Gradescope bundle take each default and help text
from ``Limits``; a default written again anywhere else would drift the day one of them changes.
"""

from __future__ import annotations

import re

from conftest import ROOT

from autograder.sandboxed.limits import Limits, described, option

DECLARED = ROOT / "autograder" / "sandboxed" / "limits.py"


def sources() -> list:
    """The course's own code and text a default could be restated in (tests and generated files aside)."""
    found = [p for p in ROOT.glob("autograder/**/*.py") if p != DECLARED]
    found += [ROOT / "nbgrader_config.py", ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md"]
    found += list(ROOT.glob("scripts/*")) + list(ROOT.glob("bench/*.py"))
    return [p for p in found if p.is_file()]


def restatements(text: str) -> list[str]:
    """Where ``text`` writes a limit's default again: the limit's name or option and its default on one
    line, or "預設 <default>" in a help text."""
    found = []
    for name, default, _, _ in described():
        for spelling in (name, option(name)):
            pattern = rf"{re.escape(spelling)}\b[^\n]{{0,60}}(?<![\w.]){default}(?![\w.])"
            found += [m.group(0) for m in re.finditer(pattern, text)]
        found += [m.group(0) for m in re.finditer(rf"預設\s*{default}(?![\d.])", text)]
    return found


def test_no_default_is_restated() -> None:
    restated = [
        f"{path.relative_to(ROOT)}: {hit}" for path in sources() for hit in restatements(path.read_text("utf-8"))
    ]
    assert not restated, f"limits' defaults are declared in {DECLARED.name} only: {restated}"


def test_a_restated_default_is_found() -> None:
    assert restatements('    memory_mb = Integer(3072, help="Memory a submission may add, in MB.")')
    assert restatements('help="每一格的時間上限（秒，預設 120）"')
    assert restatements("pt2e-course grade M03 --notebook-seconds 600")
    assert not restatements("memory_mb = Integer(limits.memory_mb)") and not restatements("conv2d_1200")


def test_the_command_line_and_nbgrader_read_every_limit() -> None:
    from autograder.cli import build_parser
    from autograder.integrations.nbgrader_bridge import SandboxedExecute

    parser = build_parser()
    grade = next(a for a in parser._subparsers._actions if a.dest == "command").choices["grade"]
    options = {action.dest: action for action in grade._actions}
    traits = SandboxedExecute.class_traits(config=True)
    for name, default, text, _ in described():
        assert options[name].default == default and text in options[name].help, name
        assert traits[name].default_value == default and text in traits[name].help, name
    assert Limits() == Limits(**{name: default for name, default, *_ in described()})
