"""Grading submissions: run each notebook sandboxed, judge its evidence in this process.

This process never runs student code. Each notebook runs in a child forked from a
fork server that has preloaded torch and the course packages (``autograder.untrusted.runner``);
the child sends JSON evidence up a pipe, and the hidden checks judge it here, against
the answer key's evidence for the same seed. Every failure of a submission (unreadable
file, crash, time-out, tampering) becomes a score for what was earned and a note in
Chinese; nothing a submission does stops the batch.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.checks.support import CHECKS, CheckInfo
from autograder.course import SOURCE, notebook_id
from autograder.judge import judge
from autograder.submission import UnreadableNotebook, best_match, grade_ids, load_notebook, prepare
from autograder.untrusted.cases.base import module_name
from autograder.untrusted.confine import Limits

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
STARTUP_SECONDS = 10  # forking the child and confining it is not the student's time

_judging = threading.Lock()
_context: Any = None


def fork_context() -> Any:
    """The multiprocessing context whose fork server has preloaded the runner and its imports."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(["autograder.untrusted.runner"])
    return _context


def checks_of(notebook: str) -> dict[str, list[CheckInfo]]:
    """Exercise key → its checks, for ``notebook``."""
    importlib.import_module(f"autograder.checks.test_{module_name(notebook)}")
    return {exercise: infos for (nb, exercise), infos in CHECKS.items() if nb == notebook}


@dataclass
class NotebookResult:
    """The grade of one notebook of one student."""

    notebook: str
    file: str | None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tampering: list[str] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)

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
    """What came back from a child: its messages, and how it ended."""

    messages: list[Any] = field(default_factory=list)
    ended: str = "done"  # "done", "timeout", "crashed", "flood"
    malformed: int = 0


def run_sandboxed(job: Any, limits: Limits) -> RunOutcome:
    """Run ``job`` in a forked child under ``limits``; collect its messages until it ends."""
    from autograder.untrusted.runner import run

    context = fork_context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=run, args=(job, send), daemon=True)
    process.start()
    send.close()
    outcome = RunOutcome()
    deadline = time.monotonic() + limits.notebook_seconds + STARTUP_SECONDS
    total = 0
    finished = False
    try:
        while not finished:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.ended = "timeout"
                break
            if not receive.poll(min(remaining, 0.5)):
                if not process.is_alive() and not receive.poll(0):
                    outcome.ended = "crashed"
                    break
                continue
            try:
                data = receive.recv_bytes(MAX_MESSAGE_BYTES)
            except EOFError:
                outcome.ended = "crashed"
                break
            except OSError:  # a message over the size limit
                outcome.ended = "flood"
                break
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                outcome.ended = "flood"
                break
            try:
                message = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                outcome.malformed += 1
                continue
            outcome.messages.append(message)
            finished = isinstance(message, dict) and message.get("type") == "done"
    finally:
        if process.is_alive():
            process.kill()
        process.join(5)
        receive.close()
    return outcome


def grade_notebook(
    notebook: str, path: Path | None, seed: int, limits: Limits, notes: Iterable[str] = ()
) -> NotebookResult:
    """Grade one submitted notebook file (``None`` when it was not submitted)."""
    from autograder.untrusted.runner import Job

    result = NotebookResult(notebook, path.name if path else None, notes=list(notes))
    exercises = checks_of(notebook)
    if path is None:
        for exercise in exercises:
            result.verdicts += zero_verdicts(notebook, exercise, f"沒有交 {notebook}.ipynb")
        return result
    try:
        student, load_notes = load_notebook(path)
    except UnreadableNotebook as exc:
        result.notes.append(str(exc))
        for exercise in exercises:
            result.verdicts += zero_verdicts(notebook, exercise, f"notebook 讀不出來：{exc}")
        return result
    result.notes += load_notes
    source = nbformat.read(source_path(notebook), as_version=4)
    prepared = prepare(student, source)
    result.notes += prepared.notes
    result.tampering += prepared.tampering
    outcome = run_sandboxed(Job(notebook, tuple(prepared.cells), seed, limits), limits)
    recorded, reasons = read_outcome(outcome, result, limits)
    reasons.update(reached_for_secrets(result, exercises))
    with _judging:
        evidence = derive_evidence(notebook, recorded, seed, result)
        judged = judge({"notebook": notebook, "seed": seed, "exercises": evidence}) if evidence else []
    for exercise in exercises:
        if exercise in reasons:
            result.verdicts += zero_verdicts(notebook, exercise, reasons[exercise])
        else:
            result.verdicts += [v for v in judged if v["exercise"] == exercise]
    return result


SECRET_MODULES = ("autograder.keys", "autograder.checks", "autograder.reference", "autograder/keys", "autograder/checks")


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
            reasons[label] = note + "，這一題不計分"
    return reasons


def derive_evidence(notebook: str, recorded: dict[str, Any], seed: int, result: NotebookResult) -> dict[str, Any]:
    """Replay each exercise's recordings on this side and derive its evidence (``autograder.replay``)."""
    from autograder.replay import derive
    from autograder.untrusted.cases.base import exercises_of

    specs = exercises_of(notebook)
    evidence: dict[str, Any] = {}
    for exercise, data in recorded.items():
        try:
            evidence[exercise] = derive(specs[exercise], data, seed)
        except Exception as exc:  # a malformed recording is the submission's problem, never the batch's
            from selfcheck.evidence import safe_text

            evidence[exercise] = {"cases": {}}
            result.tampering.append(f"{exercise} 的評分紀錄無法重現：{safe_text(exc, 160)}")
            continue
        suspected = _suspected_cases(evidence[exercise])
        if suspected:
            result.tampering.append(
                f"偵測到竄改：{exercise} 回傳了偽裝成一般資料、可能改寫了 __eq__ 的物件（{'、'.join(suspected)}），那幾項不計分"
            )
    return evidence


def _suspected_cases(data: dict[str, Any]) -> list[str]:
    cases = data.get("cases")
    if not isinstance(cases, dict):
        return []
    return [str(c) for c, r in cases.items() if isinstance(r, dict) and r.get("error") == "TamperingSuspected"]


ENDINGS = {
    "timeout": "整本 notebook 超過 {seconds} 秒的時間上限，被中止",
    "crashed": "程式讓行程結束了（sys.exit 以外的結束方式，例如 os._exit 或當掉）",
    "flood": "送出的資料超過上限，被中止",
}


def read_outcome(outcome: RunOutcome, result: NotebookResult, limits: Limits) -> tuple[dict[str, Any], dict[str, str]]:
    """Evidence per exercise, and a zero-score reason for the exercises that have none or are forged."""
    exercises = checks_of(result.notebook)
    evidence: dict[str, Any] = {}
    counts: dict[str, int] = {}
    if outcome.malformed:
        result.tampering.append(f"收到 {outcome.malformed} 則無法解讀的評分訊息（不是評分程式送的）")
    for message in outcome.messages:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "evidence":
            exercise, data = message.get("exercise"), message.get("data")
            if not isinstance(exercise, str) or exercise not in exercises or not isinstance(data, dict):
                result.tampering.append("收到格式不對的評分證據（不是評分程式送的）")
                continue
            counts[exercise] = counts.get(exercise, 0) + 1
            evidence[exercise] = data
            suspected = _suspected_cases(data)
            if suspected:
                result.tampering.append(
                    f"偵測到竄改：{exercise} 回傳了偽裝成一般資料、可能改寫了 __eq__ 的物件（{'、'.join(suspected)}），那幾項不計分"
                )
            repaired = message.get("repaired")
            if isinstance(repaired, list) and repaired:
                names = "、".join(str(r) for r in repaired[:5]) + ("…" if len(repaired) > 5 else "")
                result.tampering.append(f"偵測到竄改：{names} 被替換或刪除；評這一題（{exercise}）之前已換回原本的物件")
        elif kind == "cell":
            text = f"{message.get('label')}：{message.get('error')}"
            if len(result.cell_errors) < 20:
                result.cell_errors.append(str(text)[:500])
        elif kind == "start":
            unconfined = message.get("unconfined")
            if isinstance(unconfined, list) and unconfined:
                result.notes.append("這台評分機器無法套用：" + "、".join(map(str, unconfined)))
        elif kind == "done":
            dropped = message.get("output_dropped")
            if isinstance(dropped, int) and dropped > 0:
                result.notes.append(f"印出的內容太多：超過 {limits.output_kb} KB 的部分（{dropped} 個字元）沒有保留")
        else:
            result.tampering.append("收到格式不對的評分訊息（不是評分程式送的）")
    reasons: dict[str, str] = {}
    ending = ENDINGS.get(outcome.ended, "").format(seconds=limits.notebook_seconds)
    for exercise in exercises:
        if counts.get(exercise, 0) > 1:
            reasons[exercise] = (
                f"偵測到竄改：{exercise} 收到 {counts[exercise]} 份評分證據（評分程式只送一份），這一題不計分"
            )
            result.tampering.append(reasons[exercise])
            evidence.pop(exercise, None)
        elif exercise not in evidence:
            reasons[exercise] = f"沒有執行到這一題的評分：{ending or 'notebook 沒有跑到這一題的評分格'}"
    if outcome.ended != "done":
        result.notes.append(ending)
    return evidence, reasons


def source_path(notebook: str) -> Path:
    return SOURCE / notebook.split("-")[0] / f"{notebook}.ipynb"


# --- finding a student's notebooks ------------------------------------------------------------------


def find_notebooks(folder: Path | None, module: str) -> tuple[dict[str, Path | None], dict[str, list[str]]]:
    """Map each notebook of ``module`` to the student's file for it; notes per notebook.

    A file with the expected name wins; otherwise a leftover .ipynb whose nbgrader cell
    ids match the notebook's (a renamed copy) is used, and the note says so.
    """
    expected = [notebook_id(p) for p in sorted((SOURCE / module).glob("*.ipynb"))]
    found: dict[str, Path | None] = dict.fromkeys(expected)
    notes: dict[str, list[str]] = {nb: [] for nb in expected}
    if folder is None or not folder.is_dir():
        return found, notes
    files = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    leftovers = []
    for path in files:
        if path.stem in found and found[path.stem] is None:
            found[path.stem] = path
        else:
            leftovers.append(path)
    wanted = {nb: grade_ids(nbformat.read(source_path(nb), as_version=4)) for nb in expected if found[nb] is None}
    for path in leftovers:
        try:
            ids = grade_ids(load_notebook(path)[0])
        except UnreadableNotebook:
            continue
        notebook = best_match(ids, {nb: w for nb, w in wanted.items() if found[nb] is None})
        if notebook is not None:
            found[notebook] = path
            notes[notebook].append(f"找不到 {notebook}.ipynb；改用檔名不同、內容相符的 {path.name}")
    return found, notes


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
        found, notes = find_notebooks(folder, module)
        if folder is None or not any(found.values()):
            notes = {nb: [*n, f"{student} 沒有交 {module} 的任何 notebook"] for nb, n in notes.items()}
        tasks += [(student, nb, path, notes[nb]) for nb, path in found.items()]
    fork_context()
    results: dict[tuple[str, str], NotebookResult] = {}

    def work(task: tuple[str, str, Path | None, list[str]]) -> None:
        student, notebook, path, notes = task
        try:
            result = grade_notebook(notebook, path, seed, limits, notes)
        except Exception as exc:  # a grader bug must not cost the rest of the batch
            result = NotebookResult(notebook, path.name if path else None, notes=list(notes))
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


def class_folders(submitted: Path, module: str) -> dict[str, Path | None]:
    """nbgrader's layout: ``submitted/<student>/<module>/``; students in name order."""
    folders: dict[str, Path | None] = {}
    if not submitted.is_dir():
        return folders
    for student in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith(".")):
        folder = student / module
        folders[student.name] = folder if folder.is_dir() else None
    return folders
