"""Hidden checks of M01-1: op_targets and neighbors on models the student has not seen."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect_equal, value

NOTEBOOK = "M01-1"


def _compare_targets(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    seen, wanted = got["targets"], want["targets"]
    foreign = [t for t in seen if t in set(want["other_targets"])]
    if foreign:
        raise Fail(
            f"{where}：列出了不是 call_function node 的 target {foreign}"
            "（placeholder、get_attr、output 與 _guards_fn 不是 op）"
        )
    if seen == wanted:
        return
    if sorted(seen) == sorted(wanted):
        raise Fail(f"{where}：target 都對，但順序不是圖上的順序：預期 {wanted}，看到 {seen}")
    if set(seen) == set(wanted):
        raise Fail(f"{where}：同一個 op 出現幾次就要列幾次：預期 {len(wanted)} 項，看到 {len(seen)} 項")
    raise Fail(f"{where}：預期 {wanted}，看到 {seen}")


@check("op_targets", 1, "兩個輸入、常數、重複的 block 與 max.dim：依圖上順序列出每個 call_function 的 target")
def test_targets_gated(seen, expected):
    _compare_targets(value(seen, "gated"), value(expected, "gated"), "有兩個輸入與重複 block 的模型")


@check("op_targets", 1, "conv、cat、pool、linear 的模型：依圖上順序列出每個 op 的 target")
def test_targets_conv(seen, expected):
    _compare_targets(value(seen, "conv"), value(expected, "conv"), "conv → cat → pool → linear 的模型")


@check("op_targets", 1, "回傳的是 node.target 物件本身（OpOverload、operator.getitem），不是名字或字串")
def test_targets_objects(seen, expected):
    for case, where in (("gated", "有兩個輸入與重複 block 的模型"), ("conv", "conv → cat → pool → linear 的模型")):
        got, want = value(seen, case), value(expected, case)
        expect_equal(len(got["targets"]), len(want["targets"]), f"{where}：回傳的項數")
        wrong = [t for t, ok in zip(got["targets"], got["objects"], strict=True) if not ok]
        if wrong:
            raise Fail(f"{where}：{wrong[:3]} 不是圖上 node 的 target 物件（要回傳 node.target 本身，例如 OpOverload）")


def _answer(evidence: dict[str, Any], name: str) -> dict[str, Any]:
    answers = value(evidence, "fork")["answers"]
    return answers[name]


def _compare_neighbors(seen: dict[str, Any], expected: dict[str, Any], name: str, part: str) -> None:
    got, want = _answer(seen, name)[part], _answer(expected, name)[part]
    if got == want:
        return
    kinds = value(expected, "fork")["kinds"]
    guards = [g for g in got if kinds.get(g) == "call_module"]
    hint = ""
    if guards:
        hint = "（_guards_fn 只檢查輸入的形狀，不是資料的 consumer）"
    elif part == "consumers" and "output" in want and "output" not in got:
        hint = "（output node 也是 consumer：它把值回傳出去）"
    elif part == "producers" and len(got) > len(set(got)):
        hint = "（同一個 producer 只列一次）"
    elif part == "producers" and set(got) < set(want):
        missing = [w for w in want if w not in got]
        hint = f"（漏了 {missing}：args 裡 list、tuple 中的 node 與 get_attr 常數都是 producer）"
    raise Fail(f"neighbors(gm, {name!r}) 的 {part}：預期 {want}，看到 {got}{hint}")


@check("neighbors", 1, "conv2d：producers 是輸入與 weight、bias 常數，consumers 依圖上順序")
def test_neighbors_op(seen, expected):
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "conv2d", part)


@check("neighbors", 1, "cat 的輸入在 list 裡、add(r, r) 的 r 只算一次")
def test_neighbors_list_inputs(seen, expected):
    _compare_neighbors(seen, expected, "cat", "producers")
    _compare_neighbors(seen, expected, "add", "producers")
    _compare_neighbors(seen, expected, "add", "consumers")


@check("neighbors", 1, "placeholder x：沒有 producer，consumers 不含 _guards_fn")
def test_neighbors_input(seen, expected):
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "x", part)


@check("neighbors", 1, "output node 是 consumer；output 自己的 producers 是回傳的值")
def test_neighbors_output(seen, expected):
    _compare_neighbors(seen, expected, "cat", "consumers")
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "output", part)
