"""What every case needs, hidden or public: the Exercise record, seeded sizes and inputs,
quantizing a model and describing it, and the guarded collection of one exercise's evidence.

An exercise is declared once, in its notebook's public module (``selfcheck/public/m03_4.py``):
``PUBLIC = declare(__name__, Exercise(key, title, names, public_cases, ...), ...)``, the notebook
read from the module's name. The hidden cases module (``autograder/sandboxed/cases/m03_4.py``)
imports that record and extends it: ``EXERCISES = with_hidden_cases(PUBLIC, key={hidden cases}, ...)``,
so the title, the names and the tolerances are the public record's. The checks
(``autograder/checks/test_m03_4.py``) find their notebook from their module's name too
(``notebook_of``).

This module is on the student side (it ships in the wheel): it holds no case and no key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from selfcheck.compare import Tolerance
from selfcheck.evidence import CASE_SECONDS, run_case
from selfcheck.misconceptions import Misconception, by_key

Namespace = Mapping[str, Any]
CaseFn = Callable[[Namespace, int], Any]


@dataclass(frozen=True)
class Exercise:
    """One graded exercise of a notebook.

    ``names`` are the definitions the student writes (taken from the notebook's
    namespace); ``cases`` map a case name to a function ``(namespace, seed) -> data``
    that runs those definitions on one input and returns plain data. ``notebook`` is
    filled in by ``declare`` (from the declaring module's name), so a public module never
    writes it; the hidden record takes it from the public one (``with_hidden_cases``).
    """

    key: str
    title: str
    names: tuple[str, ...]
    cases: Mapping[str, CaseFn]
    case_seconds: int = CASE_SECONDS
    """Time limit of one case; M08-3's cases lower and run a program in ExecuTorch (seconds each)."""
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    """How the preview compares the floats under a dict key of this name (``selfcheck.compare``;
    every other float is compared as ``FLOAT32``)."""
    notebook: str = ""
    """The notebook (``"M03-4"``), set by ``declare``; empty only on an exercise no record holds yet."""
    misconceptions: tuple[Misconception, ...] = ()
    """What a student who gets this exercise wrong probably believed, most likely first
    (``selfcheck.misconceptions``): the feedback names the one a detector recognises."""

    def __post_init__(self) -> None:
        by_key(self.misconceptions)  # a repeated key is a ValueError

    def misconception(self, key: str) -> Misconception:
        """The misconception called ``key``; ``KeyError`` when the exercise has none of that name."""
        return by_key(self.misconceptions)[key]


def module_name(notebook: str) -> str:
    """``"M03-4"`` → ``"m03_4"``."""
    return notebook.lower().replace("-", "_")


_MODULE = re.compile(r"(?:test_)?m(\d{2})_(\d+)")


def notebook_of(module: str) -> str:
    """The notebook of a per-notebook module, the inverse of ``module_name``.

    ``"selfcheck.public.m03_3"``, ``"autograder.sandboxed.cases.m03_3"``,
    ``"autograder.checks.test_m03_3"`` (and ``"m03_3"`` alone) → ``"M03-3"``.
    Raises ``ValueError`` for a name whose last part is not ``mXX_Y`` or ``test_mXX_Y``.
    """
    found = _MODULE.fullmatch(module.rpartition(".")[2])
    if found is None:
        raise ValueError(f"{module!r} is not a notebook's module (its last part should be mXX_Y or test_mXX_Y)")
    return f"M{found[1]}-{found[2]}"


def declare(module: str, *exercises: Exercise) -> dict[str, Exercise]:
    """A notebook's public record: exercise key → ``Exercise``, in the order given.

    ``module`` is the declaring module's ``__name__`` (``selfcheck.public.m03_4``): it names the
    notebook, which ``declare`` writes into every exercise. Raises ``ValueError`` when two exercises
    share a key or an exercise already names another notebook.
    """
    notebook = notebook_of(module)
    record: dict[str, Exercise] = {}
    for exercise in exercises:
        if exercise.key in record:
            raise ValueError(f"{notebook}: two exercises are called {exercise.key!r}")
        if exercise.notebook not in ("", notebook):
            raise ValueError(f"{notebook}: exercise {exercise.key!r} is declared for {exercise.notebook}")
        record[exercise.key] = dataclasses.replace(exercise, notebook=notebook)
    return record


def with_hidden_cases(
    public: Mapping[str, Exercise],
    /,
    *,
    case_seconds: Mapping[str, int] | None = None,
    **hidden: Mapping[str, CaseFn],
) -> dict[str, Exercise]:
    """A notebook's hidden record: its public record (``PUBLIC``) with the hidden cases in place of the public ones.

    ``hidden`` gives, for every key of ``public`` and no other, that exercise's hidden cases
    (``key={"case": fn, ...}``). Everything else is the public record's (notebook, key, title,
    names, tolerances, the order of the exercises), so it is declared once, except
    ``case_seconds``: exercise key → the time limit of one *hidden* case, for an exercise whose
    hidden cases need another limit than its public ones (M07-2's hidden cases run QAT on models of
    their own; M08-3's public case lowers two programs, each hidden case one). An exercise not
    named there keeps its public limit. Raises ``ValueError`` when the keys of ``hidden`` (or of
    ``case_seconds``) are not exactly (within) the public ones.
    """
    seconds = dict(case_seconds or {})
    missing = [key for key in public if key not in hidden]
    extra = [key for key in hidden if key not in public] + [key for key in seconds if key not in public]
    if missing or extra:
        raise ValueError(
            f"the hidden cases must extend exactly the public exercises {list(public)}: "
            f"missing {missing}, not public {extra}"
        )
    return {
        key: dataclasses.replace(
            exercise, cases=dict(hidden[key]), case_seconds=seconds.get(key, exercise.case_seconds)
        )
        for key, exercise in public.items()
    }


class _Sink(io.StringIO):
    """A stream that keeps at most a few kilobytes of what student code prints."""

    LIMIT = 4000

    def write(self, text: str) -> int:
        if self.tell() < self.LIMIT:
            super().write(str(text)[: self.LIMIT])
        return len(text)


_recording = False


def evidence_is_kept() -> bool:
    """False while ``collect`` runs for the record only (``recording=True``: the sandbox writes down the
    student's calls, and the grader's replay derives the evidence again). A case may then skip a step
    that calls no student code and only makes evidence, such as lowering a converted program to
    ExecuTorch: the calls recorded are the same, and the replay does the step."""
    return not _recording


def collect(
    exercise: Exercise,
    namespace: Namespace,
    seed: int,
    *,
    namespace_for_case: Callable[[str], Namespace] | None = None,
    recording: bool = False,
) -> dict[str, Any]:
    """Run every case of ``exercise`` on the student's ``namespace``; never raises.

    Returns ``{"missing": [...]}`` when a name the exercise needs is not defined,
    else ``{"cases": {case: {"value": ...} | {"error": ..., "message": ...}}}``.
    ``namespace_for_case(case)``, when given, supplies the namespace each case sees
    (the grader's recording and replaying namespaces). ``recording``: only the calls matter, the
    evidence is thrown away (``evidence_is_kept``).
    """
    global _recording
    missing = [name for name in exercise.names if name not in namespace]
    if missing:
        return {"missing": missing}
    _recording, before = recording, _recording
    try:
        return _collect(exercise, namespace, seed, namespace_for_case)
    finally:
        _recording = before


def _collect(
    exercise: Exercise, namespace: Namespace, seed: int, namespace_for_case: Callable[[str], Namespace] | None
) -> dict[str, Any]:
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


def seeded_model(seed: int, build: Callable[..., torch.nn.Module], *args: Any) -> torch.nn.Module:
    """``build(*args)`` in eval mode, its weights drawn from ``seed`` (the global RNG is left alone)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build(*args).eval()


def seeded_tokens(seed: int, vocab: int, batch: int, length: int) -> torch.Tensor:
    """``(batch, length)`` random int64 tokens below ``vocab`` from a generator seeded with ``seed``
    (the global RNG is left alone)."""
    return torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


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
