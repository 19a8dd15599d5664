"""Hidden checks of M08-2: the conv / linear kernels of lowered x86 graphs, int8 or fp32, and why.

Every check reads the tables of all hidden cases and looks at the kernels of one kind (picked
from the answer key's table and the target of each node): its record must be the key's on the
fields that check is about. The last check says the table has nothing else in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autograder.checks.support import Fail, check, expect, value

NOTEBOOK = "M08-2"

CASES = {
    "convs": "conv 模型（有 / 沒有 bias、depthwise、groups=2、conv + x → relu、conv + conv）",
    "linears": "linear 模型（3-D 輸入的 linear，再接 2-D 的 linear → relu、linear + h → relu）",
    "dynamic": "dynamic 設定量化的模型（conv → relu → linear → relu → linear）",
    "skipped": "用 set_module_name_qconfig 跳過一個 conv、用 set_module_type_qconfig 跳過 linear，有 Conv1d 與 ConvTranspose2d 的模型",
}

FIELDS = ("layer", "int8", "fused", "reason")
BINARY = ("binary", "binary_tensor")


def _tables(evidence: Any, case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("table"), dict), "證據格式不對")
    return result["table"], result.get("nodes", {})


def _what(nodes: dict[str, Any], name: str) -> str:
    kind = nodes.get(name)
    if not isinstance(kind, list) or len(kind) != 2:
        return "圖上沒有這個 node"
    packet, overload = kind
    return f"{packet}.{overload}" if overload else str(packet)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return (
            isinstance(got, list) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


def _text(item: Any) -> str:
    return "沒有這個 key" if item is _MISSING else repr(item)


_MISSING = object()


def compare_kernels(
    seen: Any, expected: Any, pick: Callable[[str, str, dict[str, Any]], bool], fields: tuple[str, ...], what: str
) -> None:
    """For every kernel the key's table has and ``pick(packet, overload, record)`` selects: the same ``fields``."""
    found = 0
    for case, where in CASES.items():
        got_table, _ = _tables(seen, case)
        want_table, nodes = _tables(expected, case)
        for name, want in want_table.items():
            packet, overload = nodes[name]
            if not pick(packet, overload, want):
                continue
            found += 1
            target = _what(nodes, name)
            if name not in got_table:
                raise Fail(f"{where}：表裡少了 {name}（{target}，{what}）")
            got = got_table[name]
            for field in fields:
                mine = got.get(field, _MISSING)
                if not _same(mine, want[field]):
                    raise Fail(f"{where}：{name}（{target}）的 {field!r} 預期 {want[field]!r}，看到 {_text(mine)}")
    expect(found > 0, "證據格式不對")


def _int8(packet: str, overload: str, record: dict[str, Any]) -> bool:
    return record["int8"] is True


def _fp32(packet: str, overload: str, record: dict[str, Any]) -> bool:
    return record["int8"] is False


@check(
    "classify_kernels",
    1,
    "onednn.qconv_pointwise：conv（有 / 沒有 bias、depthwise、groups、Conv1d + ReLU）是 int8 kernel",
)
def test_int8_conv(seen, expected):
    compare_kernels(
        seen, expected, lambda p, o, r: p == "onednn.qconv_pointwise", ("layer", "int8"), "conv 的 int8 kernel"
    )


@check("classify_kernels", 1, "onednn.qlinear_pointwise：linear 是 int8 kernel")
def test_int8_linear(seen, expected):
    compare_kernels(
        seen,
        expected,
        lambda p, o, r: p == "onednn.qlinear_pointwise" and o == "default",
        ("layer", "int8"),
        "linear 的 int8 kernel",
    )


@check(
    "classify_kernels",
    1,
    "conv + add（qconv2d_pointwise.binary）與 linear + add（qlinear_pointwise.binary）也是 int8 kernel",
)
def test_binary(seen, expected):
    compare_kernels(seen, expected, lambda p, o, r: o in BINARY, ("layer", "int8"), "把 add 一起算掉的 int8 kernel")


@check("classify_kernels", 1, "dynamic 量化的 linear（qlinear_pointwise.tensor）也是 int8 kernel")
def test_dynamic(seen, expected):
    compare_kernels(
        seen,
        expected,
        lambda p, o, r: o in ("tensor", "binary_tensor"),
        ("layer", "int8"),
        "scale 是執行時才算的 int8 kernel",
    )


@check("classify_kernels", 1, "融合進 kernel 的 relu：fused 是 ['relu'] 或 []")
def test_fused_unary(seen, expected):
    compare_kernels(seen, expected, lambda p, o, r: o not in BINARY, ("fused",), "fused 要從 kernel 的引數讀")


@check("classify_kernels", 1, "融合進 kernel 的 add 與 relu：fused 是 ['sum', 'relu']、['add', 'relu'] 或 ['sum']")
def test_fused_binary(seen, expected):
    compare_kernels(
        seen, expected, lambda p, o, r: o in BINARY, ("fused",), "fused 要依序讀 binary 與 unary 的 post-op"
    )


@check("classify_kernels", 1, "留在 fp32 的 conv / linear 都在表裡（aten.convolution、mkldnn、mkl、addmm、mm）")
def test_fp32(seen, expected):
    compare_kernels(seen, expected, _fp32, ("layer", "int8"), "fp32 的 conv / linear")


@check("classify_kernels", 1, "量化了卻沒融合：weight 是 int8 常數、每次才反量化（reason 是 'not_fused'）")
def test_not_fused(seen, expected):
    compare_kernels(
        seen,
        expected,
        lambda p, o, r: r["reason"] == "not_fused",
        ("int8", "reason"),
        "weight 以 int8 存著、每次呼叫才反量化成 fp32",
    )


@check("classify_kernels", 1, "沒有量化的層（跳過的、Quantizer 不支援的）是 'not_quantized'，int8 kernel 是 None")
def test_not_quantized(seen, expected):
    compare_kernels(
        seen,
        expected,
        lambda p, o, r: r["reason"] != "not_fused",
        ("int8", "reason"),
        "weight 是 fp32，或是 int8 kernel",
    )


@check("classify_kernels", 1, "表裡只有 conv / linear 的 kernel：沒有 q/dq、relu、max_pool2d、reshape、常數")
def test_only_kernels(seen, expected):
    for case, where in CASES.items():
        got_table, _ = _tables(seen, case)
        want_table, nodes = _tables(expected, case)
        extra = [name for name in got_table if name not in want_table]
        if extra:
            described = "、".join(f"{name}（{_what(nodes, name)}）" for name in extra[:4])
            raise Fail(f"{where}：多了 {described}；表裡只放 conv / linear 的 kernel（int8 或 fp32）")
        for name, got in got_table.items():
            unknown = sorted(set(got) - set(FIELDS)) if isinstance(got, dict) else []
            if not isinstance(got, dict) or unknown:
                raise Fail(f"{where}：{name} 的值應該是有 {list(FIELDS)} 這幾個 key 的 dict，看到 {got!r}")
