"""What every case needs, hidden or public: the Exercise record, seeded sizes and inputs,
quantizing a model and describing it, and the guarded collection of one exercise's evidence.

This module is on the student side (it ships in the wheel): it holds no case and no key.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from selfcheck.compare import Tolerance
from selfcheck.evidence import CASE_SECONDS, run_case

Namespace = Mapping[str, Any]
CaseFn = Callable[[Namespace, int], Any]


@dataclass(frozen=True)
class Exercise:
    """One graded exercise of a notebook.

    ``names`` are the definitions the student writes (taken from the notebook's
    namespace); ``cases`` map a case name to a function ``(namespace, seed) -> data``
    that runs those definitions on one hidden input and returns plain data.
    """

    notebook: str
    key: str
    title: str
    names: tuple[str, ...]
    cases: Mapping[str, CaseFn]
    case_seconds: int = CASE_SECONDS
    """Time limit of one case; M08-3's cases lower and run a program in ExecuTorch (seconds each)."""
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    """How the preview compares the floats under a dict key of this name (``selfcheck.compare``;
    every other float is compared as ``FLOAT32``)."""


def module_name(notebook: str) -> str:
    """``"M03-4"`` → ``"m03_4"``."""
    return notebook.lower().replace("-", "_")


class _Sink(io.StringIO):
    """A stream that keeps at most a few kilobytes of what student code prints."""

    LIMIT = 4000

    def write(self, text: str) -> int:
        if self.tell() < self.LIMIT:
            super().write(str(text)[: self.LIMIT])
        return len(text)


def collect(
    exercise: Exercise,
    namespace: Namespace,
    seed: int,
    *,
    namespace_for_case: Callable[[str], Namespace] | None = None,
) -> dict[str, Any]:
    """Run every case of ``exercise`` on the student's ``namespace``; never raises.

    Returns ``{"missing": [...]}`` when a name the exercise needs is not defined,
    else ``{"cases": {case: {"value": ...} | {"error": ..., "message": ...}}}``.
    ``namespace_for_case(case)``, when given, supplies the namespace each case sees
    (the grader's recording and replaying namespaces).
    """
    missing = [name for name in exercise.names if name not in namespace]
    if missing:
        return {"missing": missing}
    cases: dict[str, Any] = {}
    sink = _Sink()
    from common.export_cache import remembered_exports
    from common.pt2e import quiet

    for name, fn in exercise.cases.items():
        with contextlib.ExitStack() as stack:
            stack.enter_context(remembered_exports())  # the same model on the same seed is traced once
            stack.enter_context(contextlib.redirect_stdout(sink))
            stack.enter_context(contextlib.redirect_stderr(sink))
            stack.enter_context(warnings.catch_warnings())
            stack.enter_context(torch.random.fork_rng())
            quiet()
            warnings.simplefilter("ignore")
            torch.manual_seed(seed)
            case_namespace = namespace_for_case(name) if namespace_for_case else namespace
            cases[name] = run_case(lambda fn=fn, ns=case_namespace: fn(ns, seed), exercise.case_seconds)
    return {"cases": cases}


def seed_size(seed: int, low: int, high: int) -> int:
    """A size in [low, high] that changes with the seed, so hidden models differ from run to run."""
    return low + seed % (high - low + 1)


def seeded_inputs(seed: int, *shapes: tuple[int, ...], scales: tuple[float, ...] = ()) -> tuple[torch.Tensor, ...]:
    """Random inputs from a generator seeded with ``seed`` (the global RNG is left alone)."""
    generator = torch.Generator().manual_seed(seed)
    factors = scales or (1.0,) * len(shapes)
    return tuple(
        torch.randn(*shape, generator=generator) * factor for shape, factor in zip(shapes, factors, strict=True)
    )


def quantize_model(
    quantizer: Any,
    model: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    seed: int,
    calibrate: int = 4,
    convert: bool = True,
) -> dict[str, Any]:
    """Export ``model``, prepare it with ``quantizer``, calibrate, convert; describe each stage.

    Returns ``{"prepared": describe_prepared(...), "converted": describe_converted(...)}``
    (``converted`` only when ``convert``). The calibration batches come from ``seed``.
    """
    import copy

    from common.pt2e import convert_pt2e, export_module, prepare_pt2e
    from selfcheck.evidence import describe_converted, describe_prepared

    gm = export_module(model.eval(), inputs)
    prepared = prepare_pt2e(gm, quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    result: dict[str, Any] = {"prepared": describe_prepared(prepared)}
    if convert:
        result["converted"] = describe_converted(convert_pt2e(copy.deepcopy(prepared)))
    return result
