"""The chapter sections the misconceptions point to, found in the notebooks.

A ``Misconception`` (``selfcheck.misconceptions``) names a ``Section``: a heading of a chapter and an
anchor. The course site puts the label ``<notebook>-<anchor>`` on that heading (``docs/site/build.py``
calls ``labelled_sources``), so the feedback's link lands on it; ``tests/test_records.py`` holds every
section to a heading that exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import nbformat

from autograder.course import notebook_id, source_notebooks
from selfcheck.misconceptions import Section, section_notebook, site_anchor

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


def labels_by_notebook() -> dict[str, dict[str, str]]:
    """Notebook → heading → the site label to put on it (``m03-4-a-sharedquantizationspec-a6e4d2``)."""
    found: dict[str, dict[str, str]] = {}
    for notebook, _, _, section in referenced_sections():
        where = section_notebook(notebook, section)
        found.setdefault(where, {})[section.heading] = site_anchor(where, section.anchor)
    return found


def label_headings(nb: nbformat.NotebookNode, labels: dict[str, str]) -> list[str]:
    """Put a MyST label line ``(label)=`` before each heading of ``nb`` named in ``labels``; returns the
    headings it did not find."""
    missing = set(labels)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        out = []
        for line in lines:
            match = HEADING.match(line)
            if match and match.group(2) in labels:
                if out and out[-1].strip():
                    out.append("")
                out.append(f"({labels[match.group(2)]})=")
                missing.discard(match.group(2))
            out.append(line)
        cell.source = "\n".join(out)
    return sorted(missing)
