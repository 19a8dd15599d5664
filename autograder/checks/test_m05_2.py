"""Hidden checks of M05-2: BiasQuantizer, an int32 bias whose scale is s_act · s_w.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m05_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import (
    Fail,
    check,
    close_numbers,
    compare_paths,
    derived_edges,
    detects,
    expect,
    raised,
    spec_text,
    value,
)
from selfcheck import diagnosis
from selfcheck.public import m05_2 as public

RTOL = 1e-6

WHERE = {
    "conv_per_tensor": "conv → relu → conv（per-tensor weight）",
    "conv_per_channel": "conv → relu → conv（per-channel weight）",
    "linear_per_tensor": "linear → relu → linear（per-tensor weight）",
    "linear_per_channel": "linear → relu → linear（per-channel weight）",
    "no_bias": "沒有 bias 的 conv → linear → 沒有 bias 的 linear（per-channel weight）",
    "crowded": (
        "輸入名叫 linear、兩個 conv 的輸出 cat 起來、已被認領的 relu、ConvTranspose2d、bilinear upsample、"
        "已有標籤但沒認領的 linear（per-channel weight）"
    ),
    "late_quantizer": "linear → relu → linear，之後再跑一個替沒人認領的 op 貼輸出標籤的 Quantizer（per-tensor weight）",
    "renamed": "沒有 bias 的 conv → mean → linear → linear，node 名字被 pass 對調（叫 mean_90 的是 linear、叫 linear_91 的是 mean）",
}


def _ops(evidence: dict[str, Any], case: str) -> dict[str, Any]:
    result = value(evidence, case)
    try:
        ops = result["ops"]
    except (KeyError, TypeError):
        raise Fail(f"{WHERE[case]}：證據格式不對") from None
    expect(isinstance(ops, dict), f"{WHERE[case]}：證據格式不對")
    return ops


def _steps_text(edge: dict[str, Any] | None) -> str:
    if not edge:
        return "這條邊不存在"
    steps = edge.get("steps") or []
    if not steps:
        return f"{edge.get('source')}（{edge.get('source_dtype', 'fp32')}）直接進來，沒有 q/dq"
    parts = [f"{s.get('op')}({s.get('dtype')})" for s in steps]
    return f"{edge.get('source')}（{edge.get('source_dtype', '?')}）→ " + " → ".join(parts)


def _last(edge: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(edge, dict) or not edge.get("steps"):
        return None
    return edge["steps"][-1]


def _biased(got: dict[str, Any], want: dict[str, Any], case: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The (name, seen record, expected record) of every op whose bias the answer key quantizes."""
    pairs = []
    for name, want_op in want.items():
        if want_op.get("bias") is None:
            continue
        got_op = got.get(name)
        expect(isinstance(got_op, dict), f"{WHERE[case]}：圖上找不到 {name}")
        pairs.append((name, got_op, want_op))
    expect(bool(pairs), f"{WHERE[case]}：證據格式不對")
    return pairs


def _int32_bias(got_op: dict[str, Any], name: str, case: str) -> dict[str, Any]:
    bias = got_op.get("bias")
    step = _last(bias)
    if step is None or not str(step.get("op", "")).startswith("dequantize"):
        raise Fail(f"{WHERE[case]}：{name} 的 bias 應該是 int32 常數 → dequantize，你的是 {_steps_text(bias)}")
    if step.get("dtype") != "int32" or bias.get("source_dtype") != "int32":
        raise Fail(f"{WHERE[case]}：{name} 的 bias 應該量化成 int32，你的是 {_steps_text(bias)}")
    return step


def _scales(step: dict[str, Any]) -> list[float]:
    scale = step.get("scale")
    values = scale if isinstance(scale, list) else [scale]
    if not values or not all(isinstance(s, float | int) and not isinstance(s, bool) for s in values):
        raise Fail("bias 的 scale 不是數字")
    return [float(s) for s in values]


def _input_scale(got_op: dict[str, Any], edge: str, name: str, case: str) -> list[float]:
    step = _last(got_op.get(edge))
    if step is None or not str(step.get("op", "")).startswith("dequantize"):
        what = "x（activation）" if edge == "x" else "weight"
        raise Fail(f"{WHERE[case]}：{name} 的 {what} 邊沒有量化：{_steps_text(got_op.get(edge))}")
    return _scales(step)


def _short(numbers: list[float]) -> str:
    text = ", ".join(f"{n:.6g}" for n in numbers[:4])
    return f"[{text}{', …' if len(numbers) > 4 else ''}]" if len(numbers) > 1 else text


def check_bias_scale(seen: dict[str, Any], expected: dict[str, Any], case: str, per_channel: bool) -> None:
    """The bias dequantize scale equals s_act · s_w (rtol 1e-6), read off the student's own graph."""
    got, want = _ops(seen, case), _ops(expected, case)
    for name, got_op, want_op in _biased(got, want, case):
        step = _int32_bias(got_op, name, case)
        op = "dequantize_per_channel" if per_channel else "dequantize_per_tensor"
        if step.get("op") != op:
            raise Fail(f"{WHERE[case]}：{name} 的 bias 應該用 {op}，你的用了 {step.get('op')}")
        bias_scales = _scales(step)
        act = _input_scale(got_op, "x", name, case)
        weight = _input_scale(got_op, "weight", name, case)
        channels = len(want_op.get("float_bias") or [])
        if per_channel and (len(bias_scales) != channels or len(weight) != channels):
            raise Fail(
                f"{WHERE[case]}：{name} 有 {channels} 個 output channel，per-channel 的 bias 應該有 {channels} 個 scale，"
                f"你的 bias 有 {len(bias_scales)} 個、weight 有 {len(weight)} 個"
            )
        if len(act) != 1 or (not per_channel and (len(bias_scales) != 1 or len(weight) != 1)):
            raise Fail(f"{WHERE[case]}：{name} 的 activation、weight、bias 應該各有一個 scale（per-tensor），你的不是")
        products = [act[0] * w for w in weight]
        for index, (got_scale, product) in enumerate(zip(bias_scales, products, strict=True)):
            if not math.isclose(got_scale, product, rel_tol=RTOL):
                where = f"第 {index} 個 channel 的 scale" if per_channel else "scale"
                raise Fail(
                    f"{WHERE[case]}：{name} 的 bias {where} 應該是 s_act · s_w = {act[0]:.6g} × {weight[index]:.6g} "
                    f"= {product:.6g}，你的是 {got_scale:.6g}（全部：{_short(bias_scales)}）"
                )


def check_bias_values(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Dequantized, the int32 bias is within half a step of the fp32 bias (nothing clipped)."""
    got, want = _ops(seen, case), _ops(expected, case)
    for name, got_op, want_op in _biased(got, want, case):
        step = _int32_bias(got_op, name, case)
        scales = _scales(step)
        floats = want_op.get("float_bias") or []
        dequantized = got_op["bias"].get("value")
        if not isinstance(dequantized, list) or len(dequantized) != len(floats):
            raise Fail(f"{WHERE[case]}：{name} 的 bias 應該有 {len(floats)} 個值")
        if len(scales) == 1:
            scales = scales * len(floats)
        for index, (got_value, want_value, scale) in enumerate(zip(dequantized, floats, scales, strict=True)):
            if abs(got_value - want_value) > 0.5 * scale * (1 + RTOL) + 1e-12:
                raise Fail(
                    f"{WHERE[case]}：{name} 的 bias[{index}] 是 {want_value:.6g}，量化再反量化後應該在 ±scale/2"
                    f"（{0.5 * scale:.3g}）以內，你的是 {got_value:.6g}：整數範圍太小、被截斷了嗎？"
                )


def check_int32(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got, want = _ops(seen, case), _ops(expected, case)
    for name, got_op, _ in _biased(got, want, case):
        step = _int32_bias(got_op, name, case)
        zero_points = step.get("zero_point")
        zero_points = zero_points if isinstance(zero_points, list) else [zero_points]
        if any(z != 0 for z in zero_points):
            raise Fail(
                f"{WHERE[case]}：{name} 的 bias 是 symmetric，zero point 應該都是 0，你的是 {_short(zero_points)}"
            )


# --- annotations ----------------------------------------------------------------------------------


def _name(value: Any) -> Any:
    return value.get("dtype") if isinstance(value, dict) and "dtype" in value else value


def _scheme(value: Any) -> Any:
    return value.get("qscheme") if isinstance(value, dict) and "qscheme" in value else value


def spec_key(spec: Any) -> Any:
    """What must match in a spec: everything for a QuantizationSpec (observer class included); for a derived
    spec its dtype, whether it is per channel (and on which axis) and the set of edges it derives from
    (the range is judged in test_bias_int32, the scale on the converted graph)."""
    if not isinstance(spec, dict) or spec.get("kind") != "derived":
        return spec
    per_channel = "channel" in str(_scheme(spec.get("qscheme")))
    return {
        "kind": "derived",
        "dtype": spec.get("dtype"),
        "per_channel": per_channel,
        "ch_axis": spec.get("ch_axis") if per_channel else None,
        "from": derived_edges(spec),
    }


def _spec_key(spec: Any, bias_scheme: bool) -> Any:
    key = spec_key(spec)
    if not bias_scheme and isinstance(key, dict) and key.get("kind") == "derived":
        return {**key, "per_channel": None, "ch_axis": None}
    return key


def normalize(annotations: Any, where: str) -> dict[str, dict[str, Any]]:
    """Per node: claimed, the spec of each labelled input edge, the output spec (a None spec is no label;
    an unclaimed annotation without any spec is no annotation)."""
    if not isinstance(annotations, dict):
        raise Fail(f"{where}：證據格式不對")
    out: dict[str, dict[str, Any]] = {}
    for node, ann in annotations.items():
        if ann is None:
            continue
        if not isinstance(ann, dict) or not isinstance(ann.get("inputs"), list):
            raise Fail(f"{where}：{node} 的標籤不是 QuantizationAnnotation")
        inputs = {str(src): spec for src, spec in ann["inputs"] if spec is not None}
        claimed, output = bool(ann.get("annotated")), ann.get("output")
        if claimed or inputs or output is not None:
            out[node] = {"claimed": claimed, "inputs": inputs, "output": output}
    return out


def compare_annotations(seen: dict[str, Any], expected: dict[str, Any], case: str, *, bias_scheme: bool = True) -> None:
    """The labels right after the student's annotate: the same nodes, edges and specs as the answer key's.

    ``bias_scheme=False``: a bias's derived spec is compared without whether it is per channel (one scale or one
    per channel is test_bias_scale_per_channel's to judge)."""
    got, want = value(seen, case), value(expected, case)
    where = f"{WHERE[case]}（你的 annotate 之後）"
    if not isinstance(got, dict) or "annotations" not in got:
        raise Fail(f"{WHERE[case]}：證據格式不對")
    got_n, want_n = normalize(got["annotations"], where), normalize(want["annotations"], where)
    for node in got_n:
        if node not in want_n:
            raise Fail(f"{where}：{node} 不是 conv2d 或 linear，不該貼標籤或認領")
    for node, theirs in want_n.items():
        mine = got_n.get(node)
        if mine is None:
            raise Fail(f"{where}：{node} 應該有標籤，你的沒有貼")
        if mine["claimed"] != theirs["claimed"]:
            raise Fail(f"{where}：{node} 的 _annotated 應該是 {theirs['claimed']}，你的是 {mine['claimed']}")
        if sorted(mine["inputs"]) != sorted(theirs["inputs"]):
            raise Fail(
                f"{where}：{node} 貼標籤的輸入邊應該來自 {sorted(theirs['inputs'])}，你的來自 {sorted(mine['inputs'])}"
            )
        for source, spec in theirs["inputs"].items():
            if _spec_key(mine["inputs"][source], bias_scheme) != _spec_key(spec, bias_scheme):
                raise Fail(
                    f"{where}：邊 {source} → {node} 的規格應該是 {spec_text(spec)}，你的是 {spec_text(mine['inputs'][source])}"
                )
        if spec_key(mine["output"]) != spec_key(theirs["output"]):
            raise Fail(
                f"{where}：{node} 的輸出標籤應該是 {spec_text(theirs['output'])}，你的是 {spec_text(mine['output'])}"
            )


def check_bias_spec_range(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Every bias edge the key labels carries a DerivedQuantizationSpec with the key's dtype and integer range."""
    got, want = value(seen, case), value(expected, case)
    where = f"{WHERE[case]}（你的 annotate 之後）"
    if not isinstance(got, dict) or "annotations" not in got:
        raise Fail(f"{WHERE[case]}：證據格式不對")
    got_n, want_n = normalize(got["annotations"], where), normalize(want["annotations"], where)
    for node, theirs in want_n.items():
        for source, spec in theirs["inputs"].items():
            if not isinstance(spec, dict) or spec.get("kind") != "derived":
                continue
            mine = got_n.get(node, {}).get("inputs", {}).get(source)
            if not isinstance(mine, dict) or mine.get("kind") != "derived":
                raise Fail(
                    f"{where}：{node} 的 bias（{source}）應該是 DerivedQuantizationSpec，你的是 {spec_text(mine)}"
                )
            for field, text in (("dtype", "dtype"), ("qmin", "quant_min"), ("qmax", "quant_max")):
                if mine.get(field) != spec.get(field):
                    raise Fail(
                        f"{where}：{node} 的 bias 規格 {text} 應該是 {_name(spec.get(field))}，你的是 {_name(mine.get(field))}"
                    )


def _edge_steps(edge: Any, numbers: bool, bias_scheme: bool = True) -> list[Any] | None:
    """An edge of ``ops`` as what is compared: the constant's dtype and every q/dq step's kind and dtype; with
    ``numbers`` also its scale, zero point and range; without ``bias_scheme`` the kind without per tensor / per
    channel."""
    if not isinstance(edge, dict) or not isinstance(edge.get("steps"), list):
        return None
    steps: list[Any] = [edge.get("source_dtype")]
    for step in edge["steps"]:
        if not isinstance(step, dict):
            return None
        kind = str(step.get("op"))
        steps.append(
            [kind if bias_scheme else kind.split("_per_")[0], step.get("dtype")]
            + ([step.get(k) for k in ("scale", "zero_point", "qmin", "qmax")] if numbers else [])
        )
    return steps


def check_paths(seen: dict[str, Any], expected: dict[str, Any], case: str, *, bias_scheme: bool = True) -> None:
    """The converted graph's q/dq steps as the key's on every edge. The edges from constants (a conv / linear's
    weight and bias) are compared op by op (``ops``): convert names a constant after its quantize op, so one
    bias quantized per tensor instead of per channel renumbers the others. On a bias edge only the kinds and
    dtypes (``bias_scheme=False``: not per tensor or per channel either): its scale and zero point are
    test_bias_scale_* 's and test_bias_int32's to judge."""
    got, want = value(seen, case), value(expected, case)
    try:
        for name, theirs in want["ops"].items():
            mine = (got.get("ops") or {}).get(name)
            if not isinstance(mine, dict):
                raise Fail(f"{WHERE[case]}：convert 之後圖上找不到 {name}")
            for edge in ("weight", "bias"):
                if theirs.get(edge) is None:
                    continue
                same = (
                    close_numbers(_edge_steps(mine.get(edge), True), _edge_steps(theirs[edge], True), 1e-5)
                    if edge == "weight"
                    else _edge_steps(mine.get(edge), False, bias_scheme)
                    == _edge_steps(theirs[edge], False, bias_scheme)
                )
                if not same:
                    raise Fail(
                        f"{WHERE[case]}：{name} 的 {edge} 應該是 {_steps_text(theirs[edge])}，"
                        f"你的是 {_steps_text(mine.get(edge))}"
                    )
        constants = set(want["converted"].get("constants") or {})
        others = {
            "paths": {
                consumer: [[source, steps] for source, steps in inputs if source not in constants]
                for consumer, inputs in want["converted"]["paths"].items()
            }
        }
        compare_paths(got["converted"], others, WHERE[case])
    except (KeyError, TypeError, IndexError, AttributeError):
        raise Fail(f"{WHERE[case]}：證據格式不對") from None


@check(
    "bias_quantizer",
    1,
    "bias 的規格：int32、範圍 [-2³¹, 2³¹ − 1]；convert 之後是 int32 常數 → dequantize，zero point 為 0",
)
def test_bias_int32(seen, expected):
    for case in ("conv_per_tensor", "linear_per_channel"):
        check_bias_spec_range(seen, expected, case)
        check_int32(seen, expected, case)


@check("bias_quantizer", 1, "per-tensor：conv 與 linear 的 bias scale = s_act · s_w（rtol 1e-6）")
def test_bias_scale_per_tensor(seen, expected):
    for case in ("conv_per_tensor", "linear_per_tensor"):
        check_bias_scale(seen, expected, case, per_channel=False)


@check("bias_quantizer", 1, "per-channel：bias 每個 output channel 一個 scale = s_act · s_w[c]")
def test_bias_scale_per_channel(seen, expected):
    for case in ("conv_per_channel", "linear_per_channel"):
        check_bias_scale(seen, expected, case, per_channel=True)


@check("bias_quantizer", 1, "int32 的整數範圍：反量化後的 bias 與 fp32 bias 相差不超過 scale/2")
def test_bias_values(seen, expected):
    for case in ("conv_per_tensor", "conv_per_channel", "linear_per_tensor", "linear_per_channel"):
        check_bias_values(seen, expected, case)


@check(
    "bias_quantizer",
    1,
    "activation、weight、輸出與 bias 的標籤（observer 類別、derived_from 的兩條邊）與 q/dq 和標準答案相同；"
    "設了 _annotated，之後再跑的 Quantizer 不會改掉",
)
def test_same_as_key(seen, expected):
    # the bias edge's scale, zero point and per-channel-ness are the bias checks' (test_bias_scale_*, test_bias_int32)
    for case in ("conv_per_tensor", "linear_per_channel", "late_quantizer"):
        compare_annotations(seen, expected, case, bias_scheme=False)
        check_paths(seen, expected, case, bias_scheme=False)


@check(
    "bias_quantizer",
    1,
    "沒有 bias 的 conv / linear 也要標；只標 conv2d 與 linear（看 target：名字像 op 的 node、名字被對調的 op、conv_transpose、bilinear 都不算），"
    "別人認領的 node 不動，有標籤但沒認領的照樣標",
)
def test_no_bias(seen, expected):
    for case in ("no_bias", "crowded", "renamed"):
        compare_annotations(seen, expected, case)
        check_paths(seen, expected, case)
        check_bias_scale(seen, expected, case, per_channel=True)


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m05_2.py) --------

SCALE_CHECKS = ("test_bias_scale_per_tensor", "test_bias_scale_per_channel", "test_no_bias")
LABEL_CHECKS = ("test_same_as_key", "test_no_bias")
PER_TENSOR = ("conv_per_tensor", "linear_per_tensor")
PER_CHANNEL = ("conv_per_channel", "linear_per_channel")
INT32_MAX = 2**31 - 1


def _labels(evidence: Any, case: str) -> dict[str, dict[str, Any]] | None:
    """The normalized labels of one case (``normalize``), None when the case raised or reads oddly."""
    try:
        return normalize(diagnosis.value(evidence, case, "annotations"), case)
    except Fail:
        return None


def _label_pairs(seen: Any, expected: Any, cases: tuple[str, ...] = ()) -> list[tuple[str, dict, dict]]:
    """(case, the student's labels, the key's) for the cases both have labels for."""
    pairs = []
    for case in diagnosis.cases(expected):
        if cases and case not in cases:
            continue
        got, want = _labels(seen, case), _labels(expected, case)
        if got is not None and want is not None:
            pairs.append((case, got, want))
    return pairs


def _same_nodes(seen: Any, expected: Any, case: str) -> bool:
    got, want = _labels(seen, case), _labels(expected, case)
    return got is not None and want is not None and set(got) == set(want)


def _bias_specs(seen: Any, expected: Any, cases: tuple[str, ...] = ()) -> list[tuple[str, Any, dict[str, Any]]]:
    """(case, the student's spec on a bias edge the key derives, the key's spec)."""
    found = []
    for case, got, want in _label_pairs(seen, expected, cases):
        for node, theirs in want.items():
            for source, spec in theirs["inputs"].items():
                if isinstance(spec, dict) and spec.get("kind") == "derived":
                    found.append((case, got.get(node, {}).get("inputs", {}).get(source), spec))
    return found


def _field(spec: Any, key: str) -> Any:
    value = spec.get(key) if isinstance(spec, dict) else None
    return value.get(key) if isinstance(value, dict) and key in value else value


def _derived(spec: Any) -> bool:
    return isinstance(spec, dict) and spec.get("kind") == "derived"


def _scales_of(edge: Any) -> list[float] | None:
    """The scales of the last q/dq step of an edge of the converted graph (None when it has none)."""
    step = _last(edge)
    if step is None:
        return None
    scale = step.get("scale")
    values = scale if isinstance(scale, list) else [scale]
    return [float(v) for v in values] if values and all(isinstance(v, int | float) for v in values) else None


def _bias_relation(seen: Any, relation: Any) -> bool:
    """On the per-tensor cases, every biased op's bias scale is ``relation(s_act, s_w)`` (rtol 1e-4)."""
    checked = 0
    for case in PER_TENSOR:
        ops = diagnosis.value(seen, case, "ops")
        if not isinstance(ops, dict):
            continue
        for op in ops.values():
            if not isinstance(op, dict):
                continue
            act, weight, bias = (_scales_of(op.get(edge)) for edge in ("x", "weight", "bias"))
            if not act or not weight or not bias or op["bias"].get("source_dtype") != "int32":
                continue
            want = [relation(act[0], w) for w in weight]
            if len(want) != len(bias) or not all(
                math.isclose(b, w, rel_tol=1e-4) for b, w in zip(bias, want, strict=True)
            ):
                return False
            checked += 1
    return checked > 0


@detects("bias_quantizer", "derived_before_sources")
def derived_before_sources(seen: Any, expected: Any) -> bool:
    return public.derived_before_sources(seen, expected)


@detects("bias_quantizer", "assumes_bias", explains=("test_no_bias",))
def assumes_bias(seen: Any, expected: Any) -> bool:
    """Only the models with bias-less layers stop, on node.args[2] (an index or an unpacking of three)."""
    missing = raised(seen, ("IndexError",), cases=("no_bias",), says="index out of range") or raised(
        seen, ("ValueError",), cases=("no_bias",), says="not enough values to unpack"
    )
    return missing and not raised(seen, cases=PER_TENSOR)


@detects("bias_quantizer", "by_node_name", explains=("test_no_bias",))
def by_node_name(seen: Any, expected: Any) -> bool:
    """Right on the honest graphs; wrong (or stopped) where a pass swapped the names of a linear and a mean."""
    if raised(seen, cases=("no_bias",)) or not all(_same_nodes(seen, expected, case) for case in PER_TENSOR):
        return False
    return raised(seen, cases=("renamed",)) or not _same_nodes(seen, expected, "renamed")


@detects("bias_quantizer", "target_substring", explains=("test_no_bias",))
def target_substring(seen: Any, expected: Any) -> bool:
    """Right on the honest graphs and the renamed one; in the crowded model (ConvTranspose2d, a bilinear upsample)
    an op that is not conv2d / linear is labelled, or labelling it stopped on an argument that is not a Node."""
    if raised(seen, cases=("renamed", "no_bias")) or not all(_same_nodes(seen, expected, case) for case in PER_TENSOR):
        return False
    if raised(seen, ("EvidenceError", "AttributeError", "TypeError"), cases=("crowded",)):
        return True
    got, want = _labels(seen, "crowded"), _labels(expected, "crowded")
    return got is not None and want is not None and bool(set(got) - set(want))


@detects("bias_quantizer", "one_kind_only")
def one_kind_only(seen: Any, expected: Any) -> bool:
    """The conv models labelled as the key does, the linear ones not at all (or the other way round)."""
    conv = [_labels(seen, case) for case in ("conv_per_tensor", "conv_per_channel")]
    linear = [_labels(seen, case) for case in ("linear_per_tensor", "linear_per_channel")]
    if any(labels is None for labels in conv + linear):
        return False
    empty = [not labels for labels in conv + linear]
    right = [_same_nodes(seen, expected, case) for case in (*PER_TENSOR, *PER_CHANNEL)]
    conv_only = all(empty[2:]) and right[0]
    linear_only = all(empty[:2]) and right[1]
    return conv_only or linear_only


@detects("bias_quantizer", "act_on_producer_output", explains=LABEL_CHECKS + SCALE_CHECKS)
def act_on_producer_output(seen: Any, expected: Any) -> bool:
    """An op's activation edge (the key labels it) is not labelled; its producer's output is, where the key
    does not label it so (or derived_from names a node's output)."""
    for _, got, want in _label_pairs(seen, expected):
        for node, theirs in want.items():
            mine = got.get(node)
            if mine is None:
                continue
            for source in theirs["inputs"]:
                producer = got.get(source)
                if (
                    source not in mine["inputs"]
                    and producer is not None
                    and producer.get("output") is not None
                    and (want.get(source) or {}).get("output") != producer.get("output")
                ):
                    return True
    return any(
        _derived(got) and any(isinstance(e, dict) and "node" in e for e in got.get("from") or [])
        for _, got, _ in _bias_specs(seen, expected)
    )


@detects("bias_quantizer", "derived_from_wrong_edge", explains=LABEL_CHECKS + SCALE_CHECKS)
def derived_from_wrong_edge(seen: Any, expected: Any) -> bool:
    """derived_from names edges, not the two edges into this op."""
    return any(
        _derived(got)
        and all(isinstance(e, dict) and "edge" in e for e in got.get("from") or [])
        and derived_edges(got) != derived_edges(want)
        for _, got, want in _bias_specs(seen, expected)
    )


@detects("bias_quantizer", "skips_unclaimed", explains=LABEL_CHECKS)
def skips_unclaimed(seen: Any, expected: Any) -> bool:
    """A node another Quantizer labelled without claiming it is left as it was, while the others are claimed."""
    for _, got, want in _label_pairs(seen, expected):
        claimed = [node for node, mine in got.items() if mine["claimed"]]
        for node, theirs in want.items():
            mine = got.get(node)
            if theirs["claimed"] and mine is not None and not mine["claimed"] and not mine["inputs"] and claimed:
                return True
    return False


@detects("bias_quantizer", "forgets_annotated", explains=LABEL_CHECKS)
def forgets_annotated(seen: Any, expected: Any) -> bool:
    return any(
        theirs["claimed"] and node in got and got[node]["inputs"] and not got[node]["claimed"]
        for _, got, want in _label_pairs(seen, expected)
        for node, theirs in want.items()
    )


@detects("bias_quantizer", "no_output_spec", explains=LABEL_CHECKS)
def no_output_spec(seen: Any, expected: Any) -> bool:
    return any(
        theirs["output"] is not None and node in got and got[node]["inputs"] and got[node]["output"] is None
        for _, got, want in _label_pairs(seen, expected)
        for node, theirs in want.items()
    )


@detects("bias_quantizer", "bias_observed")
def bias_observed(seen: Any, expected: Any) -> bool:
    return any(isinstance(got, dict) and got.get("kind") == "spec" for _, got, _ in _bias_specs(seen, expected))


@detects("bias_quantizer", "bias_int8")
def bias_int8(seen: Any, expected: Any) -> bool:
    return any(_derived(got) and _field(got, "dtype") == "int8" for _, got, _ in _bias_specs(seen, expected))


@detects("bias_quantizer", "bias_small_range", explains=("test_bias_int32", "test_bias_values"))
def bias_small_range(seen: Any, expected: Any) -> bool:
    return any(
        _derived(got) and _field(got, "dtype") == "int32" and isinstance(got.get("qmax"), int) and got["qmax"] < 2**24
        for _, got, _ in _bias_specs(seen, expected)
    )


@detects("bias_quantizer", "range_without_min", explains=("test_bias_int32",))
def range_without_min(seen: Any, expected: Any) -> bool:
    return any(
        _derived(got) and got.get("qmin") == -INT32_MAX and got.get("qmax") == INT32_MAX
        for _, got, _ in _bias_specs(seen, expected)
    )


@detects("bias_quantizer", "bias_zero_point", explains=("test_bias_int32",))
def bias_zero_point(seen: Any, expected: Any) -> bool:
    """The int32 bias dequantizes with a zero point that is not 0."""
    for case in diagnosis.cases(seen):
        ops = diagnosis.value(seen, case, "ops")
        for op in ops.values() if isinstance(ops, dict) else []:
            step = _last(op.get("bias")) if isinstance(op, dict) else None
            if step is None or step.get("dtype") != "int32":
                continue
            points = step.get("zero_point")
            if any(p != 0 for p in (points if isinstance(points, list) else [points])):
                return True
    return False


def _weight_schemes(seen: Any, expected: Any) -> list[tuple[Any, Any]]:
    """(the student's weight qscheme, the key's) on the per-channel cases."""
    found = []
    for _, got, want in _label_pairs(seen, expected, PER_CHANNEL):
        for node, theirs in want.items():
            for source, spec in theirs["inputs"].items():
                if isinstance(spec, dict) and spec.get("kind") == "spec" and "channel" in str(_field(spec, "qscheme")):
                    mine = got.get(node, {}).get("inputs", {}).get(source)
                    found.append((_field(mine, "qscheme"), _field(spec, "qscheme")))
    return found


@detects("bias_quantizer", "weight_always_per_tensor", explains=(*SCALE_CHECKS, "test_same_as_key"))
def weight_always_per_tensor(seen: Any, expected: Any) -> bool:
    return any("tensor" in str(mine) for mine, _ in _weight_schemes(seen, expected))


@detects("bias_quantizer", "one_scale_per_channel", explains=SCALE_CHECKS)
def one_scale_per_channel(seen: Any, expected: Any) -> bool:
    """Per-channel weights (as the key's), the bias per tensor: one scale for every channel."""
    weights = _weight_schemes(seen, expected)
    if not weights or not all(mine == theirs for mine, theirs in weights):
        return False
    return any(
        _derived(got) and "tensor" in str(_field(got, "qscheme")) and "channel" in str(_field(want, "qscheme"))
        for _, got, want in _bias_specs(seen, expected, PER_CHANNEL)
    )


@detects("bias_quantizer", "scale_act_only", explains=SCALE_CHECKS)
def scale_act_only(seen: Any, expected: Any) -> bool:
    return _bias_relation(seen, lambda act, weight: act)


@detects("bias_quantizer", "scale_weight_only", explains=SCALE_CHECKS)
def scale_weight_only(seen: Any, expected: Any) -> bool:
    return _bias_relation(seen, lambda act, weight: weight)


@detects("bias_quantizer", "scale_sum", explains=SCALE_CHECKS)
def scale_sum(seen: Any, expected: Any) -> bool:
    return _bias_relation(seen, lambda act, weight: act + weight)
