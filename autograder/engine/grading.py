"""Grading submissions: run each notebook sandboxed, judge its evidence in this process.

This process never runs student code. Each notebook runs in a child forked from a
fork server that has preloaded torch and the course packages (``autograder.sandboxed.runner``);
the child sends JSON evidence up a pipe, and the hidden checks judge it here, against
the answer key's evidence for the same seed. Every failure of a submission (unreadable
file, crash, time-out, tampering) becomes a score for what was earned and a note in
Chinese; nothing a submission does stops the batch.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.checks.support import checks_of
from autograder.engine.judge import judge
from autograder.engine.submission import (
    UnreadableNotebook,
    as_handed_out,
    find_notebooks,
    load_notebook,
    prepare,
    source_path,
)
from autograder.sandboxed.limits import Limits
from common.data import one_thread

STARTUP_SECONDS = 10  # forking the job and confining it is not the student's time
MAX_CELL_ERRORS = 20
CELL_ERROR_CHARS = 200
STUDENT_TEXT_CHARS = 4000
"""Text a submission produced (cell errors, names of what it patched) kept per notebook."""

_judging = threading.Lock()

OPERATION_KINDS = (
    "missing",  # the notebook was not handed in
    "unreadable",  # not a notebook that can be read
    "unanswered",  # the notebook as handed out
    "timeout",  # the notebook's time limit
    "memory",  # the memory limit
    "crashed",  # the process ended itself or died
    "flood",  # it sent more than the protocol allows
    "closed",  # it closed the channel that reports the grading
    "replay",  # replaying one exercise's recording hit a limit or ended the worker
    "output",  # it printed more than is kept
    "grader",  # the grader itself failed on this notebook (ours to fix)
)
"""Kinds of ``NotebookResult.operations``; tampering and cells that raised are kept apart (``tampering``,
``cell_errors``)."""

UNANSWERED = "還沒有作答：這一題的作答格和發下去的一樣"
UNANSWERED_NOTE = "{notebook}.ipynb 和發下去的版本一樣，還沒有作答：每一題 0 分（沒有執行）"


def fork_context() -> Any:
    """The fork server of this grading run (``autograder.engine.sandbox``), started on first use."""
    from autograder.engine.sandbox import default_sandbox

    return default_sandbox()


@dataclass
class NotebookResult:
    """The grade of one notebook of one student."""

    notebook: str
    file: str | None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the student reads about the run (a limit that was hit, output cut, the notebook not handed in…)."""
    tampering: list[str] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    instructor_notes: list[str] = field(default_factory=list)
    """How the sandbox ran (how memory was limited, measures this machine could not apply): for the
    instructor's terminal and log, never in the student's feedback, which says a limit only when it was hit."""
    failing_cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Exercise → its smallest failing hidden case, which the feedback draws (``autograder.engine.diagnose``)."""
    operations: list[dict[str, str]] = field(default_factory=list)
    """What happened to the run, for the class report's operations section: ``{"kind", "text"}`` with kind one of
    ``OPERATION_KINDS`` (not handed in, unreadable, unanswered, a limit hit, a crash, output cut, …)."""

    unjudged: list[str] = field(default_factory=list)
    """Exercises scored zero without their answer being judged (not reached, refused, tampered with, a limit hit):
    the class report leaves them out of the checks' statistics."""
    practices: dict[str, bool] = field(default_factory=dict)
    """Each practice (``selfcheck.practice``) the student's own cells define → whether it passed its check, judged
    in the sandbox after the notebook ran. It changes no score; the class report counts it."""

    def operation(self, kind: str, text: str, exercise: str = "") -> None:
        """Note one event of the run (``OPERATION_KINDS``), once."""
        entry = {"kind": kind, "text": text, **({"exercise": exercise} if exercise else {})}
        if entry not in self.operations:
            self.operations.append(entry)

    @property
    def score(self) -> float:
        return sum(v["score"] for v in self.verdicts)

    @property
    def max_score(self) -> float:
        return sum(v["points"] for v in self.verdicts)


def zero_verdicts(notebook: str, exercise: str, message: str) -> list[dict[str, Any]]:
    """Zero-score verdicts for every check of ``exercise``, all with ``message``."""
    return [
        {
            "id": info.id,
            "notebook": info.notebook,
            "exercise": info.exercise,
            "name": info.name,
            "points": info.points,
            "score": 0.0,
            "passed": False,
            "message": message,
        }
        for info in checks_of(notebook)[exercise]
    ]


# --- running one notebook ---------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """What came back from a job: the messages that fit the protocol, and how it ended."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    ended: str = "done"  # "done", "timeout", "crashed", "flood", "closed"
    malformed: int = 0
    """Frames that were not JSON messages, and an unfinished frame at the end."""
    out_of_order: int = 0
    """Messages whose type or place did not fit (a second start, evidence out of order, …)."""
    evidence_count: dict[str, int] = field(default_factory=dict)
    """Evidence messages per exercise, accepted or not: the runner sends exactly one."""
    unconfined: list[str] = field(default_factory=list)
    """Isolation measures that could not be applied on this machine."""


def run_sandboxed(job: Any, limits: Limits) -> RunOutcome:
    """Run ``job`` in the sandbox under ``limits``; read its frames until every writer is gone."""
    from autograder.engine.sandbox import run_job
    from selfcheck.evidence import safe_text

    run = run_job(job, startup_seconds=STARTUP_SECONDS)
    talk = run.conversation
    outcome = RunOutcome(
        messages=talk.messages,
        malformed=talk.garbage + (1 if run.read.partial else 0),
        out_of_order=sum(talk.rejected.values()),
        evidence_count=dict(talk.evidence_count),
    )
    reported = (talk.start or {}).get("unconfined")
    job_missing = [safe_text(m, 120) for m in reported[:30]] if isinstance(reported, list) else []
    outcome.unconfined = list(dict.fromkeys([*run.missing, *job_missing]))
    if run.how == "memory":
        outcome.ended = "memory"
    elif run.read.ended == "flood":
        outcome.ended = "flood"
    elif run.read.ended == "deadline" or run.how == "timeout":
        outcome.ended = "timeout"
    elif talk.done:
        outcome.ended = "done"
    elif run.how == "killed":
        outcome.ended = "closed"  # it closed its pipe and went on running
    else:
        outcome.ended = "crashed"
    return outcome


def memory_mode_of(outcome: RunOutcome) -> str:
    """How this job's memory was limited: the run's mode, unless the job's own cgroup could not be made."""
    from autograder.sandboxed import confine, memory

    return memory.MEMORY_SUM if confine.JOB_CGROUP in outcome.unconfined else fork_context().memory_mode


def grade_notebook(
    notebook: str, path: Path | None, seed: int, limits: Limits, notes: Iterable[str] = ()
) -> NotebookResult:
    """Grade one submitted notebook file (``None`` when it was not submitted)."""
    from autograder.sandboxed.runner import Job

    result = NotebookResult(notebook, path.name if path else None, notes=list(notes))
    exercises = checks_of(notebook)
    if path is None:
        result.operation("missing", f"沒有交 {notebook}.ipynb")
        for exercise in exercises:
            result.verdicts += zero_verdicts(notebook, exercise, f"沒有交 {notebook}.ipynb")
        return result
    try:
        student, load_notes = load_notebook(path)
    except UnreadableNotebook as exc:
        result.notes.append(str(exc))
        result.operation("unreadable", str(exc))
        for exercise in exercises:
            result.verdicts += zero_verdicts(notebook, exercise, f"notebook 讀不出來：{exc}")
        return result
    result.notes += load_notes
    source = nbformat.read(source_path(notebook), as_version=4)
    prepared = prepare(student, source, notebook)
    result.notes += prepared.notes
    result.tampering += prepared.tampering
    if as_handed_out(prepared, notebook):
        result.notes.append(UNANSWERED_NOTE.format(notebook=notebook))
        result.operation("unanswered", UNANSWERED_NOTE.format(notebook=notebook))
        for exercise in exercises:
            result.verdicts += zero_verdicts(notebook, exercise, UNANSWERED)
        return result
    outcome = run_sandboxed(Job(notebook, tuple(prepared.cells), seed, limits), limits)
    result.instructor_notes.append(f"{memory_mode_of(outcome)}，上限 {limits.memory_mb} MB")
    recorded, reasons = read_outcome(outcome, result, limits)
    reasons.update(reached_for_secrets(result, exercises))
    evidence, refused = derive_evidence(notebook, recorded, seed, limits, result)
    reasons.update({exercise: reason for exercise, reason in refused.items() if exercise not in reasons})
    evidence = {exercise: data for exercise, data in evidence.items() if exercise not in reasons}
    # the answer key's evidence is computed here, on one thread, as the confined worker computed the student's
    # (sandbox.ENVIRONMENT): same reductions, same floats; only plain data from the worker is judged
    with _judging, one_thread():
        judged = judge({"notebook": notebook, "seed": seed, "exercises": evidence}) if evidence else []
        result.failing_cases = failing_cases(notebook, seed, evidence, judged)
    for exercise in exercises:
        if exercise in reasons:
            result.verdicts += zero_verdicts(notebook, exercise, reasons[exercise])
            result.unjudged.append(exercise)
        else:
            result.verdicts += [v for v in judged if v["exercise"] == exercise]
    return result


def failing_cases(
    notebook: str, seed: int, evidence: dict[str, Any], judged: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Exercise → the smallest hidden case it failed, for the feedback's drawing (only exercises that lost points)."""
    from autograder.engine.diagnose import failing_case
    from autograder.engine.reference_evidence import reference_evidence

    found = {}
    for exercise in {v["exercise"] for v in judged if not v["passed"]} & set(evidence):
        case = failing_case(evidence[exercise], reference_evidence(notebook, exercise, seed))
        if case is not None:
            found[exercise] = case
    return found


SECRET_MODULES = (
    "autograder.keys",
    "autograder.checks",
    "autograder.reference",
    "autograder/keys",
    "autograder/checks",
)


def reached_for_secrets(result: NotebookResult, exercises: Iterable[str]) -> dict[str, str]:
    """Zero-score reasons for exercises whose cells tried to import or read an answer key or a check.

    The sandbox has neither, so such a cell fails; its error says what it reached for.
    """
    reasons: dict[str, str] = {}
    for text in result.cell_errors:
        if not any(secret in text for secret in SECRET_MODULES):
            continue
        label = text.split("：", 1)[0]
        note = f"偵測到竄改：{label} 試圖讀取答案或隱藏檢查（評分環境裡沒有它們）"
        if note not in result.tampering:
            result.tampering.append(note)
        if label in exercises:
            reasons[label] = note + "，這一題 0 分"
    return reasons


REPLAY_ENDINGS = {
    "timeout": "重現這一題的評分紀錄超過時間上限（{seconds} 秒），這一題 0 分",
    "memory": "重現這一題的評分紀錄用了超過 {memory} MB 的記憶體，被中止，這一題 0 分",
    "flood": "重現這一題的評分紀錄送回的資料超過上限，這一題 0 分",
    "crashed": "重現這一題的評分紀錄時，重現的行程結束了，這一題 0 分",
}
REPLAY_TIME_SPENT = "重現這本 notebook 的評分紀錄用完了它的時間上限（共 {seconds} 秒），沒有輪到這一題，這一題 0 分"


def refusal_reason(notebook: str, exercise: str, refused: str) -> str:
    """What the feedback says of a recording the replay refused: what was refused and what to write instead
    (the refusal's own words), that the exercise scored 0, and where the course teaches it."""
    from selfcheck.misconceptions import NODE_TARGETS, reread_line

    reason = f"{exercise}：{refused}，這一題 0 分"
    if "ATen op" in refused:  # a Python function as a node's target (``allowed._check_node``)
        reason += f"。{reread_line(notebook, NODE_TARGETS)}"
    return reason


def derive_evidence(
    notebook: str, recorded: dict[str, Any], seed: int, limits: Limits, result: NotebookResult
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each exercise's evidence, derived from its recordings in a confined replay worker, and a zero-score
    reason for each exercise whose recording was refused or could not be replayed.

    The worker (``autograder.sandboxed.replay_job``) runs no student code, but what it replays was
    chosen by the student: it runs confined, within the submission's limits, a fresh process every
    time. Should one exercise's replay end the worker (time, memory), that exercise scores zero and
    the exercises after it are replayed in a new worker. All the workers of a notebook share one time
    limit (``replay_job.notebook_seconds``): the exercises it leaves no time for score zero.
    """
    from autograder.engine.sandbox import run_replay
    from autograder.sandboxed.replay_job import ReplayJob
    from selfcheck.evidence import safe_text

    evidence: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    pending = [exercise for exercise in checks_of(notebook) if exercise in recorded]
    total = ReplayJob(notebook, seed, {exercise: recorded[exercise] for exercise in pending}, limits).seconds
    deadline = time.monotonic() + total
    while pending:
        left = round(deadline - time.monotonic())
        if left < 1:
            for exercise in pending:
                reasons[exercise] = REPLAY_TIME_SPENT.format(seconds=total)
                result.operation("replay", reasons[exercise], exercise)
            break
        job = ReplayJob(notebook, seed, {exercise: recorded[exercise] for exercise in pending}, limits, left)
        run = run_replay(job)
        if run.unfit:
            result.tampering.append(f"偵測到竄改：重現評分紀錄的行程送回 {run.unfit} 則不合流程的訊息，都沒有採用")
        for exercise in pending:
            derived = run.derived.get(exercise)
            if derived is None:
                continue
            if "error" in derived:
                reasons[exercise] = f"{exercise} 的評分紀錄無法重現：{safe_text(derived['error'], 200)}，這一題 0 分"
                result.tampering.append(reasons[exercise])
            elif isinstance(derived["evidence"].get("refused"), str):
                reasons[exercise] = refusal_reason(notebook, exercise, safe_text(derived["evidence"]["refused"], 300))
            else:
                evidence[exercise] = derived["evidence"]
        rest = [exercise for exercise in pending if exercise not in run.derived]
        if not rest:
            break
        if run.ended == "done":  # the worker ended properly without them: ours to fix, not the student's
            for exercise in rest:
                reasons[exercise] = f"評分程式沒有重現 {exercise} 的紀錄，請通知助教"
            break
        failed, pending = rest[0], rest[1:]
        reasons[failed] = REPLAY_ENDINGS[run.ended].format(seconds=job.seconds, memory=limits.memory_mb)
        result.operation("replay", reasons[failed], failed)
    for exercise in reasons:  # the recorder raised because the submission changed what it uses: the instructor sees it
        account = recorded.get(exercise)
        unrecorded = account.get("unrecorded") if isinstance(account, dict) else None
        if isinstance(unrecorded, dict) and unrecorded.get("changed"):
            result.tampering.append(f"偵測到竄改：{reasons[exercise]}")
    for exercise, data in evidence.items():
        suspected = _suspected_cases(data)
        if suspected:
            result.tampering.append(
                f"偵測到竄改：{exercise} 回傳了偽裝成一般資料、可能改寫了 __eq__ 的物件（{'、'.join(suspected)}），那幾項不計分"
            )
    return evidence, reasons


def _suspected_cases(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict):
        return []
    return [str(c) for c, r in cases.items() if isinstance(r, dict) and r.get("error") == "TamperingSuspected"]


ENDINGS = {
    "timeout": "整本 notebook 超過 {seconds} 秒的時間上限，被中止",
    "memory": "整份作業（所有行程合計）用了超過 {memory} MB 的記憶體，被中止",
    "crashed": "程式讓行程結束了（sys.exit 以外的結束方式，例如 os._exit 或當掉）",
    "flood": "送出的資料超過上限，被中止",
    "closed": "程式關掉了回報評分結果的通道，被中止",
}


def _capped(text: object, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_outcome(outcome: RunOutcome, result: NotebookResult, limits: Limits) -> tuple[dict[str, Any], dict[str, str]]:
    """Evidence per exercise, and a zero-score reason for the exercises that have none or are forged.

    What the submission wrote is bounded here: at most ``MAX_CELL_ERRORS`` cell errors of
    ``CELL_ERROR_CHARS`` each and ``STUDENT_TEXT_CHARS`` in all per notebook, and one line for
    every message that did not fit the protocol, however many there were.
    """
    exercises = checks_of(result.notebook)
    evidence: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    budget = STUDENT_TEXT_CHARS
    if outcome.unconfined:
        result.instructor_notes.append("這台評分機器無法套用：" + "、".join(outcome.unconfined))
    unfit = outcome.malformed + outcome.out_of_order
    if unfit:
        result.tampering.append(
            f"偵測到竄改：收到 {unfit} 則不合評分流程的訊息（格式、種類或順序不對，不是評分程式送的），都沒有採用"
        )
    dropped_errors = 0
    for message in outcome.messages:
        kind = message.get("type")
        if kind == "evidence":
            exercise, data = message.get("exercise"), message.get("data")
            if exercise not in exercises:
                continue
            if data is None and message.get("problem") == "too_large":
                reasons[exercise] = f"{exercise} 的評分紀錄超過上限，這一題 0 分"
                continue
            if not isinstance(data, dict):
                reasons[exercise] = f"偵測到竄改：{exercise} 的評分紀錄格式不對，這一題 0 分"
                result.tampering.append(reasons[exercise])
                continue
            evidence[exercise] = data
            repaired = message.get("repaired")
            if isinstance(repaired, list) and repaired:
                names = "、".join(_capped(r, 60) for r in repaired[:5]) + ("…" if len(repaired) > 5 else "")
                budget -= len(names)
                result.tampering.append(f"偵測到竄改：{names} 被替換或刪除；評這一題（{exercise}）之前已換回原本的物件")
        elif kind == "cell":
            text = _capped(f"{_capped(message.get('label'), 40)}：{message.get('error')}", CELL_ERROR_CHARS)
            if len(result.cell_errors) < MAX_CELL_ERRORS and len(text) <= budget:
                result.cell_errors.append(text)
                budget -= len(text)
            else:
                dropped_errors += 1
        elif kind == "practiced":
            result.practices = practices_from(result.notebook, message.get("data"))
        elif kind == "done":
            dropped = message.get("output_dropped")
            if type(dropped) is int and dropped > 0:
                result.notes.append(f"印出的內容太多：超過 {limits.output_kb} KB 的部分（{dropped} 個字元）沒有保留")
                result.operation("output", result.notes[-1])
    if dropped_errors:
        result.cell_errors.append(f"還有 {dropped_errors} 格出錯，沒有列出")
    ending = ENDINGS.get(outcome.ended, "").format(seconds=limits.notebook_seconds, memory=limits.memory_mb)
    for exercise in exercises:
        count = outcome.evidence_count.get(exercise, 0)
        if count > 1:
            reasons[exercise] = f"偵測到竄改：{exercise} 收到 {count} 份評分證據（評分程式只送一份），這一題 0 分"
            result.tampering.append(reasons[exercise])
            evidence.pop(exercise, None)
        elif exercise not in evidence and exercise not in reasons:
            reasons[exercise] = f"沒有執行到這一題的評分：{ending or 'notebook 沒有跑到這一題的評分格'}"
    if outcome.ended != "done":
        result.notes.append(ending)
        result.operation(outcome.ended, ending)
    return evidence, reasons


def practices_from(notebook: str, data: Any) -> dict[str, bool]:
    """The practices a ``practiced`` message reports, kept only where they are this notebook's practices and
    plain booleans (the message crossed the trust boundary)."""
    from selfcheck.practice import practices_of

    if not isinstance(data, dict):
        return {}
    known = practices_of(notebook)
    return {name: passed for name, passed in data.items() if name in known and type(passed) is bool}


# --- grading a class --------------------------------------------------------------------------------


@dataclass
class StudentResult:
    """All notebooks of one module for one student."""

    student: str
    module: str
    notebooks: list[NotebookResult]

    @property
    def score(self) -> float:
        return sum(n.score for n in self.notebooks)

    @property
    def max_score(self) -> float:
        return sum(n.max_score for n in self.notebooks)


def new_seed() -> int:
    """A seed for one grading run: the hidden models differ from run to run."""
    return random.SystemRandom().randrange(1, 2**31)


def import_for_grading(notebooks: Iterable[str]) -> None:
    """Import, on this thread, every module grading ``notebooks`` imports later (its checks, answer key,
    cases and public cases).

    ``grade_class`` grades on threads, and CPython 3.11 keeps the AST constructor's recursion depth per
    interpreter, not per thread (gh-106905): two threads compiling modules at once (a first import without
    a ``.pyc``, or pytest rewriting ``test_*.py`` checks) fail with ``SystemError``.
    """
    import autograder.engine.diagnose
    import autograder.engine.reference_evidence
    import autograder.sandboxed.replay_job  # noqa: F401
    import selfcheck.misconceptions
    import selfcheck.practice  # noqa: F401
    from autograder.sandboxed.cases.base import exercises_of, module_name
    from selfcheck.preview import PreviewUnavailable, public_exercises

    for notebook in sorted(notebooks):
        try:
            exercises_of(notebook)
        except KeyError:  # not a course notebook: grade_notebook says so
            continue
        checks_of(notebook)
        importlib.import_module(f"autograder.keys.{module_name(notebook)}")
        with contextlib.suppress(PreviewUnavailable):
            public_exercises(notebook)


def grade_class(
    module: str,
    folders: dict[str, Path | None],
    *,
    jobs: int = 2,
    seed: int | None = None,
    limits: Limits | None = None,
    on_done: Callable[[str, NotebookResult], None] | None = None,
) -> tuple[list[StudentResult], int]:
    """Grade ``module`` for every student (``folders``: student → their module folder).

    Returns the results in student order and the seed used.
    """
    seed = new_seed() if seed is None else seed
    limits = limits or Limits()
    tasks: list[tuple[str, str, Path | None, list[str]]] = []
    for student, folder in folders.items():
        try:
            found, notes = find_notebooks(folder, module)
        except Exception as exc:  # one student's folder must never stop the batch
            found, notes = find_notebooks(None, module)
            notes = {nb: [f"讀取作業資料夾時出錯（{type(exc).__name__}），請通知助教"] for nb in notes}
        if folder is None or not any(found.values()):
            notes = {nb: [*n, f"{student} 沒有交 {module} 的任何 notebook"] for nb, n in notes.items()}
        tasks += [(student, nb, path, notes[nb]) for nb, path in found.items()]
    fork_context()
    import_for_grading({nb for _, nb, _, _ in tasks})
    from autograder.engine.sandbox import hide_also

    hide_also({folder.parent.parent.absolute() for folder in folders.values() if folder is not None})
    results: dict[tuple[str, str], NotebookResult] = {}

    def work(task: tuple[str, str, Path | None, list[str]]) -> None:
        student, notebook, path, notes = task
        try:
            result = grade_notebook(notebook, path, seed, limits, notes)
        except Exception as exc:  # a grader bug must not cost the rest of the batch
            result = NotebookResult(notebook, path.name if path else None, notes=list(notes))
            result.operation("grader", f"評分程式出錯（{type(exc).__name__}）")
            for exercise in checks_of(notebook):
                result.verdicts += zero_verdicts(
                    notebook, exercise, f"評分程式出錯（{type(exc).__name__}），請通知助教"
                )
        results[(student, notebook)] = result
        if on_done is not None:
            on_done(student, result)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(work, tasks))
    students = []
    for student in folders:
        notebooks = [results[(s, nb)] for s, nb, _, _ in tasks if s == student]
        students.append(StudentResult(student, module, notebooks))
    return students, seed


# --- grading a notebook held in memory (nbgrader autograde) ------------------------------------------


def grade_notebook_node(
    notebook: str, nb: nbformat.NotebookNode, seed: int, limits: Limits, notes: Iterable[str] = ()
) -> NotebookResult:
    """Grade a notebook held in memory (nbgrader's copy of a submission) exactly as ``grade_notebook``
    grades a file: it is written to a private temporary folder and graded from there."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pt2e-nbgrader-") as tmp:
        path = Path(tmp) / f"{notebook}.ipynb"
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        return grade_notebook(notebook, path, seed, limits, notes)
