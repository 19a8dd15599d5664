"""M08's backends: ExecuTorch (XNNPACK delegate and its runtime) and x86 (oneDNN through Inductor).

ExecuTorch is the ``backends`` extra (``pip install "pt2e-course[backends]"``, about 525 MB); it
is imported only when a function here needs it, so ``import common.backends`` is cheap.

- ``executorch_xnnpack_quantizer``: ExecuTorch's own XNNPACKQuantizer (annotates ``cat`` and
  ``max_pool2d``, unlike torchao's testing copy under the default non-strict export).
- ``lower_to_xnnpack``: a model (fp32 or ``convert_pt2e``'s output) exported and lowered with
  ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``.
- ``delegation``: what was delegated to XNNPACK and which ops stayed in the portable runtime.
- ``pte_bytes`` / ``PteProgram``: the ``.pte`` file and running it with ``executorch.runtime``.
- ``xnnpack_nodes``: the nodes XNNPACK itself runs in each delegate (read from the ``.pte``).
- ``x86_quantizer`` / ``lower_x86``: ``X86InductorQuantizer`` and ``lower_pt2e_quantized_to_x86``.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule

from common._noise import quiet_imports

DELEGATE = "executorch_call_delegate"
"""The call_function that stands for one subgraph handed to a backend in a lowered ExecuTorch graph."""


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Keep what native code writes on stderr (ExecuTorch's cpuinfo lines) out of the output.

    For the duration of the block, file descriptor 2 points at ``/dev/null`` and Python's
    ``sys.stderr`` writes into a buffer that is dropped.
    """
    try:
        saved = os.dup(2)
    except OSError:
        saved = -1
    try:
        if saved >= 0:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 2)
        # in a Jupyter kernel native lines can also arrive through Python's sys.stderr
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        if saved >= 0:
            os.dup2(saved, 2)
            os.close(saved)


def executorch_available() -> bool:
    """Whether ExecuTorch (the ``backends`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("executorch") is not None


def executorch_xnnpack_quantizer(is_per_channel: bool = True, qat_patterns: bool = True) -> Any:
    """ExecuTorch's XNNPACKQuantizer with its symmetric config set globally.

    Its ``annotate`` traces small patterns on random tensors from the global generator; here it
    leaves the global random state as it found it, so a notebook's later random numbers do not
    depend on whether a cell annotated.

    With ``qat_patterns=False`` it leaves out its QAT-only conv → BN patterns. It runs them with
    a PTQ config too, each tracing a dozen small graphs with a strict ``torch.export`` on every
    ``annotate`` (seconds each time); once ``prepare_pt2e`` has folded BN they match nothing, so
    the labels are the same, sooner.
    """
    with quiet_imports(), quiet_native_stderr():
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

    class ExecuTorchXNNPACKQuantizer(XNNPACKQuantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            with torch.random.fork_rng(), quiet_native_stderr():
                return super().annotate(model)

    ExecuTorchXNNPACKQuantizer.__name__ = XNNPACKQuantizer.__name__
    ExecuTorchXNNPACKQuantizer.__qualname__ = XNNPACKQuantizer.__qualname__
    ExecuTorchXNNPACKQuantizer.__module__ = XNNPACKQuantizer.__module__
    quantizer = ExecuTorchXNNPACKQuantizer()
    if not qat_patterns:
        quantizer.SUPPORTED_PATTERNS = [p for p in XNNPACKQuantizer.SUPPORTED_PATTERNS if not p.is_qat]
    return quantizer.set_global(get_symmetric_quantization_config(is_per_channel=is_per_channel))


def lower_to_xnnpack(model: torch.nn.Module, example_inputs: Sequence[Any]) -> Any:
    """Export ``model`` and lower it to ExecuTorch with the XNNPACK partitioner.

    ``model`` is an ``nn.Module`` in fp32 or the output of ``convert_pt2e`` (its q/dq patterns
    become XNNPACK's int8 kernels). Returns the ``EdgeProgramManager``.
    """
    with quiet_imports(), quiet_native_stderr():
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        exported = torch.export.export(model, tuple(example_inputs))
        return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])


def _op_name(target: Any) -> str:
    """``aten.convolution.default`` for ``exir_ops.edge.aten.convolution.default`` and the like."""
    name = getattr(target, "__name__", None) or str(target)
    text = str(target)
    if "." in text and not text.startswith("<"):
        name = text
    return name.removeprefix("torch.ops.").removeprefix("edge.")


@dataclass
class Delegation:
    """What a lowered ExecuTorch graph hands to XNNPACK and what it leaves in the portable runtime."""

    subgraphs: int
    delegated_nodes: int
    portable_ops: dict[str, int] = field(default_factory=dict)

    @property
    def fully_delegated(self) -> bool:
        return not self.portable_ops

    @property
    def coverage(self) -> float:
        """Delegated nodes / (delegated + portable compute nodes)."""
        left = sum(self.portable_ops.values())
        total = self.delegated_nodes + left
        return self.delegated_nodes / total if total else 1.0


def delegation(edge: Any) -> Delegation:
    """Count the delegated subgraphs and nodes of ``edge`` and the compute ops left outside them.

    ``getitem`` (reading one output of a delegate) is bookkeeping, not an op left behind.
    """
    with quiet_imports(), quiet_native_stderr():
        from executorch.devtools.backend_debug import get_delegation_info

        graph_module = edge.exported_program().graph_module
        info = get_delegation_info(graph_module)
    left: collections.Counter[str] = collections.Counter()
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target)
        if DELEGATE in name or "getitem" in name:
            continue
        left[name] += 1
    return Delegation(info.num_delegated_subgraphs, info.num_delegated_nodes, dict(sorted(left.items())))


def pte_bytes(edge: Any) -> bytes:
    """The ``.pte`` program of ``edge`` (what a phone app loads), as bytes."""
    with quiet_imports(), quiet_native_stderr():
        return bytes(edge.to_executorch().buffer)


class PteProgram:
    """A ``.pte`` loaded in ExecuTorch's runtime; ``run(*inputs)`` returns the outputs.

    It holds the runtime's ``Program`` as long as its ``Method``: a Method whose Program was
    freed crashes the process.
    """

    def __init__(self, pte: bytes, method: str = "forward") -> None:
        with quiet_imports(), quiet_native_stderr():
            from executorch.runtime import Runtime

            self._program = Runtime.get().load_program(pte)
            self._method = self._program.load_method(method)

    def run(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        with quiet_native_stderr():
            return list(self._method.execute(list(inputs)))


def x86_quantizer() -> Any:
    """``X86InductorQuantizer`` with its default (static, per-channel weight) config set globally."""
    with quiet_imports():
        from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
            X86InductorQuantizer,
            get_default_x86_inductor_quantization_config,
        )

        return X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())


def lower_x86(converted: GraphModule, example_inputs: Sequence[Any]) -> GraphModule:
    """``lower_pt2e_quantized_to_x86``: q/dq patterns of ``converted`` become oneDNN int8 ops.

    oneDNN's quantized conv returns a channels_last tensor, and the ``aten.view`` that
    ``flatten`` exports to cannot read it; the lowered graph reshapes instead (same values).
    """
    with quiet_imports():
        from torchao.quantization.pt2e.lowering import lower_pt2e_quantized_to_x86

        with torch.no_grad():
            lowered = lower_pt2e_quantized_to_x86(converted, tuple(example_inputs))
    for node in lowered.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
    lowered.recompile()
    return lowered


# --- what XNNPACK runs ------------------------------------------------------------------------------


def _xnnpack_graph(blob: bytes) -> dict[str, Any]:
    """One delegate's payload (XNNPACK header + flatbuffer) as JSON, through the flatc that ExecuTorch ships."""
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import XNNHeader, _get_schema_bytes
    from executorch.exir._serialize._flatbuffer import _get_flatc_path

    header = XNNHeader.from_bytes(blob[: XNNHeader.EXPECTED_LENGTH])
    flatbuffer = blob[header.flatbuffer_offset : header.flatbuffer_offset + header.flatbuffer_size]
    with tempfile.TemporaryDirectory() as folder:
        schema, data = os.path.join(folder, "schema.fbs"), os.path.join(folder, "graph.bin")
        with open(schema, "wb") as f:
            f.write(_get_schema_bytes())
        with open(data, "wb") as f:
            f.write(flatbuffer)
        command = [_get_flatc_path(), "--json", "--strict-json", "--defaults-json", "--raw-binary", "-o", folder]
        subprocess.run([*command, schema, "--", data], check=True, capture_output=True)
        with open(os.path.join(folder, "graph.json"), encoding="utf-8") as f:
            return json.load(f)


def xnnpack_nodes(edge: Any) -> list[list[tuple[str, str]]]:
    """For each subgraph delegated to XNNPACK, its nodes in order as ``(op, dtype of the output)``.

    ``op`` drops XNNPACK's ``XNN`` prefix (``Conv2d``, ``Concatenate2``, ``Convert``…) and the
    dtype its ``xnn_datatype_`` prefix (``fp32``, ``qint8``…). A ``Convert`` node changes dtype:
    quantizing (fp32 → qint8) or dequantizing (qint8 → fp32).
    """
    with quiet_imports(), quiet_native_stderr():
        graph_module = edge.exported_program().graph_module
        graphs = [
            _xnnpack_graph(bytes(module.processed_bytes))
            for name, module in graph_module.named_children()
            if name.startswith("lowered_module")
        ]
    found = []
    for graph in graphs:
        dtypes = {}
        for value in graph["xvalues"]:
            tensor = value["xvalue_union"].get("tensor_value", value["xvalue_union"])
            dtypes[tensor["id_out"]] = str(tensor["datatype"]).removeprefix("xnn_datatype_")
        found.append(
            [
                (
                    str(node["xnode_union_type"]).removeprefix("XNN"),
                    dtypes.get(node["xnode_union"].get("output_id"), "?"),
                )
                for node in graph["xnodes"]
            ]
        )
    return found


__all__ = [
    "DELEGATE",
    "Delegation",
    "PteProgram",
    "delegation",
    "executorch_available",
    "executorch_xnnpack_quantizer",
    "lower_to_xnnpack",
    "lower_x86",
    "pte_bytes",
    "quiet_native_stderr",
    "x86_quantizer",
    "xnnpack_nodes",
]
