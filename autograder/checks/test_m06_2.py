"""Hidden checks of M06-2: the SQNR drop of every layer, and the layer that loses most.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m06_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, expect, raised, value
from selfcheck.public import m06_2 as public

WHERE = {
    "chain": "沒有分支的模型（conv → relu → … → linear）",
    "branches": "兩個分支相加的模型（壞掉的 conv 是 add 的第二個輸入）",
    "split": "split 之後接 conv 的模型（split 的輸出是 list，不在表裡）",
    "activation": "禍首沒有 weight 的模型（add 的輸出只用 4 bit）",
    "rise": "乾淨的分支加上一條很小、有誤差的支路的模型（add 之後 SQNR 大幅回升，掉幅是負的）",
}
CASES = ("chain", "branches", "split", "activation", "rise")


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
    message = f"{WHERE[case]}：worst_layer 應該是 {want['worst']}（比上游掉了 {_text(drops[want['worst']])}），你回傳 {got['worst']!r}"
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
    compare_worst(seen, expected, "rise")


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
            raise Fail(f"{WHERE[case]}：layer_drops 少了 {'、'.join(missing[:4])}（應該有的 node：{'、'.join(want)}）")
        for name, number in want.items():
            mine = got[name]
            if not (isinstance(mine, float) and math.isclose(mine, number, rel_tol=1e-4, abs_tol=1e-3)):
                raise Fail(f"{WHERE[case]}：{name} 比上游掉了 {_text(number)}，你算的是 {_text(mine)}")


@check("worst_layer", 1, "只讀不改：傳進來的 gm（prepared 圖）呼叫之後和之前一樣")
def test_leaves_graph(seen, expected):
    # judged on the cases whose calls returned (a call that raised is the other checks' to judge); when every
    # call raised, the first case says why
    ran = [case for case in CASES if not raised(seen, cases=(case,))]
    for case in ran or CASES[:1]:
        result = _result(seen, case)
        if result.get("changed") is not False:
            raise Fail(
                f"{WHERE[case]}：layer_drops 或 worst_layer 改了傳進來的 gm（node 或它們的引數變了）。"
                "往上游找時穿過 observer 就好，不要把它們從圖上拿掉：呼叫的人之後還要用這張圖"
            )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m06_2.py) --------

WORST_CHECKS = ("test_worst_chain", "test_worst_branches", "test_worst_split", "test_worst_activation")
DROP_CHECKS = (*WORST_CHECKS, "test_drops")


def _close(a: Any, b: Any, tolerance: float = 1e-3) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-4, abs_tol=tolerance)


def _same_drops(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return set(got["drops"]) == set(want["drops"]) and all(
        _close(got["drops"][name], number) for name, number in want["drops"].items()
    )


def _differing(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [name for name, number in want["drops"].items() if not _close(got["drops"].get(name), number)]


@detects("worst_layer", "changes_graph", explains=("test_leaves_graph",))
def changes_graph(seen: Any, expected: Any) -> bool:
    return public.changed_graph(seen, expected)


@detects("worst_layer", "rise_not_drop", explains=DROP_CHECKS)
def rise_not_drop(seen: Any, expected: Any) -> bool:
    return public.rise_not_drop(seen, expected)


@detects("worst_layer", "abs_drop", explains=WORST_CHECKS)
def abs_drop(seen: Any, expected: Any) -> bool:
    """The drops are right; the answer is the largest drop in size (a large rise, a negative drop, wins), and
    somewhere that is not the culprit."""
    found = False
    for _, got, want in public.drop_pairs(seen, expected):
        if not _same_drops(got, want):
            return False
        sizes = {n: abs(d) for n, d in want["drops"].items() if isinstance(d, float)}
        if not sizes or got.get("worst") != max(sizes, key=sizes.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found


@detects("worst_layer", "sources_counted", explains=DROP_CHECKS)
def sources_counted(seen: Any, expected: Any) -> bool:
    """Extra drops, for nodes of the comparison that have no upstream (the key leaves them out)."""
    return any(
        (set(got["drops"]) - set(want["drops"])) & set(want.get("sqnr") or {})
        for _, got, want in public.drop_pairs(seen, expected)
    )


@detects("worst_layer", "direct_inputs_only", explains=DROP_CHECKS)
def direct_inputs_only(seen: Any, expected: Any) -> bool:
    """Most layers have no drop (their direct input is an observer); where none is left, max() had nothing."""
    return public.most_missing(seen, expected)


@detects("worst_layer", "split_breaks_walk", explains=("test_worst_split", "test_drops"))
def split_breaks_walk(seen: Any, expected: Any) -> bool:
    """Right on the models without a split; on the split one, it stopped or lost the layers after the split."""
    others = [(got, want) for case, got, want in public.drop_pairs(seen, expected) if case != "split"]
    if len(others) < 3 or not all(set(got["drops"]) == set(want["drops"]) for got, want in others):
        return False
    if raised(seen, cases=("split",)) and not raised(seen, cases=("chain", "branches", "activation")):
        return True
    return any(
        case == "split" and set(got["drops"]) < set(want["drops"])
        for case, got, want in public.drop_pairs(seen, expected)
    )


@detects("worst_layer", "previous_in_order", explains=DROP_CHECKS)
def previous_in_order(seen: Any, expected: Any) -> bool:
    """Every drop is the previous entry's SQNR (graph order) minus this one's, and somewhere that is not the key's."""
    differs, checked = False, 0
    for _, got, want in public.drop_pairs(seen, expected):
        sqnr = want.get("sqnr") or {}
        order = list(sqnr)
        for name, number in got["drops"].items():
            if name not in sqnr or order.index(name) == 0:
                return False
            before = order[order.index(name) - 1]
            if not _close(number, sqnr[before] - sqnr[name], 1e-2):
                return False
            checked += 1
        differs = differs or bool(_differing(got, want))
    return checked > 0 and differs


@detects("worst_layer", "best_upstream", explains=DROP_CHECKS)
def best_upstream(seen: Any, expected: Any) -> bool:
    """Only some drops are off, each larger than the key's, and each measured from another node's SQNR: a node with
    several upstreams compared with one that is not the worst."""
    found = False
    for _, got, want in public.drop_pairs(seen, expected):
        if set(got["drops"]) != set(want["drops"]):
            return False
        sqnr = want.get("sqnr") or {}
        off = _differing(got, want)
        if 2 * len(off) > len(want["drops"]):
            return False
        for name in off:
            mine = got["drops"][name]
            if not isinstance(mine, float) or mine <= want["drops"][name] or name not in sqnr:
                return False
            if not any(_close(mine + sqnr[name], level, 1e-2) for other, level in sqnr.items() if other != name):
                return False
            found = True
    return found


@detects("worst_layer", "not_mean_of_runs", explains=DROP_CHECKS)
def not_mean_of_runs(seen: Any, expected: Any) -> bool:
    """The same nodes, most drops a little off (one run instead of their mean) or off by one factor (their sum)."""
    mine, theirs = [], []
    for _, got, want in public.drop_pairs(seen, expected):
        if set(got["drops"]) != set(want["drops"]):
            return False
        for name, number in want["drops"].items():
            if isinstance(got["drops"][name], float) and isinstance(number, float):
                mine.append(got["drops"][name])
                theirs.append(number)
    off = [not _close(a, b) for a, b in zip(mine, theirs, strict=True)]
    if not mine or 2 * sum(off) < len(off):
        return False
    close = [abs(a - b) <= max(2.0, 0.25 * abs(b)) for a, b in zip(mine, theirs, strict=True)]
    near = 4 * sum(close) >= 3 * len(close)  # one run is near the mean, except on the noisiest layers
    big = [(a, b) for a, b in zip(mine, theirs, strict=True) if abs(b) > 1]
    ratios = [a / b for a, b in big]
    scaled = bool(ratios) and max(ratios) - min(ratios) < 0.05 and abs(abs(ratios[0]) - 1) > 0.1 and ratios[0] > 0
    return near or scaled


@detects("worst_layer", "lowest_sqnr", explains=WORST_CHECKS)
def lowest_sqnr(seen: Any, expected: Any) -> bool:
    """In every case the answer is the node with the lowest SQNR, and somewhere that is not the culprit."""
    pairs = public.drop_pairs(seen, expected)
    found = False
    for _, got, want in pairs:
        sqnr = want.get("sqnr") or {}
        if not sqnr or got.get("worst") != min(sqnr, key=sqnr.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found


@detects("worst_layer", "weighted_only", explains=WORST_CHECKS)
def weighted_only(seen: Any, expected: Any) -> bool:
    """The drops are right; the answer is the largest drop among the conv / linear layers, which misses a culprit
    without weights."""
    found = False
    for _, got, want in public.drop_pairs(seen, expected):
        if not _same_drops(got, want):
            return False
        weighted = {n: d for n, d in want["drops"].items() if n.startswith(("conv", "linear")) and isinstance(d, float)}
        if not weighted or got.get("worst") != max(weighted, key=weighted.get):
            return False
        found = found or got.get("worst") != want.get("worst")
    return found
