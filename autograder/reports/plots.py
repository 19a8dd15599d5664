"""The class report's plots, drawn with matplotlib as SVG.

Text stays text in the SVG (``svg.fonttype: none``): the browser draws it with the report's CJK fonts,
so no font has to be embedded and Chinese is never a row of boxes. matplotlib measures the text with
the first installed font of ``common.viz.FONT_FAMILIES`` (Debian's fonts-noto-cjk, which the setup
installs), else with its own, without a word about missing glyphs: a picture that is a little too wide
is better than warnings in the instructor's terminal.
"""

from __future__ import annotations

import io
import re
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

BAR = "#2563eb"
FLAGGED = "#dc2626"
MUTED = "#9ca3af"
WIDTH_IN = 7.5
LABEL_COLUMNS = 44
"""How wide a bar's label may be, in columns (a CJK character is two): about 2.3 inches at 8 points."""
LINE_IN = 0.16
"""The height of a label's line at 8 points, in inches."""


def columns(text: str) -> int:
    """How many columns ``text`` takes: two for a wide (CJK) character, one for the rest."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


_TOKEN = re.compile(r"\s+|[^\s\u2E80-\uFFEF]+|.", re.S)
_NO_LINE_START = tuple("，、。：；）」』！？…｜,.:;)]")
_NO_LINE_END = tuple("（「『([")


def _tokens(text: str) -> list[str]:
    """``text`` cut where a line may break: around spaces and between wide characters, never inside a run of
    Latin letters, digits and ASCII signs (``SharedQuantizationSpec``, ``share=True``); a closing mark stays
    with what precedes it."""
    out: list[str] = []
    for token in _TOKEN.findall(text):
        glued = out and not out[-1].isspace() and not token.isspace()
        if glued and (token.startswith(_NO_LINE_START) or out[-1].endswith(_NO_LINE_END)):
            out[-1] += token
        else:
            out.append(token)
    return out


def wrap_label(text: str, width: int = LABEL_COLUMNS, lines: int = 2) -> str:
    """``text`` in at most ``lines`` lines of at most ``width`` columns, broken only where a line may break
    (``_tokens``); what does not fit ends at such a break with "…", never in the middle of a word. A word longer
    than a line stays whole."""
    rows: list[str] = []
    current = ""
    tokens = _tokens(" ".join(text.split()))
    for i, token in enumerate(tokens):
        if token.isspace():
            if current:
                current += " "
            continue
        if current and columns(current.rstrip() + token) > width:
            rows.append(current.rstrip())
            current = ""
            if len(rows) == lines:
                rest = "".join(tokens[i:]).strip()
                if rest:
                    last = rows[-1]
                    while _tokens(last) and columns(last) + 1 > width and len(_tokens(last)) > 1:
                        last = "".join(_tokens(last)[:-1]).rstrip()
                    rows[-1] = last + "…"
                return "\n".join(rows)
        current += token
    if current.strip():
        rows.append(current.rstrip())
    return "\n".join(rows)


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


def _stacked(labels: Sequence[str]) -> tuple[list[str], list[float], list[float], float]:
    """Wrapped labels, the centre of each bar (top to bottom, a row as tall as its label), bar heights and the
    figure's height in inches."""
    wrapped = [wrap_label(label) for label in labels]
    heights = [max(1.0, (w.count("\n") + 1) * 0.8) for w in wrapped]
    centres, y = [], 0.0
    for h in heights:
        centres.append(-(y + h / 2))
        y += h
    return wrapped, centres, [0.7 * min(h, 1.0) for h in heights], 0.28 * y + 0.9


def facility_bars(labels: Sequence[str], facility: Sequence[float], flagged: Sequence[bool]) -> str:
    """A horizontal bar per check: its 通過率; flagged checks in red. Labels wrap (``wrap_label``)."""
    wrapped, positions, bar_heights, height = _stacked(labels)
    with figure(height) as (fig, axes):
        ax = axes[0]
        colors = [FLAGGED if f else BAR for f in flagged]
        ax.barh(positions, facility, color=colors, height=bar_heights)
        ax.set_yticks(positions, wrapped, fontsize=8)
        ax.set_ylim(positions[-1] - 0.6, positions[0] + 0.6) if positions else None
        ax.set_xlim(0, 1)
        ax.set_xlabel("通過率（紅色：列在「給課程作者：檢查的品質」）")
        ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0%}")
        fig.tight_layout()
        return svg(fig)


def count_bars(labels: Sequence[str], counts: Sequence[int], total: int) -> str:
    """A horizontal bar per label with its count of students, most first. Labels wrap (``wrap_label``)."""
    wrapped, positions, bar_heights, height = _stacked(labels)
    with figure(height) as (fig, axes):
        ax = axes[0]
        ax.barh(positions, counts, color=BAR, height=bar_heights)
        ax.set_yticks(positions, wrapped, fontsize=8)
        ax.set_ylim(positions[-1] - 0.6, positions[0] + 0.6) if positions else None
        ax.set_xlabel(f"被點名的學生人數（全班 {total} 位）")
        ax.xaxis.get_major_locator().set_params(integer=True)
        for y, c in zip(positions, counts, strict=True):
            ax.text(c, y, f" {c}", va="center", fontsize=8)
        fig.tight_layout()
        return svg(fig)
