"""Shared fixtures and helpers of the repository's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# `make test` runs two xdist workers on two cores. With torch's default of one intra-op thread per
# core in every worker and in every kernel a test starts, four OpenMP threads spin over two cores:
# a slice of test_checks took 2.3× as long that way (bench/threads.py: 83 s against 36 s). Each test process, and what it
# starts, computes on one thread, as the sandbox's jobs already do. A caller's own setting wins.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """torch may already be imported by a plugin: set its thread count too."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# The hidden checks' plugin (--evidence, the seen / expected fixtures), loaded explicitly:
# the package students install has no pytest entry point, and autograder is not in it.
pytest_plugins = ("autograder.integrations.pytest_plugin",)
FIXTURES = ROOT / "tests" / "fixtures"


from autograder.maintenance.fixtures import (  # noqa: E402  (one parser of the fixtures' headers)
    RightSolution,
    WrongSolution,
    right_solutions,
    wrong_solutions,
)

__all__ = ["FIXTURES", "ROOT", "RightSolution", "WrongSolution", "right_solutions", "wrong_solutions"]


# --- notebooks and nbgrader courses ---------------------------------------------------------------

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import nbformat  # noqa: E402
import pytest  # noqa: E402


def text_outputs(nb: nbformat.NotebookNode) -> list[list[tuple[str, str]]]:
    """Per code cell, its outputs as (kind, text): streams by name, results by their text/plain."""
    from autograder.maintenance.outputs import plain

    return plain(nb)


def solution_lines(cell_source: str) -> list[str]:
    """The lines between ### BEGIN SOLUTION and ### END SOLUTION."""
    lines, inside = [], False
    for line in cell_source.splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def tool_env(gradebook: Path) -> dict[str, str]:
    """The environment nbgrader needs (autograder.maintenance.release.tool_env), with its own gradebook."""
    from autograder.maintenance.release import tool_env as release_env

    return {**release_env(), "PT2E_GRADEBOOK": str(gradebook)}


def make_course(tmp: Path, modules: list[str]) -> Path:
    """A throwaway course directory with the config, source/ and release/ of ``modules``."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp / "nbgrader_config.py")
    for module in modules:
        shutil.copytree(ROOT / "source" / module, tmp / "source" / module)
        if (ROOT / "release" / module).exists():
            shutil.copytree(ROOT / "release" / module, tmp / "release" / module)
    return tmp


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run nbgrader in ``course`` with its own gradebook; fails the test with nbgrader's log."""
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=tool_env(course / "gradebook.db"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def processes_of(uid: int) -> list[int]:
    """The processes this machine runs as ``uid`` (to check a job left none behind)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            line = next((x for x in status.splitlines() if x.startswith("Uid:")), "")
            if line and int(line.split()[1]) == uid:
                found.append(int(entry))
    return found


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


SLOW_FILES = frozenset(
    {
        "test_autograde.py",  # an nbgrader class per module, graded twice
        "test_exchange.py",  # nbgrader's exchange cycle with two students as local users
        "test_forked_kernels.py",  # kernels forked and interrupted
        "test_hostile.py",  # a hostile class, graded in the sandbox
        "test_hub.py",  # the demo JupyterHub, started, logged into and stopped
        "test_hostile_replay.py",
        "test_grading.py",  # the sample class, graded
        "test_isa.py",  # every preview under every instruction-set profile
        "test_isolation.py",  # sandboxes started and attacked, a few seconds each
        "test_memory_escape.py",  # memory outside every resident set, held under both memory modes and graded
        "test_classmate_memory.py",  # classmates scan their memory for an honest answer, in both memory modes
        "test_release.py",  # nbgrader generate_assignment per module
        "test_warm.py",  # fork servers warmed and compared with cold ones
        "test_notebooks.py",  # every source notebook, executed
        "test_site.py",  # the site, built and opened in Chromium
        "test_unanswered.py",  # every release notebook, executed unanswered
    }
)
"""Test files whose tests run whole notebooks, nbgrader, instruction-set profiles or sandboxes (seconds to
minutes each): ``make test`` runs them, ``make test-fast`` (``-m "not slow"``) leaves them out."""


LOWERING_NOTEBOOKS = frozenset({"M08-3"})
"""Notebooks whose hidden cases lower every answer to ExecuTorch and run it (seconds per fixture): ``make
test-fast`` judges their answer key, not their fixtures or release stub (``pytest tests/test_checks.py -k M08-3`` does)."""


def is_slow(item: pytest.Item) -> bool:
    """A test ``make test-fast`` leaves out: one of ``SLOW_FILES``, a hidden check on a seed other than 0
    (``make test-fast`` judges every fixture on seed 0 only), or a fixture or the release stub of one of
    ``LOWERING_NOTEBOOKS``."""
    if item.path.name in SLOW_FILES:
        return True
    callspec = getattr(item, "callspec", None)
    if item.path.name not in ("test_checks.py", "test_notebook_diagnosis.py") or callspec is None:
        return False
    if item.originalname == "test_the_handed_out_stub_gets_zero":  # M08-3's lowers ExecuTorch's reference
        return callspec.params.get("notebook") in LOWERING_NOTEBOOKS
    fixture = callspec.params.get("wrong") or callspec.params.get("right")
    return callspec.params.get("seed", 0) != 0 or getattr(fixture, "notebook", None) in LOWERING_NOTEBOOKS


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Keep the tests of one module-scoped, parametrized course on one xdist worker (and the hidden checks'
    tests of one notebook).

    A mark on a fixture's ``pytest.param`` does not reach the items, so ``--dist loadgroup``
    would spread them and every worker would build the same course (an nbgrader run of minutes).
    The marks go on before xdist reads them (this wraps its hook); afterwards, a worker checks
    that xdist did group them: a pytest it does not fit leaves the groups silently unused.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and item.path.name == "test_autograde.py" and "graded" in callspec.params:
            item.add_marker(pytest.mark.xdist_group(f"autograde-{callspec.params['graded']}"))
        if callspec is not None and item.path.name in ("test_checks.py", "test_isa.py", "test_notebook_diagnosis.py"):
            # one worker per notebook: the answer key's evidence on each seed is computed once, not on both, and
            # test_isa's previews of a notebook's wrong fixtures lower to ExecuTorch (M08-3) where it is warm
            params = callspec.params
            fixture = params.get("wrong") or params.get("right")
            notebook = params.get("notebook") or getattr(fixture, "notebook", None)
            if notebook is not None:
                item.add_marker(pytest.mark.xdist_group(f"checks-{notebook}"))
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
    result = yield
    if config.getoption("loadgroup", default=False):
        ungrouped = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
        if ungrouped:
            raise pytest.UsageError(f"xdist ignored the xdist_group of {ungrouped[0]}: check the pytest version")
    return result


@pytest.fixture(scope="session")
def kernel_zygotes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder of this worker's kernel zygotes and of the kernelspec that forks from them
    (``tests/forked_kernels.py``); the zygotes stop with the session."""
    from forked_kernels import kernelspec, stop_zygotes

    folder = tmp_path_factory.mktemp("kernels")
    kernelspec(folder)
    yield folder
    stop_zygotes(folder)


@pytest.fixture
def forked_kernel(kernel_zygotes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In this test, a python3 kernel is forked from a zygote that has imported torch (2 s less per notebook)."""
    from forked_kernels import DIRECTORY

    monkeypatch.setenv(DIRECTORY, str(kernel_zygotes))
    data = kernel_zygotes / "jupyter"  # what ``kernelspec`` made
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(data), os.environ.get("JUPYTER_PATH")])))
    return kernel_zygotes
