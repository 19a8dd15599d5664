"""Hidden checks of M08-3 總結專題: BackendQuantizer, lowered to XNNPACK and run in the ExecuTorch runtime.

The labels are read right after the student's ``annotate`` with sharing resolved into groups
(``probes.label_groups``), so two Quantizers that share the same positions compare equal however
they wrote it; a derived spec is compared by what matters (int32, its range, per channel or not,
the set of edges it derives from), a fixed spec by its numbers. Each check looks at the labels
of one kind of op, then at what prepare / convert / the runtime made of them.

Assumptions a half-understanding can bake in, and the hidden input that refutes each:

- "an op is found by its name": the input of ``crowded`` is called ``cat``;
- "every conv-like op is a conv2d": a ConvTranspose2d (``crowded``);
- "a conv's only consumer is the relu after it": the conv of ``crowded`` is read by a relu and an
  add (no fusion), and a relu alone is not labelled;
- "a relu after a conv can always be fused": the stem's relu of ``claimed`` is claimed by another
  Quantizer: the conv labels its own output and leaves the relu alone;
- "a label on a node means it is taken": ``add_1`` of ``claimed`` carries a label with
  ``_annotated`` False and must be labelled by the rules;
- "claimed nodes can be relabelled" / "``_annotated`` needs not be set": the claimed add and cat
  of ``claimed``, and ``_annotated`` on every node the student labels;
- "a bias is always there" / "a bias is args[2] as a Node": linears without bias, a BN folded into
  a conv without bias (``crowded``, ``lowered``);
- "every input of add / cat is an activation": a buffer and a Python scalar added, a cat reading
  the same node twice (``crowded``);
- "the same spec object means one observer" / "equal specs are shared": sharing is checked on the
  observer instances after prepare (``lowered``, ``crowded``);
- "bias scale is the activation's": per-channel weight scales make each channel's bias scale
  differ (``lowered``, ``crowded``: convert's int32 bias against s_x · s_w[c]);
- "sigmoid needs only an observer": the quantize after it must be 1/256, −128 (``lowered``);
- "labels that prepare accepts also lower": the program is lowered, saved as a ``.pte`` and run
  (``lowered``), against ExecuTorch's own XNNPACKQuantizer (``reference``).
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import (
    Fail,
    chain_text,
    check,
    derived_edges,
    expect,
    instance_text,
    path_text,
    spec_text,
    value,
)

WHERE = {
    "lowered": "隱藏的 backbone（conv → relu、add、sigmoid、cat、max_pool2d、flatten、linear → relu、linear）",
    "crowded": "滿是陷阱的模型（輸入叫 cat、讀兩次的 conv、常數與純量、重複的 cat 輸入、ConvTranspose2d、折進 BN 的 conv）",
    "claimed": "add、cat 與 stem 的 relu 已被別人認領、另一個 add 有沒認領的標籤的模型",
}

RUNTIME_MATCH_DB = 40.0
"""The runtime's output against the converted PyTorch model (the key's is identical: 200 dB in the evidence)."""

SQNR_MARGIN_DB = 3.0
"""How far below ExecuTorch's own XNNPACKQuantizer the SQNR against fp32 may be."""

SHARING_OPS = ("add", "cat", "max_pool2d", "flatten")


# --- specs ----------------------------------------------------------------------------------------


def _name(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) and key in value else value


def spec_key(spec: Any) -> Any:
    """What must match in a spec (see the module docstring)."""
    if not isinstance(spec, dict):
        return spec
    kind = spec.get("kind")
    scheme = str(_name(spec.get("qscheme"), "qscheme"))
    per_channel = "channel" in scheme
    if kind == "spec":
        return {**spec, "ch_axis": spec.get("ch_axis") if per_channel else None}
    if kind == "derived":
        return {
            "kind": kind,
            "dtype": spec.get("dtype"),
            "range": [spec.get("qmin"), spec.get("qmax")],
            "per_channel": per_channel,
            "ch_axis": spec.get("ch_axis") if per_channel else None,
            "from": derived_edges(spec),
        }
    if kind == "fixed":
        scale = spec.get("scale")
        return {
            "kind": kind,
            "dtype": spec.get("dtype"),
            "range": [spec.get("qmin"), spec.get("qmax")],
            "scale": round(float(scale), 12) if isinstance(scale, int | float) else scale,
            "zero_point": spec.get("zero_point"),
        }
    return spec


# --- labels ---------------------------------------------------------------------------------------


def _case(seen: Any, expected: Any, case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    got, want = value(seen, case), value(expected, case)
    if not isinstance(got, dict) or not isinstance(got.get("labels"), dict):
        raise Fail(f"{WHERE[case]}：證據格式不對")
    return got, want


def _positions(evidence: dict[str, Any]) -> dict[str, dict[str, Any]]:
    positions = evidence["labels"].get("positions")
    if not isinstance(positions, dict):
        raise Fail("證據格式不對")
    return positions


def _group_text(positions: dict[str, Any], group: Any) -> str:
    members = sorted(p for p, e in positions.items() if e.get("group") == group)
    return "、".join(members) if len(members) > 1 else "誰都不（自己一組）"


def compare_positions(got: dict[str, Any], want: dict[str, Any], where: str, wanted: Any) -> None:
    """The labelled positions ``wanted(position, entry)`` selects: the same ones, same spec, same sharing groups."""
    got_positions, want_positions = _positions(got), _positions(want)
    for position in sorted(p for p, e in want_positions.items() if wanted(p, e)):
        entry = want_positions[position]
        seen = got_positions.get(position)
        if seen is None:
            raise Fail(f"{where}：{position} 應該有標籤（{spec_text(entry['spec'])}），看到沒有標籤")
        if spec_key(seen.get("spec")) != spec_key(entry["spec"]):
            raise Fail(f"{where}：{position} 的規格預期 {spec_text(entry['spec'])}，看到 {spec_text(seen.get('spec'))}")
        if seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{position} 預期和 {_group_text(want_positions, entry['group'])} 共用"
                f"（SharedQuantizationSpec），看到和 {_group_text(got_positions, seen.get('group'))} 共用"
            )
    for position in sorted(p for p, e in got_positions.items() if wanted(p, e) and p not in want_positions):
        raise Fail(f"{where}：{position} 不該有標籤，看到 {spec_text(got_positions[position].get('spec'))}")


def _node_of(position: str) -> str:
    return position.split(" → ")[1] if " → " in position else position.removesuffix(" 的輸出")


def _source_of(position: str) -> str | None:
    return position.split(" → ")[0] if " → " in position else None


def _ops(want: dict[str, Any]) -> dict[str, str]:
    ops = want.get("ops")
    return ops if isinstance(ops, dict) else {}


def _bias_sources(want: dict[str, Any]) -> set[tuple[str, str]]:
    return {(b, node) for node, (_, _, b) in (want.get("weighted") or {}).items() if b is not None}


def _fused(want: dict[str, Any]) -> set[str]:
    """Weighted ops of the key without an output label (their relu carries it)."""
    positions = _positions(want)
    return {node for node in want.get("weighted") or {} if f"{node} 的輸出" not in positions}


def _kind_of(node: str, want: dict[str, Any]) -> str:
    """Which check judges labels on ``node``: its op, or ``other`` for a node not of the backend."""
    return _ops(want).get(node, "other")


def _layout(prepared: dict[str, Any], node: str) -> tuple[list[tuple[str, list[int]]], list[Any]]:
    """The observer chains on ``node``'s input edges and on the edges leaving it, instances renumbered
    by first appearance (input edges by source, then output edges by consumer), and their records."""
    edges = prepared["edges"]
    chains = sorted((f"{source} → {node}", chain) for source, chain in edges.get(node, []))
    chains += sorted(
        (f"{node} → {consumer}", chain)
        for consumer, inputs in edges.items()
        for source, chain in inputs
        if source == node
    )
    numbers: dict[int, int] = {}
    records: list[Any] = []
    out = []
    for text, chain in chains:
        renumbered = []
        for instance in chain:
            if instance not in numbers:
                numbers[instance] = len(numbers)
                records.append(prepared["instances"][instance])
            renumbered.append(numbers[instance])
        out.append((text, renumbered))
    return out, records


def compare_layout(got: dict[str, Any], want: dict[str, Any], where: str, node: str) -> None:
    """Around ``node``: the same observer instances on the same edges, of the same kind."""
    try:
        got_chains, got_records = _layout(got, node)
        want_chains, want_records = _layout(want, node)
    except (KeyError, TypeError, IndexError):
        raise Fail(f"{where}：證據格式不對") from None
    mine = dict(got_chains)
    for text, chain in want_chains:
        seen = mine.get(text)
        if seen != chain:
            shown = chain_text(seen) if seen is not None else "這條邊不見了"
            raise Fail(
                f"{where}：{node} 周圍預期只有一個 observer 實例，邊 {text} 預期 {chain_text(chain)}，看到 {shown}"
                f"（{node} 周圍預期 {len(want_records)} 個實例，看到 {len(got_records)} 個）"
            )
    for index, record in enumerate(want_records):
        if index < len(got_records) and instance_text(got_records[index]) != instance_text(record):
            raise Fail(
                f"{where}：{node} 周圍的 observer 實例 #{index} 預期 {instance_text(record)}，"
                f"看到 {instance_text(got_records[index])}"
            )


def _fusion_positions(want: dict[str, Any], fused: set[str]) -> Any:
    """Every label on a relu, and the output of the conv2d / linear ops the key fused."""

    def wanted(position: str, entry: dict[str, Any]) -> bool:
        node = _node_of(position)
        return _kind_of(node, want) == "relu" or (node in fused and _source_of(position) is None)

    return wanted


# --- runtime --------------------------------------------------------------------------------------

STAGES = {
    "lower": "to_edge_transform_and_lower（lower 到 XNNPACK）",
    "pte": "to_executorch（存成 .pte）",
    "load": "ExecuTorch runtime 載入 .pte",
    "run": "ExecuTorch runtime 執行",
}


def _runtime(seen: Any, case: str = "lowered") -> dict[str, Any]:
    got = value(seen, case)
    runtime = got.get("runtime") if isinstance(got, dict) else None
    if not isinstance(runtime, dict) or "stage" not in runtime:
        raise Fail(f"{WHERE[case]}：證據格式不對")
    return runtime


def _failed_stage(runtime: dict[str, Any]) -> str:
    return f"在「{STAGES.get(runtime.get('stage'), runtime.get('stage'))}」這一步失敗：{runtime.get('error')}"


def _ops_text(ops: dict[str, int]) -> str:
    return "、".join(f"{k} × {v}" for k, v in sorted(ops.items())) if ops else "沒有"


# --- checks ---------------------------------------------------------------------------------------


@check(
    "backend_quantizer",
    3,
    "conv2d 與 linear：activation 是 act_spec()（int8 affine、MinMaxObserver），weight 是 per-channel symmetric int8"
    "（PerChannelMinMaxObserver、ch_axis=0），沒融合時輸出也標；規格書以外的 op（ConvTranspose2d、名字像 op 的輸入）不標",
)
def test_weights(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        compare_positions(got, want, WHERE[case], _weight_positions(want))


def _weight_positions(want: dict[str, Any]) -> Any:
    """conv2d / linear: the activation and weight edges, the output unless fused; and any label on other ops."""
    bias, fused = _bias_sources(want), _fused(want)

    def wanted(position: str, entry: dict[str, Any]) -> bool:
        node, source = _node_of(position), _source_of(position)
        kind = _kind_of(node, want)
        if kind == "other":
            return True
        if kind not in ("conv2d", "linear") or (source, node) in bias:
            return False
        return source is not None or node not in fused

    return wanted


@check(
    "backend_quantizer",
    3,
    "bias：int32 的 DerivedQuantizationSpec（[-2³¹, 2³¹ − 1]、per channel、derived_from activation 與 weight 兩條邊）；"
    "convert 之後 bias 是 int32 常數，scale = s_x · s_w[c]（rtol 1e-6）、zero point 0",
)
def test_bias(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        bias = _bias_sources(want)
        compare_positions(got, want, WHERE[case], lambda p, e, bias=bias: (_source_of(p), _node_of(p)) in bias)
        got_biases, want_biases = got.get("biases") or {}, want.get("biases") or {}
        for node, record in want_biases.items():
            mine = got_biases.get(node)
            where = f"{WHERE[case]}（convert 之後）：{node} 的 bias"
            if not isinstance(mine, dict) or not mine.get("dequantized"):
                raise Fail(f"{where}預期是 int32 常數 → dequantize，看到沒有 dequantize（bias 留在 fp32）")
            expect(
                mine.get("stored_dtype") == record["stored_dtype"],
                f"{where}預期存成 {record['stored_dtype']}，看到 {mine.get('stored_dtype')}",
            )
            expect(
                mine.get("scales") == record["scales"],
                f"{where}預期每個 output channel 一個 scale（{record['scales']} 個），看到 {mine.get('scales')} 個",
            )
            expect(
                bool(mine.get("scale_is_product")),
                f"{where}的 scale 預期等於 activation 的 scale × weight 的 scale（每個 channel），看到不相等",
            )
            expect(bool(mine.get("zero_points_zero")), f"{where}是 symmetric，zero point 應該都是 0，看到不是")


@check(
    "backend_quantizer",
    3,
    "add、cat、max_pool2d、flatten：activation 輸入與輸出用 SharedQuantizationSpec 共用一個 observer 實例"
    "（常數與純量不標、重複的輸入只標一次）",
)
def test_sharing(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        compare_positions(got, want, WHERE[case], lambda p, e, want=want: _kind_of(_node_of(p), want) in SHARING_OPS)
        for node in [n for n, op in _ops(want).items() if op in SHARING_OPS]:
            compare_layout(got["prepared"], want["prepared"], f"{WHERE[case]}（prepare 之後）", node)


@check(
    "backend_quantizer",
    2,
    "sigmoid：輸入是 act_spec()，輸出是 FixedQParamsQuantizationSpec（int8 [-128, 127]、scale 1/256、zero point −128）；"
    "convert 之後 sigmoid 後面的 quantize 就是這組參數",
)
def test_sigmoid(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        compare_positions(got, want, WHERE[case], lambda p, e, want=want: _kind_of(_node_of(p), want) == "sigmoid")
        got_q, want_q = got.get("sigmoids") or {}, want.get("sigmoids") or {}
        for node, params in want_q.items():
            mine = got_q.get(node)
            if mine != params:
                raise Fail(
                    f"{WHERE[case]}（convert 之後）：{node} 後面的 quantize 預期 [scale, zero point, qmin, qmax, dtype] = "
                    f"{params}，看到 {mine}"
                )


@check(
    "backend_quantizer",
    2,
    "融合：conv2d / linear 唯一的 user 是 relu 時，中間不貼標籤（conv 的輸出與 relu 的輸入都沒有），relu 的輸出標 act_spec()；"
    "conv 被讀兩次時不融合，單獨的 relu 不標",
)
def test_fusion(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        fused = _fused(want)
        compare_positions(got, want, WHERE[case], _fusion_positions(want, fused))
        got_paths = dict(
            (consumer, dict((src, steps) for src, steps in inputs))
            for consumer, inputs in (got.get("converted") or {}).get("paths", {}).items()
        )
        for consumer, inputs in want["converted"]["paths"].items():
            for source, steps in inputs:
                if source in fused and _kind_of(consumer, want) == "relu" and not steps:
                    mine = got_paths.get(consumer, {}).get(source)
                    if mine:
                        raise Fail(
                            f"{WHERE[case]}（convert 之後）：{source} → {consumer} 是融合的 pattern，中間不該有 q/dq，"
                            f"看到 {path_text(mine)}"
                        )


CLAIMED = ("add", "cat", "relu", "conv2d")
"""The nodes of the ``claimed`` model an earlier Quantizer claimed (``conv2d``: the stem conv, whose only
consumer ``relu`` is claimed, so it labels its own output); ``add_1`` carries a label nobody claimed."""


@check(
    "backend_quantizer",
    2,
    "尊重 _annotated：別人認領的 add / cat / relu 不動（relu 被認領時 conv 不融合、自己量化輸出），"
    "有標籤但沒認領的 add 照規則重貼，自己標過的 node 都設 _annotated = True",
)
def test_claimed(seen, expected):
    got, want = _case(seen, expected, "claimed")
    where = WHERE["claimed"]
    compare_positions(got, want, where, lambda p, e: _node_of(p) in CLAIMED)
    table_spec = {"qmin": -30, "qmax": 30}
    for position, entry in sorted(_positions(got).items()):
        spec = entry.get("spec")
        if _node_of(position) == "add_1" and isinstance(spec, dict) and spec.get("qmin") == table_spec["qmin"]:
            raise Fail(
                f"{where}：add_1 的標籤沒有被認領（_annotated=False），應該照規則重貼，看到 {position} 還是 {spec_text(spec)}"
            )
    if not any(_node_of(p) == "add_1" for p in _positions(got)):
        raise Fail(f"{where}：add_1 的標籤沒有被認領（_annotated=False），應該照規則重貼，看到它沒有標籤")
    got_marks, want_marks = got["labels"].get("annotated", {}), want["labels"].get("annotated", {})
    for node in sorted(set(got_marks) | set(want_marks)):
        expect(
            bool(got_marks.get(node)) == bool(want_marks.get(node)),
            f"{where}：{node} 的 _annotated 預期 {bool(want_marks.get(node))}，看到 {bool(got_marks.get(node))}",
        )


@check(
    "backend_quantizer",
    2,
    f"lower 到 XNNPACK、存成 .pte、在 ExecuTorch runtime 載入並執行；runtime 的輸出與 convert 後的 PyTorch 模型一致"
    f"（SQNR ≥ {RUNTIME_MATCH_DB:g} dB）",
)
def test_runtime(seen, expected):
    runtime = _runtime(seen)
    where = WHERE["lowered"]
    if runtime["stage"] != "done":
        raise Fail(f"{where}：{_failed_stage(runtime)}")
    match = runtime.get("sqnr_converted")
    if not isinstance(match, int | float) or match < RUNTIME_MATCH_DB:
        raise Fail(
            f"{where}：runtime 的輸出與 convert 後的 PyTorch 模型相比，SQNR 預期至少 {RUNTIME_MATCH_DB:g} dB，看到 {match}"
        )


@check(
    "backend_quantizer",
    2,
    "delegation：留在 portable runtime（沒交給 XNNPACK）的 op 不比 ExecuTorch 自己的 XNNPACKQuantizer 多",
)
def test_coverage(seen, expected):
    runtime, reference = _runtime(seen), value(expected, "reference")
    where = WHERE["lowered"]
    if runtime["stage"] == "lower":
        raise Fail(f"{where}：{_failed_stage(runtime)}")
    mine, theirs = runtime.get("portable_ops") or {}, reference.get("portable_ops") or {}
    if sum(mine.values()) > sum(theirs.values()):
        raise Fail(
            f"{where}：留在 portable runtime 的 op 預期最多和 ExecuTorch 的 XNNPACKQuantizer 一樣（{_ops_text(theirs)}），"
            f"看到 {_ops_text(mine)}"
        )


@check(
    "backend_quantizer",
    1,
    f"精度：runtime 輸出對 fp32 的 SQNR 不低於 ExecuTorch 的 XNNPACKQuantizer {SQNR_MARGIN_DB:g} dB 以上",
)
def test_sqnr(seen, expected):
    runtime, reference = _runtime(seen), value(expected, "reference")
    where = WHERE["lowered"]
    if runtime["stage"] != "done":
        raise Fail(f"{where}：沒有 runtime 的輸出可以比較，{_failed_stage(runtime)}")
    mine, theirs = runtime.get("sqnr_fp32"), reference.get("sqnr_fp32")
    if not isinstance(mine, int | float) or not isinstance(theirs, int | float) or math.isnan(mine):
        raise Fail(f"{where}：證據格式不對")
    if mine < theirs - SQNR_MARGIN_DB:
        raise Fail(
            f"{where}：對 fp32 的 SQNR 預期至少 {theirs - SQNR_MARGIN_DB:.2f} dB（ExecuTorch 的 XNNPACKQuantizer "
            f"{theirs:.2f} dB − {SQNR_MARGIN_DB:g}），看到 {mine:.2f} dB"
        )
