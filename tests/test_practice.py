"""Practice after a mistake (issue 50, ``selfcheck.practice``): every practice in the exercises' records is offered
where its misconception is named, its stub is not taken for an answer, its worked example passes, the wrong
answers a student who still holds the misconception would write fail, and a repeated failure shows the next step."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from autograder.course import notebook_id, source_notebooks
from selfcheck.misconceptions import cause_lines
from selfcheck.practice import Practice, PracticeFailed, _failures, practice
from selfcheck.preview import public_exercises

WRONG = {
    "annotate_shared_add": [
        # every position its own spec: three observers
        "from common.pt2e import annotate_input_qspec_map, annotate_output_qspec\n"
        "def annotate_shared_add(node, spec):\n"
        "    annotate_input_qspec_map(node, node.args[0], spec)\n"
        "    annotate_input_qspec_map(node, node.args[1], spec)\n"
        "    annotate_output_qspec(node, spec)\n",
        # the inputs share, the output does not
        "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n"
        "def annotate_shared_add(node, spec):\n"
        "    first, second = node.args[0], node.args[1]\n"
        "    annotate_input_qspec_map(node, first, spec)\n"
        "    annotate_input_qspec_map(node, second, SharedQuantizationSpec((first, node)))\n"
        "    annotate_output_qspec(node, spec)\n",
        # the inputs point at the add's own output: torchao refuses it
        "from common.pt2e import SharedQuantizationSpec, annotate_input_qspec_map, annotate_output_qspec\n"
        "def annotate_shared_add(node, spec):\n"
        "    annotate_output_qspec(node, spec)\n"
        "    for a in node.args[:2]:\n"
        "        annotate_input_qspec_map(node, a, SharedQuantizationSpec(node))\n",
    ],
    "activation_inputs": [
        "from torch.fx import Node\ndef activation_inputs(node):\n    return [a for a in node.args[:2] if isinstance(a, Node)]\n",
        "from torch.fx import Node\n"
        "def activation_inputs(node):\n"
        "    return [a for a in node.args[:2] if isinstance(a, Node) and a.op != 'get_attr']\n",
        "def activation_inputs(node):\n    return list(node.args[:2])\n",
    ],
    "should_annotate": [
        "from common.pt2e import ANNOTATION_KEY\ndef should_annotate(node):\n    return ANNOTATION_KEY not in node.meta\n",
        "def should_annotate(node):\n    return True\n",
    ],
    "is_add": [
        "def is_add(node):\n    return node.name.startswith('add')\n",
        "def is_add(node):\n    return 'add' in str(node.target)\n",
    ],
    "bn_scale": [
        # no square root
        "def bn_scale(bn):\n    return bn.weight.detach() / (bn.running_var + bn.eps)\n",
        # ε outside the root
        "import torch\ndef bn_scale(bn):\n    return bn.weight.detach() / (torch.sqrt(bn.running_var) + bn.eps)\n",
        # the default ε, not the layer's
        "import torch\ndef bn_scale(bn):\n    return bn.weight.detach() / torch.sqrt(bn.running_var + 1e-5)\n",
        # γ's sign lost
        "import torch\ndef bn_scale(bn):\n    return bn.weight.detach().abs() / torch.sqrt(bn.running_var + bn.eps)\n",
    ],
    "folded_bias": [
        # μ added, not subtracted
        "def folded_bias(conv_b, bn, s):\n    return (conv_b + bn.running_mean) * s + bn.bias\n",
        # β scaled with the rest
        "import torch\n"
        "def folded_bias(conv_b, bn, s):\n"
        "    b = conv_b if conv_b is not None else torch.zeros_like(s)\n"
        "    beta = bn.bias.detach() if bn.bias is not None else torch.zeros_like(s)\n"
        "    return (b - bn.running_mean + beta) * s\n",
        # the conv's bias left out of the BN
        "import torch\n"
        "def folded_bias(conv_b, bn, s):\n"
        "    beta = bn.bias.detach() if bn.bias is not None else torch.zeros_like(s)\n"
        "    b = conv_b if conv_b is not None else torch.zeros_like(s)\n"
        "    return b - bn.running_mean * s + beta\n",
    ],
    "round_ties": [
        "round_ties = {-2.5: -3, -1.5: -2, -0.5: -1, 0.5: 1, 1.5: 2, 2.5: 3}\n",  # half away from zero
        "round_ties = {-2.5: -2, -1.5: -1, -0.5: 0, 0.5: 1, 1.5: 2, 2.5: 3}\n",  # floor(x + 0.5)
    ],
    "saturate": [
        # clamped to what the dtype holds, not to the range asked for
        "import torch\n"
        "def saturate(t, quant_min, quant_max, dtype):\n"
        "    info = torch.iinfo(dtype)\n"
        "    return torch.clamp(t, info.min, info.max).to(dtype)\n",
        # clamped, never cast
        "import torch\ndef saturate(t, quant_min, quant_max, dtype):\n    return torch.clamp(t, quant_min, quant_max)\n",
    ],
}
"""Per practice, answers a student who still holds the misconception would write."""


def _practices() -> list[tuple[str, str, Practice]]:
    """(notebook, misconception, practice) for every misconception with a practice."""
    found = []
    for path in source_notebooks():
        notebook = notebook_id(path)
        for exercise in public_exercises(notebook).values():
            for misconception in exercise.misconceptions:
                if misconception.practice is not None:
                    found.append((notebook, misconception.key, misconception.practice))
    return found


PRACTICES = _practices()
DISTINCT = {task.name: (notebook, key, task) for notebook, key, task in PRACTICES}


def _defined(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<cell>", "exec"), namespace)
    return namespace


def _run(notebook: str, key: str, namespace: dict[str, Any] | None = None) -> tuple[str, list[str] | None]:
    """What the cell prints, and the lines of the failure it shows (None when it passed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            practice(notebook, key, namespace)
        except PracticeFailed as failed:
            return out.getvalue(), failed.lines
    return out.getvalue(), None


def test_there_are_practices_and_every_one_has_wrong_answers_here() -> None:
    assert PRACTICES, "no misconception has a practice"
    assert set(DISTINCT) <= set(WRONG), f"practices without wrong answers in this test: {set(DISTINCT) - set(WRONG)}"


@pytest.mark.parametrize(("notebook", "key"), [(n, k) for n, k, _ in PRACTICES])
def test_the_diagnosis_offers_the_practice(notebook: str, key: str) -> None:
    misconception = next(
        m for e in public_exercises(notebook).values() for m in e.misconceptions if m.key == key and m.practice
    )
    lines = cause_lines(notebook, misconception)
    assert lines[-1].startswith("再練一題：") and f'practice("{notebook}", "{key}")' in lines[-1], lines


def test_the_preview_of_a_wrong_answer_offers_the_practice_of_the_cause_it_names() -> None:
    """Where people meet it: the preview cell of a wrong fixture whose misconception has a practice."""
    from autograder.maintenance.fixtures import wrong_solutions
    from selfcheck import ChecksFailed
    from selfcheck import preview as run_preview

    with_practice = {(n, k) for n, k, _ in PRACTICES}
    wrongs = [w for w in wrong_solutions() if w.in_notebook and (w.notebook, w.misconception) in with_practice]
    assert wrongs, "no wrong fixture is named in the notebook by a misconception with a practice"
    for wrong in wrongs[:3]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(ChecksFailed):
            run_preview(wrong.notebook, wrong.exercise, _defined(wrong.code))
        assert (
            f'再練一題：在新的一格執行 from selfcheck import practice; practice("{wrong.notebook}", "{wrong.misconception}")'
            in (out.getvalue())
        ), out.getvalue()


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_a_practice_opens_with_its_task_refuses_its_stub_and_passes_its_example(name: str) -> None:
    notebook, key, task = DISTINCT[name]
    printed, failed = _run(notebook, key)
    assert failed is None and printed.startswith("再練一題：") and task.starter.strip() in printed
    assert f'practice("{notebook}", "{key}", globals())' in printed
    _, failed = _run(notebook, key, _defined(task.starter))
    assert failed and "寫好" in failed[0], failed
    printed, failed = _run(notebook, key, _defined(task.example))
    assert failed is None and printed.startswith("✓"), (printed, failed)


@pytest.mark.parametrize("name", sorted(DISTINCT))
def test_each_wrong_answer_fails_and_a_repeated_failure_shows_the_next_step(name: str) -> None:
    notebook, key, task = DISTINCT[name]
    _failures.clear()
    for code in WRONG[name]:
        _failures.clear()
        _, failed = _run(notebook, key, _defined(code))
        assert failed and failed[0].startswith("✗"), (code, failed)
        assert "小一步" not in "\n".join(failed) and "做好的例子" not in "\n".join(failed), "the first failure: no step"
    wrong = _defined(WRONG[name][0])
    _, second = _run(notebook, key, wrong)
    assert second and any(line.startswith("小一步：") for line in second), second
    _, third = _run(notebook, key, wrong)
    assert third and any(line.startswith("看一個做好的例子") for line in third), third
    assert task.example.strip().splitlines()[-1].strip() in "\n".join(third), "the worked example is shown"
    _, fourth = _run(notebook, key, wrong)
    assert fourth == third, "after the worked example, the worked example again"
    _run(notebook, key, _defined(task.example))
    _, again = _run(notebook, key, wrong)
    assert again and "小一步" not in "\n".join(again), "a pass starts the steps over"
    _failures.clear()
