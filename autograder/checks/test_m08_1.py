"""Hidden checks of M08-1: quantizer_report's ops left without a spec, and its shared observer instances.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m08_1.py``); their detectors are at the end of this module.

The model and example inputs a student's function receives are plain modules and tensors: what it
does to them is not recorded in the sandbox (only graphs are), so no check can see it; the report
is read from the graph the function prepares itself.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck.public.m08_1 import (
    consumer_names,
    lists_every_instance,
    merges_groups,
    no_groups,
    not_an_op,
    pieces_of_groups,
    reports,
    single_names,
    unannotated_diff,
)

QUANTIZER_WORDS = {
    "torchao": "torchao 測試版",
    "executorch": "ExecuTorch 版",
    "executorch_per_tensor": "ExecuTorch 版（per-tensor weight）",
}


def _names(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]" if names else "[]（空的）"


def _groups(groups: list[list[str]]) -> str:
    return "、".join(_names(g) for g in groups) if groups else "[]（沒有共用的實例）"


def compare(seen: Any, expected: Any, case: str, part: str, where: str, quantizers: tuple[str, ...] = ()) -> None:
    """One case's ``unannotated`` or ``shared`` for each Quantizer it ran (all of them by default)."""
    got, want = value(seen, case), value(expected, case)
    for which in quantizers or tuple(want):
        label = f"{where}，{QUANTIZER_WORDS[which]}"
        mine = got.get(which) if isinstance(got, dict) else None
        expect(isinstance(mine, dict) and part in mine, f"{label}：回傳的 dict 裡找不到 {part}")
        if mine[part] == want[which][part]:
            continue
        if part == "unannotated":
            raise Fail(f"{label}：{_unannotated_text(mine[part], want[which][part])}")
        raise Fail(f"{label}：{_shared_text(mine[part], want[which][part])}")


def _unannotated_text(mine: list[str], key: list[str]) -> str:
    extra, missing = sorted(set(mine) - set(key)), sorted(set(key) - set(mine))
    if not extra and not missing:
        return f"同一個名稱列了不只一次：每個沒標到的 op 只列一次，你的是 {_names(mine)}"
    if not key:
        return f"每個 op 都有標到，沒標到的 op 應該是空的，你的列了 {_names(mine)}"
    want = f"沒標到的 op 應該是 {_names(key)}"
    detail = "；".join([f"多列了 {_names(extra)}" if extra else "", f"漏了 {_names(missing)}" if missing else ""])
    return f"{want}，你的是 {_names(mine)}（{detail.strip('；')}）"


def _shared_text(mine: list[list[str]], key: list[list[str]]) -> str:
    if not key:
        return f"這裡沒有被兩個以上 observer node 呼叫的實例，shared 應該是空的，你的列了 {_groups(mine)}"
    if not mine:
        return f"共用同一個 observer 實例的 node 應該是 {_groups(key)}（一組一個實例），你的 shared 是空的"
    return f"共用同一個 observer 實例的 node 應該是 {_groups(key)}（一組一個實例），你的是 {_groups(mine)}"


# --- unannotated ---------------------------------------------------------------------------------


@check("quantizer_report", 1, "cat 的輸入是串列：torchao 測試版漏標 cat 與 max_pool2d，ExecuTorch 版都標；getitem 不算")
def test_unannotated_cat(seen, expected):
    compare(seen, expected, "cat_inputs", "unannotated", "split → cat（輸入是串列）→ max_pool2d 的模型")


@check("quantizer_report", 1, "只有輸入規格或只有輸出規格的 op（conv → relu、add → relu、linear → relu）算標到")
def test_unannotated_patterns(seen, expected):
    compare(seen, expected, "adds", "unannotated", "add → relu、殘差 add、linear → relu 的模型")
    compare(seen, expected, "pool_chain", "unannotated", "conv → relu → max_pool2d → conv → reshape / transpose 的模型")


@check(
    "quantizer_report",
    1,
    "沒有 Quantizer 會標的 op（abs、sigmoid、softmax、tanh）：只被 consumer 的輸入邊量化的 producer 也算沒標到",
)
def test_unannotated_nobody(seen, expected):
    compare(seen, expected, "nobody", "unannotated", "abs → conv、mean、sigmoid → linear、softmax、tanh 的模型")


@check("quantizer_report", 1, "看規格：規格全是 None 的標籤算沒標到，_annotated 沒設的標籤算標到；BN 已折進 conv")
def test_unannotated_specs(seen, expected):
    compare(
        seen,
        expected,
        "kept",
        "unannotated",
        "BN 折進 conv；cat（每條邊都是 None）與一個 conv 貼了沒有規格的標籤；另一個 conv 的標籤只有 weight 的規格；"
        "sigmoid 的標籤沒設 _annotated",
    )


# --- shared --------------------------------------------------------------------------------------


@check("quantizer_report", 2, "ExecuTorch 版的 cat：每個輸入、cat 與 max_pool2d 的輸出共用一個 observer 實例")
def test_shared_cat(seen, expected):
    compare(seen, expected, "cat_inputs", "shared", "split → cat（輸入是串列）→ max_pool2d 的模型", ("executorch",))


@check("quantizer_report", 1, "max_pool2d、mean、flatten、reshape、transpose 和上一個 op 的輸出共用實例")
def test_shared_propagated(seen, expected):
    compare(seen, expected, "pool_chain", "shared", "conv → relu → max_pool2d → conv → reshape / transpose 的模型")
    compare(seen, expected, "nobody", "shared", "abs → conv、mean、sigmoid → linear、softmax、tanh 的模型")
    compare(seen, expected, "adds", "shared", "add → relu、殘差 add、linear → relu 的模型")


@check("quantizer_report", 1, "沒有共用的實例時回傳空 list（一個 observer 的輸出給好幾個 op 用不算共用）")
def test_shared_none(seen, expected):
    compare(seen, expected, "cat_inputs", "shared", "split → cat（輸入是串列）→ max_pool2d 的模型", ("torchao",))
    compare(seen, expected, "kept", "shared", "cat 與一個 conv 留在 fp32 的模型")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m08_1.py) --------

UNANNOTATED = ("test_unannotated_cat", "test_unannotated_patterns", "test_unannotated_nobody", "test_unannotated_specs")
SHARED = ("test_shared_cat", "test_shared_propagated", "test_shared_none")
PATTERNS = ("adds", "pool_chain")
"""The cases with fused patterns: conv → relu, add → relu, linear → relu (specs on the first op's inputs, the
last op's output)."""
KEPT_CLAIMED = "cat"
"""In ``kept``, cat and one conv carry claimed labels without a spec; cat's names each input edge with None."""
KEPT_UNCLAIMED = "sigmoid"
"""In ``kept``, sigmoid's label has an output spec and ``_annotated`` left False; another conv's claimed label
has one spec, its weight's (weight-only quantization: labelled)."""
PRODUCERS = ("abs", "sigmoid")
"""In ``nobody``, abs and sigmoid have no label; the edges from them are labelled on their consumers."""


def _diffs(seen: Any, expected: Any, cases: tuple[str, ...]) -> list[tuple[set[str], set[str]]]:
    """(extra, missing) ops of ``unannotated`` for every report of ``cases``."""
    return [unannotated_diff(got, want) for place, got, want in reports(seen, expected) if place[0] in cases]


def _kept(seen: Any, expected: Any) -> tuple[set[str], set[str]]:
    extra: set[str] = set()
    missing: set[str] = set()
    for more, fewer in _diffs(seen, expected, ("kept",)):
        extra |= more
        missing |= fewer
    return extra, missing


def _convs(names: set[str]) -> set[str]:
    return {name for name in names if name.startswith("conv")}


def _pattern_extra(seen: Any, expected: Any, heads: tuple[str, ...]) -> bool:
    """An op of a fused pattern (named by ``heads``) listed as unannotated where the key has it labelled."""
    return any(
        any(name.startswith(heads) and not not_an_op(name) for name in extra)
        for extra, _ in _diffs(seen, expected, PATTERNS)
    )


def _producers_missed(seen: Any, expected: Any) -> bool:
    """abs / sigmoid, quantized only by their consumers' edge labels, not listed."""
    return any(
        any(name.startswith(PRODUCERS) for name in missing) for _, missing in _diffs(seen, expected, ("nobody",))
    )


@detects("quantizer_report", "lists_every_node", explains=UNANNOTATED)
def lists_every_node(seen: Any, expected: Any) -> bool:
    return any(
        any(map(not_an_op, extra)) for extra, _ in _diffs(seen, expected, ("cat_inputs", *PATTERNS, "nobody", "kept"))
    )


@detects("quantizer_report", "reads_unprepared_graph", explains=UNANNOTATED)
def reads_unprepared_graph(seen: Any, expected: Any) -> bool:
    return any("batch_norm" in name for extra, _ in _diffs(seen, expected, ("kept",)) for name in extra)


@detects("quantizer_report", "getitem_counted", explains=("test_unannotated_cat",))
def getitem_counted(seen: Any, expected: Any) -> bool:
    return any(name.startswith("getitem") for extra, _ in _diffs(seen, expected, ("cat_inputs",)) for name in extra)


@detects("quantizer_report", "annotated_flag_means_labelled", explains=("test_unannotated_specs",))
def annotated_flag(seen: Any, expected: Any) -> bool:
    """The unclaimed label with a spec is listed, and the claimed ones without a spec are not."""
    extra, missing = _kept(seen, expected)
    return KEPT_UNCLAIMED in extra and bool(_convs(missing) or KEPT_CLAIMED in missing)


@detects("quantizer_report", "label_object_means_labelled", explains=("test_unannotated_specs",))
def label_object(seen: Any, expected: Any) -> bool:
    """The conv kept by a wholly empty label is not listed (nor, usually, cat)."""
    extra, missing = _kept(seen, expected)
    return bool(_convs(missing)) and KEPT_UNCLAIMED not in extra


@detects("quantizer_report", "none_spec_counts", explains=("test_unannotated_specs",))
def none_spec_counts(seen: Any, expected: Any) -> bool:
    """cat, whose label names each edge with None, is not listed; the conv whose label is empty is."""
    _, missing = _kept(seen, expected)
    return KEPT_CLAIMED in missing and not _convs(missing)


@detects("quantizer_report", "weight_spec_ignored", explains=("test_unannotated_specs",))
def weight_spec_ignored(seen: Any, expected: Any) -> bool:
    """Only a conv is listed too many in ``kept`` (the weight-only one), nothing is missed, and every other
    case's ``unannotated`` is the key's: the weight's spec did not count."""
    extra, missing = _kept(seen, expected)
    others = _diffs(seen, expected, ("cat_inputs", *PATTERNS, "nobody"))
    return (
        bool(extra)
        and extra == _convs(extra)
        and not missing
        and bool(others)
        and all(not more and not fewer for more, fewer in others)
    )


@detects(
    "quantizer_report",
    "observed_means_labelled",
    # test_unannotated_specs too: its model's conv labelled with a weight spec only has no observer after it,
    # which the same belief counts as not labelled
    explains=("test_unannotated_patterns", "test_unannotated_nobody", "test_unannotated_specs"),
)
def observed_means_labelled(seen: Any, expected: Any) -> bool:
    """Both at once: the pattern's first op (labelled, output not observed) listed, abs / sigmoid (not labelled,
    output observed) not."""
    return _pattern_extra(seen, expected, ("conv", "add", "linear")) and _producers_missed(seen, expected)


# test_unannotated_specs too: its model's conv labelled with a weight spec only has no output spec
@detects("quantizer_report", "output_spec_only", explains=("test_unannotated_patterns", "test_unannotated_specs"))
def output_spec_only(seen: Any, expected: Any) -> bool:
    return _pattern_extra(seen, expected, ("conv", "add", "linear"))


@detects("quantizer_report", "input_specs_only", explains=("test_unannotated_patterns", "test_unannotated_specs"))
def input_specs_only(seen: Any, expected: Any) -> bool:
    return _pattern_extra(seen, expected, ("relu",))


@detects(
    "quantizer_report",
    "edge_label_counts_for_producer",
    explains=("test_unannotated_nobody", "test_unannotated_patterns"),
)
def edge_label_counts_for_producer(seen: Any, expected: Any) -> bool:
    return _producers_missed(seen, expected)


@detects("quantizer_report", "groups_consumers", explains=SHARED)
def groups_consumers(seen: Any, expected: Any) -> bool:
    return consumer_names(seen, expected)


@detects("quantizer_report", "lists_unshared_instances", explains=SHARED)
def lists_unshared_instances(seen: Any, expected: Any) -> bool:
    return lists_every_instance(seen, expected)


@detects("quantizer_report", "many_users_as_sharing", explains=SHARED)
def many_users_as_sharing(seen: Any, expected: Any) -> bool:
    return single_names(seen, expected)


@detects("quantizer_report", "same_class_as_same_instance", explains=SHARED)
def same_class_as_same_instance(seen: Any, expected: Any) -> bool:
    return merges_groups(seen, expected)


@detects("quantizer_report", "shared_spec_as_group", explains=("test_shared_cat", "test_shared_propagated"))
def shared_spec_as_group(seen: Any, expected: Any) -> bool:
    return pieces_of_groups(seen, expected)


@detects("quantizer_report", "instance_by_name", explains=("test_shared_cat", "test_shared_propagated"))
def instance_by_name(seen: Any, expected: Any) -> bool:
    return no_groups(seen, expected)
