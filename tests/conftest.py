"""Shared fixtures and helpers of the repository's tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass(frozen=True)
class WrongSolution:
    """A plausible wrong solution kept as a fixture: code for one exercise's solution cell."""

    path: Path
    notebook: str
    exercise: str
    description: str
    expect_fail: tuple[str, ...]

    @property
    def code(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def id(self) -> str:
        return f"{self.notebook}/{self.path.stem}"


def wrong_solutions() -> list[WrongSolution]:
    """Every file tests/fixtures/wrong/<notebook>/<name>.py with its header lines:

    ``# wrong: what is wrong``, ``# exercise: key``, ``# expect-fail: test_a test_b``.
    """
    found = []
    for path in sorted((FIXTURES / "wrong").glob("*/*.py")):
        text = path.read_text(encoding="utf-8")
        header = dict(re.findall(r"^# (wrong|exercise|expect-fail): (.*)$", text, flags=re.M))
        found.append(
            WrongSolution(
                path,
                path.parent.name,
                header["exercise"].strip(),
                header["wrong"].strip(),
                tuple(header["expect-fail"].split()),
            )
        )
    return found
