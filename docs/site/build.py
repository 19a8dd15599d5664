"""Build the course site from the committed, executed ``source/`` notebooks (no re-execution).

    .venv/bin/python docs/site/build.py [--out _site] [--jobs 2]      # what `make site` runs
    .venv/bin/python docs/site/build.py --term [--url URL]            # `make site TERM=1`: a term's site, into _term_site/
    python docs/site/build.py --requirements                          # the site's packages, one a line

Sphinx with myst-nb and sphinx-book-theme turns each chapter into one page with its outputs (every
drawing and table as the notebook shows it) and the syllabus into the navigation. This script first
*stages* what Sphinx reads into ``build/site/src``:

- ``index.md``: the landing page, made from the README's 給誰 and 怎麼學 sections, and the syllabus;
- ``glossary.md``: ``docs/glossary.md``;
- ``<module>/<notebook>.ipynb``: each source notebook as a self-study reader may see it. The solutions
  stay (on purpose), without nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines around them;
  everything of the hidden grading goes: the ``### BEGIN HIDDEN TESTS`` region of each graded cell and
  what it printed (the hidden checks' report), any other cell that imports ``autograder``, and
  nbgrader's cell metadata. Under the title: links to open the student version
  (``release/``) in Colab and to download it. Every section heading gets a label derived from its text
  (``label_sections``), where the grader's feedback links a misconception's section;
- ``_student/<module>/<notebook>.ipynb``: the release notebooks, offered for download.

With ``--term`` (``make site TERM=1``) it builds a *term's* site instead, for a graded class: each page is
the release notebook (``term_notebook``: the exercises unanswered, as handed out) with the outputs of the
source notebook's cells that are the same in both, so every section keeps its drawings and tables, while the
exercise's own cells (the solution cell, the self-check, the graded cell) show nothing; the section labels are
the same, so the feedback's "重讀" links land on it when the grader's link base points at it
(``docs/term.md``). ``--url`` is the address it will be published at (Sphinx's ``html_baseurl``).

Modules are whatever ``source/M*/`` holds when the site is built; a module's caption comes from the
README's syllabus table (``| M03 Quantizer | …``), or is the module's name when the table has no row
for it. The addresses come from ``pyproject.toml`` ``[project.urls]`` (``autograder.maintenance.colab``). The
build fails on any Sphinx warning (``-W``).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from autograder.maintenance.colab import (  # noqa: E402
    README_END,
    README_START,
    SETUP_TITLE,
    colab_url,
    repository,
)
from common.anchors import heading_anchor, site_anchor  # noqa: E402  (no torch: the site's build has none)

CONF = Path(__file__).resolve().parent
"""Sphinx's configuration folder (``conf.py``, ``_static/``), kept apart from the staged sources."""
STAGE = ROOT / "build" / "site"
DEFAULT_OUT = ROOT / "_site"
TERM_STAGE = ROOT / "build" / "term-site"
TERM_OUT = ROOT / "_term_site"
"""Where ``--term`` stages and builds: apart from the self-study site, so that one never overwrites the other."""
STUDENT = "_student"
"""Folder of the staged sources that holds the release notebooks (downloads, not pages)."""

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
"""A heading of a chapter: its title (``#``, which a misconception may name too: the page's top) or a section's."""
HIDDEN_REGION = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.M | re.S)
NBGRADER_MARKER = re.compile(r"^[ \t]*### (?:BEGIN|END) (?:SOLUTION|HIDDEN TESTS)\b.*(?:\n|\Z)", re.M)
"""A line of nbgrader's markers: the solution stays on the self-study site, the marker line around it goes."""
IMPORTS_AUTOGRADER = re.compile(r"^\s*(from\s+autograder\b|import\s+autograder\b)", re.M)
PREVIEW_LINE = re.compile(r"^[✓✗] 公開例子「")
"""A line the preview (``selfcheck.preview``) prints in a graded cell; the hidden report prints none."""
MODULE = re.compile(r"M\d+")


def requirements() -> list[str]:
    """The site's packages: the ``site`` extra of ``pyproject.toml``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [str(r) for r in project["optional-dependencies"]["site"]]


def modules() -> list[str]:
    """The modules under ``source/`` that have notebooks, in course order (``M01`` … whatever exists)."""
    found = [p.name for p in (ROOT / "source").iterdir() if p.is_dir() and MODULE.fullmatch(p.name)]
    return sorted((m for m in found if any((ROOT / "source" / m).glob("*.ipynb"))), key=lambda m: int(m[1:]))


def notebooks(module: str) -> list[Path]:
    return sorted(
        (ROOT / "source" / module).glob("*.ipynb"), key=lambda p: [int(n) for n in re.findall(r"\d+", p.stem)]
    )


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def readme_section(text: str, heading: str) -> str:
    """The body of the README's ``## heading`` section (up to the next ``## ``)."""
    match = re.search(rf"^## {re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise SystemExit(f"README.md 沒有「## {heading}」這一節：網站的首頁由它產生")
    return match.group(1).strip("\n")


def module_captions(text: str) -> dict[str, str]:
    """``{"M03": "M03 Quantizer", …}`` from the first column of the README's syllabus table."""
    table = readme_section(text, "課綱")
    captions = {}
    for line in table.splitlines():
        match = re.match(r"^\|\s*((M\d+)\b[^|]*?)\s*\|", line)
        if match:
            captions[match.group(2)] = match.group(1)
    return captions


def chapter_title(nb: Any, path: Path) -> str:
    """The notebook's title: the first heading of its first markdown cell."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.match(r"^#\s+(.+)$", cell.source.lstrip(), re.M)
            if match:
                return match.group(1).strip()
            break
    raise SystemExit(f"{path.relative_to(ROOT)}: 第一個 markdown 格應該以標題（# …）開頭")


def site_links(text: str) -> str:
    """Rewrite the README's relative links for the site: the glossary is a page, the rest is on GitHub."""

    def target(match: re.Match[str]) -> str:
        label, href = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:|^#", href):
            return match.group(0)
        if href == "docs/glossary.md":
            return f"[{label}](glossary.md)"
        return f"[{label}]({repository()}/blob/main/{href})"

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", target, text)


def syllabus(text: str, chapters: dict[str, list[tuple[str, str]]]) -> list[str]:
    """The syllabus as links, then the navigation's tables of contents (one per module, then the glossary)."""
    captions = module_captions(text)
    lines = []
    for module, entries in chapters.items():
        lines.append(f"- **{captions.get(module, module)}**")
        lines += [f"  - [{title}]({doc}.ipynb)" for doc, title in entries]
    lines.append("")
    for module, entries in chapters.items():
        lines += ["```{toctree}", ":hidden:", f":caption: {captions.get(module, module)}", ""]
        lines += [doc for doc, _ in entries]
        lines += ["```", ""]
    lines += ["```{toctree}", ":hidden:", ":caption: 參考", "", "glossary", "```", ""]
    return lines


def term_landing(text: str, chapters: dict[str, list[tuple[str, str]]]) -> str:
    """A term's landing page: what the site is, then the syllabus (the README's open-course sections stay out)."""
    lines = [
        "# PT2E 量化實作課",
        "",
        "這個網站是這學期的**課堂版**：每一章就是發給你的 notebook，練習沒有解答；"
        "每一段的說明、圖與表都在，評分回饋裡「重讀」的連結就指到這裡的段落。"
        "練習寫在你自己的 notebook 裡：每一章最上方有在 Colab 打開與下載的連結。",
        "",
        "## 課綱",
        "",
    ]
    return "\n".join(lines + syllabus(text, chapters))


def landing(text: str, chapters: dict[str, list[tuple[str, str]]]) -> str:
    """The landing page: the README's introduction, 給誰 and 怎麼學, then the syllabus as links."""
    intro = text.split("\n## ", 1)[0]
    intro = "\n".join(line for line in intro.splitlines()[1:] if not line.startswith(">")).strip()
    learn = readme_section(text, "怎麼學")
    if README_START in learn:  # the Colab table: every chapter page has its own link
        start, end = learn.index(README_START), learn.index(README_END) + len(README_END)
        learn = learn[:start] + "（連結在每一章的標題下方，和下載學生版的連結在一起。）" + learn[end:]
    lines = [
        "# PT2E 量化實作課",
        "",
        intro,
        "",
        "這個網站是課程的**自學版**：每一章都是含完整解答、已執行過的 notebook，每張圖、每個表都在；"
        "左邊的目錄依課綱排列，右上角可以搜尋（中文詞與 API 名稱都可以）。"
        "想自己動手寫練習，在每一章最上方打開學生版。",
        "",
        "## 給誰",
        "",
        site_links(readme_section(text, "給誰")),
        "",
        "## 怎麼學",
        "",
        site_links(learn),
        "",
        "## 課綱",
        "",
    ]
    return "\n".join(lines + syllabus(text, chapters))


def site_notebook(nb: Any, release_path: Path, download: str) -> Any:
    """A copy of a source notebook for the site: no hidden grading, links to the student version."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        nbgrader = cell.metadata.pop("nbgrader", {})
        if cell.cell_type == "code":
            if HIDDEN_REGION.search(cell.source):
                cell.source = HIDDEN_REGION.sub("", cell.source).rstrip("\n")
            cell.source = NBGRADER_MARKER.sub("", cell.source)
            if IMPORTS_AUTOGRADER.search(cell.source):
                continue  # students have no autograder: nothing of it on the site
            if nbgrader.get("grade"):  # the preview's lines stay; the hidden checks' report goes
                for output in cell.outputs:
                    if output.output_type == "stream":
                        output.text = "".join(
                            line for line in output.text.splitlines(keepends=True) if PREVIEW_LINE.match(line)
                        )
                cell.outputs = [o for o in cell.outputs if o.output_type != "stream" or o.text]
        cells.append(cell)
    nb.cells = cells
    student_links(nb, "自己動手寫", "這一頁是含解答的版本。沒有解答的學生版", release_path, download)
    nb.metadata.pop("nbgrader", None)
    label_sections(nb, release_path.stem)
    return nb


def student_links(nb: Any, heading: str, lead: str, release_path: Path, download: str) -> None:
    """Under the title: open the student version in Colab, or download it."""
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    title, _, rest = first.source.lstrip().partition("\n")
    links = (
        f"\n\n```{{admonition}} {heading}\n:class: tip\n"
        f"{lead}：[在 Colab 打開]({colab_url(release_path)})"
        f"　·　{{download}}`下載 {release_path.name} <{download}>`\n```\n"
    )
    first.source = title + links + rest


def exercise_cell(nbgrader: dict[str, Any]) -> bool:
    """One of an exercise's own cells: the solution, the self-check (``<key>_tests``) or the graded cell."""
    return bool(
        nbgrader.get("solution") or nbgrader.get("grade") or str(nbgrader.get("grade_id", "")).endswith("_tests")
    )


def colab_setup_cell(cell: Any) -> bool:
    """The Colab setup cell ``pt2e-course release`` puts in the student version (the source has none)."""
    return cell.cell_type == "code" and cell.source.startswith(f"#@title {SETUP_TITLE}")


def term_notebook(release_nb: Any, source_nb: Any, release_path: Path, download: str) -> Any:
    """A term's page: the release notebook, unanswered, with the source's outputs where nothing of an answer shows.

    A code cell of the release notebook keeps the output of the executed source notebook's cell it matches
    (the same code, found in order: ``difflib``), unless that cell is one of an exercise's own cells (whose
    outputs are the answered run's); every other code cell shows no output. The Colab setup cell of the release
    notebook is left out, as the self-study page has none.
    """
    page = copy.deepcopy(release_nb)
    handed_out = [cell for cell in page.cells if not colab_setup_cell(cell)]
    key = [(cell.cell_type, cell.source) for cell in handed_out]
    matcher = difflib.SequenceMatcher(None, key, [(c.cell_type, c.source) for c in source_nb.cells], autojunk=False)
    solved = {i + k: source_nb.cells[j + k] for i, j, n in matcher.get_matching_blocks() for k in range(n)}
    cells = []
    for index, cell in enumerate(handed_out):
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type == "code":
            if IMPORTS_AUTOGRADER.search(cell.source):
                continue
            cell.source = NBGRADER_MARKER.sub("", cell.source)
            cell.outputs, cell.execution_count = [], None
            twin = solved.get(index)
            if twin is not None and not exercise_cell(twin.metadata.get("nbgrader", {})):
                cell.outputs = copy.deepcopy(twin.outputs)
                cell.execution_count = twin.execution_count
        cells.append(cell)
    page.cells = cells
    student_links(page, "寫練習", "這一頁和發給你的 notebook 相同，練習沒有解答。打開來寫", release_path, download)
    page.metadata.pop("nbgrader", None)
    label_sections(page, release_path.stem)
    return page


def label_sections(nb: Any, notebook: str) -> None:
    """Put a label ``(<notebook>-<anchor>)=`` before every section heading, the anchor derived from the heading
    (``common.anchors``, as ``selfcheck.misconceptions.Section`` does): the feedback's links to a section (``section_url``) land on it."""
    seen: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        out: list[str] = []
        for line in cell.source.splitlines():
            match = HEADING.match(line)
            if match:
                label = site_anchor(notebook, heading_anchor(match.group(2)))
                if label not in seen:  # the same heading twice in a chapter: the first one is the target
                    seen.add(label)
                    if out and out[-1].strip():
                        out.append("")
                    out.append(f"({label})=")
            out.append(line)
        cell.source = "\n".join(out)


def stage(target: Path = STAGE / "src", term: bool = False) -> dict[str, list[tuple[str, str]]]:
    """Write what Sphinx reads into ``target``; returns the chapters per module (document, title).

    ``term``: a term's pages (``term_notebook``) and landing page instead of the self-study ones."""
    import nbformat

    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    chapters: dict[str, list[tuple[str, str]]] = {}
    for module in modules():
        (target / module).mkdir()
        (target / STUDENT / module).mkdir(parents=True)
        for path in notebooks(module):
            release = ROOT / "release" / module / path.name
            if not release.is_file():
                raise SystemExit(f"release/{module}/{path.name} 不存在：先執行 pt2e-course release {module}")
            shutil.copyfile(release, target / STUDENT / module / path.name)
            nb = nbformat.read(path, as_version=4)
            title = chapter_title(nb, path)
            download = f"/{STUDENT}/{module}/{path.name}"
            if term:
                page = term_notebook(nbformat.read(release, as_version=4), nb, release, download)
            else:
                page = site_notebook(nb, release, download)
            nbformat.write(page, target / module / path.name)
            chapters.setdefault(module, []).append((f"{module}/{path.stem}", title))
    front = term_landing if term else landing
    (target / "index.md").write_text(front(readme(), chapters), encoding="utf-8")
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    (target / "glossary.md").write_text(site_links(glossary), encoding="utf-8")
    return chapters


def build(
    out: Path = DEFAULT_OUT, jobs: int = 2, staging: Path = STAGE, term: bool = False, url: str | None = None
) -> float:
    """Stage (into ``staging``) and build the site into ``out``; returns the seconds taken.

    ``term``: a term's site without solutions (``term_notebook``); ``url``: the address the site will be
    published at (Sphinx's ``html_baseurl``; by default ``[project.urls] Homepage``).
    Exits with Sphinx's log when the build fails or prints anything (a warning fails it).
    """
    start = time.perf_counter()
    stage(staging / "src", term=term)
    # Sphinx writes into the staging folder (myst-nb puts its jupyter_execute/ beside the output
    # folder), and the finished site moves to ``out``.
    html, doctrees = staging / "html", staging / "doctrees"
    for folder in (html, doctrees, staging / "jupyter_execute"):
        if folder.exists():
            shutil.rmtree(folder)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-W",  # a warning fails the build
        "--keep-going",
        "-q",
        "-j",
        str(jobs),
        "-c",
        str(CONF),
        "-d",
        str(doctrees),
        *(["-D", f"html_baseurl={url}"] if url else []),
        *(["-D", "html_title=PT2E 量化實作課（課堂版）"] if term else []),
        str(staging / "src"),
        str(html),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    log = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or log:
        raise SystemExit(f"網站建置失敗或有警告（sphinx-build 結束碼 {result.returncode}）：\n{log}")
    sources = html / "_sources"  # html_copy_source is off: Sphinx leaves the folder empty
    if sources.is_dir() and not any(sources.iterdir()):
        sources.rmdir()
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(html, out)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the site goes (default: _site/, with --term _term_site/)")
    parser.add_argument("--jobs", type=int, default=2, help="Sphinx's parallel jobs (default: 2)")
    parser.add_argument("--staging", type=Path, help="where the sources for Sphinx are staged (default: build/site/)")
    parser.add_argument("--term", action="store_true", help="a term's site: the release notebooks, no solutions")
    parser.add_argument("--url", help="the address the site will be published at (default: [project.urls] Homepage)")
    parser.add_argument("--requirements", action="store_true", help="print the site's packages and exit")
    args = parser.parse_args()
    if args.requirements:
        print("\n".join(requirements()))
        return
    out = args.out or (TERM_OUT if args.term else DEFAULT_OUT)
    staging = args.staging or (TERM_STAGE if args.term else STAGE)
    seconds = build(out.resolve(), args.jobs, staging.resolve(), term=args.term, url=args.url)
    kind = "（課堂版，沒有解答）" if args.term else ""
    print(f"網站完成{kind}：{out / 'index.html'}（{seconds:.1f} 秒）")


if __name__ == "__main__":
    main()
