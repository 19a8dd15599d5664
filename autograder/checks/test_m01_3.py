"""Hidden checks of M01-3: replace_op and insert_clamp on models the student has not seen.

Each check describes the graph after the student's pass (how many nodes of each op, what every node
that was there before reads, whether it passes lint and was recompiled) and runs it, against the answer
key's, on hidden graphs: several consumers, a list and the output reading the node, a graph whose node
names no longer match their ops, a node of another overload of the op asked for (left alone), an old op
with two arguments and one extra argument.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m01_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, raised, value
from selfcheck import diagnosis
from selfcheck.diagnosis import refusal
from selfcheck.public import m01_3 as public

CASES = {
    "relu6": "relu → hardtanh(0, 6)（一個 relu 有三個 consumer、其中一個在 cat 的 list 裡；一個 relu 是輸出）",
    "sigmoid": "sigmoid → hardsigmoid（沒有額外引數；一個 sigmoid 是輸出之一）",
    "add": "add.Tensor → mul.Tensor（兩個 tensor 相加、加上純量 0.5；都被 cat 的 list 讀，一個是輸出）",
    "clamp": "clamp(x, 0) → hardtanh，extra_args 只有 6（old 本來就有兩個引數）",
    "mean": "mean.dim → amax（圖上還有一個 mean.default：同一個 op 的另一個 overload，不是 old）",
    "retargeted": "relu → hardtanh(0, 6)，圖先被別的 pass 原地改過 target（叫 sigmoid 的 node 是 relu，叫 relu 的是 tanh）",
    "fan_out": "在 conv2d.default 後面插 clamp（第一個 conv 的輸出有兩個 consumer；"
    'padding="same" 的 conv 是 conv2d.padding，不是 target）',
    "output": "在 linear 後面插 clamp（linear 的輸出直接回傳）",
    "chain": "在 linear 後面插 clamp（linear 接 linear，兩個都被 cat 的 list 讀，第二個也是輸出）",
    "module_names": "在 linear 後面插 clamp，op 依 module 改過名（linear 叫 proj_90、head_92，叫 linear_act_91 的是 relu）",
}
REPLACE = ("relu6", "sigmoid", "add", "clamp", "mean", "retargeted")
CLAMP = ("fan_out", "output", "chain", "module_names")


def _counts(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got, want = value(seen, case)["counts"], value(expected, case)["counts"]
    if got == want:
        return
    targets = sorted(set(got) | set(want))
    diff = [
        f"{t} 應該有 {want.get(t, 0)} 個，你的有 {got.get(t, 0)} 個" for t in targets if got.get(t, 0) != want.get(t, 0)
    ]
    raise Fail(f"{CASES[case]}：圖上各 op 的數量不對：" + "；".join(diff))


def _wiring(seen: dict[str, Any], expected: dict[str, Any], case: str, skip: tuple[str, ...] = ()) -> None:
    """What every node reads, as the key's; ``skip``: nodes another check judges (their reads are not compared)."""
    got_case, want_case = value(seen, case), value(expected, case)
    got, want = got_case["wiring"], want_case["wiring"]
    for name, inputs in want.items():
        if name in skip:
            continue
        if got.get(name) != inputs:
            seen_inputs = got.get(name, "（這個 node 不見了，或 target 被改了）")
            raise Fail(f"{CASES[case]}：{name} 應該讀 {inputs}，你的讀 {seen_inputs}")
    extra = sorted(set(got) - set(want))
    if extra:
        raise Fail(f"{CASES[case]}：{extra} 還留在圖上，應該已經被換掉、刪除")
    if got_case["lint"] != "ok":
        raise Fail(f"{CASES[case]}：改過的圖通不過 gm.graph.lint()：{got_case['lint']}")


def _numerics(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got_case, want_case = value(seen, case), value(expected, case)
    got, want = got_case["outputs"], want_case["outputs"]
    if isinstance(got, dict):
        raise Fail(f"{CASES[case]}：執行改過的 gm 出錯：{got.get('error')}")
    if len(got) != len(want):
        raise Fail(f"{CASES[case]}：輸出應該有 {len(want)} 個元素，你的有 {len(got)} 個")
    bad = [
        i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not math.isclose(g, w, rel_tol=1e-4, abs_tol=1e-5)
    ]
    if bad:
        i = bad[0]
        hint = ""
        if not got_case.get("recompiled", True):
            hint = "。gm 執行的還是改圖之前產生的程式碼：改完圖要 gm.recompile()"
        elif got_case["unchanged"]:
            hint = "。你的輸出和改圖之前一模一樣"
        raise Fail(
            f"{CASES[case]}：輸出和預期不符（allclose 不成立），{len(bad)} / {len(want)} 個元素不一樣，"
            f"例如第 {i} 個應該是 {want[i]:.6g}，你的是 {got[i]:.6g}{hint}"
        )


@check("replace_op", 1, "old 全部換成 new、舊 node 刪乾淨：圖上各 op 的數量正確")
def test_replace_counts(seen, expected):
    for case in REPLACE:
        _counts(seen, expected, case)


@check("replace_op", 1, "原本讀 old 的每個 node（包括 output）都改讀 new，而且圖通過 lint")
def test_replace_wiring(seen, expected):
    for case in REPLACE:
        _wiring(seen, expected, case)


@check("replace_op", 1, "數值：改過的 gm 的輸出和預期 allclose（new 帶上 extra_args，並且 recompile）")
def test_replace_numerics(seen, expected):
    for case in REPLACE:
        _numerics(seen, expected, case)


@check("insert_clamp", 1, "每個 target 後面各插一個 aten.clamp.default，其他 op 的數量不變")
def test_clamp_counts(seen, expected):
    for case in CLAMP:
        _counts(seen, expected, case)


@check(
    "insert_clamp",
    1,
    "輸出有好幾個 consumer 的 op（包括 list 裡的、下一個 target）：每個 consumer 都改讀 clamp，clamp 讀原本的 op",
)
def test_clamp_fan_out(seen, expected):
    # what the output node reads is test_clamp_output's to judge
    _wiring(seen, expected, "fan_out", skip=("output",))
    _wiring(seen, expected, "chain", skip=("output",))


@check("insert_clamp", 1, "輸出直接回傳的 linear：output node 也改讀 clamp")
def test_clamp_output(seen, expected):
    _wiring(seen, expected, "output")


@check("insert_clamp", 1, "數值：改過的 gm 的輸出和預期 allclose（low、high 的順序正確，並且 recompile）")
def test_clamp_numerics(seen, expected):
    for case in CLAMP:
        _numerics(seen, expected, case)


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m01_3.py) --------

REPLACE_CHECKS = ("test_replace_counts", "test_replace_wiring", "test_replace_numerics")
CLAMP_WIRING = ("test_clamp_fan_out", "test_clamp_output", "test_clamp_numerics")


def _only_where_names_lie(seen: Any, expected: Any, trap: str) -> bool:
    """The graph whose node names no longer match their ops is edited wrong, and no other graph is but those with a
    node of another overload of the op (named like it: a name test takes it too)."""
    if diagnosis.errors(seen):
        return False
    records = public.passes(seen, expected)
    wrong = {
        place[0] for place, got, want in records if got["counts"] != want["counts"] or got["wiring"] != want["wiring"]
    }
    overloads = {place[0] for place, _, want in records if want.get("other_overloads")}
    return trap in wrong and wrong <= {trap} | overloads


@detects("replace_op", "returns_copy")
def replace_returns_copy(seen: Any, expected: Any) -> bool:
    # a copy of the whole graph brings a module that is no observer (the grader refuses to replay it)
    return raised(seen, ("EvidenceError",), says="原地修改") or "複製了整個圖" in refusal(seen)


@detects("replace_op", "python_function", explains=REPLACE_CHECKS)
def replace_python_function(seen: Any, expected: Any) -> bool:
    return public._python_function(seen, expected) or "是 Python 函式" in refusal(seen)


@detects("replace_op", "no_recompile", explains=("test_replace_numerics",))
def replace_no_recompile(seen: Any, expected: Any) -> bool:
    return public._not_recompiled(seen, expected)


@detects("replace_op", "appended_at_end", explains=("test_replace_wiring", "test_replace_numerics"))
def replace_at_end(seen: Any, expected: Any) -> bool:
    return public._after_output(seen, expected)


@detects("replace_op", "by_name", explains=REPLACE_CHECKS)
def replace_by_name(seen: Any, expected: Any) -> bool:
    return _only_where_names_lie(seen, expected, "retargeted")


@detects("replace_op", "other_overloads", explains=REPLACE_CHECKS)
def replace_other_overloads(seen: Any, expected: Any) -> bool:
    return public._other_overloads_touched(seen, expected)


@detects("replace_op", "first_argument_only", explains=("test_replace_wiring", "test_replace_numerics"))
def replace_first_argument(seen: Any, expected: Any) -> bool:
    return public._fewer_inputs(seen, expected)


@detects("replace_op", "extra_args_misplaced", explains=("test_replace_numerics",))
def replace_extra_args(seen: Any, expected: Any) -> bool:
    return public._only_numbers_wrong(seen, expected)


@detects("replace_op", "first_match_only", explains=REPLACE_CHECKS)
def replace_first_match(seen: Any, expected: Any) -> bool:
    return public._fewer_new_nodes(seen, expected)


@detects("replace_op", "first_user_only", explains=REPLACE_CHECKS)
def replace_first_user(seen: Any, expected: Any) -> bool:
    return public._some_users_only(seen, expected)


# the users it leaves on old (a cat's list, the output's tuple) compute old's values, as first_user_only's do:
# the numbers are the same mistake seen from the outputs
@detects("replace_op", "rewrites_args_tuple", explains=REPLACE_CHECKS)
def replace_rewrites_args(seen: Any, expected: Any) -> bool:
    return public._list_users_missed(seen, expected)


@detects("replace_op", "old_node_left", explains=("test_replace_counts", "test_replace_wiring"))
def replace_old_left(seen: Any, expected: Any) -> bool:
    return public._old_left(seen, expected)


@detects("insert_clamp", "python_function")
def clamp_python_function(seen: Any, expected: Any) -> bool:
    return public._python_function(seen, expected) or "是 Python 函式" in refusal(seen)


@detects("insert_clamp", "no_recompile", explains=("test_clamp_numerics",))
def clamp_no_recompile(seen: Any, expected: Any) -> bool:
    return public._not_recompiled(seen, expected)


@detects("insert_clamp", "appended_at_end", explains=CLAMP_WIRING)
def clamp_at_end(seen: Any, expected: Any) -> bool:
    return public._after_output(seen, expected)


@detects("insert_clamp", "clamp_reads_itself", explains=CLAMP_WIRING)
def clamp_reads_itself(seen: Any, expected: Any) -> bool:
    return public._reads_itself(seen, expected)


@detects("insert_clamp", "by_name")
def clamp_by_name(seen: Any, expected: Any) -> bool:
    return _only_where_names_lie(seen, expected, "module_names")


@detects("insert_clamp", "other_overloads", explains=("test_clamp_counts", *CLAMP_WIRING))
def clamp_other_overloads(seen: Any, expected: Any) -> bool:
    return public._other_overloads_touched(seen, expected)


@detects("insert_clamp", "packet_target")
def clamp_packet(seen: Any, expected: Any) -> bool:
    return public._packet_target(seen, expected)


@detects("insert_clamp", "other_clamping_op")
def clamp_other_op(seen: Any, expected: Any) -> bool:
    return public._other_op(seen, expected)


@detects("insert_clamp", "first_match_only")
def clamp_first_match(seen: Any, expected: Any) -> bool:
    return public._fewer_clamps(seen, expected)


@detects("insert_clamp", "clamp_reads_input", explains=CLAMP_WIRING)
def clamp_reads_input(seen: Any, expected: Any) -> bool:
    return public._clamps_input(seen, expected)


@detects("insert_clamp", "first_user_only", explains=CLAMP_WIRING)
def clamp_first_user(seen: Any, expected: Any) -> bool:
    return public._some_users_only(seen, expected)


@detects("insert_clamp", "rewrites_args_tuple", explains=CLAMP_WIRING)
def clamp_rewrites_args(seen: Any, expected: Any) -> bool:
    return public._list_users_missed(seen, expected)


@detects("insert_clamp", "output_skipped", explains=("test_clamp_output", "test_clamp_numerics"))
def clamp_output_skipped(seen: Any, expected: Any) -> bool:
    return public._output_missed(seen, expected)


@detects("insert_clamp", "swapped_bounds", explains=("test_clamp_numerics",))
def clamp_swapped(seen: Any, expected: Any) -> bool:
    return public._collapsed(seen, expected)
