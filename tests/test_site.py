"""The course site, read as a reader does: built once, served on 127.0.0.1, opened in headless Chromium.

The build (``docs/site/build.py``, what ``make site`` runs) must be quick and print nothing but its
last line. In the browser: the navigation lists every module under ``source/`` with its chapters and
walking it reaches each chapter; each chapter shows every drawing of its notebook as a loaded image
and every table; Chinese is drawn with a CJK font (not boxes); search finds Chinese words and API
names; each chapter links its student version (Colab, download). Nothing of the hidden grading is
anywhere on the site, nor nbgrader's solution markers (the solutions stay).

The term's site (``build.py --term``, ``make site TERM=1``) is built once too: it holds none of the source
notebooks' solution code, each chapter is its release notebook unanswered with every drawing of its sections,
and every section a misconception's "重讀" link names has its anchor there.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib
import json
import os
import re
import resource
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from autograder.course import ROOT
from autograder.maintenance.colab import colab_url

sys.path.insert(0, str(ROOT / "docs" / "site"))

from browser import Browser

pytestmark = pytest.mark.xdist_group("site")  # one worker builds the site and opens one browser

BUILD_SECONDS = 60
"""The build's CPU time (user + system, all its processes), so that it takes under a minute on two
cores however busy the machine is when the tests run (about 15 s of wall time on an idle one)."""


def chapters() -> dict[str, list[Path]]:
    """The source notebooks per module, found the way a reader's syllabus should list them."""
    found: dict[str, list[Path]] = {}
    for folder in sorted((ROOT / "source").iterdir(), key=lambda p: (len(p.name), p.name)):
        if folder.is_dir() and re.fullmatch(r"M\d+", folder.name):
            notebooks = sorted(folder.glob("*.ipynb"), key=lambda p: [int(n) for n in re.findall(r"\d+", p.stem)])
            if notebooks:
                found[folder.name] = notebooks
    return found


def all_notebooks() -> list[Path]:
    return [path for paths in chapters().values() for path in paths]


class Site:
    def __init__(self, out: Path, cpu_seconds: float, stdout: str, stderr: str) -> None:
        self.out, self.cpu_seconds, self.stdout, self.stderr = out, cpu_seconds, stdout, stderr
        self.url = ""

    def page(self, path: Path) -> str:
        """The address of a notebook's page: ``M03/M03-4.html``."""
        return f"{self.url}/{path.parent.name}/{path.stem}.html"


def built_site(folder: Path, *options: str) -> Iterator[Site]:
    """Build the site with ``options`` into ``folder``, serve it on 127.0.0.1 while the tests read it."""
    out = folder / "html"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "docs" / "site" / "build.py"),
            *options,
            "--out",
            str(out),
            "--staging",
            str(folder / "stage"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    built = Site(out, cpu, done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    built.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield built
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from built_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def term_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from built_site(tmp_path_factory.mktemp("term-site"), "--term")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Browser]:
    with Browser(width=1280, height=900) as opened:
        yield opened


def test_the_build_is_quick_and_prints_no_warning(site: Site) -> None:
    assert site.cpu_seconds < BUILD_SECONDS, f"the site took {site.cpu_seconds:.0f} s of CPU to build"
    assert site.stderr == ""
    assert site.stdout.splitlines() == [line for line in site.stdout.splitlines() if line.startswith("網站完成：")]
    assert len(site.stdout.splitlines()) == 1


def test_the_navigation_lists_every_module_and_reaches_every_chapter(site: Site, browser: Browser) -> None:
    browser.open(f"{site.url}/index.html")
    captions = browser.evaluate(
        "[...document.querySelectorAll('nav.bd-docs-nav p.caption')].map(p => p.textContent.trim())"
    )
    modules = list(chapters())
    assert [c.split()[0] for c in captions[: len(modules)]] == modules, captions
    links = browser.evaluate("[...document.querySelectorAll('nav.bd-docs-nav a.reference.internal')].map(a => a.href)")
    expected = [site.page(path) for path in all_notebooks()]
    assert [link for link in links if link in expected] == expected, "the syllabus in course order"
    # walking "next" from the landing page visits every chapter once, in course order
    visited = []
    browser.open(f"{site.url}/index.html")
    for _ in range(len(expected) + 2):
        following = browser.evaluate("(document.querySelector('a.right-next') || {}).href || ''")
        if not following or following not in expected:
            break
        browser.open(following)
        visited.append(following)
        title = browser.evaluate("document.querySelector('article h1').textContent")
        assert title.startswith(Path(urllib.parse.urlparse(following).path).stem), title
    assert visited == expected


def image_outputs(nb: nbformat.NotebookNode) -> int:
    return sum(
        1
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if {"image/png", "image/svg+xml"} & set(output.get("data", {}))
    )


def table_outputs(nb: nbformat.NotebookNode) -> int:
    return sum(
        str(output.get("data", {}).get("text/html", "")).count("<table")
        for cell in nb.cells
        for output in cell.get("outputs", [])
    )


@pytest.mark.parametrize("path", all_notebooks(), ids=lambda p: p.stem)
def test_each_chapter_shows_every_drawing_and_table_and_links_its_student_version(
    site: Site, browser: Browser, path: Path
) -> None:
    nb = nbformat.read(path, as_version=4)
    browser.open(site.page(path))
    images = browser.evaluate(
        "[...document.querySelectorAll('div.cell_output img')]"
        ".map(i => ({src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0}))"
    )
    assert len(images) == image_outputs(nb), f"{path.stem}: drawings on the page vs outputs of the notebook"
    assert all(image["loaded"] for image in images), f"{path.stem}: images that did not load: {images}"
    tables = browser.evaluate("document.querySelectorAll('div.cell_output table').length")
    assert tables == table_outputs(nb), f"{path.stem}: tables on the page vs outputs of the notebook"
    release = ROOT / "release" / path.parent.name / path.name
    links = browser.evaluate("[...document.querySelectorAll('article a')].map(a => [a.textContent.trim(), a.href])")
    assert [colab_url(release)] == [href for text, href in links if "colab.research.google.com" in href]
    downloads = [href for _, href in links if "/_downloads/" in href]
    assert len(downloads) == 1 and downloads[0].endswith(f"/{path.name}")
    offered = site.out / urllib.parse.urlparse(downloads[0]).path.lstrip("/")
    assert offered.read_bytes() == release.read_bytes(), "the download is the student version"


def test_chinese_is_drawn_with_a_cjk_font_not_boxes(site: Site, browser: Browser) -> None:
    path = ROOT / "source" / "M03" / "M03-4.ipynb"
    browser.open(site.page(path))
    for selector in ("article h1", "article section p", "nav.bd-docs-nav p.caption"):
        text = browser.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")
        han = sum("\u4e00" <= ch <= "\u9fff" for ch in text)
        assert han, f"{selector}: no Chinese in {text!r}"
        fonts = browser.fonts(selector)
        cjk = sum(font["glyphCount"] for font in fonts if "CJK" in font["familyName"])
        assert cjk >= han, f"{selector}: {han} Chinese characters, drawn by {fonts}"
    # and it takes the room a Chinese glyph takes: as wide as the font size, unlike a narrow box
    width = browser.evaluate(
        "(() => { const s = document.createElement('span'); s.textContent = '量化'.repeat(10);"
        " document.querySelector('article').appendChild(s); const w = s.getBoundingClientRect().width;"
        " const size = parseFloat(getComputedStyle(s).fontSize); s.remove(); return w / (20 * size); })()"
    )
    assert 0.95 < width < 1.05, f"a Chinese character is {width:.2f} em wide"


@pytest.mark.parametrize(
    ("query", "chapter"),
    [("共用", "M03-4"), ("SharedQuantizationSpec", "M03-4"), ("隱式共用", "M03-4")],
)
def test_search_finds_chinese_words_and_api_names(site: Site, browser: Browser, query: str, chapter: str) -> None:
    browser.open(f"{site.url}/search.html?q={urllib.parse.quote(query)}")
    browser.wait_for("document.querySelectorAll('#search-results ul.search li').length > 0")
    results = browser.evaluate(
        "[...document.querySelectorAll('#search-results ul.search li > a')].map(a => a.getAttribute('href'))"
    )
    pages = [href.split("#")[0] for href in results]
    assert f"{chapter[:3]}/{chapter}.html" in pages[:3], f"{query}: {pages}"
    summary = browser.wait_for("(document.querySelector('#search-results li p.context') || {}).textContent")
    for chrome in ("System Settings", "目錄", "上一頁"):  # the theme's buttons, the printed contents, prev/next
        assert chrome not in summary, f"{chrome!r} in the summary {summary!r}"


def test_a_chinese_query_without_spaces_is_split_into_words_the_index_has(site: Site, browser: Browser) -> None:
    browser.open(f"{site.url}/search.html")
    browser.wait_for("typeof Search !== 'undefined' && Search._index !== null")
    assert browser.evaluate("splitQuery('隱式共用 SharedQuantizationSpec')") == ["隱式共用", "SharedQuantizationSpec"]
    words = browser.evaluate("splitQuery('觀察共用的位置')")
    assert "共用" in words and "位置" in words and all(len(w) > 1 for w in words), words


def check_names() -> list[str]:
    """Every hidden check's name (what the grade report prints), from autograder/checks."""
    from autograder.checks.support import CHECKS

    for module in sorted((ROOT / "autograder" / "checks").glob("test_*.py")):
        importlib.import_module(f"autograder.checks.{module.stem}")
    return sorted({info.name for infos in CHECKS.values() for info in infos})


def test_nothing_of_the_hidden_grading_is_on_the_site(site: Site) -> None:
    handed_out = "".join(path.read_text(encoding="utf-8") for path in sorted((ROOT / "release").glob("M*/*.ipynb")))
    every = check_names()
    names = [name for name in every if json.dumps(name, ensure_ascii=False)[1:-1] not in handed_out]
    assert len(every) > 20 and len(names) > len(every) / 2  # some are the exercise's text, as students see it
    texts = {}
    for path in site.out.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".js", ".ipynb", ".txt", ".json", ".inv"}:
            texts[path] = path.read_bytes().decode("utf-8", errors="replace")
    assert any(p.name == "searchindex.js" for p in texts) and any(p.suffix == ".ipynb" for p in texts)
    for path, text in texts.items():
        where = path.relative_to(site.out)
        for secret in ("HIDDEN TESTS", "autograder", "notebook.grade"):
            assert secret not in text, f"{where} holds {secret!r}"
        assert not re.search(r"\d / \d+ 分", text), f"{where} holds a line of the hidden checks' report"
        leaked = [name for name in names if name in text]
        assert not leaked, f"{where} holds hidden checks' names: {leaked[:3]}"
    # what the preview printed stays: the reader sees the public cases pass
    m03_4 = texts[site.out / "M03" / "M03-4.html"]
    assert "✓ 公開例子「residual」通過" in m03_4


def test_the_landing_page_says_who_the_course_is_for_and_how_to_start(site: Site, browser: Browser) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    who = re.search(r"^## 給誰\n\n- \*\*學生\*\*：(.{10})", readme, re.M)
    assert who is not None
    browser.open(f"{site.url}/index.html")
    headings = browser.evaluate(
        "[...document.querySelectorAll('article h2')].map(h => h.textContent.replace('#', '').trim())"
    )
    assert headings[:3] == ["給誰", "怎麼學", "課綱"], headings
    text = browser.evaluate("document.querySelector('article').innerText")
    assert who.group(1) in text
    colab = browser.evaluate("[...document.querySelectorAll('article a')].filter(a => a.href.includes('colab')).length")
    assert colab == 0, "the README's table of Colab links stays in the README: each chapter has its own"


# --- read on a phone too (issue 37) ----------------------------------------------------------------------

WIDTHS = (390, 1280)


@pytest.mark.parametrize("width", WIDTHS)
def test_one_search_box_at_the_top_right_and_nothing_runs_off_the_screen(
    site: Site, browser: Browser, width: int
) -> None:
    browser.set_width(width)
    try:
        for page in ("index.html", "M03/M03-4.html", "glossary.html"):
            browser.open(f"{site.url}/{page}")
            boxes = browser.evaluate(
                "[...document.querySelectorAll('.search-button, .search-button-field, form.bd-search input')]"
                ".filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0)"
                ".map(e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; })"
            )
            assert len(boxes) == 1, f"{page} at {width} px: {len(boxes)} search boxes"
            left, top = boxes[0]
            assert left > width * 0.5 and top < 100, f"{page} at {width} px: the search box is at ({left}, {top})"
            assert browser.evaluate("document.documentElement.scrollWidth") <= width, f"{page} runs off at {width} px"
            title = browser.evaluate(
                "(() => { const h = document.querySelector('article h1');"
                " return h ? h.scrollWidth <= h.clientWidth : true })()"
            )
            assert title, f"{page}: the title overflows at {width} px"
    finally:
        browser.set_width(1280)


def test_tables_have_room_around_their_values(site: Site, browser: Browser) -> None:
    browser.open(f"{site.url}/M03/M03-4.html")
    padding = browser.evaluate(
        "[...document.querySelectorAll('div.cell_output table td')].slice(0, 5)"
        ".map(td => parseFloat(getComputedStyle(td).paddingLeft))"
    )
    assert padding and min(padding) >= 6, padding


def test_the_site_has_a_favicon(site: Site) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{site.url}/favicon.ico") as answer:
        assert answer.status == 200 and answer.read(4) == b"\x00\x00\x01\x00"  # an ICO file
    page = (site.out / "M03" / "M03-4.html").read_text(encoding="utf-8")
    assert re.search(r'<link rel="icon" href="[^"]*favicon\.svg"', page)


def _feedback_of_wrong_sharing(tmp: Path) -> Path:
    """The feedback page of a student whose AddQuantizer and CatQuantizer never share (the sample class's
    wrong-sharing student), graded as the grader grades, without a sandbox."""
    from autograder.engine.grading import NotebookResult, StudentResult, failing_cases
    from autograder.engine.judge import judge
    from autograder.maintenance.fixtures import wrong_solutions
    from autograder.reports.results import feedback_html
    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.record import record_exercise
    from autograder.sandboxed.replay import derive

    chosen = {w.path.stem: w for w in wrong_solutions() if w.notebook == "M03-4"}
    evidence = {}
    for stem in ("add_no_sharing", "cat_no_sharing"):
        wrong = chosen[stem]
        namespace: dict = {}
        exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
        spec = exercises_of("M03-4")[wrong.exercise]
        recorded = json.loads(json.dumps(record_exercise(spec, namespace, 0)))
        evidence[wrong.exercise] = derive(spec, recorded, 0)
    result = NotebookResult("M03-4", "M03-4.ipynb")
    result.verdicts = judge({"notebook": "M03-4", "seed": 0, "exercises": evidence})
    result.failing_cases = failing_cases("M03-4", 0, evidence, result.verdicts)
    page = tmp / "feedback.html"
    page.write_text(feedback_html(StudentResult("wrong-sharing", "M03", [result])), encoding="utf-8")
    return page


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _feedback_of_wrong_sharing(tmp_path_factory.mktemp("feedback"))


@pytest.mark.parametrize("width", WIDTHS)
def test_the_feedback_names_each_cause_once_and_reads_on_a_phone(
    browser: Browser, feedback_page: Path, width: int
) -> None:
    browser.set_width(width)
    try:
        browser.open(feedback_page.as_uri())
        causes = browser.evaluate("[...document.querySelectorAll('.cause')].map(c => c.textContent)")
        assert len(causes) == 2, "one diagnosis per exercise (AddQuantizer, CatQuantizer), not one per check"
        assert all(text.count("可能的原因") == 1 for text in causes), causes
        explained = browser.evaluate("document.querySelectorAll('.exercise ul.checks li.fail pre').length")
        assert explained == 0, "the checks the cause explains are listed, not explained again"
        assert browser.evaluate("document.documentElement.scrollWidth") <= width, f"runs off at {width} px"
        scores = browser.evaluate("[...document.querySelectorAll('.score')].map(s => s.getClientRects().length)")
        assert scores and all(lines == 1 for lines in scores), "a score never wraps onto two lines"
        drawings = browser.evaluate(
            "[...document.querySelectorAll('img.drawing')].map(i => i.complete && i.naturalWidth > 0"
            " && i.getBoundingClientRect().right <= window.innerWidth)"
        )
        assert drawings and all(drawings), "each diagnosis shows its drawing, within the page"
    finally:
        browser.set_width(1280)


@pytest.mark.parametrize("which", ["site", "term_site"])
def test_the_feedback_links_each_cause_to_a_section_of_the_built_site(
    request: pytest.FixtureRequest, which: str, browser: Browser, feedback_page: Path
) -> None:
    """The same links land on the self-study site and on a term's site (published at the link base)."""
    from selfcheck.misconceptions import site_url

    site: Site = request.getfixturevalue(which)
    browser.open(feedback_page.as_uri())
    links = browser.evaluate("[...document.querySelectorAll('.cause a')].map(a => a.href)")
    assert len(links) == 2 and all(link.startswith(str(site_url())) for link in links), links
    for link in links:
        path, _, anchor = link.removeprefix(str(site_url())).partition("#")
        browser.open("about:blank")  # a link to another section of the same page loads no page
        browser.open(f"{site.url}/{path}#{anchor}")
        found = browser.evaluate(
            f"(() => {{ const e = document.getElementById({json.dumps(anchor)});"
            " return e ? !!e.closest('section') : false })()"
        )
        assert found, f"{link} does not land on a section of the built site"


# --- no nbgrader markers on the self-study site; a term's site without solutions (issue 52) ------------------

SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION.*?\n(.*?)^[ \t]*### END SOLUTION", re.M | re.S)


def normalized(line: str) -> str:
    return " ".join(line.split())


def exercise_cell(cell: nbformat.NotebookNode) -> bool:
    """One of an exercise's own cells (CONTRIBUTING): the solution, the self-check or the graded cell."""
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("solution") or meta.get("grade") or str(meta.get("grade_id", "")).endswith("_tests"))


@functools.cache
def solution_lines() -> dict[str, list[str]]:
    """Per notebook, the lines of code its answers hold (between the solution markers of ``source/``) that
    appear nowhere in a release notebook, not even as part of a line: what a page must not show unless it shows
    an answer. Comments and short lines (``return model``) are left out: the release notebooks hold most of them."""
    handed_out = "\n".join(
        normalized(line)
        for path in sorted((ROOT / "release").glob("M*/*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        for line in cell.source.splitlines()
    )
    found = {}
    for path in all_notebooks():
        lines = []
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                for region in SOLUTION_REGION.findall(cell.source):
                    lines += [normalized(line) for line in region.splitlines()]
        found[path.stem] = [
            line
            for line in dict.fromkeys(lines)
            if len(line) >= 16 and not line.startswith("#") and line not in handed_out
        ]
    return found


def page_text(path: Path) -> str:
    """A page's text as a reader sees it: tags dropped (the highlighting's spans too), entities read,
    every run of white space one space."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return normalized(html.unescape(re.sub(r"<[^>]+>", "", text)))


def site_texts(site: Site) -> dict[Path, str]:
    """Every text file of a built site: its pages as read (``page_text``) and as written, the rest as written."""
    texts = {}
    for path in site.out.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".js", ".ipynb", ".txt", ".json", ".inv", ".md"}:
            raw = path.read_bytes().decode("utf-8", errors="replace")
            texts[path] = page_text(path) + "\n" + raw if path.suffix == ".html" else raw
    return texts


def test_the_self_study_site_keeps_its_solutions_without_nbgraders_markers(site: Site) -> None:
    for path, text in site_texts(site).items():
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN", "END HIDDEN"):
            assert marker not in text, f"{path.relative_to(site.out)} holds {marker!r}"
    for notebook, lines in solution_lines().items():
        page = page_text(site.out / notebook[:3] / f"{notebook}.html")
        missing = [line for line in lines if line not in page]
        assert lines and not missing, f"{notebook}: the solution's lines not on the self-study page: {missing[:3]}"


def test_the_term_build_is_quick_and_prints_no_warning(term_site: Site) -> None:
    assert term_site.cpu_seconds < BUILD_SECONDS, f"the term's site took {term_site.cpu_seconds:.0f} s of CPU"
    assert term_site.stderr == ""
    assert len(term_site.stdout.splitlines()) == 1 and term_site.stdout.startswith("網站完成（課堂版")


def test_the_term_site_holds_no_solution_code(term_site: Site) -> None:
    """Compared with the source notebooks' answers, line by line, on every page and file of the site."""
    texts = site_texts(term_site)
    assert sum(len(lines) for lines in solution_lines().values()) > 200
    for path, text in texts.items():
        where = path.relative_to(term_site.out)
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "autograder", "✓ 公開例子"):
            assert marker not in text, f"{where} holds {marker!r}"
        for notebook, lines in solution_lines().items():
            shown = [line for line in lines if line in text]
            assert not shown, f"{where} shows {notebook}'s solution: {shown[:3]}"


@pytest.mark.parametrize("path", all_notebooks(), ids=lambda p: p.stem)
def test_each_term_chapter_is_its_release_notebook_unanswered_with_its_sections_and_drawings(
    term_site: Site, path: Path
) -> None:
    page = term_site.out / path.parent.name / f"{path.stem}.html"
    text, raw = page_text(page), page.read_text(encoding="utf-8")
    release_path = ROOT / "release" / path.parent.name / path.name
    release = nbformat.read(release_path, as_version=4)
    stubs = sum(cell.source.count("raise NotImplementedError") for cell in release.cells if cell.cell_type == "code")
    assert stubs and text.count("raise NotImplementedError") == stubs, f"{path.stem}: every exercise unanswered"
    headings = [
        line.lstrip("#").strip()
        for cell in release.cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if re.match(r"^#{2,6}\s", line)
    ]
    for heading in headings:
        assert normalized(re.sub(r"[`*]", "", heading)) in text, f"{path.stem}: the section {heading!r}"
    # the drawings of the source's cells that students have as they are (no exercise's own cell)
    source = nbformat.read(path, as_version=4)
    code = {cell.source for cell in release.cells if cell.cell_type == "code"}
    source.cells = [cell for cell in source.cells if not exercise_cell(cell) and cell.source in code]
    images = re.findall(r'<img[^>]*src="([^"]*_images/[^"]+)"', raw)
    assert len(images) == image_outputs(source), f"{path.stem}: the sections' drawings, none of an exercise's cells"
    for src in images:
        assert (page.parent / src).resolve().is_file(), f"{path.stem}: {src} is missing"
    offered = re.findall(r'href="([^"]*_downloads/[^"]+)"', raw)
    assert len(offered) == 1, f"{path.stem}: one download"
    assert (page.parent / offered[0]).resolve().read_bytes() == release_path.read_bytes(), "the student version"


def misconception_anchors() -> list[tuple[str, str, str]]:
    """Every section a misconception's "重讀" link names: (exercise, page, anchor), as ``section_url`` makes it."""
    from common.anchors import site_anchor
    from selfcheck.casekit import module_name
    from selfcheck.misconceptions import section_notebook

    found = []
    for path in all_notebooks():
        record = importlib.import_module(f"selfcheck.public.{module_name(path.stem)}").PUBLIC
        for exercise in record.values():
            for item in exercise.misconceptions:
                notebook = section_notebook(path.stem, item.section)
                page = f"{notebook.split('-')[0]}/{notebook}.html"
                anchor = site_anchor(notebook, item.section.anchor)
                found.append((f"{path.stem} {exercise.key} {item.key}", page, anchor))
    return found


@pytest.mark.parametrize("which", ["site", "term_site"])
def test_every_section_a_misconception_links_is_on_the_site(request: pytest.FixtureRequest, which: str) -> None:
    site: Site = request.getfixturevalue(which)
    anchors = misconception_anchors()
    assert len(anchors) > 50
    pages: dict[str, str] = {}
    for what, page, anchor in anchors:
        if page not in pages:
            pages[page] = (site.out / page).read_text(encoding="utf-8")
        assert f'id="{anchor}"' in pages[page], f"{what}: #{anchor} is not on {which}'s {page}"


def test_the_grader_links_a_term_site_when_the_instructor_says_so() -> None:
    """``PT2E_SITE_URL`` is the base of the feedback's "重讀" links; ``none``: no link, only where to reread."""
    code = (
        "from selfcheck.misconceptions import Section, section_url;"
        "print(section_url('M03-4', Section('A. 顯式共用：SharedQuantizationSpec')))"
    )
    term = "https://example.edu/pt2e-term"
    for base, expected in ((term, f"{term}/M03/M03-4.html#m03-4-"), ("none", "None")):
        env = dict(os.environ, PT2E_SITE_URL=base)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert done.stdout.strip().startswith(expected), done.stdout
