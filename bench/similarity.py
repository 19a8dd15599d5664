"""How well the similarity check (``autograder/reports/similarity.py``) tells copies from independent answers.

1. A synthetic class of a module (default M03, 240 students): each student answers each exercise with one of
   the kept answers of that exercise (the key, the right solutions written another way, the wrong solutions),
   drawn at random; one student in ten is a *planted copy* of another student's whole module, disguised
   (``autograder.maintenance.disguise``: every name the code defines renamed, comments and blank lines gone).
   It prints the share of planted copies flagged, and the share of the other pairs flagged, split into pairs
   that drew the same answer for every exercise (identical by construction) and the rest.
2. The right solutions written independently of the key (``tests/fixtures/right``), exercise by exercise
   across the course: the share of (key, right) and (right, right) pairs flagged.

Nothing here is a test: it prints rates for the thresholds in force. The kept wrong solutions are mostly small
edits of the key, so in (1) two different wrong answers to one exercise resemble each other far more than two
students' independent answers would: the rate of flagged non-copies there is an upper bound.

    .venv/bin/python bench/similarity.py [--module M03] [--students 240]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.course import notebook_id, source_notebooks
from autograder.maintenance.answers import source_answers
from autograder.maintenance.disguise import disguise
from autograder.maintenance.fixtures import right_solutions, wrong_solutions
from autograder.reports.similarity import Answers, compare, release_boilerplate


def pools(module: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(notebook, exercise) → its kept answers as (name, code)."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for path in source_notebooks(module):
        notebook = notebook_id(path)
        for exercise, code in source_answers(notebook).items():
            found[(notebook, exercise)] = [("key", code)]
    for kept in [*right_solutions(), *wrong_solutions()]:
        if (kept.notebook, kept.exercise) in found:
            found[(kept.notebook, kept.exercise)].append((kept.path.stem, kept.code))
    return found


def synthetic(module: str, students: int, seed: int) -> tuple[list[Answers], dict[str, str], dict[str, tuple]]:
    """The class's code, the planted copies (copy → source) and what each student drew."""
    rng = random.Random(seed)
    kept = pools(module)
    drawn: dict[str, tuple] = {}
    answers: list[Answers] = []
    copies: dict[str, str] = {}
    for index in range(students):
        name = f"s{index:03d}"
        if index >= 10 and rng.random() < 0.1:
            source = rng.choice([a for a in answers if a.name not in copies])
            copies[name] = source.name
            answers.append(Answers(name, disguise(source.code, seed=index)))
            drawn[name] = ("copy", source.name)
            continue
        picks = tuple(rng.randrange(len(options)) for options in kept.values())
        drawn[name] = picks
        code = "\n\n".join(options[pick][1] for options, pick in zip(kept.values(), picks, strict=True))
        answers.append(Answers(name, code))
    return answers, copies, drawn


def class_rates(module: str, students: int, seed: int) -> None:
    started = time.monotonic()
    answers, copies, drawn = synthetic(module, students, seed)
    pairs = compare(answers, release_boilerplate(module))
    flagged = {(p.first, p.second) for p in pairs if p.flagged}
    planted = {tuple(sorted((copy, source))) for copy, source in copies.items()}
    caught = len([p for p in planted if p in flagged])
    names = [a.name for a in answers if a.name not in copies]
    others = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    same = [pair for pair in others if drawn[pair[0]] == drawn[pair[1]]]
    differ = [pair for pair in others if drawn[pair[0]] != drawn[pair[1]]]
    print(f"{module}, {students} students ({len(copies)} planted copies), {time.monotonic() - started:.0f} s:")
    print(f"  planted copies flagged: {caught} of {len(planted)} ({caught / max(len(planted), 1):.0%})")
    flagged_same = len([p for p in same if p in flagged])
    flagged_differ = len([p for p in differ if p in flagged])
    print(f"  pairs with the same draws flagged: {flagged_same} of {len(same)}")
    print(f"  other pairs flagged: {flagged_differ} of {len(differ)} ({flagged_differ / max(len(differ), 1):.2%})")
    by_pair = {(p.first, p.second): min(p.share) for p in pairs}
    lowest_copy = min((by_pair.get(p, 0.0) for p in planted), default=float("nan"))
    shares = sorted(by_pair.get(p, 0.0) for p in differ)
    if shares:
        quantiles = ", ".join(
            f"{q:.0%}: {shares[min(len(shares) - 1, int(q * len(shares)))]:.2f}" for q in (0.5, 0.9, 0.99)
        )
        print(f"  the smaller side's share: planted copies at least {lowest_copy:.2f}; other pairs {quantiles}")


def right_rates() -> None:
    by_exercise: dict[tuple[str, str], list[Answers]] = defaultdict(list)
    for right in right_solutions():
        by_exercise[(right.notebook, right.exercise)].append(Answers(right.path.stem, right.code))
    boilerplate: dict[str, str] = {}
    total = flagged = 0
    for (notebook, exercise), rights in sorted(by_exercise.items()):
        module = notebook.split("-")[0]
        boilerplate.setdefault(module, release_boilerplate(module))
        sides = [Answers("key", source_answers(notebook)[exercise]), *rights]
        count = len(sides) * (len(sides) - 1) // 2
        pairs = [p for p in compare(sides, boilerplate[module]) if p.flagged]
        total += count
        flagged += len(pairs)
        for pair in pairs:
            print(f"  flagged: {notebook} {exercise}: {pair.first} ↔ {pair.second} {pair.share}")
    print(f"right solutions written independently, per exercise: {flagged} of {total} pairs flagged")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="M03")
    parser.add_argument("--students", type=int, default=240)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    class_rates(args.module, args.students, args.seed)
    right_rates()


if __name__ == "__main__":
    main()
