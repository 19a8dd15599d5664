"""Build the sample class in examples/submitted/ from release/ and source/ (M03).

    .venv/bin/python examples/make_sample_class.py [OUT]

Six students, in nbgrader's layout examples/submitted/<student>/M03/*.ipynb:

full           every exercise solved (the solutions of source/)
untouched      the release notebooks as handed out
partial        M03-1 and AddQuantizer solved, the rest untouched
wrong-sharing  all solved, but AddQuantizer and CatQuantizer never share qparams
tampered       patches the grader's helpers, forges evidence, edits locked cells and
               points, returns an object whose __eq__ is always True, writes a fake
               results.json and prints fake pytest output
crashing       sys.exit(), a memory bomb, a flood of output, and os._exit() mid-notebook
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat

from autograder.maintenance.answers import answered, cell_with_id, insert_after, release_notebook, source_answers

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "examples" / "submitted"
MODULE = "M03"
NOTEBOOKS = ("M03-1", "M03-2", "M03-3", "M03-4")


def fixture(name: str) -> str:
    return (ROOT / "tests" / "fixtures" / "wrong" / name).read_text(encoding="utf-8")


FORGE_EVIDENCE = """# 「聰明」的作弊：找到評分程式回報用的管道，自己送一份滿分的證據
import json, os, stat, struct
fake = {"cases": {c: {"value": {}} for c in ("output_many_users", "edge_one_user", "stacked")}}
frame = json.dumps({"type": "evidence", "exercise": "add_label", "index": 1, "data": fake}).encode()
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        mode = os.fstat(fd).st_mode
        if fd > 2 and (stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)):
            os.write(fd, struct.pack(">I", len(frame)) + frame)
    except OSError:
        pass
"""

PATCH_HELPERS = """# 作弊：把評分會用到的工具換掉，讓任何 Quantizer 看起來都對
import common.graph_utils
import selfcheck.evidence
import autograder.checks.support
common.graph_utils.observer_nodes = lambda gm: []
selfcheck.evidence.describe_prepared = lambda gm: {"observers": [], "instances": [], "edges": {}, "constants": []}
autograder.checks.support.compare_observers = lambda *args, **kwargs: None
"""

ALWAYS_EQUAL = """class Anything(dict):
    def __eq__(self, other):
        return True

    __hash__ = dict.__hash__


def label_positions(labeled):
    return Anything(edges=[], outputs=[])
"""

FAKE_RESULTS = """# 作弊：寫一份假的成績檔，再印出假的 pytest 結果
import json, os
fake = {"score": 999, "tests": []}
for folder in (".", "..", "../..", os.path.expanduser("~")):
    try:
        with open(os.path.join(folder, "results.json"), "w") as handle:
            json.dump(fake, handle)
    except OSError:
        pass
print("===== 10 passed in 0.01s =====")
print("PASSED autograder/checks/test_m03_3.py::test_validate_accepts")
"""


def main(out: Path = OUT) -> None:
    if out.exists():
        shutil.rmtree(out)
    answers = {nb: source_answers(nb) for nb in NOTEBOOKS}
    students: dict[str, dict[str, nbformat.NotebookNode]] = {
        "full": {nb: answered(nb, answers[nb]) for nb in NOTEBOOKS},
        "untouched": {nb: release_notebook(nb) for nb in NOTEBOOKS},
        "partial": {
            "M03-1": answered("M03-1", answers["M03-1"]),
            "M03-2": release_notebook("M03-2"),
            "M03-3": release_notebook("M03-3"),
            "M03-4": answered("M03-4", {"add_quantizer": answers["M03-4"]["add_quantizer"]}),
        },
        "wrong-sharing": {nb: answered(nb, answers[nb]) for nb in NOTEBOOKS},
    }
    students["wrong-sharing"]["M03-4"] = answered(
        "M03-4",
        {"add_quantizer": fixture("M03-4/add_no_sharing.py"), "cat_quantizer": fixture("M03-4/cat_no_sharing.py")},
    )

    tampered = {nb: answered(nb, answers[nb]) for nb in NOTEBOOKS}
    insert_after(tampered["M03-1"], "add_label", FORGE_EVIDENCE)
    tampered["M03-2"] = answered("M03-2", {**answers["M03-2"], "label_positions": ALWAYS_EQUAL})
    insert_after(tampered["M03-3"], "setup", FAKE_RESULTS)
    tampered["M03-4"] = answered("M03-4", {**answers["M03-4"], "add_quantizer": fixture("M03-4/add_no_sharing.py")})
    insert_after(tampered["M03-4"], "add_quantizer", PATCH_HELPERS)
    hidden = cell_with_id(tampered["M03-4"], "add_quantizer_hidden")
    hidden.source = "7.0  # 直接給自己滿分"
    hidden.metadata["nbgrader"]["points"] = 99
    tests = cell_with_id(tampered["M03-4"], "add_quantizer_tests")
    tests.source = "print('自我檢查通過')"
    students["tampered"] = tampered

    crashing = {nb: answered(nb, answers[nb]) for nb in NOTEBOOKS}
    insert_after(crashing["M03-1"], "add_label_hidden", "import os\nos._exit(3)  # 行程直接結束：後面的練習沒有評到")
    insert_after(crashing["M03-2"], "setup", "import sys\nsys.exit('不想做了')")
    insert_after(crashing["M03-3"], "setup", "memory = bytearray(50 * 1024**3)  # 要 50 GB 記憶體")
    insert_after(crashing["M03-4"], "setup", "for i in range(20_000):\n    print('洗版' * 100)")
    students["crashing"] = crashing

    for student, notebooks in students.items():
        for notebook, nb in notebooks.items():
            path = out / student / MODULE / f"{notebook}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
    print(f"寫好 {len(students)} 位學生的作業：{out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
