"""Answers that look copied: each student's own code of a module against the class's, the published solutions'
and earlier terms'.

The comparison is copydetect's (MOSS's winnowing, with Pygments' tokens): names become ``V``/``F``/``O``,
strings ``S``, comments and white space go, so renaming and dropping comments do not hide a copy. What is
compared is a student's *own* code across the whole module: every solution cell and every cell the student
added, one text per student. The release notebooks' code (the stubs, the locked cells) is boilerplate: a
fingerprint it has counts for no one, so handing in the stub twice is not a copy.

The answers are short and constrained: two students who write the same correct ``annotate`` independently
share more than two essays would. So a pair is *flagged* only where a large share of both sides' code is
the same and the shared part is long in tokens (``FLAG_SHARE``, ``MIN_SHARED_TOKENS``, tuned on the kept
right solutions written independently of the key and on renamed copies of the sample class; see
``tests/test_similarity.py``). A flag is a place to look, never a verdict: the report shows the matching
lines side by side with each student's score.

Code from submissions is untrusted text: it is only tokenized and shown escaped (``hygiene.clean``).
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

NOISE_TOKENS = 20
"""copydetect's k: a fingerprint covers this many filtered characters (a name is one)."""
GUARANTEE_TOKENS = 28
"""Any shared run this long is found (winnowing's window is the difference plus one)."""
FLAG_SHARE = 0.95
"""A pair is flagged when at least this share of *each* side's fingerprinted code is shared..."""
MIN_SHARED_TOKENS = 180
"""...and the shared code is at least this long (filtered characters): a one-line answer is no evidence."""
REFERENCE = "（公開解答）"
"""The name the course's published solutions take in the comparison."""
MAX_SHOWN_LINES = 60


@dataclass
class Answers:
    """One side of a comparison: a student's (or the solutions', or an earlier term's) own code of a module."""

    name: str
    code: str
    kind: str = "student"
    """"student" (this class), "reference" (the published solutions) or "archive" (an earlier term)."""


@dataclass
class Pair:
    """Two sides whose code overlaps: the share of each side's code that is shared, and the shared lines."""

    first: str
    second: str
    share: tuple[float, float]
    shared_tokens: int
    kinds: tuple[str, str]
    lines: tuple[list[tuple[str, bool]], list[tuple[str, bool]]] = field(default_factory=lambda: ([], []))
    """Per side, each line of its code and whether it is part of the shared code."""

    @property
    def flagged(self) -> bool:
        return min(self.share) >= FLAG_SHARE and self.shared_tokens >= MIN_SHARED_TOKENS

    def as_dict(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "second": self.second,
            "share": [round(s, 3) for s in self.share],
            "shared_tokens": self.shared_tokens,
            "kinds": list(self.kinds),
            "lines": [[[text, shared] for text, shared in side] for side in self.lines],
        }


def _solution_ids(source: nbformat.NotebookNode) -> set[str]:
    return {
        str(c.metadata["nbgrader"]["grade_id"])
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.metadata["nbgrader"].get("grade_id")
    }


def own_code(student: nbformat.NotebookNode, source: nbformat.NotebookNode, handed: set[str]) -> str:
    """A submission's own code: its answers to the solution cells and the code cells it added (a cell the
    release notebook already holds, word for word, is the course's, not the student's), in its order."""
    from autograder.engine.submission import prepare

    solutions = _solution_ids(source)
    cells = prepare(student, source).cells
    own = [c.source for c in cells if c.kind == "code" and (c.label in solutions or c.label.startswith("第"))]
    return "\n\n".join(code for code in own if code.strip() and code.strip() not in handed)


def course_code(notebooks: Iterable[nbformat.NotebookNode]) -> str:
    """Every code cell the students were handed (the boilerplate)."""
    return "\n\n".join(c.source for nb in notebooks for c in nb.cells if c.cell_type == "code")


def module_answers(module: str, folders: dict[str, Path | None]) -> list[Answers]:
    """Each student's own code of ``module`` (every notebook together), read as the grader reads submissions."""
    from autograder.course import notebook_id, source_notebooks
    from autograder.engine.submission import find_notebooks, load_notebook
    from autograder.maintenance.answers import release_notebook

    sources = {notebook_id(path): nbformat.read(path, as_version=4) for path in source_notebooks(module)}
    handed = {
        name: {c.source.strip() for c in release_notebook(name).cells if c.cell_type == "code"} for name in sources
    }
    answers = []
    for student, folder in folders.items():
        parts = []
        try:
            found, _ = find_notebooks(folder, module)
        except Exception:  # an unreadable folder is graded (and reported) elsewhere
            continue
        for notebook, path in found.items():
            if path is None or notebook not in sources:
                continue
            try:
                nb, _ = load_notebook(path)
                parts.append(own_code(nb, sources[notebook], handed[notebook]))
            except Exception:  # an unreadable or broken notebook has no code to compare (graded and named elsewhere)
                continue
        answers.append(Answers(student, "\n\n".join(p for p in parts if p.strip())))
    return answers


def reference_answers(module: str) -> Answers:
    """The course's published solutions of ``module`` (what the self-study site shows)."""
    from autograder.course import notebook_id, source_notebooks
    from autograder.maintenance.answers import source_answers

    code = "\n\n".join(c for path in source_notebooks(module) for c in source_answers(notebook_id(path)).values())
    return Answers(REFERENCE, code, "reference")


def release_boilerplate(module: str) -> str:
    from autograder.course import notebook_id, source_notebooks
    from autograder.maintenance.answers import release_notebook

    return course_code(release_notebook(notebook_id(path)) for path in source_notebooks(module))


def _fingerprint(answers: Answers, boilerplate: Any) -> Any:
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        f"{answers.name}.py",
        NOISE_TOKENS,
        GUARANTEE_TOKENS - NOISE_TOKENS + 1,
        boilerplate=boilerplate,
        language="python",
        fp=io.StringIO(answers.code),
    )


@functools.lru_cache(maxsize=16)
def _boilerplate(code: str) -> list[int]:
    """The fingerprints of the course's own code (every k-gram: no winnowing), computed once per module."""
    from copydetect import CodeFingerprint

    return list(CodeFingerprint("course.py", NOISE_TOKENS, 1, language="python", fp=io.StringIO(code)).hashes)


def _marked_lines(code: str, slices: Any) -> list[tuple[str, bool]]:
    """Each line of ``code`` and whether a shared slice covers part of it."""
    covered = [False] * (len(code) + 1)
    for start, end in zip(*slices, strict=False) if len(slices) == 2 else []:
        for i in range(max(0, int(start)), min(len(code), int(end))):
            covered[i] = True
    lines, position = [], 0
    for line in code.split("\n"):
        shared = any(covered[position : position + len(line)]) and bool(line.strip())
        lines.append((line, shared))
        position += len(line) + 1
    return lines


def compare(answers: list[Answers], boilerplate_code: str) -> list[Pair]:
    """Every pair of ``answers`` that shares code (this class's students with each other and with every reference
    or archived side; references and archives are not compared with each other), most shared first."""
    from copydetect import compare_files

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # copydetect logs a warning on the root logger for every text it cannot use
    try:
        boilerplate = _boilerplate(boilerplate_code)
        prints = {a.name: _fingerprint(a, boilerplate) for a in answers if a.code.strip()}
    finally:
        root.setLevel(level)  # the grader's own logging (nbgrader's, the sandbox's) keeps its level
    sides = [a for a in answers if a.name in prints and prints[a.name].token_coverage > 0]
    pairs = []
    for i, first in enumerate(sides):
        for second in sides[i + 1 :]:
            if first.kind != "student" and second.kind != "student":
                continue
            overlap, shares, slices = compare_files(prints[first.name], prints[second.name])
            if overlap <= 0:
                continue
            pair = Pair(
                first.name,
                second.name,
                (float(shares[0]), float(shares[1])),
                int(overlap),
                (first.kind, second.kind),
            )
            if pair.flagged:
                pair.lines = (_marked_lines(first.code, slices[0]), _marked_lines(second.code, slices[1]))
            pairs.append(pair)
    return sorted(pairs, key=lambda p: (-min(p.share), -p.shared_tokens, p.first, p.second))


def class_similarity(
    module: str, folders: dict[str, Path | None], archive: Iterable[Path] = (), reference: bool = True
) -> dict[str, Any]:
    """The similarity section's data for a graded class: flagged pairs (with their matching lines) and counts.

    ``archive``: folders of earlier terms' submissions (``<folder>/<student>/<module>/``), compared with this
    class, each student named ``<folder name>/<student>``."""
    from autograder.engine.submission import class_folders

    answers = module_answers(module, folders)
    compared = len([a for a in answers if a.code.strip()])
    if reference:
        answers.append(reference_answers(module))
    for folder in archive:
        for side in module_answers(module, class_folders(Path(folder), module)):
            answers.append(Answers(f"{Path(folder).name}/{side.name}", side.code, "archive"))
    pairs = compare(answers, release_boilerplate(module))
    flagged = [p for p in pairs if p.flagged]
    return {
        "students": compared,
        "pairs": len(pairs),
        "flagged": [p.as_dict() for p in flagged],
        "thresholds": {"share": FLAG_SHARE, "tokens": MIN_SHARED_TOKENS},
    }


def similarity_path(out: Path, module: str) -> Path:
    return out / f"{module}-similarity.json"


def write_similarity(out: Path, module: str, folders: dict[str, Path | None], archive: Iterable[Path] = ()) -> Path:
    """Compare the whole class of ``folders`` (and ``archive``) and write ``<out>/<module>-similarity.json``, which
    the class report reads."""
    import json

    data = class_similarity(module, folders, archive)
    path = similarity_path(out, module)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def read_similarity(out: Path, module: str) -> dict[str, Any] | None:
    """What ``write_similarity`` wrote, or None (not compared, or not readable)."""
    import json

    try:
        data = json.loads(similarity_path(out, module).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("flagged"), list) else None
