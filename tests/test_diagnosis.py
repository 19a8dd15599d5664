"""Naming the cause: the ranking of misconceptions, the words a student reads, and detectors that never guess.

``autograder.engine.diagnose`` asks an exercise's detectors when a check fails and orders what they
recognise by the exercise's record; the reports state the first cause once and list the checks it
explains. A detector must not take a crash, a missing answer or evidence of a strange shape for a
misconception: those get no named cause (a wrong cause teaches the wrong lesson).
"""

from __future__ import annotations

import pytest

from autograder.checks.support import detectors_of
from autograder.course import notebook_id, source_notebooks
from autograder.engine.diagnose import attach_causes
from autograder.reports.report import exercise_report
from selfcheck.diagnosis import public_causes, recognises
from selfcheck.misconceptions import Section, cause_lines, section_url, site_url, where_to_read
from selfcheck.preview import expected_evidence, public_exercises

NOTEBOOKS = [notebook_id(path) for path in source_notebooks()]


def _verdict(test: str, passed: bool, exercise: str = "add_quantizer") -> dict:
    return {
        "id": f"M03-4:{exercise}:{test}",
        "notebook": "M03-4",
        "exercise": exercise,
        "name": f"檢查 {test}",
        "points": 1.0,
        "score": 1.0 if passed else 0.0,
        "passed": passed,
        "message": "" if passed else f"{test} 的症狀",
    }


def test_the_first_cause_is_the_records_first_and_the_checks_it_explains_are_not_repeated(monkeypatch) -> None:
    from autograder.checks import support
    from autograder.engine import diagnose

    infos = [
        support.DetectorInfo("M03-4", "add_quantizer", "output_not_shared", lambda s, e: True, ("test_a",)),
        support.DetectorInfo("M03-4", "add_quantizer", "no_shared_spec", lambda s, e: True, ("test_a", "test_b")),
        support.DetectorInfo("M03-4", "add_quantizer", "other_observer", lambda s, e: True, ("test_z",)),
    ]
    monkeypatch.setattr(diagnose, "detectors_of", lambda notebook: {"add_quantizer": infos})
    verdicts = [_verdict("test_a", False), _verdict("test_b", False), _verdict("test_c", False), _verdict("d", True)]
    attach_causes("M03-4", "add_quantizer", {"cases": {}}, {"cases": {}}, verdicts)
    # the record lists no_shared_spec before output_not_shared; other_observer explains no failed check;
    # output_not_shared explains only test_a, which no_shared_spec already explains: no second guess
    assert verdicts[0]["causes"] == ["no_shared_spec"]
    assert [v["explained_by"] for v in verdicts] == ["no_shared_spec", "no_shared_spec", None, None]
    report = exercise_report("AddQuantizer：add 的輸入與輸出共用 qparams", verdicts)
    assert report.count("可能的原因：share=True 卻沒有用 SharedQuantizationSpec") == 1
    assert "也可能是" not in report
    assert "test_a 的症狀" not in report and "test_b 的症狀" not in report, "explained checks are only listed"
    assert "test_c 的症狀" in report, "a failure no cause explains keeps its message"


def test_a_second_cause_is_shown_when_it_explains_a_failed_check_the_first_does_not(monkeypatch) -> None:
    """Two independent mistakes: each cause with its own checks."""
    from autograder.checks import support
    from autograder.engine import diagnose

    infos = [
        support.DetectorInfo("M03-4", "add_quantizer", "output_not_shared", lambda s, e: True, ("test_a",)),
        support.DetectorInfo("M03-4", "add_quantizer", "no_shared_spec", lambda s, e: True, ("test_b",)),
        support.DetectorInfo("M03-4", "add_quantizer", "other_observer", lambda s, e: True, ("test_c",)),
    ]
    monkeypatch.setattr(diagnose, "detectors_of", lambda notebook: {"add_quantizer": infos})
    verdicts = [_verdict("test_a", False), _verdict("test_b", False), _verdict("test_c", False)]
    attach_causes("M03-4", "add_quantizer", {"cases": {}}, {"cases": {}}, verdicts)
    assert verdicts[0]["causes"] == ["no_shared_spec", "output_not_shared"]  # at most two, the record's order
    assert [v["explained_by"] for v in verdicts] == ["output_not_shared", "no_shared_spec", None]
    report = exercise_report("AddQuantizer：add 的輸入與輸出共用 qparams", verdicts)
    assert report.count("也可能是：輸入共用了，輸出沒有共用") == 1


def test_no_cause_is_named_when_every_check_passes_or_the_answer_is_missing(monkeypatch) -> None:
    from autograder.checks import support
    from autograder.engine import diagnose

    always = [support.DetectorInfo("M03-4", "add_quantizer", "no_shared_spec", lambda s, e: True, ())]
    monkeypatch.setattr(diagnose, "detectors_of", lambda notebook: {"add_quantizer": always})
    passed = [_verdict("test_a", True)]
    attach_causes("M03-4", "add_quantizer", {"cases": {}}, {"cases": {}}, passed)
    assert passed[0]["causes"] == []
    missing = [_verdict("test_a", False)]
    attach_causes("M03-4", "add_quantizer", {"missing": ["AddQuantizer"]}, {"cases": {}}, missing)
    assert missing[0]["causes"] == [] and missing[0]["explained_by"] is None


def test_a_detector_that_raises_recognises_nothing() -> None:
    def broken(seen: object, expected: object) -> bool:
        raise KeyError("shape")

    assert recognises(broken, {"cases": {}}, {"cases": {}}) is False


def _odd_evidence(exercise_cases: list[str]) -> dict[str, dict]:
    """Evidence a detector must not take for a misconception: crashes of no particular kind, junk values."""
    return {
        "a crash": {"cases": {c: {"error": "RuntimeError", "message": "boom"} for c in exercise_cases}},
        "a timeout": {"cases": {c: {"error": "Timeout", "message": "超過 20 秒沒有結束"} for c in exercise_cases}},
        "junk values": {"cases": {c: {"value": 3} for c in exercise_cases}},
        "empty values": {"cases": {c: {"value": {}} for c in exercise_cases}},
        "no cases": {"cases": {}},
    }


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_no_detector_takes_a_crash_or_junk_for_a_misconception(notebook: str) -> None:
    from autograder.sandboxed.cases.base import exercises_of

    hidden = exercises_of(notebook)
    for exercise, infos in detectors_of(notebook).items():
        cases = list(hidden[exercise].cases)
        expected = {"cases": {c: {"value": {}} for c in cases}}  # shape only: the detectors must not need more
        for what, seen in _odd_evidence(cases).items():
            fired = [info.key for info in infos if recognises(info.fn, seen, expected)]
            assert not fired, f"{notebook} {exercise}: {what} taken for {fired}"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_public_detectors_recognise_a_mistake_not_the_key_a_crash_or_junk(notebook: str) -> None:
    shipped = expected_evidence(notebook)["exercises"]
    for key, exercise in public_exercises(notebook).items():
        expected = shipped[key]
        assert not [m.key for m in public_causes(exercise.misconceptions, expected, expected)], (
            f"{notebook} {key}: a public detector recognises the answer key's own evidence"
        )
        for what, seen in _odd_evidence(list(exercise.cases)).items():
            fired = [m.key for m in public_causes(exercise.misconceptions, seen, expected)]
            assert not fired, f"{notebook} {key}: {what} taken for {fired}"


def test_a_section_link_is_the_site_address_the_chapter_and_an_anchor_from_the_heading() -> None:
    section = Section("A. 顯式共用：SharedQuantizationSpec")
    assert section.anchor.startswith("a-sharedquantizationspec-") and len(section.anchor.split("-")[-1]) == 6
    assert Section("A. 顯式共用：SharedQuantizationSpec").anchor == section.anchor, "derived, so records agree"
    url = section_url("M03-4", section)
    assert url == f"{site_url()}M03/M03-4.html#m03-4-{section.anchor}"
    assert where_to_read("M03-4", Section("`BasicAddQuantizer` 的假設在哪裡不成立")) == (
        "M03-4 的「BasicAddQuantizer 的假設在哪裡不成立」"
    )
    other = Section("C. 邊標籤與輸出標籤", notebook="M03-1")
    assert str(section_url("M03-4", other)).startswith(f"{site_url()}M03/M03-1.html#m03-1-")
    with pytest.raises(ValueError):
        Section("## A. 標題")


def test_the_words_of_a_cause_are_the_same_in_the_notebook_and_in_the_feedback() -> None:
    exercise = public_exercises("M03-4")["add_quantizer"]
    misconception = exercise.misconception("no_shared_spec")
    lines = cause_lines("M03-4", misconception)
    assert lines[0] == f"可能的原因：{misconception.name}" and lines[1] == misconception.text
    assert lines[2].startswith("重讀 M03-4 的「A. 顯式共用：SharedQuantizationSpec」：https://")
    verdicts = [_verdict("test_add_shared_residual", False)]
    verdicts[0].update(causes=["no_shared_spec"], explained_by="no_shared_spec")
    report = exercise_report(exercise.title, verdicts)
    assert all(line in report for line in lines)


def test_the_notebook_names_a_second_cause_only_for_a_failure_the_first_does_not_explain() -> None:
    """``public_causes`` ranks as the grader ranks (``selfcheck.diagnosis.independent``): the record's order, and a
    second cause only when it explains a failing public case the first does not explain."""
    from selfcheck.misconceptions import Misconception

    expected = {"cases": {"a": {"value": 1}, "b": {"value": 2}, "c": {"value": 3}}}

    def wrong_in(*names: str):
        return lambda seen, expected: any(seen["cases"][n] != expected["cases"][n] for n in names)

    def both_wrong(seen, expected):  # needs a and b wrong together: explains both
        return all(seen["cases"][n] != expected["cases"][n] for n in "ab")

    section = Section("A")
    first = Misconception("first", "第一個", "…", section, public=wrong_in("a"))
    same = Misconception("same", "同一處", "…", section, public=wrong_in("a"))
    other = Misconception("other", "另一處", "…", section, public=wrong_in("b"))
    together = Misconception("together", "一起錯", "…", section, public=both_wrong)
    only_a = {"cases": {**expected["cases"], "a": {"value": 0}}}
    a_and_b = {"cases": {**expected["cases"], "a": {"value": 0}, "b": {"value": 0}}}

    def keys(found):
        return [m.key for m in found]

    assert keys(public_causes((first, same), only_a, expected)) == ["first"], "a second guess the first explains"
    assert keys(public_causes((first, other), a_and_b, expected, ["a", "b"])) == ["first", "other"], "two mistakes"
    assert keys(public_causes((first, other), only_a, expected)) == ["first"], "other does not recognise it"
    assert keys(public_causes((together, first), a_and_b, expected)) == ["together"], "one that explains both cases"
    assert keys(public_causes((first, together), a_and_b, expected)) == ["first", "together"]
