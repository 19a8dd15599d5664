"""Bad input never stops a batch and never loses a grade; no submission reaches anything else.

Each fixture below is one student's M03 folder with one kind of trouble: files that are
not notebooks, edited or deleted locked cells, infinite loops, memory bombs, exits and
crashes, floods of output, patched helpers, lying objects, network access, and the attacks
of issue 9: reading the grader's /proc, a classmate's notebook or the answer key, links to
a classmate's notebook, to ``source/`` or to /dev/zero, FIFOs and folders named like
notebooks, 1,500 nested folders, filling /tmp, /var/tmp and /dev/shm, UNIX sockets to the
outside, a daemon that outlives its notebook to kill the next one, signals to the grader,
and forged, partial, oversized and flooding frames on the grading pipe. The whole class is
graded in one batch with short limits; each case must earn exactly what its honest part
earns, carry a clear Chinese message (tampering named as such), and not disturb the
others. Where the machine refused an isolation measure, the feedback must say so, and
only then is the attack that measure stops allowed to work.
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from conftest import FIXTURES, ROOT
from submissions import solved, write

from autograder.engine.grading import NotebookResult, StudentResult, grade_class
from autograder.engine.submission import class_folders
from autograder.maintenance.answers import answered, cell_with_id, insert_after, release_notebook, source_answers
from autograder.sandboxed import confine
from autograder.sandboxed.limits import Limits

MODULE = "M03"
ADD_POINTS, CAT_POINTS = 7.0, 3.0
LIMITS = Limits(cell_seconds=4, notebook_seconds=20, memory_mb=1536, tmp_mb=32)
"""Short limits: two cases (a loop that swallows every timeout, a partial frame with alarms ignored) run to the
notebook limit, one of them on a full core; every other case ends within 5 s here."""
pytestmark = pytest.mark.xdist_group("hostile")  # one batch, graded once, on one worker

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
import common.graph_utils, selfcheck.evidence, torch.fx
import torchao.quantization.pt2e.quantize_pt2e as quantize_pt2e
quantize_pt2e.prepare = lambda model, *args, **kwargs: model  # prepare_pt2e would insert no observer
common.graph_utils.observer_nodes = lambda gm: []
selfcheck.evidence.describe_prepared = lambda gm: {"observers": [], "instances": [], "edges": {}, "constants": []}
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


PIPE = """
import fcntl, gc, json, os, stat, struct
def channel():
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                return fd
        except OSError:
            pass
def send(message=None, raw=None):
    from autograder.sandboxed.protocol import VERSION  # an attacker reads the version too
    body = raw if raw is not None else json.dumps({"v": VERSION, **message}).encode()
    os.write(channel(), struct.pack(">I", len(body)) + body)
def place(label):
    from autograder.sandboxed.runner import Job
    job = next(o for o in gc.get_objects() if isinstance(o, Job))
    return next(i for i, c in enumerate(job.cells) if c.label == label), len(job.cells)
"""
"""Finds the grading pipe and the job (where each cell is) the way an attacker would."""


@case
def forged_evidence(folder: Path) -> None:
    forge = 'index, _ = place("cat_quantizer_hidden")\n'
    forge += 'send({"type": "evidence", "index": index, "exercise": "cat_quantizer", "data": {"cases": {}}})\n'
    forge += 'send(raw=b"\\xff not json")'
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", PIPE + forge))


@case
def forged_start_and_done(folder: Path) -> None:
    forge = '_, total = place("setup")\n'
    forge += 'send({"type": "start", "unconfined": ["x" * 1000] * 2000})\n'
    forge += 'send({"type": "done", "index": total, "output_dropped": 10**12})\n'
    forge += 'send({"type": "cell", "index": 10**6, "label": "y" * 10**6, "error": "z" * 10**6})'
    m03_4(folder, insert_after(solved("M03-4"), "setup", PIPE + forge))


@case
def oversized_message(folder: Path) -> None:
    flood = 'os.write(channel(), struct.pack(">I", 9_000_000) + b"x" * 9_000_000)'
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", PIPE + flood))


@case
def frame_flood(folder: Path) -> None:
    flood = 'for _ in range(200_000):\n    send({"type": "cell"})'
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", PIPE + flood))


@case
def partial_frame(folder: Path) -> None:
    stall = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    stall += 'os.write(channel(), b"\\x00\\x00\\x10\\x00abc")\ntime.sleep(1000)'
    m03_4(folder, insert_after(solved("M03-4"), "add_quantizer_hidden", PIPE + stall))


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


WHOAMI = "import os\nraise RuntimeError(f'uid={os.getuid()}')"


@case
def whoami(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", WHOAMI))


@case
def whoami_too(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", WHOAMI))


FOUND = "\nraise RuntimeError('FOUND:' + (','.join(sorted(set(found))) or 'nothing'))"
"""Ends an attack cell: what worked comes back in the cell's error (the only channel out)."""

SNOOP = """
import json, os
found = []
def steal(path):
    try:
        with open(path) as handle:
            nb = json.load(handle)
    except (OSError, ValueError):
        return False
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            exec("".join(cell["source"]), globals())
    return True
if steal(CLASSMATE):
    found.append("classmate")
if steal(os.path.join(ROOT, "source", "M03", "M03-4.ipynb")):
    found.append("source")
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        found.append("processes")
        for link in ("cwd", "root"):
            if steal(f"/proc/{pid}/{link}/source/M03/M03-4.ipynb"):
                found.append("proc-" + link)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"pytest" in handle.read():
                    found.append("grader-cmdline")
        except OSError:
            pass
try:
    os.listdir(SUBMITTED)
    found.append("submissions")
except OSError:
    pass
"""


@case
def snoop(folder: Path) -> None:
    context = f"CLASSMATE = {CONTEXT['classmate']!r}\nROOT = {str(ROOT)!r}\nSUBMITTED = {CONTEXT['submitted']!r}\n"
    m03_4(folder, insert_after(release_notebook("M03-4"), "setup", context + SNOOP + FOUND))


@case
def imports_key(folder: Path) -> None:
    answers = {
        "add_quantizer": "from autograder.keys.m03_4 import AddQuantizer",
        "cat_quantizer": "from autograder.checks.test_m03_4 import *\nfrom autograder.keys.m03_4 import CatQuantizer",
    }
    m03_4(folder, with_wrong_code("M03-4", answers))


@case
def link_to_classmate(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "M03-4.ipynb").symlink_to(CONTEXT["classmate"])


@case
def module_linked_to_source(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / MODULE).symlink_to(ROOT / "source" / MODULE)


@case
def link_to_dev_zero(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "M03-4.ipynb").symlink_to("/dev/zero")


@case
def fifo_notebook(folder: Path) -> None:
    (folder / MODULE).mkdir(parents=True)
    os.mkfifo(folder / MODULE / "M03-4.ipynb")


@case
def folder_notebook(folder: Path) -> None:
    (folder / MODULE / "M03-4.ipynb").mkdir(parents=True)
    write(solved("M03-1"), folder / MODULE / "M03-1.ipynb")


@case
def deep_folders(folder: Path) -> None:
    m03_4(folder, solved("M03-4"))
    deep = folder / MODULE
    for _ in range(1500):  # pathlib and os.makedirs would recurse deeper than Python allows
        deep = deep / "d"
        os.mkdir(deep)
    write(solved("M03-3"), deep / "M03-3.ipynb")


TEMP = """
import os
found = []
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    total = 0
    try:
        for n in range(64):
            with open(os.path.join(folder, f"{MARK}-{n}"), "wb") as handle:
                for _ in range(8):
                    handle.write(b"x" * 1024 * 1024)
                    total += 1
    except OSError:
        pass
    if total > CAP:
        found.append(folder)
"""


@case
def fills_temp_folders(folder: Path) -> None:
    context = f"MARK = {CONTEXT['mark']!r}\nCAP = {LIMITS.tmp_mb}\n"
    m03_4(folder, insert_after(solved("M03-4"), "setup", context + TEMP + FOUND))


SOCKETS = """
import socket
found = []
for address in (PATH, "\\0" + ABSTRACT):
    try:
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(2)
        client.connect(address)
        client.close()
        found.append("path" if address == PATH else "abstract")
    except OSError:
        pass
"""


@case
def unix_sockets(folder: Path) -> None:
    context = f"PATH = {CONTEXT['socket']!r}\nABSTRACT = {CONTEXT['abstract']!r}\n"
    m03_4(folder, insert_after(solved("M03-4"), "setup", context + SOCKETS + FOUND))


DAEMON = """
import ctypes, os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, signal.SIG_IGN)
        ctypes.CDLL(None).prctl(15, NAME.encode(), 0, 0, 0)  # PR_SET_NAME: findable from outside
        while True:  # kill whatever it can reach: the next student's notebook, if it could
            for target in [-1, *range(2, 400)]:
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.5)
"""


@case
def daemon_killer(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", f"NAME = {CONTEXT['daemon']!r}\n" + DAEMON))


@case
def daemon_killer_victim(folder: Path) -> None:
    m03_4(folder, solved("M03-4"))


SIGNALS = """
import os, signal
found = []
for target in (GRADER, os.getppid()):  # in a pid namespace of its own, getppid() is 0: skipped
    if target <= 0:
        continue
    try:
        os.kill(target, 0)
        os.kill(target, signal.SIGCONT)
        found.append("grader" if target == GRADER else "parent")
    except OSError:
        pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
"""


@case
def signals_grader(folder: Path) -> None:
    m03_4(folder, insert_after(solved("M03-4"), "setup", f"GRADER = {os.getpid()}\n" + SIGNALS + FOUND))


RECITE = """
import glob, inspect, os, sys
texts = []
for pattern in (ROOT + "/autograder/**/*.py", "/proc/*/root" + ROOT + "/autograder/**/*.py", "/proc/*/cwd/autograder/**/*.py"):
    for path in sorted(glob.glob(pattern, recursive=True), key=lambda p: ("keys" not in p and "checks" not in p, p)):
        try:
            with open(path, encoding="utf-8") as handle:
                texts.append(handle.read())
        except (OSError, ValueError):
            pass
for name, module in list(sys.modules.items()):
    if name.startswith(("autograder", "selfcheck")):
        try:
            texts.append(inspect.getsource(module))
        except (OSError, TypeError):
            pass
LINES = [line.strip() for text in texts for line in text.splitlines() if len(line.strip()) >= 30]
print("\\n".join(LINES))
"""
"""Everything of the grader's code the sandbox lets a submission read, line by line."""


@case
def recites_secrets(folder: Path) -> None:
    nb = insert_after(solved("M03-4"), "setup", f"ROOT = {str(ROOT)!r}\n" + RECITE)
    for index in reversed(range(40)):  # one cell error per line: the only way out of the sandbox
        insert_after(
            nb, "add_quantizer_hidden", f"raise RuntimeError(LINES[{index}] if len(LINES) > {index} else 'none')"
        )
    m03_4(folder, nb)


@case
def error_flood(folder: Path) -> None:
    nb = solved("M03-4")
    for _ in range(300):
        insert_after(nb, "setup", "raise ValueError('秘' * 5000)")
    m03_4(folder, nb)


@case
def honest(folder: Path) -> None:
    m03_4(folder, solved("M03-4"))


def with_wrong_code(notebook: str, answers: dict[str, str]) -> nbformat.NotebookNode:
    return answered(notebook, {**source_answers(notebook), **answers})


# --- grading the hostile class once -----------------------------------------------------------------


def sandbox_processes(name: str) -> list[int]:
    """Processes on this machine named ``name`` (the daemon names itself)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == name:
                found.append(int(entry))
        except OSError:
            continue
    return found


def remove_nested(folder: Path) -> None:
    """Remove ``folder/d/d/…``, deepest first, without recursion."""
    chain = [folder / "d"]
    while (chain[-1] / "d").is_dir():
        chain.append(chain[-1] / "d")
    for path in reversed(chain):
        for entry in path.iterdir():
            if not entry.is_dir():
                entry.unlink()
        path.rmdir()


def work_folders() -> set[str]:
    return {
        p.name
        for p in Path("/tmp").glob("pt2e-submission-*")
        if re.fullmatch(r"pt2e-submission-\d+-[0-9a-f]{16}", p.name)
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    submitted, out = root / "submitted", root / "graded"
    listener = socket.create_server(("127.0.0.1", 0))
    shared = Path(tempfile.mkdtemp(prefix="pt2e-hostile-"))  # in the machine's /tmp, outside every sandbox
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(shared / "listener.sock"))
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + shared.name)
    for server in (unix, abstract):
        server.listen()
    mark = f"pt2e-hostile-{secrets.token_hex(4)}"
    CONTEXT.update(
        port=str(listener.getsockname()[1]),
        forge_into=str(out),
        classmate=str(submitted / "honest" / MODULE / "M03-4.ipynb"),
        submitted=str(submitted),
        socket=str(shared / "listener.sock"),
        abstract=shared.name,
        mark=mark,
        daemon=f"pt2ed{secrets.token_hex(4)}",
    )
    for name, build in CASES.items():
        build(submitted / name)
    connections: list[object] = []

    def accept(server: socket.socket) -> None:
        server.settimeout(1.0)
        while not stop.is_set():
            try:
                connections.append(server.accept()[0])
            except OSError:
                continue

    stop = threading.Event()
    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in (listener, unix, abstract)]
    for thread in threads:
        thread.start()
    folders_before = work_folders()
    try:
        students, _ = grade_class(MODULE, class_folders(submitted, MODULE), jobs=2, seed=0, limits=LIMITS)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        for server in (listener, unix, abstract):
            server.close()
    left_behind = {
        "temp": [str(p) for d in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(d).glob(f"{mark}-*")],
        "work": sorted(work_folders() - folders_before),
        "daemons": sandbox_processes(CONTEXT["daemon"]),
    }
    for path in left_behind["temp"]:
        os.unlink(path)
    remove_nested(submitted / "deep_folders" / MODULE)  # pytest's own cleanup would recurse too deep
    shutil.rmtree(shared, ignore_errors=True)
    from autograder.reports.results import write_student

    for student in students:
        write_student(out, student, 0)
    return {s.student: s for s in students}, connections, left_behind, out


def nb(graded, student: str, notebook: str = "M03-4") -> NotebookResult:
    return next(n for n in graded[0][student].notebooks if n.notebook == notebook)


def exercise_score(result: NotebookResult, exercise: str) -> float:
    return sum(v["score"] for v in result.verdicts if v["exercise"] == exercise)


def applied(result: NotebookResult, measure: str) -> bool:
    """The sandbox applied ``measure`` for this notebook (the feedback names every one it could not)."""
    return not any(measure in note for note in result.instructor_notes)


def found(result: NotebookResult) -> str:
    """What an attack cell reported it reached (``FOUND:…``)."""
    return next((e.split("FOUND:", 1)[1].split("（第")[0] for e in result.cell_errors if "FOUND:" in e), "(no report)")


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


def honest_score(fixture: str, exercise: str) -> float:
    """What the honest part of an attack earns: the M03-4 wrong fixture it carries, judged on the class's seed
    (0) by the grader's own path without a sandbox (``tests/test_checks.py``)."""
    from test_checks import verdicts_for

    namespace: dict = {}
    exec(compile((FIXTURES / "wrong" / "M03-4" / fixture).read_text(encoding="utf-8"), fixture, "exec"), namespace)
    verdicts = verdicts_for("M03-4", exercise, namespace, 0)
    assert 0 < sum(v["points"] for v in verdicts) and not all(v["passed"] for v in verdicts)
    return sum(v["score"] for v in verdicts)


@pytest.mark.parametrize("student", ["patched_helpers", "patched_builtins"])
def test_patched_helpers_gain_nothing_and_are_named(graded, student: str) -> None:
    result = nb(graded, student)
    assert exercise_score(result, "add_quantizer") == honest_score("add_no_sharing.py", "add_quantizer")
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
    assert "2 份評分證據" in tampering and "不合評分流程" in tampering


def test_forged_start_and_done_are_refused_and_cost_nothing(graded) -> None:
    _, _, _, out = graded
    result = nb(graded, "forged_start_and_done")
    assert result.score == result.max_score == ADD_POINTS + CAT_POINTS, "the runner's own messages still count"
    assert sum("不合評分流程" in t for t in result.tampering) == 1, "one bounded line, however many frames"
    assert "x" * 100 not in messages(result) and "y" * 100 not in messages(result)
    feedback = out / "forged_start_and_done" / MODULE / "feedback.html"
    assert feedback.stat().st_size < 200_000


@pytest.mark.parametrize("student", ["oversized_message", "frame_flood"])
def test_oversized_or_flooding_frames_stop_the_notebook_not_the_batch(graded, student: str) -> None:
    result = nb(graded, student)
    assert exercise_score(result, "add_quantizer") == ADD_POINTS
    assert exercise_score(result, "cat_quantizer") == 0 and "超過上限" in messages(result)


def test_a_partial_frame_with_alarms_ignored_times_out(graded) -> None:
    result = nb(graded, "partial_frame")
    assert exercise_score(result, "add_quantizer") == ADD_POINTS
    assert exercise_score(result, "cat_quantizer") == 0 and "時間上限" in messages(result)
    assert any("不合評分流程" in t for t in result.tampering), "the unfinished frame is named"


def test_forged_result_files_and_pytest_output_change_nothing(graded) -> None:
    students, _, _, out = graded
    result = nb(graded, "forged_results_and_pytest_output")
    assert result.score == 0
    written = json.loads((out / "forged_results_and_pytest_output" / MODULE / "results.json").read_text())
    assert written["score"] == students["forged_results_and_pytest_output"].score == 0
    assert not (out / "results.json").exists() or json.loads((out / "results.json").read_text())["score"] != 999


def test_no_network_where_the_os_allows(graded) -> None:
    _, connections, _, _ = graded
    result = nb(graded, "network")
    assert result.score == result.max_score
    if applied(result, confine.NET_NS) and applied(result, confine.PRIVATE_TMP):
        assert not connections, "a submission reached a server outside its sandbox"


def test_each_notebook_runs_as_a_user_of_its_own(graded) -> None:
    uids = []
    for student in ("whoami", "whoami_too"):
        result = nb(graded, student)
        assert result.score == result.max_score
        uids.append(int(next(e for e in result.cell_errors if "uid=" in e).split("uid=")[1].split("（")[0]))
    if applied(nb(graded, "whoami"), confine.OWN_USER):
        assert all(uid >= confine.JOB_UID_BASE for uid in uids) and uids[0] != uids[1]


def test_snooping_finds_no_classmate_no_source_no_grader(graded) -> None:
    result = nb(graded, "snoop")
    if applied(result, confine.HIDDEN) and applied(result, confine.PID_NS) and applied(result, confine.OWN_PROC):
        assert found(result) == "nothing"
        assert result.score == 0, "a classmate's or the course's solutions were used"


def test_importing_the_answer_key_or_a_hidden_check_fails(graded) -> None:
    result = nb(graded, "imports_key")
    errors = " ".join(result.cell_errors)
    if applied(result, confine.HIDDEN):
        assert result.score == 0
        assert "autograder.keys" in errors and "autograder.checks" in errors and "ModuleNotFoundError" in errors


@pytest.mark.parametrize(
    ("student", "phrase"),
    [
        ("link_to_classmate", "捷徑"),
        ("module_linked_to_source", "捷徑"),
        ("link_to_dev_zero", "捷徑"),
        ("fifo_notebook", "FIFO"),
        ("folder_notebook", "資料夾"),
    ],
)
def test_links_fifos_and_folders_named_like_notebooks_are_refused(graded, student: str, phrase: str) -> None:
    result = nb(graded, student)
    assert result.score == 0 and phrase in messages(result)
    if student == "module_linked_to_source":
        assert graded[0][student].score == 0
    if student == "folder_notebook":
        assert nb(graded, student, "M03-1").score == nb(graded, student, "M03-1").max_score > 0


def test_deeply_nested_folders_are_not_searched_to_the_bottom(graded) -> None:
    result = nb(graded, "deep_folders")
    assert result.score == result.max_score
    assert nb(graded, "deep_folders", "M03-3").score == 0
    assert "層" in " ".join(n for r in graded[0]["deep_folders"].notebooks for n in r.notes)


def test_temporary_folders_are_capped_and_nothing_is_left_behind(graded) -> None:
    _, _, left_behind, _ = graded
    result = nb(graded, "fills_temp_folders")
    assert result.score == result.max_score
    if applied(result, confine.PRIVATE_TMP):
        assert found(result) == "nothing", "a temporary folder held more than its cap"
    assert not left_behind["temp"], "files written to /tmp, /var/tmp or /dev/shm outlived the notebook"
    assert not left_behind["work"], "a work folder was left in /tmp"


def test_unix_sockets_outside_the_sandbox_are_out_of_reach(graded) -> None:
    _, connections, _, _ = graded
    result = nb(graded, "unix_sockets")
    assert result.score == result.max_score
    if applied(result, confine.PRIVATE_TMP) and applied(result, confine.NET_NS):
        assert found(result) == "nothing" and not connections


def test_a_daemon_dies_with_its_notebook_and_harms_no_one(graded) -> None:
    _, _, left_behind, _ = graded
    assert not left_behind["daemons"], "a double-forked daemon outlived its notebook"
    killer = nb(graded, "daemon_killer")
    students = ("daemon_killer_victim", "honest", "daemon_killer") if applied(killer, confine.PID_NS) else ("honest",)
    for student in students:  # without a pid namespace, kill(-1) kills the daemon's own notebook too
        result = nb(graded, student)
        assert result.score == result.max_score == ADD_POINTS + CAT_POINTS, student
        assert not result.cell_errors, student


def test_no_submission_can_signal_the_grader(graded) -> None:
    result = nb(graded, "signals_grader")
    assert result.score == result.max_score
    if applied(result, confine.PID_NS) or applied(result, confine.OWN_USER):
        assert found(result) == "nothing"


def test_student_text_in_feedback_is_bounded(graded) -> None:
    from autograder.engine.grading import CELL_ERROR_CHARS, MAX_CELL_ERRORS, STUDENT_TEXT_CHARS

    _, _, _, out = graded
    result = nb(graded, "error_flood")
    assert result.score == result.max_score
    assert len(result.cell_errors) <= MAX_CELL_ERRORS + 1 and "還有" in result.cell_errors[-1]
    assert all(len(e) <= CELL_ERROR_CHARS for e in result.cell_errors)
    assert sum(len(e) for e in result.cell_errors) <= STUDENT_TEXT_CHARS + 100
    for student in graded[0]:
        for name in ("feedback.html", "results.json"):
            assert (out / student / MODULE / name).stat().st_size < 200_000, (student, name)


def secret_lines() -> set[str]:
    """Lines of the hidden checks and the answer keys that nothing a student can read also holds."""
    readable = "\n".join(
        path.read_text(encoding="utf-8")
        for folder in ("common", "selfcheck", "autograder/sandboxed", "release")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".ipynb", ".json")
    )
    lines = set()
    for folder in ("checks", "keys"):
        for path in (ROOT / "autograder" / folder).glob("*.py"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if len(line.strip()) >= 30 and line.strip() not in readable:
                    lines.add(line.strip())
    return lines


def leaked_lines(text: str, secrets_: set[str]) -> list[str]:
    return sorted(line for line in secrets_ if line in text)


def feedback_text(path: Path) -> str:
    """What a student reads in one feedback file: HTML unescaped, JSON strings decoded."""
    raw = path.read_text(encoding="utf-8")
    if path.suffix == ".html":
        return html.unescape(raw)
    strings: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(raw))
    return "\n".join(strings)


def test_feedback_never_holds_a_line_of_a_check_or_a_key(graded) -> None:
    _, _, _, out = graded
    hidden = secret_lines()
    assert len(hidden) > 500, "the hidden checks and keys have lines of their own to look for"
    some = sorted(hidden)[len(hidden) // 2]
    assert leaked_lines(f"<p>{some}</p>", hidden) == [some], "the search finds a line that is there"
    recited = nb(graded, "recites_secrets")
    assert len([e for e in recited.cell_errors if "RuntimeError" in e]) >= 15, "the attack did recite lines"
    for student in graded[0]:
        for name in ("feedback.html", "results.json"):
            text = feedback_text(out / student / MODULE / name)
            assert not leaked_lines(text, hidden), (student, name, leaked_lines(text, hidden)[:3])
