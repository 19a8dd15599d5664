"""What the class record says about the class: score distributions, item statistics, misconceptions, operations.

Item statistics follow classical test theory, as Moodle's quiz statistics do:

- **facility**: the share of the students who passed a check (for an exercise: who got its full marks);
- **discrimination**: the point-biserial correlation between passing the check and the student's score on
  the *rest* of the module (the module's total without this check, so that a check does not correlate
  with itself);
- **upper–lower index**: the facility among the 27 % of students with the highest rest score minus the
  facility among the 27 % with the lowest (Kelley's index), which reads more plainly than a correlation.

A check that nobody passed or everybody passed tells the instructor nothing about who understood, and one
whose discrimination is negative is passed more by the students who did worse elsewhere: both are flagged
for a look, with the reason, as is a check nearly everyone passes whose few failures do not go with a
weaker rest score (``EASY``, ``WEAK``). A check's figures are over the students whose answer to its exercise was
judged: an answer never written (a notebook not handed in or left as handed out, ``raise
NotImplementedError()``) or never graded (a crash before it, a limit, tampering) says nothing about a
check, and is counted under operations instead. The exercise's score distribution keeps everyone.

One name per measure: **通過率** is the facility of an item, a check (passed) or an exercise (passed all of its
checks, that is: got its full points); **鑑別度** the point-biserial (for an exercise: its score against the rest);
**高低分組差** Kelley's index. Below ``RELIABLE`` students a figure is shown with "n < 30：僅供參考".

Cells that raised are listed for the instructor only when a wrong answer does not explain them
(``unexplained_cell_errors``): a self-check, a preview or a locked cell's assert that failed on an answer that lost
points is an ordinary wrong answer, which the checks and the misconceptions already count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from autograder.reports.class_record import ClassRecord, scores

UPPER_LOWER = 0.27
EASY, WEAK = 0.95, 0.1
"""A check at least this easy whose discrimination is below ``WEAK`` is flagged too (Moodle flags a facility
over 95 %): the few who failed it are not the weaker students, so it may be catching something else."""
MIN_STUDENTS = 5
"""Below this many students a correlation says nothing: no discrimination is computed, nothing is flagged for it."""
RELIABLE = 30
"""Below this many students an item's figures are shown as indicative only ("n < 30：僅供參考")."""
LOW_SCORE = 0.5
"""A student whose total is below this share of the maximum is among those who need attention."""

OPERATION_LABELS = {
    "missing": "沒有交",
    "unreadable": "檔案讀不出來",
    "unanswered": "整本沒有作答",
    "unfinished": "有練習還沒寫完",
    "timeout": "超過時間上限",
    "memory": "超過記憶體上限",
    "crashed": "行程結束或當掉",
    "flood": "送出的資料超過上限",
    "closed": "關掉了回報評分的通道",
    "replay": "重現評分紀錄時碰到上限",
    "output": "印出的內容太多",
    "cell_errors": "有格子出錯",
    "tampering": "疑似竄改",
    "grader": "評分程式出錯（請回報）",
}
"""Each kind of operation, as the report names it (``autograder.engine.grading.OPERATION_KINDS`` and the
kinds derived here)."""

OPERATION_MEANINGS = {
    "missing": "這本 notebook 不在繳交的資料夾裡，每一題 0 分。",
    "unreadable": "繳交的檔案不是讀得出來的 notebook（壞掉的 JSON、不是 notebook 的檔案），每一題 0 分。",
    "unanswered": "和發下去的版本一樣，沒有執行，每一題 0 分。",
    "unfinished": "這幾題的答案走到 raise NotImplementedError()，或作答格和發下去的一樣。",
    "timeout": "整本 notebook 超過時間上限被中止；沒跑到的題目 0 分。",
    "memory": "所有行程合計超過記憶體上限被中止；沒跑到的題目 0 分。",
    "crashed": "程式讓行程結束了（os._exit、當掉）；沒跑到的題目 0 分。",
    "flood": "送回的資料超過上限被中止。",
    "closed": "程式關掉了回報評分結果的通道，被中止。",
    "replay": "在另一個沙盒重現這一題的評分紀錄時超過時間或記憶體上限，這一題 0 分。",
    "output": "印出的內容超過上限，多的部分沒有保留（分數不受影響）。",
    "cell_errors": "有格子執行時出錯，而且答錯解釋不了（學生自己的格子、setup 格、超過每格的時間上限、讀取不該讀的模組）；"
    "自我檢查、評分預覽或鎖定格的 assert 因為答錯而沒通過的，是一般的答錯，不列在這裡。",
    "tampering": "評分時偵測到竄改或疑似竄改，被竄改的部分不計分；成績表的 tampering 欄是這類紀錄的數目。",
    "grader": "評分程式自己出錯：不是學生的問題，請把這一列回報給課程維護者。",
}


@dataclass
class CheckStats:
    """One hidden check across the class."""

    id: str
    notebook: str
    exercise: str
    name: str
    points: float
    facility: float
    mean_points: float
    discrimination: float | None
    upper_lower: float | None
    flags: list[str] = field(default_factory=list)
    students: int = 0
    """How many students the figures are over (those whose answer to the exercise was judged)."""


@dataclass
class ExerciseStats:
    """One exercise across the class: full marks, mean points, discrimination of its score, and its checks."""

    notebook: str
    exercise: str
    title: str
    points: float
    facility: float
    mean_points: float
    discrimination: float | None
    checks: list[CheckStats] = field(default_factory=list)
    students: int = 0


@dataclass
class MisconceptionCount:
    """One misconception the feedback named, and the students it named it to."""

    notebook: str
    exercise: str
    key: str
    name: str
    url: str | None
    where: str
    students: list[str] = field(default_factory=list)
    first: int = 0
    """How many of them got it as the most likely cause."""
    practice: str | None = None
    """The name its practice asks for (``selfcheck.practice``), None when it has none."""
    practised: list[str] = field(default_factory=list)
    """Those of ``students`` whose handed-in notebook defines its practice, passing its check (judged in the sandbox)."""


@dataclass
class Operation:
    student: str
    notebook: str
    kind: str
    text: str


@dataclass
class Run:
    """One grading run that the record holds students of: its seed and how to repeat it."""

    seed: int | None
    command: str
    students: int
    graded_at: str


@dataclass
class ClassStats:
    module: str
    students: list[str]
    """Students who handed in at least one notebook: the statistics are over them."""
    absent: list[str]
    notebooks: list[tuple[str, float]]
    """Each notebook and its maximum."""
    scores: dict[str, dict[str, float]]
    """Student → notebook → score (and ``"total"``)."""
    exercises: list[ExerciseStats]
    misconceptions: list[MisconceptionCount]
    operations: list[Operation]
    runs: list[Run]
    sandbox: list[str] = field(default_factory=list)
    """How the sandbox ran (the memory limit's mode, measures the machine could not apply), once each."""
    explained_errors: list[str] = field(default_factory=list)
    """Students whose cells raised only where a wrong answer explains it (not listed under operations)."""

    @property
    def maximum(self) -> float:
        return sum(m for _, m in self.notebooks)

    @property
    def checks(self) -> list[CheckStats]:
        return [c for e in self.exercises for c in e.checks]

    @property
    def flagged(self) -> list[CheckStats]:
        return [c for c in self.checks if c.flags]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def correlation(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r (the point-biserial when ``xs`` is 0/1); None when either side does not vary."""
    if len(xs) < 2:
        return None
    mx, my = _mean(xs), _mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def upper_lower_index(xs: list[float], rest: list[float], share: float = UPPER_LOWER) -> float | None:
    """Mean of ``xs`` in the top ``share`` of students by ``rest`` minus its mean in the bottom ``share``."""
    n = len(xs)
    k = math.ceil(n * share)
    if n < 2 or k < 1 or 2 * k > n:
        return None
    order = sorted(range(n), key=lambda i: rest[i])
    return _mean([xs[i] for i in order[-k:]]) - _mean([xs[i] for i in order[:k]])


def check_flags(facility: float, discrimination: float | None, students: int) -> list[str]:
    """Why a check deserves a look, in the report's words (empty when it does not, or when fewer than
    ``MIN_STUDENTS`` answers were judged: three students who all passed say nothing about a check)."""
    if students < MIN_STUDENTS:
        return []
    flags = []
    if facility <= 0:
        flags.append("沒有人通過：可能太嚴、條件寫錯，或教材沒有教到")
    elif facility >= 1:
        flags.append("每個人都通過：分不出誰懂，也可能什麼錯都抓不到")
    elif facility >= EASY and discrimination is not None and discrimination < WEAK:
        flags.append(
            f"幾乎每個人都通過（{facility:.1%}），鑑別度也低（{discrimination:.2f}）：沒通過的少數人不是比較弱的那些，"
            "看看他們錯在哪裡，這項檢查是不是在抓別的東西"
        )
    if discrimination is not None and discrimination < 0:
        flags.append(f"鑑別度是負的（{discrimination:.2f}）：其他部分考得好的學生反而比較常沒通過，可能不公平或有錯")
    return flags


@cache
def _titles(notebook: str) -> dict[str, Any]:
    from selfcheck.preview import public_exercises

    try:
        return dict(public_exercises(notebook))
    except Exception:  # a record from another version of the course: keys without titles
        return {}


def class_stats(record: ClassRecord) -> ClassStats:
    """Everything the report shows, computed from the class record."""
    entries = list(record.students.values())
    present = [e for e in entries if not all(_only_missing(n) for n in e["notebooks"])]
    absent = [e["student"] for e in entries if e not in present]
    by_student = {e["student"]: {**scores(e), "total": _total(e)} for e in entries}
    exercises = _exercise_stats(present)
    return ClassStats(
        module=record.module,
        students=[e["student"] for e in present],
        absent=absent,
        notebooks=record.notebooks(),
        scores=by_student,
        exercises=exercises,
        misconceptions=misconception_counts(entries),
        operations=operations(entries),
        runs=_runs(entries),
        explained_errors=sorted(
            e["student"]
            for e in entries
            if any(nb.get("cell_errors") for nb in e["notebooks"])
            and not any(unexplained_cell_errors(nb) for nb in e["notebooks"])
        ),
        sandbox=list(dict.fromkeys(n for e in entries for nb in e["notebooks"] for n in nb.get("sandbox", []))),
    )


def _only_missing(nb: dict[str, Any]) -> bool:
    return any(o.get("kind") == "missing" for o in nb.get("operations", []))


def _total(entry: dict[str, Any]) -> float:
    return sum(scores(entry).values())


def _attempted(nb: dict[str, Any]) -> bool:
    """Handed in, readable and not as handed out."""
    return not any(o.get("kind") in NOT_ATTEMPTED for o in nb.get("operations", []))


def _judged(nb: dict[str, Any], exercise: str) -> bool:
    """Whether the student's answer to ``exercise`` was judged: the notebook handed in, readable and not as handed
    out, the answer written (not stopping at ``raise NotImplementedError()``), and graded (not zeroed for a limit,
    a crash before it, a refused recording or tampering)."""
    if not _attempted(nb):
        return False
    return exercise not in nb.get("unfinished", []) and exercise not in nb.get("unjudged", [])


NOT_ATTEMPTED = ("missing", "unreadable", "unanswered")


def _exercise_stats(entries: list[dict[str, Any]]) -> list[ExerciseStats]:
    """Per check and per exercise, over the students whose answer to the exercise was judged (``_judged``: an
    answer never written or never graded says nothing about a check); the rest score is the whole module's."""
    order: dict[str, dict[str, Any]] = {}
    per_check: dict[str, dict[int, float]] = {}  # check → student index → score, attempted notebooks only
    totals = [_total(e) for e in entries]
    for i, entry in enumerate(entries):
        for nb in entry["notebooks"]:
            for v in nb["verdicts"]:
                order.setdefault(v["id"], {**v, "notebook": nb["notebook"]})
                if _judged(nb, str(v["exercise"])):
                    per_check.setdefault(v["id"], {})[i] = float(v["score"])
    exercises: dict[tuple[str, str], ExerciseStats] = {}
    for check_id, info in order.items():
        got = per_check.get(check_id, {})
        who = sorted(got)
        points = float(info["points"]) or 1.0
        passed = [1.0 if got[i] >= points - 1e-9 else 0.0 for i in who]
        rest = [totals[i] - got[i] for i in who]
        enough = len(who) >= MIN_STUDENTS
        facility = _mean(passed)
        r = correlation(passed, rest) if enough else None
        check = CheckStats(
            id=check_id,
            notebook=info["notebook"],
            exercise=str(info["exercise"]),
            name=str(info["name"]),
            points=float(info["points"]),
            facility=facility,
            mean_points=_mean([got[i] for i in who]),
            discrimination=r,
            upper_lower=upper_lower_index(passed, rest) if enough else None,
            flags=check_flags(facility, r, len(who)) if who else [],
            students=len(who),
        )
        key = (check.notebook, check.exercise)
        if key not in exercises:
            record = _titles(check.notebook).get(check.exercise)
            exercises[key] = ExerciseStats(
                check.notebook, check.exercise, record.title if record else check.exercise, 0.0, 0.0, 0.0, None
            )
        exercises[key].checks.append(check)
    for exercise in exercises.values():
        ids = [c.id for c in exercise.checks]
        exercise.points = sum(c.points for c in exercise.checks)
        who = sorted(per_check.get(ids[0], {}))
        got = [sum(per_check[c][i] for c in ids) for i in who]
        exercise.students = len(who)
        exercise.facility = _mean([1.0 if g >= exercise.points - 1e-9 else 0.0 for g in got])
        exercise.mean_points = _mean(got)
        rest = [totals[i] - g for i, g in zip(who, got, strict=True)]
        exercise.discrimination = correlation(got, rest) if len(who) >= MIN_STUDENTS else None
    return list(exercises.values())


def misconception_counts(entries: Iterable[dict[str, Any]]) -> list[MisconceptionCount]:
    """Each misconception the feedback named (the causes of an exercise's failed checks), with its students,
    most students first."""
    from selfcheck.misconceptions import section_url, where_to_read

    found: dict[tuple[str, str, str], MisconceptionCount] = {}
    for entry in entries:
        for nb in entry["notebooks"]:
            named: dict[str, list[str]] = {}
            for v in nb["verdicts"]:
                if not v["passed"] and v.get("causes") and v["exercise"] not in named:
                    named[v["exercise"]] = list(v["causes"])
            for exercise, keys in named.items():
                record = _titles(nb["notebook"]).get(exercise)
                for rank, key in enumerate(keys[:2]):
                    known = record.misconception(key) if record is not None else None
                    if known is None:
                        continue
                    count = found.setdefault(
                        (nb["notebook"], exercise, key),
                        MisconceptionCount(
                            nb["notebook"],
                            exercise,
                            key,
                            known.name,
                            section_url(nb["notebook"], known.section),
                            where_to_read(nb["notebook"], known.section),
                            practice=known.practice.name if known.practice is not None else None,
                        ),
                    )
                    count.students.append(entry["student"])
                    count.first += rank == 0
                    if count.practice is not None and (nb.get("practices") or {}).get(count.practice) is True:
                        count.practised.append(entry["student"])
    return sorted(found.values(), key=lambda m: (-len(m.students), -m.first, m.notebook, m.exercise, m.key))


def operations(entries: Iterable[dict[str, Any]]) -> list[Operation]:
    """Every event worth an instructor's look: limits, crashes, unanswered work, tampering, cells that raised."""
    found: list[Operation] = []
    for entry in entries:
        student = entry["student"]
        for nb in entry["notebooks"]:
            notebook = nb["notebook"]
            for op in nb.get("operations", []):
                kind = str(op.get("kind"))
                found.append(Operation(student, notebook, kind if kind in OPERATION_LABELS else "grader", op["text"]))
            if nb.get("unfinished") and _attempted(nb):  # an unanswered notebook is said once, above
                found.append(Operation(student, notebook, "unfinished", "、".join(nb["unfinished"])))
            if nb.get("tampering"):
                detected = [t for t in nb["tampering"] if "偵測到竄改" in t] or nb["tampering"]
                more = f"（另有 {len(nb['tampering']) - 1} 則）" if len(nb["tampering"]) > 1 else ""
                found.append(Operation(student, notebook, "tampering", detected[0] + more))
            errors = unexplained_cell_errors(nb)
            if errors:
                more = f"（共 {len(errors)} 格）" if len(errors) > 1 else ""
                found.append(Operation(student, notebook, "cell_errors", errors[0] + more))
    return found


WRONG_ANSWER_FAILURES = (
    "這一格沒有通過",  # a locked cell's assert that needs the answer (common.exercises.AnswerBreaksCell)
    "這一格執行時出錯",  # the same cell, the answer raising inside it
    "自我檢查沒有通過",  # a self-check (selfcheck.self_check)
    "自我檢查時出錯",
    "先完成練習",  # an exercise not answered yet (ExerciseNotDone, the preview's missing names)
)
"""How the course's own check cells begin the one line they fail with (the sandbox keeps that line): each is what a
wrong or missing answer makes them say."""
_PREVIEW_FAILED = re.compile(r"^\d+ 個公開例子中有 \d+ 個沒有通過")  # selfcheck.preview.ChecksFailed


def _explained_by_a_wrong_answer(nb: dict[str, Any], error: str) -> bool:
    """Whether a wrong answer explains a cell error (``label：text`` as ``grading.read_outcome`` keeps it): one of the
    course's check cells failed the way a wrong answer makes it fail, in a notebook that lost points."""
    _, _, text = str(error).partition("：")
    text = text.strip().removeprefix("✗ ")
    course_check = text.startswith(WRONG_ANSWER_FAILURES) or bool(_PREVIEW_FAILED.match(text))
    lost_points = float(nb.get("score", 0.0)) < float(nb.get("max_score", 0.0)) - 1e-9 or bool(nb.get("unfinished"))
    return course_check and lost_points


def unexplained_cell_errors(nb: dict[str, Any]) -> list[str]:
    """The cell errors of one notebook of the record that a wrong answer does not explain (a crash, a cell of the
    student's own, a cell's time limit, a import of what the sandbox does not have, a note of errors not listed)."""
    return [e for e in nb.get("cell_errors", []) if not _explained_by_a_wrong_answer(nb, e)]


ATTENTION = {
    "tampering": "疑似竄改",
    "stopped": "評分沒有跑完（時間或記憶體上限、當掉、檔案讀不出來）",
    "cell_errors": "有格子出錯，答錯解釋不了",
    "low": "總分不到滿分的一半",
    "absent": "一本都沒交",
}
"""Why a student needs attention, in the order the report's first block lists them."""
STOPPED = ("unreadable", "timeout", "memory", "crashed", "flood", "closed", "replay")


def needs_attention(s: ClassStats) -> dict[str, list[str]]:
    """``ATTENTION`` key → the students it concerns (sorted; a student may be under several), only the keys with
    students."""
    found: dict[str, set[str]] = {key: set() for key in ATTENTION}
    for op in s.operations:
        if op.kind == "tampering":
            found["tampering"].add(op.student)
        elif op.kind in STOPPED:
            found["stopped"].add(op.student)
        elif op.kind == "cell_errors":
            found["cell_errors"].add(op.student)
    found["low"] = {n for n in s.students if s.scores[n]["total"] < LOW_SCORE * s.maximum - 1e-9}
    found["absent"] = set(s.absent)
    return {key: sorted(names) for key, names in found.items() if names}


def hardest(s: ClassStats) -> ExerciseStats | None:
    """The exercise the class found hardest: the lowest 通過率 among exercises someone's answer to was judged (ties:
    the lower mean share of its points)."""
    judged = [e for e in s.exercises if e.students]
    if not judged:
        return None
    return min(judged, key=lambda e: (e.facility, e.mean_points / (e.points or 1.0)))


def _runs(entries: Iterable[dict[str, Any]]) -> list[Run]:
    runs: dict[tuple[Any, str], Run] = {}
    for entry in entries:
        key = (entry.get("seed"), str(entry.get("command", "")))
        run = runs.setdefault(key, Run(key[0], key[1], 0, str(entry.get("graded_at", ""))))
        run.students += 1
        run.graded_at = max(run.graded_at, str(entry.get("graded_at", "")))
    return sorted(runs.values(), key=lambda r: r.graded_at)


def histogram(values: list[float], maximum: float) -> list[int]:
    """How many values fall on each whole point from 0 to ``maximum`` (a half point counts with the point below)."""
    bins = [0] * (math.floor(maximum) + 1)
    for value in values:
        bins[min(len(bins) - 1, max(0, math.floor(value + 1e-9)))] += 1
    return bins
