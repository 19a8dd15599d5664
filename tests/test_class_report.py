"""The class report (``pt2e-course report``): its statistics, its exports, and the page an instructor opens.

The statistics are checked on small classes whose answers are known by hand; the page on a synthetic
class of 240 students (``autograder.maintenance.synthetic_class``), opened in Chromium. The sample class's
report is checked in test_grading.py, where the sample class is graded.
"""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from autograder.engine.grading import UNANSWERED, NotebookResult, StudentResult
from autograder.reports.class_record import ClassRecord, add_notebook, load_record, read_record, write_record
from autograder.reports.class_report import report_html, write_report
from autograder.reports.exports import write_canvas, write_moodle
from autograder.reports.statistics import class_stats, correlation, histogram, upper_lower_index

NOTEBOOK = "X-1"  # not a course notebook: checks without titles or misconceptions


def verdict(check: str, passed: bool, exercise: str = "ex", points: float = 1.0, **extra) -> dict:
    return {
        "id": f"{NOTEBOOK}:{exercise}:{check}",
        "notebook": NOTEBOOK,
        "exercise": exercise,
        "name": f"檢查 {check}",
        "points": points,
        "score": points if passed else 0.0,
        "passed": passed,
        "message": "" if passed else "應該…，你的…",
        **extra,
    }


def student(name: str, passes: dict[str, bool], notebook: str = NOTEBOOK, **fields) -> StudentResult:
    result = NotebookResult(notebook, f"{notebook}.ipynb", verdicts=[verdict(c, p) for c, p in passes.items()])
    for key, value in fields.items():
        setattr(result, key, value)
    return StudentResult(name, "X", [result])


def record_of(*students: StudentResult) -> ClassRecord:
    record = ClassRecord("X")
    from autograder.reports.class_record import student_record

    for s in students:
        record.students[s.student] = student_record(s, 7, "pt2e-course grade X --seed 7")
    return record


def by_name(record: ClassRecord) -> dict:
    return {c.name: c for c in class_stats(record).checks}


# --- the figures ------------------------------------------------------------------------------------------


def test_discrimination_is_pearsons_r_and_none_without_variation() -> None:
    rng = random.Random(3)
    xs = [float(rng.random() < 0.6) for _ in range(50)]
    ys = [x * 3 + rng.gauss(0, 2) for x in xs]
    mx, my = sum(xs) / 50, sum(ys) / 50
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    expected = cov / (sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)) ** 0.5
    assert correlation(xs, ys) == pytest.approx(expected)
    assert 0 < expected < 1
    assert correlation([1.0] * 10, ys[:10]) is None  # everybody passed: no correlation to speak of
    assert correlation(xs[:10], [2.0] * 10) is None


def test_upper_lower_index_compares_the_top_and_bottom_27_percent() -> None:
    # 10 students, rest scores 0..9: the top 3 (7, 8, 9) all passed, of the bottom 3 (0, 1, 2) one did
    passed = [0, 1, 0, 0, 1, 0, 1, 1, 1, 1]
    assert upper_lower_index([float(p) for p in passed], [float(r) for r in range(10)]) == pytest.approx(1 - 1 / 3)
    assert upper_lower_index([1.0], [0.0]) is None


def test_histogram_counts_each_whole_point() -> None:
    assert histogram([0, 0.5, 1, 3, 3, 4], 4) == [2, 1, 0, 2, 1]


def test_checks_that_tell_nothing_are_flagged_with_their_reason() -> None:
    rng = random.Random(0)
    students = []
    for i in range(40):
        ability = i / 39
        students.append(
            student(
                f"s{i:02d}",
                {
                    "all": True,  # everyone passes
                    "none": False,  # nobody passes
                    "good": ability > 0.4,  # the stronger pass it
                    **{f"more{k}": ability > 0.2 * k + rng.random() * 0.2 for k in range(1, 5)},
                    "backwards": ability < 0.3,  # the weaker pass it: negative discrimination
                },
            )
        )
    checks = by_name(record_of(*students))
    assert checks["檢查 all"].facility == 1 and "每個人都通過" in checks["檢查 all"].flags[0]
    assert checks["檢查 none"].facility == 0 and "沒有人通過" in checks["檢查 none"].flags[0]
    assert checks["檢查 good"].discrimination > 0.5 and not checks["檢查 good"].flags
    assert checks["檢查 good"].upper_lower == pytest.approx(1.0)
    assert checks["檢查 backwards"].discrimination < 0
    assert any("鑑別度是負的" in f for f in checks["檢查 backwards"].flags)
    stats = class_stats(record_of(*students))
    assert {c.name for c in stats.flagged} == {"檢查 all", "檢查 none", "檢查 backwards"}


def test_a_handful_of_students_flags_nothing() -> None:
    checks = by_name(record_of(*(student(f"s{i}", {"all": True, "none": False}) for i in range(4))))
    assert checks["檢查 all"].facility == 1 and not checks["檢查 all"].flags
    assert checks["檢查 none"].discrimination is None


def test_answers_never_written_or_never_graded_do_not_count_against_a_check() -> None:
    judged = [student(f"ok{i}", {"a": True, "b": i % 2 == 0}) for i in range(6)]
    empty = student("empty", {"a": False, "b": False}, unjudged=["ex"])  # e.g. a crash before the exercise
    unanswered = student("blank", {"a": False, "b": False})
    unanswered.notebooks[0].operation("unanswered", "和發下去的一樣")
    for v in unanswered.notebooks[0].verdicts:
        v["message"] = UNANSWERED
    stats = class_stats(record_of(*judged, empty, unanswered))
    checks = {c.name: c for c in stats.checks}
    assert checks["檢查 a"].facility == 1 and checks["檢查 a"].students == 6
    assert checks["檢查 b"].facility == pytest.approx(0.5)
    # the score distribution keeps everyone; the operations list says why the two were left out
    assert len(stats.students) == 8
    kinds = {(o.student, o.kind) for o in stats.operations}
    assert ("blank", "unanswered") in kinds
    assert not any(o.kind == "unfinished" and o.student == "blank" for o in stats.operations)


def test_the_misconceptions_the_feedback_named_are_counted_per_student() -> None:
    def named(name: str, causes: list[str]) -> StudentResult:
        failed = verdict("c", False, exercise="add_quantizer", causes=causes)
        failed["notebook"] = "M03-4"
        return StudentResult(name, "M03", [NotebookResult("M03-4", "M03-4.ipynb", verdicts=[failed, dict(failed)])])

    stats = class_stats(
        record_of(named("a", ["no_shared_spec"]), named("b", ["no_shared_spec", "other_observer"]), named("c", []))
    )
    counts = {m.key: m for m in stats.misconceptions}
    assert counts["no_shared_spec"].students == ["a", "b"] and counts["no_shared_spec"].first == 2
    assert counts["other_observer"].students == ["b"] and counts["other_observer"].first == 0
    assert counts["no_shared_spec"].url and counts["no_shared_spec"].url.endswith(
        "#m03-4-a-sharedquantizationspec-a6e4d2"
    )
    assert stats.misconceptions[0].key == "no_shared_spec"  # the most students first


# --- the record and the exports ---------------------------------------------------------------------------


def test_a_regrade_merges_into_the_record(tmp_path: Path) -> None:
    write_record(tmp_path, "X", [student("a", {"c": True}), student("b", {"c": False})], 1, "grade 1")
    path, record = write_record(tmp_path, "X", [student("b", {"c": True})], 2, "grade 2")
    assert set(record.students) == {"a", "b"}
    assert read_record(path).students["b"]["seed"] == 2 and read_record(path).students["a"]["seed"] == 1
    # nbgrader grades a notebook at a time: one notebook replaces its earlier entry, the others stay
    other = NotebookResult("X-2", "X-2.ipynb", verdicts=[verdict("d", True)])
    add_notebook(tmp_path, "X", "a", other, 3, "nbgrader")
    again = NotebookResult("X-2", "X-2.ipynb", verdicts=[verdict("d", False)])
    add_notebook(tmp_path, "X", "a", again, 3, "nbgrader")
    notebooks = load_record(tmp_path, "X").students["a"]["notebooks"]
    assert [nb["notebook"] for nb in notebooks] == [NOTEBOOK, "X-2"]
    assert notebooks[1]["score"] == 0
    assert set(load_record(tmp_path, "X").students) == {"a", "b"}


def test_canvas_and_moodle_exports_have_the_columns_their_import_expects(tmp_path: Path) -> None:
    record = record_of(student("=cmd|' /C calc'!A0", {"a": True, "b": True}), student("b07", {"a": True, "b": False}))
    with write_canvas(tmp_path, record).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", NOTEBOOK]
    assert rows[1][0] == "Points Possible" and rows[1][5] == "2"
    by_login = {r[3]: r for r in rows[2:]}
    assert by_login["b07"][5] == "1"
    assert all(not r[0].startswith("=") for r in rows[2:])  # no formula for the spreadsheet to run
    with write_moodle(tmp_path, record).open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Username", NOTEBOOK, "X total"]
    assert ["b07", "1", "1"] in rows


def test_report_without_a_record_says_to_grade_first(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "report", "M03", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 2
    assert "先評分" in run.stderr and "Traceback" not in run.stderr


def test_the_report_is_one_file_that_needs_no_network() -> None:
    page = report_html(record_of(*(student(f"s{i}", {"a": i % 3 > 0, "b": i % 2 > 0}) for i in range(12))))
    assert "<script" not in page
    for reference in ('src="http', 'href="http', "@import", "url("):
        assert reference not in page.replace('href="https://pt2e-course', "")
    assert page.count('<img class="plot"') >= 2


# --- a synthetic class of 240, in a browser -------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ClassRecord]:
    from autograder.maintenance.synthetic_class import write_synthetic_class

    out = tmp_path_factory.mktemp("synthetic")
    record = read_record(write_synthetic_class(out, "M03", students=240, seed=0))
    return write_report(out, record), record


@pytest.mark.slow  # the kept answers of M03 graded once (about 20 s), for both tests on one worker
@pytest.mark.xdist_group("synthetic-class")
def test_the_synthetic_class_mixes_the_sample_kinds_and_the_wrong_answers(synthetic) -> None:
    _, record = synthetic
    assert len(record.students) >= 200
    kinds = {name.rsplit("-", 1)[0] for name in record.students if "-" in name}
    assert kinds == {"full", "untouched", "partial", "wrong-sharing", "tampered", "crashing"}
    stats = class_stats(record)
    assert len(stats.misconceptions) >= 20
    assert {nb for nb, _ in stats.notebooks} == {"M03-1", "M03-2", "M03-3", "M03-4"}
    assert next(m for m in stats.misconceptions if m.key == "no_shared_spec").students


@pytest.mark.slow
@pytest.mark.xdist_group("synthetic-class")
def test_the_report_of_the_synthetic_class_reads_in_a_browser(synthetic, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "docs" / "site"))
    from browser import Browser

    page, record = synthetic
    stats = class_stats(record)
    assert stats.flagged, "a class of 240 with these answers has checks to look at"
    with Browser(width=1280, height=900) as browser:
        browser.open(page.as_uri())
        images = browser.evaluate("[...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0, alt: i.alt}))")
        assert len(images) == 3 and all(i["ok"] for i in images), images  # histograms, facility, misconceptions
        tables = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('section')].map("
            "s => [s.id, s.querySelectorAll('table').length]))"
        )
        for section in ("distribution", "checks", "misconceptions", "operations", "reproduce", "legend", "scores"):
            assert tables.get(section, 0) >= 1, (section, tables)
        listed = browser.evaluate("[...document.querySelectorAll('#flagged li')].map(li => li.textContent)")
        assert len(listed) == len(stats.flagged)
        for check, line in zip(stats.flagged, listed, strict=True):
            assert check.name in line and check.notebook in line
        # 240 students fold: the class's scores and each list of students are closed until asked for
        closed = browser.evaluate("[...document.querySelectorAll('#scores details')].every(d => !d.open)")
        assert closed
        assert browser.evaluate("document.documentElement.scrollHeight") < 20_000
        browser.screenshot(tmp_path / "report-1280.png", full_page=True)
        browser.set_width(390)
        overflow = browser.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
        assert not overflow, "the report runs off a phone's screen"
        browser.screenshot(tmp_path / "report-390.png")
    assert json.loads(json.dumps(stats.runs[0].command)).startswith("pt2e-course synthetic-class M03")
