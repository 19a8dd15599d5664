"""common.int4 (M09-3): bytes of torchao tensors and of non-persistent buffers, PyTorch's packed int4
CPU kernel, the median timer, and the constants an ExecuTorch program keeps."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from common import tinylm
from common._noise import quiet_imports
from common.int4 import (
    int4_pack_linear,
    interleaved_medians,
    median_seconds,
    module_bytes,
    program_constants,
    tensor_bytes,
)
from common.pt2e import quiet

quiet()


def test_module_bytes_counts_the_buffers_state_dict_leaves_out() -> None:
    model = tinylm.tinylm_model()
    in_state_dict = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    persistent = set(model.state_dict())
    left_out = sum(b.numel() * b.element_size() for name, b in model.named_buffers() if name not in persistent)
    assert left_out > 0  # the causal masks are registered with persistent=False
    assert sum(module_bytes(model).values()) == in_state_dict + left_out


def test_module_bytes_counts_a_shared_parameter_once() -> None:
    shared = nn.Linear(8, 8)
    model = nn.Sequential(shared, shared)
    assert module_bytes(model) == {"float32": (8 * 8 + 8) * 4}


def test_tensor_bytes_looks_inside_a_torchao_tensor() -> None:
    with quiet_imports():
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerGroup

    layer = nn.Linear(64, 32)
    with torch.random.fork_rng():
        quantize_(
            layer, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32))
        )
    weight = layer.weight
    names, _ = weight.__tensor_flatten__()
    inner = [getattr(weight, name) for name in names]
    assert tensor_bytes(weight) == sum(t.numel() * t.element_size() for t in inner)
    assert tensor_bytes(weight) >= 64 * 32  # one int8 per 4-bit value, plus scales
    assert module_bytes(layer).get("int8", 0) >= 64 * 32


def test_int4_pack_linear_stores_half_a_byte_a_value_and_computes_the_dequantized_product() -> None:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 128, generator=generator)
    x = torch.randn(16, 128, generator=generator)
    packed = int4_pack_linear(weight, group=32)
    assert packed.packed.numel() * packed.packed.element_size() == weight.numel() // 2
    expected = x @ packed.dequantized.t()
    assert torch.allclose(packed(x), expected, atol=1e-3, rtol=1e-4)
    # 16 levels a group: the dequantized weight is within half a step of the original
    step = (weight.reshape(64, 4, 32).amax(-1) - weight.reshape(64, 4, 32).amin(-1)) / 15
    error = (packed.dequantized - weight).abs().reshape(64, 4, 32).amax(-1)
    assert bool((error <= step / 2 + 1e-5).all())


def test_int4_pack_linear_refuses_a_width_that_is_not_a_multiple_of_the_group() -> None:
    with pytest.raises(ValueError, match="multiple"):
        int4_pack_linear(torch.randn(8, 48), group=32)


def test_median_seconds_times_runs_after_the_warmup() -> None:
    calls = []
    seconds = median_seconds(lambda: calls.append(1), runs=5, warmup=2)
    assert len(calls) == 7 and seconds >= 0
    with pytest.raises(ValueError):
        median_seconds(lambda: None, runs=0)


def test_interleaved_medians_run_the_calls_in_turns() -> None:
    order: list[str] = []
    medians = interleaved_medians({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, runs=3, warmup=1)
    assert order == ["a", "b"] * 4 and set(medians) == {"a", "b"}
    with pytest.raises(ValueError):
        interleaved_medians({"a": lambda: None}, runs=0)


@pytest.mark.slow
def test_program_constants_token_table_stays_uint8_position_table_is_folded_to_float() -> None:
    pytest.importorskip("executorch")
    from common.backends import lower_to_xnnpack
    from common.dynamic import quantize_dynamic
    from common.int4 import executorch_program
    from selfcheck.public.m09_3 import composed_quantizer

    config = tinylm.TinyLMConfig(layers=1)
    model = tinylm.TinyLM(config).eval()
    example = tinylm.example_inputs(4)
    converted = quantize_dynamic(model, composed_quantizer(), example)
    constants = program_constants(executorch_program(lower_to_xnnpack(converted, example), quant_fusion=True))
    shapes = {(c.dtype, c.shape) for c in constants}
    assert ("uint8", (len(tinylm.VOCAB), config.d_model)) in shapes
    assert ("float32", (config.context, config.d_model)) in shapes
    assert ("uint8", (config.context, config.d_model)) not in shapes


def test_xnnpack_linear_program_runs_one_token_and_many_from_one_lowering() -> None:
    pytest.importorskip("executorch")
    from common.dynamic import quantize_dynamic, xnnpack_dynamic_quantizer
    from common.int4 import xnnpack_linear_program

    linear = nn.Linear(64, 32, bias=False)
    program, x = xnnpack_linear_program(linear, xnnpack_dynamic_quantizer(-8, 7), max_tokens=8)
    assert x.shape == (8, 64)
    decode, prefill = program.run(x[:1])[0], program.run(x)[0]
    assert decode.shape == (1, 32) and prefill.shape == (8, 32)
    assert torch.allclose(decode, prefill[:1], atol=1e-5)  # per-token activations: a row does not see the others
    reference = quantize_dynamic(linear, xnnpack_dynamic_quantizer(-8, 7), (x,))(x)
    assert (prefill - reference).abs().max() < 0.1 * reference.abs().max()
