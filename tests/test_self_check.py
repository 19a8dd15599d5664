"""What a student reads when a self-check cell fails: a few lines that say why, never a torchao traceback.

``selfcheck.self_check`` wraps each exercise's self-check cell. These tests run cell-like code through it
(compiled under an IPython-style cell name, so it counts as the student's notebook code) and read what
IPython would show (``_render_traceback_``).
"""

from __future__ import annotations

from typing import Any

import pytest

from common.exercises import ExerciseNotDone
from selfcheck.self_check import SelfCheckFailed, self_check

_cells = 0


def _cell(source: str, namespace: dict[str, Any]) -> None:
    """Run ``source`` as IPython runs a cell: under a cell's name, its lines in ``linecache``."""
    import linecache

    global _cells
    _cells += 1
    name = f"<ipython-input-{_cells}-0123456789ab>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), namespace)


def _run(body: str, namespace: dict[str, Any]) -> SelfCheckFailed | ExerciseNotDone:
    namespace.setdefault("self_check", self_check)
    source = 'with self_check("M03-4", "add_quantizer", globals()):\n' + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
    with pytest.raises((SelfCheckFailed, ExerciseNotDone)) as caught:
        _cell(source, namespace)
    return caught.value


def test_a_failed_assert_shows_its_message_and_the_exercise() -> None:
    failed = _run('assert 1 == 2, "share=True：3 個 observer node 應該指向同一個實例"', {})
    lines = failed._render_traceback_()
    assert lines[0] == "✗ 自我檢查沒有通過：share=True：3 個 observer node 應該指向同一個實例"
    assert "AddQuantizer：add 的輸入與輸出共用 qparams" in lines[1]
    assert not any("Traceback" in line or "File " in line for line in lines)


def test_a_bare_assert_shows_its_condition() -> None:
    failed = _run("x = 3\nassert x == 4", {})
    assert failed._render_traceback_()[0] == "✗ 自我檢查沒有通過：這個條件不成立：assert x == 4"


def test_an_error_shows_what_it_means_and_the_line_of_notebook_code() -> None:
    namespace: dict[str, Any] = {}
    _cell("def annotate(nodes):\n    return nodes[0]\n", namespace)  # the student's own cell
    failed = _run("annotate([])", namespace)
    first = failed._render_traceback_()[0]
    assert first.startswith("✗ 自我檢查時出錯：IndexError（索引超出範圍")
    assert "list index out of range" in first and "annotate 第 2 行：return nodes[0]" in first


def test_an_unanswered_exercise_says_so_in_one_line() -> None:
    namespace: dict[str, Any] = {}
    _cell("class AddQuantizer:\n    def annotate(self, model):\n        raise NotImplementedError()\n", namespace)
    done = _run("AddQuantizer().annotate(None)", namespace)
    assert isinstance(done, ExerciseNotDone)
    assert done._render_traceback_() == ["先完成練習：AddQuantizer（這一格要用到它）"]
    missing = _run("AddQuantizer(share=True)", {})  # the answer's cell never ran
    assert isinstance(missing, ExerciseNotDone)


def test_a_typo_in_a_finished_answer_is_not_taken_for_an_unanswered_exercise() -> None:
    failed = _run("undefined_helper()", {})
    assert isinstance(failed, SelfCheckFailed) and "NameError" in failed._render_traceback_()[0]


def test_a_known_misconception_is_named_with_its_section() -> None:
    from autograder.maintenance.fixtures import wrong_solutions

    wrong = next(w for w in wrong_solutions() if w.id == "M03-4/add_no_dedup")
    namespace: dict[str, Any] = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    failed = _run(
        "import torch\n"
        "from common.pt2e import export_module, prepare_pt2e\n"
        "class _AddSelf(torch.nn.Module):\n"
        "    def forward(self, a):\n"
        "        return a + a\n"
        "prepare_pt2e(export_module(_AddSelf(), (torch.ones(2, 4),)), AddQuantizer(share=True))",
        namespace,
    )
    lines = failed._render_traceback_()
    assert lines[0].startswith("✗ 自我檢查時出錯：RecursionError")
    assert "可能的原因：add(r, r) 的同一條邊貼了兩次" in "\n".join(lines)
    assert any("重讀 M03-4 的「BasicAddQuantizer 的假設在哪裡不成立」" in line for line in lines)
    assert len(lines) < 10, "a few lines, not a traceback of about 1,000 frames"
