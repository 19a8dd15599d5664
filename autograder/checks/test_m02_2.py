"""Hidden checks of M02-2: observers inserted by hand behave like prepare_pt2e's on the same positions.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m02_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck.public import m02_2 as evidence

KEYWORDS = "兩個 mul 被別的 pass 改成用 keyword 引數讀第二個 tensor（mul(a, other=b)）的圖"


def _instance_text(records: list[dict[str, Any]], index: int) -> str:
    if not 0 <= index < len(records):
        return f"#{index}"
    record = records[index]
    return f"#{index}（{record.get('class')}）"


def _chain_text(chain: list[int], records: list[dict[str, Any]]) -> str:
    if not chain:
        return "不經過 observer"
    return "經過 observer " + " → ".join(_instance_text(records, i) for i in chain)


def _inputs_of(edges: list[list[Any]], consumer: str) -> list[tuple[str, list[int]]]:
    return [(source, chain) for name, source, chain in edges if name == consumer]


def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_number(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    return a == b


def compare_graph(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Every input of every node reads through the same observer instances, with the same qparams."""
    try:
        got_edges, want_edges = got["edges"], want["edges"]
        got_records, want_records = got["instances"], want["instances"]
    except (KeyError, TypeError):
        raise Fail(f"{where}：證據格式不對") from None
    consumers = list(dict.fromkeys(name for name, _, _ in want_edges))
    for consumer in consumers:
        want_inputs, got_inputs = _inputs_of(want_edges, consumer), _inputs_of(got_edges, consumer)
        if [s for s, _ in got_inputs] != [s for s, _ in want_inputs]:
            seen = "、".join(f"{s}（{_chain_text(c, got_records)}）" for s, c in got_inputs) or "沒有輸入"
            want_text = "、".join(f"{s}（{_chain_text(c, want_records)}）" for s, c in want_inputs)
            raise Fail(f"{where}：{consumer} 的輸入應該是 {want_text}，你的是 {seen}")
        for (source, want_chain), (_, got_chain) in zip(want_inputs, got_inputs, strict=True):
            if got_chain != want_chain:
                raise Fail(
                    f"{where}：{consumer} 讀 {source} 時應該{_chain_text(want_chain, want_records)}，"
                    f"你的{_chain_text(got_chain, got_records)}"
                    f"（prepare_pt2e 有 {len(want_records)} 個 observer 實例，你的圖有 {len(got_records)} 個）"
                )
    if len(got_records) != len(want_records):
        raise Fail(f"{where}：prepare_pt2e 有 {len(want_records)} 個 observer 實例，你的圖有 {len(got_records)} 個")
    for index, (mine, theirs) in enumerate(zip(got_records, want_records, strict=True)):
        observer = f"{where}：observer {_instance_text(want_records, index)}"
        for field in ("class", "dtype", "qmin", "qmax", "qscheme", "ch_axis"):
            if mine.get(field) != theirs.get(field):
                raise Fail(f"{observer} 的 {field} 應該是 {theirs.get(field)!r}，你的是 {mine.get(field)!r}")
        if "scale" not in mine and "scale" in theirs:
            raise Fail(f"{observer} 校準之後什麼都沒看到：forward 從來沒呼叫它（插完有沒有 gm.recompile()？）")
        for field in ("scale", "zero_point"):
            if not _same_number(mine.get(field), theirs.get(field)):
                raise Fail(
                    f"{observer} 校準後的 {field} 應該是 {theirs.get(field)}，你的是 {mine.get(field)}："
                    "它看到的 tensor 和 prepare_pt2e 的 observer 看到的不一樣"
                )


def compare_case(result: dict[str, Any], expected: dict[str, Any], title: str) -> None:
    where = f"{title}（位置：{'、'.join(expected['positions'])}）"
    compare_graph(result["mine"], expected["prepare_pt2e"], where)


@check(
    "insert_observer",
    1,
    "conv_relu 上照 XNNPACKQuantizer 的三個位置插 observer：圖與 qparams 和 prepare_pt2e 相同，回傳新的 observer node",
)
def test_xnnpack_conv_relu(seen, expected):
    got = value(seen, "conv_relu")
    compare_case(got, value(expected, "conv_relu"), "conv_relu")
    expect(
        got["returned_observer_node"] is True,
        "insert_observer 應該回傳新插進圖裡、呼叫這個 observer 的 call_module node",
    )


@check("insert_observer", 1, "linear_relu（per-tensor weight）上照 XNNPACKQuantizer 的位置插 observer")
def test_xnnpack_linear_relu(seen, expected):
    compare_case(value(seen, "linear_relu"), value(expected, "linear_relu"), "linear_relu")


@check(
    "insert_observer",
    1,
    "邊 (producer, consumer)：只有那個 consumer 讀 observer，其他 consumer 仍讀原值"
    "（producer 是第二個引數、在 cat 的 list 裡、旁邊是純量也一樣）",
)
def test_edge_one_consumer(seen, expected):
    compare_case(value(seen, "edges"), value(expected, "edges"), "x 有三個 consumer、conv 接 cat 與 add 的模型")
    compare_case(value(seen, "keywords")["edge"], value(expected, "keywords")["edge"], KEYWORDS)


@check("insert_observer", 1, "node：所有 consumer（包含圖的輸出）都改讀 observer")
def test_node_all_users(seen, expected):
    got, want = value(seen, "nodes"), value(expected, "nodes")
    compare_case(got["branches"], want["branches"], "x 有三個 consumer、conv 接 mean、cat 與 add 的模型")
    compare_case(got["two_outputs"], want["two_outputs"], "relu 同時是輸出與 sigmoid 的輸入")
    compare_case(value(seen, "keyword_nodes")["node"], value(expected, "keyword_nodes")["node"], KEYWORDS)


@check("insert_observer", 1, "同一個 consumer 讀兩次同一個 producer（r * r）：兩個引數都經過同一個 observer node")
def test_repeated_input(seen, expected):
    compare_case(value(seen, "repeated_input"), value(expected, "repeated_input"), "r * r")


@check(
    "insert_observer",
    1,
    "同一個 observer 實例插在三個位置：和 SharedQuantizationSpec 一樣共用一個實例；"
    "在 prepare_pt2e 插過 observer（含共用實例）的圖上再插，不蓋掉原有的 observer",
)
def test_shared_instance(seen, expected):
    compare_case(value(seen, "shared"), value(expected, "shared"), "a + b 的兩條輸入邊與輸出")
    compare_case(
        value(seen, "prepared"),
        value(expected, "prepared"),
        "prepare_pt2e 已經插過 observer 的圖（名字 activation_post_process_0 … 已被用掉，其中兩個是同一個實例）",
    )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m02_2.py) --------

NODE_CHECKS = ("test_xnnpack_conv_relu", "test_xnnpack_linear_relu", "test_node_all_users", "test_shared_instance")


@detects("insert_observer", "appended_at_end")
def appended_at_end(seen: Any, expected: Any) -> bool:
    return evidence.placed_after_users(seen, expected)


@detects("insert_observer", "node_self_loop", explains=NODE_CHECKS)
def node_self_loop(seen: Any, expected: Any) -> bool:
    return evidence.reads_itself(seen, expected)


@detects("insert_observer", "no_recompile")
def no_recompile(seen: Any, expected: Any) -> bool:
    return evidence.never_called(seen, expected)


@detects("insert_observer", "one_node_per_argument", explains=("test_repeated_input", "test_edge_one_consumer"))
def one_node_per_argument(seen: Any, expected: Any) -> bool:
    return evidence.node_per_argument(seen, expected)


@detects("insert_observer", "first_argument_only", explains=("test_repeated_input", "test_edge_one_consumer"))
def first_argument_only(seen: Any, expected: Any) -> bool:
    return evidence.first_argument_only(seen, expected)


@detects("insert_observer", "copies_observer", explains=("test_xnnpack_conv_relu", "test_shared_instance"))
def copies_observer(seen: Any, expected: Any) -> bool:
    return evidence.copies_observer(seen, expected)


@detects("insert_observer", "fixed_name")
def fixed_name(seen: Any, expected: Any) -> bool:
    return evidence.one_name(seen, expected)


@detects("insert_observer", "name_by_observer_count", explains=("test_shared_instance",))
def name_by_observer_count(seen: Any, expected: Any) -> bool:
    return evidence.name_taken(seen, expected)


@detects("insert_observer", "edge_replaces_all_uses", explains=("test_edge_one_consumer", "test_node_all_users"))
def edge_replaces_all_uses(seen: Any, expected: Any) -> bool:
    return evidence.edge_to_every_user(seen, expected)


@detects("insert_observer", "rebuilds_args", explains=("test_edge_one_consumer", *NODE_CHECKS))
def rebuilds_args(seen: Any, expected: Any) -> bool:
    return evidence.rebuilds_args(seen, expected)


@detects("insert_observer", "misses_kwargs", explains=("test_edge_one_consumer", "test_node_all_users"))
def misses_kwargs(seen: Any, expected: Any) -> bool:
    return evidence.keyword_reads_missed(seen, expected)


@detects("insert_observer", "node_first_user_only", explains=NODE_CHECKS)
def node_first_user_only(seen: Any, expected: Any) -> bool:
    return evidence.one_user(seen, expected)


@detects("insert_observer", "node_skips_output", explains=NODE_CHECKS)
def node_skips_output(seen: Any, expected: Any) -> bool:
    return evidence.output_left_out(seen, expected)


@detects("insert_observer", "returns_nothing", explains=("test_xnnpack_conv_relu",))
def returns_nothing(seen: Any, expected: Any) -> bool:
    return evidence.returns_other(seen, expected)
