"""What a notebook shows, and whether two runs show the same thing on any CPU.

The committed outputs of ``source/`` and ``release/`` were made on one machine; a maintainer's
or CI's run is on another. Two runs show the same thing when:

- every output has the same kind (a stream, a value, an error, a picture) in the same place;
- their text is the same once the numbers are taken out;
- each integer is the same (counts, shapes, sizes, image counts);
- each decimal number is the same within ``PRINTED``: one unit of the last digit printed (a
  value on a rounding boundary prints either way) plus the float32 tolerance of the previews
  (``selfcheck.compare.FLOAT32``, relative). The two places share that constant on purpose.
  Two decimals both below ``ROUNDING`` (float32 rounding noise) are the same;
- pictures (PNG, SVG) are compared by their kind only: their pixels follow from the numbers
  and the text, which are compared, and from the fonts of the machine.

A cell tagged ``machine`` shows a measurement of the machine it runs on (a latency, a model
trained here): its numbers are not compared, only its text around them. Its asserts still hold
on every CPU; that is how such a cell pins its claim.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import nbformat

from selfcheck.compare import FLOAT32

MACHINE = "machine"
"""Tag of a cell whose numbers are measured on this machine (time, training): compared as text only."""

IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
"""A number in printed text (``0.21x`` and ``12ms`` hold one), not part of an identifier such as ``conv2d_1``."""


@dataclass(frozen=True)
class Output:
    """One output of a code cell, as compared: its kind and its text (a picture: its types)."""

    kind: str  # "stdout", "stderr", "result", "image", "error"
    text: str


def shown(nb: nbformat.NotebookNode) -> list[tuple[bool, list[Output]]]:
    """Per code cell: whether it is tagged ``machine``, and its outputs as compared.

    Consecutive stream outputs of one name are one text (``print`` arrives in pieces).
    """
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[Output] = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                if outputs and outputs[-1].kind == output.name:
                    outputs[-1] = Output(output.name, outputs[-1].text + output.text)
                else:
                    outputs.append(Output(output.name, output.text))
            elif output.output_type in ("execute_result", "display_data"):
                data = output.get("data", {})
                pictures = [kind for kind in IMAGE_TYPES if kind in data]
                if pictures:
                    outputs.append(Output("image", " ".join(pictures)))
                outputs.append(Output("result", data.get("text/plain", "")))
            elif output.output_type == "error":
                outputs.append(Output("error", f"{output.ename}: {output.evalue}"))
        cells.append((MACHINE in cell.metadata.get("tags", []), outputs))
    return cells


def _last_digit(token: str) -> float:
    """One unit of the last digit a decimal number was printed with (``"40.11"`` → 0.01)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def _is_decimal(token: str) -> bool:
    return "." in token or "e" in token.lower()


def same_number(committed: str, fresh: str) -> bool:
    """Two printed numbers are the same result (see the module docstring)."""
    if _is_decimal(committed) != _is_decimal(fresh):
        return False  # printed another way: an integer became a decimal or back
    if not _is_decimal(committed):
        return int(committed) == int(fresh)
    a, b = float(committed), float(fresh)
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return committed == fresh
    if max(abs(a), abs(b)) < ROUNDING:
        return True  # both are float32 rounding (a difference that should be zero): its digits are the CPU's
    allowed = max(_last_digit(committed), _last_digit(fresh)) + FLOAT32.rel * max(abs(a), abs(b))
    return abs(a - b) <= allowed * (1 + 1e-9)


ROUNDING = 1e-5
"""Below this, a printed decimal is the rounding of float32 results of order one (their eps is 1.2e-7, and
a sum of many such terms adds up): e.g. "folding BN changes the output by at most 3.6e-07", which prints
4.8e-07 on a CPU that sums in another order. Such numbers only need to stay that small."""


PRINTED = "one unit of the last digit printed, plus selfcheck.compare.FLOAT32.rel of the value"
"""The tolerance of a printed decimal number, in words (for messages and CONTRIBUTING)."""


def text_difference(committed: str, fresh: str, numbers: bool = True) -> str | None:
    """Where two texts differ (None when they are the same, numbers within ``PRINTED``)."""
    if NUMBER.sub("#", committed) != NUMBER.sub("#", fresh):
        return _first_line_difference(committed, fresh)
    if not numbers:
        return None
    for before, now in zip(NUMBER.findall(committed), NUMBER.findall(fresh), strict=True):
        if not same_number(before, now):
            return f"數字 {before} 現在是 {now}（容許 {PRINTED}）"
    return None


def _first_line_difference(committed: str, fresh: str) -> str:
    before, now = committed.splitlines(), fresh.splitlines()
    for index, (a, b) in enumerate(zip(before, now, strict=False)):
        if NUMBER.sub("#", a) != NUMBER.sub("#", b):
            return f"第 {index + 1} 行：原本 {a[:160]!r}，現在 {b[:160]!r}"
    return f"行數：原本 {len(before)} 行，現在 {len(now)} 行"


def notebook_difference(committed: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> str | None:
    """The first code cell whose outputs differ between two runs of a notebook, in words; None when none."""
    before, now = shown(committed), shown(fresh)
    if len(before) != len(now):
        return f"code cell 的數目不同：{len(before)} 與 {len(now)}"
    for index, ((machine, old), (_, new)) in enumerate(zip(before, now, strict=True)):
        found = outputs_difference(old, new, numbers=not machine)
        if found is not None:
            return f"code cell {index}：{found}"
    return None


def outputs_difference(old: list[Output], new: list[Output], numbers: bool = True) -> str | None:
    """Where the outputs of one cell differ (None when they are the same thing)."""
    kinds = [o.kind for o in old], [o.kind for o in new]
    if kinds[0] != kinds[1]:
        return f"輸出的種類不同：原本 {kinds[0]}，現在 {kinds[1]}"
    for a, b in zip(old, new, strict=True):
        found = a.text != b.text if a.kind == "image" else text_difference(a.text, b.text, numbers)
        if found:
            return f"{a.kind}：{found if isinstance(found, str) else f'圖的格式 {a.text} 與 {b.text}'}"
    return None


def errors_and_noise(nb: nbformat.NotebookNode) -> list[tuple[int, str, str]]:
    """(code cell, kind, text) of every error or stderr output: a committed notebook has none."""
    return [
        (index, output.kind, output.text[:300])
        for index, (_, outputs) in enumerate(shown(nb))
        for output in outputs
        if output.kind in ("error", "stderr")
    ]


def plain(nb: nbformat.NotebookNode) -> list[list[tuple[str, str]]]:
    """Per code cell, (kind, text) of its outputs without pictures: what a reader sees as text."""
    return [[(o.kind, o.text) for o in outputs if o.kind != "image"] for _, outputs in shown(nb)]
