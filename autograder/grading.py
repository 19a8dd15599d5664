"""Grading submissions: run each notebook sandboxed, judge its evidence in this process.

This process never runs student code. Each notebook runs in a child forked from a
fork server that has preloaded torch and the course packages (``autograder.untrusted.runner``);
the child sends JSON evidence up a pipe, and the hidden checks judge it here, against
the answer key's evidence for the same seed. Every failure of a submission (unreadable
file, crash, time-out, tampering) becomes a score for what was earned and a note in
Chinese; nothing a submission does stops the batch.
"""

from __future__ import annotations

import json
import os
import random
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.checks.support import checks_of
from autograder.course import SOURCE, notebook_id
from autograder.judge import judge
from autograder.submission import UnreadableNotebook, best_match, grade_ids, load_notebook, prepare
from autograder.untrusted.limits import Limits
from common.data import one_thread

STARTUP_SECONDS = 10  # forking the job and confining it is not the student's time
MAX_CELL_ERRORS = 20
CELL_ERROR_CHARS = 200
STUDENT_TEXT_CHARS = 4000
"""Text a submission produced (cell errors, names of what it patched) kept per notebook."""

_judging = threading.Lock()


def fork_context() -> Any:
    """The fork server of this grading run (``autograder.sandbox``), started on first use."""
    from autograder.sandbox import default_sandbox

    return default_sandbox()


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
    from autograder.sandbox import run_job
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
    result.notes.append(f"{fork_context().memory_mode}，上限 {limits.memory_mb} MB")
    recorded, reasons = read_outcome(outcome, result, limits)
    reasons.update(reached_for_secrets(result, exercises))
    evidence, refused = derive_evidence(notebook, recorded, seed, limits, result)
    reasons.update({exercise: reason for exercise, reason in refused.items() if exercise not in reasons})
    evidence = {exercise: data for exercise, data in evidence.items() if exercise not in reasons}
    # the answer key's evidence is computed here, on one thread, as the confined worker computed the student's
    # (sandbox.ENVIRONMENT): same reductions, same floats; only plain data from the worker is judged
    with _judging, one_thread():
        judged = judge({"notebook": notebook, "seed": seed, "exercises": evidence}) if evidence else []
    for exercise in exercises:
        if exercise in reasons:
            result.verdicts += zero_verdicts(notebook, exercise, reasons[exercise])
        else:
            result.verdicts += [v for v in judged if v["exercise"] == exercise]
    return result


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
            reasons[label] = note + "，這一題不計分"
    return reasons


REPLAY_ENDINGS = {
    "timeout": "重現這一題的評分紀錄超過時間上限（{seconds} 秒），這一題不計分",
    "memory": "重現這一題的評分紀錄用了超過 {memory} MB 的記憶體，被中止，這一題不計分",
    "flood": "重現這一題的評分紀錄送回的資料超過上限，這一題不計分",
    "crashed": "重現這一題的評分紀錄時，重現的行程結束了，這一題不計分",
}


def derive_evidence(
    notebook: str, recorded: dict[str, Any], seed: int, limits: Limits, result: NotebookResult
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each exercise's evidence, derived from its recordings in a confined replay worker, and a zero-score
    reason for each exercise whose recording was refused or could not be replayed.

    The worker (``autograder.untrusted.replay_job``) runs no student code, but what it replays was
    chosen by the student: it runs confined, within the submission's limits, a fresh process every
    time. Should one exercise's replay end the worker (time, memory), that exercise scores zero and
    the exercises after it are replayed in a new worker.
    """
    from autograder.sandbox import run_replay
    from autograder.untrusted.replay_job import ReplayJob
    from selfcheck.evidence import safe_text

    evidence: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    pending = [exercise for exercise in checks_of(notebook) if exercise in recorded]
    while pending:
        job = ReplayJob(notebook, seed, {exercise: recorded[exercise] for exercise in pending}, limits)
        run = run_replay(job)
        if run.unfit:
            result.tampering.append(f"偵測到竄改：重現評分紀錄的行程送回 {run.unfit} 則不合流程的訊息，都沒有採用")
        for exercise in pending:
            derived = run.derived.get(exercise)
            if derived is None:
                continue
            if "error" in derived:
                reasons[exercise] = f"{exercise} 的評分紀錄無法重現：{safe_text(derived['error'], 200)}，這一題不計分"
                result.tampering.append(reasons[exercise])
            elif isinstance(derived["evidence"].get("refused"), str):
                reasons[exercise] = f"{exercise}：{safe_text(derived['evidence']['refused'], 300)}，這一題不計分"
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
        result.notes.append("這台評分機器無法套用：" + "、".join(outcome.unconfined))
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
                reasons[exercise] = f"{exercise} 的評分紀錄超過上限，這一題不計分"
                continue
            if not isinstance(data, dict):
                reasons[exercise] = f"偵測到竄改：{exercise} 的評分紀錄格式不對，這一題不計分"
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
        elif kind == "done":
            dropped = message.get("output_dropped")
            if type(dropped) is int and dropped > 0:
                result.notes.append(f"印出的內容太多：超過 {limits.output_kb} KB 的部分（{dropped} 個字元）沒有保留")
    if dropped_errors:
        result.cell_errors.append(f"還有 {dropped_errors} 格出錯，沒有列出")
    ending = ENDINGS.get(outcome.ended, "").format(seconds=limits.notebook_seconds, memory=limits.memory_mb)
    for exercise in exercises:
        count = outcome.evidence_count.get(exercise, 0)
        if count > 1:
            reasons[exercise] = f"偵測到竄改：{exercise} 收到 {count} 份評分證據（評分程式只送一份），這一題不計分"
            result.tampering.append(reasons[exercise])
            evidence.pop(exercise, None)
        elif exercise not in evidence and exercise not in reasons:
            reasons[exercise] = f"沒有執行到這一題的評分：{ending or 'notebook 沒有跑到這一題的評分格'}"
    if outcome.ended != "done":
        result.notes.append(ending)
    return evidence, reasons


def source_path(notebook: str) -> Path:
    return SOURCE / notebook.split("-")[0] / f"{notebook}.ipynb"


# --- finding a student's notebooks ------------------------------------------------------------------


MAX_DEPTH = 8
"""Folders below a student's module folder that are searched for notebooks."""
MAX_ENTRIES = 5000
"""Entries (files and folders) looked at in one student's module folder."""
MAX_LEFTOVERS = 20
"""Notebooks with unexpected names that are opened to see whether one is a renamed copy."""


def _shown(name: str) -> str:
    """A file name from a submission, safe and short enough for a note."""
    name = name.encode("utf-8", "replace").decode("utf-8")
    return name if len(name) <= 60 else name[:59] + "…"


def is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def scan_notebooks(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """The regular ``.ipynb`` files under ``folder``, and (name, note) for what was refused.

    Never follows a symbolic link; refuses links, FIFOs, devices, sockets and folders named
    ``*.ipynb``; looks at most ``MAX_DEPTH`` folders deep and at ``MAX_ENTRIES`` entries.
    """
    files: list[Path] = []
    refused: list[tuple[str, str]] = []
    stack: list[tuple[Path, int]] = [(folder, 0)]
    seen, too_deep = 0, False
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        refused.append(("", f"資料夾裡的檔案超過 {MAX_ENTRIES} 個，其餘的沒有看"))
                        return sorted(files), refused
                    try:
                        mode = entry.stat(follow_symlinks=False).st_mode
                    except OSError:
                        continue
                    name = entry.name
                    notebook = name.endswith(".ipynb")
                    if stat.S_ISLNK(mode):
                        if notebook:
                            refused.append((name, f"{_shown(name)} 是捷徑（symlink），不會被讀取：請交檔案本身"))
                    elif stat.S_ISDIR(mode):
                        if notebook:
                            refused.append((name, f"{_shown(name)} 是資料夾，不是 notebook，不會被讀取"))
                        elif name.startswith("."):
                            continue  # .ipynb_checkpoints, .git: copies, never the submission
                        elif depth + 1 > MAX_DEPTH:
                            too_deep = True
                        else:
                            stack.append((Path(entry.path), depth + 1))
                    elif notebook and stat.S_ISREG(mode):
                        files.append(Path(entry.path))
                    elif notebook:
                        refused.append((name, f"{_shown(name)} 不是一般檔案（FIFO、裝置或 socket），不會被讀取"))
        except OSError:
            continue
    if too_deep:
        refused.append(("", f"資料夾超過 {MAX_DEPTH} 層，更深的地方沒有找"))
    return sorted(files), refused


def find_notebooks(folder: Path | None, module: str) -> tuple[dict[str, Path | None], dict[str, list[str]]]:
    """Map each notebook of ``module`` to the student's file for it; notes per notebook.

    A file with the expected name wins; otherwise a leftover .ipynb whose nbgrader cell
    ids match the notebook's (a renamed copy) is used, and the note says so. Files are
    untrusted: see ``scan_notebooks``; a module folder (or student folder) that is a
    symbolic link is not read at all.
    """
    expected = [notebook_id(p) for p in sorted((SOURCE / module).glob("*.ipynb"))]
    found: dict[str, Path | None] = dict.fromkeys(expected)
    notes: dict[str, list[str]] = {nb: [] for nb in expected}
    if folder is None:
        return found, notes
    linked = next((p for p in (folder, folder.parent) if is_link(p)), None)
    if linked is not None:
        for nb in expected:
            notes[nb].append(f"{_shown(linked.name)} 是捷徑（symlink），不會被讀取：請交資料夾本身")
        return found, notes
    if not stat.S_ISDIR(_mode(folder)):
        return found, notes
    files, refused = scan_notebooks(folder)
    for name, note in refused:
        stem = name.removesuffix(".ipynb")
        notes[stem if stem in notes else expected[0]].append(note)
    leftovers = []
    for path in files:
        if path.stem in found and found[path.stem] is None:
            found[path.stem] = path
        else:
            leftovers.append(path)
    wanted = {nb: grade_ids(nbformat.read(source_path(nb), as_version=4)) for nb in expected if found[nb] is None}
    for path in leftovers[:MAX_LEFTOVERS] if wanted else []:
        try:
            ids = grade_ids(load_notebook(path)[0])
        except UnreadableNotebook:
            continue
        notebook = best_match(ids, {nb: w for nb, w in wanted.items() if found[nb] is None})
        if notebook is not None:
            found[notebook] = path
            notes[notebook].append(f"找不到 {notebook}.ipynb；改用檔名不同、內容相符的 {_shown(path.name)}")
    return found, notes


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


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
        try:
            found, notes = find_notebooks(folder, module)
        except Exception as exc:  # one student's folder must never stop the batch
            found, notes = find_notebooks(None, module)
            notes = {nb: [f"讀取作業資料夾時出錯（{type(exc).__name__}），請通知助教"] for nb in notes}
        if folder is None or not any(found.values()):
            notes = {nb: [*n, f"{student} 沒有交 {module} 的任何 notebook"] for nb, n in notes.items()}
        tasks += [(student, nb, path, notes[nb]) for nb, path in found.items()]
    fork_context()
    from autograder.sandbox import hide_also

    hide_also({folder.parent.parent.absolute() for folder in folders.values() if folder is not None})
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
    """nbgrader's layout: ``submitted/<student>/<module>/``; students in name order.

    Never follows a link: a student folder or module folder that is a symbolic link is still
    listed (``find_notebooks`` refuses it with a note), anything else that is not a folder is not.
    """
    folders: dict[str, Path | None] = {}
    if not stat.S_ISDIR(_mode(submitted)):
        return folders
    try:
        with os.scandir(submitted) as entries:
            students = sorted(
                e.name
                for e in entries
                if not e.name.startswith(".") and (e.is_dir(follow_symlinks=False) or e.is_symlink())
            )
    except OSError:
        return folders
    for student in students:
        folder = submitted / student / module
        mode = _mode(folder) if not is_link(submitted / student) else stat.S_IFLNK
        folders[student] = folder if stat.S_ISDIR(mode) or stat.S_ISLNK(mode) else None
    return folders


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
