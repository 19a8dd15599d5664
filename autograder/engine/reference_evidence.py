"""The expected evidence of an exercise: the answer key, recorded and replayed like a student."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from autograder.sandboxed.cases.base import exercises_of, module_name
from autograder.sandboxed.replay import record_and_derive


@cache
def reference_evidence(notebook: str, exercise: str, seed: int) -> dict[str, Any]:
    """Evidence of the answer key of ``exercise`` on the hidden cases of ``seed``.

    The key goes through the same recording and replay as a submission, so a student
    whose answers equal the key's gets exactly the key's evidence.
    """
    import common.pt2e  # noqa: F401  (torchao imported here first, without its import-time noise in the grader's log)

    answers = importlib.import_module(f"autograder.keys.{module_name(notebook)}")
    return record_and_derive(exercises_of(notebook)[exercise], vars(answers), seed)
