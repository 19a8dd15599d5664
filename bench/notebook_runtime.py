"""Issue 49's cost measure: each source notebook's run time at HEAD against a baseline commit, in one run.

The goal: the public cases added to a notebook's self-check and preview make it run at most 10 % longer. The
baseline (default 2e4dd6b, the commit before the issue-49 work) and HEAD are each checked out into a temporary
``git worktree`` (HEAD too: the working tree holds other people's unfinished edits), and each notebook asked is
executed from both checkouts alternately, ``--rounds`` times, every run in a fresh kernel started in that
checkout's notebook folder with the checkout first on PYTHONPATH (the course is installed in editable mode from
this repository; a probe kernel prints where ``selfcheck``, ``common`` and ``autograder`` were imported from,
and the bench stops unless each is the checkout's own). The measure is the kernel's CPU time (user + sys of the
kernel and the processes it waited for), which a loaded machine changes far less than the wall time; both are
printed, as medians, with the ratio HEAD / baseline. Kernels run with ``--threads`` intra-op threads (default
1: OpenMP threads spinning on a busy machine would count as CPU time). Nothing here is a test: only the ratios
mean something, and only within one run.

``--cases`` then times each public case of the notebooks over the goal (or of the notebooks named after it) on
the answer key's namespace (``selfcheck.casekit.collect``, as the preview runs them), in both checkouts: the
cases that cost most, and which of them are new since the baseline.

    .venv/bin/python bench/notebook_runtime.py [--base 2e4dd6b] [--head HEAD] [--rounds 3]
        [--notebooks M03-4 M04-3 ... | --changed] [--threads 1] [--cases [NOTEBOOK ...]] [--cases-only]

``--changed``: the notebooks whose public record (``selfcheck/public/``) differs between the two commits.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "2e4dd6b"
GOAL = 1.10
PACKAGES = ("selfcheck", "common", "autograder")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def commit_of(revision: str) -> str:
    """The full hash of ``revision``, fixed once: a commit made during the run changes nothing."""
    return git("rev-parse", "--verify", f"{revision}^{{commit}}")


@contextmanager
def worktrees(commits: dict[str, str]) -> Iterator[dict[str, Path]]:
    """Each commit (label → hash) checked out, detached, in a temporary worktree; removed afterwards, whatever
    happened (SIGTERM included: it becomes SystemExit while these exist)."""
    top = Path(tempfile.mkdtemp(prefix="notebook-runtime-"))
    made: list[Path] = []
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        paths = {}
        for label, commit in commits.items():
            path = top / label
            git("worktree", "add", "--detach", "--quiet", str(path), commit)
            made.append(path)
            paths[label] = path
        yield paths
    finally:
        for path in made:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(top, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def kernel_env(checkout: Path, threads: int) -> dict[str, str]:
    """This process's environment with ``checkout`` first on the kernel's import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


# --- child mode: one notebook in one kernel ---------------------------------------------------------------


def run_one(checkout: Path, notebook: str, threads: int, hidden: bool) -> None:
    """Execute ``notebook`` of ``checkout`` (``"-"``: the probe), print its kernel's CPU and wall seconds as JSON;
    without ``hidden``, each cell as the students run it (the hidden tests' ``grade(...)`` taken out, as nbgrader
    does: the solutions and the previews stay)."""
    import nbformat

    from autograder.engine.submission import as_released
    from autograder.maintenance.execute import execute

    if notebook == "-":
        nb, cwd = probe_notebook(), checkout
    else:
        path = checkout / "source" / notebook.split("-")[0] / f"{notebook}.ipynb"
        nb, cwd = nbformat.read(path, as_version=4), path.parent
        if not hidden:
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.source = as_released(cell.source)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    execute(nb, cwd, env=kernel_env(checkout, threads))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the kernel, killed and reaped by execute
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result: dict[str, object] = {"cpu": cpu, "wall": wall}
    if notebook == "-":
        printed = [o.text for o in nb.cells[0].outputs if o.output_type == "stream" and o.name == "stdout"]
        result["files"] = json.loads("".join(printed))
    print(json.dumps(result))


def probe_notebook() -> object:
    import nbformat

    nb = nbformat.v4.new_notebook()
    imports = "; ".join(f"import {name}" for name in PACKAGES)
    files = ", ".join(f"{name!r}: {name}.__file__" for name in PACKAGES)
    nb.cells = [nbformat.v4.new_code_cell(f"import json; {imports}; print(json.dumps({{{files}}}))")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def measure(checkout: Path, notebook: str, threads: int, hidden: bool = False) -> dict[str, object]:
    """Run the child mode; its JSON, or ``{"error": ...}`` when the notebook failed."""
    done = subprocess.run(
        [sys.executable, __file__, "--one", str(checkout), notebook, str(threads), "hidden" if hidden else "released"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def probe(paths: dict[str, Path], threads: int) -> None:
    """Stop unless each checkout's kernel imports the course from that checkout."""
    for label, checkout in paths.items():
        found = measure(checkout, "-", threads)
        if "error" in found:
            raise SystemExit(f"the probe kernel failed in the {label} checkout: {found['error']}")
        files = found["files"]
        assert isinstance(files, dict)
        print(f"probe ({label}): " + ", ".join(f"{name} from {Path(file).parent}" for name, file in files.items()))
        wrong = [name for name, file in files.items() if not Path(file).resolve().is_relative_to(checkout.resolve())]
        if wrong:
            raise SystemExit(f"the {label} kernel imported {wrong} from outside {checkout}")


# --- the table ---------------------------------------------------------------------------------------------


@dataclass
class Runs:
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"base": [], "head": []})
    wall: dict[str, list[float]] = field(default_factory=lambda: {"base": [], "head": []})
    error: str = ""

    def median(self, kind: str, label: str) -> float:
        return statistics.median(getattr(self, kind)[label])

    def ratio(self, kind: str = "cpu") -> float:
        return self.median(kind, "head") / self.median(kind, "base")

    def round_ratios(self) -> list[float]:
        """HEAD / baseline CPU of each round (the two runs of a round ran one after the other)."""
        return [head / base for base, head in zip(self.cpu["base"], self.cpu["head"], strict=True)]


def time_notebook(notebook: str, paths: dict[str, Path], rounds: int, threads: int, hidden: bool) -> Runs:
    """``rounds`` runs from each checkout, alternating which goes first (both see the same load)."""
    runs = Runs()
    for round_ in range(rounds):
        order = ("base", "head") if round_ % 2 == 0 else ("head", "base")
        for label in order:
            found = measure(paths[label], notebook, threads, hidden)
            if "error" in found:
                runs.error = f"{label}: {found['error'][0]}"
                return runs
            runs.cpu[label].append(float(found["cpu"]))
            runs.wall[label].append(float(found["wall"]))
    return runs


HEADER = (
    f"{'notebook':<10}{'CPU base':>10}{'CPU head':>10}{'ratio':>8}{'rounds':>13}"
    f"{'wall base':>11}{'wall head':>11}{'ratio':>8}"
)


def row(notebook: str, runs: Runs) -> str:
    if runs.error:
        return f"{notebook:<10}  failed ({runs.error})"
    mark = "" if runs.ratio() <= GOAL else "  > goal"
    return (
        f"{notebook:<10}{runs.median('cpu', 'base'):10.1f}{runs.median('cpu', 'head'):10.1f}{runs.ratio():8.3f}"
        f"{min(runs.round_ratios()):7.2f}–{max(runs.round_ratios()):.2f}"
        f"{runs.median('wall', 'base'):11.1f}{runs.median('wall', 'head'):11.1f}{runs.ratio('wall'):8.2f}{mark}"
    )


# --- public cases, one by one -------------------------------------------------------------------------------


def case_seconds(notebook: str, rounds: int) -> None:
    """Child mode: CPU seconds of importing the student side of the self-check (after torch and torchao), of
    each exercise's whole ``preview`` on its answer key's namespace and of each public case alone, as JSON
    ``{"import": s, "preview": {exercise: [each round]}, "cases": {exercise: {case: [each round]}}}``.

    The first round is the process's first (torch.export's and torchao's one-time costs, which a notebook has
    paid before its first preview, included). Before every later measurement the graphs remembered for the
    models (``common.export_cache``) and the histogram searches (``common.torchao_cache``) are forgotten: a
    notebook runs each preview once, on models it has not exported, so the later rounds cost what a preview
    costs there."""
    import contextlib
    import dataclasses
    import importlib
    import io

    import common.pt2e

    start = time.process_time()
    import selfcheck
    import selfcheck.diagnosis
    import selfcheck.misconceptions
    import selfcheck.preview
    import selfcheck.self_check

    imported = time.process_time() - start
    from selfcheck.casekit import collect, module_name
    from selfcheck.preview import PREVIEW_SEED, preview, public_exercises

    if not Path(selfcheck.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"selfcheck imported from {selfcheck.__file__}, not from the checkout {Path.cwd()}")
    key = dict(vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}")))
    import common.export_cache
    import common.torchao_cache

    def forget() -> None:
        for remembered in (common.export_cache._graphs, getattr(common.torchao_cache, "_searches", {})):
            remembered.clear()

    previews: dict[str, list[float]] = {}
    cases: dict[str, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for exercise, spec in public_exercises(notebook).items():
            forget()
            start = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                preview(notebook, exercise, key)
            previews.setdefault(exercise, []).append(time.process_time() - start)
            for case, fn in spec.cases.items():
                one = dataclasses.replace(spec, cases={case: fn})
                forget()
                start = time.process_time()
                with contextlib.redirect_stdout(io.StringIO()):
                    collect(one, key, PREVIEW_SEED)
                cases.setdefault(exercise, {}).setdefault(case, []).append(time.process_time() - start)
    print(json.dumps({"import": imported, "preview": previews, "cases": cases}))


def time_cases(notebook: str, paths: dict[str, Path], rounds: int, threads: int) -> None:
    """Print each public case's CPU seconds at base and head (median of the rounds after the first), costliest
    first, with the exercises' totals."""
    found = {}
    for label, checkout in paths.items():
        done = subprocess.run(
            [sys.executable, __file__, "--one-cases", notebook, str(rounds + 1)],
            capture_output=True,
            text=True,
            cwd=checkout,
            env=kernel_env(checkout, threads),
            check=False,
        )
        if done.returncode != 0:
            print(f"{notebook} ({label}): the cases failed: {done.stderr.strip().splitlines()[-1:]}")
            return
        found[label] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\n{notebook}: the preview on the answer key, CPU seconds: median of {rounds} rounds (the models' exports")
    print("not remembered: as in a notebook); first: head's first run in a fresh process (torch.export's start)")
    print(f"{'':<56}{'base':>8}{'head':>8}{'first':>8}")
    base, head = found["base"], found["head"]
    print(f"{'import selfcheck (after common.pt2e)':<56}{base['import']:8.2f}{head['import']:8.2f}")
    for exercise, seconds in head["preview"].items():
        before = base["preview"].get(exercise)
        was = f"{statistics.median(before[1:]):8.2f}" if before else f"{'new':>8}"
        print(f"{'preview ' + exercise:<56}{was}{statistics.median(seconds[1:]):8.2f}{seconds[0]:8.2f}")
    print(f"{'exercise':<26}{'public case alone':<30}")
    lines = []
    for exercise, cases in head["cases"].items():
        for case, seconds in cases.items():
            before = base["cases"].get(exercise, {}).get(case)
            lines.append((statistics.median(seconds[1:]), exercise, case, before, seconds[0]))
    for warm, exercise, case, before, cold in sorted(lines, key=lambda line: line[0], reverse=True):
        was = f"{statistics.median(before[1:]):8.2f}" if before else f"{'new':>8}"
        print(f"{exercise[:25]:<26}{case[:29]:<30}{was}{warm:8.2f}{cold:8.2f}")
    for label in ("base", "head"):
        total = sum(statistics.median(s[1:]) for cases in found[label]["cases"].values() for s in cases.values())
        print(f"{'all cases (' + label + ')':<56}{total:8.2f}")


# --- main ---------------------------------------------------------------------------------------------------


def changed_notebooks(base: str, head: str) -> list[str]:
    """Notebooks whose public record differs between ``base`` and ``head``, in course order."""
    names = git("diff", "--name-only", base, head, "--", "selfcheck/public").split()
    found = []
    for name in names:
        stem = Path(name).stem
        if stem.startswith("m") and "_" in stem:
            found.append(stem.upper().replace("_", "-"))
    return sorted(found)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help=f"the baseline commit (default {BASE})")
    parser.add_argument("--head", default="HEAD", help="the commit measured against it (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each notebook from each checkout")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--notebooks", nargs="+", metavar="NOTEBOOK", help="e.g. M03-4 M04-3 (default: all)")
    chosen.add_argument("--changed", action="store_true", help="the notebooks whose public record changed")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of each kernel")
    parser.add_argument(
        "--with-hidden", action="store_true", help="keep the hidden tests' grade(...) (the instructor's run)"
    )
    parser.add_argument("--json", type=Path, help="write every run's seconds here")
    parser.add_argument(
        "--cases",
        nargs="*",
        metavar="NOTEBOOK",
        help="time each public case of these notebooks (none named: the notebooks over the goal)",
    )
    parser.add_argument("--cases-only", action="store_true", help="time the cases named, without the notebooks' table")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.cases_only and not args.cases:
        parser.error("--cases-only needs --cases with the notebooks named")
    return args


def main(argv: list[str] | None = None) -> None:
    from autograder.course import notebook_id, source_notebooks

    args = parse_args(argv)
    commits = {"base": commit_of(args.base), "head": commit_of(args.head)}
    if args.changed:
        notebooks = changed_notebooks(commits["base"], commits["head"])
    else:
        notebooks = args.notebooks or [notebook_id(p) for p in source_notebooks()]
    print(
        f"base {commits['base'][:10]} ({args.base}), head {commits['head'][:10]} ({args.head}); {os.cpu_count()} cores"
    )
    with worktrees(commits) as paths:
        probe(paths, args.threads)
        over = []
        if not args.cases_only:
            missing = [
                n for n in notebooks for p in paths.values() if not (p / "source" / n[:3] / f"{n}.ipynb").exists()
            ]
            if missing:
                print(f"not in both checkouts, left out: {sorted(set(missing))}")
            notebooks = [n for n in notebooks if n not in missing]
            view = "with the hidden tests" if args.with_hidden else "as the students run them (hidden tests out)"
            print(f"{args.rounds} rounds, alternating; notebooks {view}; medians in seconds of kernel CPU")
            print("(user + sys) and wall; rounds: the lowest and highest HEAD / baseline CPU of one round\n")
            print(HEADER, flush=True)
            timed = {}
            for notebook in notebooks:
                timed[notebook] = time_notebook(notebook, paths, args.rounds, args.threads, args.with_hidden)
                print(row(notebook, timed[notebook]), flush=True)
            good = [n for n, runs in timed.items() if not runs.error]
            over = [n for n in good if timed[n].ratio() > GOAL]
            within = len(good) - len(over)
            print(f"\n{within} / {len(good)} notebooks within {GOAL:.2f}× of the baseline's kernel CPU time", end="")
            failed = len(timed) - len(good)
            print(f" ({failed} failed to run)" if failed else "")
            if args.json:
                raw = {n: {"cpu": r.cpu, "wall": r.wall, "error": r.error} for n, r in timed.items()}
                args.json.write_text(json.dumps({"commits": commits, "notebooks": raw}, indent=1) + "\n")
        if args.cases is not None:
            for notebook in args.cases or over:
                time_cases(notebook, paths, args.rounds, args.threads)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--one":
        sys.path.insert(0, str(ROOT))
        run_one(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5] == "hidden")
    elif len(sys.argv) == 4 and sys.argv[1] == "--one-cases":
        case_seconds(sys.argv[2], int(sys.argv[3]))
    else:
        sys.path.insert(0, str(ROOT))
        main()
