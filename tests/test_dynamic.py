"""common.dynamic (M09): ExecuTorch's XNNPACKQuantizer with a dynamic config, and quantize_dynamic's three traps."""

from __future__ import annotations

import collections

import pytest
import torch

from common import tinylm
from common.dynamic import quantize_dynamic, xnnpack_dynamic_quantizer
from common.pt2e import quiet

quiet()


def ops(gm: torch.fx.GraphModule) -> collections.Counter[str]:
    return collections.Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


@pytest.fixture(scope="module")
def shipped() -> torch.fx.GraphModule:
    return quantize_dynamic(tinylm.tinylm_model(), xnnpack_dynamic_quantizer(), tinylm.example_inputs(32))


def test_dynamic_graph_of_the_shipped_tinylm(shipped: torch.fx.GraphModule) -> None:
    found = ops(shipped)
    assert found["quantized_decomposed.dequantize_per_channel.default"] == 13
    # q, k and v share the input of a block: 9 activations quantized for 13 linears
    for op in ("choose_qparams.tensor", "quantize_per_tensor.tensor", "dequantize_per_tensor.tensor"):
        assert found[f"quantized_decomposed.{op}"] == 9
    assert found["quantized_decomposed.quantize_per_tensor.default"] == 0
    weights = [n for n in shipped.graph.nodes if str(n.target).endswith("dequantize_per_channel.default")]
    assert {tuple(n.args[3:6]) for n in weights} == {(0, -127, 127)}


def test_dynamic_scores_like_float(shipped: torch.fx.GraphModule) -> None:
    # pitfall 2: without the forward the weights' observers give scale 1.0 (perplexity ~19)
    float_score, quantized = tinylm.score(tinylm.tinylm_model()), tinylm.score(shipped)
    assert abs(quantized.perplexity - float_score.perplexity) < 0.01
    assert abs(quantized.accuracy - float_score.accuracy) < 0.005


def test_quantize_dynamic_leaves_the_global_rng_alone() -> None:
    model, example = (
        tinylm.TinyLM(tinylm.TinyLMConfig(d_model=16, heads=2, layers=1, mlp=32)),
        (tinylm.example_inputs(4)),
    )
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    quantize_dynamic(model, xnnpack_dynamic_quantizer(), example)
    assert torch.equal(torch.rand(4), expected)


def test_weight_range_and_granularity_pass_through() -> None:
    model, example = (
        tinylm.TinyLM(tinylm.TinyLMConfig(d_model=16, heads=2, layers=1, mlp=32)),
        (tinylm.example_inputs(4)),
    )
    four_bit = quantize_dynamic(model, xnnpack_dynamic_quantizer(weight_qmin=-8, weight_qmax=7), example)
    weights = [n for n in four_bit.graph.nodes if str(n.target).endswith("dequantize_per_channel.default")]
    assert len(weights) == 7 and {tuple(n.args[4:7]) for n in weights} == {(-8, 7, torch.int8)}
    per_tensor = ops(quantize_dynamic(model, xnnpack_dynamic_quantizer(per_channel=False), example))
    assert per_tensor["quantized_decomposed.dequantize_per_channel.default"] == 0
    assert per_tensor["quantized_decomposed.dequantize_per_tensor.default"] == 7
    assert per_tensor["quantized_decomposed.choose_qparams.tensor"] == 5  # qkv, out, fc1, fc2, head


def test_batches_are_what_the_observers_see() -> None:
    model = tinylm.TinyLM(tinylm.TinyLMConfig(d_model=16, heads=2, layers=1, mlp=32))
    batches = [(tinylm.example_inputs(4)[0],), (tinylm.example_inputs(4)[0].flip(0),)]
    converted = quantize_dynamic(model, xnnpack_dynamic_quantizer(), tinylm.example_inputs(4), batches=batches)
    out = converted(*tinylm.example_inputs(4))
    assert out.shape == (4, tinylm.CONTEXT, len(tinylm.VOCAB))
