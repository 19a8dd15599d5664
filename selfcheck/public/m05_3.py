"""Public cases of M05-3 FixedQParams 與整數運算 (int8_linear) on the chapter's own layer.

The layer is section B's ``Linear(16, 6)`` quantized with activations, a per-tensor weight
and the output (bias kept fp32), calibrated and converted. The student's ``int8_linear``
gets int8 inputs and is compared with torchao's reference representation of that quantized
linear (what ``convert_pt2e(..., use_reference_representation=True)`` puts in the graph).
Correct solutions may round differently (1 LSB is allowed), so the evidence is canonical:
dtype, shape, and how many outputs are more than 1 LSB away (0 when right).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError
from selfcheck.misconceptions import Misconception, Section

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


def quantized_layer(seed: int) -> dict[str, Any]:
    """Section B's layer, quantized and converted: its qparams, int8 weight, fp32 bias and int32 bias."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    layer = torch.nn.Linear(16, 6).eval()
    with torch.no_grad():
        layer.bias.add_(0.5)
    prepared = prepare_pt2e(export_module(layer, seeded_inputs(seed, (32, 16))), linear_quantizer())
    with torch.no_grad():
        for step in range(4):
            prepared(*seeded_inputs(seed * 1000 + step, (32, 16)))
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
    """dtype, shape, and the number of outputs more than 1 LSB from the reference."""
    out = call_int8_linear(ns, layer, x_q)
    if type(out) is not torch.Tensor:
        raise EvidenceError(f"int8_linear 應該回傳 torch.Tensor，看到 {type(out).__name__}")
    want = reference(layer, x_q)
    record: dict[str, Any] = {"dtype": str(out.dtype).removeprefix("torch."), "shape": list(out.shape)}
    if tuple(out.shape) == tuple(want.shape):
        record["more_than_1_lsb_off"] = int(((out.detach().to(torch.int64) - want.to(torch.int64)).abs() > 1).sum())
    return record


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


def int16_refused(seen: Any, expected: Any) -> bool:
    return any("'Short'" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen))


MISCONCEPTIONS = (
    Misconception(
        "weight_not_transposed",
        "weight 沒有轉置",
        "linear 的 weight 存成 (out_features, in_features)，輸出是 x @ W.T。你直接乘 w_q，形狀對不上（只有 in 與 out "
        "剛好相等時才不出錯，但那樣算出來的也是別的東西）。累加寫成 x @ w_q.to(torch.int32).T。",
        RULES,
        public=shapes_mismatch,
    ),
    Misconception(
        "two_d_only",
        "只處理了 2 維的輸入",
        "torch.mm 只收 2 維的矩陣，x_q 卻可能是 (batch, seq, in_features) 這種 3 維的 tensor。"
        "linear 是對最後一維做的：改用 @（torch.matmul），2 維、3 維都適用。",
        RULES,
    ),
    Misconception(
        "returns_not_int8",
        "回傳的不是 int8",
        "int8_linear 要回傳 int8 tensor，下一層才能直接拿去當 int8 輸入。你回傳的是 int32（或浮點數），"
        "數值也許都在範圍裡，dtype 卻不對。clamp 之後再 .to(torch.int8)。",
        RULES,
        public=not_int8,
    ),
    Misconception(
        "forgets_output_scale",
        "重新量化時沒有除以輸出的 scale",
        "acc 的單位是 s_x · s_w；乘上 s_x · s_w 只得到 fp32 的實際數值，還要再除以 out_scale，才是輸出的整數格數。"
        "你少了這一步，結果幾乎都落在輸出的 zero point 附近。倍數要用 x_scale * w_scale / out_scale。",
        BY_HAND,
    ),
    Misconception(
        "inverted_multiplier",
        "重新量化的倍數寫反了",
        "acc 是 s_x · s_w 單位的整數，換成輸出的整數格數是乘上 s_x · s_w / s_out。你乘的是 s_out / (s_x · s_w)，"
        "數值被放大了好幾萬倍，幾乎每個輸出都卡在 -128 或 127。倍數要用 x_scale * w_scale / out_scale。",
        BY_HAND,
    ),
    Misconception(
        "bias_after_requant",
        "bias 在重新量化之後才加",
        "b_q 是 s_x · s_w 單位的整數（M05-2 的 int32 bias），和 acc 同一個單位。你在重新量化之後才加（或把它當成 fp32 的 "
        "bias 加在實數上），單位不對，bias 被放大了很多倍。bias 要在重新量化之前加進 int32 的 acc。",
        REFERENCE,
    ),
    Misconception(
        "forgets_output_zero_point",
        "沒有加上輸出的 zero point",
        "輸出是 affine 量化：q_y = acc · s_x s_w / s_out + z_out。你少了 + out_zp，每個輸出都差了同一個 zero point，"
        "zero point 離 0 越遠，差得越多。重新量化之後、clamp 之前加上 out_zp。",
        BY_HAND,
    ),
    Misconception(
        "zero_point_after_clamp",
        "先 clamp 才加輸出的 zero point",
        "clamp 要夾的是最後的整數：加上 out_zp 之後才知道有沒有超出 [-128, 127]。你先夾再加，"
        "加完又可能超出 int8，轉型時繞回成相反的符號，沒超出的也被夾錯了位置。先加 out_zp，最後才 clamp。",
        BY_HAND,
    ),
    Misconception(
        "no_clamp",
        "沒有 clamp 就轉成 int8",
        "超出 [-128, 127] 的 int32 直接 .to(torch.int8) 不會停在邊界，而是繞回：128 變成 -128、200 變成 -56。"
        "輸出超出校準範圍時就會這樣。轉型之前先 clamp(-128, 127)，讓它飽和。",
        RULES,
    ),
    Misconception(
        "narrow_output_range",
        "把輸出夾在 [-127, 127]",
        "[-127, 127] 是 weight 的 symmetric 範圍；activation 的輸出是 affine 的 int8，範圍是完整的 [-128, 127]。"
        "你夾掉了 -128，遠低於範圍的輸出應該飽和在 -128，你的卻停在 -127。轉型之前用 clamp(-128, 127)。",
        RULES,
    ),
    Misconception(
        "int16_accumulator",
        "用 int16 累加",
        "int8 × int8 的一項放得進 int16，但 linear 要把 in_features 項加起來，輸入範圍大的時候總和遠超過 32767，"
        "int16 會溢位繞回。累加要用 int32：兩邊都先 .to(torch.int32) 再相乘相加。",
        REFERENCE,
        public=int16_refused,
    ),
    Misconception(
        "stays_in_int8",
        "在 int8 裡減 zero point 或累加",
        "int8 tensor 減掉 Python 的 int、或兩個 int8 tensor 相乘相加，結果都還是 int8，超出 [-128, 127] 就繞回："
        "zero point 是 -128 時，x_q = 100 減出來的 228 變成了負數。先 .to(torch.int32)，再減 zero point、再相乘累加。",
        RULES,
    ),
    Misconception(
        "forgets_input_zero_point",
        "累加前沒有減掉輸入的 zero point",
        "x ≈ s_x · (q_x − z_x)：activation 是 affine 量化，q_x 本身不是 x 的倍數，要先減掉 z_x。"
        "你直接拿 q_x 相乘，每個輸出都多了 z_x · Σ w，zero point 離 0 越遠，差得越多。累加前先算 x_q.to(torch.int32) - x_zp。",
        BY_HAND,
    ),
    Misconception(
        "no_bias",
        "忘了加 bias",
        "int8 linear 的 bias 是另外傳進來的 b_q（int32，單位 s_x · s_w），不會自己出現在 acc 裡。"
        "你沒有加它，每個輸出 channel 都差了自己的 bias。acc 算完之後、重新量化之前加上 b_q。",
        BY_HAND,
    ),
    Misconception(
        "weight_zero_point",
        "weight 也減了輸入的 zero point",
        "weight 是 per-tensor symmetric，zero point 是 0，w ≈ s_w · q_w，不用減任何東西。"
        "x_zp 只屬於輸入；你把它也從 w_q 減掉，累加結果多了一項和輸入有關的誤差。只對 x_q 減 x_zp。",
        RULES,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "int8_linear",
        "int8_linear：只用整數運算的 int8 linear",
        ("int8_linear",),
        {"typical_inputs": typical_inputs, "full_range_inputs": full_range_inputs},
        misconceptions=MISCONCEPTIONS,
    ),
)
