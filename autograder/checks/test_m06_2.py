"""Hidden checks of M06-2: the SQNR drop of every layer, and the layer that loses most.

What a student who half-understood the numeric debugger could bake in, and the hidden case that refutes it:

- the culprit is the node with the lowest SQNR (errors add up downstream): every case (a 2-bit last layer);
- the upstream of a node is its direct input (on the prepared graph it is an observer): every case;
- with several upstream nodes, compare with the best one (or the first one): ``branches`` (the bad conv is
  the add's second operand, the clean one is better);
- a node's SQNR is its first run, not the mean of the runs: every case (two batches);
- a drop is "this minus upstream" (a rise), or nodes without upstream count (as 0 or infinite): every case;
- a node whose output is a list (split) is in the table, or stops the walk upstream: ``split``;
- only layers with weights (conv, linear) can be the culprit: ``activation`` (a 4-bit add, no weight);
- the upstream is the previous entry of the comparison (graph order), not the graph's edges: ``branches``;
- editing the prepared graph (taking observers out to walk it) is harmless: every case notes whether the
  calls left it as it was.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, expect, value

WHERE = {
    "chain": "沒有分支的模型（conv → relu → … → linear）",
    "branches": "兩個分支相加的模型（壞掉的 conv 是 add 的第二個輸入）",
    "split": "split 之後接 conv 的模型（split 的輸出是 list，不在表裡）",
    "activation": "禍首沒有 weight 的模型（add 的輸出只用 4 bit）",
}
CASES = ("chain", "branches", "split", "activation")


def _text(number: Any) -> str:
    return f"{number:.2f} dB" if isinstance(number, float) else repr(number)


def _result(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("drops"), dict), f"{WHERE[case]}：證據格式不對")
    return result


def compare_worst(seen: Any, expected: Any, case: str) -> None:
    got, want = _result(seen, case), _result(expected, case)
    if got["worst"] == want["worst"]:
        return
    drops, sqnr = want["drops"], want.get("sqnr", {})
    message = f"{WHERE[case]}：worst_layer 預期 {want['worst']}（比上游掉了 {_text(drops[want['worst']])}），你回傳 {got['worst']!r}"
    mine = got["worst"]
    if mine in drops and mine in sqnr:
        message += f"；{mine} 的 SQNR 是 {_text(sqnr[mine])}，但它只比上游掉了 {_text(drops[mine])}"
    elif mine in sqnr:
        message += f"；{mine} 沒有上游可以比（它的輸入只來自模型的輸入或常數）"
    raise Fail(message)


@check("worst_layer", 1, "沒有分支的模型：掉最多的那一層，不是 SQNR 最低的那一層")
def test_worst_chain(seen, expected):
    compare_worst(seen, expected, "chain")


@check("worst_layer", 1, "兩個分支相加：add 的上游取 SQNR 較低的那一個")
def test_worst_branches(seen, expected):
    compare_worst(seen, expected, "branches")


@check("worst_layer", 1, "上游要穿過不在表裡的 node（observer、輸出是 list 的 split）")
def test_worst_split(seen, expected):
    compare_worst(seen, expected, "split")


@check("worst_layer", 1, "禍首不一定有 weight：add 的輸出只用很少的 bit 時，禍首是 add")
def test_worst_activation(seen, expected):
    compare_worst(seen, expected, "activation")


@check("worst_layer", 2, "layer_drops：每一層比上游掉了幾 dB（四個模型，每層的 SQNR 是每次執行的平均）")
def test_drops(seen, expected):
    for case in CASES:
        got, want = _result(seen, case)["drops"], _result(expected, case)["drops"]
        extra = [name for name in got if name not in want]
        if extra:
            raise Fail(
                f"{WHERE[case]}：layer_drops 多了 {'、'.join(extra[:4])}（沒有上游可以比的 node，或不在比較結果裡的 node，不列入）"
            )
        missing = [name for name in want if name not in got]
        if missing:
            raise Fail(f"{WHERE[case]}：layer_drops 少了 {'、'.join(missing[:4])}（預期的 node：{'、'.join(want)}）")
        for name, number in want.items():
            mine = got[name]
            if not (isinstance(mine, float) and math.isclose(mine, number, rel_tol=1e-4, abs_tol=1e-3)):
                raise Fail(f"{WHERE[case]}：{name} 比上游掉了 {_text(number)}，你算的是 {_text(mine)}")


@check("worst_layer", 1, "只讀不改：傳進來的 gm（prepared 圖）呼叫之後和之前一樣")
def test_leaves_graph(seen, expected):
    for case in CASES:
        result = _result(seen, case)
        if result.get("changed") is not False:
            raise Fail(
                f"{WHERE[case]}：layer_drops 或 worst_layer 改了傳進來的 gm（node 或它們的引數變了）。"
                "往上游找時穿過 observer 就好，不要把它們從圖上拿掉：呼叫的人之後還要用這張圖"
            )
