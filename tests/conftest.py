"""Shared fixtures and helpers of the repository's tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# `make test` runs two xdist workers on two cores. With torch's default of one intra-op thread per
# core in every worker and in every kernel a test starts, four OpenMP threads spin over two cores:
# a slice of test_checks took 2.3× as long that way (bench/threads.py: 83 s against 36 s). Each test process, and what it
# starts, computes on one thread, as the sandbox's jobs already do. A caller's own setting wins.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """torch may already be imported by a plugin: set its thread count too. Under ``--dist loadgroup``, the work
    goes out longest first (``longest_first``)."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if getattr(config.option, "dist", None) == "loadgroup":
        # xdist would hand out the groups with the most tests first; ``longest_first`` orders them by time instead
        config.option.loadscopereorder = False


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


# --- work that the xdist workers of one run share ---------------------------------------------------


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every xdist worker sees: the run's base temporary folder (each worker's is
    a folder in it), or this process's own without xdist (never one that another run left behind)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder = base / "shared"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], dict[str, Any]]
) -> tuple[Path, dict[str, Any]]:
    """``build(folder)`` once in this test run, by whichever worker asks first; a worker that asks meanwhile
    waits for it. Returns the folder and what ``build`` returned (JSON). A build that raises leaves nothing: the
    next worker that asks builds again (and fails as loudly)."""
    from filelock import FileLock

    shared = shared_folder(tmp_path_factory)
    folder, done = shared / name, shared / f"{name}.json"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            done.write_text(json.dumps(build(folder), ensure_ascii=False), encoding="utf-8")
    return folder, read_json(done)


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


UNIT_SECONDS = {
    "checks-M08-3": 330,  # every wrong answer lowered to ExecuTorch: 5 to 15 s a test
    "exchange": 130,
    "hub": 200,
    "autograde-M03": 130,
    "autograde-M08": 205,
    "autograde-M09": 175,
    "hostile": 130,
    "autograde-M01": 90,
    "test_notebooks.py::test_source_notebook_runs_validates_and_is_current[M09-3]": 50,
    "autograde-M04": 55,
    "test_grading.py::test_sample_class_gradebook": 70,  # grades the sample class for test_grading (built_once)
    "classmate_memory": 100,
    "isolation": 145,
    "site": 90,
    "test_torchao_pattern_graphs_are_traced_once_only_for_convs_present_and_give_the_same_graphs": 45,
    "autograde-M06": 80,
    "autograde-M07": 70,
    "test_notebooks.py::test_source_notebook_runs_validates_and_is_current[M08-3]": 90,
    "test_unanswered.py::test_release_notebook_runs_unanswered_with_only_explained_errors[M09-3]": 50,
    "test_gradescope_bundle_grades_like_grade": 70,
    "autograde-M05": 60,
    "synthetic-class": 30,
    "warm": 75,
    "test_regrading_some_students_merges_into_the_gradebook": 40,
    "test_key_and_correct_fixtures_pass_every_preview": 60,
    "test_a_scaffolded_exercise_is_released_and_graded_like_the_others": 60,
    "autograde-M02": 40,
    "test_the_report_shows_a_copier_beside_the_answer_it_copied": 45,
    "hostile-replay": 35,
    "memory_escape": 80,
    "test_the_class_report_counts_who_passed_the_practice": 10,  # grades three M03-4 notebooks
}
"""Seconds of the longest work units of ``make test`` (an xdist group, or one test by a part of its id), as the
last full run on two cores measured them (2026-12-08, AMD EPYC, a bench running beside it: only their order
matters): ``longest_first`` hands them out first."""
SECONDS_PER_TEST = {"test_notebooks.py": 10.0, "test_unanswered.py": 8.0, "test_checks.py": 0.45}
"""What a test of an unlisted unit costs, by its file (0.3 s elsewhere)."""


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the work units ``--dist loadgroup`` hands out (an xdist group, or one test) longest first.

    xdist gives each worker a unit when it is nearly out of work, in the order of the collection (``pytest_configure``
    turns off its reordering by the number of tests). Long units last would leave one worker grading an nbgrader
    class while the other idles; longest first, the short tests fill in at the end. A unit's tests keep their
    order, and so do units of the same estimate."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        units.setdefault(str(group.args[0]) if group else item.nodeid, []).append(item)

    def seconds(unit: str) -> float:
        if unit in UNIT_SECONDS:  # a group
            return UNIT_SECONDS[unit]
        listed = [s for key, s in UNIT_SECONDS.items() if key.startswith("test_") and "::" in unit and key in unit]
        return listed[0] if listed else sum(SECONDS_PER_TEST.get(t.path.name, 0.3) for t in units[unit])

    order = sorted(units, key=seconds, reverse=True)
    return [item for unit in order for item in units[unit]]


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
    if config.getoption("loadgroup", default=False):
        items[:] = longest_first(items)
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
