"""Hidden checks of M06-3: greedy_skip picks, one layer at a time, the layer that helps most now."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

NOTEBOOK = "M06-3"

WHERE = {
    "interaction": "有一層單獨跳過沒用、和第一個選到的層一起跳過卻幫很大",
    "ties": "兩層一樣好（平手）",
    "exact": "某個選擇剛好等於目標",
    "already": "量化後已經達到目標",
    "unreachable": "全部留在 fp32 也達不到目標",
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


@check("greedy_skip", 1, "真實的模型：跳過的層與順序正確，而且達到目標")
def test_model(seen, expected):
    compare_search(seen, expected, "model")
    got = _search(seen, "model")
    expect(bool(got.get("reached")), f"{WHERE['model']}：跳過 {got['chosen']} 之後沒有達到目標")
