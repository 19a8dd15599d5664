"""QAT speed in a fresh process: torchao's conv + batch norm patterns, all of them or only the convs present.

``prepare_qat_pt2e`` and ``convert_pt2e`` of a QAT model trace conv + batch norm patterns for four convs
(126 traces); ``common.torchao_cache`` hands an unmatchable stand-in for the patterns of a conv the graph
does not hold (``skip_absent_conv_patterns``). This runs M07's flow (the digits model: export, prepare_qat,
one forward, move to eval, convert) cold, in a new process each time, with torchao alone (the memory and
the skipping undone) and as the course runs it, on this machine in one run, and prints the medians and their
ratio. Nothing here is a test: only the ratio means something.

    .venv/bin/python bench/qat.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FLOW = """
import contextlib, sys, time, warnings
warnings.simplefilter("ignore")
import torch
import common.pt2e as pt2e
from common import data, torchao_cache
from torchao.quantization.pt2e import move_exported_model_to_eval
from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
torch.manual_seed(0)
x = (torch.randn(8, 1, 8, 8),)
with torchao_cache.torchao_alone() if sys.argv[1] == "alone" else contextlib.nullcontext():
    start = time.perf_counter()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = pt2e.prepare_qat_pt2e(data.export(data.digits_model().train()), quantizer)
    prepared(*x)
    move_exported_model_to_eval(prepared)
    pt2e.convert_pt2e(prepared)
    print(time.perf_counter() - start)
"""


def seconds(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", FLOW, mode], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    alone, course = [], []
    for _ in range(args.rounds):  # interleaved, so that a busy moment of the machine hits both
        alone.append(seconds("alone"))
        course.append(seconds("course"))
    a, c = statistics.median(alone), statistics.median(course)
    print(f"M07's QAT flow in a fresh process, median of {args.rounds}")
    print(f"  torchao alone (every conv's patterns traced): {a:6.1f} s")
    print(f"  common.pt2e (convs present only, remembered): {c:6.1f} s")
    print(f"  course / torchao alone: {c / a:.2f}×")


if __name__ == "__main__":
    main()
