"""The feedback's drawing of a failing hidden case (``autograder.reports.drawing``): red where the student's
labels are wrong and nowhere else, and no bigger than the mistake needs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import wrong_solutions

from autograder.engine.diagnose import failing_case
from autograder.engine.reference_evidence import reference_evidence
from autograder.reports.drawing import WRONG, _labels_dot, cropped, sharing_mistakes

SPEC = {"kind": "spec", "dtype": {"dtype": "int8"}}


def _positions(groups: dict[str, int]) -> dict[str, Any]:
    return {position: {"spec": SPEC, "group": group} for position, group in groups.items()}


def _red(dot: str) -> list[str]:
    """The DOT lines of the edges drawn red."""
    return [line for line in dot.splitlines() if f'color="{WRONG}"' in line]


def test_an_output_left_out_of_its_group_is_the_only_sharing_mistake() -> None:
    want = _positions({"x → add": 0, "y → add": 0, "add 的輸出": 0})
    got = _positions({"x → add": 0, "y → add": 0, "add 的輸出": 1})
    assert sharing_mistakes(got, want) == {"add 的輸出": "✗ 應該和 x → add、y → add 共用"}


def test_no_sharing_at_all_and_sharing_everything_mark_every_member() -> None:
    want = _positions({"x → add": 0, "y → add": 0, "add 的輸出": 0})
    apart = _positions({"x → add": 0, "y → add": 1, "add 的輸出": 2})
    assert set(sharing_mistakes(apart, want)) == {"x → add", "y → add", "add 的輸出"}
    separate = _positions({"x → add": 0, "y → add": 1, "add 的輸出": 2})
    together = _positions({"x → add": 0, "y → add": 0, "add 的輸出": 0})
    assert set(sharing_mistakes(together, separate)) == {"x → add", "y → add", "add 的輸出"}
    assert sharing_mistakes(want, want) == {}


def test_a_big_case_is_cropped_to_the_wrong_positions_and_their_neighbours() -> None:
    chain = {f"n{i} → n{i + 1}": i for i in range(12)}
    want = _positions(chain)
    got = _positions({**chain, "n5 → n6": 99})
    got["n5 → n6"]["spec"] = {"kind": "spec", "dtype": {"dtype": "uint8"}}
    shown = cropped(got, want, {"n5 → n6"})
    assert shown == {"n4 → n5", "n5 → n6", "n6 → n7"}
    dot = _labels_dot({"positions": got}, {"positions": want}, "t")
    assert "n11" not in dot and "只畫出錯的位置" in dot
    assert len(_red(dot)) == 1


def _hidden_evidence(notebook: str, exercise: str, namespace: dict[str, Any], seed: int) -> dict[str, Any]:
    """The grader's path: record, pass as JSON, replay."""
    import json

    from autograder.sandboxed.cases.base import exercises_of
    from autograder.sandboxed.record import record_exercise
    from autograder.sandboxed.replay import derive

    spec = exercises_of(notebook)[exercise]
    return derive(spec, json.loads(json.dumps(record_exercise(spec, namespace, seed))), seed)


@pytest.mark.parametrize("name", ["add_output_not_shared", "cat_output_not_shared"])
def test_a_fixture_whose_output_alone_is_not_shared_is_drawn_red_at_the_output_only(name: str) -> None:
    wrong = next(w for w in wrong_solutions() if w.notebook == "M03-4" and w.path.stem == name)
    namespace: dict[str, Any] = {}
    exec(compile(wrong.code, str(wrong.path), "exec"), namespace)
    seen = _hidden_evidence(wrong.notebook, wrong.exercise, namespace, 0)
    case = failing_case(seen, reference_evidence(wrong.notebook, wrong.exercise, 0))
    assert case is not None
    red = _red(_labels_dot(case["got"], case["want"], "t"))
    # the inputs share one observer, as they should: only the output's position (one, read by the next op) is red
    assert len(red) == 1 and re.search("應該和 .* 共用", red[0]), red
    got, want = case["got"]["positions"], case["want"]["positions"]
    mistakes = sharing_mistakes(got, want)
    assert len(mistakes) == 1 and len(want) >= 3, (mistakes, want)
    (output,) = mistakes
    kept = [p for p in want if p != output]
    assert len({got[p]["group"] for p in kept}) == 1 and len({want[p]["group"] for p in want}) == 1
