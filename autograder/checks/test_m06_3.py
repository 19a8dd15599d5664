"""Hidden checks of M06-3: a filter function that leaves modules in fp32, and the greedy search for the fewest.

What a student who half-understood selective quantization could bake in, and the hidden case that refutes it:

may_quantize (the filter function)
- a node with no ``nn_module_stack`` (the weight and bias ``get_attr`` nodes) belongs to no module we may
  quantize, so it gets False: then no conv pattern is ever labelled, ``none`` (nothing skipped) shows it;
- a node belongs to a module when the module's name appears in the node's name (``conv2`` in ``conv2d_1``):
  no node is named after a module in the hidden network, ``leaf``, ``names`` and ``parent`` show it;
- a node belongs only to its innermost module: skipping a parent ``block`` leaves its conv, nn.ReLU and
  linear quantized, ``parent``;
- a node belongs only to its outermost module under the model: skipping ``block.fc`` does nothing, ``parent``;
- module paths match by prefix or substring: skipping ``proj`` also skips ``proj2`` (``mix`` / ``mix_out``,
  ``branch`` / ``branch1`` on other seeds), ``names``;
- the filter may answer None for "yes", or label the nodes it turns down (an empty annotation) to keep them
  out: every call's answer must be a bool and leave the graph as it was, every case;
- a conv is only skipped when its relu is skipped too (the pattern spans modules): ``leaf`` (the stem's relu
  is in the top-level forward) and ``names`` (the skipped conv feeds an add).

greedy_skip
- rank the layers once by their score alone: ``interaction`` (a layer useless alone, decisive with the first);
- ties go to the later layer, or the result comes back in the given order: ``ties``, ``interaction``;
- stop only above the target, or always skip at least one layer: ``stops`` (exactly at the target; already);
- give up (return nothing) when the target is out of reach: ``unreachable``;
- stop at the first step without improvement, or accept only candidates better than the current score:
  ``worse`` (every single layer makes it worse, a pair beats the target);
- start the best score at 0 ("dB are positive"): ``negative`` (every score below 0);
- keep the best of the previous step instead of finding each step's own: ``reset`` (the second step's best is
  lower than the first's);
- work on the caller's list (remove the picked layers, sort it): ``arguments`` (the same list handed to a
  second search answers differently from a fresh copy);
- a made-up metric behaves like a real one: ``model`` (the output SQNR of an MLP with 3-bit weights).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

# --- may_quantize ---------------------------------------------------------------------------------

FILTER_WHERE = {
    "none": "什麼都不跳過",
    "leaf": "跳過 stem（conv，它的 relu 寫在最外層的 forward 裡）",
    "names": "跳過名字是另一個 module 名字前綴的 1×1 conv",
    "block": "跳過整個 block（裡面有 conv、nn.ReLU、linear）",
    "inner": "只跳過 block.fc（block 裡的 linear）",
}


def _filtered(evidence: Any, case: str, part: str | None = None) -> dict[str, Any]:
    result = value(evidence, case)
    if part is not None:
        expect(isinstance(result, dict) and part in result, "證據格式不對")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("observed"), list), "證據格式不對")
    return result


def _listed(names: list[str]) -> str:
    return "、".join(names) if names else "（沒有）"


def compare_filtered(seen: Any, expected: Any, case: str, part: str | None = None) -> None:
    """The same fp32 weights, the same observed nodes, the same q/dq steps on every edge."""
    got, want = _filtered(seen, case, part), _filtered(expected, case, part)
    where = f"{FILTER_WHERE[part or case]}（skipped = {want['skipped']}）"
    if got["fp32_weights"] != want["fp32_weights"]:
        message = f"{where}：weight 留在 fp32 的層預期是 {_listed(want['fp32_weights'])}，你的是 {_listed(got['fp32_weights'])}"
        if not got["fp32_weights"] and not want["fp32_weights"]:
            message += "（兩邊都沒有跳過任何層）"
        elif len(got["fp32_weights"]) > len(want["fp32_weights"]) and not want["fp32_weights"]:
            message += "；沒有 nn_module_stack 的 node（weight 與 bias 的 get_attr）要回答 True，否則整個 conv pattern 都不會量化"
        raise Fail(message)
    if got["observed"] != want["observed"]:
        missing = sorted(set(want["observed"]) - set(got["observed"]))
        extra = sorted(set(got["observed"]) - set(want["observed"]))
        raise Fail(
            f"{where}：prepare 之後 observer 預期 {want['observers']} 個，你的 {got['observers']} 個"
            f"（少了觀察 {_listed(missing)} 的、多了觀察 {_listed(extra)} 的）"
        )
    for op, steps in want["edges"].items():
        mine = got["edges"].get(op)
        if mine != steps:
            raise Fail(
                f"{where}：convert 之後 {op} 的輸入預期 {'；'.join(steps)}，你的是 {'；'.join(mine or ['（沒有這個 op）'])}"
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
        expect(isinstance(result, dict) and part in result, "證據格式不對")
        result = result[part]
    expect(isinstance(result, dict) and isinstance(result.get("chosen"), list), "證據格式不對")
    return result


def compare_search(seen: Any, expected: Any, case: str, part: str | None = None) -> None:
    got, want = _search(seen, case, part), _search(expected, case, part)
    where = f"{WHERE[part or case]}（layers = {want['layers']}，目標 {want['target']}）"
    if got["chosen"] == want["chosen"]:
        return
    message = f"{where}：預期依序跳過 {want['chosen']}（分數 {want['score']}），你回傳 {got['chosen']}"
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
    expect(isinstance(got, dict) and {"first", "again", "fresh"} <= set(got), "證據格式不對")
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
