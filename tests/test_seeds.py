"""The seed chapters' code runs unchanged against common/ and prints the seeds' figures.

tests/seeds/*.py are the code of ../shared/seeds transcribed unchanged (a value a
notebook cell displays is printed instead). Their output must contain the figures the
published chapters print, and our M03 notebooks must print the same figures.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, text_outputs

# The figures as the seed chapters print them (tables as their rows of cells).
SEED_FIGURES: dict[str, list[str]] = {
    "m03_1": [
        "貼了 2 張標籤，圖上的 observer 數量 = 0",
        "| 不貼標籤 | 0 | 0 | annotate → validate |",
        "| + relu 的輸出 | 1 | 1 | annotate → validate |",
        "| + 邊 x → conv2d | 2 | 2 | annotate → validate |",
        "| + 邊 conv_weight → conv2d | 3 | 3 | annotate → validate |",
        "| 1. 邊標籤 | conv2d | activation_post_process_0 | 量化後的 x |",
        "| 1. 邊標籤 | conv2d_1 | x | 原本的 x |",
        "| 2. 輸出標籤 | conv2d | activation_post_process_0 | 量化後的 x |",
        "| 2. 輸出標籤 | conv2d_1 | activation_post_process_0 | 量化後的 x |",
    ],
    "m03_2": [
        "activation： int8 per-tensor affine [-128,127]，HistogramObserver",
        "weight：     int8 per-channel symmetric [-127,127]，PerChannelMinMaxObserver, ch_axis=0",
        "沒有標籤的 op： ['cat', 'max_pool2d']",
    ],
    "m03_4": [
        "不共用：observer node 3 個、實例 3 個、scale [0.028452, 0.09679, 0.101465]",
        "共用：observer node 3 個、實例 1 個、scale [0.126223]",
        "observer node 3 個、實例 1 個",
        "| B 與 A 屬性不同 | 2 | MinMaxObserver | x → obs → obs → conv2d_1 | x → q → dq → q → dq → conv2d_1 |",
        "| B 與 A 屬性相同 | 1 | MinMaxObserver | x → obs → conv2d_1 | x → q → dq → conv2d_1 |",
        "| 屬性相同，但 allow_implicit_sharing=False | 2 | MinMaxObserver | x → obs → obs → conv2d_1 | x → q → dq → q → dq → conv2d_1 |",
        "| B 與 A 只有 observer 類別不同 | 1 | MinMaxObserver | x → obs → conv2d_1 | x → q → dq → conv2d_1 |",
    ],
}
NOTEBOOKS = {"m03_1": "M03-1", "m03_2": "M03-2", "m03_4": "M03-4"}


@pytest.mark.parametrize("seed", sorted(SEED_FIGURES))
def test_seed_code_prints_seed_figures(seed: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "seeds" / f"{seed}.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", f"the seed code printed noise on stderr:\n{result.stderr}"
    lines = result.stdout.splitlines()
    missing = [figure for figure in SEED_FIGURES[seed] if figure not in lines]
    assert not missing, f"figures the seed prints but our common/ does not: {missing}"


@pytest.mark.parametrize("seed", sorted(SEED_FIGURES))
def test_notebook_prints_seed_figures(seed: str) -> None:
    notebook = NOTEBOOKS[seed]
    nb = nbformat.read(ROOT / "source" / notebook[:3] / f"{notebook}.ipynb", as_version=4)
    lines = {line for cell in text_outputs(nb) for _, text in cell for line in text.splitlines()}
    missing = [figure for figure in SEED_FIGURES[seed] if figure not in lines]
    assert not missing, f"{notebook} does not print the seed's figures: {missing}"
