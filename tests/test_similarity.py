"""The similarity check (``autograder.reports.similarity``) finds copies and leaves independent answers alone.

A copy is disguised as a copier would (every name the code defines renamed, comments and blank lines dropped:
``autograder.maintenance.disguise``). The class report's section is tested where the sample class is graded
(``tests/test_grading.py``); ``bench/similarity.py`` measures the rates on a synthetic class of 240.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import nbformat
from conftest import ROOT, right_solutions

from autograder.engine.submission import class_folders
from autograder.maintenance.answers import source_answers
from autograder.maintenance.disguise import defined_names, disguise, disguised_notebook
from autograder.reports.similarity import REFERENCE, Answers, class_similarity, compare, release_boilerplate

SAMPLE = ROOT / "examples" / "submitted"


def copier_class(tmp: Path) -> Path:
    """The sample class and a copier: wrong-sharing's notebooks, disguised."""
    submitted = tmp / "submitted"
    shutil.copytree(SAMPLE, submitted)
    for path in sorted((SAMPLE / "wrong-sharing" / "M03").glob("*.ipynb")):
        target = submitted / "copier" / "M03" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(disguised_notebook(nbformat.read(path, as_version=4), seed=7), target)
    return submitted


def test_a_disguised_copy_still_compiles_and_keeps_the_names_others_call() -> None:
    code = source_answers("M03-4")["add_quantizer"]
    copied = disguise(code, seed=3, keep={"AddQuantizer"})
    compile(copied, "copy", "exec")
    assert "class AddQuantizer(" in copied and "def annotate(self" in copied, "the interface stays"
    assert "#" not in copied and "\n\n" not in copied
    renamed = defined_names(code) - {"AddQuantizer"}
    assert renamed, "the key defines names of its own"
    assert all(f" {name} " not in f" {copied} " for name in renamed)


def test_the_sample_class_and_a_copier(tmp_path: Path) -> None:
    data = class_similarity("M03", class_folders(copier_class(tmp_path), "M03"))
    pairs = {frozenset((p["first"], p["second"])) for p in data["flagged"]}
    assert frozenset(("copier", "wrong-sharing")) in pairs, data["flagged"]
    assert frozenset(("full", REFERENCE)) in pairs, "full marks is the published solution, handed in"
    assert len(pairs) <= 3, f"few other pairs are called similar: {pairs}"
    assert data["students"] == 6, "untouched hands in nothing of its own: it is not compared"
    copier = next(p for p in data["flagged"] if {p["first"], p["second"]} == {"copier", "wrong-sharing"})
    assert min(copier["share"]) >= 0.95
    shared_lines = [text for side in copier["lines"] for text, shared in side if shared]
    assert any("SharedQuantizationSpec" in line or "annotate" in line for line in shared_lines)


def test_handing_in_the_stub_twice_is_not_a_copy() -> None:
    stubs = (
        Answers("a", "class AddQuantizer(Quantizer):\n    pass\n"),
        Answers("b", "class AddQuantizer(Quantizer):\n    pass\n"),
    )
    assert not [p for p in compare(list(stubs), release_boilerplate("M03")) if p.flagged]


def test_disguised_copies_of_every_kept_right_answer_are_flagged() -> None:
    """A longer answer copied and disguised is flagged; one too short to be evidence is not."""
    boilerplate: dict[str, str] = {}
    flagged = long = 0
    for right in right_solutions():
        module = right.notebook.split("-")[0]
        boilerplate.setdefault(module, release_boilerplate(module))
        pairs = compare(
            [Answers("a", right.code), Answers("b", disguise(right.code, seed=len(right.code)))], boilerplate[module]
        )
        if pairs and pairs[0].shared_tokens >= 400:
            long += 1
            flagged += pairs[0].flagged
    assert long >= 10 and flagged == long


def test_independent_right_answers_are_mostly_not_flagged() -> None:
    """The right solutions kept beside each key were written another way: few pairs of them look copied."""
    by_exercise: dict[tuple[str, str], list[Answers]] = defaultdict(list)
    for right in right_solutions():
        by_exercise[(right.notebook, right.exercise)].append(Answers(right.path.stem, right.code))
    boilerplate: dict[str, str] = {}
    total = flagged = 0
    for (notebook, exercise), rights in by_exercise.items():
        module = notebook.split("-")[0]
        boilerplate.setdefault(module, release_boilerplate(module))
        sides = [Answers("key", source_answers(notebook)[exercise]), *rights]
        total += len(sides) * (len(sides) - 1) // 2
        flagged += len([p for p in compare(sides, boilerplate[module]) if p.flagged])
    assert total >= 100 and flagged / total <= 0.05, f"{flagged} of {total}"
