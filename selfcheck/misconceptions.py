"""Misconceptions: what a student whose answer is wrong probably believed, and where the chapter fixes it.

Each graded exercise declares the misconceptions it knows in its one record
(``Exercise(..., misconceptions=(...))`` in ``selfcheck/public/mXX_Y.py``). A ``Misconception`` has a
short name, two or three sentences in Chinese that say what the student probably believed and why it
is wrong, and the ``Section`` of a chapter that teaches it (its heading as the notebook shows it, and
its anchor on the course site). These are teaching material, not answers: they ship with the course.

What recognises a misconception:

- on the hidden cases, a *detector* beside the exercise's checks (``@detects`` in
  ``autograder/checks/test_mXX_Y.py``): it judges hidden evidence and stays with the grader;
- on the public cases, ``Misconception.public``, a predicate over the public evidence that the
  preview runs while the student works (only where the public cases can show the mistake).

Both are called with ``(seen, expected)``: the student's and the answer key's evidence of one
exercise (``{"cases": {case: {"value": …} | {"error": …}}}``). ``selfcheck.diagnosis`` has the
readers they share. The words a student reads are made here, once (``cause_lines``), for the
notebook and for the grader's feedback alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from common.anchors import heading_anchor, site_anchor

Detector = Callable[[Any, Any], bool]
"""``(seen, expected) -> bool``: the exercise's evidence, the student's and the answer key's."""


@dataclass(frozen=True)
class Section:
    """A part of a chapter: its heading as the notebook shows it (``A. 顯式共用：SharedQuantizationSpec``, the
    text after the ``#`` marks), and the chapter when it is not the exercise's own (``notebook="M03-1"``).

    Its anchor on the course site is derived from the heading (``anchor``), so every record that points to
    the same heading links to the same place; the site build labels the heading with it.
    """

    heading: str
    notebook: str = ""

    def __post_init__(self) -> None:
        if not self.heading.strip() or self.heading.lstrip().startswith("#"):
            raise ValueError(f"section heading {self.heading!r}: the heading's text, without the # marks")

    @property
    def anchor(self) -> str:
        """Derived from the heading (``common.anchors.heading_anchor``): ``a-sharedquantizationspec-a6e4d2``."""
        return heading_anchor(self.heading)


@dataclass(frozen=True)
class Misconception:
    """One half-understanding an exercise knows how to recognise.

    ``key``: a Python-style name, unique within the exercise (the wrong-solution fixtures name it);
    ``name``: the mistake in a short phrase; ``text``: two or three sentences, what the student probably
    believed and why it is wrong; ``section``: where the chapter teaches it; ``public``: a detector over
    the public cases' evidence, for the preview (``None`` where the public cases cannot show it);
    ``not_public``: where there is no public detector, why the public cases cannot show this mistake without
    giving the answer away (empty while nobody has judged it; the notebook rate counts both kinds);
    ``practice``: a short exercise of its own on this one idea (``selfcheck.practice.Practice``), offered by every
    diagnosis that names the misconception.
    """

    key: str
    name: str
    text: str
    section: Section
    public: Detector | None = None
    not_public: str = ""
    practice: Any = None
    """A ``selfcheck.practice.Practice`` (``Any`` here: that module imports this one)."""

    def __post_init__(self) -> None:
        if self.public is not None and self.not_public:
            raise ValueError(f"misconception {self.key!r}: a public detector, yet a reason why there can be none")


@cache
def site_url() -> str | None:
    """The course site's address (``[project.urls] Homepage``), ending with ``/``; None when unknown.

    Read from the installed package's metadata, so it is the same in the wheel, on Colab and in a
    checkout (which installs the course in editable mode). An instructor running a graded term sets
    ``PT2E_SITE_URL`` to the term's site (``make site TERM=1``, no solutions), or to ``none`` for no link
    (``docs/term.md``): the grader's "重讀" links then never open a solved exercise.
    """
    import os
    from importlib import metadata

    chosen = os.environ.get("PT2E_SITE_URL", "").strip()
    if chosen:
        return None if chosen.lower() == "none" else chosen.rstrip("/") + "/"

    try:
        urls = metadata.metadata("pt2e-course").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() == "homepage" and url.strip():
            return url.strip().rstrip("/") + "/"
    return None


def section_notebook(exercise_notebook: str, section: Section) -> str:
    """The chapter a section belongs to (the exercise's own unless the section names another)."""
    return section.notebook or exercise_notebook


def section_url(exercise_notebook: str, section: Section) -> str | None:
    """The section's address on the course site (``…/M03/M03-4.html#m03-4-a-…``), or None."""
    base = site_url()
    if base is None:
        return None
    notebook = section_notebook(exercise_notebook, section)
    module = notebook.split("-")[0]
    return f"{base}{module}/{notebook}.html#{site_anchor(notebook, section.anchor)}"


def where_to_read(exercise_notebook: str, section: Section) -> str:
    """How to find the section offline: ``M03-4 的「A. 顯式共用：SharedQuantizationSpec」``."""
    return f"{section_notebook(exercise_notebook, section)} 的「{section.heading.replace('`', '')}」"


def cause_lines(notebook: str, misconception: Misconception, first: bool = True) -> list[str]:
    """What a student reads about one likely cause: its name, its explanation, where to reread.

    The same words in the notebook's preview and in the grader's feedback. ``first``: the most likely
    cause (a second one is introduced as such).
    """
    lead = "可能的原因" if first else "也可能是"
    lines = [f"{lead}：{misconception.name}", misconception.text, reread_line(notebook, misconception.section)]
    if misconception.practice is not None:
        from selfcheck.practice import offer_line

        lines.append(offer_line(notebook, misconception.key))
    return lines


def reread_line(notebook: str, section: Section) -> str:
    """``重讀 M03-4 的「A. …」：<address on the course site>`` (the address only where the site is known)."""
    url = section_url(notebook, section)
    return f"重讀 {where_to_read(notebook, section)}" + (f"：{url}" if url else "")


NODE_TARGETS = Section("B. `node.target`：op 的身分", notebook="M01-1")
"""Where the course teaches that a node's target is an ATen op overload (a refused recording points here)."""


def by_key(misconceptions: tuple[Misconception, ...]) -> dict[str, Misconception]:
    """Key → misconception; raises ``ValueError`` on a repeated key."""
    found: dict[str, Misconception] = {}
    for item in misconceptions:
        if item.key in found:
            raise ValueError(f"two misconceptions are called {item.key!r}")
        found[item.key] = item
    return found


def causes_block(notebook: str, misconceptions: list[Misconception], indent: str = "") -> list[str]:
    """The likely causes as indented lines (at most two: the most likely, and a second one), as
    ``cause_lines`` words them: the name at ``indent``, the rest two spaces further in."""
    lines = []
    for index, misconception in enumerate(misconceptions[:2]):
        first, *rest = cause_lines(notebook, misconception, first=index == 0)
        lines += [f"{indent}{first}", *(f"{indent}  {line}" for line in rest)]
    return lines
