"""M09-3's measuring tools for 4-bit models: bytes of torchao tensors, medians of run times, the
constants an ExecuTorch program keeps, and PyTorch's own packed int4 CPU kernel.

- ``tensor_bytes`` / ``module_bytes``: what a module holds, counting inside torchao's tensor
  subclasses (``IntxUnpackedToInt8Tensor`` and the like list their tensors in
  ``__tensor_flatten__``) and every buffer, persistent or not (``state_dict`` leaves the
  non-persistent ones out, a graph that reads them does not).
- ``median_seconds`` / ``interleaved_medians``: the median time of a call (of several calls taking
  turns) over several runs, after warm-up runs.
- ``executorch_program`` / ``program_constants``: ``to_executorch`` of a lowered program and the
  tensors its graph reads as constants (which tables stayed uint8, which were folded to fp32).
- ``xnnpack_linear_pte`` / ``xnnpack_linear_program``: a linear quantized dynamically (PT2E) and lowered
  to XNNPACK once with a dynamic token count: its ``.pte`` and datatypes, or the program loaded;
  ``xnnpack_quantized_linear_pte``: the same for a linear torchao's ``quantize_`` already quantized.
- ``int4_pack_linear``: a weight quantized to 4 bits per group and packed two values a byte with
  ``aten._convert_weight_to_int4pack_for_cpu``, run by ``aten._weight_int4pack_mm_for_cpu``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from common._noise import quiet_imports


def _leaves(t: torch.Tensor) -> list[torch.Tensor]:
    inner = t.data if isinstance(t, torch.nn.Parameter) else t
    if type(inner) is not torch.Tensor and hasattr(inner, "__tensor_flatten__"):
        names, _ = inner.__tensor_flatten__()
        return [leaf for name in names for leaf in _leaves(getattr(inner, name))]
    return [inner]


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of ``t``; for a tensor subclass, the sum over the tensors ``__tensor_flatten__`` names."""
    return sum(leaf.numel() * leaf.element_size() for leaf in _leaves(t))


def module_bytes(module: torch.nn.Module) -> dict[str, int]:
    """Bytes of ``module``'s parameters and buffers (non-persistent ones too) by dtype name.

    A tensor reached twice (a shared parameter) counts once; a torchao tensor subclass counts as
    the tensors it is made of (int8 values, scales, zero points), each under its own dtype.
    """
    totals: dict[str, int] = {}
    seen: set[int] = set()
    tensors = [*module.parameters(), *module.buffers()]
    for tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        for leaf in _leaves(tensor):
            name = str(leaf.dtype).removeprefix("torch.")
            totals[name] = totals.get(name, 0) + leaf.numel() * leaf.element_size()
    return totals


def median_seconds(fn: Callable[[], Any], runs: int = 15, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` over ``runs`` calls, after ``warmup`` calls that are not timed."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(calls: dict[str, Callable[[], Any]], runs: int = 15, warmup: int = 3) -> dict[str, float]:
    """Median wall time of each call, the calls taking turns run by run.

    Taking turns spreads whatever else the machine is doing over every call alike, so the ratios
    between them are steadier than those of one ``median_seconds`` after another.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, fn in calls.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def executorch_program(edge: Any, quant_fusion: bool = False) -> Any:
    """``edge.to_executorch()``: the ExecuTorch program manager (``.buffer`` is the ``.pte``).

    With ``quant_fusion`` it runs ``ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)``,
    as ``common.backends.pte_bytes`` does: ``dequantize_per_channel`` + ``embedding`` become
    ``embedding_byte`` and what depends only on constants is computed ahead of time.
    """
    from common.backends import quiet_native_stderr

    with quiet_imports(), quiet_native_stderr():
        if not quant_fusion:
            return edge.to_executorch()
        from executorch.exir import ExecutorchBackendConfig

        return edge.to_executorch(ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True))


@dataclass(frozen=True)
class Constant:
    """A tensor an ExecuTorch program's graph reads as a constant (outside the delegates' blobs)."""

    name: str
    dtype: str
    shape: tuple[int, ...]


def program_constants(manager: Any) -> list[Constant]:
    """The constant tensors (parameters, buffers, lifted constants) of ``manager``'s program."""
    program = manager.exported_program()
    found = []
    for spec in program.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT" or spec.target is None:
            continue
        value = program.constants.get(spec.target)
        if value is None:
            value = program.state_dict.get(spec.target)
        if isinstance(value, torch.Tensor):
            found.append(Constant(spec.target, str(value.dtype).removeprefix("torch."), tuple(value.shape)))
    return found


@dataclass(frozen=True)
class PackedInt4Linear:
    """A linear weight in 4 bits per value, ``group`` values a scale and an offset, packed for the CPU."""

    packed: torch.Tensor
    scales_and_zeros: torch.Tensor
    group: int
    dequantized: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.packed, self.group, self.scales_and_zeros)


def int4_pack_linear(weight: torch.Tensor, group: int = 32) -> PackedInt4Linear:
    """Quantize ``weight`` (out × in, float32) to unsigned 4 bits per group of ``group`` inputs, packed.

    Each group gets ``scale = (max − min) / 15`` and its values ``q = round((w − min) / scale)`` in
    [0, 15]; ``aten._convert_weight_to_int4pack_for_cpu`` stores two of them a byte. The kernel
    computes ``(q − 8) · scale + zero`` with ``zero = min + 8 · scale`` (the tinygemm layout of
    ``scales_and_zeros``: groups × out × 2). ``dequantized`` is that weight in float32.
    """
    out_features, in_features = weight.shape
    if in_features % group:
        raise ValueError(f"in_features {in_features} is not a multiple of group {group}")
    grouped = weight.detach().float().reshape(out_features, in_features // group, group)
    low = grouped.amin(-1, keepdim=True)
    scale = ((grouped.amax(-1, keepdim=True) - low) / 15).clamp_min(1e-8)
    q = ((grouped - low) / scale).round().clamp(0, 15)
    dequantized = (q * scale + low).reshape(out_features, in_features)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.reshape(out_features, in_features).to(torch.int32), 2)
    zero = low + 8 * scale
    scales_and_zeros = torch.stack([scale.squeeze(-1).t(), zero.squeeze(-1).t()], dim=-1).contiguous()
    return PackedInt4Linear(packed, scales_and_zeros, group, dequantized)


@dataclass(frozen=True)
class LinearPte:
    """A linear lowered to XNNPACK once: its ``.pte`` bytes, the XNNPACK datatypes of its tensors
    (``common.backends.xnnpack_value_types``) and an input of ``max_tokens`` rows."""

    pte: bytes
    value_types: dict[str, int]
    example: torch.Tensor


def _token_example(in_features: int, max_tokens: int) -> tuple[tuple[torch.Tensor], tuple[dict[int, Any]]]:
    """An input of ``max_tokens`` rows and its dynamic shape: 1 to ``max_tokens`` tokens."""
    from torch.export import Dim

    example = (torch.randn(max_tokens, in_features, generator=torch.Generator().manual_seed(0)),)
    return example, ({0: Dim("tokens", min=1, max=max_tokens)},)


def _lowered_pte(module: torch.nn.Module, example: tuple[torch.Tensor], shapes: Any) -> LinearPte:
    """``module`` exported on ``example`` (``shapes`` dynamic), lowered to XNNPACK, saved as a ``.pte``."""
    from common.backends import quiet_native_stderr, xnnpack_value_types

    with quiet_imports(), quiet_native_stderr():
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        exported = torch.export.export(module, example, dynamic_shapes=shapes)
        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    return LinearPte(bytes(executorch_program(edge).buffer), xnnpack_value_types(edge), example[0])


def xnnpack_linear_pte(linear: torch.nn.Module, quantizer: Any, max_tokens: int) -> LinearPte:
    """``linear`` quantized dynamically by ``quantizer`` (PT2E) and lowered to XNNPACK once for inputs of
    1 to ``max_tokens`` rows (the token count is a dynamic dimension). One program serves a decode step
    (``example[:1]``) and a prefill (the whole ``example``), so a shape costs no second export and
    lowering; its size and datatypes show how the weight is stored (``qcint8``, ``qcint4``)."""
    from common.backends import quiet_native_stderr
    from common.dynamic import convert_dynamic

    example, shapes = _token_example(linear.in_features, max_tokens)
    with quiet_imports(), quiet_native_stderr():
        graph = torch.export.export(linear.eval(), example, dynamic_shapes=shapes).module()
        converted = convert_dynamic(graph, quantizer, [example])
    return _lowered_pte(converted, example, shapes)


def xnnpack_quantized_linear_pte(linear: torch.nn.Module, max_tokens: int) -> LinearPte:
    """``linear`` already quantized in eager mode (torchao's ``quantize_``: its weight a tensor subclass),
    exported as it is and lowered to XNNPACK once for inputs of 1 to ``max_tokens`` rows, as
    ``xnnpack_linear_pte`` does for PT2E (the datatypes show ``qbint4`` for a group-wise 4-bit weight)."""
    example, shapes = _token_example(linear.in_features, max_tokens)
    return _lowered_pte(linear.eval(), example, shapes)


def xnnpack_linear_program(linear: torch.nn.Module, quantizer: Any, max_tokens: int) -> tuple[Any, torch.Tensor]:
    """``xnnpack_linear_pte`` loaded in the ExecuTorch runtime: ``(PteProgram, input of max_tokens rows)``."""
    from common.backends import PteProgram

    lowered = xnnpack_linear_pte(linear, quantizer, max_tokens)
    return PteProgram(lowered.pte), lowered.example
