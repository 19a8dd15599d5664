"""The generated parts of the instructor guide, ``docs/teaching.md``.

    .venv/bin/python -m autograder.maintenance.teaching_guide           # rewrite the generated parts
    .venv/bin/python -m autograder.maintenance.teaching_guide --check   # exit 1 when the file is stale

The guide mixes hand-written text (each module's learning goals, how to run week 1, notes on the plan) with
parts this script writes between markers, ``<!-- teaching:NAME:start -->`` … ``<!-- teaching:NAME:end -->``:

- ``estimate``: how the time estimates are made (the constants below) and the course's total;
- ``weeks``: the ten-week plan (``WEEKS``), each week's chapters and estimated hours;
- ``M01`` … one per module: per chapter its title and estimated time, per exercise its points, its estimated
  time and its common misconceptions, read from the exercise's record (``selfcheck/public/mXX_Y.py``:
  name, text, the section to reread), with how many kept wrong answers encode each.

Everything outside the markers is left as it is. A module with no block yet gets a new section at the end,
with a placeholder for its learning goals that ``tests/test_teaching.py`` refuses until someone writes them.
The time is an *estimate*, not a measurement: nothing records how long learners take (see ``estimate``).
"""

from __future__ import annotations

import argparse
import html
import importlib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ROOT
from autograder.maintenance.colab import site_url
from common.anchors import site_anchor

GUIDE = ROOT / "docs" / "teaching.md"
START, END = "<!-- teaching:{}:start -->", "<!-- teaching:{}:end -->"
GOALS_TODO = "（學習目標：待寫）"

READ_CHARS_PER_MINUTE = 300
"""Reading speed of a chapter's prose (Chinese characters, code and tables included), a slow, technical pace."""
MINUTES_PER_CELL = 1
"""Running a code cell of the chapter and reading what it printed or drew."""
EXERCISE_MINUTES = 10
"""Reading an exercise's text, running its self-check and its preview, whatever its size."""
MINUTES_PER_LINE = 3
"""Each line of code the answer key writes (not blank, not a comment): writing it, getting it wrong once, fixing it."""

WEEKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("環境與 export 出來的圖", ("M01-1", "M01-2", "M01-3")),
    ("observer：範圍與 qparams", ("M02-1", "M02-2", "M02-3")),
    ("標籤與讀懂一個真實的 Quantizer", ("M03-1", "M03-2")),
    ("寫自己的 Quantizer：規則與共用", ("M03-3", "M03-4")),
    ("BN 折疊與 fusion", ("M04-1", "M04-2", "M04-3")),
    ("convert 之後的圖與特殊規格", ("M05-1", "M05-2", "M05-3")),
    ("精度除錯", ("M06-1", "M06-2", "M06-3")),
    ("QAT", ("M07-1", "M07-2", "M07-3")),
    ("後端與總結專題", ("M08-1", "M08-2", "M08-3")),
    ("Transformer、動態量化與出貨", ("M09-1", "M09-2", "M09-3")),
)
"""The ten-week plan: each week's theme and chapters. M03 is the course's core and takes two weeks."""

SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION.*?\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)


@dataclass(frozen=True)
class ExerciseInfo:
    notebook: str
    number: int
    key: str
    title: str
    points: float
    answer_lines: int
    misconceptions: tuple
    """``selfcheck.misconceptions.Misconception`` of the exercise's record, most specific first."""

    @property
    def minutes(self) -> int:
        return round_up(EXERCISE_MINUTES + MINUTES_PER_LINE * self.answer_lines)


@dataclass(frozen=True)
class Chapter:
    notebook: str
    title: str
    reading_minutes: int
    exercises: tuple[ExerciseInfo, ...]

    @property
    def minutes(self) -> int:
        return self.reading_minutes + sum(e.minutes for e in self.exercises)


def round_up(minutes: float, step: int = 5) -> int:
    return int(math.ceil(minutes / step) * step)


def hours(minutes: int) -> str:
    return f"{minutes / 60:.1f}"


def modules() -> dict[str, list[Path]]:
    """The source notebooks per module, in course order."""
    found: dict[str, list[Path]] = {}
    folders = [p for p in (ROOT / "source").iterdir() if p.is_dir() and re.fullmatch(r"M\d+", p.name)]
    for folder in sorted(folders, key=lambda p: int(p.name[1:])):
        paths = sorted(folder.glob("*.ipynb"), key=lambda p: [int(n) for n in re.findall(r"\d+", p.stem)])
        if paths:
            found[folder.name] = paths
    return found


def captions() -> dict[str, str]:
    """``{"M03": "M03 Quantizer", …}`` from the README's syllabus table."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return {m.group(2): m.group(1) for m in re.finditer(r"^\|\s*((M\d+)\b[^|]*?)\s*\|", readme, re.M)}


def kept_wrong_answers() -> dict[tuple[str, str, str], int]:
    """(notebook, exercise, misconception) → how many kept wrong answers (``tests/fixtures/wrong``) encode it."""
    from autograder.maintenance.fixtures import wrong_solutions

    counts: dict[tuple[str, str, str], int] = {}
    for wrong in wrong_solutions():
        if wrong.misconception:
            key = (wrong.notebook, wrong.exercise, wrong.misconception)
            counts[key] = counts.get(key, 0) + 1
    return counts


def chapter(path: Path) -> Chapter:
    import nbformat

    from selfcheck.casekit import module_name

    nb = nbformat.read(path, as_version=4)
    title = re.match(r"^#\s+(.+)$", nb.cells[0].source.lstrip(), re.M)
    record = importlib.import_module(f"selfcheck.public.{module_name(path.stem)}").PUBLIC
    points, lines = {}, dict.fromkeys(record, 0)
    prose, cells = 0, 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        grade_id = str(meta.get("grade_id", ""))
        if cell.cell_type == "markdown":
            prose += len(re.sub(r"\s+", "", cell.source))
        elif meta.get("solution") and grade_id in lines:
            for region in SOLUTION.findall(cell.source):
                lines[grade_id] += sum(
                    1 for line in region.splitlines() if line.strip() and not line.strip().startswith("#")
                )
        elif meta.get("grade"):
            points[grade_id.removesuffix("_hidden")] = float(meta.get("points", 0))
        elif not grade_id.endswith("_tests"):
            cells += 1
    order = [
        str(c.metadata["nbgrader"]["grade_id"])
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.metadata["nbgrader"].get("grade_id") in record
    ]
    if order != list(record):
        raise SystemExit(f"{path.relative_to(ROOT)}: 解答格的順序 {order} 和練習的紀錄 {list(record)} 不同")
    exercises = tuple(
        ExerciseInfo(
            path.stem,
            index + 1,  # the record lists the exercises in the notebook's order (tests/test_records.py)
            key,
            exercise.title,
            points.get(key, 0.0),
            lines[key],
            exercise.misconceptions,
        )
        for index, (key, exercise) in enumerate(record.items())
    )
    reading = round_up(prose / READ_CHARS_PER_MINUTE + MINUTES_PER_CELL * cells)
    name = title.group(1).strip().split("|", 1)[-1].strip() if title else ""
    return Chapter(path.stem, name, reading, exercises)


def chapters() -> dict[str, list[Chapter]]:
    return {module: [chapter(path) for path in paths] for module, paths in modules().items()}


def section_link(notebook: str, misconception) -> str:
    """``[M03-4 的「A. …」](https://…/M03/M03-4.html#m03-4-…)`` on the self-study site."""
    from selfcheck.misconceptions import section_notebook, where_to_read

    where = section_notebook(notebook, misconception.section)
    url = f"{site_url()}{where.split('-')[0]}/{where}.html#{site_anchor(where, misconception.section.anchor)}"
    return f"[{where_to_read(notebook, misconception.section)}]({url})"


def points(value: float) -> str:
    return f"{value:g}"


def module_block(found: list[Chapter], counts: dict[tuple[str, str, str], int]) -> str:
    total = sum(c.minutes for c in found)
    lines = [
        f"估計 {hours(total)} 小時（讀章節 {hours(sum(c.reading_minutes for c in found))} 小時，"
        f"練習 {hours(sum(e.minutes for c in found for e in c.exercises))} 小時）。",
        "",
        "| 章 | 讀與跑（估計） | 練習（分數、估計） |",
        "|---|---|---|",
    ]
    for c in found:
        work = "；".join(f"{e.number}. {e.title}（{points(e.points)} 分，約 {e.minutes} 分鐘）" for e in c.exercises)
        lines.append(f"| {c.notebook} {c.title} | {c.reading_minutes} 分鐘 | {work} |")
    lines += [
        "",
        "**常見的誤解**（由練習的紀錄產生。每題依評分回饋的優先順序排列，最具體的在前；"
        "「保留的錯誤答案」是 `tests/fixtures/wrong/` 裡寫成這個誤解的答案份數，不是學生的人數）：",
        "",
    ]
    for c in found:
        for e in c.exercises:
            names = "、".join(m.name for m in e.misconceptions) or "還沒有記下任何誤解"
            lines += [
                "<details>",
                f"<summary><b>{c.notebook} 練習 {e.number}：{html.escape(e.title)}</b>"
                f"（{len(e.misconceptions)} 個）：{html.escape(names)}</summary>",
                "",
            ]
            for m in e.misconceptions:
                kept = counts.get((c.notebook, e.key, m.key), 0)
                where = "預覽與評分都會點名" if m.public is not None else "評分時點名"
                text = " ".join(m.text.split())
                practice = f"；再練一題：`{m.practice.name}`" if m.practice is not None else ""
                lines.append(
                    f"- **{m.name}**：{text} 重讀 {section_link(c.notebook, m)}。"
                    f"（{where}；保留的錯誤答案 {kept} 份{practice}）"
                )
            lines += ["", "</details>", ""]
    return "\n".join(lines)


def weeks_block(found: dict[str, list[Chapter]]) -> str:
    by_notebook = {c.notebook: c for chapters_ in found.values() for c in chapters_}
    planned = [nb for _, notebooks in WEEKS for nb in notebooks]
    missing = [nb for nb in by_notebook if nb not in planned]
    unknown = [nb for nb in planned if nb not in by_notebook]
    if missing or unknown:
        raise SystemExit(
            f"十週的安排（teaching_guide.WEEKS）和 source/ 對不上：沒排進去的 {missing}，不存在的 {unknown}"
        )
    lines = ["| 週 | 主題 | 章 | 練習 | 估計時數 |", "|---|---|---|---|---|"]
    for week, (theme, notebooks) in enumerate(WEEKS, start=1):
        chosen = [by_notebook[nb] for nb in notebooks]
        count = sum(len(c.exercises) for c in chosen)
        worth = sum(e.points for c in chosen for e in c.exercises)
        lines.append(
            f"| {week} | {theme} | {'、'.join(notebooks)} | {count} 題，{points(worth)} 分 "
            f"| {hours(sum(c.minutes for c in chosen))} |"
        )
    return "\n".join(lines)


def estimate_block(found: dict[str, list[Chapter]]) -> str:
    every = [c for chapters_ in found.values() for c in chapters_]
    exercises = [e for c in every for e in c.exercises]
    return "\n".join(
        [
            "這裡的時間都是**估計**，不是量出來的：課程沒有記錄學習者實際花了多久"
            "（nbgrader 只記交件時間，評分紀錄只記結果）。估計的方法，每一章、每一題都一樣：",
            "",
            f"- **讀與跑一章**：說明的字數（markdown 格，去掉空白，程式碼與表格也算）每分鐘 "
            f"{READ_CHARS_PER_MINUTE} 字，加上每個不是練習的程式格 {MINUTES_PER_CELL} 分鐘（執行、看輸出），"
            "進位到 5 分鐘；",
            f"- **一題練習**：{EXERCISE_MINUTES} 分鐘（讀題、跑自我檢查與評分預覽），加上解答版在 "
            f"`### BEGIN SOLUTION` 與 `### END SOLUTION` 之間每一行程式碼（不算空行與註解）{MINUTES_PER_LINE} 分鐘"
            "（寫、錯一次、改對），進位到 5 分鐘。",
            "",
            f"全課程 {len(every)} 章、{len(exercises)} 題：估計讀與跑 "
            f"{hours(sum(c.reading_minutes for c in every))} 小時，練習 {hours(sum(e.minutes for e in exercises))} 小時，"
            f"合計 {hours(sum(c.minutes for c in every))} 小時。"
            "第一次教的時候，請學生在每題的解答格最上面記下開始與寫完的時間，收回來之後和這裡的估計比一比。",
        ]
    )


def blocks() -> dict[str, str]:
    """Every generated part, by its marker's name."""
    found = chapters()
    counts = kept_wrong_answers()
    generated = {"estimate": estimate_block(found), "weeks": weeks_block(found)}
    for module, chapters_ in found.items():
        generated[module] = module_block(chapters_, counts)
    return generated


def fill(text: str, generated: dict[str, str]) -> str:
    """``text`` with each generated part between its markers; a module without markers gets a new section."""
    names = captions()
    for name, body in generated.items():
        start, end = START.format(name), END.format(name)
        block = f"{start}\n{body}\n{end}"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        found = pattern.search(text)
        if found:
            text = text[: found.start()] + block + text[found.end() :]
        elif re.fullmatch(r"M\d+", name):
            text = text.rstrip("\n") + f"\n\n### {names.get(name, name)}\n\n**學習目標**\n\n- {GOALS_TODO}\n\n{block}\n"
        else:
            raise SystemExit(f"{GUIDE.name} 沒有 {start} … {end}：把這兩行放回該放的地方")
    return text


def generate(path: Path | None = None) -> str:
    """The guide as it should be: the file's hand-written parts with today's generated parts."""
    return fill((path or GUIDE).read_text(encoding="utf-8"), blocks())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the guide differs from what it generates")
    args = parser.parse_args()
    shown = GUIDE.relative_to(ROOT) if GUIDE.is_relative_to(ROOT) else GUIDE
    current = GUIDE.read_text(encoding="utf-8")
    wanted = generate(GUIDE)
    if args.check:
        if wanted != current:
            print(f"{shown} 過時了：執行 python -m autograder.maintenance.teaching_guide", file=sys.stderr)
            raise SystemExit(1)
        return
    if wanted != current:
        GUIDE.write_text(wanted, encoding="utf-8")
    print(f"{shown}：產生的部分已更新" if wanted != current else f"{shown}：已是最新")


if __name__ == "__main__":
    main()
