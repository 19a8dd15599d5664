"""Hidden checks of M03-2: label_positions and fused_patterns.

Each check compares, graph by graph, the names the student's reading function returns (sorted: the order
does not matter) with the key's, on graphs labelled by XNNPACKQuantizer or by hand and copied right after
``annotate``; the first check of each exercise also asks that every graph comes back unchanged.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m03_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect_unchanged, value
from selfcheck.public.m03_2 import (
    PLACEHOLDERS,
    Pair,
    both_ways,
    crashed_on_unlabelled,
    extra_only,
    is_relu,
    lost_and_found,
    missing_only,
    missing_within,
    more_edges,
    more_outputs,
    no_edges,
    no_outputs,
    owner,
    pair_records,
    pairs_reversed,
    position_records,
    reversed_edges,
)

POSITIONS = ("seed_models", "cnn", "table", "unseen")
FUSED = ("conv_relu", "add_linear_relu", "nothing_fused")


def _unchanged(seen, cases: tuple[str, ...], function: str) -> None:
    """Every graph the reading function was handed comes back as it was."""
    for case in cases:
        if "value" not in seen.get("cases", {}).get(case, {}):  # a case that stopped fails its own check
            continue
        for model, record in value(seen, case).items():
            if isinstance(record, dict):
                expect_unchanged({TABLE if model == "table_net" else model: record.get("changed", [])}, function)


TABLE = "手貼標籤的模型（有沒人認領的標籤、None 規格、共用規格、模型輸入與常數上的輸出標籤、圖上已有一個 observer）"


def _item_text(item: Any) -> str:
    """An edge or a pair as ``a → b``, a node name as itself."""
    if isinstance(item, list) and len(item) == 2:
        return f"{item[0]} → {item[1]}"
    return str(item)


def expect_same(got: Any, want: Any, where: str, what: str) -> None:
    """Fail unless ``got == want`` (sorted lists), saying what is missing and what is extra."""
    if got == want:
        return
    if isinstance(got, list) and isinstance(want, list):
        mine, key = [_item_text(x) for x in got], [_item_text(x) for x in want]
        lost, more = sorted(set(key) - set(mine)), sorted(set(mine) - set(key))
        parts = ([f"少了 {'、'.join(lost)}"] if lost else []) + ([f"多了 {'、'.join(more)}"] if more else [])
        if parts:
            space = " " if what[-1].isascii() else ""
            raise Fail(f"{where}：你列的{what}{space}{'，'.join(parts)}")
        if len(mine) != len(set(mine)):
            raise Fail(f"{where}：你列的{what}有重複的項目，每個只該列一次")
    raise Fail(f"{where}：{what}應該是 {[_item_text(x) for x in want]}，你的是 {got!r}")


PARTS = {"edges": "邊（edges）", "outputs": "輸出（outputs）"}


def _compare_positions(seen, expected, case: str, part: str) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_positions in want.items():
        where = TABLE if model == "table_net" else model
        expect_same(got[model][part], want_positions[part], where, PARTS[part])


def _compare_pairs(seen, expected, case: str, names: dict[str, str] | None = None) -> None:
    got, want = value(seen, case), value(expected, case)
    for model, want_pairs in want.items():
        expect_same(got[model]["pairs"], want_pairs["pairs"], (names or {}).get(model, model), "融合 pattern")


@check(
    "label_positions",
    1,
    "邊：只列規格不是 None 的輸入邊，寫成 (上游, consumer)；有沒有人認領都算；不改傳進來的圖",
)
def test_positions_edges(seen, expected):
    _unchanged(seen, POSITIONS, "label_positions")
    for case in ("seed_models", "cnn", "table"):
        _compare_positions(seen, expected, case, "edges")


@check("label_positions", 1, "輸出：只列有輸出標籤的 node（空的標籤不算，模型輸入上的也算）")
def test_positions_outputs(seen, expected):
    for case in ("seed_models", "cnn", "table"):
        _compare_positions(seen, expected, case, "outputs")


@check("label_positions", 1, "沒看過的模型（mlp、有 sigmoid 的 mlp、cat_pool、有常數的 add）：邊與輸出都對")
def test_positions_unseen(seen, expected):
    for part in ("edges", "outputs"):
        _compare_positions(seen, expected, "unseen", part)


@check(
    "fused_patterns",
    1,
    "conv → relu（包括 BN 折掉之後的 conv → bn → relu，以及圖上不相鄰的 conv 與 relu）；不改傳進來的圖",
)
def test_fused_conv_relu(seen, expected):
    _unchanged(seen, FUSED, "fused_patterns")
    if "value" in seen.get("cases", {}).get("half_labelled", {}):
        expect_unchanged(value(seen, "half_labelled").get("changed", []), "fused_patterns")
    _compare_pairs(seen, expected, "conv_relu")


@check("fused_patterns", 1, "add → relu、linear → relu，以及標籤看得出來、最後一個 op 不是 relu 的融合")
def test_fused_add_linear(seen, expected):
    _compare_pairs(
        seen,
        expected,
        "add_linear_relu",
        {
            "fused_by_labels": "手貼標籤的模型（conv → sigmoid 中間隔著別的 node、mul → hardtanh 的邊標成 None）",
            "two_input_last": "手貼標籤的模型（conv 是 add 的第二個輸入、add 的另一條輸入邊有量化；hardtanh 的輸出是共用規格）",
        },
    )


@check(
    "fused_patterns",
    1,
    "沒有融合的地方不列：沒有標籤的 op、有兩個 consumer 的 op、中間的邊有量化、輸入全是 None、後面沒有輸出標籤",
)
def test_fused_nothing(seen, expected):
    _compare_pairs(
        seen,
        expected,
        "nothing_fused",
        {
            "not_fused": "手貼標籤的模型（conv → relu 的邊有量化、輸入規格全是 None、add 有兩個 consumer）",
            "second_input_quantized": "手貼標籤的模型（conv 是 mul 的第二個輸入、這條邊有量化；cat 的輸出是共用規格）",
        },
    )
    expect_same(
        value(seen, "half_labelled")["pairs"],
        value(expected, "half_labelled")["pairs"],
        "conv 有輸入標籤、relu 沒有標籤的圖",
        "融合 pattern",
    )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m03_2.py) --------

ALL_POSITIONS = ("test_positions_edges", "test_positions_outputs", "test_positions_unseen")

# The hand-labelled graph of the "table" case (autograder/sandboxed/cases/m03_2.py, table_labelled): the
# nodes whose labels nobody claimed, and the positions whose spec is shared, fixed or derived.
TABLE_UNCLAIMED = {"conv2d_1", "mul"}
TABLE_SPECIAL = {
    ("edge", "mul", "cat"),
    ("edge", "leaky_relu", "cat"),
    ("edge", "conv2d_2", "cat"),
    ("out", "cat"),
    ("out", "add"),
    ("edge", "lin_bias", "linear"),
}


def _changed(records: list[Any]) -> bool:
    return any(isinstance(r.changed, list) and r.changed for r in records)


@detects("label_positions", "changes_graph", explains=("test_positions_edges",))
def positions_change_graph(seen: Any, expected: Any) -> bool:
    return _changed(position_records(seen, expected))


@detects("label_positions", "edges_reversed", explains=("test_positions_edges", "test_positions_unseen"))
def positions_reversed(seen: Any, expected: Any) -> bool:
    return reversed_edges(seen, expected)


@detects("label_positions", "identity_filter", explains=("test_positions_edges", "test_positions_unseen"))
def positions_identity_filter(seen: Any, expected: Any) -> bool:
    return no_edges(seen, expected)


@detects("label_positions", "no_outputs", explains=("test_positions_outputs", "test_positions_unseen"))
def positions_no_outputs(seen: Any, expected: Any) -> bool:
    return no_outputs(seen, expected)


@detects("label_positions", "none_is_quantized", explains=("test_positions_edges", "test_positions_unseen"))
def positions_none_is_quantized(seen: Any, expected: Any) -> bool:
    return more_edges(seen, expected)


@detects("label_positions", "any_label_is_output", explains=("test_positions_outputs", "test_positions_unseen"))
def positions_any_label(seen: Any, expected: Any) -> bool:
    return more_outputs(seen, expected)


@detects("label_positions", "plain_specs_only", explains=ALL_POSITIONS)
def positions_plain_specs(seen: Any, expected: Any) -> bool:
    """Only positions are missing: on graphs XNNPACKQuantizer labelled (where every label is claimed and no
    model input is labelled, so only the kind of spec can explain it), or the table's shared, fixed and
    derived positions."""
    return missing_within(seen, expected, "table_net", lambda p: p in TABLE_SPECIAL, elsewhere=True)


@detects("label_positions", "claimed_only", explains=ALL_POSITIONS)
def positions_claimed_only(seen: Any, expected: Any) -> bool:
    return missing_within(seen, expected, "table_net", lambda p: owner(p) in TABLE_UNCLAIMED)


TABLE_CONSTANTS = {"kernel"}
"""The constants (get_attr) with an output label on the table's graph."""


@detects("label_positions", "skips_constants", explains=("test_positions_outputs",))
def positions_skips_constants(seen: Any, expected: Any) -> bool:
    return missing_within(seen, expected, "table_net", lambda p: p[0] == "out" and p[1] in TABLE_CONSTANTS)


@detects("label_positions", "ops_only", explains=("test_positions_outputs",))
def positions_ops_only(seen: Any, expected: Any) -> bool:
    """Outputs missing on the table's graph only where a node is not an op: the model input, constants."""
    others = PLACEHOLDERS | TABLE_CONSTANTS
    return missing_within(seen, expected, "table_net", lambda p: p[0] == "out" and p[1] in others)


# What the hidden graphs of fused_patterns are built to show (autograder/sandboxed/cases/m03_2.py): the pairs
# the labels fuse though a reading gets them wrong, and the pairs that are not fused though a reading lists them.
HIDDEN_TRAPS: dict[tuple[str, Pair], set[str]] = {
    ("fused_by_labels", ("conv2d", "sigmoid")): {"apart", "unclaimed"},  # a mul between them; nobody claimed
    ("fused_by_labels", ("mul", "hardtanh")): {"apart", "none_edge"},  # the edge between them is labelled None
    ("far_relu", ("conv2d", "relu_1")): {"apart"},  # conv2d's only user is far away in graph order
    ("not_fused", ("add", "neg")): {"two_users"},  # add is read by neg and by the graph output
    ("not_fused", ("conv2d", "relu")): {"edge_quantized"},  # the edge conv2d → relu is quantized
    ("not_fused", ("conv2d_1", "relu_1")): {"inputs_unquantized"},  # every input spec of conv2d_1 is None
    ("half_labelled", ("conv2d", "relu")): {"last_unlabelled"},  # relu carries no label at all
    # add reads sigmoid (labelled) and then conv2d (not): fused though add has a quantized input
    ("two_input_last", ("conv2d", "add")): {"apart", "other_input"},
    ("two_input_last", ("mul", "hardtanh")): {"shared_output"},  # hardtanh's output label is a shared spec
    # mul reads tanh (edge None) and then conv2d (edge quantized): not fused
    ("second_input_quantized", ("conv2d", "mul")): {"edge_quantized", "second_argument"},
    ("second_input_quantized", ("cat", "relu")): {"shared_output"},  # cat's output label is a shared spec
}


def trap(tag: str) -> Any:
    return lambda model, pair: tag in HIDDEN_TRAPS.get((model, pair), set())


@detects("fused_patterns", "changes_graph", explains=("test_fused_conv_relu",))
def fused_change_graph(seen: Any, expected: Any) -> bool:
    return _changed(pair_records(seen, expected))


@detects("fused_patterns", "pairs_reversed")
def fused_reversed(seen: Any, expected: Any) -> bool:
    return pairs_reversed(seen, expected)


@detects("fused_patterns", "last_any_input", explains=("test_fused_add_linear",))
def fused_last_any_input(seen: Any, expected: Any) -> bool:
    """Only the pairs whose last op has another, quantized input are missing."""
    return missing_only(seen, expected, trap("other_input"))


def _only(seen: Any, expected: Any, lost: str, found: str, *, both: bool = False) -> bool:
    """Pairs are wrong, each missing one tagged ``lost`` and each extra one ``found`` (``both``: some of each)."""
    missing, extra = lost_and_found(seen, expected)
    if both and not (missing and extra):
        return False
    return bool(extra) and all(trap(lost)(*m) for m in missing) and all(trap(found)(*e) for e in extra)


@detects("fused_patterns", "wrong_edge", explains=("test_fused_add_linear", "test_fused_nothing"))
def fused_wrong_edge(seen: Any, expected: Any) -> bool:
    """A pair whose quantized edge is the last op's second input is listed (maybe the fused one with a
    quantized first input missing); nothing else wrong."""
    return _only(seen, expected, "other_input", "second_argument")


@detects("fused_patterns", "fused_plain_specs", explains=("test_fused_add_linear", "test_fused_nothing"))
def fused_plain_specs(seen: Any, expected: Any) -> bool:
    """Only pairs around a shared output spec are wrong, some missing and some extra."""
    return _only(seen, expected, "shared_output", "shared_output", both=True)


@detects("fused_patterns", "by_op_kind")
def fused_by_op_kind(seen: Any, expected: Any) -> bool:
    """Pairs the labels fuse are missing and pairs they do not fuse are listed, while some are right."""
    found_some = any(r.pairs & r.want for r in pair_records(seen, expected))
    return found_some and both_ways(seen, expected)


@detects("fused_patterns", "next_node", explains=("test_fused_conv_relu", "test_fused_add_linear"))
def fused_next_node(seen: Any, expected: Any) -> bool:
    """Exactly the pairs whose two ops are not next to each other in graph order are missing."""
    return missing_only(seen, expected, trap("apart"), every=trap("apart"))


@detects("fused_patterns", "relu_last_only", explains=("test_fused_add_linear",))
def fused_relu_last_only(seen: Any, expected: Any) -> bool:
    """Exactly the pairs whose last op is not a relu are missing."""
    not_relu = lambda _, pair: not is_relu(pair[1])  # noqa: E731
    return missing_only(seen, expected, not_relu, every=not_relu)


@detects("fused_patterns", "claimed_only", explains=("test_fused_conv_relu", "test_fused_add_linear"))
def fused_claimed_only(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, trap("unclaimed"))


@detects("fused_patterns", "edge_present", explains=("test_fused_add_linear",))
def fused_edge_present(seen: Any, expected: Any) -> bool:
    return missing_only(seen, expected, trap("none_edge"))


@detects("fused_patterns", "ignores_last_label", explains=("test_fused_nothing",))
def fused_ignores_last_label(seen: Any, expected: Any) -> bool:
    return crashed_on_unlabelled(seen, "half_labelled") or extra_only(seen, expected, trap("last_unlabelled"))


@detects("fused_patterns", "unlabelled_first_op")
def fused_unlabelled_first(seen: Any, expected: Any) -> bool:
    """Pairs are listed that none of the hand-made traps explains: ops nobody labelled taken as a first op."""
    missing, extra = lost_and_found(seen, expected)
    return bool(extra) and not missing and any((model, pair) not in HIDDEN_TRAPS for model, pair in extra)


@detects("fused_patterns", "any_user", explains=("test_fused_nothing",))
def fused_any_user(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, trap("two_users"))


@detects("fused_patterns", "identity_edge", explains=("test_fused_nothing",))
def fused_identity_edge(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, trap("edge_quantized"))


@detects("fused_patterns", "first_inputs_unquantized", explains=("test_fused_nothing",))
def fused_first_inputs_unquantized(seen: Any, expected: Any) -> bool:
    return extra_only(seen, expected, trap("inputs_unquantized"))
