"""Comparing a student's evidence with the expected evidence: the first difference, in words.

Deep equality on plain data: dict keys in any order, lists in order, numbers equal (floats
within a relative 1e-5), ``bool`` never equal to a number. The first difference comes back
as where it is, what was expected and what was seen, ready for a one-line message.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

REL_TOL = 1e-5
ABS_TOL = 1e-9
"""Floats are equal within ``REL_TOL`` relative; ``ABS_TOL`` only lets ±1e-12 pass for a zero."""

SHOWN = 60
"""At most this many characters of a value in a message."""
MESSAGE_SHOWN = 160
"""At most this many characters of an error message."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Difference:
    """The first place where two pieces of evidence differ."""

    where: str
    expected: str
    seen: str

    def __str__(self) -> str:
        place = f"{self.where}：" if self.where else ""
        return f"{place}應該是 {self.expected}，你的是 {self.seen}"


def show(value: Any, limit: int = SHOWN) -> str:
    """A value as short JSON-like text for a message."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _step(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.fullmatch(str(key)):
        return f"{path}.{key}" if path else str(key)
    return f"{path}[{json.dumps(str(key), ensure_ascii=False)}]"


def _number(value: Any) -> bool:
    return type(value) in (int, float)


def _same_number(expected: int | float, seen: int | float) -> bool:
    if type(expected) is int and type(seen) is int:
        return expected == seen
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(seen, float) and math.isnan(seen)
    return math.isclose(expected, seen, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def first_difference(expected: Any, seen: Any, where: str = "") -> Difference | None:
    """The first difference between ``expected`` and ``seen`` (None when they agree).

    Tuples count as lists (JSON has no tuples); anything that is not plain data is
    compared with ``==`` only when both sides have the same type.
    """
    if isinstance(expected, tuple):
        expected = list(expected)
    if isinstance(seen, tuple):
        seen = list(seen)
    if type(expected) is bool or type(seen) is bool:
        if type(expected) is type(seen) and expected == seen:
            return None
        return Difference(where, show(expected), show(seen))
    if _number(expected) and _number(seen):
        return None if _same_number(expected, seen) else Difference(where, show(expected), show(seen))
    if type(expected) is not type(seen):
        return Difference(where, show(expected), show(seen))
    if isinstance(expected, dict):
        for key in expected:
            if key not in seen:
                return Difference(_step(where, key), show(expected[key]), "（沒有這一項）")
        for key in seen:
            if key not in expected:
                return Difference(_step(where, key), "（沒有這一項）", show(seen[key]))
        for key in seen:  # in the order the case built its result (the student's evidence is never reordered)
            found = first_difference(expected[key], seen[key], _step(where, key))
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        for index, (want, got) in enumerate(zip(expected, seen, strict=False)):
            found = first_difference(want, got, _step(where, index))
            if found is not None:
                return found
        if len(expected) != len(seen):
            return Difference(f"{where or '結果'} 的長度", str(len(expected)), str(len(seen)))
        return None
    return None if expected == seen else Difference(where, show(expected), show(seen))


def case_difference(expected: dict[str, Any], seen: dict[str, Any]) -> str | None:
    """What is wrong with one case's record (``{"value": ...}`` or ``{"error": ..., "message": ...}``), or None.

    The expected record always holds a value: the release refuses an answer key that fails a public case.
    """
    if "error" in seen:
        message = " ".join(str(seen.get("message", "")).split())[:MESSAGE_SHOWN]
        separator = "" if message.startswith("（") else ": "  # no message, only where it was raised
        return f"執行時出錯：{seen.get('error')}{separator}{message}"
    if "value" not in expected or "value" not in seen:
        return f"結果的格式不對：{show(seen)}"
    found = first_difference(expected["value"], seen["value"])
    return None if found is None else str(found)
