"""The grading commands: grade a class, check one notebook, grade on Gradescope.

They all use the same sandbox and the same hidden checks; for the same notebook and
seed they give the same scores (nbgrader's own autograde is compared in
test_autograde.py).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, built_once

SAMPLE = ROOT / "examples" / "submitted"
MODULE = "M03"
SEED = "0"


def points(notebook: str, exercise: str | None = None) -> float:
    import autograder.engine.grading as grading

    return sum(i.points for ex, infos in grading.checks_of(notebook).items() if exercise in (None, ex) for i in infos)


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autograder.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        **kwargs,
    )


@pytest.fixture(scope="session")
def sample_grades(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The sample class graded once in the whole run (``conftest.built_once``), whichever worker needs it first:
    this file's tests are not tied to one worker, so the three that grade again run beside each other."""

    def grade(folder: Path) -> dict:
        result = cli("grade", MODULE, "--submitted", str(SAMPLE), "--out", str(folder), "--jobs", "2", "--seed", SEED)
        return {"args": result.args, "returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr}

    out, ran = built_once(tmp_path_factory, "sample-class-graded", grade)
    result = subprocess.CompletedProcess(ran["args"], ran["returncode"], ran["stdout"], ran["stderr"])
    assert result.returncode == 0, result.stderr
    return result, out


def results_json(out: Path, student: str) -> dict:
    return json.loads((out / student / MODULE / "results.json").read_text(encoding="utf-8"))


def notebook_score(report: dict, notebook: str, exercise_prefix: str = "") -> float:
    return sum(
        t["score"] for t in report["tests"] if t["number"].startswith(f"{notebook}.") and exercise_prefix in t["name"]
    )


def test_sample_class_gradebook(sample_grades) -> None:
    result, out = sample_grades
    with (out / f"{MODULE}-grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"full", "untouched", "partial", "wrong-sharing", "tampered", "crashing"}
    total = sum(points(nb) for nb in ("M03-1", "M03-2", "M03-3", "M03-4"))
    assert float(rows["full"]["total"]) == float(rows["full"]["max"]) == total
    assert float(rows["untouched"]["total"]) == 0
    for student, handed_out in (("untouched", ("M03-1", "M03-2", "M03-3", "M03-4")), ("partial", ("M03-2", "M03-3"))):
        output = results_json(out, student)["output"]  # known to score nothing without a run: the feedback says so
        assert [
            nb for nb in ("M03-1", "M03-2", "M03-3", "M03-4") if f"{nb}.ipynb 和發下去的版本一樣" in output
        ] == list(handed_out), (student, output[:2000])
    assert [float(rows["partial"][nb]) for nb in ("M03-1", "M03-2", "M03-3", "M03-4")] == [
        points("M03-1"),
        0,
        0,
        points("M03-4", "add_quantizer"),
    ]
    assert float(rows["wrong-sharing"]["M03-4"]) < points("M03-4")
    assert float(rows["wrong-sharing"]["M03-3"]) == points("M03-3")
    assert float(rows["crashing"]["M03-1"]) == points("M03-1", "add_label")
    assert {row["seed"] for row in rows.values()} == {SEED}, "each row says which seed graded it"
    assert "full" in result.stdout and "成績表" in result.stdout and "feedback.html" in result.stdout
    assert "[24/24]" in result.stderr or "24/24" in result.stderr, "progress is shown"


def test_tampering_is_named_and_earns_nothing(sample_grades) -> None:
    _, out = sample_grades
    tampered, wrong = results_json(out, "tampered"), results_json(out, "wrong-sharing")
    assert "偵測到竄改" in tampered["output"]
    for name in ("M03-1", "M03-2", "M03-4"):
        section = tampered["output"].split(f"{name}：")[1].split("\n\nM03-")[0]
        assert "竄改" in section or "修改過" in section, name
    # the same wrong AddQuantizer, with and without patched helpers: the same points
    assert notebook_score(tampered, "M03-4", "AddQuantizer") == notebook_score(wrong, "M03-4", "AddQuantizer")


def test_the_gradebook_flags_tampering(sample_grades) -> None:
    _, out = sample_grades
    with (out / f"{MODULE}-grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    flagged = {name for name, row in rows.items() if int(row["tampering"]) > 0}
    assert flagged == {"tampered"}, flagged
    reason = rows["tampered"]["tampering_reason"]
    assert reason and ("竄改" in reason or "修改過" in reason) and len(reason) <= 200, reason
    assert all(rows[name]["tampering_reason"] == "" for name in rows if name not in flagged)
    for name in ("M03-1", "M03-2", "M03-4"):  # every notebook the sample student tampered with is named
        assert f"{name}：" in reason, reason


def section_of(page: str, anchor: str) -> str:
    return page.split(f'<section id="{anchor}">', 1)[1].split("</section>", 1)[0]


def test_grading_ends_with_the_class_report(sample_grades) -> None:
    result, out = sample_grades
    report = out / f"{MODULE}-report.html"
    assert result.stdout.rstrip().splitlines()[-1] == f"全班報告：{report}"
    page = report.read_text(encoding="utf-8")
    # wrong-sharing's M03-4 failure, under the misconception its feedback named, with the section to reread
    misconceptions = section_of(page, "misconceptions")
    row = next(r for r in misconceptions.split("<tr>") if "SharedQuantizationSpec" in r and "share=True" in r)
    assert "wrong-sharing" in row and "#m03-4-a-sharedquantizationspec-a6e4d2" in row
    # the tampered and the crashing student under operations, each with its reason
    operations = section_of(page, "operations")
    tampered = operations.split('id="op-tampering"', 1)[1].split("</details>", 1)[0]
    assert "tampered" in tampered and "偵測到竄改" in tampered
    crashed = operations.split('id="op-crashed"', 1)[1].split("</details>", 1)[0]
    assert "crashing" in crashed and "os._exit" in crashed
    unanswered = operations.split('id="op-unanswered"', 1)[1].split("</details>", 1)[0]
    assert "untouched" in unanswered and "partial" in unanswered
    # a legend for the terminal's ⚠ and the CSV's tampering column; the seed and command that reproduce it
    legend = section_of(page, "legend")
    assert "⚠" in legend and "<code>tampering</code>" in legend and "tampering_reason" in legend
    reproduce = section_of(page, "reproduce")
    assert f"--seed {SEED}" in reproduce and f"grade {MODULE}" in reproduce
    assert "⚠：" in result.stdout, "the terminal's table explains its ⚠"
    with (out / f"{MODULE}-canvas.csv").open(newline="", encoding="utf-8") as handle:
        canvas = list(csv.reader(handle))
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert {row[3] for row in canvas[2:]} == {"full", "untouched", "partial", "wrong-sharing", "tampered", "crashing"}
    full = next(row for row in canvas if row[0] == "full")
    assert full[5:] == canvas[1][5:], "full marks in every notebook"


def test_regrading_some_students_merges_into_the_gradebook(sample_grades, tmp_path: Path) -> None:
    """--student regrades only the named students; the other rows of the gradebook stay as they were."""
    _, graded = sample_grades
    out = tmp_path / "graded"
    shutil.copytree(graded, out)
    before = (out / f"{MODULE}-grades.csv").read_text(encoding="utf-8")
    rows_before = {row["student"]: row for row in csv.DictReader(before.splitlines())}
    # the partial student hands in a complete version; wrong-sharing's folder is there but not named
    submitted = tmp_path / "submitted"
    shutil.copytree(SAMPLE / "full" / MODULE, submitted / "partial" / MODULE)
    shutil.copytree(SAMPLE / "wrong-sharing" / MODULE, submitted / "wrong-sharing" / MODULE)
    untouched_report = (out / "wrong-sharing" / MODULE / "results.json").read_bytes()
    result = cli(
        "grade", MODULE, "--submitted", str(submitted), "--out", str(out), "--student", "partial", "--seed", SEED
    )
    assert result.returncode == 0, result.stderr
    assert "保留先前評過的 5 位" in result.stdout, result.stdout
    with (out / f"{MODULE}-grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert set(rows) == set(rows_before), "no student is dropped from the gradebook"
    notebooks = ["M03-1", "M03-2", "M03-3", "M03-4", "total"]
    assert [rows["partial"][nb] for nb in notebooks] == [rows_before["full"][nb] for nb in notebooks]
    assert float(rows["partial"]["total"]) > float(rows_before["partial"]["total"]), "partial's row was replaced"
    for name in set(rows) - {"partial"}:
        assert rows[name] == rows_before[name], f"{name}'s row changed though {name} was not regraded"
    assert (out / "wrong-sharing" / MODULE / "results.json").read_bytes() == untouched_report
    assert results_json(out, "partial")["score"] == float(rows["partial"]["total"])
    # the class report is rebuilt from the merged record: the whole class, partial with its new score
    from autograder.reports.class_record import read_record

    record = read_record(out / f"{MODULE}-class.json")
    assert set(record.students) == set(rows_before)
    assert sum(nb["score"] for nb in record.students["partial"]["notebooks"]) == float(rows["partial"]["total"])
    assert "交了作業的學生：<b>6</b> 位" in (out / f"{MODULE}-report.html").read_text(encoding="utf-8")


def test_results_json_follows_gradescope_schema(sample_grades) -> None:
    _, out = sample_grades
    report = results_json(out, "partial")
    assert {"score", "tests", "output"} <= set(report)
    from autograder.course import notebook_id, source_notebooks
    from autograder.engine.grading import checks_of

    notebooks = [notebook_id(p) for p in source_notebooks(MODULE)]
    assert len(report["tests"]) == sum(len(infos) for nb in notebooks for infos in checks_of(nb).values())
    for test in report["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test)
        assert test["status"] in ("passed", "failed") and 0 <= test["score"] <= test["max_score"]
        if test["status"] == "failed":
            assert test["output"], "a failed check says what was expected and seen"
    assert report["score"] == sum(t["score"] for t in report["tests"])


def test_feedback_names_checks_and_hides_their_source(sample_grades) -> None:
    _, out = sample_grades
    page = (out / "wrong-sharing" / MODULE / "feedback.html").read_text(encoding="utf-8")
    assert "AddQuantizer(share=True) 在 residual 上" in page
    # the cause once per exercise (not once per check), with the section that teaches it
    assert page.count("share=True 卻沒有用 SharedQuantizationSpec") == 1, "one diagnosis, not one per check"
    assert "M03-4 的「A. 顯式共用：SharedQuantizationSpec」" in page and "M03/M03-4.html#m03-4-" in page
    assert "誰都不" not in page and "預期和" not in page, "no machine-like sentences"
    for secret in ("def test_", "compare_observers", "value(seen", "assert "):
        assert secret not in page


def test_check_shows_each_check_without_hidden_source() -> None:
    result = cli("check", str(SAMPLE / "partial" / MODULE / "M03-4.ipynb"), "--seed", SEED)
    assert result.returncode == 0, result.stderr
    add, cat = points("M03-4", "add_quantizer"), points("M03-4", "cat_quantizer")
    assert f"M03-4：{add:g} / {add + cat:g} 分" in result.stdout
    assert "✓" in result.stdout and "✗" in result.stdout and "CatQuantizer" in result.stdout
    for secret in ("def test_", "compare_observers", "value(seen"):
        assert secret not in result.stdout


def test_check_finds_a_renamed_notebook_by_its_cells(tmp_path: Path) -> None:
    renamed = tmp_path / "我的作業.ipynb"
    shutil.copy(SAMPLE / "full" / MODULE / "M03-2.ipynb", renamed)
    result = cli("check", str(renamed), "--seed", SEED)
    assert result.returncode == 0 and f"M03-2：{points('M03-2'):g} / {points('M03-2'):g} 分" in result.stdout


def test_check_refuses_a_file_that_is_not_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "x.ipynb"
    path.write_text("not json")
    result = cli("check", str(path))
    assert result.returncode == 2 and "JSON" in result.stderr


def test_gradescope_bundle_grades_like_grade(tmp_path: Path, sample_grades) -> None:
    _, out = sample_grades
    bundle = tmp_path / "autograder.zip"
    assert cli("gradescope", MODULE, "-o", str(bundle)).returncode == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)
        assert any(n.startswith("course/source/M03/") for n in names) and "course/autograder/engine/grading.py" in names
        archive.extractall(root / "source")
    os.chmod(root / "source" / "run_autograder", 0o755)
    for student in ("tampered", "partial"):
        submission = root / "submission"
        shutil.rmtree(submission, ignore_errors=True)
        shutil.copytree(SAMPLE / student / MODULE, submission)
        env = dict(os.environ, AUTOGRADER_ROOT=str(root), PT2E_PYTHON=sys.executable, PT2E_SEED=SEED)
        run = subprocess.run(
            [str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=1800
        )
        assert run.returncode == 0, run.stderr
        report = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        assert report["score"] == results_json(out, student)["score"]
        assert [t["score"] for t in report["tests"]] == [t["score"] for t in results_json(out, student)["tests"]]


def test_sample_class_is_what_the_generator_makes(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "make_sample_class.py"), str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    made = sorted(p.relative_to(tmp_path / "s") for p in (tmp_path / "s").rglob("*.ipynb"))
    assert made == sorted(p.relative_to(SAMPLE) for p in SAMPLE.rglob("*.ipynb"))
    for relative in made:
        fresh = nbformat.read(tmp_path / "s" / relative, as_version=4)
        committed = nbformat.read(SAMPLE / relative, as_version=4)
        assert [c.source for c in fresh.cells] == [c.source for c in committed.cells], relative


def test_the_report_shows_a_copier_beside_the_answer_it_copied(sample_grades, tmp_path: Path) -> None:
    """A copier (wrong-sharing's notebooks, names renamed, comments dropped) regraded into the sample class: the
    report's similarity section names copier ↔ wrong-sharing and full ↔ the published solution, with their scores
    and the matching lines side by side, and reads at 1280 and 390 px."""
    from test_similarity import copier_class

    sys.path.insert(0, str(ROOT / "docs" / "site"))
    from browser import Browser

    _, out = sample_grades
    assert "相似度比對：" in sample_grades[0].stdout, "grade lists the similarity file it wrote"
    graded = tmp_path / "graded"
    shutil.copytree(out, graded)
    submitted = copier_class(tmp_path)
    result = cli("grade", MODULE, "--submitted", str(submitted), "--out", str(graded), "--student", "copier")
    assert result.returncode == 0, result.stderr
    report = graded / f"{MODULE}-report.html"
    section = section_of(report.read_text(encoding="utf-8"), "similarity")
    rows = [r for r in section.split("<tr>")[2:] if "↔" in r]
    assert any("copier" in r and "wrong-sharing" in r for r in rows), rows
    full = next(r for r in rows if ">full<" in r and "公開的解答" in r)
    assert "34 / 34" in full, "full's score is shown beside the pair"
    assert len(rows) <= 3, "few other pairs are called similar"
    with Browser(width=1280, height=900) as browser:
        browser.open(report.as_uri() + "#similarity")
        browser.evaluate("document.querySelectorAll('#similarity details').forEach(d => d.open = true)")
        marked = browser.evaluate("document.querySelectorAll('#similarity .same').length")
        assert marked > 20, "the matching lines are marked"
        browser.screenshot(tmp_path / "similarity-1280.png")
        browser.set_width(390)
        overflow = browser.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
        assert not overflow, "the side-by-side code runs off a phone's screen"
        browser.evaluate("document.querySelector('#similarity').scrollIntoView()")
        browser.screenshot(tmp_path / "similarity-390.png")
    shots = Path(os.environ.get("PT2E_SHOTS", "/tmp/pt2e-similarity-shots"))
    shots.mkdir(parents=True, exist_ok=True)
    for name in ("similarity-1280.png", "similarity-390.png"):
        shutil.copy(tmp_path / name, shots / name)
