"""torch.fx's code compiled once per text and provenance without deep copies, against torch alone.

``common.fx_code_cache`` compiles each text torch.fx generates once and records provenance without deep
copies. The obvious alternative is torch's own path: compile every recompile, copy every history. This
runs, in one process, the same work both ways (``fx_code_cache.torch_alone()`` for torch's path):

- the grader's path (record, replay, judge) of every kept wrong and right solution of a few notebooks;
- lowering M08-3's hidden backbone, converted, to XNNPACK (and whether the ``.pte`` bytes are the same).

    .venv/bin/python bench/fx_code.py [--notebooks M03-3 M06-2 M09-1] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(work: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def judge_fixtures(notebooks: list[str], seed: int) -> None:
    """Record, replay and judge every wrong and right fixture of ``notebooks`` on ``seed`` (``test_checks``'s path)."""
    from conftest import right_solutions, wrong_solutions
    from test_checks import verdicts_for

    for fixture in [*wrong_solutions(), *right_solutions()]:
        if fixture.notebook in notebooks:
            namespace: dict = {}
            exec(compile(fixture.code, str(fixture.path), "exec"), namespace)
            verdicts_for(fixture.notebook, fixture.exercise, namespace, seed)


def lowered(seed: int) -> bytes:
    """M08-3's hidden backbone of ``seed``, quantized by ExecuTorch's quantizer, lowered: the ``.pte``."""
    from autograder.sandboxed.cases import m08_3 as cases
    from common.backends import lower_to_xnnpack, pte_bytes
    from selfcheck.public import m08_3

    model = cases.backbone(seed)
    calibration, test = cases.backbone_data(seed)
    _, converted = m08_3.quantize(m08_3.executorch_quantizer(), model, calibration)
    m08_3.bias_to_fp32(converted)
    return pte_bytes(lower_to_xnnpack(converted, test))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+", default=["M03-3", "M06-2", "M09-1"])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import torch

    import common.pt2e  # noqa: F401  (installs the cache)
    from common import fx_code_cache

    torch.set_num_threads(1)
    judge_fixtures(args.notebooks, args.seed + 100)  # warm: imports, exports, torchao's pattern memory
    lowered(args.seed + 100)
    print(f"{'work':<40s} {'torch s':>8s} {'cache s':>8s} {'ratio':>6s}")
    for name, work in (
        (f"judge the fixtures of {' '.join(args.notebooks)}", lambda: judge_fixtures(args.notebooks, args.seed)),
        ("lower M08-3's backbone to XNNPACK", lambda: lowered(args.seed)),
    ):
        with fx_code_cache.torch_alone():
            alone, theirs = timed(work)
        cached, ours = timed(work)
        same = "" if theirs is None else ("  same .pte" if ours == theirs else "  .pte DIFFERS")
        print(f"{name:<40s} {alone:8.2f} {cached:8.2f} {cached / alone:6.2f}{same}")
    print(f"texts compiled and kept: {fx_code_cache.size()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
