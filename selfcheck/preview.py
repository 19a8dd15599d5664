"""The preview a graded cell runs while a student works: the public cases, offline.

``preview("M03-4", "add_quantizer", globals())`` runs the exercise's public cases
(``selfcheck/public/m03_4.py``) on the student's definitions with the preview seed and
compares the evidence with the answer key's, computed when the course was released and
shipped as data (``selfcheck/expected/M03-4.json``). It prints one line per public case
and raises ``ChecksFailed`` unless all of them agree. The hidden checks (other models,
other seeds) are not here: they stay with the instructor.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from selfcheck.casekit import Exercise, collect, module_name
from selfcheck.compare import case_difference

PREVIEW_SEED = 0
"""Seed of the public cases: the expected evidence shipped with the course is for this seed."""


class ChecksFailed(AssertionError):
    """A preview with a failing public case or a missing definition (the cell shows as failed).

    IPython shows its message instead of a traceback (``_render_traceback_``): what failed is printed above it.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


class PreviewUnavailable(RuntimeError):
    """The installed course has no public cases or expected evidence for this exercise."""


def public_exercises(notebook: str) -> dict[str, Exercise]:
    """The public cases of ``notebook``: exercise key → ``Exercise``."""
    try:
        module = importlib.import_module(f"selfcheck.public.{module_name(notebook)}")
    except ModuleNotFoundError:
        raise PreviewUnavailable(f"找不到 {notebook} 的公開例子（selfcheck.public）：請更新課程套件") from None
    return dict(module.PUBLIC)


def expected_path(notebook: str) -> Any:
    """Where the expected evidence of ``notebook`` is shipped (a file inside the package)."""
    return resources.files("selfcheck") / "expected" / f"{notebook}.json"


def expected_evidence(notebook: str) -> dict[str, Any]:
    """The answer key's evidence on the public cases of ``notebook`` (computed at release time)."""
    path = expected_path(notebook)
    if not path.is_file():
        raise PreviewUnavailable(f"找不到 {notebook} 的預期結果（selfcheck/expected/{notebook}.json）：請更新課程套件")
    return json.loads(path.read_text(encoding="utf-8"))


def _missing_message(names: list[str], stub: bool = False) -> str:
    listed = "、".join(names)
    if stub:
        return (
            f"先完成練習：{listed} 還沒有作答（把 raise NotImplementedError() 換成你的程式，執行那一格，再執行這一格）"
        )
    return f"先完成練習：還沒有定義 {listed}（先執行寫好 {listed} 的那一格，再執行這一格）"


@dataclass(frozen=True)
class PublicRun:
    """The public cases of one exercise run on a student's answer, beside the shipped expected evidence."""

    spec: Exercise
    evidence: dict[str, Any]
    expected: dict[str, Any]

    @property
    def problems(self) -> dict[str, str | None]:
        """Public case → what is wrong with the answer on it (None when it agrees)."""
        cases = self.evidence["cases"]
        return {
            name: case_difference(self.expected["cases"][name], cases[name], self.spec.tolerances)
            for name in self.spec.cases
        }


def run_public(notebook: str, exercise: str, namespace: Mapping[str, Any]) -> PublicRun:
    """Run ``exercise``'s public cases on ``namespace``.

    Raises ``ChecksFailed`` (one line) when a definition is missing or the exercise is not answered yet (its
    stub raises ``NotImplementedError`` in every case), ``PreviewUnavailable`` when the installed course has
    no public cases or expected evidence for the exercise.
    """
    spec = public_exercises(notebook).get(exercise)
    if spec is None:
        raise PreviewUnavailable(f"{notebook} 沒有練習 {exercise!r} 的公開例子")
    evidence = collect(spec, dict(namespace), PREVIEW_SEED)
    if "missing" in evidence:
        raise ChecksFailed(_missing_message(list(evidence["missing"])))
    records = evidence["cases"]
    if records and all(r.get("error") == "NotImplementedError" for r in records.values()):
        raise ChecksFailed(_missing_message(list(spec.names), stub=True))
    shipped = expected_evidence(notebook)
    expected = shipped.get("exercises", {}).get(exercise, {})
    if shipped.get("seed") != PREVIEW_SEED or set(expected.get("cases", {})) != set(spec.cases):
        raise PreviewUnavailable(f"{notebook} 的預期結果和公開例子對不上：請更新課程套件")
    return PublicRun(spec, evidence, expected)


def public_problems(notebook: str, exercise: str, namespace: Mapping[str, Any]) -> dict[str, str | None]:
    """Public case → what is wrong with ``namespace``'s answer on it (None when it agrees); raises as ``run_public``."""
    return run_public(notebook, exercise, namespace).problems


def preview(notebook: str, exercise: str, namespace: Mapping[str, Any]) -> None:
    """Run the public cases of ``exercise`` on ``namespace``; print ✓ / ✗ per case.

    When a case fails, the misconceptions the exercise's public detectors recognise follow, in the words the
    grader's feedback uses (``selfcheck.misconceptions.cause_lines``). Raises ``ChecksFailed`` (one line, in
    Chinese, shown without a traceback) when any public case differs from the expected evidence, and (one
    line, nothing printed) when a definition is missing or the exercise is not answered yet. Returns None, so
    the cell shows no ``Out:`` value.
    """
    from selfcheck.diagnosis import public_causes
    from selfcheck.misconceptions import causes_block

    run = run_public(notebook, exercise, namespace)
    problems = run.problems
    for name, problem in problems.items():
        if problem is None:
            print(f"✓ 公開例子「{name}」通過")
        else:
            print(f"✗ 公開例子「{name}」：{problem}")
    failed = sum(problem is not None for problem in problems.values())
    if failed:
        found = public_causes(
            run.spec.misconceptions, run.evidence, run.expected, [n for n, p in problems.items() if p is not None]
        )
        for line in causes_block(notebook, found):
            print(line)
        raise ChecksFailed(f"{len(problems)} 個公開例子中有 {failed} 個沒有通過（見上面的 ✗）")
