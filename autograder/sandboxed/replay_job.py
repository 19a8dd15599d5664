"""The replay worker: one submission's recordings turned into evidence, in a confined process.

A recording is data a student controlled. Replaying it runs the course's own cases on the
grader's own hidden models, and rebuilds what the student did to them (``replay.py``): only
allow-listed ops and observers, within budgets (``allowed.py``). That is still work a hostile
recording chooses, so it does not happen in the grader: the fork server forks a worker for it,
confined exactly like a student's job (its own user, namespaces, no network, a read-only file
system but a private ``/tmp``, a time limit and one memory limit for all its processes), with
nothing left over from another submission (a fresh fork every time). The worker holds no
answer key and no check; it sends back evidence, which the grader judges as plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autograder.sandboxed import protocol
from autograder.sandboxed.limits import Limits

STARTUP_SECONDS = 20
"""Added to the cases' own time limits: importing what the first replay needs, on a busy machine."""


def notebook_seconds(limits: Limits) -> int:
    """How long the replays of one notebook may take together: the notebook's own time limit (its cells
    recorded every answer within it) and one start."""
    return limits.notebook_seconds + STARTUP_SECONDS


@dataclass(frozen=True)
class ReplayJob:
    """Derive the evidence of ``recorded`` (exercise → its recording) for ``notebook`` on ``seed``."""

    notebook: str
    seed: int
    recorded: dict[str, Any]
    limits: Limits
    budget: int | None = None
    """Seconds left of the notebook's replay time (``notebook_seconds``), shared by every worker it takes
    (``grading.derive_evidence``); ``None``: all of it."""

    @property
    def seconds(self) -> int:
        """The worker's time limit: every case of every exercise at its own limit, and the start, within
        the notebook's replay time left."""
        from autograder.sandboxed.cases.base import exercises_of

        exercises = exercises_of(self.notebook)
        total = sum(
            exercises[name].case_seconds * max(len(exercises[name].cases), 1)
            for name in self.recorded
            if name in exercises
        )
        left = notebook_seconds(self.limits) if self.budget is None else self.budget
        return max(1, min(total + STARTUP_SECONDS, left))

    def wire(self) -> dict[str, Any]:
        return {
            "notebook": self.notebook,
            "seed": self.seed,
            "recorded": self.recorded,
            "limits": vars(self.limits),
            "budget": self.budget,
        }

    @staticmethod
    def from_wire(data: dict[str, Any]) -> ReplayJob:
        budget = data.get("budget")
        return ReplayJob(
            str(data["notebook"]),
            int(data["seed"]),
            dict(data["recorded"]),
            Limits(**data["limits"]),
            budget if type(budget) is int else None,
        )


def torch_state() -> dict[str, Any]:
    """The global torch settings a replay starts from: the same for every submission (a fresh fork)."""
    import torch

    return {
        "grad": torch.is_grad_enabled(),
        "autocast": torch.is_autocast_enabled("cpu"),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "threads": torch.get_num_threads(),
        "rng": int(torch.random.initial_seed()),
    }


def run(job: ReplayJob, fd: int, unconfined: list[str]) -> None:
    """Derive each exercise's evidence in the order of the notebook; one ``derived`` message each."""
    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.replay import derive
    from autograder.sandboxed.runner import Reporter
    from selfcheck.evidence import safe_text

    reporter = Reporter(fd)
    reporter.send(protocol.message(protocol.START, unconfined=unconfined, state=torch_state()))
    exercises = exercises_of(job.notebook)
    for name in [e for e in exercises if e in job.recorded]:
        try:
            evidence = derive(exercises[name], job.recorded[name], job.seed)
            message = protocol.message(protocol.DERIVED, exercise=name, evidence=evidence)
        except Exception as exc:  # a recording that does not fit: this exercise's error, not the worker's end
            message = protocol.message(protocol.DERIVED, exercise=name, error=safe_text(exc, 300))
        if not reporter.send(message):
            reporter.send(protocol.message(protocol.DERIVED, exercise=name, error="評分證據太大"))
    reporter.send(protocol.message(protocol.DONE, count=len(job.recorded)))
