"""Hidden checks of M09-1: linear_roles (the nn.Linear of each linear node) and annotation_census.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m09_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck import diagnosis
from selfcheck.public.m09_1 import (
    LABEL_SHAPES,
    annotated_changes,
    census_changes_only_in,
    census_counts,
    census_counts_unlabelled_ops,
    census_extra_keys,
    census_misses_input_only,
    census_misses_shared,
    census_totals_differ,
    dict_pairs,
    roles_are_classes,
    roles_are_node_names,
    roles_are_outer_modules,
    roles_are_stack_keys,
    roles_need_bias,
    roles_of_other_nodes,
    roles_wrong_only_where_tied,
    wrong_roles,
)

# --- linear_roles ---------------------------------------------------------------------------------


def compare_roles(seen: Any, expected: Any, case: str, where: str) -> None:
    got, want = value(seen, case), value(expected, case)
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    if got == want:
        return
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    if extra:
        raise Fail(
            f"{where}：{'、'.join(extra[:5])} 不是 linear node，不該放進來（這個模型有 {len(want)} 個 linear node）"
        )
    if missing:
        raise Fail(f"{where}：linear node {'、'.join(missing[:5])} 沒有放進來（這個模型有 {len(want)} 個 linear node）")
    wrong = [name for name in want if got[name] != want[name]]
    name = wrong[0]
    raise Fail(
        f"{where}：{name} 應該對到 {want[name]!r}，你的是 {got[name]!r}（一共有 {len(wrong)} 個 node 對到錯的名字）"
    )


@check(
    "linear_roles",
    1,
    "沒看過的模型（其他大小與層數、其他 module 名字與深度、head 與 embedding 共用 weight）：每個 linear node 對到最內層的 nn.Linear",
)
def test_roles_variants(seen, expected):
    compare_roles(seen, expected, "variants", "沒看過的 TinyLM（其他大小與層數，pre/post-LN、GELU/ReLU）")
    compare_roles(seen, expected, "renamed", "module 名字與深度都和 TinyLM 不同的模型（head 在最外層，block 在更深處）")
    compare_roles(seen, expected, "tied", "另一種命名、head 的 weight 就是 token embedding 的 weight（共用）的模型")


@check("linear_roles", 1, "沒有 bias 的 linear 也要對到")
def test_roles_no_bias(seen, expected):
    compare_roles(seen, expected, "no_bias", "linear 都沒有 bias 的 TinyLM")


@check("linear_roles", 1, "不假設順序：MLP 在 attention 前面的 block")
def test_roles_order(seen, expected):
    compare_roles(seen, expected, "mlp_first", "每個 block 先算 MLP、再算 attention 的模型")


@check("linear_roles", 1, "同一個 block 用好幾次：一個 nn.Linear 對到好幾個 linear node")
def test_roles_shared_layers(seen, expected):
    compare_roles(seen, expected, "shared_layers", "同一個 block 連用好幾次的模型（共用的層）")


# --- annotation_census ----------------------------------------------------------------------------


def _counts(counts: Any) -> str:
    return f"標到 {counts.get('annotated')} 個、沒標到 {counts.get('unannotated')} 個"


def compare_census(seen: Any, expected: Any, case: str, where: str) -> None:
    got, want = value(seen, case), value(expected, case)
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    if got == want:
        return
    extra = sorted(set(got) - set(want))
    if extra:
        raise Fail(
            f"{where}：{'、'.join(extra[:4])} 不是圖上 call_function node 的 op，不該出現（key 是 str(node.target)）"
        )
    for op, counts in want.items():
        mine = got.get(op)
        if not isinstance(mine, dict):
            raise Fail(f"{where}：{op} 應該{_counts(counts)}，你的結果裡沒有這一項（圖上每一種 op 都要有一項）")
        if mine != counts:
            raise Fail(f"{where}：{op} 應該{_counts(counts)}，你的結果是{_counts(mine)}")


@check("annotation_census", 2, "static config：linear、add、mul 與它們之間的 reshape / transpose 標到，其他留在浮點")
def test_census_static(seen, expected):
    compare_census(seen, expected, "static", "static config prepare 之後的 TinyLM")


@check("annotation_census", 1, "dynamic config：只有 linear 標到，而且只有輸入規格")
def test_census_dynamic(seen, expected):
    compare_census(seen, expected, "dynamic", "dynamic config prepare 之後的模型（MLP 在 attention 前面）")


@check("annotation_census", 1, "set_module_type 只設定一種 module：其他 module 的 op 都沒標")
def test_census_module_type(seen, expected):
    compare_census(
        seen, expected, "module_type", "static config 只用 set_module_type 設在 Mlp 或 CausalSelfAttention 上"
    )


@check(
    "annotation_census",
    1,
    "看規格：空的認領標籤、None 標籤、規格是 None 的輸入邊不算標到；只有輸出規格、fixed、derived 規格算標到",
)
def test_census_other_labels(seen, expected):
    compare_census(
        seen, expected, "other_labels", "head 貼了空的認領標籤、softmax 貼了只有輸出規格（_annotated 沒設）的標籤"
    )
    compare_census(
        seen,
        expected,
        "label_shapes",
        "別的 Quantizer 貼了各種形狀的標籤（None 標籤、輸入邊的規格是 None、FixedQParams 與 Derived 規格），"
        "q/k/v 合成一個 linear 再 split（圖上有 getitem）",
    )


@check("annotation_census", 1, "只 annotate、還沒 prepare 的圖（沒有 observer）也數得出來")
def test_census_annotated_only(seen, expected):
    compare_census(seen, expected, "annotated_only", "只呼叫 annotate、還沒插 observer 的圖")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m09_1.py) --------


# test_roles_variants too: its tied model's head (weight shared with the embedding) has no bias, the same
# belief's blind spot as test_roles_no_bias's models
@detects("linear_roles", "bias_name", explains=("test_roles_no_bias", "test_roles_variants"))
def roles_bias_name(seen: Any, expected: Any) -> bool:
    return roles_need_bias(seen, expected)


@detects("linear_roles", "one_node_per_module", explains=("test_roles_shared_layers",))
def roles_one_node_per_module(seen: Any, expected: Any) -> bool:
    """Where an nn.Linear gives several linear nodes, only one of them (each name once) is there."""
    for _, got, want in dict_pairs(seen, expected):
        names = list(want.values())
        repeated = len(set(names)) < len(names)
        if repeated and set(got) < set(want) and len(set(got.values())) == len(got):
            return True
    return False


@detects("linear_roles", "stack_key")
def roles_stack_key(seen: Any, expected: Any) -> bool:
    return roles_are_stack_keys(seen, expected)


@detects("linear_roles", "every_module_op")
def roles_every_module_op(seen: Any, expected: Any) -> bool:
    return roles_of_other_nodes(seen, expected)


@detects("linear_roles", "module_class")
def roles_module_class(seen: Any, expected: Any) -> bool:
    return roles_are_classes(seen, expected)


@detects("linear_roles", "node_name")
def roles_node_name(seen: Any, expected: Any) -> bool:
    return roles_are_node_names(seen, expected)


@detects("linear_roles", "outer_module")
def roles_outer_module(seen: Any, expected: Any) -> bool:
    return roles_are_outer_modules(seen, expected)


# test_roles_variants too: a layout assumed instead of read from the graph names TinyLM's modules on a model whose
# modules are named and nested otherwise
@detects(
    "linear_roles", "fixed_order", explains=("test_roles_order", "test_roles_shared_layers", "test_roles_variants")
)
def roles_fixed_order(seen: Any, expected: Any) -> bool:
    """The right names on the wrong nodes: every linear named, the names a reshuffle of the key's."""
    for _, got, want in dict_pairs(seen, expected):
        if set(got) == set(want) and wrong_roles(got, want) and sorted(map(str, got.values())) == sorted(want.values()):
            return True
    return False


@detects("linear_roles", "weight_name", explains=("test_roles_variants",))
def roles_weight_name(seen: Any, expected: Any) -> bool:
    return roles_wrong_only_where_tied(seen, expected)


def _changes(seen: Any, expected: Any, case: str) -> dict[str, int]:
    return next((annotated_changes(got, want) for _, got, want in dict_pairs(seen, expected, (case,))), {})


OTHER_QUANTIZERS = ("other_labels", LABEL_SHAPES)
"""The graphs that carry another Quantizer's labels besides XNNPACKQuantizer's."""


def _others_right(seen: Any, expected: Any, cases: tuple[str, ...]) -> bool:
    """Every case but ``cases`` counted as the key does."""
    return all(got == want for name, got, want in dict_pairs(seen, expected) if name not in cases)


def _nothing_annotated_before_prepare(seen: Any, expected: Any) -> bool:
    """On the graph only annotated (no observer yet) nothing is counted as annotated, where the key counts some."""
    for _, got, want in dict_pairs(seen, expected, ("annotated_only",)):
        return sum(census_counts(got, op) for op in got) == 0 and any(census_counts(want, op) for op in want)
    return False


@detects("annotation_census", "counts_every_node")
def census_every_node(seen: Any, expected: Any) -> bool:
    return census_extra_keys(seen, expected)


@detects("annotation_census", "counts_observers")
def census_observers(seen: Any, expected: Any) -> bool:
    return _nothing_annotated_before_prepare(seen, expected) and census_totals_differ(seen, expected)


@detects("annotation_census", "observer_means_annotated")
def census_observer_after(seen: Any, expected: Any) -> bool:
    return _nothing_annotated_before_prepare(seen, expected) and not census_totals_differ(seen, expected)


@detects("annotation_census", "producer_counted")
def census_producer_counted(seen: Any, expected: Any) -> bool:
    """Ops the key never counts (layer_norm…) counted even where no observer exists yet: from the consumers' labels."""
    return census_counts_unlabelled_ops(
        {"cases": {k: v for k, v in diagnosis.cases(seen).items() if k == "annotated_only"}}, expected
    )


@detects("annotation_census", "annotated_flag", explains=("test_census_other_labels",))
def census_annotated_flag(seen: Any, expected: Any) -> bool:
    """Only the graph with another Quantizer's labels differs, and some op there lost its count (a label with
    specs but ``_annotated`` left False)."""
    changes = _changes(seen, expected, "other_labels")
    return any(change < 0 for change in changes.values()) and _others_right(seen, expected, OTHER_QUANTIZERS)


@detects("annotation_census", "label_object_counts", explains=("test_census_other_labels",))
def census_label_object(seen: Any, expected: Any) -> bool:
    """Only the graph with another Quantizer's labels differs, with more annotated (the empty claimed label)."""
    changes = _changes(seen, expected, "other_labels")
    return (
        any(change > 0 for change in changes.values())
        and all(change >= 0 for change in changes.values())
        and _others_right(seen, expected, OTHER_QUANTIZERS)
    )


@detects("annotation_census", "output_spec_only")
def census_output_only(seen: Any, expected: Any) -> bool:
    return census_misses_input_only(seen, expected)


OUTPUT_ONLY_LABELS = {"other_labels": "aten.softmax.int", "annotated_only": "aten.relu.default"}
"""Where the hidden graphs carry labels with an output spec only: another Quantizer's on each softmax, XNNPACK's on
the relu fused after a linear."""


@detects("annotation_census", "input_specs_only")
def census_inputs_only(seen: Any, expected: Any) -> bool:
    fewer = [annotated_changes(got, want) for _, got, want in dict_pairs(seen, expected)]
    if not any(fewer) or any(change > 0 for found in fewer for change in found.values()):
        return False
    if _others_right(seen, expected, OTHER_QUANTIZERS):
        return False  # only another Quantizer's labels miscounted: that is annotated_flag's signature
    return any(_changes(seen, expected, case).get(op, 0) < 0 for case, op in OUTPUT_ONLY_LABELS.items())


@detects("annotation_census", "plain_specs_only")
def census_plain_specs(seen: Any, expected: Any) -> bool:
    return census_misses_shared(seen, expected)


SPEC_KINDS_ELSEWHERE = ("aten.masked_fill.Scalar", "aten.matmul.default")
"""Where the label-shapes graph carries a FixedQParams (masked_fill) or a Derived (matmul) spec."""


@detects("annotation_census", "map_keys_count", explains=("test_census_other_labels",))
def census_map_keys(seen: Any, expected: Any) -> bool:
    """Only the label-shapes graph is wrong, with more annotated adds (their edges are listed with None specs)."""
    changes = census_changes_only_in(seen, expected, LABEL_SHAPES)
    return changes.get("aten.add.Tensor", 0) > 0 and all(change > 0 for change in changes.values())


@detects("annotation_census", "label_none", explains=("test_census_other_labels",))
def census_label_none(seen: Any, expected: Any) -> bool:
    """The label-shapes graph (a None label on a layer_norm) raised about NoneType."""
    return "NoneType" in diagnosis.error_message(seen, LABEL_SHAPES)


@detects("annotation_census", "known_spec_classes", explains=("test_census_other_labels",))
def census_known_spec_classes(seen: Any, expected: Any) -> bool:
    """Only the label-shapes graph is wrong, with fewer annotated where its fixed and derived specs are."""
    changes = census_changes_only_in(seen, expected, LABEL_SHAPES)
    return bool(changes) and set(changes) <= set(SPEC_KINDS_ELSEWHERE) and all(c < 0 for c in changes.values())


@detects("annotation_census", "aten_ops_only")
def census_aten_only(seen: Any, expected: Any) -> bool:
    """Some census lacks exactly the ops that are not ``aten.`` ops (getitem), the rest right."""
    for _, got, want in dict_pairs(seen, expected):
        missing = set(want) - set(got)
        if missing and all(not op.startswith("aten.") for op in missing):
            if all(got.get(op) == counts for op, counts in want.items() if op not in missing):
                return True
    return False
