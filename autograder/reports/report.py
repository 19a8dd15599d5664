"""Turning verdicts into text a student reads: scores per exercise, messages per check."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autograder.reports.hygiene import clean


def points_text(points: float) -> str:
    """``3.0`` → ``"3"``, ``1.5`` → ``"1.5"``."""
    return f"{points:g}"


def exercise_report(title: str, verdicts: Iterable[dict[str, Any]]) -> str:
    """A few lines: the exercise's score, then ✓ / ✗ per check with the failure message."""
    verdicts = list(verdicts)
    score = sum(v["score"] for v in verdicts)
    total = sum(v["points"] for v in verdicts)
    lines = [f"練習「{clean(title)}」：{points_text(score)} / {points_text(total)} 分"]
    for v in verdicts:
        mark = "✓" if v["passed"] else "✗"
        lines.append(f"  {mark} {points_text(v['score'])} / {points_text(v['points'])} 分｜{clean(v['name'])}")
        if not v["passed"] and v["message"]:
            lines.extend(f"      {line}" for line in clean(v["message"]).splitlines())
    return "\n".join(lines)
