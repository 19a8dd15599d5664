"""The hidden cases of every notebook: one module per notebook, ``EXERCISES`` in each (its public
twin's record with the hidden cases in place of the public ones: ``with_hidden_cases``).

The case helpers themselves are on the student side (``selfcheck.casekit``): hidden
cases differ from public ones only in the models they build, not in how they run.
"""

from __future__ import annotations

import importlib
from typing import Any

from selfcheck.casekit import (
    CaseFn,
    Exercise,
    Namespace,
    collect,
    evidence_is_kept,
    module_name,
    quantize_model,
    seed_size,
    seeded_inputs,
    seeded_model,
    seeded_tokens,
    with_hidden_cases,
)

__all__ = [
    "CaseFn",
    "Exercise",
    "Namespace",
    "cases_module",
    "collect",
    "evidence_is_kept",
    "exercises_of",
    "module_name",
    "quantize_model",
    "seed_size",
    "seeded_inputs",
    "seeded_model",
    "seeded_tokens",
    "with_hidden_cases",
]


def cases_module(notebook: str) -> Any:
    """The hidden cases module of ``notebook`` (``KeyError`` for an unknown notebook)."""
    try:
        return importlib.import_module(f"autograder.sandboxed.cases.{module_name(notebook)}")
    except ModuleNotFoundError:
        raise KeyError(f"no exercises for notebook {notebook!r}") from None


def exercises_of(notebook: str) -> dict[str, Exercise]:
    """The exercises of ``notebook`` (``KeyError`` for an unknown notebook)."""
    return dict(cases_module(notebook).EXERCISES)
