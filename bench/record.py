"""The sandbox's record of M08-3 without the lowering, against a record that lowers as the replay does.

A graded job records the student's calls in the sandbox; the grader's replay runs every case again and
derives the evidence (``autograder.sandboxed.replay``). The evidence the record computes is thrown away,
so M08-3's ``lowered`` case skips lowering and running the converted backbone while it records
(``selfcheck.casekit.evidence_is_kept``), and its ``reference`` case skips ExecuTorch's quantizer. The
obvious alternative is to run each case in full, as the replay does. This records the answer key both
ways on fresh seeds, in one process (the lowering memo and the reference emptied before each record),
and prints the wall times, the ratio and whether both wrote down the same calls.

    .venv/bin/python bench/record.py [--seeds 3 4 5]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent


def record(seed: int, keep_evidence: bool) -> tuple[float, Any]:
    """Wall seconds and the recording (as JSON data) of the key's M08-3 answers on ``seed``."""
    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.record import record_exercise
    from selfcheck.public import m08_3

    cases = importlib.import_module("autograder.sandboxed.cases.m08_3")
    key = vars(importlib.import_module("autograder.keys.m08_3"))
    m08_3._runs.clear()
    cases._reference.cache_clear()
    exercise = exercises_of("M08-3")["backend_quantizer"]
    patch = mock.patch.object(cases, "evidence_is_kept", lambda: True) if keep_evidence else contextlib.nullcontext()
    with patch:
        start = time.perf_counter()
        recorded = record_exercise(exercise, dict(key), seed)
        seconds = time.perf_counter() - start
    return seconds, json.loads(json.dumps(recorded))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[3, 4, 5])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(1)  # as a graded job computes
    record(args.seeds[0] + 100, keep_evidence=True)  # the first lowering of a process imports ExecuTorch's passes
    print(f"{'seed':>10s} {'full s':>8s} {'skips s':>8s} {'ratio':>6s}  same calls")
    for seed in args.seeds:
        full, full_record = record(seed, keep_evidence=True)
        skips, skip_record = record(seed, keep_evidence=False)
        same = "yes" if full_record == skip_record else "NO"
        print(f"{seed:10d} {full:8.2f} {skips:8.2f} {skips / full:6.2f}  {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
