"""The class report (``pt2e-course report``): its statistics, its exports, and the page an instructor opens.

The statistics are checked on small classes whose answers are known by hand; the page on a synthetic
class of 240 students (``autograder.maintenance.synthetic_class``), opened in Chromium. The sample class's
report is checked in test_grading.py, where the sample class is graded.
"""

from __future__ import annotations

import base64
import csv
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from autograder.engine.grading import UNANSWERED, NotebookResult, StudentResult
from autograder.reports.class_record import (
    ClassRecord,
    add_notebook,
    load_record,
    read_record,
    record_path,
    recorded_seed,
    write_record,
)
from autograder.reports.class_report import report_html, write_report
from autograder.reports.exports import write_canvas, write_moodle
from autograder.reports.plots import columns, wrap_label
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


# --- the report's order: the next lecture first, the course author's notes last ---------------------------


def m03_4(name: str, add: tuple[float, list[str]] = (7, []), cat: float = 3, **fields) -> StudentResult:
    """A student's M03-4: AddQuantizer (7 points, one check) with the causes its feedback named, CatQuantizer (3)."""
    add_score, causes = add

    def v(exercise: str, check: str, points: float, score: float, causes: list[str]) -> dict:
        return {
            "id": f"M03-4:{exercise}:{check}",
            "notebook": "M03-4",
            "exercise": exercise,
            "name": f"{exercise} 的檢查 {check}",
            "points": points,
            "score": score,
            "passed": score >= points,
            "message": "" if score >= points else "應該…，你的…",
            "causes": causes,
        }

    result = NotebookResult(
        "M03-4",
        "M03-4.ipynb",
        verdicts=[
            v("add_quantizer", "shared", 7, add_score, causes),
            v("cat_quantizer", "shared", 3, cat, [] if cat >= 3 else ["cat_no_shared_spec"]),
        ],
    )
    for key, value in fields.items():
        setattr(result, key, value)
    return StudentResult(name, "M03", [result])


def monday_class() -> ClassRecord:
    """Ten students: four share=True without SharedQuantizationSpec (two of them also in CatQuantizer), one with
    another observer, one crash, one tamperer, three right."""
    students = [m03_4(f"ok{i}") for i in range(3)]
    students += [m03_4(f"shared{i}", (0, ["no_shared_spec"]), cat=0 if i < 2 else 3) for i in range(4)]
    students += [m03_4("observer", (0, ["other_observer"]))]
    crashed = m03_4("crash", (0, []), cat=0, unjudged=["add_quantizer", "cat_quantizer"])
    crashed.notebooks[0].operation("crashed", "程式讓行程結束了（os._exit）")
    for v in crashed.notebooks[0].verdicts:
        v["causes"] = []  # never judged: no cause named
    tampered = m03_4("sly", tampering=["偵測到竄改：AddQuantizer.annotate 被替換"])
    students += [crashed, tampered]
    record = ClassRecord("M03")
    from autograder.reports.class_record import student_record

    for s in students:
        record.students[s.student] = student_record(s, 7, "pt2e-course grade M03 --seed 7")
    return record


def sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def section_of(page: str, anchor: str) -> str:
    return page.split(f'<section id="{anchor}"', 1)[1].split("</section>", 1)[0]


def test_the_report_opens_with_what_to_reteach_and_who_needs_attention() -> None:
    page = report_html(monday_class())
    assert sections(page)[0] == "monday" and sections(page)[-1] == "quality"
    first = section_of(page, "monday")
    hardest = first.split('id="hardest"', 1)[1].split("</li>", 1)[0]
    assert "M03-4" in hardest and "AddQuantizer" in hardest and "通過率 <b>44%</b>" in hardest  # 4 of 9 judged
    top = first.split('id="top-misconceptions"', 1)[1].split("</ul>", 1)[0].split("<li>")[1:]
    assert len(top) == 3
    assert "share=True" in top[0] and "SharedQuantizationSpec" in top[0]
    assert "<b>40%</b> 的學生（4 位）" in top[0]  # four of the ten who handed in
    assert "#m03-4-a-sharedquantizationspec-a6e4d2" in top[0]  # the link the feedback uses
    assert "CatQuantizer" in top[1] and "<b>20%</b> 的學生（2 位）" in top[1]
    assert "observer" in top[2] and "<b>10%</b> 的學生（1 位）" in top[2]
    attention = first.split('id="attention"', 1)[1]
    assert 'href="crash/M03/feedback.html"' in attention.split('id="attention-stopped"', 1)[1].split("</li>", 1)[0]
    assert 'href="sly/M03/feedback.html"' in attention.split('id="attention-tampering"', 1)[1].split("</li>", 1)[0]
    low = attention.split('id="attention-low"', 1)[1].split("</li>", 1)[0]
    assert {"shared0", "observer", "crash"} <= set(re.findall(r">([^<>]+)</a>", low)) and "ok0" not in low
    # a class of ten: the figures are indicative only, said at the top and by each item
    assert "n &lt; 30：僅供參考" in first
    assert "n &lt; 30：僅供參考" in section_of(page, "checks")
    # item-quality flags are the course author's, in their own closing section, not at the top
    assert "請看看這" not in page.split('<section id="quality"', 1)[0]
    assert page.index('id="flagged"') > page.index('<section id="quality"')


def test_the_top_block_does_not_warn_about_a_class_of_thirty() -> None:
    record = record_of(*(student(f"s{i:02d}", {"a": i % 3 > 0, "b": i % 2 > 0}) for i in range(30)))
    page = report_html(record)
    assert "n &lt; 30" not in section_of(page, "monday")
    assert "†" not in section_of(page, "checks").split("<table", 1)[1]  # no row marked as indicative only


def test_each_measure_has_one_name_defined_once() -> None:
    page = report_html(monday_class())
    assert "滿分的比例" not in page
    checks = section_of(page, "checks")
    assert checks.count("<b>通過率</b>") == 1 and page.count("<b>通過率</b>") == 1
    assert checks.count("<b>鑑別度</b>") == 1 and "怎麼讀" in checks
    headers = re.findall(r"<th>([^<]*)</th>", checks)
    assert "通過率" in headers and not {"facility", "滿分率"} & set(headers)


def test_a_negative_discrimination_is_explained_where_it_is_shown() -> None:
    students = [student(f"s{i:02d}", {"good": i > 12, "more": i > 20, "backwards": i < 10}) for i in range(40)]
    checks = section_of(report_html(record_of(*students)), "checks")
    assert "-0." in checks and "鑑別度是負的" in checks and "檢查 backwards" in checks.split("鑑別度是負的", 1)[1]
    few = [student(f"s{i}", {"a": i > 2, "b": i < 2}) for i in range(6)]
    checks = section_of(report_html(record_of(*few)), "checks")
    if "鑑別度是負的" in checks:  # with six students, a chance: said so
        assert "偶然" in checks.split("鑑別度是負的", 1)[1]


def test_every_student_name_links_to_their_feedback_page() -> None:
    odd = "王小明 (b07)"
    record = monday_class()
    extra = m03_4(odd, (0, ["no_shared_spec"]))
    from autograder.reports.class_record import student_record

    record.students[odd] = student_record(extra, 7, "grade")
    page = report_html(record)
    links = re.findall(r'<a class="student" href="([^"]+)">([^<]+)</a>', page)
    assert {name for _, name in links} == set(record.students) | {"王小明 (b07)"}
    for href, _ in links:
        assert href.endswith("/M03/feedback.html") and not href.startswith(("/", "http"))
    assert ("%E7%8E%8B%E5%B0%8F%E6%98%8E%20%28b07%29/M03/feedback.html", odd) in links
    # no name stands bare in a list of students or the class's scores
    for anchor in ("scores", "operations"):
        cells = re.findall(r"<tr><td>(.*?)</td>", section_of(page, anchor))
        named = [c for c in cells if re.sub(r"<[^>]+>", "", c) in record.students]
        assert named and all('class="student"' in c for c in named), (anchor, named)
    lists = re.findall(r'class="names">(.*?)</(?:p|span)>', page)
    assert lists and all(not re.sub(r'<a class="student"[^>]*>[^<]*</a>', "", names).strip("、") for names in lists)


def test_cell_errors_a_wrong_answer_explains_are_not_listed_as_errors() -> None:
    wrong = "第 26 格：這一格沒有通過：AddQuantizer 放在前面時先認領 add：add 的兩個輸入與輸出應該共用同一個 observer"
    crash = "第 4 格：SystemExit：不想做了（第 2 行：sys.exit('不想做了')）"
    students = [
        m03_4("wrong", (0, ["no_shared_spec"]), cell_errors=[wrong]),  # an ordinary wrong answer
        m03_4("self", (0, []), cell_errors=["第 25 格：✗ 自我檢查沒有通過：add 的輸出應該…"]),
        m03_4("preview", (0, []), cell_errors=["第 27 格：1 個公開例子中有 1 個沒有通過（見上面的 ✗）"]),
        m03_4("crash", cell_errors=[crash]),  # full marks: nothing to explain it
        m03_4("both", (0, []), cell_errors=[wrong, crash]),
        m03_4("right", cell_errors=[wrong]),  # the course's cell failed on a right answer: worth a look
    ]
    stats = class_stats(record_of(*students))
    listed = {o.student: o.text for o in stats.operations if o.kind == "cell_errors"}
    assert set(listed) == {"crash", "both", "right"}
    assert listed["both"] == crash  # only the error a wrong answer does not explain
    assert stats.explained_errors == ["preview", "self", "wrong"]
    operations = section_of(report_html(record_of(*students)), "operations")
    assert "另有 3 位學生的格子出錯只是答錯的結果" in operations


def svg_labels(page: str) -> list[list[str]]:
    """The tick labels of each plot in ``page``: matplotlib writes each line of a label as a text element."""
    found = []
    for data in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', page):
        svg = base64.b64decode(data).decode("utf-8")
        found.append([html_unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)])
    return found


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def test_chart_labels_wrap_at_word_boundaries_and_fit() -> None:
    text = (
        "M03-3｜conv → relu 是一個融合 pattern（relu 在圖上不一定緊接在 conv 後面）：中間沒有 observer，輸出標籤在 relu"
    )
    wrapped = wrap_label(text, width=30)
    lines = wrapped.split("\n")
    assert len(lines) == 2 and lines[-1].endswith("…")
    assert all(columns(line) <= 30 for line in lines)
    words = set(re.findall(r"[A-Za-z0-9_=.\-]+", text))
    assert set(re.findall(r"[A-Za-z0-9_=.\-]+", wrapped)) <= words  # every Latin word whole
    assert not any(line.startswith(("，", "：", "）")) or line.rstrip("…").endswith("（") for line in lines)
    assert (
        wrap_label("share=True 卻沒有用 SharedQuantizationSpec", width=24)
        == "share=True 卻沒有用\nSharedQuantizationSpec"
    )
    assert wrap_label("短的") == "短的"
    # in the report: no label of the misconception chart is cut; each is the misconception's whole name
    page = report_html(monday_class())
    stats = class_stats(monday_class())
    names = [f"{m.notebook}｜{m.name}" for m in stats.misconceptions]
    drawn = " ".join(" ".join(labels) for labels in svg_labels(page))
    for name in names:
        for word in re.findall(r"[A-Za-z0-9_=.\-]{3,}", name):
            assert word in drawn, (word, name)
    assert "…" not in "".join(svg_labels(page)[-1])  # the misconception chart: short names, nothing left out


def test_a_regrade_reuses_the_seed_the_class_was_graded_with(tmp_path: Path) -> None:
    assert recorded_seed(tmp_path, "X") is None
    write_record(tmp_path, "X", [student(n, {"c": True}) for n in ("a", "b", "c")], 41, "grade X --seed 41")
    write_record(tmp_path, "X", [student("c", {"c": False})], 5, "grade X --student c --seed 5")
    assert recorded_seed(tmp_path, "X") == 41  # most of the class
    record_path(tmp_path, "X").write_text("not json", encoding="utf-8")
    assert recorded_seed(tmp_path, "X") is None


def fake_grading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: list[str]) -> tuple[Path, list]:
    """``pt2e-course grade`` on folders of ``names``, with the sandbox replaced: each student gets a right M03-4."""
    import autograder.engine.grading as grading

    submitted = tmp_path / "submitted"
    for name in names:
        (submitted / name / "M03").mkdir(parents=True)
    seeds: list = []

    def grade_class(module, folders, *, jobs=2, seed=None, limits=None, on_done=None):
        seeds.append(seed)
        return [m03_4(name) for name in folders], 1234 if seed is None else seed

    monkeypatch.setattr(grading, "grade_class", grade_class)
    return submitted, seeds


def test_grade_names_every_file_it_wrote_and_a_regrade_keeps_the_class_seed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from autograder import cli

    submitted, seeds = fake_grading(monkeypatch, tmp_path, ["a", "b"])
    out = tmp_path / "graded"

    def grade(*extra: str) -> str:
        args = cli.build_parser().parse_args(["grade", "M03", "--submitted", str(submitted), "--out", str(out), *extra])
        assert cli.cmd_grade(args) == 0
        return capsys.readouterr().out

    printed = grade()
    assert seeds == [None]
    written = {p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")}
    for path in written:
        shown = str(path) if path.parent == out else str(out / "<學生>" / "M03" / path.name)
        assert shown in printed or f"{out}/<學生>/M03/{path.name}" in printed or path.name in printed, path
    for name in ("M03-grades.csv", "M03-class.json", "M03-canvas.csv", "M03-moodle.csv", "M03-report.html"):
        assert str(out / name) in printed, name
    assert "匯入 Canvas：" in printed and "匯入 Moodle：" in printed
    assert printed.rstrip().splitlines()[-1] == f"全班報告：{out / 'M03-report.html'}"
    # a regrade of one student meets the class's hidden models, unless told otherwise
    printed = grade("--student", "b")
    assert seeds[-1] == 1234 and "沿用全班的亂數種子 1234" in printed
    assert read_record(record_path(out, "M03")).students["b"]["seed"] == 1234
    grade("--student", "b", "--seed", "9")
    assert seeds[-1] == 9
    # feedback pages are where the report links them
    page = (out / "M03-report.html").read_text(encoding="utf-8")
    for href in re.findall(r'<a class="student" href="([^"]+)"', page):
        assert (out / href).is_file(), href


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
        # the first block, at the top of the first screen: what to reteach and who needs attention
        top = browser.evaluate(
            "(() => { const r = document.querySelector('#monday').getBoundingClientRect();"
            " return {top: r.top, bottom: r.bottom, text: document.querySelector('#monday').textContent}; })()"
        )
        assert top["top"] < 150 and top["bottom"] < 900, top
        assert "最難的一題" in top["text"] and "需要關心的學生" in top["text"]
        assert stats.misconceptions[0].name in top["text"] and stats.misconceptions[2].name in top["text"]
        order = browser.evaluate("[...document.querySelectorAll('main > section')].map(s => s.id)")
        assert order[0] == "monday" and order[-1] == "quality", order
        listed = browser.evaluate("[...document.querySelectorAll('#quality #flagged li')].map(li => li.textContent)")
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
        images = browser.evaluate(
            "[...document.images].map(i => i.getBoundingClientRect().right <= window.innerWidth + 1)"
        )
        assert all(images), "a chart runs off a phone's screen"
    assert json.loads(json.dumps(stats.runs[0].command)).startswith("pt2e-course synthetic-class M03")
