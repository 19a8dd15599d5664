"""pytest plugin that feeds evidence to the hidden checks and records their verdicts.

Loaded explicitly (``-p autograder.integrations.pytest_plugin``; ``autograder.engine.judge`` and
``tests/conftest.py`` do): the package students install has no pytest entry point.
``pytest -p autograder.integrations.pytest_plugin --pyargs autograder.checks`` judges the answer key. Options:

``--evidence FILE``  the student's evidence (JSON: notebook, seed, exercises); without it
                     the checks judge the answer key against itself.
``--verdicts FILE``  where to write the verdict of every check (JSON list).
``--exercises A,B``  judge only these exercises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autograder.checks.support import CheckInfo


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pt2e-course")
    group.addoption("--evidence", default=None, help="student evidence JSON to judge")
    group.addoption("--verdicts", default=None, help="write each check's verdict here (JSON)")
    group.addoption("--exercises", default=None, help="judge only these exercises (comma-separated keys)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--exercises")
    if not wanted:
        return
    keys = set(wanted.split(","))
    keep, drop = [], []
    for item in items:
        info = getattr(getattr(item, "function", None), "check_info", None)
        (keep if info is None or info.exercise in keys else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pt2e_check(info): a graded hidden check of the PT2E course")
    config.stash[_STATE] = _State(config.getoption("--evidence"))


class _State:
    def __init__(self, evidence_path: str | None) -> None:
        self.evidence: dict[str, Any] | None = None
        if evidence_path:
            self.evidence = json.loads(Path(evidence_path).read_text(encoding="utf-8"))
        self.verdicts: list[dict[str, Any]] = []

    @property
    def seed(self) -> int:
        if self.evidence is None:
            return 0
        seed = self.evidence.get("seed", 0)
        return seed if type(seed) is int else 0


_STATE = pytest.StashKey[_State]()


def _info(request: pytest.FixtureRequest) -> CheckInfo:
    info = getattr(request.function, "check_info", None)
    if info is None:
        raise pytest.UsageError("the fixtures seen / expected are for @check tests only")
    return info


@pytest.fixture
def expected(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The answer key's evidence for this check's exercise (computed here, cached per seed)."""
    from autograder.engine.reference_evidence import reference_evidence

    info = _info(request)
    return reference_evidence(info.notebook, info.exercise, request.config.stash[_STATE].seed)


@pytest.fixture
def seen(request: pytest.FixtureRequest, expected: dict[str, Any]) -> Any:
    """The student's evidence for this check's exercise (the answer key's without --evidence)."""
    from autograder.engine.judge import seen_evidence

    state = request.config.stash[_STATE]
    if state.evidence is None:
        return expected
    info = _info(request)
    return seen_evidence(state.evidence, info.notebook, info.exercise)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    info = getattr(getattr(item, "function", None), "check_info", None)
    if info is None:
        return
    state = item.config.stash[_STATE]
    if call.when == "call" or (call.when == "setup" and report.failed):
        from autograder.engine.judge import verdict_message

        message = verdict_message(call.excinfo.value if call.excinfo is not None else None)
        state.verdicts.append(
            {
                "id": info.id,
                "notebook": info.notebook,
                "exercise": info.exercise,
                "name": info.name,
                "points": info.points,
                "score": info.points if report.passed else 0.0,
                "passed": bool(report.passed),
                "message": message,
            }
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--verdicts")
    if path:
        verdicts = session.config.stash[_STATE].verdicts
        Path(path).write_text(json.dumps(verdicts, ensure_ascii=False, indent=1), encoding="utf-8")
