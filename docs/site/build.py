"""Build the course site from the committed, executed ``source/`` notebooks (no re-execution).

    .venv/bin/python docs/site/build.py [--out _site] [--jobs 2]      # what `make site` runs
    python docs/site/build.py --requirements                          # the site's packages, one a line

Sphinx with myst-nb and sphinx-book-theme turns each chapter into one page with its outputs (every
drawing and table as the notebook shows it) and the syllabus into the navigation. This script first
*stages* what Sphinx reads into ``build/site/src``:

- ``index.md``: the landing page, made from the README's 給誰 and 怎麼學 sections, and the syllabus;
- ``glossary.md``: ``docs/glossary.md``;
- ``<module>/<notebook>.ipynb``: each source notebook as a self-study reader may see it. The solutions
  stay (on purpose); everything of the hidden grading goes: the ``### BEGIN HIDDEN TESTS`` region of
  each graded cell and what it printed (the hidden checks' report), any other cell that imports
  ``autograder``, and nbgrader's cell metadata. Under the title: links to open the student version
  (``release/``) in Colab and to download it. Every section heading gets a label derived from its text
  (``label_sections``), where the grader's feedback links a misconception's section;
- ``_student/<module>/<notebook>.ipynb``: the release notebooks, offered for download.

Modules are whatever ``source/M*/`` holds when the site is built; a module's caption comes from the
README's syllabus table (``| M03 Quantizer | …``), or is the module's name when the table has no row
for it. The addresses come from ``pyproject.toml`` ``[project.urls]`` (``autograder.maintenance.colab``). The
build fails on any Sphinx warning (``-W``).
"""

from __future__ import annotations

import argparse
import copy
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

from autograder.maintenance.colab import README_END, README_START, colab_url, repository  # noqa: E402
from common.anchors import heading_anchor, site_anchor  # noqa: E402  (no torch: the site's build has none)

CONF = Path(__file__).resolve().parent
"""Sphinx's configuration folder (``conf.py``, ``_static/``), kept apart from the staged sources."""
STAGE = ROOT / "build" / "site"
DEFAULT_OUT = ROOT / "_site"
STUDENT = "_student"
"""Folder of the staged sources that holds the release notebooks (downloads, not pages)."""

HEADING = re.compile(r"^(#{2,6})\s+(.*?)\s*#*\s*$")
"""A section heading of a chapter (the title, ``#``, is the page itself)."""
HIDDEN_REGION = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.M | re.S)
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


def landing(text: str, chapters: dict[str, list[tuple[str, str]]]) -> str:
    """The landing page: the README's introduction, 給誰 and 怎麼學, then the syllabus as links."""
    intro = text.split("\n## ", 1)[0]
    intro = "\n".join(line for line in intro.splitlines()[1:] if not line.startswith(">")).strip()
    learn = readme_section(text, "怎麼學")
    if README_START in learn:  # the Colab table: every chapter page has its own link
        start, end = learn.index(README_START), learn.index(README_END) + len(README_END)
        learn = learn[:start] + "（連結在每一章的標題下方，和下載學生版的連結在一起。）" + learn[end:]
    captions = module_captions(text)
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
    for module, entries in chapters.items():
        lines.append(f"- **{captions.get(module, module)}**")
        lines += [f"  - [{title}]({doc}.ipynb)" for doc, title in entries]
    lines.append("")
    for module, entries in chapters.items():
        lines += ["```{toctree}", ":hidden:", f":caption: {captions.get(module, module)}", ""]
        lines += [doc for doc, _ in entries]
        lines += ["```", ""]
    lines += ["```{toctree}", ":hidden:", ":caption: 參考", "", "glossary", "```", ""]
    return "\n".join(lines)


def site_notebook(nb: Any, release_path: Path, download: str) -> Any:
    """A copy of a source notebook for the site: no hidden grading, links to the student version."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        nbgrader = cell.metadata.pop("nbgrader", {})
        if cell.cell_type == "code":
            if HIDDEN_REGION.search(cell.source):
                cell.source = HIDDEN_REGION.sub("", cell.source).rstrip("\n")
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
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    title, _, rest = first.source.lstrip().partition("\n")
    links = (
        "\n\n```{admonition} 自己動手寫\n:class: tip\n"
        f"這一頁是含解答的版本。沒有解答的學生版：[在 Colab 打開]({colab_url(release_path)})"
        f"　·　{{download}}`下載 {release_path.name} <{download}>`\n```\n"
    )
    first.source = title + links + rest
    nb.metadata.pop("nbgrader", None)
    label_sections(nb, release_path.stem)
    return nb


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


def stage(target: Path = STAGE / "src") -> dict[str, list[tuple[str, str]]]:
    """Write what Sphinx reads into ``target``; returns the chapters per module (document, title)."""
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
            page = site_notebook(nb, release, f"/{STUDENT}/{module}/{path.name}")
            nbformat.write(page, target / module / path.name)
            chapters.setdefault(module, []).append((f"{module}/{path.stem}", title))
    (target / "index.md").write_text(landing(readme(), chapters), encoding="utf-8")
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    (target / "glossary.md").write_text(site_links(glossary), encoding="utf-8")
    return chapters


def build(out: Path = DEFAULT_OUT, jobs: int = 2, staging: Path = STAGE) -> float:
    """Stage (into ``staging``) and build the site into ``out``; returns the seconds taken.

    Exits with Sphinx's log when the build fails or prints anything (a warning fails it).
    """
    start = time.perf_counter()
    stage(staging / "src")
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
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the site goes (default: _site/)")
    parser.add_argument("--jobs", type=int, default=2, help="Sphinx's parallel jobs (default: 2)")
    parser.add_argument("--staging", type=Path, default=STAGE, help="where the sources for Sphinx are staged")
    parser.add_argument("--requirements", action="store_true", help="print the site's packages and exit")
    args = parser.parse_args()
    if args.requirements:
        print("\n".join(requirements()))
        return
    seconds = build(args.out.resolve(), args.jobs, args.staging.resolve())
    print(f"網站完成：{args.out / 'index.html'}（{seconds:.1f} 秒）")


if __name__ == "__main__":
    main()
