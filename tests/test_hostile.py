"""Bad input never stops a batch and never loses a grade.

Each fixture below is one student's M03 folder with one kind of trouble: files that are
not notebooks, edited or deleted locked cells, infinite loops, memory bombs, exits and
crashes, floods of output, patched helpers, lying objects, forged evidence, forged
result files and forged pytest output, network access. The whole class is graded in one
batch with short limits; each case must earn exactly what its honest part earns, carry
a clear Chinese message (tampering named as such), and not disturb the others.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from conftest import FIXTURES
from submissions import solved, write

from autograder.answers import answered, cell_with_id, insert_after, release_notebook, source_answers
from autograder.grading import NotebookResult, StudentResult, class_folders, grade_class
from autograder.untrusted.confine import Limits

MODULE = "M03"
ADD_POINTS, CAT_POINTS = 7.0, 3.0
LIMITS = Limits(cell_seconds=4, notebook_seconds=45, memory_mb=1536)

Builder = Callable[[Path], None]
CASES: dict[str, Builder] = {}
CONTEXT: dict[str, str] = {}
"""Values the fixture decides before building the cases (a port, paths). They are written into
the notebooks: a child forked from an already running fork server does not see later changes
to this process's environment."""


def case(fn: Builder) -> Builder:
    CASES[fn.__name__] = fn
    return fn


def m03_4(folder: Path, nb: nbformat.NotebookNode, name: str = "M03-4.ipynb") -> None:
    write(nb, folder / MODULE / name)


# --- the cases --------------------------------------------------------------------------------------


@case
def not_json(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "M03-4.ipynb").write_text("這不是 JSON {", encoding="utf-8")


@case
def wrong_nbformat(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "M03-4.ipynb").write_text(json.dumps({"nbformat": 5, "cells": []}), encoding="utf-8")


@case
def old_nbformat_3(folder: Path) -> None:
    nb = nbformat.convert(solved("M03-4"), 3)
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "M03-4.ipynb").write_text(nbformat.writes(nb, version=3), encoding="utf-8")


@case
def renamed(folder: Path) -> None:
    m03_4(folder, solved("M03-4"), name="M03-4 (1).ipynb")


@case
def empty_folder(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)


@case
def no_module_folder(folder: Path) -> None:
    folder.mkdir(parents=True)


@case
def deleted_locked_cells(folder: Path) -> None:
    nb = solved("M03-4")
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("locked")]
    m03_4(folder, nb)


@case
def edited_locked_cells(folder: Path) -> None:
    nb = solved("M03-4")
    cell_with_id(nb, "setup").source = "raise SystemExit('不 import 了')"
    cell_with_id(nb, "add_quantizer_hidden").source = "7.0"
    m03_4(folder, nb)


@case
def edited_points(folder: Path) -> None:
    nb = solved("M03-4")
    cell_with_id(nb, "add_quantizer_hidden").metadata["nbgrader"]["points"] = 100
    m03_4(folder, nb)


@case
def infinite_loop(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer", "while True:\n    pass"))


@case
def loop_that_swallows_timeouts(folder: Path) -> None:
    loop = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", loop))


@case
def memory_bomb(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", "hog = bytearray(64 * 1024**3)"))


@case
def sys_exit(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", "import sys\nsys.exit(1)"))


@case
def os_exit(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", "import os\nos._exit(0)"))


@case
def crashed_process(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", "import ctypes\nctypes.string_at(0)"))


@case
def output_flood(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", "for _ in range(100_000):\n    print('x' * 1000)"))


PATCHES = """
import common.graph_utils, selfcheck.evidence, autograder.checks.support, torch.fx
import torchao.quantization.pt2e.quantize_pt2e as quantize_pt2e
quantize_pt2e.prepare = lambda model, *args, **kwargs: model  # prepare_pt2e would insert no observer
common.graph_utils.observer_nodes = lambda gm: []
selfcheck.evidence.describe_prepared = lambda gm: {"observers": [], "instances": [], "edges": {}, "constants": []}
autograder.checks.support.compare_observers = lambda *a, **k: None
torch.fx.Node.__eq__ = lambda self, other: True
"""


@case
def patched_helpers(folder: Path) -> None:
    wrong = (FIXTURES / "wrong" / "M03-4" / "add_no_sharing.py").read_text(encoding="utf-8")
    nb = with_wrong_code("M03-4", {"add_quantizer": wrong})
    m03_4(folder, insert_after(nb, "add_quantizer", PATCHES))


@case
def patched_builtins(folder: Path) -> None:
    wrong = (FIXTURES / "wrong" / "M03-4" / "add_no_sharing.py").read_text(encoding="utf-8")
    nb = with_wrong_code("M03-4", {"add_quantizer": wrong})
    m03_4(
        folder,
        insert_after(
            nb,
            "add_quantizer",
            "import builtins\nbuiltins.isinstance = lambda obj, cls: True\nbuiltins.len = lambda obj: 1",
        ),
    )


@case
def always_equal(folder: Path) -> None:
    lie = "class Anything(dict):\n    def __eq__(self, other):\n        return True\n\n\ndef reads_quantized(prepared, producer):\n    return Anything()\n"
    nb = solved("M03-1")
    cell_with_id(nb, "reads_quantized").source = lie
    write(nb, folder / MODULE / "M03-1.ipynb")


FORGE = """
import gc, json
from multiprocessing.connection import Connection
for obj in gc.get_objects():
    if isinstance(obj, Connection) and obj.writable:
        fake = {"cases": {}}
        obj.send_bytes(json.dumps({"type": "evidence", "exercise": "cat_quantizer", "data": fake}).encode())
        obj.send_bytes(b"\\xff not json")
"""


@case
def forged_evidence(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "cat_quantizer_hidden", FORGE))


@case
def oversized_message(folder: Path) -> None:
    flood = "import gc\nfrom multiprocessing.connection import Connection\n"
    flood += "for obj in gc.get_objects():\n    if isinstance(obj, Connection) and obj.writable:\n        obj.send_bytes(b'x' * 9_000_000)"
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", flood))


FORGED_FILES = """
import json, os
for folder in (".", "..", "../..", os.path.expanduser("~"), FORGE_INTO):
    try:
        with open(os.path.join(folder, "results.json"), "w") as handle:
            json.dump({"score": 999, "tests": []}, handle)
    except OSError:
        pass
print("============================= 10 passed in 0.01s ==============================")
print("PASSED autograder/checks/test_m03_4.py::test_add_separate")
"""


@case
def forged_results_and_pytest_output(folder: Path) -> None:
    nb = release_notebook("M03-4")
    m03_4(folder, insert_after(nb, "setup", f"FORGE_INTO = {CONTEXT['forge_into']!r}\n" + FORGED_FILES))


NETWORK = """
import os, socket
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
except OSError:
    pass
"""


@case
def network(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", f"PORT = {CONTEXT['port']}\n" + NETWORK))


WHOAMI = """
import os
with open(WHOAMI, "w") as handle:
    handle.write(str(os.getuid()))
"""


@case
def whoami(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", f"WHOAMI = {CONTEXT['whoami']!r}\n" + WHOAMI))


@case
def honest(folder: Path) -> None:
    m03_4(folder, solved("M03-4"))


def with_wrong_code(notebook: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    return answered(notebook, {**source_answers(notebook), **answers})


# --- grading the hostile class once -----------------------------------------------------------------


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    submitted, out = root / "submitted", root / "graded"
    listener = socket.create_server(("127.0.0.1", 0))
    shared = Path(tempfile.mkdtemp(prefix="pt2e-whoami-"))  # reachable by an unprivileged user, unlike tmp_path
    os.chmod(shared, 0o777)
    whoami = shared / "whoami.txt"
    CONTEXT.update(port=str(listener.getsockname()[1]), whoami=str(whoami), forge_into=str(out))
    for name, build in CASES.items():
        build(submitted / name)
    connections: list[object] = []

    def accept() -> None:
        listener.settimeout(1.0)
        while not stop.is_set():
            try:
                connections.append(listener.accept()[0])
            except OSError:
                continue

    stop = threading.Event()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        students, _ = grade_class(MODULE, class_folders(submitted, MODULE), jobs=2, seed=0, limits=LIMITS)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    uid = whoami.read_text().strip() if whoami.exists() else None
    shutil.rmtree(shared, ignore_errors=True)
    from autograder.results import write_student

    for student in students:
        write_student(out, student, 0)
    return {s.student: s for s in students}, connections, uid, out


def nb(graded, student: str, notebook: str = "M03-4") -> NotebookResult:
    return next(n for n in graded[0][student].notebooks if n.notebook == notebook)


def exercise_score(result: NotebookResult, exercise: str) -> float:
    return sum(v["score"] for v in result.verdicts if v["exercise"] == exercise)


def messages(result: NotebookResult) -> str:
    return "\n".join([*result.notes, *result.tampering, *(v["message"] for v in result.verdicts), *result.cell_errors])


def test_the_whole_batch_is_graded(graded) -> None:
    students: dict[str, StudentResult] = graded[0]
    assert set(students) == set(CASES)
    for student in students.values():
        assert [n.notebook for n in student.notebooks] == ["M03-1", "M03-2", "M03-3", "M03-4"]
        assert all(v["message"] for n in student.notebooks for v in n.verdicts if not v["passed"])


def test_honest_student_gets_full_marks(graded) -> None:
    result = nb(graded, "honest")
    assert result.score == result.max_score == ADD_POINTS + CAT_POINTS
    assert not result.tampering


@pytest.mark.parametrize(
    ("student", "phrase"),
    [
        ("not_json", "不是合法的 JSON"),
        ("wrong_nbformat", "nbformat"),
        ("empty_folder", "沒有交"),
        ("no_module_folder", "沒有交"),
    ],
)
def test_unreadable_or_missing_notebooks_get_zero_with_a_reason(graded, student: str, phrase: str) -> None:
    result = nb(graded, student)
    assert result.score == 0
    assert phrase in messages(result)


def test_missing_notebooks_of_a_student_say_so(graded) -> None:
    result = nb(graded, "honest", "M03-1")
    assert result.score == 0 and "沒有交 M03-1.ipynb" in messages(result)


def test_old_nbformat_is_converted_and_graded(graded) -> None:
    result = nb(graded, "old_nbformat_3")
    assert result.score == result.max_score and "nbformat 3" in messages(result)


def test_renamed_notebook_is_found_by_its_cells(graded) -> None:
    result = nb(graded, "renamed")
    assert result.score == result.max_score and "M03-4 (1).ipynb" in messages(result)


@pytest.mark.parametrize("student", ["deleted_locked_cells", "edited_locked_cells", "edited_points"])
def test_locked_cells_and_points_are_restored_and_named(graded, student: str) -> None:
    result = nb(graded, student)
    assert result.score == result.max_score == ADD_POINTS + CAT_POINTS
    assert result.tampering, "the change is named"
    if student == "edited_points":
        assert "配分被改過" in " ".join(result.tampering)


@pytest.mark.parametrize("student", ["infinite_loop", "memory_bomb", "sys_exit", "output_flood"])
def test_a_bad_cell_costs_nothing_else(graded, student: str) -> None:
    result = nb(graded, student)
    assert result.score == result.max_score
    if student == "output_flood":
        assert "印出的內容太多" in messages(result)
    else:
        assert result.cell_errors, "the failing cell is reported"
    if student == "infinite_loop":
        assert "時間上限" in messages(result)


@pytest.mark.parametrize(
    ("student", "phrase"),
    [("os_exit", "行程結束"), ("crashed_process", "行程結束"), ("loop_that_swallows_timeouts", "時間上限")],
)
def test_the_process_ending_keeps_what_was_earned_before(graded, student: str, phrase: str) -> None:
    result = nb(graded, student)
    assert exercise_score(result, "add_quantizer") == ADD_POINTS, "graded before the trouble"
    assert exercise_score(result, "cat_quantizer") == 0
    assert phrase in messages(result)


@pytest.mark.parametrize("student", ["patched_helpers", "patched_builtins"])
def test_patched_helpers_gain_nothing_and_are_named(graded, student: str) -> None:
    result = nb(graded, student)
    honest_wrong = ADD_POINTS - 6  # add_no_sharing earns only the share=False check
    assert exercise_score(result, "add_quantizer") == honest_wrong
    assert any("竄改" in t for t in result.tampering)


def test_objects_that_equal_everything_earn_nothing(graded) -> None:
    result = nb(graded, "always_equal", "M03-1")
    assert exercise_score(result, "reads_quantized") == 0
    assert exercise_score(result, "add_label") == 4
    assert any("竄改" in t and "__eq__" in t for t in result.tampering)


def test_forged_evidence_zeroes_the_exercise_and_is_named(graded) -> None:
    result = nb(graded, "forged_evidence")
    assert exercise_score(result, "add_quantizer") == ADD_POINTS
    assert exercise_score(result, "cat_quantizer") == 0
    tampering = " ".join(result.tampering)
    assert "2 份評分證據" in tampering and "無法解讀" in tampering


def test_oversized_messages_stop_the_notebook_not_the_batch(graded) -> None:
    result = nb(graded, "oversized_message")
    assert exercise_score(result, "add_quantizer") == ADD_POINTS
    assert exercise_score(result, "cat_quantizer") == 0 and "超過上限" in messages(result)


def test_forged_result_files_and_pytest_output_change_nothing(graded) -> None:
    students, _, _, out = graded
    result = nb(graded, "forged_results_and_pytest_output")
    assert result.score == 0
    written = json.loads((out / "forged_results_and_pytest_output" / MODULE / "results.json").read_text())
    assert written["score"] == students["forged_results_and_pytest_output"].score == 0
    assert not (out / "results.json").exists() or json.loads((out / "results.json").read_text())["score"] != 999


def test_no_network_and_no_privileges_where_the_os_allows(graded) -> None:
    _, connections, uid, _ = graded
    notes = messages(nb(graded, "network"))
    if "斷網" not in notes:
        assert not connections, "a submission reached a server on the grader's loopback"
    notes = messages(nb(graded, "whoami"))
    if os.getuid() == 0 and "無權限的使用者" not in notes:
        assert uid == "65534", f"the submission ran as uid {uid}"
    elif os.getuid() == 0:
        assert "讀不到" in notes or "無權限" in notes, "the note says why the grader could not drop privileges"
