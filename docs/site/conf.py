"""Sphinx configuration of the course site (run by docs/site/build.py on the sources it stages).

Pages are the executed notebooks, rendered as committed (myst-nb, no execution). Search is
Chinese-aware: jieba segments the pages' text when the index is built (with a few course
terms added, ``zh_terms.txt``), and the query box segments a Chinese query into the words the
index knows (``ChineseSearch.js_splitter_code``), so 共用, 選擇性量化 and SharedQuantizationSpec
all find their chapters.
"""

from __future__ import annotations

import logging
import sys
import tomllib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphinx.application import Sphinx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from autograder.maintenance.colab import repository, site_url  # noqa: E402

with warnings.catch_warnings():  # jieba 0.42 has invalid escapes in its regexes (SyntaxWarning on 3.12+)
    warnings.simplefilter("ignore")
    import jieba

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict…" lines in the build log
    from sphinx.search.zh import SearchChinese

_project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

project = "PT2E 量化實作課"
author = "PT2E 量化實作課"
copyright = "PT2E 量化實作課"
release = version = str(_project["version"])
language = "zh_TW"

extensions = ["myst_nb", "sphinx.ext.githubpages"]  # githubpages: .nojekyll, so _static/ is served
exclude_patterns = ["_student", "**.ipynb_checkpoints"]  # _student: downloads, not pages

# The notebooks are committed executed: their outputs are the content, and nothing is run.
nb_execution_mode = "off"
nb_merge_streams = True
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = project
html_baseurl = site_url()
html_static_path = [str(HERE / "_static")]
html_css_files = ["course.css"]
html_js_files = ["search-summary.js"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
# One search, at the top right of every page: the magnifier in the article header (course.css shows it at
# every width). Neither pydata's header bar nor the sidebar gets a second search field.
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
html_favicon = str(HERE / "_static" / "favicon.svg")
html_extra_path = [str(HERE / "extra")]  # favicon.ico at the site's root, where browsers also look
html_theme_options = {
    "repository_url": repository(),
    "repository_branch": "main",
    "use_repository_button": True,
    "use_download_button": False,  # each chapter links its student version instead
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_content_items": [],
    "navbar_persistent": [],
}
html_search_language = "zh"
html_search_options = {"dict": str(HERE / "zh_terms.txt")}


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search, with a query splitter that segments Chinese like the index does.

    The index holds jieba's words (``SearchChinese.split``). A query typed without spaces
    (``選擇性量化``) is split in the browser by forward maximum matching against the index's own
    terms, so each part is a word the index has; Latin words are kept as typed.
    """

    # Sphinx 9.0 names the query's stemmer after language_name ("window.Stemmer = ChineseStemmer"), a
    # class that does not exist: Chinese search stops at "搜尋中…" (sphinx-doc/sphinx#14229, fixed by
    # #14416 in releases for Python 3.12+). The Latin words of a Chinese index use the English
    # stemmer, so the browser must use the English one too.
    language_name = "English"

    js_splitter_code = r"""
function splitQuery(query) {
  const index = (typeof Search !== "undefined" && Search._index) || {};
  const terms = index.terms || {};
  const titles = index.titleterms || {};
  const has = (word) =>
    Object.prototype.hasOwnProperty.call(terms, word) || Object.prototype.hasOwnProperty.call(titles, word);
  const words = [];
  for (const run of query.split(/[^\p{Letter}\p{Number}_]+/u)) {
    for (const part of run.match(/\p{Script=Han}+|[^\p{Script=Han}]+/gu) || []) {
      if (!/\p{Script=Han}/u.test(part)) {
        words.push(part);
        continue;
      }
      let start = 0;
      while (start < part.length) {
        let end = part.length;
        while (end > start + 1 && !has(part.slice(start, end))) end -= 1;
        if (end > start + 1) words.push(part.slice(start, end));
        start = end > start + 1 ? end : start + 1;
      }
    }
  }
  return words;
}
"""


def setup(app: Sphinx) -> dict[str, bool]:
    app.add_search_language(ChineseSearch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
