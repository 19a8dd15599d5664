"""Hostile recordings: what a submission's answers make the trusted side do, graded in one batch.

Each attacker of issue 18's class answers M01-3 (graph edits) or M02-2 (a new observer) so
that its *honest* recording names something the grader must never run: an ``operator`` chain
that reaches ``exec``, ``aten.from_file`` on the answer key, ``aten._print`` with terminal
escapes, a Python ``pow`` that holds the GIL, a tensor or a chain of products too large to
compute, autocast switched on, a histogram with a billion bins. Each keeps its sandbox
uneventful (the edited graph is recompiled, then ``forward`` is pointed back at the old code
in its own process), so only the replay would run the attack. Beside them: a student whose
cell error and folder name carry terminal escapes, a student who patches ``Node.__eq__`` and
``__hash__``, and honest classmates who must keep full marks.
"""

from __future__ import annotations

import json
import re
import resource
from pathlib import Path

import pytest
from submissions import solved, write

from autograder.course import ROOT
from autograder.engine.grading import NotebookResult, StudentResult, grade_class
from autograder.engine.submission import class_folders
from autograder.maintenance.answers import answered, source_answers
from autograder.sandboxed import memory
from autograder.sandboxed.limits import Limits

LIMITS = Limits(cell_seconds=60, notebook_seconds=240, memory_mb=2048)
pytestmark = pytest.mark.xdist_group("hostile-replay")  # graded once, on one worker

REPLACE_KEY = """
import operator
import torch


def replace_op(gm, old, new, extra_args=()):
    runs_here = gm.forward  # this process keeps running the old code; the recording holds the new graph
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target != old:
            continue
        with gm.graph.inserting_after(node):
            replacement = gm.graph.call_function(new, (*node.args, *extra_args), dict(node.kwargs))
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
    g = gm.graph
    output = next(n for n in g.nodes if n.op == "output")
    with g.inserting_before(output):
{attack}
    gm.recompile()
    gm.forward = runs_here
    return gm
"""

ATTACKS = {
    "exec_chain": """
        module = g.get_attr("_guards_fn")
        globs = g.call_function(operator.call, (g.call_function(operator.attrgetter, ("forward.__globals__",)), module))
        builtins_ = g.call_function(operator.getitem, (globs, "__builtins__"))
        run = g.call_function(operator.call, (g.call_function(operator.attrgetter, ("exec",)), builtins_))
        g.call_function(operator.call, (run, "open({marker!r}, 'w').write('ran')"))""",
    "from_file": """
        g.call_function(torch.ops.aten.from_file.default, ({key!r},), {{"shared": False, "size": 200, "dtype": torch.uint8}})""",
    "print_escapes": """
        g.call_function(torch.ops.aten._print.default, ("\\x1b[2J\\x1b]0;grader owned\\x07",))""",
    "pow_holds_the_gil": """
        g.call_function(operator.pow, (10, 10**9))""",
    "huge_full": """
        g.call_function(torch.ops.aten.full.default, ([200_000, 200_000], 1.0))""",
    "matmul_chain": """
        product = g.call_function(torch.ops.aten.ones.default, ([4096, 4096],))
        for _ in range(40):
            product = g.call_function(torch.ops.aten.mm.default, (product, product))""",
    "autocast_on": """
        g.call_function(torch.set_autocast_enabled, ("cpu", True))""",
    # three that passed the cost check before issue 41, each with gigabytes the worker's memory limit had to stop
    "stale_claimed": """
        g.call_function(torch.ops.aten.full.default, ([200_000, 200_000], 1.0))
        gm.recompile = lambda: None  # the recording says the graph was never recompiled""",
    "boolean_mask": """
        x = next(n for n in g.nodes if n.op == "placeholder")
        many = g.call_function(torch.ops.aten.repeat.default, (g.call_function(torch.ops.aten.view.default, (x, [-1])), [4000]))
        chosen = g.call_function(torch.ops.aten.index.Tensor, (many, [g.call_function(torch.ops.aten.ge.Scalar, (many, -1e9))]))
        column = g.call_function(torch.ops.aten.unsqueeze.default, (chosen, 1))
        g.call_function(torch.ops.aten.mul.Tensor, (column, g.call_function(torch.ops.aten.unsqueeze.default, (chosen, 0))))""",
    "renamed_input": """
        next(n for n in g.nodes if n.op == "placeholder")._rename("renamed")
        g.call_function(torch.ops.aten.full.default, ([200_000, 200_000], 1.0))""",
}

HUGE_HISTOGRAM = """
from common.pt2e import HistogramObserver


def insert_observer(gm, edge_or_node, observer):
    observer = HistogramObserver()
    observer.bins = 10**9  # recorded as a setting: the replay would build a 4 GB histogram
    observer.forward = lambda x: x  # while this process never touches it
    index = 0
    while hasattr(gm, f"activation_post_process_{index}"):
        index += 1
    name = f"activation_post_process_{index}"
    gm.add_submodule(name, observer)
    producer = edge_or_node[0] if isinstance(edge_or_node, tuple) else edge_or_node
    with gm.graph.inserting_after(producer):
        observer_node = gm.graph.call_module(name, (producer,))
    gm.recompile()
    return observer_node
"""

PATCH_NODE_EQUALITY = """
import torch.fx
torch.fx.Node.__eq__ = lambda self, other: True
torch.fx.Node.__hash__ = lambda self: 0
"""

PATCHES_THE_RECORDER = """
_honest_replace_op = replace_op


def replace_op(*args, **kwargs):
    # while its own answers are recorded, break the course's recorder: the next case's recording raises outside any case
    import autograder.sandboxed.record as record

    record.Recorder.namespace = lambda self, *a, **k: 1 / 0
    return _honest_replace_op(*args, **kwargs)
"""

ESCAPING_ERROR = 'raise ValueError("\\x1b]0;owned\\x07\\x1b[2J\\x1b[31m紅字")'
ESCAPING_FOLDER = "escapes\x1b[31m\x1b]0;t\x07"


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("hostile-replay")
    submitted, out = root / "submitted", root / "graded"
    marker = root / "exec-ran"
    key = str(ROOT / "autograder" / "keys" / "m01_3.py")
    answers = source_answers("M01-3")
    for name, attack in ATTACKS.items():
        code = REPLACE_KEY.format(attack=attack.format(marker=str(marker), key=key))
        write(answered("M01-3", {**answers, "replace_op": code}), submitted / name / "M01" / "M01-3.ipynb")
    write(solved("M01-3"), submitted / "honest" / "M01" / "M01-3.ipynb")
    write(solved("M01-3"), submitted / ESCAPING_FOLDER / "M01" / "M01-3.ipynb")
    patched = answered("M01-3", {**answers, "replace_op": answers["replace_op"] + "\n" + PATCH_NODE_EQUALITY})
    write(patched, submitted / "patches_node_equality" / "M01" / "M01-3.ipynb")
    recorder = answered("M01-3", {**answers, "replace_op": answers["replace_op"] + "\n" + PATCHES_THE_RECORDER})
    write(recorder, submitted / "patches_the_recorder" / "M01" / "M01-3.ipynb")
    erring = answered("M01-3", {**answers, "insert_clamp": answers["insert_clamp"] + "\n" + ESCAPING_ERROR})
    write(erring, submitted / "escaping_error" / "M01" / "M01-3.ipynb")
    m02 = source_answers("M02-2")
    write(
        answered("M02-2", {**m02, "insert_observer": HUGE_HISTOGRAM}),
        submitted / "huge_histogram" / "M02" / "M02-2.ipynb",
    )
    write(solved("M02-2"), submitted / "honest" / "M02" / "M02-2.ipynb")

    students: dict[str, StudentResult] = {}
    before_mb = restart_peak_mb()
    for module in ("M01", "M02"):
        folders = {s: f for s, f in class_folders(submitted, module).items() if f is not None}
        results, _ = grade_class(module, folders, jobs=2, seed=4, limits=LIMITS)
        from autograder.reports.results import write_csv, write_student

        for student in results:
            write_student(out, student, 4)
            students[f"{student.student}/{module}"] = student
        write_csv(out, module, results, 4)
    return {"students": students, "out": out, "marker": marker, "grew_mb": peak_mb() - before_mb}


def peak_mb() -> float:
    """This process's peak resident size (Linux: VmHWM, which ``restart_peak_mb`` can reset; else ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def restart_peak_mb() -> float:
    """Reset the peak to what the process holds now (``/proc/self/clear_refs``), so that what the tests this
    xdist worker ran before does not count; returns it. Where it cannot be reset, the lifetime peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return peak_mb()


def result(graded: dict[str, object], student: str, notebook: str = "M01-3") -> NotebookResult:
    module = notebook.split("-")[0]
    found = graded["students"][f"{student}/{module}"]  # type: ignore[index]
    return next(n for n in found.notebooks if n.notebook == notebook)


def score(result: NotebookResult, exercise: str) -> tuple[float, float]:
    verdicts = [v for v in result.verdicts if v["exercise"] == exercise]
    return sum(v["score"] for v in verdicts), sum(v["points"] for v in verdicts)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_recording_that_asks_for_what_is_not_allowed_scores_only_itself(graded, attack: str) -> None:
    found = result(graded, attack)
    earned, points = score(found, "replace_op")
    assert earned == 0 < points
    messages = [v["message"] for v in found.verdicts if v["exercise"] == "replace_op"]
    assert all("評分時沒有執行你的答案留下的圖" in m and "這一題 0 分" in m for m in messages), messages[:1]
    kept, clamp_points = score(found, "insert_clamp")  # the honest exercise beside it keeps its points
    assert kept == clamp_points > 0


def test_nothing_a_recording_names_ran_as_the_grader(graded) -> None:
    assert not Path(graded["marker"]).exists()  # type: ignore[arg-type]
    key_bytes = (ROOT / "autograder" / "keys" / "m01_3.py").read_bytes()[:200]
    leaked = json.dumps([v["message"] for v in result(graded, "from_file").verdicts])
    assert key_bytes[:40].decode(errors="replace") not in leaked


def test_the_grader_itself_never_holds_what_a_recording_asks(graded) -> None:
    """Grading the class grew the grading process's peak by less than one submission's memory limit."""
    assert graded["grew_mb"] < LIMITS.memory_mb, f"grading grew the process's peak by {graded['grew_mb']:.0f} MB"


def test_a_histogram_with_a_billion_bins_is_refused(graded) -> None:
    found = result(graded, "huge_histogram", "M02-2")
    earned, points = score(found, "insert_observer")
    assert earned == 0 < points
    assert any("bins" in v["message"] for v in found.verdicts)


def test_honest_classmates_keep_full_marks(graded) -> None:
    for student, notebook in (("honest", "M01-3"), ("honest", "M02-2"), (ESCAPING_FOLDER, "M01-3")):
        found = result(graded, student, notebook)
        assert found.score == found.max_score > 0, [v["message"] for v in found.verdicts if not v["passed"]]
        assert not found.tampering


def test_patching_node_equality_keeps_what_was_earned(graded) -> None:
    found = result(graded, "patches_node_equality")
    assert found.score == found.max_score > 0, [v["message"] for v in found.verdicts if not v["passed"]]
    assert any("torch.fx.Node.__eq__" in t for t in found.tampering)


def test_patching_the_recorder_costs_only_the_exercise_it_was_recording(graded) -> None:
    found = result(graded, "patches_the_recorder")
    earned, points = score(found, "replace_op")
    assert earned == 0 < points
    messages = {v["message"] for v in found.verdicts if v["exercise"] == "replace_op"}
    assert all("評分時無法記錄這一題的答案" in m and "Recorder.namespace" in m for m in messages), messages
    assert any("replace_op" in t and "Recorder.namespace" in t for t in found.tampering), found.tampering
    kept, clamp_points = score(found, "insert_clamp")  # recorded after the recorder was put back
    assert kept == clamp_points > 0, [v["message"] for v in found.verdicts if not v["passed"]]
    assert found.operations == [] or all(o["kind"] not in ("crashed", "timeout") for o in found.operations)


def test_no_terminal_escape_reaches_the_outputs(graded) -> None:
    out = Path(graded["out"])  # type: ignore[arg-type]
    files = [*out.rglob("*.csv"), *out.rglob("results.json"), *out.rglob("feedback.html")]
    assert len(files) >= 6
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, path
    erring = result(graded, "escaping_error")
    assert any("紅字" in e for e in erring.cell_errors)  # the error is reported, its escapes are not
    assert score(erring, "insert_clamp")[0] == score(erring, "insert_clamp")[1]  # its answer was still graded


def test_the_instructor_is_told_how_memory_was_limited_and_the_student_is_not(graded) -> None:
    found = result(graded, "honest")
    # the cgroup's words, or the sum's where this job's own cgroup could not be made (a busy machine; it says so)
    modes = (memory.MEMORY_CGROUP, memory.MEMORY_SUM)
    assert any(note.startswith(modes) for note in found.instructor_notes), found.instructor_notes
    assert not any("記憶體上限" in note for note in found.notes), "a limit not hit is not the student's business"


# --- the replays of one notebook share the notebook's time (issue 41) ------------------------------------

SLOW_POOL = [  # avg_pool2d is not counted in flops: 513² windows of 512² elements, minutes of work within the budgets
    {
        "name": "plane",
        "op": "call_function",
        "target": {"op": "aten.ones.default"},
        "args": {"tuple": [[1, 1, 1024, 1024]]},
    },
    {
        "name": "pooled",
        "op": "call_function",
        "target": {"op": "aten.avg_pool2d.default"},
        "args": {"tuple": [{"n": "plane"}, [512, 512], [1, 1]]},
    },
]


def test_the_replays_of_a_notebook_end_at_the_notebooks_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording whose replay is slow (within every budget) costs its exercise; the exercise after it finds
    the notebook's replay time spent and scores zero, saying so; nothing waits for the cases' own limits."""
    import time

    from autograder.engine.grading import derive_evidence
    from autograder.sandboxed import replay_job
    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.record import record_exercise

    key = vars(__import__("autograder.keys.m01_3", fromlist=["_"]))
    exercises = exercises_of("M01-3")
    recorded = {name: json.loads(json.dumps(record_exercise(exercises[name], key, 4))) for name in exercises}
    text = json.dumps(recorded["replace_op"])
    assert '"nodes"' in text
    for state in _graph_states(recorded["replace_op"]):
        state["nodes"][-1:-1] = json.loads(json.dumps(SLOW_POOL))
    monkeypatch.setattr(replay_job, "STARTUP_SECONDS", 0)  # in this (the grader's) process: the time is the notebook's
    limits = Limits(cell_seconds=3, notebook_seconds=3)
    found = NotebookResult("M01-3", "M01-3.ipynb")
    started = time.monotonic()
    evidence, reasons = derive_evidence("M01-3", recorded, 4, limits, found)
    took = time.monotonic() - started
    assert not evidence and set(reasons) == {"replace_op", "insert_clamp"}, reasons
    assert re.search(r"超過時間上限（[123] 秒）", reasons["replace_op"]), reasons["replace_op"]
    assert "用完了它的時間上限（共 3 秒）" in reasons["insert_clamp"], reasons["insert_clamp"]
    assert {o.get("exercise") for o in found.operations if o["kind"] == "replay"} == {"replace_op", "insert_clamp"}
    assert took < 3 + 10, f"the replays took {took:.0f} s"  # the notebook's 3 s, the server's grace, a busy machine


def _graph_states(recorded: object) -> list[dict]:
    found: list[dict] = []
    stack = [recorded]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("nodes"), list):
                found.append(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found
