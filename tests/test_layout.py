"""The layout keeps the trust boundary: what the sandbox and the students can read imports nothing secret.

``autograder/sandboxed`` is everything of ``autograder`` the sandbox can read (``engine.sandbox.VISIBLE``):
it may import ``common``, ``selfcheck`` and itself, never the rest of ``autograder`` (keys, checks, the
engine). ``common`` and ``selfcheck`` are what students install: they import no ``autograder`` at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT


def imported(path: Path) -> set[str]:
    """Every module ``path`` (a file of this repository) imports."""
    return imported_by(path.read_text(encoding="utf-8"), ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1]))


def imported_by(source: str, package: str) -> set[str]:
    """Every module ``source`` imports, and every name it imports from one (relative imports resolved
    against ``package``, the package the source lives in)."""
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def modules_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules_under("autograder/sandboxed"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_sandboxed_side_imports_nothing_else_of_autograder(path: Path) -> None:
    outside = sorted(
        name
        for name in imported(path)
        if name.startswith("autograder.") and not name.startswith("autograder.sandboxed") and name != "autograder"
    )
    assert not outside, f"{path.relative_to(ROOT)} imports {outside}: the sandbox cannot read those"


@pytest.mark.parametrize(
    "path", [*modules_under("common"), *modules_under("selfcheck")], ids=lambda p: str(p.relative_to(ROOT))
)
def test_what_students_install_imports_no_autograder(path: Path) -> None:
    names = sorted(n for n in imported(path) if n == "autograder" or n.startswith("autograder."))
    assert not names, f"{path.relative_to(ROOT)} imports {names}: students do not have autograder"


def test_the_sandbox_sees_exactly_the_sandboxed_folder_of_autograder() -> None:
    from autograder.engine.sandbox import VISIBLE

    assert set(VISIBLE) == {"common", "selfcheck", "autograder/__init__.py", "autograder/sandboxed"}


def test_an_import_of_the_keys_is_found() -> None:
    assert "selfcheck.casekit" in imported(ROOT / "autograder" / "sandboxed" / "cases" / "base.py")
    found = imported_by(
        "from autograder.keys import m03_4\nfrom ...checks import support\n", "autograder.sandboxed.cases"
    )
    assert {"autograder.keys.m03_4", "autograder.checks", "autograder.checks.support"} <= found
