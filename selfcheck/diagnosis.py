"""Reading an exercise's evidence to recognise a misconception (``selfcheck.misconceptions``).

A detector is called with ``(seen, expected)``, the student's and the answer key's evidence of one
exercise: ``{"cases": {case: {"value": …} | {"error": …, "message": …}}}`` (or ``{"missing": …}``).
The readers here never raise on evidence of an unexpected shape: a submission chose it. They serve
the public detectors the preview runs (this package ships) and the hidden ones beside the checks.

``public_causes`` is the preview's diagnosis: the misconceptions whose public detector recognises the
student's public evidence, most likely first (the order of the exercise's record), a second one only when it
explains a failing case the first does not (``independent``, the rule the grader's causes follow too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from selfcheck.misconceptions import Detector, Misconception

Path = tuple[Any, ...]


def cases(evidence: Any) -> dict[str, Any]:
    """The case records of an exercise's evidence (empty when it has none)."""
    if isinstance(evidence, dict) and isinstance(evidence.get("cases"), dict):
        return evidence["cases"]
    return {}


def refusal(evidence: Any) -> str:
    """Why the grader refused to replay the student's recording (a Python function or an unknown module on the
    graph), '' when it did not: the whole exercise's evidence is then this sentence, with no cases."""
    if isinstance(evidence, dict) and isinstance(evidence.get("refused"), str):
        return evidence["refused"]
    return ""


def value(evidence: Any, case: str, *path: Any) -> Any:
    """What ``case`` returned, or the item at ``path`` inside it; None when the case raised or the item is absent."""
    record = cases(evidence).get(case)
    if not isinstance(record, dict) or "value" not in record:
        return None
    return at(record["value"], *path)


def at(data: Any, *path: Any) -> Any:
    """``data[path[0]][path[1]]…``, None as soon as a step is absent."""
    for step in path:
        if isinstance(data, dict) and isinstance(step, str):
            data = data.get(step)
        elif isinstance(data, list) and isinstance(step, int) and -len(data) <= step < len(data):
            data = data[step]
        else:
            return None
    return data


def error(evidence: Any, case: str) -> str | None:
    """The name of the exception ``case`` raised (``"IndexError"``), None when it returned."""
    record = cases(evidence).get(case)
    if isinstance(record, dict) and "error" in record:
        return str(record.get("error"))
    return None


def errors(evidence: Any) -> dict[str, str]:
    """Case → the exception it raised, for every case that raised."""
    return {case: str(r.get("error")) for case, r in cases(evidence).items() if isinstance(r, dict) and "error" in r}


def error_message(evidence: Any, case: str) -> str:
    """The message of what ``case`` raised ('' when it returned)."""
    record = cases(evidence).get(case)
    return str(record.get("message", "")) if isinstance(record, dict) and "error" in record else ""


def case_pairs(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(case, got, want)`` for every case where both the student and the key returned a dict."""
    out = []
    for case in cases(expected):
        got, want = value(seen, case), value(expected, case)
        if isinstance(got, dict) and isinstance(want, dict):
            out.append((case, got, want))
    return out


def walk(data: Any, key: str, path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every dict inside ``data`` that holds ``key``, with its path, outermost first."""
    if isinstance(data, dict):
        if key in data:
            yield path, data
        for name, item in data.items():
            yield from walk(item, key, (*path, name))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from walk(item, key, (*path, index))


def aligned(seen: Any, expected: Any, key: str) -> Iterator[tuple[Path, dict[str, Any], dict[str, Any]]]:
    """The dicts holding ``key`` at the same place in the expected and the seen evidence: ``(path, got, want)``.

    Places are found in the expected evidence (inside each case's value); a place the student's evidence
    does not have is skipped.
    """
    for case, record in cases(expected).items():
        if not isinstance(record, dict) or "value" not in record:
            continue
        for path, want in walk(record["value"], key):
            got = value(seen, case, *path)
            if isinstance(got, dict) and key in got:
                yield (case, *path), got, want


def any_aligned(seen: Any, expected: Any, key: str, test: Callable[[dict[str, Any], dict[str, Any]], bool]) -> bool:
    """True when ``test(got, want)`` holds at some place of ``aligned(seen, expected, key)``."""
    return any(_holds(test, got, want) for _, got, want in aligned(seen, expected, key))


def _holds(test: Callable[..., Any], *args: Any) -> bool:
    try:
        return bool(test(*args))
    except Exception:  # evidence of a shape the detector did not expect: it does not recognise it
        return False


def recognises(detector: Detector, seen: Any, expected: Any) -> bool:
    """``detector(seen, expected)`` as a bool; False when it raises (a submission chose the evidence's shape)."""
    return _holds(detector, seen, expected)


SHOWN_CAUSES = 2
"""At most this many causes are named, in the notebook and in the feedback: the most likely, and a second one only
when it explains a failure the first does not (``independent``)."""

T = TypeVar("T")


def independent(found: Sequence[T], failed: Iterable[str], covers: Callable[[T, str], bool]) -> list[T]:
    """The first of ``found`` (ranked, most likely first), then each next one that explains a ``failed`` check or case
    none before it explains, at most ``SHOWN_CAUSES``. The grader ranks hidden causes over failed checks with it
    (``autograder.engine.diagnose``), the notebook public causes over failed public cases (``public_causes``): a
    second guess whose failures the first already explains is not shown, two independent mistakes are two causes."""
    failed = list(failed)
    shown: list[T] = []
    for item in found:
        if len(shown) == SHOWN_CAUSES:
            break
        if not shown or any(covers(item, t) and not any(covers(s, t) for s in shown) for t in failed):
            shown.append(item)
    return shown


def only_case(seen: Any, expected: Any, case: str) -> Any:
    """``seen`` with every public case but ``case`` replaced by the expected one: the student's answer as if it
    went wrong in ``case`` alone."""
    return {**seen, "cases": {**cases(expected), case: cases(seen).get(case)}}


def public_causes(
    misconceptions: tuple[Misconception, ...], seen: Any, expected: Any, failing: Iterable[str] | None = None
) -> list[Misconception]:
    """The misconceptions whose public detector recognises ``seen``, most likely first (the record's order), ranked
    as the grader ranks its causes (``independent``): a second one is named only when it explains a failing public
    case the first does not. A detector explains a case when it still recognises the answer with that case alone
    gone wrong (``only_case``); one that needs several cases together explains all of them.

    ``failing``: the public cases that failed (by default, those whose evidence differs from the expected)."""
    found = [m for m in misconceptions if m.public is not None and recognises(m.public, seen, expected)]
    if len(found) < 2:
        return found
    names = list(failing) if failing is not None else [c for c, r in cases(seen).items() if r != cases(expected).get(c)]
    alone = {m.key: {c for c in names if recognises(m.public, only_case(seen, expected, c), expected)} for m in found}
    covered = {key: cases_ or set(names) for key, cases_ in alone.items()}
    return independent(found, names, lambda m, case: case in covered[m.key])
