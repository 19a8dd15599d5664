"""Hidden checks of M08-2: predict_kernels, what ``lower_x86`` will make of each conv / linear of a q/dq graph.

Assumptions a half-understanding can bake in, and the hidden input that refutes each:

- "a conv / linear whose input is dequantized becomes an int8 kernel": a conv left out by name
  reads a dequantized (max-pooled) activation with an fp32 weight (``skipped``);
- "a dequantized weight means an int8 kernel": a conv under the dynamic config (``dynamic``)
  and per-tensor int8 weights (``per_tensor``) dequantize their weight on every call;
- "only ``dequantize_per_channel`` is a weight": the per-tensor weights are int8 constants too,
  read through ``dequantize_per_tensor`` (``per_tensor``: ``dequantize``, not ``fp32``);
- "a dynamic activation is never an int8 kernel" / "conv and linear alike": dynamic linears are
  int8 kernels, the dynamic conv is not (``dynamic``);
- "every conv → relu fuses" / "an fp32 kernel fuses its relu as torch.compile would": the skipped
  conv and the skipped linear (then an ``nn.ReLU``) are followed by a relu that
  ``lower_x86`` leaves alone (``skipped``);
- "a relu or an add among the consumers is taken in": a conv read by a relu and by an add takes
  nothing (``convs``); a relu read twice is taken in, the quantize after it is not (``linears``);
- "any add after the kernel is taken in": an add of a (C, 1, 1) buffer broadcasts (``convs``);
- "the kernel is the add's first operand": ``a + conv(…)`` and ``f + linear(f)`` (``convs``,
  ``linears``); of conv3(w) + conv4(w), the conv whose output reaches the add unquantized;
- "a linear takes an add only of an fp32 value": f + linear(f) adds a dequantized value and is
  taken in (``linears``);
- "the output is uint8 whenever the kernel is int8": the last conv / linear of a model, a relu
  read twice, dynamic activations (``convs``, ``linears``, ``dynamic``);
- "a node is found by its name": the model input of ``skipped`` is called ``add``;
- the table lists other nodes (q/dq, relu, the weight's dequantize) or changes the graph it reads
  (every case: the graph must come back as it was handed over).

Every check reads the tables of all hidden cases and looks at the nodes of one kind (picked from
the answer key's table and what each node is); the last one says the table has nothing else in
it and that the graph came back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autograder.checks.support import Fail, check, expect, value

CASES = {
    "convs": "conv 模型（depthwise、groups=2、殘差 add → relu、被讀兩次的 conv、conv + conv、broadcast 的 add）",
    "linears": "linear 模型（3-D 輸入、f + linear(f)、被讀兩次的 relu、linear + h → relu）",
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


def compare(
    seen: Any,
    expected: Any,
    pick: Callable[[str, dict[str, Any], dict[str, Any]], bool],
    field: Callable[[dict[str, Any], dict[str, Any]], Any],
    what: str,
) -> None:
    """For every node the key's table has and ``pick(target, record, nodes)`` selects: the same ``field``."""
    found = 0
    for case, where in CASES.items():
        got_table = _case(seen, case)["table"]
        want = _case(expected, case)
        nodes = want.get("nodes", {})
        for name, record in want["table"].items():
            if not pick(str(nodes.get(name)), record, nodes):
                continue
            found += 1
            mine = got_table.get(name, _MISSING)
            if mine is _MISSING:
                raise Fail(f"{where}：表裡少了 {name}（{_what(nodes, name)}），{what}")
            if field(mine, nodes) != field(record, nodes):
                raise Fail(
                    f"{where}：{name}（{_what(nodes, name)}）{what}：預期 {_text(field(record, nodes))}，"
                    f"看到 {_text(field(mine, nodes))}"
                )
    expect(found > 0, "證據格式不對")


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
    )


@check(
    "predict_kernels",
    1,
    "conv 吃掉的 add：add 是唯一的 consumer、另一個運算元是同樣 shape 的 dequantize（寫在前面或後面都一樣）",
)
def test_fuses_add_conv(seen, expected):
    compare(seen, expected, _int8("conv"), _fuses_part("add"), "吃掉的 add")


@check(
    "predict_kernels",
    1,
    "linear 吃掉的 add：add 是唯一的 consumer，另一個運算元是同樣 shape 的 tensor（dequantize 也可以）",
)
def test_fuses_add_linear(seen, expected):
    compare(seen, expected, _int8("linear"), _fuses_part("add"), "吃掉的 add")


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
    )


@check(
    "predict_kernels",
    1,
    "fuses 依圖的順序列出 add、relu、quantize，沒有別的 node（不列 kernel 自己、輸入、dequantize）",
)
def test_fuses_exactly(seen, expected):
    compare(seen, expected, lambda t, r, n: True, lambda r, n: r.get("fuses"), "吃掉的 node")


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
                f"{where}：表裡多了 {described}；只放 conv / linear 的 node（aten.conv1d / conv2d / conv_transpose2d / linear）"
            )
        if got.get("unchanged") is not True:
            raise Fail(f"{where}：predict_kernels 改動了傳進來的圖；它只該讀圖，不該加、刪或改 node")
