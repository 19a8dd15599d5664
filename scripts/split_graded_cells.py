"""One-off migration: split each graded cell of source/ into the student's preview and the hidden grade.

Before, a graded cell (grade_id ``<key>_hidden``) imported ``autograder`` in the students'
copy too::

    from autograder.notebook import grade

    final = False
    ### BEGIN HIDDEN TESTS
    final = True
    ### END HIDDEN TESTS
    grade("M03-4", "add_quantizer", globals(), final=final)

After, what students get needs only the wheel (``selfcheck``), and ``autograder`` appears
only in the region nbgrader removes from the release::

    from selfcheck import preview
    preview("M03-4", "add_quantizer", globals())
    ### BEGIN HIDDEN TESTS
    from autograder.notebook import grade
    grade("M03-4", "add_quantizer", globals())
    ### END HIDDEN TESTS

The leading comment lines are kept (with 報錯 → 出錯). Only the cell source changes; the
outputs stay until the notebooks are executed again. Cells already in the new form are
left alone, so running the script twice changes nothing.

    python scripts/split_graded_cells.py [NOTEBOOK ...]   # default: every notebook under source/
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
OLD_CALL = re.compile(r'^grade\("(?P<notebook>[^"]+)", "(?P<exercise>[^"]+)", globals\(\), final=final\)$', re.M)
OLD_LINES = {
    "from autograder.notebook import grade",
    "final = False",
    "### BEGIN HIDDEN TESTS",
    "final = True",
    "### END HIDDEN TESTS",
    "",
}


def split_cell(source: str) -> str | None:
    """The new source of an old-style graded cell; None when ``source`` is not one (already split)."""
    call = OLD_CALL.search(source)
    if call is None:
        return None
    comments, rest = [], []
    for line in source.splitlines():
        (comments if line.startswith("# ") else rest).append(line)
    unexpected = [line for line in rest if line not in OLD_LINES and not OLD_CALL.fullmatch(line)]
    if unexpected:
        raise ValueError(f"graded cell with unexpected lines: {unexpected}")
    args = f'"{call["notebook"]}", "{call["exercise"]}", globals()'
    return "\n".join(
        [
            *(line.replace("報錯", "出錯") for line in comments),
            "from selfcheck import preview",
            f"preview({args})",
            "### BEGIN HIDDEN TESTS",
            "from autograder.notebook import grade",
            f"grade({args})",
            "### END HIDDEN TESTS",
        ]
    )


def split_notebook(path: Path) -> int:
    """Rewrite the graded cells of ``path`` in place; returns how many changed."""
    nb = nbformat.read(path, as_version=4)
    changed = 0
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or not str(meta.get("grade_id", "")).endswith("_hidden"):
            continue
        new = split_cell(cell.source)
        if new is not None and new != cell.source:
            cell.source = new
            changed += 1
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str]) -> None:
    paths = [Path(p) for p in argv] or sorted((ROOT / "source").glob("M*/*.ipynb"))
    for path in paths:
        print(f"{path}: {split_notebook(path)} graded cell(s) split")


if __name__ == "__main__":
    main(sys.argv[1:])
