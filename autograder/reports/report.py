"""Turning verdicts into what a student reads: the exercise's score, the likely cause once, then the checks.

When the judge named a cause for an exercise's failures (``autograder.engine.diagnose``: ``causes`` and
``explained_by`` on the verdicts), the report states it first, once, in the words of the exercise's
record (``selfcheck.misconceptions.cause_lines``: the misconception, why it is wrong, the section to
reread), then lists the failed checks it explains by name only. A failed check no named cause explains
keeps its own message (what was expected, what was seen). ``text_report`` and ``exercise_sections``
serve the terminal, the notebook, nbgrader and results.json; ``results.feedback_html`` the same for HTML.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from autograder.reports.hygiene import clean
from selfcheck.diagnosis import SHOWN_CAUSES
from selfcheck.misconceptions import Misconception, cause_lines, section_url, where_to_read


def points_text(points: float) -> str:
    """``3.0`` → ``"3"``, ``1.5`` → ``"1.5"``."""
    return f"{points:g}"


def score_text(verdict: dict[str, Any]) -> str:
    return f"{points_text(verdict['score'])} / {points_text(verdict['points'])} 分"


@dataclass
class Cause:
    """A named cause of an exercise's failures, with the words of its record."""

    notebook: str
    misconception: Misconception
    first: bool

    @property
    def lines(self) -> list[str]:
        return cause_lines(self.notebook, self.misconception, first=self.first)

    @property
    def url(self) -> str | None:
        return section_url(self.notebook, self.misconception.section)

    @property
    def where(self) -> str:
        return where_to_read(self.notebook, self.misconception.section)


@dataclass
class ExerciseSection:
    """One exercise's part of a report: its causes, the checks they explain, the other failures, the passes."""

    title: str
    score: float
    total: float
    causes: list[Cause] = field(default_factory=list)
    explained: list[dict[str, Any]] = field(default_factory=list)
    unexplained: list[dict[str, Any]] = field(default_factory=list)
    passed: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    shared_message: str = ""
    """With no named cause: the one message every failed check gave (a crash before grading, an unfinished
    answer, a refused recording), said once instead of once per check."""

    @property
    def headline(self) -> str:
        return f"練習「{clean(self.title)}」：{points_text(self.score)} / {points_text(self.total)} 分"


def _misconception(notebook: str, exercise: str, key: str) -> Misconception | None:
    from selfcheck.preview import public_exercises

    try:
        return public_exercises(notebook)[exercise].misconception(key)
    except Exception:  # a verdict from another version of the course: no words for it, no cause shown
        return None


def exercise_section(title: str, verdicts: Iterable[dict[str, Any]]) -> ExerciseSection:
    """Sort one exercise's verdicts into the parts a report shows (see the module docstring)."""
    verdicts = list(verdicts)
    section = ExerciseSection(
        title, sum(v["score"] for v in verdicts), sum(v["points"] for v in verdicts), verdicts=verdicts
    )
    failed = [v for v in verdicts if not v["passed"]]
    keys = next((list(v.get("causes") or []) for v in failed), [])[:SHOWN_CAUSES]
    for key in keys:
        found = _misconception(str(failed[0].get("notebook")), str(failed[0].get("exercise")), str(key))
        if found is not None:
            section.causes.append(Cause(str(failed[0].get("notebook")), found, first=not section.causes))
    named = {cause.misconception.key for cause in section.causes}
    messages = {str(v.get("message") or "") for v in failed}
    if not section.causes and len(failed) > 1 and len(messages) == 1 and "" not in messages:
        section.shared_message = messages.pop()
    for verdict in verdicts:
        if verdict["passed"]:
            section.passed.append(verdict)
        elif verdict.get("explained_by") in named:
            section.explained.append(verdict)
        else:
            section.unexplained.append(verdict)
    return section


def _check_line(verdict: dict[str, Any], indent: str = "  ") -> str:
    mark = "✓" if verdict["passed"] else "✗"
    return f"{indent}{mark} {score_text(verdict)}｜{clean(verdict['name'])}"


def exercise_report(title: str, verdicts: Iterable[dict[str, Any]]) -> str:
    """A few lines: the exercise's score; the likely cause once, with the checks it explains; every other check
    with ✓ / ✗ and, for a failure no cause explains, its message."""
    section = exercise_section(title, verdicts)
    lines = [section.headline]
    if section.shared_message:
        lines.append(f"  沒有通過的 {len(section.unexplained)} 項檢查都是同一個原因：")
        lines.extend(f"    {line}" for line in clean(section.shared_message).splitlines())
        lines.extend(_check_line(v) for v in section.verdicts)
        return "\n".join(lines)
    if not section.causes:
        for verdict in section.verdicts:
            lines.append(_check_line(verdict))
            if not verdict["passed"] and verdict["message"]:
                lines.extend(f"      {line}" for line in clean(verdict["message"]).splitlines())
        return "\n".join(lines)
    for cause in section.causes:
        first, *rest = cause.lines
        lines.append(f"  {clean(first)}")
        lines.extend(f"    {clean(line)}" for line in rest)
    if section.explained:
        lines.append(f"  這個原因讓 {len(section.explained)} 項檢查沒有通過：")
        lines.extend(_check_line(v, "    ") for v in section.explained)
    if section.unexplained:
        lines.append("  其他沒有通過的檢查：")
        for verdict in section.unexplained:
            lines.append(_check_line(verdict, "    "))
            if verdict["message"]:
                lines.extend(f"        {line}" for line in clean(verdict["message"]).splitlines())
    if section.passed:
        lines.append("  通過的檢查：")
        lines.extend(_check_line(v, "    ") for v in section.passed)
    return "\n".join(lines)


def by_exercise(verdicts: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Verdicts grouped by exercise, in the order they came."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for verdict in verdicts:
        grouped.setdefault(str(verdict.get("exercise")), []).append(verdict)
    return grouped


def exercise_titles(notebook: str) -> dict[str, str]:
    """Exercise key → title, from the public record (empty for an unknown notebook)."""
    from selfcheck.preview import public_exercises

    try:
        return {key: exercise.title for key, exercise in public_exercises(notebook).items()}
    except Exception:
        return {}
