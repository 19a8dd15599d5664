"""A graded run that stops after the last graded cell, against one that runs the whole notebook.

``autograder.engine.submission.prepare`` ends the cells it hands to the sandbox at the notebook's last
graded cell (``through_last_collect``): nothing after it can change a score. The obvious alternative is to
run every cell, as the grader did before. This grades the answered notebooks of ``--notebooks`` (default
M08-3 and M07-2, the chapters with the longest endings) both ways, in the same process and the same
sandbox, and prints the wall times, the ratio and whether both gave the same scores.

    .venv/bin/python bench/graded_run.py [--notebooks M08-3 M07-2]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


def grade_once(notebook: str) -> tuple[float, float]:
    """Wall time and score of grading the answer key's answers of ``notebook`` in the sandbox."""
    from autograder.engine.grading import grade_notebook_node
    from autograder.maintenance.answers import answered, source_answers
    from autograder.sandboxed.limits import Limits

    nb = answered(notebook, source_answers(notebook))
    start = time.perf_counter()
    result = grade_notebook_node(notebook, nb, 0, Limits())
    return time.perf_counter() - start, result.score


def whole_notebook(cells: list) -> list:
    return list(cells)


def timed(notebook: str, trim: Callable[[list], list] | None) -> tuple[float, float]:
    if trim is None:
        return grade_once(notebook)
    with mock.patch("autograder.engine.submission.through_last_collect", trim):
        return grade_once(notebook)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+", default=["M08-3", "M07-2"])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"{'notebook':10s} {'whole s':>8s} {'stops s':>8s} {'ratio':>6s}  same score")
    for notebook in args.notebooks:
        timed(notebook, None)  # the first grading of a process starts and warms the sandbox
        whole, whole_score = timed(notebook, whole_notebook)
        stops, stops_score = timed(notebook, None)
        same = "yes" if whole_score == stops_score else f"NO ({whole_score} vs {stops_score})"
        print(f"{notebook:10s} {whole:8.1f} {stops:8.1f} {stops / whole:6.2f}  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
