"""Hidden checks of M08-3 總結專題: BackendQuantizer, lowered to XNNPACK and run in the ExecuTorch runtime.

The labels are read right after the student's ``annotate`` with sharing resolved into groups
(``probes.label_groups``), so two Quantizers that share the same positions compare equal however
they wrote it; a derived spec is compared by what matters (int32, its range, per channel or not,
the set of edges it derives from), a fixed spec by its numbers. Each check looks at the labels
of one kind of op, then at what prepare / convert / the runtime made of them.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m08_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import (
    Fail,
    chain_text,
    check,
    derived_edges,
    detects,
    expect,
    instance_text,
    label_pairs,
    path_text,
    raised,
    spec_field,
    spec_text,
    value,
)
from selfcheck import diagnosis

WHERE = {
    "lowered": "隱藏的 backbone（conv → relu、add、sigmoid、cat、max_pool2d、flatten、linear → relu、linear）",
    "crowded": "滿是陷阱的模型（輸入叫 cat、讀兩次的 conv、寫在前面或後面的常數與純量、重複的 cat 輸入、z + z、"
    "ConvTranspose2d、折進 BN 的 conv）",
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


def _partners_text(positions: dict[str, Any], position: str, group: Any, seen: bool = False) -> str:
    """How ``position`` shares, as a phrase: 和 a、b 共用 / 自己用一個 observer."""
    partners = sorted(p for p, e in positions.items() if e.get("group") == group and p != position)
    if partners:
        return f"和 {'、'.join(partners)} 共用（SharedQuantizationSpec）"
    return "沒有和任何位置共用" if seen else "自己用一個 observer，不和別的位置共用"


def compare_positions(got: dict[str, Any], want: dict[str, Any], where: str, wanted: Any) -> None:
    """The labelled positions ``wanted(position, entry)`` selects: the same ones, same spec, same sharing groups."""
    got_positions, want_positions = _positions(got), _positions(want)
    for position in sorted(p for p, e in want_positions.items() if wanted(p, e)):
        entry = want_positions[position]
        seen = got_positions.get(position)
        if seen is None:
            raise Fail(f"{where}：{position} 應該有標籤（{spec_text(entry['spec'])}），你的沒有標籤")
        if spec_key(seen.get("spec")) != spec_key(entry["spec"]):
            raise Fail(
                f"{where}：{position} 的規格應該是 {spec_text(entry['spec'])}，你的是 {spec_text(seen.get('spec'))}"
            )
        if seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{position} 應該{_partners_text(want_positions, position, entry['group'])}，"
                f"你的{_partners_text(got_positions, position, seen.get('group'), seen=True)}"
            )
    for position in sorted(p for p, e in got_positions.items() if wanted(p, e) and p not in want_positions):
        raise Fail(f"{where}：{position} 不該有標籤，你的貼了 {spec_text(got_positions[position].get('spec'))}")


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
    """The observers ``node`` itself reads and writes: the last instance on each of its input edges and the
    first on each edge leaving it, renumbered by first appearance (input edges by source, then output edges by
    consumer), and their records.

    An observer earlier on an input edge is the producer's own output observer (a sigmoid's fixed qparams, say)
    and one later on an output edge the consumer's: their labels are other checks' to judge (issue 50: one
    mistake costs once)."""
    edges = prepared["edges"]
    chains = sorted((f"{source} → {node}", chain[-1:]) for source, chain in edges.get(node, []))
    chains += sorted(
        (f"{node} → {consumer}", chain[:1])
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
                f"{where}：{node} 周圍應該用 {len(want_records)} 個 observer 實例，你的用了 {len(got_records)} 個"
                f"（邊 {text} 應該{chain_text(chain)}，你的{shown}）"
            )
    for index, record in enumerate(want_records):
        if index < len(got_records) and instance_text(got_records[index]) != instance_text(record):
            raise Fail(
                f"{where}：{node} 周圍的 observer 實例 #{index} 應該是 {instance_text(record)}，"
                f"你的是 {instance_text(got_records[index])}"
            )


def _fusion_positions(want: dict[str, Any], fused: set[str]) -> Any:
    """Every label on a relu, and the output of every conv2d / linear (none where the key fused it)."""

    def wanted(position: str, entry: dict[str, Any]) -> bool:
        node = _node_of(position)
        kind = _kind_of(node, want)
        return kind == "relu" or (kind in ("conv2d", "linear") and _source_of(position) is None)

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


def _db(number: Any) -> str:
    return f"{number:.2f} dB" if isinstance(number, int | float) else str(number)


def _ops_text(ops: dict[str, int]) -> str:
    return "、".join(f"{k} × {v}" for k, v in sorted(ops.items())) if ops else "沒有"


# --- checks ---------------------------------------------------------------------------------------


@check(
    "backend_quantizer",
    3,
    "conv2d 與 linear：activation 是 act_spec()（int8 affine、MinMaxObserver），weight 是 per-channel symmetric int8"
    "（PerChannelMinMaxObserver、ch_axis=0）；規格書以外的 op（ConvTranspose2d、名字像 op 的輸入）不標",
)
def test_weights(seen, expected):
    for case in ("lowered", "crowded"):
        got, want = _case(seen, expected, case)
        compare_positions(got, want, WHERE[case], _weight_positions(want))


def _weight_positions(want: dict[str, Any]) -> Any:
    """conv2d / linear: the activation and weight edges; and any label on other ops. Their outputs (labelled
    unless fused) are ``test_fusion``'s, their bias ``test_bias``'s (issue 50: one mistake costs once)."""
    bias = _bias_sources(want)

    def wanted(position: str, entry: dict[str, Any]) -> bool:
        node, source = _node_of(position), _source_of(position)
        kind = _kind_of(node, want)
        if kind == "other":
            return True
        if kind not in ("conv2d", "linear") or (source, node) in bias:
            return False
        return source is not None

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
                raise Fail(f"{where} 應該是 int32 常數再經過 dequantize，你的沒有 dequantize（bias 留在 fp32）")
            expect(
                mine.get("stored_dtype") == record["stored_dtype"],
                f"{where} 應該存成 {record['stored_dtype']}，你的存成 {mine.get('stored_dtype')}",
            )
            expect(
                mine.get("scales") == record["scales"],
                f"{where} 應該每個 output channel 一個 scale（{record['scales']} 個），你的有 {mine.get('scales')} 個",
            )
            expect(
                bool(mine.get("scale_is_product")),
                f"{where} 的 scale 應該等於 activation 的 scale × weight 的 scale（每個 channel），你的不相等",
            )
            expect(bool(mine.get("zero_points_zero")), f"{where} 是 symmetric，zero point 應該都是 0，你的不是")


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
                    f"{WHERE[case]}（convert 之後）：{node} 後面的 quantize 的 [scale, zero point, qmin, qmax, dtype] "
                    f"應該是 {params}，你的是 {mine}"
                )


@check(
    "backend_quantizer",
    2,
    "融合：conv2d / linear 唯一的 user 是 relu 時，中間不貼標籤（conv 的輸出與 relu 的輸入都沒有），relu 的輸出標 act_spec()；"
    "conv 被讀兩次時不融合（conv 自己標輸出），單獨的 relu 不標",
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
                            f"你的{path_text(mine)}"
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
    # the claimed nodes' labels, but not the stem conv's weight and bias (test_weights and test_bias judge those)
    compare_positions(got, want, where, lambda p, e: _node_of(p) in CLAIMED and not e.get("constant"))
    table_spec = {"qmin": -30, "qmax": 30}
    for position, entry in sorted(_positions(got).items()):
        spec = entry.get("spec")
        if _node_of(position) == "add_1" and isinstance(spec, dict) and spec.get("qmin") == table_spec["qmin"]:
            raise Fail(
                f"{where}：add_1 的標籤沒有被認領（_annotated=False），應該照規則重貼，你的 {position} 還是 {spec_text(spec)}"
            )
    if not any(_node_of(p) == "add_1" for p in _positions(got)):
        raise Fail(f"{where}：add_1 的標籤沒有被認領（_annotated=False），應該照規則重貼，你的 add_1 沒有標籤")
    got_marks, want_marks = got["labels"].get("annotated", {}), want["labels"].get("annotated", {})
    for node in sorted(set(got_marks) | set(want_marks)):
        expect(
            bool(got_marks.get(node)) == bool(want_marks.get(node)),
            f"{where}：{node} 的 _annotated 應該是 {bool(want_marks.get(node))}，你的是 {bool(got_marks.get(node))}",
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
            f"{where}：runtime 的輸出與 convert 後的 PyTorch 模型相比，SQNR 應該至少 {RUNTIME_MATCH_DB:g} dB，你的是 {_db(match)}"
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
            f"{where}：留在 portable runtime 的 op 應該最多和 ExecuTorch 的 XNNPACKQuantizer 一樣（{_ops_text(theirs)}），"
            f"你的有 {_ops_text(mine)}"
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
            f"{where}：對 fp32 的 SQNR 應該至少 {theirs - SQNR_MARGIN_DB:.2f} dB（ExecuTorch 的 XNNPACKQuantizer "
            f"{theirs:.2f} dB − {SQNR_MARGIN_DB:g}），你的是 {mine:.2f} dB"
        )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m08_3.py) --------

LABEL_CASES = ("lowered", "crowded", "claimed")
WEIGHT_CHECKS = ("test_weights", "test_bias")
CLAIMER_LIMITS = {"add": 100, "cat": 90, "relu": 80}
"""The int8 [-q, q] specs of the Quantizers that claim ``add``, ``cat`` and the stem's ``relu`` of ``claimed``."""
UNCLAIMED_LIMIT = 30
"""The int8 [-30, 30] spec of ``add_1``'s label in ``claimed`` (``_annotated`` left False)."""


def _labelled(seen: Any, expected: Any, cases: tuple[str, ...] = LABEL_CASES) -> list[tuple[str, Any, Any, Any]]:
    """``(case, got labels, want labels, the case's key evidence)`` for the cases both answered."""
    found = []
    for place, got, want in label_pairs(seen, expected, cases=cases):
        if len(place) == 2 and place[1] == "labels":
            found.append((str(place[0]), got, want, diagnosis.value(expected, place[0])))
    return found


def _node(position: str, entry: Any) -> str:
    return str(entry.get("node")) if isinstance(entry, dict) else _node_of(position)


def _role(case_want: Any, position: str) -> str:
    """What a position is for a conv2d / linear of the key: ``x``, ``weight``, ``bias``, ``output``, or ``other``
    (``claimed`` records no sources: only the output is told apart there)."""
    node, source = _node_of(position), _source_of(position)
    if _kind(case_want, node) not in ("conv2d", "linear"):
        return "other"
    if source is None:
        return "output"
    weighted = (case_want.get("weighted") or {}).get(node) if isinstance(case_want, dict) else None
    if not isinstance(weighted, list):
        return "other"
    return {weighted[0]: "x", weighted[1]: "weight", weighted[2]: "bias"}.get(source, "other")


def _specs(seen: Any, expected: Any, role: str, cases: tuple[str, ...] = LABEL_CASES) -> list[tuple[Any, Any]]:
    """``(got spec, key spec)`` of the conv2d / linear positions of ``role`` both label."""
    return [
        (got["positions"][p].get("spec"), entry.get("spec"))
        for case, got, want, case_want in _labelled(seen, expected, cases)
        for p, entry in want["positions"].items()
        if p in got["positions"] and _role(case_want, p) == role
    ]


def _nodes_of(labels: dict[str, Any]) -> set[str]:
    return {_node(p, e) for p, e in labels["positions"].items()}


def _kind(case_want: Any, node: str) -> str:
    ops = case_want.get("ops") if isinstance(case_want, dict) else None
    return str(ops.get(node, "other")) if isinstance(ops, dict) else "other"


def _dtype(spec: Any) -> Any:
    dtype = spec_field({"spec": spec}, "dtype")
    return dtype.get("dtype") if isinstance(dtype, dict) else dtype


def _qscheme(spec: Any) -> str:
    scheme = spec_field({"spec": spec}, "qscheme")
    return str(scheme.get("qscheme") if isinstance(scheme, dict) else scheme)


def _biases(seen: Any, expected: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = []
    for case in ("lowered", "crowded"):
        got, want = diagnosis.value(seen, case, "biases"), diagnosis.value(expected, case, "biases")
        if isinstance(got, dict) and isinstance(want, dict):
            found += [(got[n], r) for n, r in want.items() if isinstance(got.get(n), dict) and isinstance(r, dict)]
    return found


@detects("backend_quantizer", "found_by_name")
def found_by_name(seen: Any, expected: Any) -> bool:
    """A label on a node that is none of the backend's ops (the input called cat), or the crash of reading its
    arguments (only the model with that input fails)."""
    for _, got, _, case_want in _labelled(seen, expected):
        for node in _nodes_of(got):
            if _kind(case_want, node) == "other" and not node.startswith("conv_transpose"):
                return True
    return raised(seen, ("IndexError", "TypeError"), cases=("crowded",)) and not raised(seen, cases=("lowered",))


@detects("backend_quantizer", "conv_transpose_as_conv")
def conv_transpose_as_conv(seen: Any, expected: Any) -> bool:
    """Labels on the ConvTranspose2d, or per-channel quantizing its weight along the wrong axis (convert fails)."""
    if any(node.startswith("conv_transpose") for _, got, _, _ in _labelled(seen, expected) for node in _nodes_of(got)):
        return True
    return raised(seen, ("RuntimeError",), cases=("crowded",), says="quantize_per_channel")


@detects("backend_quantizer", "assumes_bias")
def assumes_bias(seen: Any, expected: Any) -> bool:
    """The backbone (its last linear has no bias) fails reading args[2], or a None bias is labelled."""
    return raised(seen, ("IndexError",), cases=("lowered",)) or raised(seen, ("EvidenceError",), says="NoneType")


@detects("backend_quantizer", "repeated_input_twice")
def repeated_input_twice(seen: Any, expected: Any) -> bool:
    return raised(seen, ("RecursionError",), cases=("crowded",))


@detects("backend_quantizer", "non_activation_operand")
def non_activation_operand(seen: Any, expected: Any) -> bool:
    """A model constant labelled on an add / cat, or a Python scalar used as a key."""
    for _, got, want, case_want in _labelled(seen, expected):
        for position, entry in got["positions"].items():
            if (
                isinstance(entry, dict)
                and entry.get("constant")
                and position not in want["positions"]
                and _kind(case_want, _node(position, entry)) in ("add", "cat")
            ):
                return True
    return raised(seen, ("EvidenceError", "Exception"), says="float") or raised(seen, ("EvidenceError",), says="int")


@detects("backend_quantizer", "weighted_op_skipped", explains=(*WEIGHT_CHECKS, "test_fusion"))
def weighted_op_skipped(seen: Any, expected: Any) -> bool:
    """Every conv2d, or every linear, the key labels carries no label at all (nor, then, its output or the
    relu fused with it: ``test_fusion``)."""
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        for kind in ("conv2d", "linear"):
            nodes = {n for n in _nodes_of(want) if _kind(case_want, n) == kind}
            if nodes and not nodes & _nodes_of(got):
                return True
    return False


@detects("backend_quantizer", "per_tensor_weights", explains=WEIGHT_CHECKS)
def per_tensor_weights(seen: Any, expected: Any) -> bool:
    return any(
        "per_channel" in _qscheme(key) and "per_tensor" in _qscheme(mine)
        for mine, key in _specs(seen, expected, "weight")
    )


@detects("backend_quantizer", "uint8_activations")
def uint8_activations(seen: Any, expected: Any) -> bool:
    """uint8 where the backend's activations are int8: a conv / linear input, or a sigmoid's fixed qparams
    (uint8, zero point 0, where the backend's are int8 with zero point −128). XNNPACK takes no uint8 q/dq: they
    stay in the portable runtime, and the program may not even save, so the runtime checks fail with the labels'
    own check; the backend's int8 underlies them all (no ``explains``)."""
    if any(_dtype(key) == "int8" and _dtype(mine) == "uint8" for mine, key in _specs(seen, expected, "x")):
        return True
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        for position, entry in want["positions"].items():
            mine = got["positions"].get(position)
            if (
                _kind(case_want, _node_of(position)) == "sigmoid"
                and _source_of(position) is None
                and _dtype(entry.get("spec")) == "int8"
                and _dtype(mine.get("spec") if isinstance(mine, dict) else None) == "uint8"
            ):
                return True
    return False


@detects("backend_quantizer", "bias_left_fp32", explains=("test_bias",))
def bias_left_fp32(seen: Any, expected: Any) -> bool:
    """A bias the key labels is not, while the weight next to it is."""
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        for position in want["positions"]:
            if _role(case_want, position) != "bias" or position in got["positions"]:
                continue
            node = _node_of(position)
            if any(_role(case_want, p) == "weight" and _node_of(p) == node for p in got["positions"]):
                return True
    return False


@detects("backend_quantizer", "bias_as_int8", explains=("test_bias", "test_runtime", "test_coverage", "test_sqnr"))
def bias_as_int8(seen: Any, expected: Any) -> bool:
    return any(
        isinstance(mine, dict) and (mine.get("kind") != "derived" or _dtype(mine) != "int32")
        for mine, _ in _specs(seen, expected, "bias")
    )


@detects("backend_quantizer", "bias_scale_not_product", explains=("test_bias", "test_runtime", "test_sqnr"))
def bias_scale_not_product(seen: Any, expected: Any) -> bool:
    return any(
        got.get("stored_dtype") == "int32" and not got.get("scale_is_product") and want.get("scale_is_product")
        for got, want in _biases(seen, expected)
    )


def _sharing_nodes(seen: Any, expected: Any) -> list[tuple[set[str], set[str], str]]:
    """For every add / cat / max_pool2d / flatten the key labels: the student's groups of its positions, the
    key's, and its kind."""
    found = []
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        for node in _nodes_of(want):
            kind = _kind(case_want, node)
            if kind not in SHARING_OPS:
                continue
            mine = {str(e.get("group")) for p, e in got["positions"].items() if _node(p, e) == node}
            key = {str(e.get("group")) for p, e in want["positions"].items() if _node(p, e) == node}
            found.append((mine, key, kind))
    return found


@detects("backend_quantizer", "equal_specs_not_shared")
def equal_specs_not_shared(seen: Any, expected: Any) -> bool:
    """An add / cat / … whose positions the key shares in one group: the student labels it, in several groups."""
    return any(len(key) == 1 and len(mine) > 1 for mine, key, _ in _sharing_nodes(seen, expected))


@detects("backend_quantizer", "sharing_op_unlabelled")
def sharing_op_unlabelled(seen: Any, expected: Any) -> bool:
    return any(key and not mine for mine, key, _ in _sharing_nodes(seen, expected))


@detects("backend_quantizer", "sigmoid_observed", explains=("test_sigmoid", "test_sqnr"))
def sigmoid_observed(seen: Any, expected: Any) -> bool:
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        for position, entry in want["positions"].items():
            mine = got["positions"].get(position)
            if (
                isinstance(mine, dict)
                and _kind(case_want, _node_of(position)) == "sigmoid"
                and _source_of(position) is None
                and spec_field(entry, "kind") == "fixed"
                and spec_field(mine, "kind") != "fixed"
            ):
                return True
    return False


@detects("backend_quantizer", "no_fusion", explains=("test_fusion", "test_runtime"))
def no_fusion(seen: Any, expected: Any) -> bool:
    """The output of a conv / linear the key fuses, or the edge into its relu, is labelled."""
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        fused = _fused(case_want)
        for position in set(got["positions"]) - set(want["positions"]):
            source, node = _source_of(position), _node_of(position)
            if (source is None and node in fused) or (source in fused and _kind(case_want, node) == "relu"):
                return True
    return False


@detects("backend_quantizer", "fuses_shared_conv", explains=("test_fusion",))
def fuses_shared_conv(seen: Any, expected: Any) -> bool:
    """A relu the key leaves alone is labelled, or a conv / linear the key does not fuse has no output label."""
    for _, got, want, case_want in _labelled(seen, expected, ("lowered", "crowded")):
        relus = {n for n in _nodes_of(got) - _nodes_of(want) if _kind(case_want, n) == "relu"}
        unfused = {
            _node_of(p) for p in want["positions"] if _role(case_want, p) == "output" and p not in got["positions"]
        }
        if relus or (unfused and any(_node_of(p) in unfused for p in got["positions"])):
            return True
    return False


def _claimer_changed(seen: Any, expected: Any, kinds: tuple[str, ...]) -> bool:
    """A position a claiming Quantizer labelled on an op of ``kinds`` carries another spec, or none."""
    for _, got, want, case_want in _labelled(seen, expected, ("claimed",)):
        for position, entry in want["positions"].items():
            kind = _kind(case_want, _node(position, entry))
            if kind in kinds and spec_field(entry, "qmax") == CLAIMER_LIMITS.get(kind):
                if spec_field(got["positions"].get(position), "qmax") != CLAIMER_LIMITS[kind]:
                    return True
    return False


@detects("backend_quantizer", "overwrites_claimed", explains=("test_claimed",))
def overwrites_claimed(seen: Any, expected: Any) -> bool:
    return _claimer_changed(seen, expected, ("add", "cat"))


@detects("backend_quantizer", "fuses_over_claimed_relu", explains=("test_claimed",))
def fuses_over_claimed_relu(seen: Any, expected: Any) -> bool:
    return _claimer_changed(seen, expected, ("relu",))


@detects("backend_quantizer", "claimed_relu_still_fused", explains=("test_claimed",))
def claimed_relu_still_fused(seen: Any, expected: Any) -> bool:
    """The conv whose relu another Quantizer claimed has no output label (it has its other labels)."""
    for _, got, want, case_want in _labelled(seen, expected, ("claimed",)):
        for position in want["positions"]:
            if _role(case_want, position) == "output" and position not in got["positions"]:
                node = _node_of(position)
                if any(_node_of(p) == node for p in got["positions"]):
                    return True
    return False


@detects("backend_quantizer", "skips_unclaimed_label", explains=("test_claimed",))
def skips_unclaimed_label(seen: Any, expected: Any) -> bool:
    """The unclaimed label of add_1 is still there (or add_1 has none)."""
    for _, got, want, case_want in _labelled(seen, expected, ("claimed",)):
        stale = any(spec_field(e, "qmax") == UNCLAIMED_LIMIT for e in got["positions"].values())
        adds = {n for n in _nodes_of(want) if _kind(case_want, n) == "add" and n not in _claimed_adds(want)}
        if stale or (adds and not adds & _nodes_of(got)):
            return True
    return False


def _claimed_adds(labels: dict[str, Any]) -> set[str]:
    return {_node(p, e) for p, e in labels["positions"].items() if spec_field(e, "qmax") == CLAIMER_LIMITS["add"]}


@detects("backend_quantizer", "forgets_annotated", explains=("test_claimed",))
def forgets_annotated(seen: Any, expected: Any) -> bool:
    """A node the student labelled is not marked ``_annotated`` where the key's is."""
    for _, got, want, _ in _labelled(seen, expected):
        mine, key = got.get("annotated") or {}, want.get("annotated") or {}
        if any(key.get(node) and node in mine and not mine[node] for node in key):
            return True
    return False


@detects("backend_quantizer", "prepare_is_not_lowering", explains=("test_runtime", "test_coverage", "test_sqnr"))
def prepare_is_not_lowering(seen: Any, expected: Any) -> bool:
    stage = diagnosis.value(seen, "lowered", "runtime", "stage")
    return isinstance(stage, str) and stage != "done"
