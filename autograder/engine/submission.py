"""Finding a student's notebooks, reading them, and rebuilding the notebook that is actually run.

A submission is untrusted: its folder may hold links, FIFOs or folders named like notebooks, or be
very deep; a notebook may not be JSON, may be the wrong nbformat, may have had its locked cells
edited or deleted, its points changed, or be renamed. Finding and loading never raise for such
input; they return what could be read and notes (in Chinese, for the student) about what was wrong
and what the grader did about it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.course import RELEASE, SOURCE, notebook_id, notebook_path

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024

HIDDEN_SUFFIX = "_hidden"
TESTS_SUFFIX = "_tests"


@dataclass(frozen=True)
class RunCell:
    """One cell of the notebook to run: ordinary code, or the place to collect an exercise's evidence."""

    kind: str  # "code", "collect", or "practice" (the student's practices judged: ``practice_cell``)
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


def prepare(student: nbformat.NotebookNode, source: nbformat.NotebookNode, notebook: str | None = None) -> Prepared:
    """The cells to run for ``student``: its own cells and answers, the course's locked cells.

    Locked and graded cells come from ``source`` whatever the submission holds (edited
    ones are restored, deleted ones put back where they belong). Hidden test cells
    become evidence collection for their exercise; visible test cells are not run (they
    judge nothing). Markdown is skipped. Given the ``notebook``, the student's own cells that define one of its
    practices are kept too, and a last cell judges those practices (``with_practices``).
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
    prepared.cells = (
        with_practices(prepared.cells, source, notebook) if notebook else through_last_collect(prepared.cells)
    )
    return prepared


def _defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at the top level (``def``, ``class`` or an assignment), read as text:
    the grader never parses a submission's code."""
    return (
        re.search(rf"^(?:def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)", code, re.M)
        is not None
    )


def practice_names(notebook: str, source: nbformat.NotebookNode) -> list[str]:
    """The names a student defines to practise (``selfcheck.practice``) in ``notebook``, less those the chapter's own
    cells define (a student's cell could not be told from the chapter's)."""
    from selfcheck.practice import practices_of

    course = [_source(c) for c in source.cells if c.cell_type == "code"]
    return [name for name in practices_of(notebook) if not any(_defines(code, name) for code in course)]


def with_practices(cells: list[RunCell], source: nbformat.NotebookNode, notebook: str) -> list[RunCell]:
    """``cells`` through the last evidence collection, then the student's own cells after it that define a practice
    (only those: the chapter's later cells can change no score), then one ``practice`` cell naming the practices
    the student's cells define, where the runner judges them (issue 50: the class report counts practice)."""
    names = practice_names(notebook, source)
    kept = through_last_collect(cells)
    own = [c for c in cells if c.kind == "code" and c.label.startswith("第")]
    defined = [name for name in names if any(_defines(c.source, name) for c in own)]
    if not defined:
        return kept
    later = [c for c in cells[len(kept) :] if c in own and any(_defines(c.source, name) for name in defined)]
    return [*kept, *later, RunCell("practice", "\n".join(defined), "再練一題")]


def through_last_collect(cells: list[RunCell]) -> list[RunCell]:
    """``cells`` up to the last evidence collection: what runs after it can change no score.

    A chapter goes on after its last graded cell (drawings, a lowering to ExecuTorch, the 小結's
    asserts); graded whole, M08-3's answer key took 37 s, and 6 s stopping there (``bench/graded_run.py``).
    A notebook with no graded cell left is run whole, for the errors its feedback names."""
    last = max((i for i, cell in enumerate(cells) if cell.kind == "collect"), default=len(cells) - 1)
    return cells[: last + 1]


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


def source_path(notebook: str) -> Path:
    return notebook_path(SOURCE, notebook)


def _what_runs(prepared: Prepared) -> list[tuple[str, str, str | None]]:
    return [(cell.kind, cell.source, cell.exercise) for cell in prepared.cells]


@functools.cache
def _handed_out(notebook: str) -> list[tuple[str, str, str | None]] | None:
    """What the release notebook of ``notebook`` runs when graded; None without one (a Gradescope bundle)."""
    path = notebook_path(RELEASE, notebook)
    if not path.is_file():
        return None
    handed_out = prepare(nbformat.read(path, as_version=4), nbformat.read(source_path(notebook), as_version=4))
    return None if handed_out.tampering else _what_runs(handed_out)


def as_handed_out(prepared: Prepared, notebook: str) -> bool:
    """Whether ``prepared`` would run exactly what the release notebook runs: nothing answered, nothing
    added, nothing tampered with. Such a run is known without running it: every exercise's answer is the
    stub that raises ``NotImplementedError`` (``tests/test_checks.py`` judges the stubs: zero on every
    check). False when the course has no release notebook here (a Gradescope bundle)."""
    if prepared.tampering:
        return False
    handed_out = _handed_out(notebook)
    return handed_out is not None and _what_runs(prepared) == handed_out
