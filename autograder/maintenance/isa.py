"""Instruction-set profiles: running the course as a CPU with fewer vector instructions would.

Torch picks its own kernels by the CPU's instruction set (``ATEN_CPU_CAPABILITY``), and so do
the two libraries it calls for convolutions and matrix products: oneDNN (``ONEDNN_MAX_CPU_ISA``)
and MKL (``MKL_ENABLE_INSTRUCTIONS``). Each sums in its own order, so the last bits of a float
differ from one CPU to the next, and a model trained for eight epochs ends up elsewhere. A
profile caps all three at once, so that one machine can check what a student's laptop, Colab
or a CPU without AVX2 will compute. A cap only takes effect at or below what the CPU has.

``pt2e-course isa`` runs the answer key's previews and chosen notebooks under every profile
this CPU offers; the tests run the same checks (``tests/test_isa.py``).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import nbformat

PROFILES: dict[str, dict[str, str]] = {
    "default": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512": {
        "ATEN_CPU_CAPABILITY": "avx512",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
    },
}
"""Capped profiles, from the oldest CPU to the newest; ``native`` (nothing capped) is the machine itself."""
NATIVE = "native"
VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


@functools.cache
def native_capability() -> str:
    """What torch picks on this machine with nothing capped: ``DEFAULT``, ``AVX2``, ``AVX512`` (x86).

    Asked of this process's torch when nothing caps it, else of a fresh process without the caps."""
    if not any(variable in os.environ for variable in VARIABLES):
        import torch

        return torch.backends.cpu.get_cpu_capability()
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def available() -> list[str]:
    """The profiles this CPU can run, ``native`` first: a cap above the CPU would change nothing."""
    native = native_capability().lower()
    order = list(PROFILES)
    top = order.index(native) if native in order else 0
    return [NATIVE, *order[: top + 1]]


def rotation(module: str, turn: int = 0) -> str:
    """The capped profile (never ``native``) that ``module``'s notebooks run under in the tests, on ``turn``.

    The modules take turns over the capped profiles this CPU offers, and each turn is the next one over:
    the graded run of the nbgrader class (``tests/test_autograde.py``, turn 0), the whole source notebook
    (``tests/test_notebooks.py``, turn 1) and the unanswered release notebook (``tests/test_unanswered.py``,
    turn 2) each see another CPU, and together every capped profile (up to three)."""
    from autograder.course import modules

    others = [p for p in available() if p != NATIVE]
    return others[(modules().index(module) + turn) % len(others)]


def environment(profile: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``profile``'s caps, or without any for ``native``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in VARIABLES}
    if profile != NATIVE:
        env.update(PROFILES[profile])
    return env


# --- the answer key's previews under a profile ------------------------------------------------------


def key_namespaces() -> dict[tuple[str, str], dict[str, object]]:
    """(notebook, exercise) → the answer key's namespace, for every exercise of the course."""
    import importlib

    from autograder.course import notebook_id, source_notebooks
    from autograder.sandboxed.cases.base import exercises_of, module_name

    found = {}
    for path in source_notebooks():
        notebook = notebook_id(path)
        key = vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))
        for exercise in exercises_of(notebook):
            found[(notebook, exercise)] = dict(key)
    return found


def right_namespaces(fixtures: Path) -> dict[tuple[str, str, str], dict[str, object]]:
    """(notebook, exercise, fixture name) → the namespace of each correct-but-different fixture."""
    import re

    found = {}
    for path in sorted(fixtures.glob("*/*.py")):
        code = path.read_text(encoding="utf-8")
        exercise = re.search(r"^# exercise: (.*)$", code, flags=re.M)
        if exercise is None:
            continue
        namespace: dict[str, object] = {}
        exec(compile(code, str(path), "exec"), namespace)
        found[(path.parent.name, exercise.group(1).strip(), path.stem)] = namespace
    return found


def preview_failures(answers: Mapping[tuple[str, ...], Mapping[str, object]]) -> dict[str, str]:
    """``"notebook exercise [fixture] case"`` → what its preview says, for every public case that fails."""
    from contextlib import redirect_stdout
    from io import StringIO

    from selfcheck.preview import ChecksFailed, public_problems

    failures: dict[str, str] = {}
    for where, namespace in answers.items():
        notebook, exercise = where[0], where[1]
        try:
            with redirect_stdout(StringIO()):
                problems = public_problems(notebook, exercise, namespace)
        except ChecksFailed as exc:
            failures[" ".join(where)] = str(exc)
            continue
        failures.update({f"{' '.join(where)} {case}": str(p) for case, p in problems.items() if p is not None})
    return failures


def previews_under(profile: str, right_fixtures: Path | None = None, timeout: float = 1800) -> dict[str, str]:
    """The preview failures of the answer key (and of ``right_fixtures``) in a fresh process under ``profile``."""
    import json

    command = [sys.executable, "-P", "-m", "autograder.maintenance.isa", "previews"]
    if right_fixtures is not None:
        command.append(str(right_fixtures))
    done = subprocess.run(
        command, env=environment(profile), capture_output=True, text=True, timeout=timeout, cwd=str(_root())
    )
    if done.returncode != 0:
        raise RuntimeError(f"previews under {profile} did not finish: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _root() -> Path:
    from autograder.course import ROOT

    return ROOT


# --- a notebook under a profile -----------------------------------------------------------------------


def execute_under(
    nb: nbformat.NotebookNode, cwd: Path, profile: str, allow_errors: bool = False
) -> nbformat.NotebookNode:
    """Run every cell of ``nb`` in a fresh kernel whose CPU is capped to ``profile``; returns ``nb``."""
    from autograder.maintenance.execute import execute

    return execute(nb, cwd, allow_errors=allow_errors, env=environment(profile))


def notebook_problems(path: Path, profile: str) -> list[str]:
    """What goes wrong when the committed notebook at ``path`` runs under ``profile``: errors, noise on
    stderr, and outputs that are not what the committed ones show (``autograder.maintenance.outputs``)."""
    import copy

    from autograder.maintenance.outputs import errors_and_noise, notebook_difference

    committed = nbformat.read(path, as_version=4)
    fresh = execute_under(copy.deepcopy(committed), path.parent, profile, allow_errors=True)
    problems = [f"code cell {i}：{kind} {text}" for i, kind, text in errors_and_noise(fresh)]
    stale = notebook_difference(committed, fresh)
    if stale is not None:
        problems.append(f"輸出和 commit 的不同：{stale}")
    return problems


def main(argv: list[str]) -> int:
    """``python -m autograder.maintenance.isa previews [RIGHT_FIXTURES]``: preview failures as one JSON line."""
    import json

    if not argv or argv[0] != "previews":
        print("usage: python -m autograder.maintenance.isa previews [RIGHT_FIXTURES_FOLDER]", file=sys.stderr)
        return 2
    from common.pt2e import quiet

    quiet()
    answers: dict[tuple[str, ...], Mapping[str, object]] = dict(key_namespaces())
    if len(argv) > 1:
        answers.update(right_namespaces(Path(argv[1])))
    print(json.dumps(preview_failures(answers), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
