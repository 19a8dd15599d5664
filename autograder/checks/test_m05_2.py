"""Hidden checks of M05-2: BiasQuantizer, an int32 bias whose scale is s_act · s_w.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- every conv / linear has a bias (``node.args[2]``) → no_bias;
- conv only, or ops matched by ``str(target)`` substring (conv_transpose2d, upsample_bilinear2d)
  or by name (an input called linear; a linear and a mean whose names a pass swapped) →
  linear_per_tensor, crowded, renamed;
- the bias scale is s_act, s_w, s_act + s_w, or s_act · max(s_w) → conv_per_tensor,
  linear_per_tensor, conv_per_channel, linear_per_channel;
- weights always per-tensor (one bias scale) → conv_per_channel, linear_per_channel;
- the bias observed as an ordinary int32 spec, int8, a symmetric range without -2³¹, the weight's
  [-127, 127], the activation's zero point → every case;
- ``derived_from`` names the producer's input edge or the producer's output, the activation
  labelled on the producer's output (another Quantizer's claimed relu) → crowded;
- the derived spec put first in ``input_qspec_map`` (its sources have no observer yet) → every case;
- what another Quantizer wrote first: a labelled but unclaimed linear skipped, own labels not marked
  ``_annotated`` (a later Quantizer replaces them) → crowded, late_quantizer;
- the output spec forgotten → every case.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, compare_paths, derived_edges, expect, spec_text, value

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
        raise Fail(f"{WHERE[case]}：{name} 的 bias 預期是 int32 常數 → dequantize，看到 {_steps_text(bias)}")
    if step.get("dtype") != "int32" or bias.get("source_dtype") != "int32":
        raise Fail(f"{WHERE[case]}：{name} 的 bias 預期量化成 int32，看到 {_steps_text(bias)}")
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
            raise Fail(f"{WHERE[case]}：{name} 的 bias 預期用 {op}，看到 {step.get('op')}")
        bias_scales = _scales(step)
        act = _input_scale(got_op, "x", name, case)
        weight = _input_scale(got_op, "weight", name, case)
        channels = len(want_op.get("float_bias") or [])
        if per_channel and (len(bias_scales) != channels or len(weight) != channels):
            raise Fail(
                f"{WHERE[case]}：{name} 有 {channels} 個 output channel，per-channel 的 bias 應該有 {channels} 個 scale，"
                f"看到 bias {len(bias_scales)} 個、weight {len(weight)} 個"
            )
        if len(act) != 1 or (not per_channel and (len(bias_scales) != 1 or len(weight) != 1)):
            raise Fail(f"{WHERE[case]}：{name} 的 activation、weight、bias 預期各有一個 scale（per-tensor）")
        products = [act[0] * w for w in weight]
        for index, (got_scale, product) in enumerate(zip(bias_scales, products, strict=True)):
            if not math.isclose(got_scale, product, rel_tol=RTOL):
                where = f"第 {index} 個 channel 的 scale" if per_channel else "scale"
                raise Fail(
                    f"{WHERE[case]}：{name} 的 bias {where} 預期 s_act · s_w = {act[0]:.6g} × {weight[index]:.6g} "
                    f"= {product:.6g}，看到 {got_scale:.6g}（全部：{_short(bias_scales)}）"
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
            raise Fail(f"{WHERE[case]}：{name} 的 bias 預期 {len(floats)} 個值")
        if len(scales) == 1:
            scales = scales * len(floats)
        for index, (got_value, want_value, scale) in enumerate(zip(dequantized, floats, scales, strict=True)):
            if abs(got_value - want_value) > 0.5 * scale * (1 + RTOL) + 1e-12:
                raise Fail(
                    f"{WHERE[case]}：{name} 的 bias[{index}] 是 {want_value:.6g}，量化再反量化後應該在 ±scale/2"
                    f"（{0.5 * scale:.3g}）以內，看到 {got_value:.6g}：整數範圍太小被截斷了？"
                )


def check_int32(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got, want = _ops(seen, case), _ops(expected, case)
    for name, got_op, _ in _biased(got, want, case):
        step = _int32_bias(got_op, name, case)
        zero_points = step.get("zero_point")
        zero_points = zero_points if isinstance(zero_points, list) else [zero_points]
        if any(z != 0 for z in zero_points):
            raise Fail(f"{WHERE[case]}：{name} 的 bias 是 symmetric，zero point 應該都是 0，看到 {_short(zero_points)}")


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


def compare_annotations(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """The labels right after the student's annotate: the same nodes, edges and specs as the answer key's."""
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
            raise Fail(f"{where}：{node} 預期有標籤，看到沒有")
        if mine["claimed"] != theirs["claimed"]:
            raise Fail(f"{where}：{node} 的 _annotated 預期 {theirs['claimed']}，看到 {mine['claimed']}")
        if sorted(mine["inputs"]) != sorted(theirs["inputs"]):
            raise Fail(
                f"{where}：{node} 預期貼標籤的輸入邊來自 {sorted(theirs['inputs'])}，看到 {sorted(mine['inputs'])}"
            )
        for source, spec in theirs["inputs"].items():
            if spec_key(mine["inputs"][source]) != spec_key(spec):
                raise Fail(
                    f"{where}：邊 {source} → {node} 的規格預期 {spec_text(spec)}，看到 {spec_text(mine['inputs'][source])}"
                )
        if spec_key(mine["output"]) != spec_key(theirs["output"]):
            raise Fail(
                f"{where}：{node} 的輸出標籤預期 {spec_text(theirs['output'])}，看到 {spec_text(mine['output'])}"
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
                raise Fail(f"{where}：{node} 的 bias（{source}）預期是 DerivedQuantizationSpec，看到 {spec_text(mine)}")
            for field, text in (("dtype", "dtype"), ("qmin", "quant_min"), ("qmax", "quant_max")):
                if mine.get(field) != spec.get(field):
                    raise Fail(
                        f"{where}：{node} 的 bias 規格 {text} 預期 {_name(spec.get(field))}，看到 {_name(mine.get(field))}"
                    )


def check_paths(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    got, want = value(seen, case), value(expected, case)
    try:
        compare_paths(got["converted"], want["converted"], WHERE[case])
    except (KeyError, TypeError):
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
    for case in ("conv_per_tensor", "linear_per_channel", "late_quantizer"):
        compare_annotations(seen, expected, case)
        check_paths(seen, expected, case)


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
