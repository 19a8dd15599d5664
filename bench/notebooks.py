"""How long each source notebook takes to run, and how much memory its kernel peaks at.

For every notebook under source/ this executes a copy (nothing is written back) in a
fresh kernel and prints the wall time and the kernel's peak RSS. It also measures the
floor every notebook pays: `import common.pt2e` alone in a fresh interpreter, and a
one-cell notebook that only does that import (kernel start included). The last column
is the notebook's cost beyond that floor.

    .venv/bin/python bench/notebooks.py [NOTEBOOK ...]
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_one(path: str, shutdown: str = "immediate") -> None:
    """Child mode: execute one notebook, print seconds and the kernel's peak RSS as JSON."""
    from autograder.maintenance.execute import execute

    nb = nbformat.read(path, as_version=4) if path != "-" else floor_notebook()
    start = time.perf_counter()
    execute(nb, Path(path).parent if path != "-" else ROOT, shutdown=shutdown)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the kernel, reaped after execute
    print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024}))


def floor_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import common.pt2e")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def measure(path: str, shutdown: str = "immediate") -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", path, shutdown], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def import_seconds(repeat: int = 3) -> float:
    code = "import time; t = time.perf_counter(); import common.pt2e; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeat)
    ]
    return statistics.median(runs)


def main(paths: list[str]) -> None:
    from autograder.course import source_notebooks

    notebooks = [Path(p) for p in paths] or source_notebooks()
    imported = import_seconds()
    floor = measure("-")
    print(f"import common.pt2e（新的直譯器，3 次中位數）：{imported:.2f} 秒")
    graceful = measure("-", "graceful")
    print(
        f"只 import common.pt2e 的一格 notebook（含 kernel 啟動）：{floor['seconds']:.2f} 秒，尖峰 {floor['peak_mb']:.0f} MB"
    )
    print(
        f"  同一本等 kernel 自己結束（graceful）：{graceful['seconds']:.2f} 秒；"
        f"直接結束 kernel（immediate，課程的做法）/ graceful = {floor['seconds'] / graceful['seconds']:.2f}"
    )
    print()
    print(f"{'notebook':<10} {'秒':>7} {'尖峰 MB':>8} {'扣掉 floor 的秒數':>16}")
    total = 0.0
    for path in notebooks:
        result = measure(str(path))
        total += result["seconds"]
        extra = result["seconds"] - floor["seconds"]
        print(f"{path.stem:<10} {result['seconds']:7.2f} {result['peak_mb']:8.0f} {extra:16.2f}")
    print(f"{'合計':<10} {total:7.2f}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        run_one(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:])
