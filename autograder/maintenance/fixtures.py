"""The kept solutions of every exercise (``tests/fixtures``), and how well the grader diagnoses the wrong ones.

A wrong solution is a file ``tests/fixtures/wrong/<notebook>/<name>.py`` with header lines:

- ``# wrong: what is wrong`` (for the maintainer);
- ``# exercise: key``;
- ``# expect-fail: test_a test_b``: checks it must fail on every seed;
- ``# misconception: key``: the misconception of the exercise's record it encodes
  (``Exercise.misconceptions``); the grader should name it as the most likely cause;
- ``# diagnosed: no``: only where no detector recognises it yet (it counts against the module's
  diagnosis rate, and ``tests/test_checks.py`` fails once it is recognised, so the line goes);
- ``# notebook: no``: only where the notebook cannot name the misconception yet: the exercise's public
  cases, which the preview cell (and a failed self-check) runs while the student works, either all pass on
  this answer or name another cause first. It counts against the module's notebook rate, and
  ``tests/test_notebook_diagnosis.py`` fails once the notebook names it, so the line goes;
- ``# via-nbgrader: yes`` (optional): also graded by a full ``nbgrader autograde`` run.

A right solution (``tests/fixtures/right/<notebook>/<name>.py``) has ``# right: how it differs`` and
``# exercise: key``: a correct answer written another way, which must get full marks.

``pt2e-course diagnoses [NOTEBOOK…]`` grades the wrong solutions as the grader does and prints, per
fixture, the cause the feedback names, and per module the share of fixtures diagnosed right;
``--notebook`` does the same with what the notebook alone shows (the public cases the preview runs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
TARGET_RATE = 0.8
"""At least this share of a module's wrong solutions gets the right cause named (issue 37)."""
NOTEBOOK_GOAL = (0.9, 0.8)
"""Issue 49's goal for the notebook alone: this share course-wide, and in every module."""


@dataclass(frozen=True)
class WrongSolution:
    """A plausible wrong solution kept as a fixture: code for one exercise's solution cell."""

    path: Path
    notebook: str
    exercise: str
    description: str
    expect_fail: tuple[str, ...]
    via_nbgrader: bool
    misconception: str = ""
    diagnosed: bool = True
    """False for a fixture marked ``# diagnosed: no``: no detector recognises it yet."""
    in_notebook: bool = True
    """False for a fixture marked ``# notebook: no``: the notebook's public cases do not name it first yet."""

    @property
    def code(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def id(self) -> str:
        return f"{self.notebook}/{self.path.stem}"

    @property
    def module(self) -> str:
        return self.notebook.split("-")[0]


@dataclass(frozen=True)
class RightSolution:
    """A correct solution written differently from the key: it must get full marks."""

    path: Path
    notebook: str
    exercise: str
    description: str

    @property
    def code(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def id(self) -> str:
        return f"{self.notebook}/{self.path.stem}"


def _header(text: str, names: str) -> dict[str, str]:
    return {key: value.strip() for key, value in re.findall(rf"^# ({names}): (.*)$", text, flags=re.M)}


def right_solutions(root: Path = FIXTURES) -> list[RightSolution]:
    """Every file ``right/<notebook>/<name>.py``."""
    found = []
    for path in sorted((root / "right").glob("*/*.py")):
        header = _header(path.read_text(encoding="utf-8"), "right|exercise")
        found.append(RightSolution(path, path.parent.name, header["exercise"], header["right"]))
    return found


def wrong_solutions(root: Path = FIXTURES) -> list[WrongSolution]:
    """Every file ``wrong/<notebook>/<name>.py`` with its header (see the module docstring)."""
    found = []
    for path in sorted((root / "wrong").glob("*/*.py")):
        header = _header(
            path.read_text(encoding="utf-8"), "wrong|exercise|expect-fail|via-nbgrader|misconception|diagnosed|notebook"
        )
        found.append(
            WrongSolution(
                path,
                path.parent.name,
                header["exercise"],
                header["wrong"],
                tuple(header["expect-fail"].split()),
                header.get("via-nbgrader", "") == "yes",
                header.get("misconception", ""),
                header.get("diagnosed", "yes") != "no",
                header.get("notebook", "yes") != "no",
            )
        )
    return found


# --- how well the grader diagnoses them -------------------------------------------------------------


def judged(notebook: str, exercise: str, namespace: dict, seed: int) -> list[dict]:
    """The verdicts of the definitions in ``namespace`` for ``exercise`` on ``seed``, graded as the grader grades:
    recorded, sent as JSON, replayed, judged (the kept solutions are ours: no sandbox)."""
    from autograder.engine.judge import judge
    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.record import record_exercise
    from autograder.sandboxed.replay import derive

    spec = exercises_of(notebook)[exercise]
    recorded = json.loads(json.dumps(record_exercise(spec, namespace, seed)))
    evidence = {"notebook": notebook, "seed": seed, "exercises": {exercise: derive(spec, recorded, seed)}}
    return judge(evidence, [exercise])


def named_causes(wrong: WrongSolution, seed: int) -> tuple[list[str], set[str]]:
    """The causes the grader names for ``wrong`` on ``seed`` (most likely first) and the checks it fails."""
    namespace: dict = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    verdicts = judged(wrong.notebook, wrong.exercise, namespace, seed)
    failed = {v["id"].rsplit(":", 1)[-1] for v in verdicts if not v["passed"]}
    causes = next((list(v.get("causes", [])) for v in verdicts if not v["passed"]), [])
    return causes, failed


@dataclass(frozen=True)
class NotebookDiagnosis:
    """What the notebook alone shows of a wrong solution: the public cases it fails, the causes named (first first)."""

    failed_cases: tuple[str, ...]
    causes: tuple[str, ...]
    refused: str = ""
    """The preview's one line when it ran no case (a definition missing, the stub left)."""

    def names(self, misconception: str) -> bool:
        """True when a public case fails and the first cause named is ``misconception``."""
        return bool(self.failed_cases) and self.causes[:1] == (misconception,)


def notebook_diagnosis(wrong: WrongSolution) -> NotebookDiagnosis:
    """Run ``wrong``'s exercise's public cases on it, as the notebook's preview cell does (``selfcheck.preview``)
    and a failed self-check does (``selfcheck.self_check.diagnosis_lines``), and rank the causes their public
    detectors recognise with the same code (``selfcheck.diagnosis.public_causes``)."""
    from selfcheck.diagnosis import public_causes
    from selfcheck.preview import ChecksFailed, run_public

    namespace: dict = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    try:
        run = run_public(wrong.notebook, wrong.exercise, namespace)
    except ChecksFailed as refused:
        return NotebookDiagnosis((), (), str(refused))
    failed = tuple(name for name, problem in run.problems.items() if problem is not None)
    causes = tuple(m.key for m in public_causes(run.spec.misconceptions, run.evidence, run.expected, failed))
    return NotebookDiagnosis(failed, causes)


@dataclass(frozen=True)
class ModuleRate:
    """How many of a module's wrong solutions are marked diagnosed (and so must be diagnosed right)."""

    module: str
    diagnosed: int
    total: int

    @property
    def rate(self) -> float:
        return self.diagnosed / self.total if self.total else 1.0


def module_rates(wrongs: Iterable[WrongSolution], notebook: bool = False) -> list[ModuleRate]:
    """Per module, the wrong solutions whose stated misconception the grader names first (by their headers;
    ``tests/test_checks.py`` holds each header true on every seed). ``notebook=True``: the ones the notebook
    alone names first (``# notebook``; ``tests/test_notebook_diagnosis.py`` holds it true)."""
    counts: dict[str, list[int]] = {}
    for wrong in wrongs:
        tally = counts.setdefault(wrong.module, [0, 0])
        named = wrong.in_notebook if notebook else wrong.diagnosed
        tally[0] += int(named and bool(wrong.misconception))
        tally[1] += 1
    return [ModuleRate(module, d, t) for module, (d, t) in sorted(counts.items())]


def course_rate(rates: Iterable[ModuleRate]) -> ModuleRate:
    """The modules' rates added up."""
    rates = list(rates)
    return ModuleRate("全部", sum(r.diagnosed for r in rates), sum(r.total for r in rates))


def notebook_report(notebooks: Iterable[str] = ()) -> str:
    """A table: each wrong solution of ``notebooks`` (all when empty), what it encodes, what the notebook names
    (its public cases, as the preview runs them), and per module the share named first."""
    import common.pt2e  # noqa: F401  (torchao imported through it: none of its load messages in the table)

    wanted = set(notebooks)
    wrongs = [w for w in wrong_solutions() if not wanted or wanted & {w.notebook, w.module, w.id}]
    lines, counts = [], {}
    for wrong in wrongs:
        seen = notebook_diagnosis(wrong)
        right = seen.names(wrong.misconception)
        tally = counts.setdefault(wrong.module, [0, 0])
        tally[0] += int(right)
        tally[1] += 1
        if seen.refused:
            got = f"（預覽沒有執行：{seen.refused}）"
        elif not seen.failed_cases:
            got = "（公開例子全部通過）"
        else:
            got = "、".join(seen.causes) or "（沒有點名原因）"
        lines.append(f"{'✓' if right else '✗'} {wrong.id:<50} {wrong.misconception or '（沒寫）':<32} 筆記本：{got}")
    lines.append("")
    rates = [ModuleRate(module, d, t) for module, (d, t) in sorted(counts.items())]
    for rate in [*rates, course_rate(rates)]:
        lines.append(f"{rate.module}：筆記本點名對 {rate.diagnosed} / {rate.total}（{rate.rate:.0%}）")
    return "\n".join(lines)


def once_report(notebooks: Iterable[str] = (), seed: int = 0) -> str:
    """Issue 50's measure, "one mistake costs once": each wrong solution graded as the grader does, its points, and
    the failed checks its cause does not explain (what the feedback lists under 其他沒有通過的檢查); per module the
    share whose failed checks all sit under their cause."""
    import common.pt2e  # noqa: F401  (torchao imported through it: none of its load messages in the table)

    wanted = set(notebooks)
    lines, counts = [], {}
    for wrong in wrong_solutions():
        if wanted and not wanted & {wrong.notebook, wrong.module, wrong.id}:
            continue
        namespace: dict = {}
        exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
        verdicts = judged(wrong.notebook, wrong.exercise, namespace, seed)
        stray = [
            v["id"].rsplit(":", 1)[-1]
            for v in verdicts
            if not v["passed"] and v.get("explained_by") != wrong.misconception
        ]
        score, points = sum(v["score"] for v in verdicts), sum(v["points"] for v in verdicts)
        tally = counts.setdefault(wrong.module, [0, 0])
        tally[0] += not stray
        tally[1] += 1
        rest = f"  其他沒有通過的：{'、'.join(stray)}" if stray else ""
        lines.append(f"{'✓' if not stray else '✗'} {wrong.id:<50} {score:g} / {points:g}{rest}")
    lines.append("")
    rates = [ModuleRate(module, d, t) for module, (d, t) in sorted(counts.items())]
    for rate in [*rates, course_rate(rates)]:
        lines.append(
            f"{rate.module}：沒有通過的檢查都在它的原因底下 {rate.diagnosed} / {rate.total}（{rate.rate:.0%}）"
        )
    return "\n".join(lines)


def report(notebooks: Iterable[str] = (), seeds: Iterable[int] = (0,)) -> str:
    """A table: each wrong solution of ``notebooks`` (all when empty), what it encodes, what the grader names."""
    import common.pt2e  # noqa: F401  (torchao imported through it: none of its load messages in the table)

    wanted = set(notebooks)
    wrongs = [w for w in wrong_solutions() if not wanted or wanted & {w.notebook, w.module, w.id}]
    lines = []
    for wrong in wrongs:
        per_seed = []
        for seed in seeds:
            causes, _ = named_causes(wrong, seed)
            per_seed.append(causes[0] if causes else "—")
        right = all(cause == wrong.misconception for cause in per_seed)
        mark = "✓" if right else "✗"
        lines.append(f"{mark} {wrong.id:<50} {wrong.misconception or '（沒寫）':<32} 得到：{'、'.join(per_seed)}")
    lines.append("")
    for rate in module_rates(wrongs):
        lines.append(f"{rate.module}：{rate.diagnosed} / {rate.total} 標為診斷得出（{rate.rate:.0%}）")
    return "\n".join(lines)
