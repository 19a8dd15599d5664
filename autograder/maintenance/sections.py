"""The chapter sections the misconceptions point to, found in the notebooks.

A ``Misconception`` (``selfcheck.misconceptions``) names a ``Section``: a heading of a chapter, whose
anchor is derived from its text. The course site labels every section heading that way
(``docs/site/build.py``), so the feedback's link lands on it; ``tests/test_records.py`` holds every
section to a heading that exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import nbformat

from autograder.course import notebook_id, source_notebooks
from selfcheck.misconceptions import Section, section_notebook

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def headings(nb: nbformat.NotebookNode) -> list[str]:
    """The text of every markdown heading of ``nb``, in order."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            match = HEADING.match(line)
            if match:
                found.append(match.group(2))
    return found


def referenced_sections() -> Iterator[tuple[str, str, str, Section]]:
    """``(exercise's notebook, exercise key, misconception key, section)`` of every misconception of the course."""
    from selfcheck.preview import public_exercises

    for path in source_notebooks():
        notebook = notebook_id(path)
        for key, exercise in public_exercises(notebook).items():
            for misconception in exercise.misconceptions:
                yield notebook, key, misconception.key, misconception.section


def targets() -> dict[str, set[str]]:
    """Notebook → the headings the misconceptions point to."""
    found: dict[str, set[str]] = {}
    for notebook, _, _, section in referenced_sections():
        found.setdefault(section_notebook(notebook, section), set()).add(section.heading)
    return found
