"""Executing notebooks with nbclient, as the course's tests and release do."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

CELL_TIMEOUT = 600


def execute(
    nb: nbformat.NotebookNode,
    cwd: Path,
    allow_errors: bool = False,
    env: dict[str, str] | None = None,
    shutdown: str = "immediate",
) -> nbformat.NotebookNode:
    """Run every cell of ``nb`` in a fresh python3 kernel started in ``cwd`` (with ``env``, else this
    process's environment); returns ``nb``. The kernel is thrown away afterwards: ``immediate`` kills it,
    sparing the 1.5 s a torch kernel takes to exit ``graceful``-ly (``bench/notebooks.py`` compares)."""
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        allow_errors=allow_errors,
        record_timing=False,
        shutdown_kernel=shutdown,
    )
    if env is None:
        client.execute()
    else:
        client.execute(env=env)
    return coalesce_streams(nb)


def coalesce_streams(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Merge consecutive stream outputs of the same name (print() arrives in pieces)."""
    for cell in nb.cells:
        merged: list[nbformat.NotebookNode] = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                output.output_type == "stream"
                and previous is not None
                and previous.output_type == "stream"
                and previous.name == output.name
            ):
                previous.text += output.text
            else:
                merged.append(output)
        if "outputs" in cell:
            cell.outputs = merged
    return nb


def execute_in_place(path: Path) -> float:
    """Execute the notebook at ``path`` and write it back with its outputs; returns seconds taken."""
    start = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # timings from an older run are noise in a diff
        cell.metadata.pop("execution", None)
    execute(nb, path.parent)
    nb.metadata.get("language_info", {}).pop("version", None)  # the Python patch level is machine noise
    nbformat.write(nb, path)
    return time.perf_counter() - start
