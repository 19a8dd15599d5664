"""Hidden checks of M08-2: predict_kernels, what ``lower_x86`` will make of each conv / linear of a q/dq graph.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m08_2.py``); their detectors are at the end of this module.

Every check reads the tables of all hidden cases and looks at the nodes of one kind (picked from
the answer key's table and what each node is); the last one says the table has nothing else in
it and that the graph came back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from autograder.checks.support import Fail, check, detects, expect, raised, value
from selfcheck.public.m08_2 import (
    changes_graph,
    constants_listed,
    extra_fuses,
    extra_keys,
    fuses_without_int8,
    int8_rows,
    kernel_changes,
    kind,
    lists_inputs,
    missing_fuses,
    tables,
)

CASES = {
    "convs": "conv 模型（depthwise、groups=2、殘差 add → relu、被讀兩次的 conv、conv + conv、broadcast 的 add）",
    "linears": "linear 模型（3-D 輸入、f + linear(f)、被讀兩次的 relu、linear + h → relu、最後加上 broadcast 的 tensor）",
    "dynamic": "dynamic 設定量化的模型（conv → relu → linear → relu → linear + h → relu → linear）",
    "skipped": "用名字跳過一個 conv、用型別跳過 linear，有 Conv1d 與 ConvTranspose2d 的模型（輸入叫 add）",
    "per_tensor": "conv 用 per-channel weight、linear 用 per-tensor weight 量化的模型",
}

LINEAR = "aten.linear.default"
CONV_TARGETS = ("aten.conv1d.default", "aten.conv2d.default")
PARTS = {
    "add": ("aten.add.Tensor",),
    "relu": ("aten.relu.default",),
    "quantize": ("quantized_decomposed.quantize_per_tensor.default",),
}


def _case(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("table"), dict), "證據格式不對")
    return result


def _what(nodes: dict[str, Any], name: str) -> str:
    return str(nodes.get(name, "圖上沒有這個 node"))


def _part(fuses: Any, nodes: dict[str, Any], part: str) -> list[str]:
    if not isinstance(fuses, list):
        return []
    return [name for name in fuses if nodes.get(name) in PARTS[part]]


def _shown(names: Any) -> str:
    return "[" + ", ".join(map(str, names)) + "]" if names else "[]（什麼都不吃）"


_MISSING = object()


def _rows(seen: Any, expected: Any) -> Iterator[tuple[str, str, dict[str, Any], Any, dict[str, Any]]]:
    """Every row of the key's tables, case by case: where, the node's name, the key's record, the student's row
    (``_MISSING`` when the table has none) and what each node is."""
    for case, where in CASES.items():
        got_table = _case(seen, case)["table"]
        want = _case(expected, case)
        nodes = want.get("nodes", {})
        for name, record in want["table"].items():
            yield where, name, record, got_table.get(name, _MISSING), nodes


def _kernel_agrees(mine: Any, record: dict[str, Any]) -> bool:
    """The student's row names the key's kernel: only there is what the kernel eats judged."""
    return isinstance(mine, dict) and mine.get("kernel") == record.get("kernel")


def compare(
    seen: Any,
    expected: Any,
    pick: Callable[[str, dict[str, Any], dict[str, Any]], bool],
    field: Callable[[dict[str, Any], dict[str, Any]], Any],
    what: str,
    same_kernel: bool = False,
) -> None:
    """For every node the key's table has and ``pick(target, record, nodes)`` selects: the same ``field``.

    ``same_kernel``: only the nodes whose kernel the student got right (what a kernel eats is judged where the
    kernel is; a wrong kernel is the kernel checks' to judge). Then at least one node the key fuses something
    on must be judged: a table of wrong kernels does not pass by having nothing to compare."""
    found = judged = 0
    for where, name, record, mine, nodes in _rows(seen, expected):
        if not pick(str(nodes.get(name)), record, nodes):
            continue
        found += 1
        if mine is _MISSING:
            raise Fail(f"{where}：表裡少了 {name}（{_what(nodes, name)}）；每個 conv / linear 都要有一列")
        if same_kernel and not _kernel_agrees(mine, record):
            continue
        judged += bool(field(record, nodes))
        if field(mine, nodes) != field(record, nodes):
            raise Fail(
                f"{where}：{name}（{_what(nodes, name)}）{what} 應該是 {_text(field(record, nodes))}，"
                f"你的是 {_text(field(mine, nodes))}"
            )
    expect(found > 0, "證據格式不對")
    if same_kernel and not judged:
        raise Fail(f"會吃掉{what.removeprefix('吃掉的')}的 int8 kernel，你的表一個都沒有判對，無從比較{what}")


def _text(item: Any) -> str:
    return _shown(item) if isinstance(item, list) else repr(item)


def _kernel(record: dict[str, Any], nodes: dict[str, Any]) -> Any:
    return record.get("kernel")


def _fuses_part(part: str) -> Callable[[dict[str, Any], dict[str, Any]], Any]:
    return lambda record, nodes: _part(record.get("fuses"), nodes, part)


def _int8(kind: str) -> Callable[[str, dict[str, Any], dict[str, Any]], bool]:
    return lambda target, record, nodes: (
        record["kernel"] == "int8" and (target == LINEAR if kind == "linear" else target != LINEAR)
    )


@check(
    "predict_kernels",
    1,
    "conv（有 / 沒有 bias、depthwise、groups、Conv1d）：per-channel weight 與靜態量化的輸入 → int8 kernel",
)
def test_int8_conv(seen, expected):
    compare(seen, expected, _int8("conv"), _kernel, "的 kernel")


@check("predict_kernels", 1, "linear（3-D 輸入、沒有 bias、dynamic 量化的輸入）→ int8 kernel")
def test_int8_linear(seen, expected):
    compare(seen, expected, _int8("linear"), _kernel, "的 kernel")


@check(
    "predict_kernels",
    1,
    "量化了卻沒有 int8 kernel（'dequantize'）：dynamic 的 conv、per-tensor 的 weight，weight 每次呼叫才反量化",
)
def test_dequantize(seen, expected):
    compare(seen, expected, lambda t, r, n: r["kernel"] == "dequantize", _kernel, "的 kernel")


@check(
    "predict_kernels",
    1,
    "沒有量化的層（用名字或型別跳過的、ConvTranspose2d、單獨的 Conv1d）是 'fp32'，而且什麼都不吃（後面的 relu 留著）",
)
def test_fp32(seen, expected):
    fp32 = lambda t, r, n: r["kernel"] == "fp32"  # noqa: E731
    compare(seen, expected, fp32, _kernel, "的 kernel")
    compare(seen, expected, fp32, lambda r, n: r.get("fuses"), "吃掉的 node（fp32 的 kernel 不融合）")


@check("predict_kernels", 1, "int8 kernel 吃掉的 relu：relu 是唯一的 consumer 才吃（torch.relu 與 nn.ReLU 都一樣）")
def test_fuses_relu(seen, expected):
    compare(
        seen,
        expected,
        lambda t, r, n: r["kernel"] == "int8",
        _fuses_part("relu"),
        "吃掉的 relu",
        same_kernel=True,
    )


@check(
    "predict_kernels",
    1,
    "conv 吃掉的 add：add 是唯一的 consumer、另一個運算元是同樣 shape 的 dequantize（寫在前面或後面都一樣）",
)
def test_fuses_add_conv(seen, expected):
    compare(seen, expected, _int8("conv"), _fuses_part("add"), "吃掉的 add", same_kernel=True)


@check(
    "predict_kernels",
    1,
    "linear 吃掉的 add：add 是唯一的 consumer，另一個運算元是同樣 shape 的 tensor（dequantize 也可以）",
)
def test_fuses_add_linear(seen, expected):
    compare(seen, expected, _int8("linear"), _fuses_part("add"), "吃掉的 add", same_kernel=True)


@check(
    "predict_kernels",
    1,
    "輸出是 uint8：最後吃掉的 node 唯一的 consumer 是 quantize_per_tensor.default 才把它吃掉（relu 被讀兩次、模型的輸出、dynamic 都不吃）",
)
def test_fuses_quantize(seen, expected):
    compare(
        seen,
        expected,
        lambda t, r, n: r["kernel"] == "int8",
        _fuses_part("quantize"),
        "吃掉的 quantize",
        same_kernel=True,
    )


@check(
    "predict_kernels",
    1,
    "fuses 依圖的順序列出 add、relu、quantize，沒有別的 node（不列 kernel 自己、輸入、dequantize）",
)
def test_fuses_exactly(seen, expected):
    # judged where the student already has the key's kernel and the key's add / relu / quantize (which kernel,
    # and which of those it eats, are the other checks' ideas): the list itself, its order and nothing else in it
    judged = 0
    for where, name, record, mine, nodes in _rows(seen, expected):
        if not _kernel_agrees(mine, record) or any(
            sorted(_part(mine.get("fuses"), nodes, part)) != sorted(_part(record.get("fuses"), nodes, part))
            for part in PARTS
        ):
            continue
        judged += bool(record.get("fuses"))
        if mine.get("fuses") != record.get("fuses"):
            raise Fail(
                f"{where}：{name}（{_what(nodes, name)}）吃掉的 node 應該是 {_text(record.get('fuses'))}，"
                f"你的是 {_text(mine.get('fuses'))}：只列 add、relu、quantize，依圖的順序"
            )
    if not judged:
        raise Fail(
            "會吃掉 node 的 int8 kernel，你的表沒有一個 kernel 與吃掉的 add、relu、quantize 都判對，無從比較順序"
        )


@check("predict_kernels", 1, "表裡只有 conv / linear 的 node（key 是 node 名稱），傳進來的圖原封不動")
def test_only_layers(seen, expected):
    for case, where in CASES.items():
        got = _case(seen, case)
        want = _case(expected, case)
        nodes = want.get("nodes", {})
        extra = [name for name in got["table"] if name not in want["table"]]
        if extra:
            described = "、".join(f"{name}（{_what(nodes, name)}）" for name in extra[:4])
            raise Fail(
                f"{where}：表裡多了 {described}；表裡只放 conv / linear 的 node"
                "（target 是 aten.conv1d、conv2d、conv_transpose2d 或 linear）"
            )
        if got.get("unchanged") is not True:
            raise Fail(f"{where}：predict_kernels 改動了傳進來的圖；它只該讀圖，不該加、刪或改 node")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m08_2.py) --------

FUSES = ("test_fuses_relu", "test_fuses_add_conv", "test_fuses_add_linear", "test_fuses_quantize", "test_fuses_exactly")
OTHER_LAYERS = ("aten.conv1d.default", "aten.conv_transpose2d.input")
"""The layers besides conv2d and linear that the hidden cases have (``skipped``: Conv1d, ConvTranspose2d)."""


def _fused(seen: Any, expected: Any, layer: str, test: Callable[[list[str], list[str]], bool]) -> bool:
    """``test(extra kinds, missing kinds)`` on some ``layer`` (conv / linear) both call an int8 kernel."""
    return any(
        kind(node, want) == layer and test(extra_fuses(mine, key, want), missing_fuses(mine, key, want))
        for _, node, mine, key, want in int8_rows(seen, expected)
    )


@detects("predict_kernels", "changes_graph")
def detect_changes_graph(seen: Any, expected: Any) -> bool:
    # an edited graph is rebuilt to record it; a converted X86 graph's labels cannot be, and the case says so
    return changes_graph(seen, expected) or raised(seen, ("EvidenceError",), says="QuantizationAnnotation")


@detects("predict_kernels", "found_by_name", explains=("test_only_layers",))
def detect_found_by_name(seen: Any, expected: Any) -> bool:
    return constants_listed(seen, expected)


@detects("predict_kernels", "table_lists_other_nodes", explains=("test_only_layers",))
def detect_other_nodes(seen: Any, expected: Any) -> bool:
    return extra_keys(seen, expected, ("add", "relu", "quantize", "dequantize", "other"))


@detects("predict_kernels", "misses_layer_kinds")
def detect_misses_layer_kinds(seen: Any, expected: Any) -> bool:
    return any(
        name not in got["table"] and str(want.get("nodes", {}).get(name)) in OTHER_LAYERS
        for _, got, want in tables(seen, expected)
        for name in want["table"]
    )


@detects("predict_kernels", "fuses_lists_inputs", explains=("test_fuses_exactly", "test_fp32"))
def detect_fuses_lists_inputs(seen: Any, expected: Any) -> bool:
    return lists_inputs(seen, expected)


@detects("predict_kernels", "input_decides_kernel", explains=("test_fp32", "test_dequantize"))
def detect_input_decides(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "fp32", "int8"))


@detects("predict_kernels", "dequantized_weight_means_int8", explains=("test_dequantize",))
def detect_dequantized_weight(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "dequantize", "int8", ("per_tensor",)))


@detects("predict_kernels", "dynamic_conv_as_linear", explains=("test_dequantize",))
def detect_dynamic_conv(seen: Any, expected: Any) -> bool:
    return ("dynamic", "conv") in kernel_changes(seen, expected, "dequantize", "int8", ("dynamic",))


@detects("predict_kernels", "per_channel_only_weight", explains=("test_dequantize",))
def detect_per_channel_only(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "dequantize", "fp32"))


@detects("predict_kernels", "dynamic_never_int8", explains=("test_int8_linear",))
def detect_dynamic_never_int8(seen: Any, expected: Any) -> bool:
    return any(
        layer == "linear"
        for got in ("dequantize", "fp32")
        for _, layer in kernel_changes(seen, expected, "int8", got, ("dynamic",))
    )


@detects("predict_kernels", "non_int8_fuses", explains=("test_fp32",))
def detect_non_int8_fuses(seen: Any, expected: Any) -> bool:
    return fuses_without_int8(seen, expected)


@detects("predict_kernels", "conv_add_any_operand", explains=FUSES)
def detect_conv_add(seen: Any, expected: Any) -> bool:
    return _fused(seen, expected, "conv", lambda extra, missing: "add" in extra)


@detects("predict_kernels", "linear_add_any_shape", explains=FUSES)
def detect_linear_add_any_shape(seen: Any, expected: Any) -> bool:
    """A linear takes an add the key's does not (a broadcast operand), while no conv takes an extra add."""
    return _fused(seen, expected, "linear", lambda extra, missing: "add" in extra) and not _fused(
        seen, expected, "conv", lambda extra, missing: "add" in extra
    )


@detects("predict_kernels", "any_consumer_fuses", explains=FUSES)
def detect_any_consumer(seen: Any, expected: Any) -> bool:
    return any(
        _fused(seen, expected, layer, lambda extra, missing: "relu" in extra and "add" not in extra)
        for layer in ("conv", "linear")
    )


@detects("predict_kernels", "always_uint8_output", explains=("test_fuses_quantize", "test_fuses_exactly"))
def detect_always_uint8(seen: Any, expected: Any) -> bool:
    def only_quantize(extra: list[str], missing: list[str]) -> bool:
        return bool(extra) and set(extra) == {"quantize"}

    def other(extra: list[str], missing: list[str]) -> bool:
        return bool(set(extra) - {"quantize"})

    layers = ("conv", "linear")
    return any(_fused(seen, expected, layer, only_quantize) for layer in layers) and not any(
        _fused(seen, expected, layer, other) for layer in layers
    )


@detects("predict_kernels", "kernel_first_operand", explains=FUSES)
def detect_first_operand(seen: Any, expected: Any) -> bool:
    return _fused(seen, expected, "conv", lambda extra, missing: "add" in missing)


@detects("predict_kernels", "linear_add_rule", explains=FUSES)
def detect_linear_add_rule(seen: Any, expected: Any) -> bool:
    return _fused(seen, expected, "linear", lambda extra, missing: "add" in missing) and not _fused(
        seen, expected, "conv", lambda extra, missing: "add" in missing
    )
