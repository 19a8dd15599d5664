"""The class report's plots, drawn with matplotlib as SVG.

Text stays text in the SVG (``svg.fonttype: none``): the browser draws it with the report's CJK fonts,
so no font has to be embedded and Chinese is never a row of boxes. matplotlib measures the text with
the first installed font of ``common.viz.FONT_FAMILIES`` (Debian's fonts-noto-cjk, which the setup
installs), else with its own, without a word about missing glyphs: a picture that is a little too wide
is better than warnings in the instructor's terminal.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

BAR = "#2563eb"
FLAGGED = "#dc2626"
MUTED = "#9ca3af"
WIDTH_IN = 7.5


@contextmanager
def figure(height_in: float, columns: int = 1) -> Iterator[tuple[Any, Any]]:
    """A matplotlib figure (Agg, no window) with ``columns`` axes side by side; closed afterwards."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from common.viz import FONT_FAMILIES

    style = {
        "svg.fonttype": "none",
        "svg.hashsalt": "pt2e-course",  # the same SVG for the same data
        "font.family": "sans-serif",
        "font.sans-serif": [*FONT_FAMILIES[:-1], "DejaVu Sans"],
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
    with matplotlib.rc_context(style), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(Glyph|findfont|Font family).*")
        fig, axes = plt.subplots(1, columns, figsize=(WIDTH_IN, height_in), squeeze=False)
        try:
            yield fig, axes[0]
        finally:
            plt.close(fig)


def svg(fig: Any) -> str:
    """The figure as an SVG document (no metadata that changes from run to run)."""
    buffer = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(Glyph|findfont|Font family).*")
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return buffer.getvalue()


def histograms(panels: Sequence[tuple[str, list[int]]], columns: int = 3) -> str:
    """One bar chart per panel (title, count of students at each score 0…max) in a grid of ``columns``."""
    rows = (len(panels) + columns - 1) // columns
    with figure(2.3 * rows, 1) as (fig, _):
        fig.clear()
        for i, (title, bins) in enumerate(panels):
            ax = fig.add_subplot(rows, columns, i + 1)
            ax.bar(range(len(bins)), bins, color=BAR, width=0.8)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("分數")
            ax.set_ylabel("人數")
            ax.spines[["top", "right"]].set_visible(False)
            step = max(1, (len(bins) - 1) // 8 + 1)
            ax.set_xticks(range(0, len(bins), step))
            ax.yaxis.get_major_locator().set_params(integer=True)
        fig.tight_layout()
        return svg(fig)


def facility_bars(labels: Sequence[str], facility: Sequence[float], flagged: Sequence[bool]) -> str:
    """A horizontal bar per check: the share of students who passed it; flagged checks in red."""
    with figure(0.28 * len(labels) + 0.9) as (fig, axes):
        ax = axes[0]
        positions = list(range(len(labels)))[::-1]
        colors = [FLAGGED if f else BAR for f in flagged]
        ax.barh(positions, facility, color=colors, height=0.7)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_xlabel("通過的比例（facility；紅色：請看看這項檢查）")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0%}")
        fig.tight_layout()
        return svg(fig)


def count_bars(labels: Sequence[str], counts: Sequence[int], total: int) -> str:
    """A horizontal bar per label with its count of students, most first."""
    with figure(0.34 * len(labels) + 0.9) as (fig, axes):
        ax = axes[0]
        positions = list(range(len(labels)))[::-1]
        ax.barh(positions, counts, color=BAR, height=0.7)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.set_xlabel(f"被點名的學生人數（全班 {total} 位）")
        ax.xaxis.get_major_locator().set_params(integer=True)
        for y, c in zip(positions, counts, strict=True):
            ax.text(c, y, f" {c}", va="center", fontsize=8)
        fig.tight_layout()
        return svg(fig)
