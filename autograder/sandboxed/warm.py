"""Warming the fork server's export cache for one grading run (no student code runs here).

Recording a job's hidden cases is mostly ``torch.export`` of the hidden models, and every job
of a run builds the same models from the same seed. Before the first job, the fork server runs
each case of the run's notebooks once with *stand-ins* in place of the student's definitions,
inside ``common.export_cache.remembered_exports`` (``selfcheck.casekit.collect``): every export
a case makes before it fails on a stand-in is remembered, and every job forked afterwards finds
those graphs in its copy of the cache (``export_cache`` hands out deep copies, so a job that
edits one edits its own).

A stand-in answers nothing: called, it hands back the first GraphModule it was given (or an
instance that annotates nothing); an instance's methods do the same. Where a case checks the
type of an answer before it builds its next model, the cases module gives a stand-in of the
right type and no content (``STANDINS``). A case that still stops early only leaves its later
exports to each job, as before.
The server runs only the course's own case code and these stand-ins: no answer key, no
submission.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

import torch
from torch.fx import GraphModule

WARM_CASE_SECONDS = 10
"""Time given to one case here: a case that lowers a program (M08) is cut short, not waited for."""


def _first_graph(args: Iterable[Any]) -> GraphModule | None:
    return next((a for a in args if isinstance(a, GraphModule)), None)


def _standin_class() -> type:
    from torchao.quantization.pt2e.quantizer import Quantizer

    class StandIn(Quantizer):
        """Stands for any class or instance the student defines: annotates nothing, returns the graph."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__()

        def transform_for_annotation(self, model: GraphModule) -> GraphModule:
            return model

        def annotate(self, model: GraphModule) -> GraphModule:
            return model

        def validate(self, model: GraphModule) -> None:
            return None

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return lambda *args, **kwargs: _first_graph(args)

    return StandIn


def standins(names: Iterable[str]) -> dict[str, Any]:
    """A namespace where every name is a stand-in: a call returns its first GraphModule argument,
    or else a Quantizer instance that annotates nothing."""
    instance = _standin_class()

    def standin(*args: Any, **kwargs: Any) -> Any:
        graph = _first_graph(args)
        return graph if graph is not None else instance()

    return dict.fromkeys(names, standin)


def standins_of(notebook: str, names: Iterable[str]) -> dict[str, Any]:
    """Stand-ins for ``names``: the notebook's own (``STANDINS`` of its cases module), else generic."""
    from autograder.sandboxed.cases.base import cases_module

    own = getattr(cases_module(notebook), "STANDINS", {})
    return {**standins(names), **{name: own[name] for name in names if name in own}}


def warm_exports(notebooks: Iterable[str], seed: int) -> dict[str, Any]:
    """Run every case of ``notebooks`` on ``seed`` with stand-ins; what the cache now holds.

    Runs on one intra-op thread (as a job does) and puts the thread count back after: a thread
    pool started here would be inherited broken by every forked job.
    """
    from autograder.sandboxed.cases.base import collect, exercises_of
    from common import export_cache

    start = time.monotonic()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    warmed: list[str] = []
    try:
        for notebook in notebooks:
            try:
                exercises = exercises_of(notebook)
            except KeyError:
                continue
            for exercise in exercises.values():
                quick = dataclasses.replace(exercise, case_seconds=min(exercise.case_seconds, WARM_CASE_SECONDS))
                collect(quick, standins_of(notebook, exercise.names), seed)
            warmed.append(notebook)
    finally:
        torch.set_num_threads(threads)
    return {"notebooks": warmed, "graphs": export_cache.size(), "seconds": round(time.monotonic() - start, 2)}
