"""Public cases of M05-3 FixedQParams 與整數運算 (int8_linear) on the chapter's own layer.

The layer is section B's ``Linear(16, 6)`` quantized with activations, a per-tensor weight
and the output (bias kept fp32), calibrated and converted. The student's ``int8_linear``
gets int8 inputs and is compared with torchao's reference representation of that quantized
linear (what ``convert_pt2e(..., use_reference_representation=True)`` puts in the graph).
Correct solutions may round differently (1 LSB is allowed), so the evidence is canonical:
dtype, shape, how many outputs are more than 1 LSB away (0 when right), the reference's outputs and the
layer's qparams (the same for every answer), and ``when_off``: empty when right, the student's outputs when
some output is off. The detectors read them with the same readers as the hidden cases' evidence
(``outputs``), so the preview and the grader name the same cause.

Besides section B's layer on typical and full-range inputs, two layers calibrated otherwise show what a
zero point does: one on non-negative data (its input zero point is -128, the inputs span all of int8),
one on data symmetric around 0 (its input zero point is 0).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.compare import Tolerance
from selfcheck.evidence import EvidenceError, plain
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

LINEAR = torch.ops.aten.linear.default


def linear_quantizer() -> Any:
    """Activations int8 affine, weights int8 per-tensor symmetric, bias left fp32 (what the rewrite expects)."""
    from common.pt2e import Quantizer, annotate_input_qspec_map, annotate_output_qspec
    from common.qspecs import act_spec, weight_spec

    class LinearQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op == "call_function" and node.target == LINEAR:
                    annotate_input_qspec_map(node, node.args[0], act_spec())
                    annotate_input_qspec_map(node, node.args[1], weight_spec(per_channel=False))
                    annotate_output_qspec(node, act_spec())
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return LinearQuantizer()


CALIBRATIONS = {
    "typical": lambda data: data,
    "non_negative": lambda data: data.abs() + 1.0,  # like the output of a ReLU: the input zero point is -128
    "symmetric": lambda data: torch.cat([data[:16], -data[:16]]),  # min = -max: the input zero point is 0
}
"""How the layer's input is calibrated: the data as drawn, or made non-negative, or symmetric around 0."""


def quantized_layer(seed: int, calibration: str = "typical") -> dict[str, Any]:
    """Section B's layer, quantized and converted: its qparams, int8 weight, fp32 bias and int32 bias.

    ``calibration``: a key of ``CALIBRATIONS``, how the calibration data is shaped."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    shape = CALIBRATIONS[calibration]
    layer = torch.nn.Linear(16, 6).eval()
    with torch.no_grad():
        layer.bias.add_(0.5)
    prepared = prepare_pt2e(export_module(layer, seeded_inputs(seed, (32, 16))), linear_quantizer())
    with torch.no_grad():
        for step in range(4):
            prepared(shape(seeded_inputs(seed * 1000 + step, (32, 16))[0]))
    converted = convert_pt2e(prepared)
    linear = next(n for n in converted.graph.nodes if n.op == "call_function" and n.target == LINEAR)
    x_dq, w_dq, bias_node = linear.args
    out_q = next(iter(linear.users))
    params = {
        "x_scale": float(x_dq.args[1]),
        "x_zp": int(x_dq.args[2]),
        "w_scale": float(w_dq.args[1]),
        "out_scale": float(out_q.args[1]),
        "out_zp": int(out_q.args[2]),
    }
    bias = converted.get_parameter(bias_node.target).detach().clone()
    return {
        "params": params,
        "w_q": getattr(converted, w_dq.args[0].target).clone(),
        "bias": bias,
        "b_q": torch.round(bias / (params["x_scale"] * params["w_scale"])).to(torch.int32),
    }


def reference(layer: dict[str, Any], x_q: torch.Tensor) -> torch.Tensor:
    """torchao's reference representation of the quantized linear, on ``x_q``."""
    from torchao.quantization.pt2e.reference_representation_rewrite import _reference_quantized_linear

    p = layer["params"]
    with torch.no_grad():
        out = _reference_quantized_linear(
            x_q,
            torch.tensor(p["x_scale"]),
            torch.tensor(p["x_zp"]),
            -128,
            127,
            layer["w_q"],
            torch.tensor(p["w_scale"]),
            torch.tensor(0),
            -127,
            127,
            layer["bias"],
            torch.tensor(p["out_scale"]),
            torch.tensor(p["out_zp"]),
            -128,
            127,
        )
    return out.to(torch.int32)


def call_int8_linear(ns: Namespace, layer: dict[str, Any], x_q: torch.Tensor) -> Any:
    """The student's ``int8_linear`` on ``layer``'s int8 weight and int32 bias and its qparams (copies of
    the tensors: an answer that writes into them changes nothing else)."""
    p = layer["params"]
    return ns["int8_linear"](
        x_q.clone(),
        layer["w_q"].clone(),
        layer["b_q"].clone(),
        p["x_scale"],
        p["x_zp"],
        p["w_scale"],
        p["out_scale"],
        p["out_zp"],
    )


def judge(ns: Namespace, layer: dict[str, Any], x_q: torch.Tensor) -> dict[str, Any]:
    """dtype, shape, the number of outputs more than 1 LSB from the reference; the reference's outputs and the
    layer's qparams (the same for every answer); ``when_off``: empty when no output is off (a right answer's record
    is the key's), else the student's outputs, for the detectors (never shown: the count differs first)."""
    out = call_int8_linear(ns, layer, x_q)
    if type(out) is not torch.Tensor:
        raise EvidenceError(f"int8_linear 應該回傳 torch.Tensor，看到 {type(out).__name__}")
    want = reference(layer, x_q)
    record: dict[str, Any] = {"dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape)}
    when_off: dict[str, Any] = {}
    if tuple(out.shape) == tuple(want.shape):
        mine = out.detach().to(torch.float64)
        off = int(((mine - want.to(torch.float64)).abs() > 1).sum())
        record["more_than_1_lsb_off"] = off
        if off and bool(torch.isfinite(mine).all()):
            when_off = {"values": plain(mine.flatten().tolist())}
    record["reference"] = [float(v) for v in want.flatten()]
    record["params"] = dict(layer["params"])
    record["when_off"] = when_off
    return record


REFERENCE_TOLERANCE = Tolerance(
    rel=0.0,
    absolute=1.0,
    why="the reference representation's outputs, integers: its float rescaling may round the other way on another "
    "CPU (an output at the boundary between two integers), 1 LSB",
)


def typical_inputs(ns: Namespace, seed: int) -> Any:
    """Inputs like the calibration data, quantized with the layer's own input qparams."""
    layer = quantized_layer(seed)
    p = layer["params"]
    data = seeded_inputs(seed + 1, (32, 16))[0]
    x_q = torch.ops.quantized_decomposed.quantize_per_tensor(data, p["x_scale"], p["x_zp"], -128, 127, torch.int8)
    return judge(ns, layer, x_q)


def full_range_inputs(ns: Namespace, seed: int) -> Any:
    """Random int8 inputs over all of [-128, 127] (the chapter's last table): some outputs saturate."""
    layer = quantized_layer(seed)
    generator = torch.Generator().manual_seed(seed)
    return judge(ns, layer, torch.randint(-128, 128, (32, 16), generator=generator, dtype=torch.int8))


def non_negative_calibration(ns: Namespace, seed: int) -> Any:
    """The layer calibrated on non-negative data (input zero point -128), on random int8 inputs over all of
    [-128, 127]: x_q − x_zp leaves int8 on most of them."""
    layer = quantized_layer(seed, "non_negative")
    generator = torch.Generator().manual_seed(seed + 1)
    return judge(ns, layer, torch.randint(-128, 128, (8, 16), generator=generator, dtype=torch.int8))


def symmetric_calibration(ns: Namespace, seed: int) -> Any:
    """The layer calibrated on data symmetric around 0 (input zero point 0), on inputs like that data."""
    layer = quantized_layer(seed, "symmetric")
    p = layer["params"]
    data = seeded_inputs(seed + 2, (8, 16))[0]
    x_q = torch.ops.quantized_decomposed.quantize_per_tensor(data, p["x_scale"], p["x_zp"], -128, 127, torch.int8)
    return judge(ns, layer, x_q)


def batched_full_range(ns: Namespace, seed: int) -> Any:
    """A 3-D batch (batch, seq, in_features) of random int8 inputs over all of [-128, 127]: linear works on the
    last dimension; some outputs saturate, at both ends (``lowest``: the smallest output, -128 there)."""
    layer = quantized_layer(seed)
    generator = torch.Generator().manual_seed(seed + 3)
    x_q = torch.randint(-128, 128, (2, 12, 16), generator=generator, dtype=torch.int8)
    record = judge(ns, layer, x_q)
    out = call_int8_linear(ns, layer, x_q)
    return {**record, "lowest": int(out.min()) if out.numel() and not out.dtype.is_floating_point else None}


# --- where the chapter teaches it ----------------------------------------------------------------

REFERENCE = Section("B. reference representation：`dq → linear → q` 的整數版本")
BY_HAND = Section("C. 親手寫 int8 linear")
RULES = Section("練習：int8_linear（5 分）")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------


def _results(evidence: Any) -> list[dict[str, Any]]:
    """The student's output records: the public cases' values, or the hidden cases' ``result``."""
    found = []
    for case in diagnosis.cases(evidence):
        record = diagnosis.value(evidence, case)
        if isinstance(record, dict) and isinstance(record.get("result"), dict):
            record = record["result"]
        if isinstance(record, dict) and "dtype" in record:
            found.append(record)
    return found


def not_int8(seen: Any, expected: Any) -> bool:
    """A tensor came back, of another dtype than int8."""
    return any(record.get("dtype") not in (None, "int8") for record in _results(seen))


def shapes_mismatch(seen: Any, expected: Any) -> bool:
    """The matrix product refused the shapes (the weight used as (in, out))."""
    return any(
        error == "RuntimeError" and "cannot be multiplied" in diagnosis.error_message(seen, case)
        for case, error in diagnosis.errors(seen).items()
    )


def only_batched_raised(seen: Any, expected: Any) -> bool:
    """The 3-D batch raised (a matrix product for 2-D matrices only), every 2-D case returned."""
    return set(diagnosis.errors(seen)) == {"batched_full_range"}


def lowest_cut(seen: Any, expected: Any) -> bool:
    """The smallest output stops at -127 where the reference saturates at -128."""
    return diagnosis.value(seen, "batched_full_range", "lowest") == -127 and (
        diagnosis.value(expected, "batched_full_range", "lowest") == -128
    )


def int16_refused(seen: Any, expected: Any) -> bool:
    return any("'Short'" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen))


# --- reading the outputs: the public cases' ``when_off`` and the hidden cases' records alike ------------------
# (the hidden detectors in autograder/checks/test_m05_3.py call these, so the notebook and the grader name the
# same cause with the same code)


def outputs(seen: Any, expected: Any) -> dict[str, tuple[list[float], list[int], dict[str, Any], int]]:
    """Case → (the student's values, the reference's, the qparams, out_features), where the shapes agree.

    A public case holds the reference and the qparams itself, and the student's values in ``when_off`` (a case
    with no output off has none: there the values are the reference's, within 1 LSB); a hidden case holds the
    student's in ``result``, the reference and the qparams in the expected evidence."""
    found = {}
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if not isinstance(got, dict):
            continue
        if isinstance(got.get("when_off"), dict) and isinstance(got.get("reference"), list):
            if "more_than_1_lsb_off" not in got:  # another shape
                continue
            ours, params, shape = [round(v) for v in got["reference"]], got.get("params"), got.get("shape")
            values = got["when_off"].get("values", ours) if got["more_than_1_lsb_off"] else ours
        elif isinstance(got.get("result"), dict) and isinstance(want, dict) and isinstance(want.get("reference"), dict):
            result, theirs = got["result"], want["reference"]
            if result.get("shape") != theirs.get("shape"):
                continue
            values, ours, params, shape = (
                result.get("values"),
                theirs.get("values"),
                want.get("params"),
                theirs["shape"],
            )
        else:
            continue
        if (
            isinstance(values, list)
            and isinstance(ours, list)
            and isinstance(params, dict)
            and isinstance(shape, list)
            and shape
            and len(values) == len(ours)
        ):
            found[case] = (values, ours, params, shape[-1])
    return found


def wrap(number: float) -> int:
    """What int32 → int8 makes of an integer: it wraps around."""
    return (round(number) + 128) % 256 - 128


def clamp(number: float) -> float:
    return max(-128.0, min(127.0, number))


def free(reference: list[int]) -> list[int]:
    """The positions where the reference did not saturate: there its value is the rescaled acc + out_zp (± 1)."""
    return [i for i, r in enumerate(reference) if -128 < r < 127]


def wrong(values: list[float], reference: list[int], positions: list[int] | None = None) -> list[int]:
    places = range(len(reference)) if positions is None else positions
    return [i for i in places if abs(values[i] - reference[i]) > 1]


def predicts(seen: Any, expected: Any, predict: Any) -> bool:
    """On every case, every unsaturated output is ``predict(reference, params)`` (± 1, also across a wrap-around),
    and somewhere the prediction is not the reference itself."""
    found = outputs(seen, expected)
    differs = False
    for values, reference, params, _ in found.values():
        for i in free(reference):
            guess = predict(reference[i], params)
            if abs(wrap(values[i] - guess)) > 1:
                return False
            differs = differs or abs(guess - reference[i]) > 1
    return bool(found) and differs


def offsets_constant(values: list[float], reference: list[int], columns: int, by_column: bool) -> bool | None:
    """Where neither saturated, is (yours − reference) the same (± 1) along each output column (or each row)?
    None when there is too little to tell."""
    groups: dict[int, list[float]] = {}
    for i in free(reference):
        if -128 < values[i] < 127:
            groups.setdefault(i % columns if by_column else i // columns, []).append(values[i] - reference[i])
    if sum(len(g) for g in groups.values()) < 4:
        return None
    return all(max(g) - min(g) <= 2 for g in groups.values())


def per_column(seen: Any, expected: Any) -> tuple[bool, bool]:
    """(in every case that is off, the offsets are constant along each output column, and in some case most
    outputs are off; the case whose input zero point is 0 is off too)."""
    found = outputs(seen, expected)
    constant, mostly_off, zero_point_free_off = bool(found), False, False
    for values, reference, params, columns in found.values():
        off = wrong(values, reference)
        if not off:
            continue
        mostly_off = mostly_off or 4 * len(off) >= 3 * len(reference)
        zero_point_free_off = zero_point_free_off or params.get("x_zp") == 0
        if offsets_constant(values, reference, columns, by_column=True) is not True:
            constant = False
    return constant and mostly_off, zero_point_free_off


def output_scale_missing(seen: Any, expected: Any) -> bool:
    """acc · s_x s_w (the real value: a few units at most) + out_zp: everything near the output zero point."""
    return predicts(seen, expected, lambda r, p: clamp(round((r - p["out_zp"]) * p["out_scale"]) + p["out_zp"]))


def multiplier_inverted(seen: Any, expected: Any) -> bool:
    """acc · s_out / (s_x s_w): enormous, so every output sits at the bound on the side of its sign."""
    found = outputs(seen, expected)
    checked = 0
    for values, reference, params, _ in found.values():
        for i in free(reference):
            distance = reference[i] - params["out_zp"]
            if abs(distance) < 2:
                continue
            if values[i] != (127 if distance > 0 else -128):
                return False
            checked += 1
    return checked >= 4 and any(wrong(v, r, free(r)) for v, r, _, _ in found.values())


def bias_in_output_units(seen: Any, expected: Any) -> bool:
    """b_q (thousands of s_x s_w units) added as output units: the outputs that are off sit at one bound per column."""
    pinned = off = 0
    for values, reference, _, columns in outputs(seen, expected).values():
        bounds: dict[int, set[float]] = {}
        for i in wrong(values, reference):
            off += 1
            if values[i] in (127, -128):
                pinned += 1
                bounds.setdefault(i % columns, set()).add(values[i])
        if any(len(b) > 1 for b in bounds.values()):
            return False
    return off >= 4 and pinned >= 0.9 * off


def wrapped_not_clamped(seen: Any, expected: Any) -> bool:
    """Every unsaturated output right; most of the saturated ones wrapped around (and not to a bound)."""
    saturated = wrapped = 0
    for values, reference, _, _ in outputs(seen, expected).values():
        if wrong(values, reference, free(reference)):
            return False
        for i, r in enumerate(reference):
            if not -128 < r < 127:
                saturated += 1
                wrapped += abs(values[i] - r) > 1 and values[i] not in (127, -128)
    return wrapped > 0 and 2 * wrapped >= saturated


def output_zero_point_missing(seen: Any, expected: Any) -> bool:
    """Every output off by the output zero point: r − out_zp (clamped)."""
    return predicts(seen, expected, lambda r, p: clamp(r - p["out_zp"]))


def output_zero_point_after_clamp(seen: Any, expected: Any) -> bool:
    """Clamped before out_zp is added, then wrapped by the int8 cast."""
    return predicts(seen, expected, lambda r, p: wrap(clamp(r - p["out_zp"]) + p["out_zp"]))


def _collapsed(values: list[float], reference: list[int], columns: int) -> bool:
    """Most outputs off, and each output column nearly constant where the reference's vary: an accumulator that
    stayed in int8 holds a few units at most, so only the bias and the zero point are left."""
    if 4 * len(wrong(values, reference)) < 3 * len(reference):
        return False
    spread_mine, spread_theirs = [], []
    for column in range(columns):
        mine, theirs = values[column::columns], reference[column::columns]
        spread_mine.append(max(mine) - min(mine))
        spread_theirs.append(max(theirs) - min(theirs))
    return max(spread_mine) <= 4 and max(spread_theirs) >= 20


def computed_in_int8(seen: Any, expected: Any) -> bool:
    """Everything computed in int8 (the sums collapse), or only the subtraction: with the input zero point at -128
    (x_q − x_zp leaves int8) almost every output is off, without a pattern per column or per row, while a zero point
    of 0 keeps the outputs right, and a small one keeps them (nearly all) right, or whole rows of them where no
    input lies near the bound."""
    found = outputs(seen, expected)
    if found and all(_collapsed(values, reference, columns) for values, reference, _, columns in found.values()):
        return True
    seen_it = False
    for values, reference, params, columns in found.values():
        off = wrong(values, reference)
        if params.get("x_zp") == 0 and off:
            return False
        rows = {i // columns for i in off}
        if params.get("x_zp") != -128 and 4 * len(off) > len(reference) and len(rows) * columns >= len(reference):
            return False  # a small zero point leaves int8 only for the inputs near the bound: some rows stay right
        if params.get("x_zp") == -128 and 5 * len(off) >= 4 * len(reference):
            by_column = offsets_constant(values, reference, columns, by_column=True)
            by_row = offsets_constant(values, reference, columns, by_column=False)
            seen_it = seen_it or not (by_column or by_row)
    return seen_it


def input_zero_point_missing(seen: Any, expected: Any) -> bool:
    """Off by a constant per output column (z_x · Σ w), and right where the input zero point is 0."""
    constant, zero_point_free_off = per_column(seen, expected)
    return constant and not zero_point_free_off


def bias_missing(seen: Any, expected: Any) -> bool:
    """Off by a constant per output column (its bias), whatever the input zero point."""
    constant, zero_point_free_off = per_column(seen, expected)
    return constant and zero_point_free_off


def weight_zero_point_subtracted(seen: Any, expected: Any) -> bool:
    """Off by a constant per row (z_x · Σ (q_x − z_x)), and right where the input zero point is 0."""
    rows = []
    for values, reference, params, columns in outputs(seen, expected).values():
        off = wrong(values, reference)
        if params.get("x_zp") == 0 and off:
            return False
        if off:
            rows.append(offsets_constant(values, reference, columns, by_column=False))
    decided = [r for r in rows if r is not None]
    return bool(decided) and 2 * decided.count(True) >= len(decided)


def few_overflow(seen: Any, expected: Any) -> bool:
    """In no case are most outputs wrong, but some are: the few whose sums overflow 16 bits."""
    found = outputs(seen, expected)
    if set(found) != set(diagnosis.cases(expected)):
        return False
    wrong_somewhere = False
    for values, reference, _, _ in found.values():
        off = wrong(values, reference)
        if 2 * len(off) > len(reference):
            return False
        wrong_somewhere = wrong_somewhere or bool(off)
    return wrong_somewhere


def int16_accumulated(seen: Any, expected: Any) -> bool:
    """torch refused int16 (a matmul of Short), or a few outputs overflowed."""
    return int16_refused(seen, expected) or few_overflow(seen, expected)


# --- practice after a mistake (issue 50): one idea each, on tensors of their own -------------------------


def _int8(values: list[int], shape: tuple[int, ...]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int8).reshape(shape)


def _accumulate_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, int]]:
    """(title, x_q, w_q, x_zp): a 3-D batch near the top of int8 with x_zp = -128, a 2-D one with x_zp = 0 and one
    with x_zp = 7; the weights are (out, in) with out ≠ in."""
    near_top = _int8([127, 120, -128, 100, 127, 90, 127, 127, 127, 127, -5, 64] * 2, (2, 3, 4))
    weight = _int8([127, 127, 127, 127, -127, 50, 3, -60, 20, -1, 127, 8], (3, 4))
    small = _int8([3, -2, 1, 0, -4, 5, 2, 2], (2, 4))
    return [
        ("x_q 是 (2, 3, 4) 的 3 維 batch，x_zp = -128，w_q 是 (3, 4)", near_top, weight, -128),
        ("x_q 是 (2, 4)，x_zp = 0，w_q 是 (3, 4)", small, weight, 0),
        ("x_q 是 (2, 4)，x_zp = 7，w_q 是 (2, 4)", small, weight[:2], 7),
    ]


def _shown(got: Any) -> str:
    if isinstance(got, torch.Tensor):
        return f"{got.tolist()}（{str(got.dtype).removeprefix('torch.')}，形狀 {tuple(got.shape)}）"
    return repr(got)


def _check_accumulate(accumulate: Any) -> list[str]:
    problems = []
    for title, x_q, w_q, x_zp in _accumulate_cases():
        want = (x_q.to(torch.int32) - x_zp) @ w_q.to(torch.int32).T
        got = accumulate(x_q.clone(), w_q.clone(), x_zp)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.int32 or not torch.equal(got, want):
            problems.append(f"{title}：應該是 {_shown(want)}，你的是 {_shown(got)}")
    return problems


ACCUMULATE = Practice(
    "accumulate",
    "寫 accumulate(x_q, w_q, x_zp)：int8 的輸入 x_q（最後一維是 in_features，前面可以有好幾維）、int8 的 weight w_q"
    "（形狀 (out, in)，zero point 是 0）和輸入的 zero point x_zp，回傳 int32 的累加器 acc，單位是 s_x · s_w。"
    "檢查用一個 3 維、數值貼近 127 而 x_zp = -128 的 batch，和兩個 2 維的小輸入（x_zp 是 0 與 7）。",
    "import torch\n\n\ndef accumulate(x_q, w_q, x_zp):\n    raise NotImplementedError()\n",
    _check_accumulate,
    "一步一步來：先把兩邊都 .to(torch.int32)（int8 減法、int16 相乘相加都會繞回），再只從 x 減 x_zp，"
    "最後用 @ 乘上 weight 的轉置 .T（@ 對最後一維運算，3 維也適用）。",
    "import torch\n\n\n"
    "def accumulate(x_q, w_q, x_zp):\n"
    "    return (x_q.to(torch.int32) - x_zp) @ w_q.to(torch.int32).T\n",
    "x_zp = -128 時，x_q = 127 減出來的 255 已經超出 int8，四個這樣的乘積加起來也超出 int16：所以一開始就轉 int32。",
)


_UNIT_CASES = (
    # (title, acc, b_q, x_scale, w_scale, out_scale): every (acc + b_q) · multiplier is a whole number
    ("x_scale=0.5、w_scale=0.25、out_scale=2.0", [160, -320, 48, 0], [16, 16, -64, 32], 0.5, 0.25, 2.0),
    ("x_scale=0.25、w_scale=0.03125、out_scale=0.5", [640, -128, 64, 1280], [-64, 256, 0, 128], 0.25, 0.03125, 0.5),
)


def _check_output_units(output_units: Any) -> list[str]:
    problems = []
    for title, acc, b_q, x_scale, w_scale, out_scale in _UNIT_CASES:
        acc_t, b_t = torch.tensor(acc, dtype=torch.int32), torch.tensor(b_q, dtype=torch.int32)
        want = [(a + b) * x_scale * w_scale / out_scale for a, b in zip(acc, b_q, strict=True)]
        got = output_units(acc_t.clone(), b_t.clone(), x_scale, w_scale, out_scale)
        values = got.detach().to(torch.float64).flatten().tolist() if isinstance(got, torch.Tensor) else None
        if (
            values is None
            or len(values) != len(want)
            or any(abs(v - w) > 0.01 for v, w in zip(values, want, strict=True))
        ):
            shown = [round(v, 3) for v in values] if values is not None else repr(got)
            problems.append(f"{title}，acc = {acc}，b_q = {b_q}：應該是 {[int(w) for w in want]}，你的是 {shown}")
    return problems


OUTPUT_UNITS = Practice(
    "output_units",
    "寫 output_units(acc, b_q, x_scale, w_scale, out_scale)：acc 是 int32 的累加器、b_q 是 int32 的 bias，"
    "兩者的單位都是 s_x · s_w；回傳換成輸出整數格數（還沒加 zero point、還沒 clamp）的 tensor，捨入成整數。"
    "檢查用兩組 scale 都是 2 的次方的小例子，答案剛好是整數。",
    "import torch\n\n\ndef output_units(acc, b_q, x_scale, w_scale, out_scale):\n    raise NotImplementedError()\n",
    _check_output_units,
    "單位相同才能相加：b_q 和 acc 都是 s_x · s_w 的格數，所以先 acc + b_q。"
    "一格 s_x · s_w 是 (s_x · s_w / s_out) 格輸出：乘上這個倍數（很小的數），再 torch.round。",
    "import torch\n\n\n"
    "def output_units(acc, b_q, x_scale, w_scale, out_scale):\n"
    "    multiplier = x_scale * w_scale / out_scale\n"
    "    return torch.round((acc + b_q).to(torch.float32) * multiplier).to(torch.int32)\n",
    "第一組的倍數是 0.5 · 0.25 / 2 = 1/16：160 + 16 格 s_x · s_w 是 11 格輸出。",
)


def _check_to_int8(to_int8: Any) -> list[str]:
    y = torch.tensor([-400, -140, -1, 0, 50, 120, 300], dtype=torch.int32)
    problems = []
    for out_zp in (10, -20, 0):
        want = (y + out_zp).clamp(-128, 127).to(torch.int8)
        got = to_int8(y.clone(), out_zp)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.int8 or not torch.equal(got, want):
            problems.append(f"y = {y.tolist()}，out_zp = {out_zp}：應該是 {_shown(want)}，你的是 {_shown(got)}")
    return problems


TO_INT8 = Practice(
    "to_int8",
    "寫 to_int8(y, out_zp)：y 是已經換成輸出格數的 int32 tensor（還沒加 zero point），回傳最後的 int8 輸出："
    "activation 是 affine 的 int8，範圍 [-128, 127]，超出的要停在端點。"
    "檢查用 [-400, -140, -1, 0, 50, 120, 300]，out_zp 是 10、-20 與 0。",
    "import torch\n\n\ndef to_int8(y, out_zp):\n    raise NotImplementedError()\n",
    _check_to_int8,
    "順序是：加 out_zp → clamp(-128, 127) → .to(torch.int8)。先夾再加，加完又可能超出 int8；"
    "不夾就轉型，300 會繞回成 44；[-127, 127] 是 weight 的範圍，不是 activation 的。",
    "import torch\n\n\ndef to_int8(y, out_zp):\n    return (y + out_zp).clamp(-128, 127).to(torch.int8)\n",
    "int8_linear 的最後一行就是這個：回傳 int8，下一層才能直接拿去當輸入。",
)


MISCONCEPTIONS = (
    Misconception(
        "weight_not_transposed",
        "weight 沒有轉置",
        "linear 的 weight 存成 (out_features, in_features)，輸出是 x @ W.T。你直接乘 w_q，形狀對不上（只有 in 與 out "
        "剛好相等時才不出錯，但那樣算出來的也是別的東西）。累加寫成 x @ w_q.to(torch.int32).T。",
        RULES,
        public=shapes_mismatch,
        practice=ACCUMULATE,
    ),
    Misconception(
        "two_d_only",
        "只處理了 2 維的輸入",
        "torch.mm 只收 2 維的矩陣，x_q 卻可能是 (batch, seq, in_features) 這種 3 維的 tensor。"
        "linear 是對最後一維做的：改用 @（torch.matmul），2 維、3 維都適用。",
        RULES,
        public=only_batched_raised,
        practice=ACCUMULATE,
    ),
    Misconception(
        "returns_not_int8",
        "回傳的不是 int8",
        "int8_linear 要回傳 int8 tensor，下一層才能直接拿去當 int8 輸入。你回傳的是 int32（或浮點數），"
        "數值也許都在範圍裡，dtype 卻不對。clamp 之後再 .to(torch.int8)。",
        RULES,
        public=not_int8,
        practice=TO_INT8,
    ),
    Misconception(
        "forgets_output_scale",
        "重新量化時沒有除以輸出的 scale",
        "acc 的單位是 s_x · s_w；乘上 s_x · s_w 只得到 fp32 的實際數值，還要再除以 out_scale，才是輸出的整數格數。"
        "你少了這一步，結果幾乎都落在輸出的 zero point 附近。倍數要用 x_scale * w_scale / out_scale。",
        BY_HAND,
        public=output_scale_missing,
        practice=OUTPUT_UNITS,
    ),
    Misconception(
        "inverted_multiplier",
        "重新量化的倍數寫反了",
        "acc 是 s_x · s_w 單位的整數，換成輸出的整數格數是乘上 s_x · s_w / s_out。你乘的是 s_out / (s_x · s_w)，"
        "數值被放大了好幾萬倍，幾乎每個輸出都卡在 -128 或 127。倍數要用 x_scale * w_scale / out_scale。",
        BY_HAND,
        public=multiplier_inverted,
        practice=OUTPUT_UNITS,
    ),
    Misconception(
        "bias_after_requant",
        "bias 在重新量化之後才加",
        "b_q 是 s_x · s_w 單位的整數（M05-2 的 int32 bias），和 acc 同一個單位。你在重新量化之後才加（或把它當成 fp32 的 "
        "bias 加在實數上），單位不對，bias 被放大了很多倍。bias 要在重新量化之前加進 int32 的 acc。",
        REFERENCE,
        public=bias_in_output_units,
        practice=OUTPUT_UNITS,
    ),
    Misconception(
        "forgets_output_zero_point",
        "沒有加上輸出的 zero point",
        "輸出是 affine 量化：q_y = acc · s_x s_w / s_out + z_out。你少了 + out_zp，每個輸出都差了同一個 zero point，"
        "zero point 離 0 越遠，差得越多。重新量化之後、clamp 之前加上 out_zp。",
        BY_HAND,
        public=output_zero_point_missing,
        practice=TO_INT8,
    ),
    Misconception(
        "zero_point_after_clamp",
        "先 clamp 才加輸出的 zero point",
        "clamp 要夾的是最後的整數：加上 out_zp 之後才知道有沒有超出 [-128, 127]。你先夾再加，"
        "加完又可能超出 int8，轉型時繞回成相反的符號，沒超出的也被夾錯了位置。先加 out_zp，最後才 clamp。",
        BY_HAND,
        public=output_zero_point_after_clamp,
        practice=TO_INT8,
    ),
    Misconception(
        "no_clamp",
        "沒有 clamp 就轉成 int8",
        "超出 [-128, 127] 的 int32 直接 .to(torch.int8) 不會停在邊界，而是繞回：128 變成 -128、200 變成 -56。"
        "輸出超出校準範圍時就會這樣。轉型之前先 clamp(-128, 127)，讓它飽和。",
        RULES,
        public=wrapped_not_clamped,
        practice=TO_INT8,
    ),
    Misconception(
        "narrow_output_range",
        "把輸出夾在 [-127, 127]",
        "[-127, 127] 是 weight 的 symmetric 範圍；activation 的輸出是 affine 的 int8，範圍是完整的 [-128, 127]。"
        "你夾掉了 -128，遠低於範圍的輸出應該飽和在 -128，你的卻停在 -127。轉型之前用 clamp(-128, 127)。",
        RULES,
        public=lowest_cut,
        practice=TO_INT8,
    ),
    Misconception(
        "int16_accumulator",
        "用 int16 累加",
        "int8 × int8 的一項放得進 int16，但 linear 要把 in_features 項加起來，輸入範圍大的時候總和遠超過 32767，"
        "int16 會溢位繞回。累加要用 int32：兩邊都先 .to(torch.int32) 再相乘相加。",
        REFERENCE,
        public=int16_accumulated,
        practice=ACCUMULATE,
    ),
    Misconception(
        "stays_in_int8",
        "在 int8 裡減 zero point 或累加",
        "int8 tensor 減掉 Python 的 int、或兩個 int8 tensor 相乘相加，結果都還是 int8，超出 [-128, 127] 就繞回："
        "zero point 是 -128 時，x_q = 100 減出來的 228 變成了負數。先 .to(torch.int32)，再減 zero point、再相乘累加。",
        RULES,
        public=computed_in_int8,
        practice=ACCUMULATE,
    ),
    Misconception(
        "forgets_input_zero_point",
        "累加前沒有減掉輸入的 zero point",
        "x ≈ s_x · (q_x − z_x)：activation 是 affine 量化，q_x 本身不是 x 的倍數，要先減掉 z_x。"
        "你直接拿 q_x 相乘，每個輸出都多了 z_x · Σ w，zero point 離 0 越遠，差得越多。累加前先算 x_q.to(torch.int32) - x_zp。",
        BY_HAND,
        public=input_zero_point_missing,
        practice=ACCUMULATE,
    ),
    Misconception(
        "no_bias",
        "忘了加 bias",
        "int8 linear 的 bias 是另外傳進來的 b_q（int32，單位 s_x · s_w），不會自己出現在 acc 裡。"
        "你沒有加它，每個輸出 channel 都差了自己的 bias。acc 算完之後、重新量化之前加上 b_q。",
        BY_HAND,
        public=bias_missing,
        practice=OUTPUT_UNITS,
    ),
    Misconception(
        "weight_zero_point",
        "weight 也減了輸入的 zero point",
        "weight 是 per-tensor symmetric，zero point 是 0，w ≈ s_w · q_w，不用減任何東西。"
        "x_zp 只屬於輸入；你把它也從 w_q 減掉，累加結果多了一項和輸入有關的誤差。只對 x_q 減 x_zp。",
        RULES,
        public=weight_zero_point_subtracted,
        practice=ACCUMULATE,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "int8_linear",
        "int8_linear：只用整數運算的 int8 linear",
        ("int8_linear",),
        {
            "typical_inputs": typical_inputs,
            "full_range_inputs": full_range_inputs,
            "non_negative_calibration": non_negative_calibration,
            "symmetric_calibration": symmetric_calibration,
            "batched_full_range": batched_full_range,
        },
        tolerances={"reference": REFERENCE_TOLERANCE},
        misconceptions=MISCONCEPTIONS,
    ),
)
