"""Hidden checks of M01-2: find_nodes by node.target on graphs the student has not seen.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- a packet compares equal to its overloads (``node.target == aten.conv2d``), or only ``.default``
  counts → packets / overloads: conv2d ``.default`` and ``.padding``, mean ``.dim`` and ``.default``,
  the ``.default`` and ``.tensor`` quantize / dequantize;
- an overload query matches the whole packet → overloads;
- matching by node name, by ``str(target)`` prefix or substring → similar: ``max`` beside
  ``max_pool2d``, a parameter ``relu_scale``, inputs called ``relu`` and ``sigmoid``, a node named
  ``relu_1`` that a pass retargeted to hardtanh, ``dequantize_per_tensor`` containing
  ``quantize_per_tensor``, an ``aten`` op beside the ``quantized_decomposed`` one of the same name;
- only ``aten`` ops → qdq (``quantized_decomposed``);
- ``getitem`` and other non-OpOverload targets crash the search → mixed (max.dim → getitem);
- results sorted by name (``relu_10`` before ``relu_2``) → order (a chain of 11–13 relus);
- the namespace ignored (``_opname`` only) → similar (``aten.quantize_per_tensor``);
- a searching function may change the graph → every graph must come back unchanged (first check).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect_unchanged, value

CASES = ("packets", "overloads", "similar", "order")


GRAPHS = {
    "mixed": "有兩種 conv2d overload、mean、max 與 max_pool2d 的圖",
    "chain": "十幾個 relu → add 串起來、最後 addmm 的圖",
    "qdq": "有 quantized_decomposed 的 quantize / dequantize（.default 與 .tensor 兩種 overload）的圖",
    "renamed": "輸入叫 relu、sigmoid，而且 relu_1 被 pass 改成 hardtanh（名字沒變）的圖",
}


def _compare(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got_case, want_case = value(seen, case), value(expected, case)
    for graph, queries in want_case.items():
        if graph == "changed":
            continue
        got_queries = got_case.get(graph, {})
        for query, want in queries.items():
            got = got_queries.get(query)
            if got == want:
                continue
            hint = ""
            if got is not None and sorted(got) == sorted(want):
                hint = "（node 都對，但不是圖上的順序）"
            elif got is not None and set(want) < set(got):
                hint = f"（多找到 {[g for g in got if g not in want]}：比的是 node.target，不是名字或字串）"
            raise Fail(f"{GRAPHS[graph]}：find_nodes(gm, {query}) 預期 {want}，看到 {got}{hint}")


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
    _compare(seen, expected, "overloads")


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
    _compare(seen, expected, "order")
