"""Hidden checks of M01-1: op_targets and neighbors on models the student has not seen.

Each check compares what the student's function returned on hidden graphs (graphs with look-alike
names, repeated blocks, list and keyword inputs, a graph a pass edited) with the answer key's, and
that the graph handed in comes back unchanged.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m01_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from autograder.checks.support import Fail, check, detects, expect_unchanged, value
from selfcheck.public import m01_1 as public

TARGET_GRAPHS = {
    "gated": "有兩個輸入、常數、重複 block 與 max.dim（接 getitem）的模型",
    "conv": "conv → cat → pool → linear 的模型",
    "mimic": "輸入叫 conv2d、mean，常數叫 add、relu_weight 的模型（名字像 op，卻不是 op）",
    "edited": "被 pass 改過的圖（新插入的 node 排在原本的 node 之間）",
}


def _targets(evidence: dict[str, Any], case: str) -> dict[str, Any]:
    return value(evidence, case)


def _asked(seen: dict[str, Any], expected: dict[str, Any], case: str) -> list[str]:
    """The key's targets without those of the op nodes the student's own call erased: changing the graph is
    test_targets_content's to judge, the order and the objects are judged on what the call left."""
    erased = _targets(seen, case).get("erased") or []
    return [t for index, t in enumerate(_targets(expected, case)["targets"]) if index not in erased]


def _foreign(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    foreign = [t for t in got["targets"] if t in set(want["other_targets"])]
    if foreign:
        raise Fail(
            f"{where}：你列出了不是 call_function node 的 target {foreign[:4]}。"
            "placeholder、get_attr、output 與 _guards_fn 都不是 op，名字像 op 也一樣"
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
                f"{where}：同一個 op 出現幾次就要列幾次，應該有 {len(want['targets'])} 項，"
                f"你的有 {len(got['targets'])} 項"
            )
        parts = []
        if missing:
            parts.append(f"少了 {missing[:4]}")
        if extra:
            parts.append(f"多了 {extra[:4]}")
        raise Fail(f"{where}：你的 list {'、'.join(parts)}；應該是 {want['targets']}")


@check("op_targets", 1, "順序：依圖上的順序（gm.graph.nodes），不是依名字或種類排序")
def test_targets_order(seen, expected):
    for case, where in TARGET_GRAPHS.items():
        got, want = _targets(seen, case)["targets"], _asked(seen, expected, case)
        if got == want:
            continue
        if sorted(got) == sorted(want):
            raise Fail(f"{where}：target 都對，順序卻不是圖上的順序。應該是 {want}，你的是 {got}")
        raise Fail(f"{where}：應該是 {want}，你的是 {got}")


@check("op_targets", 1, "回傳的是 node.target 物件本身（OpOverload、operator.getitem），不是名字或字串")
def test_targets_objects(seen, expected):
    for case, where in TARGET_GRAPHS.items():
        got, want = _targets(seen, case), _asked(seen, expected, case)
        if len(got["targets"]) != len(want):
            raise Fail(f"{where}：應該回傳 {len(want)} 項，你的回傳了 {len(got['targets'])} 項")
        wrong = [t for t, ok in zip(got["targets"], got["objects"], strict=True) if not ok]
        if wrong:
            raise Fail(f"{where}：{wrong[:3]} 不是圖上 node 的 target 物件；要回傳 node.target 本身，例如 OpOverload")


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
        hint = "。_guards_fn 只檢查輸入的形狀，不是資料的 consumer"
    elif part == "consumers" and "output" in want and "output" not in got:
        hint = "。output node 也是 consumer：它把值回傳出去"
    elif sorted(got) == sorted(want) and part == "consumers":
        hint = "。要依圖上的順序：node.users 記的是使用被建立的先後，改過的圖上不一定是圖上的順序"
    elif sorted(got) == sorted(want):
        hint = "。要依第一次出現在 args、kwargs 的順序，和 node.all_input_nodes 相同"
    elif part == "producers" and len(got) > len(set(got)):
        hint = "。同一個 producer 只列一次"
    elif set(got) < set(want):
        missing = [w for w in want if w not in got]
        where = "args 裡 list、tuple 中的 node、keyword 引數裡的 node 與 get_attr 常數都是 producer"
        if part == "consumers":
            where = "在 list、tuple 或 keyword 引數裡讀這個 node 的，也是 consumer"
        hint = f"。你漏了 {missing}：{where}"
    elif part == "producers" and any(g.startswith("（不是 Node") for g in got):
        hint = "。只列 Node：純量、dtype、list 本身都不是 producer"
    raise Fail(f"{NEIGHBOR_GRAPHS[case]}：neighbors(gm, {name!r}) 的 {part} 應該是 {want}，你的是 {got}{hint}")


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


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m01_1.py) --------

TARGET_CHECKS = ("test_targets_content", "test_targets_order", "test_targets_objects")


def _changed(seen: Any) -> bool:
    """Some case's graph came back changed."""
    from selfcheck import diagnosis

    return any(
        isinstance(record, dict) and isinstance(record.get("value"), dict) and record["value"].get("changed")
        for record in diagnosis.cases(seen).values()
    )


@detects("op_targets", "changes_graph", explains=("test_targets_content",))
def targets_change_graph(seen: Any, expected: Any) -> bool:
    return _changed(seen)


@detects("op_targets", "node_names")
def targets_node_names(seen: Any, expected: Any) -> bool:
    return public._returns_node_names(seen, expected)


@detects("op_targets", "returns_nodes")
def targets_nodes(seen: Any, expected: Any) -> bool:
    return public._returns_nodes(seen, expected)


@detects("op_targets", "overload_packets")
def targets_packets(seen: Any, expected: Any) -> bool:
    return public._returns_packets(seen, expected)


@detects("op_targets", "target_strings")
def targets_strings(seen: Any, expected: Any) -> bool:
    return public._returns_strings(seen, expected)


@detects("op_targets", "every_node", explains=TARGET_CHECKS)
def targets_every_node(seen: Any, expected: Any) -> bool:
    return public._lists_every_node(seen, expected)


@detects("op_targets", "keeps_guards_fn", explains=TARGET_CHECKS)
def targets_keep_guards(seen: Any, expected: Any) -> bool:
    return public._keeps_guards(seen, expected)


@detects("op_targets", "aten_only", explains=TARGET_CHECKS)
def targets_aten_only(seen: Any, expected: Any) -> bool:
    return public._aten_only(seen, expected)


@detects("op_targets", "each_op_once", explains=TARGET_CHECKS)
def targets_each_once(seen: Any, expected: Any) -> bool:
    return public._each_once(seen, expected)


@detects("op_targets", "sorted_targets", explains=("test_targets_order",))
def targets_sorted(seen: Any, expected: Any) -> bool:
    return public._sorted(seen, expected)


@detects("op_targets", "walks_from_output", explains=TARGET_CHECKS)
def targets_other_order(seen: Any, expected: Any) -> bool:
    return public._other_order(seen, expected)


NEIGHBOR_CHECKS = ("test_neighbors_op", "test_neighbors_list_inputs", "test_neighbors_input", "test_neighbors_output")
PRODUCER_CHECKS = ("test_neighbors_op", "test_neighbors_list_inputs", "test_neighbors_output")


def _kinds(evidence: Any) -> dict[str, dict[str, str]]:
    """Case → ``{node name: op}`` of its graph."""
    from selfcheck import diagnosis

    found = {}
    for case in diagnosis.cases(evidence):
        kinds = diagnosis.value(evidence, case, "kinds")
        if isinstance(kinds, dict):
            found[case] = kinds
    return found


def _answers_by_case(seen: Any, expected: Any) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """``(case, node asked about, got, want)`` for each answer."""
    from selfcheck import diagnosis

    return [
        (str(place[0]), str(place[-1]), got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "producers")
        if all(isinstance(got.get(k), list) and isinstance(want.get(k), list) for k in ("producers", "consumers"))
    ]


@detects("neighbors", "changes_graph", explains=("test_neighbors_op",))
def neighbors_change_graph(seen: Any, expected: Any) -> bool:
    return _changed(seen)


@detects("neighbors", "returns_names")
def neighbors_names(seen: Any, expected: Any) -> bool:
    return public._neighbor_strings(seen, expected)


@detects("neighbors", "swapped_directions")
def neighbors_swapped(seen: Any, expected: Any) -> bool:
    return public._swapped(seen, expected)


@detects("neighbors", "found_by_partial_name")
def neighbors_partial_name(seen: Any, expected: Any) -> bool:
    return public._another_node(seen, expected)


@detects("neighbors", "scalars_as_producers", explains=PRODUCER_CHECKS)
def neighbors_scalars(seen: Any, expected: Any) -> bool:
    return public._scalars(seen, expected)


@detects("neighbors", "top_level_args_only", explains=PRODUCER_CHECKS)
def neighbors_top_level(seen: Any, expected: Any) -> bool:
    return public._top_level_args(seen, expected)


@detects("neighbors", "repeats_producer", explains=("test_neighbors_list_inputs",))
def neighbors_repeats(seen: Any, expected: Any) -> bool:
    return public._repeats(seen, expected)


def _lost_producers(seen: Any, expected: Any) -> list[tuple[str, list[str]]]:
    """``(case, the kinds of the producers the student misses)`` for each answer missing some."""
    kinds = _kinds(expected)
    found = []
    for case, _, got, want in _answers_by_case(seen, expected):
        lost = public.missing_producers(got, want)
        if lost:
            found.append((case, [kinds.get(case, {}).get(p, "") for p in lost]))
    return found


@detects("neighbors", "ignores_kwargs", explains=("test_neighbors_list_inputs",))
def neighbors_ignore_kwargs(seen: Any, expected: Any) -> bool:
    """A computed producer missing (the one read through a keyword argument) while list inputs are all there."""
    return not public._top_level_args(seen, expected) and any(
        "get_attr" not in lost and "" not in lost for _, lost in _lost_producers(seen, expected)
    )


@detects("neighbors", "constants_not_producers", explains=("test_neighbors_op",))
def neighbors_no_constants(seen: Any, expected: Any) -> bool:
    return any(set(lost) == {"get_attr"} for _, lost in _lost_producers(seen, expected))


@detects("neighbors", "producers_in_graph_order", explains=PRODUCER_CHECKS)
def neighbors_producer_order(seen: Any, expected: Any) -> bool:
    return public._producer_order(seen, expected)


@detects("neighbors", "guards_as_consumer", explains=("test_neighbors_input",))
def neighbors_guards(seen: Any, expected: Any) -> bool:
    kinds = _kinds(expected)
    return any(
        kinds.get(case, {}).get(c) == "call_module"
        for case, _, got, _ in _answers_by_case(seen, expected)
        for c in got["consumers"]
    )


@detects("neighbors", "consumers_from_direct_args", explains=PRODUCER_CHECKS)
def neighbors_direct_args(seen: Any, expected: Any) -> bool:
    return public._direct_args_consumers(seen, expected)


@detects("neighbors", "output_not_consumer", explains=("test_neighbors_output",))
def neighbors_output(seen: Any, expected: Any) -> bool:
    return public._output_not_consumer(seen, expected)


@detects("neighbors", "users_order")
def neighbors_users_order(seen: Any, expected: Any) -> bool:
    return public._consumer_order(seen, expected)
