"""The course holds on every CPU: the answer key passes its previews under every instruction-set
profile this machine offers, and the tolerances that make that true still catch every mistake the
previews caught with exact floats.

The notebooks themselves run under another profile in ``test_notebooks`` (the ones that train or
measure) and ``test_unanswered`` (every release notebook).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
from typing import Any

import pytest
from conftest import FIXTURES, wrong_solutions

from autograder.maintenance import isa
from selfcheck.compare import Tolerance, first_difference
from selfcheck.preview import ChecksFailed, expected_evidence, public_exercises

preview_module = importlib.import_module("selfcheck.preview")  # `selfcheck.preview` is also the function

PROFILES = isa.available()


@pytest.mark.parametrize("profile", PROFILES)
def test_key_and_correct_fixtures_pass_every_preview(profile: str) -> None:
    failures = isa.previews_under(profile, FIXTURES / "right")
    assert not failures, f"under the {profile} profile, correct answers fail their previews: {failures}"


def test_this_machine_offers_at_least_two_profiles() -> None:
    assert PROFILES[0] == isa.NATIVE and "default" in PROFILES and len(PROFILES) >= 2


def _has_float(value: Any) -> bool:
    if type(value) is float or (type(value) is str and value in ("inf", "-inf", "nan")):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def _with_floats() -> list[Any]:
    """The wrong fixtures of exercises whose expected evidence holds a float: the only ones a
    tolerance can let through (everything else is compared exactly, as before)."""
    found = []
    for wrong in wrong_solutions():
        shipped = expected_evidence(wrong.notebook)["exercises"].get(wrong.exercise, {})
        if _has_float(shipped):
            found.append(wrong)
    return found


EXACT = Tolerance(rel=1e-5, absolute=1e-9, why="the previews' comparison before tolerances fit to CPUs")


def _public_evidence(notebook: str, exercise: str, namespace: dict[str, Any]) -> dict[str, Any]:
    from selfcheck.casekit import collect
    from selfcheck.preview import PREVIEW_SEED

    with contextlib.redirect_stdout(io.StringIO()):
        return collect(public_exercises(notebook)[exercise], namespace, PREVIEW_SEED)


@functools.cache
def _key_cases(notebook: str, exercise: str) -> dict[str, Any]:
    """The answer key's public records on this machine (its floats may differ from the shipped ones)."""
    return _public_evidence(notebook, exercise, dict(isa.key_namespaces()[(notebook, exercise)]))["cases"]


@pytest.mark.parametrize("wrong", _with_floats(), ids=lambda w: w.id)
def test_tolerances_still_catch_what_exact_floats_caught(wrong: Any) -> None:
    """Where a wrong solution's record differs from the key's on this machine by more than rounding, the preview
    (the shipped values, compared with the exercise's tolerances) still sees it. A case where the wrong
    solution computes what the key computes is no catch: on a CPU whose floats differ from the shipped ones, an
    exact comparison would flag it for the key as well."""
    spec = public_exercises(wrong.notebook)[wrong.exercise]
    namespace: dict[str, Any] = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    evidence = _public_evidence(wrong.notebook, wrong.exercise, namespace)
    if "missing" in evidence:
        pytest.fail(f"{wrong.id} does not define {evidence['missing']}")
    expected = expected_evidence(wrong.notebook)["exercises"][wrong.exercise]["cases"]
    key = _key_cases(wrong.notebook, wrong.exercise)
    exact, fitted = [], []
    for case, record in evidence["cases"].items():
        if "error" in record:
            exact.append(case)
            fitted.append(case)
            continue
        if first_difference(key[case].get("value"), record["value"], tolerance=EXACT) is not None:
            exact.append(case)
        if first_difference(expected[case]["value"], record["value"], tolerances=spec.tolerances) is not None:
            fitted.append(case)
    assert fitted or not exact, f"{wrong.id}: the preview caught it with exact floats (in {exact}), not any more"


def test_the_previews_can_still_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    from selfcheck.preview import public_problems

    notebook, exercise = "M06-2", "worst_layer"
    key = isa.key_namespaces()[(notebook, exercise)]
    shipped = json.loads(json.dumps(expected_evidence(notebook)))
    case = next(iter(shipped["exercises"][exercise]["cases"]))
    drops = shipped["exercises"][exercise]["cases"][case]["value"]["drops"]
    layer = next(iter(drops))
    drops[layer] += 0.5  # half a dB: more than another CPU moves it
    monkeypatch.setattr(preview_module, "expected_evidence", lambda nb: shipped)
    with contextlib.redirect_stdout(io.StringIO()):
        problems = public_problems(notebook, exercise, key)
    assert problems[case] is not None and layer in problems[case]
    with pytest.raises(ChecksFailed):
        public_problems(notebook, exercise, {})


def test_each_module_meets_every_capped_profile_across_the_three_notebook_runs() -> None:
    from autograder.course import modules

    capped = [p for p in PROFILES if p != isa.NATIVE]
    for module in modules():
        turns = [isa.rotation(module, turn) for turn in range(3)]
        assert isa.NATIVE not in turns
        assert set(turns) == set(capped) if len(capped) <= 3 else len(set(turns)) == 3, (module, turns)
