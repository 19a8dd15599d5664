"""Test speed: one intra-op thread per test process against torch's default, under `make test`'s xdist.

`make test` runs two pytest-xdist workers. `tests/conftest.py` sets `OMP_NUM_THREADS=1` (and
`MKL_NUM_THREADS`) for them and for what they start; the obvious alternative is torch's default, one
thread per core in every worker. This times the same slice of `tests/test_checks.py` (record,
replay and judge every fixture of some notebooks on one seed) both ways, in one run on this
machine, with the same number of workers, and prints the wall times and their ratio. Nothing here
is a test: the numbers depend on the machine, and only their ratio means something.

    .venv/bin/python bench/threads.py [--workers 2] [--select "0-M04-3 or 0-M05-2"]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(select: str, workers: int, threads: str | None) -> float:
    """Wall seconds of the selected tests; ``threads`` None leaves torch its default."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = threads
    else:
        # conftest sets one thread only where the caller set nothing: say "as many as cores" outright
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(os.cpu_count() or 1)
    command = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "tests/test_checks.py", "-k", select]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the tests failed ({threads or 'default'} threads):\n{done.stdout[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--select", default="0-M04-3 or 0-M05-2")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    default = timed(args.select, args.workers, None)
    one = timed(args.select, args.workers, "1")
    print(f"{args.workers} xdist workers on {cores} cores, tests/test_checks.py -k {args.select!r}")
    print(f"  torch's default ({cores} threads per worker): {default:6.1f} s")
    print(f"  one thread per worker (conftest):          {one:6.1f} s")
    print(f"  one thread / default: {one / default:.2f}×")


if __name__ == "__main__":
    main()
