"""Hidden checks of M01-1: op_targets and neighbors on models the student has not seen.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
op_targets
- every node is an op (placeholder, get_attr, output, the ``_guards_fn`` call_module listed) → every
  graph; mimic: inputs called ``conv2d`` and ``mean``, a parameter called ``add``;
- names or strings instead of the ``node.target`` objects, or the packets → every graph (third check);
- each op once (a set), or sorted by name → gated (a block repeated 2–4 times), every graph;
- graph order is creation order, or walking back from the output → edited (a pass inserted a node
  between existing ones);
- only ``aten`` ops (``operator.getitem`` skipped) → gated (max.dim → getitem);
- a reading function may change the graph → every graph must come back unchanged (first check).
neighbors
- producers from ``node.args`` only (keyword arguments, nodes inside a list missed), or every
  argument listed (scalars, repeats) → fork (cat of a list, add(r, r)), edited (sub(y, other=conv2d)),
  mimic (mul and add with scalars);
- get_attr constants are not producers → fork (conv weight and bias);
- consumers in ``node.users`` order (the order uses were created) → edited;
- ``_guards_fn`` counted as a consumer, the output node not → fork, mimic, edited (placeholders);
- the node found by a name that merely starts the same → mimic (``conv2d`` is an input, ``relu`` a
  conv module's op and a parameter ``relu_weight``);
- a reading function may change the graph → every graph must come back unchanged (first check).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from autograder.checks.support import Fail, check, expect_equal, expect_unchanged, value

TARGET_GRAPHS = {
    "gated": "有兩個輸入、常數、重複 block 與 max.dim（接 getitem）的模型",
    "conv": "conv → cat → pool → linear 的模型",
    "mimic": "輸入叫 conv2d、mean，常數叫 add、relu_weight 的模型（名字像 op，卻不是 op）",
    "edited": "被 pass 改過的圖（新插入的 node 排在原本的 node 之間）",
}


def _targets(evidence: dict[str, Any], case: str) -> dict[str, Any]:
    return value(evidence, case)


def _foreign(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    foreign = [t for t in got["targets"] if t in set(want["other_targets"])]
    if foreign:
        raise Fail(
            f"{where}：列出了不是 call_function node 的 target {foreign[:4]}"
            "（placeholder、get_attr、output 與 _guards_fn 不是 op，名字像 op 也一樣）"
        )


@check(
    "op_targets",
    1,
    "內容：每個 call_function 的 target 都列出、重複幾次列幾次、不列 placeholder / get_attr / output；不改傳進來的圖",
)
def test_targets_content(seen, expected):
    for case, where in TARGET_GRAPHS.items():
        got, want = _targets(seen, case), _targets(expected, case)
        expect_unchanged({where: got.get("changed", [])}, "op_targets")
        _foreign(got, want, where)
        seen_count, want_count = Counter(got["targets"]), Counter(want["targets"])
        if seen_count == want_count:
            continue
        missing = sorted((want_count - seen_count).elements())
        extra = sorted((seen_count - want_count).elements())
        if set(seen_count) == set(want_count):
            raise Fail(
                f"{where}：同一個 op 出現幾次就要列幾次：預期 {len(want['targets'])} 項，看到 {len(got['targets'])} 項"
            )
        parts = []
        if missing:
            parts.append(f"少了 {missing[:4]}")
        if extra:
            parts.append(f"多了 {extra[:4]}")
        raise Fail(f"{where}：{'，'.join(parts)}（預期 {want['targets']}）")


@check("op_targets", 1, "順序：依圖上的順序（gm.graph.nodes），不是依名字或種類排序")
def test_targets_order(seen, expected):
    for case, where in TARGET_GRAPHS.items():
        got, want = _targets(seen, case)["targets"], _targets(expected, case)["targets"]
        if got == want:
            continue
        if sorted(got) == sorted(want):
            raise Fail(f"{where}：target 都對，但順序不是圖上的順序：預期 {want}，看到 {got}")
        raise Fail(f"{where}：預期 {want}，看到 {got}")


@check("op_targets", 1, "回傳的是 node.target 物件本身（OpOverload、operator.getitem），不是名字或字串")
def test_targets_objects(seen, expected):
    for case, where in TARGET_GRAPHS.items():
        got, want = _targets(seen, case), _targets(expected, case)
        expect_equal(len(got["targets"]), len(want["targets"]), f"{where}：回傳的項數")
        wrong = [t for t, ok in zip(got["targets"], got["objects"], strict=True) if not ok]
        if wrong:
            raise Fail(f"{where}：{wrong[:3]} 不是圖上 node 的 target 物件（要回傳 node.target 本身，例如 OpOverload）")


NEIGHBOR_GRAPHS = {
    "fork": "有 cat、add(r, r) 與兩個輸出的模型",
    "mimic": "輸入叫 conv2d、conv 模組叫 relu 的模型（名字像 op，卻不是 op）",
    "edited": "被 pass 改過的圖（conv2d 的 users 順序和圖上的順序不同，sub 用 keyword 引數讀 conv2d）",
}


def _answer(evidence: dict[str, Any], case: str, name: str) -> dict[str, Any]:
    answers = value(evidence, case)["answers"]
    if name not in answers:
        raise Fail("證據格式不對")
    return answers[name]


def _compare_neighbors(seen: dict[str, Any], expected: dict[str, Any], case: str, name: str, part: str) -> None:
    got, want = _answer(seen, case, name)[part], _answer(expected, case, name)[part]
    if got == want:
        return
    kinds = value(expected, case)["kinds"]
    guards = [g for g in got if kinds.get(g) == "call_module"]
    hint = ""
    if guards:
        hint = "（_guards_fn 只檢查輸入的形狀，不是資料的 consumer）"
    elif part == "consumers" and "output" in want and "output" not in got:
        hint = "（output node 也是 consumer：它把值回傳出去）"
    elif sorted(got) == sorted(want) and part == "consumers":
        hint = "（要依圖上的順序：node.users 記的是使用被建立的先後，改過的圖上不一定是圖上的順序）"
    elif sorted(got) == sorted(want):
        hint = "（依第一次出現在 args、kwargs 的順序，和 node.all_input_nodes 相同）"
    elif part == "producers" and len(got) > len(set(got)):
        hint = "（同一個 producer 只列一次）"
    elif set(got) < set(want):
        missing = [w for w in want if w not in got]
        where = "args 裡 list、tuple 中的 node、keyword 引數裡的 node 與 get_attr 常數都是 producer"
        if part == "consumers":
            where = "在 list、tuple 或 keyword 引數裡讀這個 node 的，也是 consumer"
        hint = f"（漏了 {missing}：{where}）"
    elif part == "producers" and any(g.startswith("（不是 Node") for g in got):
        hint = "（只列 Node：純量、dtype、list 本身都不是 producer）"
    raise Fail(f"{NEIGHBOR_GRAPHS[case]}：neighbors(gm, {name!r}) 的 {part}：預期 {want}，看到 {got}{hint}")


@check(
    "neighbors",
    1,
    "一般的 op：producers 含 weight 與 bias 常數；consumers 依圖上的順序（也在被改過的圖上）；不改傳進來的圖",
)
def test_neighbors_op(seen, expected):
    for case in NEIGHBOR_GRAPHS:
        expect_unchanged({NEIGHBOR_GRAPHS[case]: value(seen, case).get("changed", [])}, "neighbors")
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "fork", "conv2d", part)
        _compare_neighbors(seen, expected, "edited", "conv2d", part)
    _compare_neighbors(seen, expected, "mimic", "relu", "producers")
    _compare_neighbors(seen, expected, "mimic", "add", "producers")


@check("neighbors", 1, "list 裡與 keyword 引數裡的輸入都是 producer；add(r, r) 的 r 只算一次；純量不是 producer")
def test_neighbors_list_inputs(seen, expected):
    _compare_neighbors(seen, expected, "fork", "cat", "producers")
    _compare_neighbors(seen, expected, "fork", "add", "producers")
    _compare_neighbors(seen, expected, "fork", "add", "consumers")
    _compare_neighbors(seen, expected, "mimic", "cat", "producers")
    _compare_neighbors(seen, expected, "mimic", "mul", "producers")
    _compare_neighbors(seen, expected, "edited", "sub_tensor", "producers")


@check("neighbors", 1, "placeholder：沒有 producer，consumers 不含 _guards_fn（也包括名字叫 conv2d 的輸入）")
def test_neighbors_input(seen, expected):
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "fork", "x", part)
        _compare_neighbors(seen, expected, "mimic", "conv2d", part)
        _compare_neighbors(seen, expected, "edited", "y", part)


@check("neighbors", 1, "output node 是 consumer；output 自己的 producers 是回傳的值")
def test_neighbors_output(seen, expected):
    _compare_neighbors(seen, expected, "fork", "cat", "consumers")
    _compare_neighbors(seen, expected, "mimic", "relu", "consumers")
    for part in ("producers", "consumers"):
        _compare_neighbors(seen, expected, "fork", "output", part)
        _compare_neighbors(seen, expected, "mimic", "output", part)
