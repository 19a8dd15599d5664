"""Comparing a student's evidence with the expected evidence: the first difference, in words.

Deep equality on plain data: dict keys in any order, lists in order, integers, strings and
``bool`` exactly (``bool`` never equal to a number), floats within a ``Tolerance`` that fits
how the number was computed. The first difference comes back as where it is, what was
expected and what was seen, ready for a one-line message.

Why floats need a tolerance at all: the expected evidence was computed on the machine that
released the course, the student's on their own. Torch, oneDNN and MKL choose kernels by the
CPU's instruction set and sum in different orders, so a float32 result differs in its last
bits from one CPU to the next (``autograder/maintenance/isa.py`` runs the course as other CPUs would).
Integers (counts, shapes, node names, quantized values that are compared as such) never
get a tolerance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tolerance:
    """How far two floats may differ and still be the same result.

    ``rel`` of the larger of the two, plus ``absolute``, plus ``of_largest`` times the largest
    magnitude in the list the number sits in (an element of a tensor that sums to nearly zero
    carries the rounding of the large terms it was summed from, not of its own size).
    """

    rel: float
    absolute: float = 0.0
    of_largest: float = 0.0
    why: str = ""

    def close(self, expected: float, seen: float, largest: float = 0.0) -> bool:
        if math.isnan(expected) or math.isnan(seen):
            return math.isnan(expected) and math.isnan(seen)
        if math.isinf(expected) or math.isinf(seen):
            return expected == seen
        allowed = self.rel * max(abs(expected), abs(seen)) + self.absolute + self.of_largest * largest
        return abs(expected - seen) <= allowed


FLOAT32 = Tolerance(
    rel=1e-4,
    absolute=1e-12,
    of_largest=1e-5,
    why="a float32 result through a few layers of kernels: another CPU sums in another order and changes the "
    "last 2–3 significant digits of 7 (seen: 0.098324 vs 0.098325)",
)
"""The default for every float: outputs of models and ops, scales, MSEs, means."""

DECIBELS = Tolerance(
    rel=0.0,
    absolute=0.1,
    why="an SQNR in dB of a quantized pipeline: a float32 value that lands on the other side of a rounding "
    "boundary moves one integer step, and the SQNR by hundredths of a dB (seen: 0.1929 vs 0.1873 dB)",
)
"""SQNR values and their differences, in dB (``Exercise.tolerances`` names the keys that hold them)."""

EXACT_FLOAT = Tolerance(
    rel=0.0, why="a value that is the same on every CPU: set by hand or computed in float64 from exact inputs"
)
"""For floats that must agree bit for bit (none of the cases uses it by default)."""

SHOWN = 60
"""At most this many characters of a value in a message."""
MESSAGE_SHOWN = 160
"""At most this many characters of an error message."""


MISSING = "（沒有這一項）"
"""What ``Difference.seen`` (or ``expected``) holds when that side has no such item."""


@dataclass(frozen=True)
class Difference:
    """The first place where two pieces of evidence differ.

    ``where`` is the place as a reader finds it in the printed result (``「a + a」的「labels」的「x → add」``),
    ``expected`` and ``seen`` are short texts of the two values (``MISSING`` when a side has no such item).
    """

    where: str
    expected: str
    seen: str

    def __str__(self) -> str:
        place = self.where or "結果"
        if self.seen == MISSING:
            return f"{place}：你的結果少了這一項（應該是 {self.expected}）"
        if self.expected == MISSING:
            return f"{place}：不該有這一項，你的結果有（{self.seen}）"
        return f"{place} 應該是 {self.expected}，你的是 {self.seen}"


def show(value: Any, limit: int = SHOWN) -> str:
    """A value as short JSON-like text for a message."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


GROUP_WORDS: dict[str, str] = {
    "shared": "共用同一個 observer 的第 {n} 組位置",
    "groups": "共用同一個 observer 的第 {n} 組位置",
    "edges": "第 {n} 條邊",
    "instances": "第 {n} 個 observer 實例",
}
"""Evidence keys whose value is a list of lists, and how to name one item of it. A difference inside one item is
reported for the whole item (``「share=True」中共用同一個 observer 的第 1 組位置``), not as an index path into it
(``「share=True」的「shared」的第 1 項的第 1 項``)."""


def _step(path: str, key: Any) -> str:
    """The place one step further in: ``「labels」的「x → add」``, ``…的第 2 項``."""
    step = f"第 {key + 1} 項" if isinstance(key, int) else f"「{key}」"
    return f"{path}的{step}" if path else step


def _group_step(path: str, key: str, index: int) -> str:
    """The place of item ``index`` of a list of lists named ``key``: ``「share=True」中共用同一個 observer 的第 1 組位置``."""
    item = GROUP_WORDS[key].format(n=index + 1)
    return f"{path}中{item}" if path else item


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _same_number(expected: int | float, seen: int | float, tolerance: Tolerance, largest: float) -> bool:
    if type(expected) is int and type(seen) is int:
        return expected == seen
    return tolerance.close(float(expected), float(seen), largest)


def _largest(values: list[Any]) -> float:
    finite = [abs(v) for v in values if type(v) in (int, float) and math.isfinite(v)]
    return max(finite, default=0.0)


def first_difference(
    expected: Any,
    seen: Any,
    where: str = "",
    tolerances: Mapping[str, Tolerance] | None = None,
    tolerance: Tolerance = FLOAT32,
    largest: float = 0.0,
) -> Difference | None:
    """The first difference between ``expected`` and ``seen`` (None when they agree).

    Tuples count as lists (JSON has no tuples); anything that is not plain data is
    compared with ``==`` only when both sides have the same type. A float is compared with
    ``tolerance`` (``FLOAT32`` unless a dict key on its path is named in ``tolerances``).
    """
    tolerances = tolerances or {}
    if isinstance(expected, tuple):
        expected = list(expected)
    if isinstance(seen, tuple):
        seen = list(seen)
    if type(expected) is bool or type(seen) is bool:
        if type(expected) is type(seen) and expected == seen:
            return None
        return Difference(where, show(expected), show(seen))
    if _number(expected) and _number(seen):
        same = _same_number(expected, seen, tolerance, largest)
        return None if same else Difference(where, show(expected), show(seen))
    if type(expected) is not type(seen):
        return Difference(where, show(expected), show(seen))
    if isinstance(expected, dict):
        for key in expected:
            if key not in seen:
                return Difference(_step(where, key), show(expected[key]), MISSING)
        for key in seen:
            if key not in expected:
                return Difference(_step(where, key), MISSING, show(seen[key]))
        for key in seen:  # in the order the case built its result (the student's evidence is never reordered)
            inner = tolerances.get(key, tolerance) if isinstance(key, str) else tolerance
            if key in GROUP_WORDS and isinstance(expected[key], list | tuple) and isinstance(seen[key], list | tuple):
                found = _group_difference(expected[key], seen[key], where, key, tolerances, inner)
            else:
                found = first_difference(expected[key], seen[key], _step(where, key), tolerances, inner)
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        scale = _largest(expected)
        for index, (want, got) in enumerate(zip(expected, seen, strict=False)):
            found = first_difference(want, got, _step(where, index), tolerances, tolerance, scale)
            if found is not None:
                return found
        if len(expected) != len(seen):
            return Difference(f"{where or '結果'}的項數", str(len(expected)), str(len(seen)))
        return None
    return None if expected == seen else Difference(where, show(expected), show(seen))


def _group_difference(
    expected: list[Any] | tuple[Any, ...],
    seen: list[Any] | tuple[Any, ...],
    where: str,
    key: str,
    tolerances: Mapping[str, Tolerance],
    tolerance: Tolerance,
) -> Difference | None:
    """The first differing item of a list of lists (``GROUP_WORDS``), shown whole."""
    for index, (want, got) in enumerate(zip(expected, seen, strict=False)):
        if first_difference(want, got, "", tolerances, tolerance) is not None:
            return Difference(_group_step(where, key, index), show(want), show(got))
    if len(expected) > len(seen):
        return Difference(_group_step(where, key, len(seen)), show(expected[len(seen)]), MISSING)
    if len(seen) > len(expected):
        return Difference(_group_step(where, key, len(expected)), MISSING, show(seen[len(expected)]))
    return None


def case_difference(
    expected: dict[str, Any], seen: dict[str, Any], tolerances: Mapping[str, Tolerance] | None = None
) -> str | None:
    """What is wrong with one case's record (``{"value": ...}`` or ``{"error": ..., "message": ...}``), or None.

    ``tolerances``: the exercise's own (``Exercise.tolerances``), by dict key.

    The expected record always holds a value: the release refuses an answer key that fails a public case.
    """
    if "error" in seen:
        from common.explain import error_sentence

        message = " ".join(str(seen.get("message", "")).split())[:MESSAGE_SHOWN]
        return error_sentence(str(seen.get("error")), message)
    if "value" not in expected or "value" not in seen:
        return f"結果的格式不對：{show(seen)}"
    found = first_difference(expected["value"], seen["value"], tolerances=tolerances)
    return None if found is None else str(found)
