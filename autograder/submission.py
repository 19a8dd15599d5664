"""Reading a submitted notebook and rebuilding the notebook that is actually run.

A submission is untrusted: it may not be JSON, may be the wrong nbformat, may have had
its locked cells edited or deleted, its points changed, or be renamed. Loading never
raises for such input; it returns what could be read and notes (in Chinese, for the
student) about what was wrong and what the grader did about it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024

HIDDEN_SUFFIX = "_hidden"
TESTS_SUFFIX = "_tests"


@dataclass(frozen=True)
class RunCell:
    """One cell of the notebook to run: ordinary code, or the place to collect an exercise's evidence."""

    kind: str  # "code" or "collect"
    source: str
    label: str  # grade_id, or "第 N 格" for a student's own cell
    exercise: str | None = None


@dataclass
class Prepared:
    """A submission ready to run: its cells, and what the grader noticed while preparing it."""

    cells: list[RunCell] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tampering: list[str] = field(default_factory=list)


class UnreadableNotebook(Exception):
    """A submitted file that cannot be read as a notebook; the message is for the student."""


def _meta(cell: Any) -> dict[str, Any]:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    nbgrader = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return nbgrader if isinstance(nbgrader, dict) else {}


def _source(cell: Any) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def _name(path: Path) -> str:
    name = path.name.encode("utf-8", "replace").decode("utf-8")
    return name if len(name) <= 60 else name[:59] + "…"


def read_untrusted(path: Path, limit: int = MAX_NOTEBOOK_BYTES) -> bytes:
    """The bytes of a submitted file, read as untrusted: never through a symbolic link, only from
    a regular file (not a FIFO, a device, a socket or a folder), and at most ``limit`` bytes."""
    name = _name(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise UnreadableNotebook(f"讀不到檔案 {name}（{exc.strerror}）") from None
    if stat.S_ISLNK(mode):
        raise UnreadableNotebook(f"{name} 是捷徑（symlink），不會被讀取：請交檔案本身")
    if not stat.S_ISREG(mode):  # checked before opening: opening a FIFO or a device can block or act
        raise UnreadableNotebook(f"{name} 不是一般檔案（資料夾、FIFO、裝置或 socket），不會被讀取")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UnreadableNotebook(f"讀不到檔案 {name}（{exc.strerror}）") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # it changed since lstat
            raise UnreadableNotebook(f"{name} 不是一般檔案，不會被讀取")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UnreadableNotebook(f"讀不到檔案 {name}（{exc.strerror}）") from None
    finally:
        os.close(fd)
    if size > limit:
        raise UnreadableNotebook(f"{name} 超過 {limit // 1024 // 1024} MB 的上限")
    return b"".join(chunks)


def load_notebook(path: Path) -> tuple[nbformat.NotebookNode, list[str]]:
    """Read a submitted notebook; raises ``UnreadableNotebook`` with a Chinese message."""
    notes: list[str] = []
    data = read_untrusted(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableNotebook(f"{_name(path)} 不是 UTF-8 文字檔，不是 notebook") from None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):  # ValueError: also an integer too long to convert
        raise UnreadableNotebook(f"{_name(path)} 不是合法的 JSON：檔案可能損毀或不是 .ipynb") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", raw.get("worksheets")), list):
        raise UnreadableNotebook(f"{_name(path)} 是 JSON，但不是 notebook（沒有 cells）")
    major = raw.get("nbformat")
    if major not in (3, 4):
        raise UnreadableNotebook(f"{_name(path)} 的 nbformat 是 {repr(major)[:20]}，只接受 4（或可轉換的 3）")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises many kinds for malformed input
        raise UnreadableNotebook(f"{_name(path)} 無法轉成 nbformat 4：{type(exc).__name__}") from None
    if major == 3:
        notes.append(f"{_name(path)} 是 nbformat 3，已轉成 4 再評分")
    if not all(isinstance(c, dict) for c in nb.get("cells", [])):
        raise UnreadableNotebook(f"{_name(path)} 的 cells 格式不對")
    return nb, notes


def as_released(source: str) -> str:
    """A cell's source as the students received it: nbgrader removes the hidden-test region."""
    kept, hidden = [], False
    for line in source.splitlines():
        if "### BEGIN HIDDEN TESTS" in line:
            hidden = True
        elif "### END HIDDEN TESTS" in line:
            hidden = False
        elif not hidden:
            kept.append(line)
    return "\n".join(kept)


COMMON_IDS = frozenset({"setup"})
"""grade_ids every notebook has, which say nothing about which notebook it is."""


def grade_ids(nb: Any) -> set[str]:
    """The nbgrader grade_ids a notebook carries, minus the ones every notebook has."""
    return {str(_meta(c).get("grade_id")) for c in nb.get("cells", []) if _meta(c).get("grade_id")} - COMMON_IDS


def best_match(ids: set[str], candidates: dict[str, set[str]]) -> str | None:
    """The candidate sharing the most grade_ids with ``ids`` (at least half of its own), or None."""
    scored = [(len(ids & cand), name) for name, cand in candidates.items() if cand]
    scored = [(n, name) for n, name in scored if n > 0 and n * 2 >= len(candidates[name])]
    return max(scored)[1] if scored else None


def prepare(student: nbformat.NotebookNode, source: nbformat.NotebookNode) -> Prepared:
    """The cells to run for ``student``: its own cells and answers, the course's locked cells.

    Locked and graded cells come from ``source`` whatever the submission holds (edited
    ones are restored, deleted ones put back where they belong). Hidden test cells
    become evidence collection for their exercise; visible test cells are not run (they
    judge nothing). Markdown is skipped.
    """
    prepared = Prepared()
    by_id = {str(_meta(c)["grade_id"]): c for c in source.cells if _meta(c).get("grade_id")}
    order = [str(_meta(c)["grade_id"]) for c in source.cells if _meta(c).get("grade_id")]
    seen: set[str] = set()

    def course_cell(grade_id: str) -> None:
        cell = by_id[grade_id]
        meta = _meta(cell)
        if grade_id.endswith(HIDDEN_SUFFIX) and meta.get("grade"):
            exercise = grade_id.removesuffix(HIDDEN_SUFFIX)
            prepared.cells.append(RunCell("collect", "", grade_id, exercise))
        elif grade_id.endswith(TESTS_SUFFIX) or cell.cell_type != "code":
            return
        else:
            prepared.cells.append(RunCell("code", cell.source, grade_id))

    def put_back_missing(before: str | None) -> None:
        """Insert the source's locked / graded cells that the student deleted, up to ``before``."""
        stop = order.index(before) if before is not None else len(order)
        for grade_id in order[:stop]:
            if grade_id in seen:
                continue
            meta = _meta(by_id[grade_id])
            seen.add(grade_id)
            if meta.get("solution"):
                prepared.notes.append(f"作答格 {grade_id} 不見了：這一題沒有答案")
                continue
            if meta.get("locked") or meta.get("grade"):
                prepared.tampering.append(f"鎖定的儲存格 {grade_id} 被刪除：評分時補回原本的內容")
                course_cell(grade_id)

    for index, cell in enumerate(student.cells, start=1):
        grade_id = str(_meta(cell).get("grade_id", "")) or None
        if grade_id in by_id and grade_id not in seen:
            put_back_missing(grade_id)
            seen.add(grade_id)
            original = by_id[grade_id]
            meta = _meta(original)
            if meta.get("solution"):
                if cell.get("cell_type") == "code":
                    prepared.cells.append(RunCell("code", _source(cell), grade_id))
                continue
            # the release's version of the cell, or the instructor's own (a self-study learner's copy)
            expected = (as_released(original.source).strip(), original.source.strip())
            if _source(cell).strip() not in expected or cell.get("cell_type") != original.cell_type:
                prepared.tampering.append(f"鎖定的儲存格 {grade_id} 被修改過：評分時換回原本的內容")
            student_points = _meta(cell).get("points")
            if meta.get("grade") and student_points is not None and student_points != meta.get("points"):
                prepared.tampering.append(
                    f"{grade_id} 的配分被改過（{meta.get('points')} → {student_points}）：照原本的配分評分"
                )
            course_cell(grade_id)
        elif grade_id in by_id:
            prepared.notes.append(f"第 {index} 格是 {grade_id} 的複本：只用第一份")
        elif cell.get("cell_type") == "code":
            prepared.cells.append(RunCell("code", _source(cell), f"第 {index} 格"))
    put_back_missing(None)
    return prepared
