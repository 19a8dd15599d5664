"""Hidden checks of M01-2: find_nodes by node.target on graphs the student has not seen.

Each check compares the nodes the student's function found on hidden graphs (two overloads of one op,
ops of another namespace, two overloads of the same name in two namespaces, names that look like ops, a
node a pass retargeted, a chain of more than ten identical ops, one of them left without consumers) with
the answer key's, and that the graph handed in comes back unchanged.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m01_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect_unchanged, raised, value
from selfcheck import diagnosis
from selfcheck.public import m01_2 as public

CASES = ("packets", "overloads", "similar", "order")


GRAPHS = {
    "mixed": "有兩種 conv2d overload、mean、max 與 max_pool2d 的圖",
    "chain": "十幾個 relu → add 串起來、最後 addmm 的圖",
    "qdq": "有 quantized_decomposed 的 quantize / dequantize（.default 與 .tensor 兩種 overload）的圖",
    "renamed": "輸入叫 relu、sigmoid，而且 relu_1 被 pass 改成 hardtanh（名字沒變）的圖",
    "namespaces": "同時有 aten.quantize_per_tensor.default 與 quantized_decomposed.quantize_per_tensor.default"
    "（__name__ 都是 quantize_per_tensor.default）的圖",
    "leftover": "十幾個 relu → add 串起來，其中一個 relu 被 pass 換成 hardtanh、consumer 改接了，"
    "舊的 relu 還沒刪（沒有 consumer，但還在圖上）的圖",
}
NOT_GRAPHS = ("changed", "unused", "ops", "erased")
"""Entries of a case's value that are no graph's answers: how the calls changed the graphs, the unused nodes,
each op node's OpOverloadPacket, the nodes the calls erased."""


def _is_packet(query: str) -> bool:
    """``aten.conv2d`` (namespace and name) is a packet, ``aten.conv2d.default`` one of its overloads."""
    return query.count(".") == 1


def _answers(got_case: dict[str, Any], want_case: dict[str, Any]) -> list[tuple[str, str, Any, list[Any]]]:
    """``(graph, query, got, want)`` for every query of the key's case."""
    found = []
    for graph, queries in want_case.items():
        if graph in NOT_GRAPHS:
            continue
        got_queries = got_case.get(graph, {})
        for query, want in queries.items():
            found.append((graph, query, got_queries.get(query), want))
    return found


def _fail(graph: str, query: str, got: Any, want: list[Any]) -> Fail:
    hint = ""
    if isinstance(got, list) and sorted(got) == sorted(want):
        hint = "。node 都對，順序卻不是圖上的順序"
    elif isinstance(got, list) and set(want) < set(got):
        hint = f"。你多找到了 {[g for g in got if g not in want]}：要比的是 node.target，不是名字或字串"
    return Fail(f"{GRAPHS[graph]}：find_nodes(gm, {query}) 應該找到 {want}，你的找到 {got}{hint}")


def _compare(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    for graph, query, got, want in _answers(value(seen, case), value(expected, case)):
        if got != want:
            raise _fail(graph, query, got, want)


@check(
    "find_nodes",
    1,
    "OpOverloadPacket（例如 torch.ops.aten.conv2d）找出這個 op 的每一種 overload；不改傳進來的圖",
)
def test_find_packet(seen, expected):
    _compare(seen, expected, "packets")
    for case in CASES:
        if "value" in seen.get("cases", {}).get(case, {}):  # a case that stopped fails its own check
            changed = value(seen, case).get("changed", {})
            expect_unchanged({GRAPHS.get(graph, graph): c for graph, c in changed.items()}, "find_nodes")


@check("find_nodes", 1, "OpOverload（例如 torch.ops.aten.conv2d.default）只找這一個 overload")
def test_find_overload(seen, expected):
    # extra nodes of another op (dequantize for quantize, addmm for add) are test_find_similar's to judge,
    # the order test_find_order's: here every node of the overload, and no other overload of the same op
    got_case, want_case = value(seen, "overloads"), value(expected, "overloads")
    ops = want_case.get("ops", {})
    for graph, query, got, want in _answers(got_case, want_case):
        if not isinstance(got, list) or not all(isinstance(node, str) for node in got):
            raise _fail(graph, query, got, want)
        missing = [node for node in want if node not in got]
        if missing:
            raise Fail(f"{GRAPHS[graph]}：find_nodes(gm, {query}) 應該找到 {want}，你的找到 {got}，少了 {missing}")
        packet = query.rsplit(".", 1)[0]
        others = [node for node in got if node not in want and ops.get(graph, {}).get(node) == packet]
        if others:
            raise Fail(
                f"{GRAPHS[graph]}：find_nodes(gm, {query}) 應該找到 {want}，你的找到 {got}：{others} 是 "
                f"{packet} 的其他 overload，OpOverload 只找這一個 overload"
            )


@check(
    "find_nodes",
    1,
    "名字相近的不算：max 不是 max_pool2d、relu 不是常數 relu_scale 也不是名字叫 relu 的 node、"
    "aten 的 op 不是 quantized_decomposed 的同名 op；沒有的 op 回傳空 list",
)
def test_find_similar(seen, expected):
    _compare(seen, expected, "similar")


@check("find_nodes", 1, "十幾個相同的 op：依圖上順序回傳圖上的 Node")
def test_find_order(seen, expected):
    # an OpOverloadPacket's answers are test_find_packet's to judge (here only their order), and the nodes the
    # student's own call erased (test_find_packet judges changing the graph) are not asked for again
    got_case, want_case = value(seen, "order"), value(expected, "order")
    erased = got_case.get("erased", {})
    for graph, query, got, want in _answers(got_case, want_case):
        if not isinstance(got, list):
            raise _fail(graph, query, got, want)
        if _is_packet(query):
            asked = [node for node in want if node in got]
        else:
            asked = [node for node in want if node not in erased.get(graph, [])]
        if got != asked:
            raise _fail(graph, query, got, want)


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m01_2.py) --------

ALL = ("test_find_packet", "test_find_overload", "test_find_similar", "test_find_order")


@detects("find_nodes", "changes_graph", explains=("test_find_packet",))
def find_changes_graph(seen: Any, expected: Any) -> bool:
    return any(
        isinstance(changed := diagnosis.value(seen, case, "changed"), dict) and any(changed.values())
        for case in diagnosis.cases(seen)
    )


@detects("find_nodes", "returns_names")
def find_returns_names(seen: Any, expected: Any) -> bool:
    return public._strings(seen, expected)


@detects("find_nodes", "crashes_on_getitem")
def find_crashes(seen: Any, expected: Any) -> bool:
    return raised(seen, ("AttributeError", "TypeError"), says="builtin_function_or_method")


@detects("find_nodes", "packet_equals_overload", explains=("test_find_packet", "test_find_similar"))
def find_packets_nothing(seen: Any, expected: Any) -> bool:
    return public._packets_find_nothing(seen, expected)


@detects("find_nodes", "packet_as_default", explains=("test_find_packet", "test_find_similar"))
def find_packet_as_default(seen: Any, expected: Any) -> bool:
    return public._packet_finds_some(seen, expected)


@detects("find_nodes", "aten_only", explains=("test_find_packet", "test_find_overload", "test_find_similar"))
def find_aten_only(seen: Any, expected: Any) -> bool:
    return public._aten_only(seen, expected)


@detects("find_nodes", "by_node_name")
def find_by_node_name(seen: Any, expected: Any) -> bool:
    return public._by_node_name(seen, expected)


@detects("find_nodes", "overload_finds_packet", explains=("test_find_overload", "test_find_similar"))
def find_overload_packet(seen: Any, expected: Any) -> bool:
    return public._whole_packet(seen, expected)


@detects("find_nodes", "by_target_string", explains=("test_find_packet", "test_find_similar"))
def find_by_target_string(seen: Any, expected: Any) -> bool:
    return public._longer_name(seen, expected)


@detects("find_nodes", "ignores_namespace", explains=("test_find_similar",))
def find_ignores_namespace(seen: Any, expected: Any) -> bool:
    return public._same_name_other_namespace(seen, expected)


@detects("find_nodes", "skips_unused", explains=("test_find_order",))
def find_skips_unused(seen: Any, expected: Any) -> bool:
    """Every answer is the key's without the nodes no one reads (a relu a pass left behind), and one misses it."""
    unused = diagnosis.value(expected, "order", "unused")
    if not isinstance(unused, list):
        return False
    missed = False
    for _, _, got, want in public.pairs(seen, expected):
        if got == want:
            continue
        if got != [node for node in want if node not in unused]:
            return False
        missed = True
    return missed


@detects("find_nodes", "sorted_by_name")
def find_sorted(seen: Any, expected: Any) -> bool:
    return public._order(seen, expected)
