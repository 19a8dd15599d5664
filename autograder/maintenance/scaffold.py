"""A new exercise in all seven places, from templates: ``pt2e-course scaffold M03-5 count_ops --title "…"``.

CONTRIBUTING's "One notebook, seven places": an exercise lives in its source notebook, its public record, its
hidden cases, its answer key, its hidden checks and its wrong and right fixtures. This writes all seven for a
*new* notebook of an existing module, with one exercise that works as it stands: the student writes
``<key>(gm)``, which counts the ``call_function`` nodes of an exported model. It is trivial on purpose: a
maintainer replaces the question, the cases, the key, the check and the fixtures, and keeps the shape.

The templates follow the course's conventions (CONTRIBUTING, "Writing a chapter" and "Misconceptions"):

- the notebook: the title, the question and its answer up front, a locked setup cell, one ``##`` section with a
  table and the ``assert`` that pins it, the exercise's four cells (``### 練習：…``, the solution cell with
  ``### BEGIN/END SOLUTION``, the self-check, the graded cell with its hidden part) and a 小結;
- the public record with one public case on the chapter's own model and one misconception (with its public
  detector and its section); the hidden cases with one case on models the seed changes, and a ``STANDINS``
  entry; the key; one check worth ``POINTS`` and the misconception's hidden detector;
- one wrong fixture (``# wrong:``, ``# exercise:``, ``# misconception:``, ``# expect-fail:``,
  ``# via-nbgrader:``) and one right fixture (``# right:``, ``# exercise:``).

Only a new notebook: adding an exercise to an existing notebook means editing a chapter, a record and a
checks module in place, which is left to the maintainer (the same seven places, by hand). The notebook is
written unexecuted; ``NEXT_STEPS`` says what to run next (execute, release, the record and check tests).
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path

import nbformat

POINTS = 2
"""The points of the scaffolded exercise: its one check's."""

NOTEBOOK_PATTERN = re.compile(r"M(\d{2})-(\d+)")
KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]*")


class ScaffoldError(ValueError):
    """The scaffold cannot be written; the message (one Chinese line) says why."""


def places(root: Path, notebook: str) -> dict[str, Path]:
    """The seven places of ``notebook``'s exercise under ``root`` (the two fixtures: one file each)."""
    module, name = notebook.split("-")[0], notebook.lower().replace("-", "_")
    return {
        "source": root / "source" / module / f"{notebook}.ipynb",
        "public": root / "selfcheck" / "public" / f"{name}.py",
        "cases": root / "autograder" / "sandboxed" / "cases" / f"{name}.py",
        "key": root / "autograder" / "keys" / f"{name}.py",
        "checks": root / "autograder" / "checks" / f"test_{name}.py",
        "wrong": root / "tests" / "fixtures" / "wrong" / notebook / "every_node.py",
        "right": root / "tests" / "fixtures" / "right" / notebook / "op_counter.py",
    }


def _check_arguments(root: Path, notebook: str, key: str, title: str) -> None:
    if not NOTEBOOK_PATTERN.fullmatch(notebook):
        raise ScaffoldError(f"notebook 的名字要像 M03-5（模組-編號），收到 {notebook!r}")
    module = notebook.split("-")[0]
    if not (root / "source" / module).is_dir():
        raise ScaffoldError(f"沒有 source/{module}：只能在已有的模組裡加新的 notebook")
    if not KEY_PATTERN.fullmatch(key) or keyword.iskeyword(key) or len(key) > 40:
        raise ScaffoldError(f"練習的 key 要是小寫的 Python 名字（例如 count_ops），收到 {key!r}")
    if not title.strip() or "\n" in title:
        raise ScaffoldError("--title 要是一行不空的標題")
    taken = [str(path.relative_to(root)) for path in places(root, notebook).values() if path.exists()]
    if (root / "tests" / "fixtures" / "wrong" / notebook).exists():
        taken.append(f"tests/fixtures/wrong/{notebook}/")
    if (root / "tests" / "fixtures" / "right" / notebook).exists():
        taken.append(f"tests/fixtures/right/{notebook}/")
    if taken:
        raise ScaffoldError(
            f"{notebook} 已經有 {'、'.join(sorted(set(taken)))}：scaffold 只建新的 notebook（在既有的 notebook 加題請照 "
            "CONTRIBUTING 的七個地方手動加）"
        )


def _fill(template: str, notebook: str, key: str, title: str) -> str:
    return (
        template.replace("__NB__", notebook)
        .replace("__MODULE_NAME__", notebook.lower().replace("-", "_"))
        .replace("__KEY__", key)
        .replace("__TITLE_REPR__", json.dumps(title, ensure_ascii=False))
        .replace("__TITLE__", title)
        .replace("__POINTS__", str(POINTS))
    )


def scaffold(root: Path, notebook: str, key: str, title: str) -> list[Path]:
    """Write the seven places of a new notebook ``notebook`` with one exercise ``key`` under ``root``.

    Returns the files written. Raises ``ScaffoldError`` (nothing written) when the notebook's name, the
    module, the key or the title is not right, or when any of the seven places already exists.
    """
    root = Path(root)
    _check_arguments(root, notebook, key, title)
    targets = places(root, notebook)
    texts = {
        "public": PUBLIC_TEMPLATE,
        "cases": CASES_TEMPLATE,
        "key": KEY_TEMPLATE,
        "checks": CHECKS_TEMPLATE,
        "wrong": WRONG_TEMPLATE,
        "right": RIGHT_TEMPLATE,
    }
    written = []
    for place, template in texts.items():
        path = targets[place]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(template, notebook, key, title), encoding="utf-8")
        written.append(path)
    nbformat.write(source_notebook(notebook, key, title), targets["source"])
    return [targets["source"], *written]


# --- the source notebook ------------------------------------------------------------------------------


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, locked: bool = False) -> dict:
    meta: dict = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if grade:
        meta["points"] = float(POINTS)
    return {"nbgrader": meta}


def source_notebook(notebook: str, key: str, title: str) -> nbformat.NotebookNode:
    """The chapter, unexecuted: its cells from ``NOTEBOOK_CELLS`` with the nbgrader metadata of each."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {
            "codemirror_mode": {"name": "ipython", "version": 3},
            "file_extension": ".py",
            "mimetype": "text/x-python",
            "name": "python",
            "nbconvert_exporter": "python",
            "pygments_lexer": "ipython3",
        },
    }
    metadata = {
        "setup": _nbgrader("setup", locked=True),
        "solution": _nbgrader(key, solution=True),
        "tests": _nbgrader(f"{key}_tests", locked=True),
        "graded": _nbgrader(f"{key}_hidden", grade=True, locked=True),
    }
    for number, (kind, role, text) in enumerate(NOTEBOOK_CELLS):
        source = _fill(text, notebook, key, title).strip("\n")
        cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
        cell.id = f"{notebook.lower()}-{number:02d}"
        cell.metadata = metadata.get(role, {})
        nb.cells.append(cell)
    return nb


NOTEBOOK_CELLS: list[tuple[str, str, str]] = [
    (
        "markdown",
        "",
        """
# __NB__ | __TITLE__

**問題**：一張 export 出來的圖上，有幾個 node 真的在計算？

**一句話的答案**：只有 `node.op == "call_function"` 的 node 是 op；placeholder（輸入）、get_attr（常數）、output，還有 call_module 的 `_guards_fn`（只檢查輸入的形狀）都不計算。

段落：

- A. 圖上的幾種 node：依 `node.op` 數一數。
- 練習：__KEY__，數出圖上的 op。
""",
    ),
    (
        "code",
        "setup",
        """
import torch

from common.models import example_inputs, get_model
from common.pt2e import export_module, quiet
from common.viz import table

quiet()
_ = torch.manual_seed(0)
""",
    ),
    (
        "markdown",
        "",
        """
## A. 圖上的幾種 node

把 `conv_relu`（conv → relu）export 成圖，依 `node.op` 數一數每一種 node 有幾個：
""",
    ),
    (
        "code",
        "",
        """
gm = export_module(get_model("conv_relu").eval(), example_inputs(4))
kinds = {}
for node in gm.graph.nodes:
    kinds[node.op] = kinds.get(node.op, 0) + 1
table(sorted(kinds.items()), ["node.op", "個數"])
""",
    ),
    (
        "code",
        "",
        """
assert kinds["call_function"] == 2  # conv2d 與 relu
assert kinds["placeholder"] == 1 and kinds["output"] == 1
assert sum(kinds.values()) > kinds["call_function"]  # 圖上的 node 比 op 多
""",
    ),
    (
        "markdown",
        "",
        """
只有 `call_function` node 在計算：`placeholder` 是輸入，`get_attr` 讀 weight 與 bias 常數，`output` 把結果傳出去，`call_module` 的 `_guards_fn` 只檢查輸入的形狀。

### 練習：__KEY__（__POINTS__ 分）

寫 `__KEY__(gm)`：回傳 `gm` 圖上 `call_function` node 的個數（`int`）。

**怎麼評分**：隱藏測試在你沒看過、層數隨亂數種子改變的模型上，比對你數到的個數和答案的個數（__POINTS__ 分）。

**提示**：走過 `gm.graph.nodes`，看每個 node 的 `node.op`。
""",
    ),
    (
        "code",
        "solution",
        """
def __KEY__(gm):
    ### BEGIN SOLUTION
    return sum(1 for node in gm.graph.nodes if node.op == "call_function")
    ### END SOLUTION
""",
    ),
    (
        "code",
        "tests",
        """
# 自我檢查（不計分）：通過代表方向對了；分數由下一格的隱藏測試決定。
from selfcheck.self_check import self_check

with self_check("__NB__", "__KEY__"):
    count = __KEY__(gm)
    assert type(count) is int, f"要回傳 int，看到 {type(count).__name__}"
    assert count == kinds["call_function"], (
        f"conv_relu 的圖上有 {kinds['call_function']} 個 call_function node，你數到 {count} 個"
    )
    print("自我檢查通過")
""",
    ),
    (
        "code",
        "graded",
        """
# 評分（__POINTS__ 分）：隱藏測試在你沒看過的模型上檢查同樣的行為。
# 作答時執行這一格可以預覽結果（沒全對會出錯）；正式評分時它會換成完整版本。
from selfcheck import preview
preview("__NB__", "__KEY__", globals())
### BEGIN HIDDEN TESTS
from autograder.notebook import grade
grade("__NB__", "__KEY__", globals())
### END HIDDEN TESTS
""",
    ),
    (
        "markdown",
        "",
        """
## 小結

- `node.op` 把圖上的 node 分成幾種：placeholder、get_attr、call_function、call_module 與 output。
- 只有 `call_function` node 是 op；輸入、常數、輸出與 `_guards_fn` 都不計算。
- 數 op 要看 `node.op`，不是數圖上有幾個 node。
""",
    ),
]
"""(kind, role, text) of each cell; the role names its nbgrader metadata (``source_notebook``)."""


# --- the other six places -------------------------------------------------------------------------------

PUBLIC_TEMPLATE = '''"""Public cases of __NB__ __TITLE__ (__KEY__) on the chapter's own model.

Scaffolded by ``pt2e-course scaffold``: one exercise, one public case, one misconception. Edit the title,
the cases, the evidence they describe and the misconceptions; the hidden cases
(``autograder/sandboxed/cases/__MODULE_NAME__.py``) and the checks (``autograder/checks/test___MODULE_NAME__.py``)
read the same evidence.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError
from selfcheck.misconceptions import Misconception, Section

TITLE = __TITLE_REPR__


def export(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``export_module`` of ``model`` in eval mode."""
    from common.pt2e import export_module

    return export_module(model.eval(), inputs)


def describe_count(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    """What ``__KEY__(gm)`` returned (an exact ``int``), beside the number of every node of ``gm``.

    ``nodes`` is the case's own reading of the graph, not the answer: the detectors compare the student's
    count with it to recognise "counted every node".
    """
    count = ns["__KEY__"](gm)
    if type(count) is not int:
        raise EvidenceError(f"__KEY__ 應該回傳 int，看到 {type(count).__name__}")
    return {"count": count, "nodes": len(gm.graph.nodes)}


def chapter_model(ns: Namespace, seed: int) -> Any:
    """The chapter's conv_relu: two ops among placeholders, constants, the guard and the output."""
    from common.models import get_model

    return describe_count(ns, export(get_model("conv_relu"), seeded_inputs(seed, (2, 3, 16, 16))))


# --- where the chapter teaches it ----------------------------------------------------------------

KINDS = Section("A. 圖上的幾種 node")
RULES = Section("練習：__KEY__（__POINTS__ 分）")


# --- reading the evidence (the public cases' and the hidden ones' alike) ---------------------------


def _counts_every_node(seen: Any, expected: Any) -> bool:
    """Every case's count is the number of every node of its graph, not of its ops."""
    counted = [
        (diagnosis.value(seen, case, "count"), diagnosis.value(seen, case, "nodes")) for case in diagnosis.cases(seen)
    ]
    return bool(counted) and all(isinstance(count, int) and count == nodes for count, nodes in counted)


MISCONCEPTIONS = (
    Misconception(
        "counts_every_node",
        "把圖上每一個 node 都當成 op",
        "圖上除了 op，還有輸入（placeholder）、常數（get_attr）、output 與檢查輸入形狀的 _guards_fn。"
        'len(gm.graph.nodes) 把它們都數進去了。只數 node.op == "call_function" 的 node。',
        KINDS,
        public=_counts_every_node,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise("__KEY__", TITLE, ("__KEY__",), {"chapter_model": chapter_model}, misconceptions=MISCONCEPTIONS),
)
'''

CASES_TEMPLATE = '''"""__NB__ __TITLE__: __KEY__ on hidden models.

The hidden case exports a stack of linear → relu blocks the student has not seen; the seed changes its depth and
width (so the number of ops). Scaffolded by ``pt2e-course scaffold``: add the cases that refute the
misconceptions of the record (``selfcheck/public/__MODULE_NAME__.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, seeded_model, with_hidden_cases
from selfcheck.public.__MODULE_NAME__ import PUBLIC, describe_count, export


class Stack(nn.Module):
    """``depth`` linear → relu blocks of ``width`` features."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x))
        return x


def deeper(ns: Namespace, seed: int) -> Any:
    """A stack of 2 to 5 blocks, 4 to 9 features wide, by seed."""
    width, depth = seed_size(seed, 4, 9), seed_size(seed // 3, 2, 5)
    model = seeded_model(seed, Stack, width, depth)
    return describe_count(ns, export(model, seeded_inputs(seed, (3, width))))


EXERCISES = with_hidden_cases(PUBLIC, __KEY__={"deeper": deeper})


STANDINS = {
    "__KEY__": lambda gm: 0,
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``)."""
'''

KEY_TEMPLATE = '''"""Answer key of __NB__: __KEY__, the number of call_function nodes."""

from __future__ import annotations

from torch.fx import GraphModule


def __KEY__(gm: GraphModule) -> int:
    count = 0
    for node in gm.graph.nodes:
        if node.op == "call_function":
            count += 1
    return count
'''

CHECKS_TEMPLATE = '''"""Hidden checks of __NB__: __KEY__ on models the student has not seen.

The check compares the student's count with the answer key's on the hidden case; the misconception of the
record (``selfcheck/public/__MODULE_NAME__.py``) has its detector at the end of this module. Scaffolded by
``pt2e-course scaffold``: one check per behaviour to grade, the points of all of them in the graded cell.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, value
from selfcheck.public import __MODULE_NAME__ as public

CASES = {"deeper": "層數與寬度隨亂數種子改變的 linear → relu 模型"}


@check("__KEY__", __POINTS__, "數的是 call_function node（op），不是圖上每一個 node")
def test___KEY__(seen, expected):
    for case, where in CASES.items():
        got, want = value(seen, case), value(expected, case)
        if got["count"] == want["count"]:
            continue
        hint = "：placeholder、get_attr、output 與 _guards_fn 都不是 op" if got["count"] == want["nodes"] else ""
        raise Fail(f"{where}：應該有 {want['count']} 個 call_function node，你數到 {got['count']} 個{hint}")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/__MODULE_NAME__.py) ----


@detects("__KEY__", "counts_every_node")
def counts_every_node(seen: Any, expected: Any) -> bool:
    return public._counts_every_node(seen, expected)
'''

WRONG_TEMPLATE = """# wrong: 數了圖上每一個 node：placeholder、get_attr、output 與 _guards_fn 也算進去
# exercise: __KEY__
# misconception: counts_every_node
# expect-fail: test___KEY__
# via-nbgrader: yes
def __KEY__(gm):
    return len(gm.graph.nodes)
"""

RIGHT_TEMPLATE = """# right: 用 Counter 數每一種 node.op，再取 call_function 的個數
# exercise: __KEY__
from collections import Counter


def __KEY__(gm):
    return Counter(node.op for node in gm.graph.nodes)["call_function"]
"""


NEXT_STEPS = """接下來（CONTRIBUTING 的「One notebook, seven places」；docs/term.md 的「加一題」）：
  1. 改題目、解答、公開與隱藏例子、答案、檢查、誤解與兩個 fixture（現在是一題能評分的範例：數 call_function node）
  2. pt2e-course release {module}             # 先寫預期證據 selfcheck/expected/{notebook}.json（預覽要用），再產生 release/{module}/
  3. pt2e-course execute {source}            # 執行 notebook，輸出要 commit
  4. pytest tests/test_records.py -q          # 紀錄、隱藏紀錄、檢查與評分格對得上
  5. PT2E_ALL_SEEDS=1 pytest tests/test_checks.py -k {notebook} -q
  6. 把新的一章加到 README 的課綱表與教學指南的十週安排（autograder/maintenance/teaching_guide.py 的 WEEKS）"""
