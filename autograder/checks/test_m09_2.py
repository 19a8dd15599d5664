"""Hidden checks of M09-2: DynamicLinearQuantizer (every linear's input int8 dynamic, weight int8 per channel).

Each check reads ``selfcheck.public.m09_2.dynamic_record`` of the three hidden TinyLMs (pre-LN with
bias, without bias and with ReLU, post-LN) and compares one part with the answer key's.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m09_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck.public import m09_2 as public

CASES = {
    "pre_ln": "pre-LN、有 bias 的 TinyLM",
    "no_bias_relu": "linear 沒有 bias、MLP 用 ReLU 的 TinyLM",
    "post_ln": "post-LN 的 TinyLM",
    "composed": "module 名字和深度都和 TinyLM 不同的模型，你的 Quantizer 夾在 EmbeddingQuantizer 與 4-bit 的 XNNPACKQuantizer 之間",
}


def _cases(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    for case, where in CASES.items():
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and all(k in got for k in want), f"{where}：證據格式不對")
        out.append((where, got, want))
    return out


def _step_text(step: dict[str, Any]) -> str:
    if not isinstance(step, dict):
        return repr(step)
    extra = f" axis={step.get('axis')}" if "axis" in step else ""
    zero = "" if step.get("zero_points_zero", True) else "，zero point 不全是 0"
    return (
        f"{step.get('op')}（qparams 來自 {step.get('qparams')}，{step.get('dtype')} {step.get('range')}{extra}{zero}）"
    )


def _path_text(path: Any) -> str:
    if not isinstance(path, dict):
        return "（不是 float 也不是 q/dq：沒有這條邊）" if path is None else repr(path)
    steps = path.get("steps") or []
    if not steps:
        return "不量化（float 直接進來）"
    return " → ".join(_step_text(s) for s in steps)


def _instance_text(instance: Any) -> str:
    if not isinstance(instance, list) or len(instance) != 3:
        return "沒有這個實例" if instance is None else repr(instance)
    settings, source, readers = instance
    return f"{settings}，觀察 {source}、給 {'、'.join(map(str, readers))} 讀"


def _linear(got: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    mine = got["converted"].get("linears", {}).get(name) if isinstance(got.get("converted"), dict) else None
    expect(isinstance(mine, dict), f"{where}：convert 之後的圖上找不到 linear {name}")
    return mine


def _compare_part(got: dict[str, Any], want: dict[str, Any], where: str, part: str, words: str) -> None:
    for name, expected in want["converted"]["linears"].items():
        mine = _linear(got, where, name)
        if mine.get(part) != expected[part]:
            raise Fail(
                f"{where}：{name} 的{words}應該是 {_path_text(expected[part])}，你的是 {_path_text(mine.get(part))}"
            )


@check(
    "dynamic_linear_quantizer", 2, "每個 linear 的輸入：choose_qparams.tensor → quantize → dequantize，int8 [-128, 127]"
)
def test_inputs_dynamic(seen, expected):
    for where, got, want in _cases(seen, expected):
        _compare_part(got, want, where, "input", "輸入")


@check(
    "dynamic_linear_quantizer",
    2,
    "每個 linear 的權重：int8 常數 → dequantize_per_channel（axis 0、[-127, 127]、zero point 全為 0）",
)
def test_weights_per_channel(seen, expected):
    for where, got, want in _cases(seen, expected):
        _compare_part(got, want, where, "weight", "權重")


@check("dynamic_linear_quantizer", 1, "linear 的輸出與 bias 都留在 float（沒有 output 規格、bias 不量化）")
def test_outputs_float(seen, expected):
    for where, got, want in _cases(seen, expected):
        _compare_part(got, want, where, "bias", "bias")
        for name, expected_linear in want["converted"]["linears"].items():
            mine = _linear(got, where, name)
            expect(
                mine.get("output_quantized") == expected_linear["output_quantized"],
                f"{where}：{name} 的輸出應該留在 float，你的在 convert 之後多了 quantize（linear 不要 output 規格）"
                if mine.get("output_quantized")
                else f"{where}：{name} 的輸出應該被量化，你的沒有",
            )


@check(
    "dynamic_linear_quantizer",
    2,
    "只標 linear：layer_norm、softmax、matmul、gelu / relu、embedding、add 沒有標籤，也不讀 dequantize 的值",
)
def test_nothing_else(seen, expected):
    for where, got, want in _cases(seen, expected):
        extra = sorted(
            f"{name}（{label.get('op') if isinstance(label, dict) else '?'}）"
            for name, label in got["labels"].items()
            if name not in want["labels"]
        )
        expect(not extra, f"{where}：{'、'.join(extra)} 不是 linear，不該有標籤，你的貼了")
        missing = sorted(
            f"{name}（{label.get('op')}）" for name, label in want["labels"].items() if name not in got["labels"]
        )
        expect(not missing, f"{where}：{'、'.join(missing)} 應該有標籤，你的圖上沒有（沒貼，或被拿掉了）")
        reads = got["converted"].get("float_ops_reading_dq")
        expect(
            reads == want["converted"]["float_ops_reading_dq"],
            f"{where}：convert 之後，{'、'.join(map(str, reads or [])) or '（沒有）'} 讀的是 dequantize 出來的值；"
            "只有 linear 的輸入該量化，其他 op 應該直接讀 float",
        )


@check(
    "dynamic_linear_quantizer", 1, "每個 linear 的標籤：輸入 dynamic int8 per-tensor affine、權重 per-channel symmetric"
)
def test_labels(seen, expected):
    for where, got, want in _cases(seen, expected):
        for name, label in want["labels"].items():
            mine = got["labels"].get(name)
            expect(isinstance(mine, dict), f"{where}：{name} 應該有標籤，你的沒有")
            for source, text in label["inputs"].items():
                expect(
                    mine.get("inputs", {}).get(source) == text,
                    f"{where}：{name} 的輸入邊 {source} 應該是 {text}，你的是 {mine.get('inputs', {}).get(source) or '沒有規格'}",
                )
            extra = sorted(set(mine.get("inputs", {})) - set(label["inputs"]))
            expect(not extra, f"{where}：{name} 的輸入邊 {'、'.join(extra)} 不該有規格，你的貼了")
            expect(
                mine.get("output") == label["output"],
                f"{where}：{name} 的輸出不該有規格，你的是 {mine.get('output')}",
            )


@check(
    "dynamic_linear_quantizer",
    1,
    "prepare 之後的 observer：每個權重一個 PerChannelMinMaxObserver，q / k / v 共用一個 PlaceholderObserver",
)
def test_observers(seen, expected):
    for where, got, want in _cases(seen, expected):
        expect(
            got["prepared"].get("classes") == want["prepared"]["classes"],
            f"{where}：observer 實例的類別與個數應該是 {want['prepared']['classes']}，你的是 {got['prepared'].get('classes')}",
        )
        mine = got["prepared"].get("instances")
        for index, instance in enumerate(want["prepared"]["instances"]):
            found = mine[index] if isinstance(mine, list) and index < len(mine) else None
            expect(
                found == instance,
                f"{where}：第 {index + 1} 個 observer 實例應該是 {_instance_text(instance)}；你的是 {_instance_text(found)}",
            )


@check(
    "dynamic_linear_quantizer",
    1,
    "convert 之後的 op 數：choose_qparams.tensor 每個不同的輸入一個，沒有固定 qparams 的 quantize",
)
def test_counts(seen, expected):
    # the activations' ops only: how a weight is dequantized (per channel or per tensor) is the weight checks' idea
    for where, got, want in _cases(seen, expected):
        mine, key = _activation_ops(got["converted"].get("counts")), _activation_ops(want["converted"]["counts"])
        expect(
            mine == key,
            f"{where}：convert 之後 activation 的 quantized_decomposed op 個數應該是 {key}，你的是 {mine}",
        )


WEIGHT_DEQUANTIZE = ("dequantize_per_channel.default", "dequantize_per_tensor.default")
"""How a weight reaches a linear after convert (a static activation's own dequantize also shows its quantize)."""


def _activation_ops(counts: Any) -> Any:
    """``counts`` without the weights' dequantize ops (anything but a dict of counts as it is)."""
    if not isinstance(counts, dict):
        return counts
    return {op: n for op, n in counts.items() if op not in WEIGHT_DEQUANTIZE}


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m09_2.py) --------

EXERCISE = "dynamic_linear_quantizer"
WEIGHT_CHECKS = ("test_weights_per_channel", "test_labels", "test_observers")


@detects(EXERCISE, "overwrites_other_labels")
def overwrites_other_labels(seen: Any, expected: Any) -> bool:
    return public.other_labels_lost(seen, expected)


@detects(EXERCISE, "annotated_not_set")
def annotated_not_set(seen: Any, expected: Any) -> bool:
    return public.relabelled_after(seen, expected)


@detects(EXERCISE, "bias_assumed")
def bias_assumed(seen: Any, expected: Any) -> bool:
    return public.crashes_without_bias(seen, expected)


@detects(EXERCISE, "bias_quantized")
def bias_quantized(seen: Any, expected: Any) -> bool:
    return public.quantizes_bias(seen, expected)


# every check that reads the bias-free TinyLM: the belief leaves all its linears unlabelled, so each property of
# them (labels, observers, the converted ops) is the same mistake seen from another side
@detects(
    EXERCISE,
    "skips_no_bias",
    explains=(
        "test_inputs_dynamic",
        "test_weights_per_channel",
        "test_nothing_else",
        "test_labels",
        "test_observers",
        "test_counts",
    ),
)
def skips_no_bias(seen: Any, expected: Any) -> bool:
    return public.skips_linears_without_bias(seen, expected)


@detects(EXERCISE, "some_linears_only")
def some_linears_only(seen: Any, expected: Any) -> bool:
    return public.misses_linears(seen, expected)


@detects(EXERCISE, "symmetric_activation")
def symmetric_activation(seen: Any, expected: Any) -> bool:
    return public.symmetric_dynamic(seen, expected)


@detects(EXERCISE, "static_activation")
def static_activation(seen: Any, expected: Any) -> bool:
    return public.static_inputs(seen, expected)


@detects(EXERCISE, "dynamic_with_observer")
def dynamic_with_observer(seen: Any, expected: Any) -> bool:
    return public.dynamic_with_observer(seen, expected)


@detects(EXERCISE, "activation_range", explains=("test_inputs_dynamic", "test_labels", "test_observers"))
def activation_range(seen: Any, expected: Any) -> bool:
    return public.input_range_differs(seen, expected)


@detects(EXERCISE, "weight_shared_with_input")
def weight_shared_with_input(seen: Any, expected: Any) -> bool:
    return public.weight_shares_input(seen, expected)


@detects(EXERCISE, "per_tensor_weights", explains=WEIGHT_CHECKS)
def per_tensor_weights(seen: Any, expected: Any) -> bool:
    return public.weights_per_tensor(seen, expected)


@detects(EXERCISE, "weight_axis", explains=WEIGHT_CHECKS)
def weight_axis(seen: Any, expected: Any) -> bool:
    return public.weight_axis_differs(seen, expected)


@detects(EXERCISE, "asymmetric_weights", explains=WEIGHT_CHECKS)
def asymmetric_weights(seen: Any, expected: Any) -> bool:
    return public.weights_asymmetric(seen, expected)


@detects(EXERCISE, "weight_range", explains=WEIGHT_CHECKS)
def weight_range(seen: Any, expected: Any) -> bool:
    return public.weight_range_differs(seen, expected)


@detects(EXERCISE, "output_shared_with_input")
def output_shared_with_input(seen: Any, expected: Any) -> bool:
    return public.output_shared(seen, expected)


@detects(EXERCISE, "output_spec")
def output_spec(seen: Any, expected: Any) -> bool:
    return public.output_labelled(seen, expected)


@detects(EXERCISE, "quantizes_other_ops")
def quantizes_other_ops(seen: Any, expected: Any) -> bool:
    return public.other_ops_labelled(seen, expected)
