"""Hidden checks of M09-2: DynamicLinearQuantizer (every linear's input int8 dynamic, weight int8 per channel).

Each check reads ``selfcheck.public.m09_2.dynamic_record`` of the three hidden TinyLMs (pre-LN with
bias, without bias and with ReLU, post-LN) and compares one part with the answer key's.

Assumptions a half-understanding bakes in, and the check that refutes each:
- a static activation spec (MinMaxObserver / HistogramObserver, ``is_dynamic`` left False): the
  input's qparams become constants → ``test_inputs_dynamic``, ``test_counts``, ``test_observers``;
- per-tensor weights, the weight range [-128, 127] or [-8, 7], asymmetric weights (per_channel_affine),
  the wrong axis → ``test_weights_per_channel``;
- an output spec on linear (static or dynamic), or a ``SharedQuantizationSpec`` tying the output to
  the input → ``test_outputs_float``;
- a ``SharedQuantizationSpec`` tying the weight to the input (one dynamic observer for both)
  → ``test_weights_per_channel``, ``test_observers``;
- layer_norm, softmax, matmul, gelu or embedding annotated as well → ``test_nothing_else``;
- the bias annotated → ``test_outputs_float``;
- linears without bias skipped, or ``node.args[2]`` read unguarded → every check (``no_bias_relu``,
  and ``post_ln`` on odd seeds);
- linears found by module name or only the attention's → ``test_inputs_dynamic``.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

CASES = {
    "pre_ln": "pre-LN、有 bias 的 TinyLM",
    "no_bias_relu": "linear 沒有 bias、MLP 用 ReLU 的 TinyLM",
    "post_ln": "post-LN 的 TinyLM",
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


def _linear(got: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    mine = got["converted"].get("linears", {}).get(name) if isinstance(got.get("converted"), dict) else None
    expect(isinstance(mine, dict), f"{where}：convert 之後找不到 {name}（linear）")
    return mine


def _compare_part(got: dict[str, Any], want: dict[str, Any], where: str, part: str, words: str) -> None:
    for name, expected in want["converted"]["linears"].items():
        mine = _linear(got, where, name)
        if mine.get(part) != expected[part]:
            raise Fail(f"{where}：{name} 的{words}預期 {_path_text(expected[part])}，看到 {_path_text(mine.get(part))}")


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
                f"{where}：{name} 的輸出預期{'有' if expected_linear['output_quantized'] else '沒有'} quantize，"
                f"看到{'有' if mine.get('output_quantized') else '沒有'}（linear 不要 output 規格）",
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
        expect(not extra, f"{where}：這些 node 不該有標籤：{'、'.join(extra)}")
        missing = sorted(set(want["labels"]) - set(got["labels"]))
        expect(not missing, f"{where}：這些 linear 沒有標籤：{'、'.join(missing)}")
        reads = got["converted"].get("float_ops_reading_dq")
        expect(
            reads == want["converted"]["float_ops_reading_dq"],
            f"{where}：convert 之後這些不是 linear 的 op 讀到 dequantize 的值：{reads}（只有 linear 該量化）",
        )


@check(
    "dynamic_linear_quantizer", 1, "每個 linear 的標籤：輸入 dynamic int8 per-tensor affine、權重 per-channel symmetric"
)
def test_labels(seen, expected):
    for where, got, want in _cases(seen, expected):
        for name, label in want["labels"].items():
            mine = got["labels"].get(name)
            expect(isinstance(mine, dict), f"{where}：{name} 沒有標籤")
            for source, text in label["inputs"].items():
                expect(
                    mine.get("inputs", {}).get(source) == text,
                    f"{where}：{name} 的輸入邊 {source} 預期 {text}，看到 {mine.get('inputs', {}).get(source)}",
                )
            extra = sorted(set(mine.get("inputs", {})) - set(label["inputs"]))
            expect(not extra, f"{where}：{name} 的這些輸入邊不該有規格：{'、'.join(extra)}")
            expect(
                mine.get("output") == label["output"],
                f"{where}：{name} 的輸出預期沒有規格，看到 {mine.get('output')}",
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
            f"{where}：observer 實例預期 {want['prepared']['classes']}，看到 {got['prepared'].get('classes')}",
        )
        mine = got["prepared"].get("instances")
        for index, instance in enumerate(want["prepared"]["instances"]):
            found = mine[index] if isinstance(mine, list) and index < len(mine) else None
            expect(
                found == instance,
                f"{where}：第 {index + 1} 個 observer 實例預期 {instance[0]}，觀察 {instance[1]}、給 {instance[2]} 讀，"
                f"看到 {found}",
            )


@check(
    "dynamic_linear_quantizer",
    1,
    "convert 之後的 op 數：choose_qparams.tensor 每個不同的輸入一個，沒有固定 qparams 的 quantize",
)
def test_counts(seen, expected):
    for where, got, want in _cases(seen, expected):
        expect(
            got["converted"].get("counts") == want["converted"]["counts"],
            f"{where}：quantized_decomposed 的 op 數預期 {want['converted']['counts']}，看到 {got['converted'].get('counts')}",
        )
