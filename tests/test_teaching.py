"""The instructor guide, ``docs/teaching.md``: its generated parts are what the records say today.

The misconceptions, the chapters' and exercises' estimated times and the ten-week plan's hours are written by
``autograder.maintenance.teaching_guide`` between markers; this test fails when the committed file differs
from what the script writes now (change an exercise's record, then run the script), when a module lacks
its hand-written learning goals, or when the plan leaves a chapter out.
"""

from __future__ import annotations

import re

import pytest

from autograder.course import ROOT
from autograder.maintenance import teaching_guide
from autograder.maintenance.teaching_guide import END, GOALS_TODO, GUIDE, START, WEEKS


@pytest.fixture(scope="module")
def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return teaching_guide.blocks()


def block(text: str, name: str) -> str:
    found = re.search(re.escape(START.format(name)) + r"\n(.*?)\n" + re.escape(END.format(name)), text, re.S)
    assert found, f"docs/teaching.md has no generated part {name!r}"
    return found.group(1)


def test_the_committed_guide_is_what_the_script_generates(guide: str, generated: dict[str, str]) -> None:
    wanted = teaching_guide.fill(guide, generated)
    if wanted != guide:
        stale = [name for name, body in generated.items() if block(guide, name) != body]
        pytest.fail(
            f"docs/teaching.md is stale in {stale}: run python -m autograder.maintenance.teaching_guide and commit it"
        )


def test_every_misconception_of_every_exercise_is_in_its_modules_part(guide: str) -> None:
    from selfcheck.casekit import module_name

    seen = 0
    for module, paths in teaching_guide.modules().items():
        part = block(guide, module)
        for path in paths:
            record = __import__(f"selfcheck.public.{module_name(path.stem)}", fromlist=["PUBLIC"]).PUBLIC
            for exercise in record.values():
                assert f"{path.stem} 練習" in part and exercise.title in part, f"{path.stem} {exercise.key}"
                for item in exercise.misconceptions:
                    assert f"**{item.name}**" in part, f"{path.stem} {exercise.key}: {item.name}"
                    assert " ".join(item.text.split()) in part, f"{path.stem} {exercise.key}: {item.key}'s text"
                    seen += 1
    assert seen > 100


def test_every_module_has_hand_written_learning_goals(guide: str) -> None:
    assert GOALS_TODO not in guide, "a module's learning goals are still to be written"
    for module in teaching_guide.modules():
        section = re.search(rf"^### {module}\b.*?(?=^### M\d+|\Z)", guide, re.M | re.S)
        assert section, f"docs/teaching.md has no section for {module}"
        goals = re.search(r"\*\*學習目標\*\*\n\n((?:- .+\n)+)", section.group(0))
        assert goals and len(goals.group(1).splitlines()) >= 2, f"{module}: two or more learning goals"
        assert section.group(0).index("學習目標") < section.group(0).index(START.format(module))


def test_the_plan_has_ten_weeks_and_every_chapter_once(guide: str) -> None:
    planned = [notebook for _, notebooks in WEEKS for notebook in notebooks]
    chapters = [path.stem for paths in teaching_guide.modules().values() for path in paths]
    assert len(WEEKS) == 10
    assert sorted(planned) == sorted(chapters) and len(set(planned)) == len(planned)
    rows = [line for line in block(guide, "weeks").splitlines() if re.match(r"^\| \d+ \|", line)]
    assert [int(row.split("|")[1]) for row in rows] == list(range(1, 11))


def test_the_times_are_stated_as_estimates_and_how_they_were_made(guide: str) -> None:
    estimate = block(guide, "estimate")
    assert "估計" in estimate and "不是量出來的" in estimate
    for constant in ("READ_CHARS_PER_MINUTE", "MINUTES_PER_CELL", "EXERCISE_MINUTES", "MINUTES_PER_LINE"):
        assert str(getattr(teaching_guide, constant)) in estimate, constant
    assert "約" in block(guide, "M03") and "分鐘" in block(guide, "M03")


def test_a_module_without_its_part_gets_a_section_to_fill_in_and_a_lost_marker_stops_the_script() -> None:
    parts = {"estimate": "E", "weeks": "W", "M01": "one", "M10": "ten"}
    text = "\n".join(f"{START.format(n)}\nold\n{END.format(n)}" for n in ("estimate", "weeks", "M01")) + "\n"
    filled = teaching_guide.fill(text, parts)
    assert f"{START.format('M01')}\none\n{END.format('M01')}" in filled and "old" not in filled
    assert filled.index("### M10") < filled.index(GOALS_TODO) < filled.index(f"{START.format('M10')}\nten\n")
    assert teaching_guide.fill(filled, parts) == filled
    with pytest.raises(SystemExit, match="teaching:weeks:start"):
        teaching_guide.fill(text.replace(START.format("weeks"), ""), parts)


def test_check_fails_on_a_stale_guide(tmp_path, monkeypatch: pytest.MonkeyPatch, guide: str) -> None:
    stale = tmp_path / "teaching.md"
    weeks = START.format("weeks") + "\n"
    stale.write_text(guide.replace(weeks, weeks + "| x |\n"), encoding="utf-8")
    monkeypatch.setattr(teaching_guide, "GUIDE", stale)
    monkeypatch.setattr("sys.argv", ["teaching_guide", "--check"])
    with pytest.raises(SystemExit) as stopped:
        teaching_guide.main()
    assert stopped.value.code == 1
    assert (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8") == guide
