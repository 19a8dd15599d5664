"""Hidden checks of M01-3: replace_op and insert_clamp on models the student has not seen.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
replace_op
- matching by node name instead of ``node.target`` → retargeted: a graph an earlier pass edited in place
  (the node named ``sigmoid`` is a relu, the node named ``relu`` a tanh);
- the new node takes ``node.args[0]`` only → add (two tensors, and a tensor plus a scalar);
- ``extra_args`` dropped, or put before the original arguments → relu6 (hardtanh(x, 0, 6));
- only the first match, or only the first consumer rewired, or rewiring by rebuilding ``args`` (misses
  a consumer that reads it inside a list, and the output node) → relu6, add (cat of a list, outputs);
- the old node left on the graph, the new one appended at the end (lint fails), no recompile → every case;
- a copy returned instead of the graph edited in place → every case.
insert_clamp
- matching by node name → module_names: ops renamed after their modules (``linear_act`` is a relu,
  the linears are ``proj`` and ``head``);
- ``replace_all_uses_with`` without excluding the clamp itself (a self loop), or only the first
  consumer, or the output node skipped → fan_out, output, chain;
- a clamp after a target that feeds the next target: each gets its own → chain;
- low / high swapped, hardtanh or ``torch.clamp`` instead of ``aten.clamp.default``, no recompile →
  every case (counts and numerics).
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, value

CASES = {
    "relu6": "relu → hardtanh(0, 6)（一個 relu 有三個 consumer、其中一個在 cat 的 list 裡；一個 relu 是輸出）",
    "sigmoid": "sigmoid → hardsigmoid（沒有額外引數；一個 sigmoid 是輸出之一）",
    "add": "add.Tensor → mul.Tensor（兩個 tensor 相加、加上純量 0.5；都被 cat 的 list 讀，一個是輸出）",
    "retargeted": "relu → hardtanh(0, 6)，圖先被別的 pass 原地改過 target（叫 sigmoid 的 node 是 relu，叫 relu 的是 tanh）",
    "fan_out": "在 conv2d 後面插 clamp（第一個 conv 的輸出有兩個 consumer）",
    "output": "在 linear 後面插 clamp（linear 的輸出直接回傳）",
    "chain": "在 linear 後面插 clamp（linear 接 linear，兩個都被 cat 的 list 讀，第二個也是輸出）",
    "module_names": "在 linear 後面插 clamp，op 依 module 改過名（linear 叫 proj_90、head_92，叫 linear_act_91 的是 relu）",
}
REPLACE = ("relu6", "sigmoid", "add", "retargeted")
CLAMP = ("fan_out", "output", "chain", "module_names")


def _counts(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got, want = value(seen, case)["counts"], value(expected, case)["counts"]
    if got == want:
        return
    targets = sorted(set(got) | set(want))
    diff = [
        f"{t}：預期 {want.get(t, 0)} 個，看到 {got.get(t, 0)} 個" for t in targets if got.get(t, 0) != want.get(t, 0)
    ]
    raise Fail(f"{CASES[case]}：圖上各 op 的數量不對，" + "；".join(diff))


def _wiring(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got_case, want_case = value(seen, case), value(expected, case)
    got, want = got_case["wiring"], want_case["wiring"]
    for name, inputs in want.items():
        if got.get(name) != inputs:
            seen_inputs = got.get(name, "（這個 node 不見了，或 target 被改了）")
            raise Fail(f"{CASES[case]}：{name} 的輸入預期 {inputs}，看到 {seen_inputs}")
    extra = sorted(set(got) - set(want))
    if extra:
        raise Fail(f"{CASES[case]}：{extra} 還留在圖上（應該已經被換掉、刪除）")
    if got_case["lint"] != "ok":
        raise Fail(f"{CASES[case]}：gm.graph.lint() 失敗：{got_case['lint']}")


def _numerics(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got_case, want_case = value(seen, case), value(expected, case)
    got, want = got_case["outputs"], want_case["outputs"]
    if isinstance(got, dict):
        raise Fail(f"{CASES[case]}：執行改過的 gm 出錯：{got.get('error')}")
    if len(got) != len(want):
        raise Fail(f"{CASES[case]}：輸出的元素個數預期 {len(want)}，看到 {len(got)}")
    bad = [
        i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not math.isclose(g, w, rel_tol=1e-4, abs_tol=1e-5)
    ]
    if bad:
        i = bad[0]
        hint = ""
        if not got_case.get("recompiled", True):
            hint = "（gm 執行的還是改圖之前產生的程式碼：改完圖要 gm.recompile()）"
        elif got_case["unchanged"]:
            hint = "（輸出和改圖之前一模一樣）"
        raise Fail(
            f"{CASES[case]}：輸出和預期不符（allclose 不成立），{len(bad)} / {len(want)} 個元素不同，"
            f"例如第 {i} 個預期 {want[i]:.6g}，看到 {got[i]:.6g}{hint}"
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
    _wiring(seen, expected, "fan_out")
    _wiring(seen, expected, "chain")


@check("insert_clamp", 1, "輸出直接回傳的 linear：output node 也改讀 clamp")
def test_clamp_output(seen, expected):
    _wiring(seen, expected, "output")


@check("insert_clamp", 1, "數值：改過的 gm 的輸出和預期 allclose（low、high 的順序正確，並且 recompile）")
def test_clamp_numerics(seen, expected):
    for case in CLAMP:
        _numerics(seen, expected, case)
