"""The expected evidence of an exercise: the answer key run through the same collection."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from autograder.untrusted.cases.base import collect, exercises_of, module_name


@cache
def reference_evidence(notebook: str, exercise: str, seed: int) -> dict[str, Any]:
    """Evidence of the reference solution of ``exercise`` on the hidden cases of ``seed``."""
    answers = importlib.import_module(f"autograder.keys.{module_name(notebook)}")
    return collect(exercises_of(notebook)[exercise], vars(answers), seed)
