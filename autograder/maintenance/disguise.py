"""A copy as a copier disguises it: every name the code defines renamed, every comment and blank line dropped.

Used to plant copies in a class (``tests/test_similarity.py``, ``bench/similarity.py``) and to check that the
similarity check still finds them. Names the code only uses (imports, builtins, attributes of other objects)
stay: renaming them would break the copy.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import random
import tokenize
from typing import Any


def defined_names(code: str) -> set[str]:
    """The names ``code`` defines: functions, classes, their parameters, and variables it assigns; not methods nor a
    constructor's parameters, which other code calls by name."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    names: set[str] = set()
    interface: set[str] = set()  # methods (called by others by name) and constructor parameters (keywords)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    interface.add(item.name)
                    if item.name == "__init__":
                        interface |= {a.arg for a in [*item.args.args, *item.args.kwonlyargs]}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    names -= interface
    keep = imported | set(dir(builtins)) | {"self", "cls"}
    return {n for n in names if n not in keep and not keyword.iskeyword(n) and not n.startswith("__")}


def disguise(code: str, seed: int = 0, keep: set[str] | None = None) -> str:
    """``code`` with its defined names renamed (but ``keep``: names the notebook calls the answer by), its comments
    and blank lines dropped. Code that does not tokenize is returned with its comments dropped only."""
    rng = random.Random(seed)
    names = sorted(defined_names(code) - (keep or set()))
    fresh = {
        name: f"{rng.choice('abcdefghjkmnpqrstuvwxyz')}{index}_{rng.randrange(1000)}"
        for index, name in enumerate(names)
    }
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "\n".join(line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    lines = code.splitlines()
    edits = sorted(
        (
            (tok.start[0] - 1, tok.start[1], tok.end[1], "" if tok.type == tokenize.COMMENT else fresh[tok.string])
            for tok in tokens
            if tok.type == tokenize.COMMENT or (tok.type == tokenize.NAME and tok.string in fresh)
        ),
        reverse=True,
    )
    for row, start, end, text in edits:  # right to left on each line: earlier columns stay where they were
        lines[row] = lines[row][:start] + text + lines[row][end:]
    return "\n".join(line.rstrip() for line in lines if line.strip())


def names_in(code: str) -> set[str]:
    """Every name token of ``code`` (what the course's own cells call an answer by)."""
    try:
        return {t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()


def disguised_notebook(nb: Any, seed: int = 0) -> Any:
    """A copy of a submitted notebook as a copier hands it in: each solution cell ``disguise``d, keeping the names the
    notebook's other cells use."""
    import copy

    copied = copy.deepcopy(nb)
    solution = [c for c in copied.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    course = "\n".join(c.source for c in copied.cells if c.cell_type == "code" and c not in solution)
    keep = names_in(course)
    for index, cell in enumerate(solution):
        if cell.cell_type == "code":
            cell.source = disguise(cell.source, seed=seed + index, keep=keep)
    return copied
