"""Hidden checks of M06-3: a filter function that leaves modules in fp32, and the greedy search for the fewest.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m06_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck import diagnosis
from selfcheck.public.m06_3 import (
    alone_ranked,
    chosen,
    evaluate_misused,
    filter_raised,
    fp32_relation,
    never_refused,
    no_stack_refused,
    reordered_somewhere,
    search_relation,
)

# --- may_quantize ---------------------------------------------------------------------------------

FILTER_WHERE = {
    "none": "什麼都不跳過",
    "leaf": "跳過 stem（conv，它的 relu 寫在最外層的 forward 裡）",
    "names": "跳過名字是另一個 module 名字前綴的 1×1 conv",
    "block": "跳過整個 block（裡面有 conv、nn.ReLU、linear）",
    "inner": "只跳過 block.fc（block 裡的 linear）",
    "tail": "跳過的名字只是 block 裡某一層路徑的最後一段（沒有路徑完全相同的 module）",
}


def _filtered(evidence: Any, case: str, part: str | None = None) -> dict[str, Any]:
    result = value(evidence, case)
    if part is not None:
        expect(isinstance(result, dict) and part in result, "收到的結果不是預期的格式")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("observed"), list), "收到的結果不是預期的格式")
    return result


def _listed(names: list[str]) -> str:
    return "、".join(names) if names else "（沒有）"


def compare_filtered(seen: Any, expected: Any, case: str, part: str | None = None) -> None:
    """The same fp32 weights, the same observed nodes, the same q/dq steps on every edge."""
    got, want = _filtered(seen, case, part), _filtered(expected, case, part)
    where = f"{FILTER_WHERE[part or case]}（skipped = {want['skipped']}）"
    if got["fp32_weights"] != want["fp32_weights"]:
        message = f"{where}：weight 留在 fp32 的層應該是 {_listed(want['fp32_weights'])}，你的是 {_listed(got['fp32_weights'])}"
        if not got["fp32_weights"] and not want["fp32_weights"]:
            message += "（兩邊都沒有跳過任何層）"
        elif len(got["fp32_weights"]) > len(want["fp32_weights"]) and not want["fp32_weights"]:
            message += "；沒有 nn_module_stack 的 node（weight 與 bias 的 get_attr）要回答 True，否則整個 conv pattern 都不會量化"
        raise Fail(message)
    if got["observed"] != want["observed"]:
        missing = sorted(set(want["observed"]) - set(got["observed"]))
        extra = sorted(set(got["observed"]) - set(want["observed"]))
        raise Fail(
            f"{where}：prepare 之後應該有 {want['observers']} 個 observer，你的有 {got['observers']} 個"
            f"（少了觀察 {_listed(missing)} 的 observer，多了觀察 {_listed(extra)} 的）"
        )
    for op, steps in want["edges"].items():
        mine = got["edges"].get(op)
        if mine != steps:
            raise Fail(
                f"{where}：convert 之後 {op} 的輸入應該是 {'；'.join(steps)}，你的是 {'；'.join(mine or ['（沒有這個 op）'])}"
            )


@check("may_quantize", 1, "什麼都不跳過：每個 conv 照常量化（weight 的 get_attr 沒有 nn_module_stack，要回答 True）")
def test_keep_all(seen, expected):
    compare_filtered(seen, expected, "none")


@check("may_quantize", 1, "跳過一個 conv（它的 relu 在 module 外面）：這個 conv 留在 fp32，其他層照常量化")
def test_leaf(seen, expected):
    compare_filtered(seen, expected, "leaf")


@check("may_quantize", 1, "跳過一個父 module：裡面每一層都留在 fp32；只跳過裡面的一層時，其他層照常量化")
def test_parent(seen, expected):
    compare_filtered(seen, expected, "parent", "block")
    compare_filtered(seen, expected, "parent", "inner")


@check("may_quantize", 1, "module 的路徑要完全相同：跳過 proj 不會動到 proj2；node 的名字不是 module 的名字")
def test_names(seen, expected):
    compare_filtered(seen, expected, "names")
    compare_filtered(seen, expected, "parent", "tail")


# --- greedy_skip ----------------------------------------------------------------------------------

WHERE = {
    "interaction": "有一層單獨跳過沒用、和第一個選到的層一起跳過卻幫很大",
    "ties": "兩層一樣好（平手）",
    "exact": "某個選擇剛好等於目標",
    "already": "量化後已經達到目標",
    "unreachable": "全部留在 fp32 也達不到目標",
    "worse": "第一步每一個候選都比現在差（兩層一起留才好）",
    "negative": "每一個分數都是負的",
    "reset": "第二步最好的候選比第一步選到的分數低",
    "first": "同一個 layers list 第一次傳進來",
    "again": "同一個 layers list 第二次傳進來",
    "fresh": "一個新的 layers list",
    "model": "真實的模型（3-bit weight，output 的 SQNR）",
}


def _search(evidence: Any, case: str, part: str | None = None) -> dict[str, Any]:
    result = value(evidence, case)
    if part is not None:
        expect(isinstance(result, dict) and part in result, "收到的結果不是預期的格式")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("chosen"), list), "收到的結果不是預期的格式")
    return result


def compare_search(seen: Any, expected: Any, case: str, part: str | None = None) -> None:
    got, want = _search(seen, case, part), _search(expected, case, part)
    where = f"{WHERE[part or case]}（layers = {want['layers']}，目標 {want['target']}）"
    if got["chosen"] == want["chosen"]:
        return
    message = f"{where}：應該依序跳過 {want['chosen']}（分數 {want['score']}），你回傳的是 {got['chosen']}"
    if got.get("score") is not None:
        message += f"（分數 {got['score']}，{'有' if got.get('reached') else '沒有'}達到目標）"
    if sorted(got["chosen"]) == sorted(want["chosen"]):
        message += "；層對了，順序不對：list 的順序是選到的先後"
    elif got.get("reached") and len(got["chosen"]) > len(want["chosen"]):
        message += "；有達到目標，但不是照規則一次選一層、每次選「加上它之後分數最高」的那一層，多跳過了"
    elif len(got["chosen"]) < len(want["chosen"]) and not got.get("reached"):
        message += "；還沒達到目標就停了：每一步都要選一層（即使每個候選都比現在差），直到達到目標或全部選完"
    raise Fail(message)


@check("greedy_skip", 1, "每一步都重新評估：選「和已經跳過的層一起」分數最高的那一層")
def test_interaction(seen, expected):
    compare_search(seen, expected, "interaction")


@check("greedy_skip", 1, "平手時選 layers 裡排在前面的；回傳的順序是選到的先後")
def test_ties(seen, expected):
    compare_search(seen, expected, "ties")
    # the interaction case's order only: which layers the search picks there is test_interaction's to judge
    got, want = _search(seen, "interaction"), _search(expected, "interaction")
    if sorted(got["chosen"]) == sorted(want["chosen"]) and got["chosen"] != want["chosen"]:
        compare_search(seen, expected, "interaction")


@check("greedy_skip", 1, "達到（≥）目標就停；一開始就達到目標時什麼都不跳過")
def test_stops_at_target(seen, expected):
    compare_search(seen, expected, "stops", "already")
    compare_search(seen, expected, "stops", "exact")


@check("greedy_skip", 1, "達不到目標時，回傳全部的層（依選到的順序）")
def test_unreachable(seen, expected):
    compare_search(seen, expected, "unreachable")


@check("greedy_skip", 1, "每一步都選一層：即使每個候選都比現在差，分數是負的也一樣")
def test_every_step_picks(seen, expected):
    compare_search(seen, expected, "worse")
    compare_search(seen, expected, "negative")


@check("greedy_skip", 1, "每一步重新找最好的候選（上一步的最佳分數不能留到下一步）")
def test_best_reset(seen, expected):
    compare_search(seen, expected, "reset")


@check("greedy_skip", 1, "不改呼叫者的 layers：同一個 list 再搜一次，結果和新的 list 一樣")
def test_arguments_unchanged(seen, expected):
    got = value(seen, "arguments")
    expect(isinstance(got, dict) and {"first", "again", "fresh"} <= set(got), "收到的結果不是預期的格式")
    compare_search(seen, expected, "arguments", "fresh")
    again, fresh = _search(seen, "arguments", "again"), _search(seen, "arguments", "fresh")
    if again["chosen"] != fresh["chosen"]:
        raise Fail(
            f"同一個 layers list 第二次傳進來，你回傳 {again['chosen']}，換成一個新的 list 卻回傳 {fresh['chosen']}："
            "greedy_skip 改了呼叫者傳進來的 layers（例如 remove、pop、sort）。呼叫的人之後還要用它，請在自己的複本上操作"
        )
    compare_search(seen, expected, "arguments", "again")


@check("greedy_skip", 1, "真實的模型：跳過的層與順序正確，而且達到目標")
def test_model(seen, expected):
    compare_search(seen, expected, "model")
    got = _search(seen, "model")
    expect(bool(got.get("reached")), f"{WHERE['model']}：跳過 {got['chosen']} 之後沒有達到目標")


# --- what a wrong answer probably believed (the records: selfcheck/public/m06_3.py) ---------------------

FILTERS = (("none",), ("leaf",), ("names",), ("parent", "block"), ("parent", "inner"), ("parent", "tail"))
FILTER_CHECKS = ("test_keep_all", "test_leaf", "test_parent", "test_names")


def _relations(seen: Any, expected: Any) -> dict[str, str | None]:
    """Each filter case's ``fp32_relation``, by its last name (none, leaf, names, block, inner, tail)."""
    return {place[-1]: fp32_relation(seen, expected, *place) for place in FILTERS}


@detects("may_quantize", "returns_non_bool", explains=FILTER_CHECKS)
def filter_returns_non_bool(seen: Any, expected: Any) -> bool:
    return filter_raised(seen, "應該回傳 True 或 False")


@detects("may_quantize", "changes_graph", explains=FILTER_CHECKS)
def filter_changes_graph(seen: Any, expected: Any) -> bool:
    return filter_raised(seen, "改了圖")


@detects("may_quantize", "no_stack_refused", explains=FILTER_CHECKS)
def filter_no_stack_refused(seen: Any, expected: Any) -> bool:
    """With nothing skipped, convs stay in fp32 (their weights were refused), or reading the stack raised."""
    return no_stack_refused(seen, expected, ("none",))


@detects("may_quantize", "pattern_spans_modules", explains=("test_leaf", "test_names", "test_parent"))
def filter_pattern_spans_modules(seen: Any, expected: Any) -> bool:
    """A conv followed by an op outside its module (relu, add) is not skipped; a pattern wholly inside the
    skipped block is."""
    found = _relations(seen, expected)
    inside = diagnosis.value(seen, "parent", "block", "fp32_weights")
    return (
        found["none"] == "same"
        and found["leaf"] == "fewer"
        and found["names"] == "fewer"
        and isinstance(inside, list)
        and bool(inside)
    )


@detects("may_quantize", "innermost_only", explains=("test_parent",))
def filter_innermost_only(seen: Any, expected: Any) -> bool:
    """Skipping the parent leaves layers inside it quantized; skipping a leaf module works."""
    found = _relations(seen, expected)
    return found["block"] == "fewer" and found["leaf"] == "same" and found["inner"] == "same"


@detects("may_quantize", "outermost_only", explains=("test_parent",))
def filter_outermost_only(seen: Any, expected: Any) -> bool:
    """Skipping a module inside the block does nothing; skipping the block works."""
    found = _relations(seen, expected)
    return found["inner"] == "fewer" and found["block"] == "same"


@detects("may_quantize", "prefix_match", explains=("test_names",))
def filter_prefix_match(seen: Any, expected: Any) -> bool:
    """Skipping one of two modules whose names share a prefix also skips the other; nothing else is off."""
    found = _relations(seen, expected)
    return found["names"] == "more" and all(found[key] == "same" for key in ("none", "leaf", "block", "inner"))


@detects("may_quantize", "last_segment_match", explains=("test_names",))
def filter_last_segment_match(seen: Any, expected: Any) -> bool:
    """A name that is only the last segment of a nested path skips that layer; everything else is right."""
    found = _relations(seen, expected)
    return found["tail"] == "more" and all(found[key] == "same" for key in ("none", "leaf", "names", "block", "inner"))


@detects("may_quantize", "node_name_match", explains=("test_leaf", "test_names", "test_parent"))
def filter_node_name_match(seen: Any, expected: Any) -> bool:
    """Names mislead both ways: a look-alike weight name skips too much, a module no node is named after (the
    block's linear) is not skipped."""
    found = _relations(seen, expected)
    return found["none"] == "same" and found["names"] == "more" and "fewer" in (found["block"], found["inner"])


@detects("may_quantize", "never_refuses", explains=("test_leaf", "test_names", "test_parent"))
def filter_never_refuses(seen: Any, expected: Any) -> bool:
    return never_refused(seen, expected, *FILTERS)


SEARCHES = [
    ("interaction",),
    ("ties",),
    ("stops", "exact"),
    ("stops", "already"),
    ("unreachable",),
    ("worse",),
    ("negative",),
    ("reset",),
    ("arguments", "fresh"),
    ("model",),
]


@detects("greedy_skip", "evaluate_single_name")
def search_evaluate_single_name(seen: Any, expected: Any) -> bool:
    return evaluate_misused(seen, expected)


@detects("greedy_skip", "mutates_layers", explains=("test_arguments_unchanged",))
def search_mutates_layers(seen: Any, expected: Any) -> bool:
    """The list handed a second time answers differently from a fresh copy, which answers right."""
    again, fresh = chosen(seen, "arguments", "again"), chosen(seen, "arguments", "fresh")
    return again is not None and again != fresh and fresh == chosen(expected, "arguments", "fresh")


@detects("greedy_skip", "scores_layers_alone", explains=("test_interaction", "test_every_step_picks", "test_model"))
def search_scores_layers_alone(seen: Any, expected: Any) -> bool:
    """The best layer alone comes first, then not the best partner for it (a layer useless alone, decisive with
    the first)."""
    return alone_ranked(seen, expected, "interaction")


@detects("greedy_skip", "never_resets_best", explains=("test_best_reset",))
def search_never_resets_best(seen: Any, expected: Any) -> bool:
    """Where the second step's best is lower than the first's: the same layer again, or the search stops there,
    while searches whose steps keep improving are right."""
    repeated = "重複" in diagnosis.error_message(seen, "reset")
    stuck = (
        search_relation(seen, expected, "reset") == "shorter"
        and search_relation(seen, expected, "worse") == "same"
        and search_relation(seen, expected, "unreachable") == "same"
    )
    return repeated or stuck


@detects("greedy_skip", "stops_without_improvement", explains=("test_every_step_picks", "test_best_reset"))
def search_stops_without_improvement(seen: Any, expected: Any) -> bool:
    """Every first candidate worse: the search stops early there, while one whose candidates improve runs on."""
    return search_relation(seen, expected, "worse") == "shorter" and search_relation(seen, expected, "unreachable") in (
        "same",
        "reordered",
    )


@detects("greedy_skip", "best_starts_at_zero", explains=("test_every_step_picks",))
def search_best_starts_at_zero(seen: Any, expected: Any) -> bool:
    """Every score negative: stopped early there; scores that dip but stay positive are handled."""
    return search_relation(seen, expected, "negative") == "shorter" and search_relation(seen, expected, "worse") in (
        "same",
        "reordered",
    )


@detects("greedy_skip", "gives_up", explains=("test_unreachable", "test_best_reset"))
def search_gives_up(seen: Any, expected: Any) -> bool:
    """Out of reach: fewer layers than all of them (nothing, usually), or no list at all."""
    returned_nothing = "NoneType" in diagnosis.error_message(seen, "unreachable")
    return returned_nothing or search_relation(seen, expected, "unreachable") == "shorter"


@detects("greedy_skip", "skips_at_least_one", explains=("test_stops_at_target",))
def search_skips_at_least_one(seen: Any, expected: Any) -> bool:
    return search_relation(seen, expected, "stops", "already") == "longer"


@detects("greedy_skip", "strictly_above_target", explains=("test_stops_at_target",))
def search_strictly_above_target(seen: Any, expected: Any) -> bool:
    return (
        search_relation(seen, expected, "stops", "exact") == "longer"
        and search_relation(seen, expected, "stops", "already") == "same"
    )


@detects("greedy_skip", "ties_not_first", explains=("test_ties", "test_arguments_unchanged"))
def search_ties_not_first(seen: Any, expected: Any) -> bool:
    """Where two layers tie, the other one comes first; no search without a tie is off."""
    got, want = chosen(seen, "ties"), chosen(expected, "ties")
    untied = [place for place in SEARCHES if place not in (("ties",), ("arguments", "fresh"))]
    return (
        bool(got and want)
        and got[0] != want[0]
        and all(search_relation(seen, expected, *place) == "same" for place in untied)
    )


@detects(
    "greedy_skip",
    "order_not_pick_order",
    explains=(
        "test_ties",
        "test_unreachable",
        "test_every_step_picks",
        "test_best_reset",
        "test_interaction",
        "test_model",
    ),
)
def search_order_not_pick_order(seen: Any, expected: Any) -> bool:
    """The right layers in another order, in a search without a tie."""
    return reordered_somewhere(seen, expected, [place for place in SEARCHES if place != ("ties",)])
