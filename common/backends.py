"""M08's backends: ExecuTorch (XNNPACK delegate and its runtime) and x86 (oneDNN through Inductor).

ExecuTorch is the ``backends`` extra (``pip install "pt2e-course[backends]"``: about 40 packages, 180 MB, as
M08-1 measures); it
is imported only when a function here needs it, so ``import common.backends`` is cheap.

- ``executorch_xnnpack_quantizer``: ExecuTorch's own XNNPACKQuantizer (annotates ``cat`` and
  ``max_pool2d``, unlike torchao's testing copy under the default non-strict export).
- ``lower_to_xnnpack``: a model (fp32 or ``convert_pt2e``'s output) exported and lowered with
  ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``.
- ``delegation``: what was delegated to XNNPACK and which ops stayed in the portable runtime.
- ``pte_bytes`` / ``PteProgram``: the ``.pte`` file and running it with ``executorch.runtime``.
- ``xnnpack_nodes``: the nodes XNNPACK itself runs in each delegate (read from the ``.pte``).
- ``x86_quantizer`` / ``lower_x86``: ``X86InductorQuantizer`` and ``lower_pt2e_quantized_to_x86``
  (views made reshapes before its freezing passes; int8-mixed-bf16 with ``bf16=True``).
- ``onednn_run``: the instruction set and the implementations oneDNN used while a function ran.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import re
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


_CAPTURING = False
"""True while ``captured_native_stderr`` holds file descriptor 2: ``quiet_native_stderr`` then leaves it alone."""


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Keep what native code writes on stderr (ExecuTorch's cpuinfo lines) out of the output.

    For the duration of the block, file descriptor 2 points at ``/dev/null`` and Python's
    ``sys.stderr`` writes into a buffer that is dropped. Inside ``captured_native_stderr`` it
    does nothing: the capture keeps the lines.
    """
    if _CAPTURING:
        yield
        return
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


@contextlib.contextmanager
def captured_native_stderr() -> Iterator[list[str]]:
    """Collect what native code writes on stderr during the block (ExecuTorch's runtime and backends log there).

    Yields a list that holds the lines once the block is over; nothing reaches the notebook.
    """
    global _CAPTURING
    lines: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        _CAPTURING = True
        try:
            with contextlib.redirect_stderr(io.StringIO()) as python_lines:
                yield lines
        finally:
            _CAPTURING = False
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines += sink.read().decode("utf-8", "replace").splitlines()
            lines += python_lines.getvalue().splitlines()


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
    return symmetric_xnnpack_quantizer(qat_patterns=qat_patterns, is_per_channel=is_per_channel)


def symmetric_xnnpack_quantizer(qat_patterns: bool = True, **config: Any) -> Any:
    """ExecuTorch's XNNPACKQuantizer with ``get_symmetric_quantization_config(**config)`` set globally
    (``executorch_xnnpack_quantizer``; ``common.dynamic.xnnpack_dynamic_quantizer`` for ``is_dynamic=True``):
    its ``annotate`` leaves the global random state as it found it, and its class shows ExecuTorch's name."""
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
    return quantizer.set_global(get_symmetric_quantization_config(**config))


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


def pte_bytes(edge: Any, quant_fusion: bool = False) -> bytes:
    """The ``.pte`` program of ``edge`` (what a phone app loads), as bytes.

    With ``quant_fusion`` (needed for a model quantized with ``EmbeddingQuantizer``, M09-3),
    ``to_executorch`` runs ``ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)``: each
    ``dequantize_per_channel`` + ``embedding`` left outside XNNPACK becomes one
    ``quantized_decomposed::embedding_byte`` (and what depends only on constants is folded).
    Without it the program keeps a ``dequantize_per_channel`` with float zero points, which the
    runtime's portable kernel refuses by aborting the whole process.
    """
    with quiet_imports(), quiet_native_stderr():
        if not quant_fusion:
            return bytes(edge.to_executorch().buffer)
        from executorch.exir import ExecutorchBackendConfig

        config = ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True)
        return bytes(edge.to_executorch(config=config).buffer)


class PteProgram:
    """A ``.pte`` loaded in ExecuTorch's runtime; ``run(*inputs)`` returns the outputs.

    It holds the runtime's ``Program`` as long as its ``Method``: in ExecuTorch 1.5.1 a ``Method`` keeps
    no reference to the ``Program`` it was loaded from, so nothing else would keep that alive.

    With ``quantized_kernels`` ExecuTorch's quantized kernels (``executorch.kernels.quantized``:
    ``embedding_byte`` and the other ``quantized_decomposed`` kernels and out variants) are
    registered before the program loads: a program with ``embedding_byte`` (``pte_bytes(...,
    quant_fusion=True)`` of a model quantized with ``EmbeddingQuantizer``, M09-3) fails to load
    its method without them. Off by default: M08-3 shows what a program does before they are
    registered (once imported, they stay registered in the process).
    """

    def __init__(self, pte: bytes, method: str = "forward", quantized_kernels: bool = False) -> None:
        with quiet_imports(), quiet_native_stderr():
            if quantized_kernels:
                import executorch.kernels.quantized  # noqa: F401  (registers embedding_byte and friends)
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


VIEW_OPS = ("aten.view.default", "aten._unsafe_view.default")
"""What the decomposed ``linear`` and ``flatten`` are made of: ``lower_x86`` makes them ``aten.reshape``."""


def _decompositions(bf16: bool) -> dict[Any, Any]:
    """torchao's table (CompositeImplicit ops only); with ``bf16`` also ``aten._to_copy`` as Inductor decomposes it
    (``prims.convert_element_type``, what the int8-mixed-bf16 patterns look for)."""
    table = torch.export.default_decompositions()
    for op in list(table):
        if not torch._export.utils._is_cia_op(op):
            del table[op]
    if bf16:
        table.update(torch._decomp.get_decompositions([torch.ops.aten._to_copy]))
    return dict(table)


def lower_x86(model: torch.nn.Module, example_inputs: Sequence[Any], bf16: bool = False) -> GraphModule:
    """``lower_pt2e_quantized_to_x86`` with two changes made before its freezing passes.

    torchao 0.18's function exports ``model`` (``strict=True``), decomposes composite ops,
    rewrites ``aten.t`` as ``aten.permute``, then runs Inductor's freezing passes (the
    patterns that make q/dq + conv / linear into oneDNN's int8 ops, weights prepacked) and
    constant folding. Decomposed ``linear`` and ``flatten`` are ``aten.view`` /
    ``aten._unsafe_view``, and two things go wrong with them:

    - the qlinear patterns for an input of more than two dimensions want ``aten.reshape``
      around the matmul, so such a linear stays an fp32 ``addmm`` / ``mm`` on a dequantized
      weight;
    - oneDNN's quantized conv returns a channels_last tensor, which ``view`` cannot flatten.

    Here both are ``aten.reshape`` before the freezing passes (same values; ``reshape`` copies
    only when it must). ``model`` may also be an fp32 module: it is lowered the same way
    (weights prepacked for oneDNN / MKL's fp32 kernels).

    With ``bf16`` the export runs under ``torch.autocast("cpu", dtype=torch.bfloat16)`` and
    ``aten._to_copy`` is decomposed as Inductor does: the int8-mixed-bf16 patterns then give
    oneDNN int8 kernels whose fp32 outputs are bfloat16.

    The lowered graph is specialized to the shapes of ``example_inputs`` (its batch size too).
    """
    with quiet_imports():
        # its import registers torchao's x86 patterns in the freezing passes
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # noqa: F401
        from torch._inductor.constant_folding import constant_fold
        from torch._inductor.fx_passes.freezing_patterns import freezing_passes

        inputs = tuple(example_inputs)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with torch.no_grad(), autocast:
            exported = torch.export.export(model, inputs, strict=True)
            lowered = exported.run_decompositions(_decompositions(bf16)).module()
            graph = lowered.graph
            for node in list(graph.nodes):
                if node.op != "call_function":
                    continue
                if node.target == torch.ops.aten.t.default:
                    with graph.inserting_before(node):
                        permute = graph.call_function(torch.ops.aten.permute.default, (node.args[0], [1, 0]))
                    permute.meta.update(node.meta)
                    node.replace_all_uses_with(permute)
                    graph.erase_node(node)
                elif str(node.target) in VIEW_OPS:
                    node.target = torch.ops.aten.reshape.default
            graph.lint()
            lowered.recompile()
            freezing_passes(lowered, inputs)
            constant_fold(lowered)
    return lowered


# --- the kernels of a lowered x86 graph ------------------------------------------------------------

INT8_KERNELS = {
    "onednn.qconv_pointwise": "conv",
    "onednn.qconv2d_pointwise": "conv",
    "onednn.qlinear_pointwise": "linear",
}
"""oneDNN's int8 ops (any overload) and the layer each computes."""
FP32_KERNELS = {
    "mkldnn._convolution_pointwise": "conv",
    "mkldnn._convolution_transpose_pointwise": "conv",
    "aten.convolution": "conv",
    "mkl._mkl_linear": "linear",
    "mkldnn._linear_pointwise": "linear",
    "aten.addmm": "linear",
    "aten.mm": "linear",
}
"""The fp32 conv / matmul ops a lowered graph computes with (prepacked, or on a dequantized weight)."""
POST_OP_ARGUMENTS = ("attr", "binary_attr", "unary_attr", "post_op_name", "binary_post_op", "unary_post_op")
"""The arguments of oneDNN's ops that name a fused post-op, in schema order."""
PASS_THROUGH = (
    "aten.permute",
    "aten.t",
    "aten.reshape",
    "aten.view",
    "aten._unsafe_view",
    "prims.convert_element_type",
    "aten._to_copy",
)
"""Ops between a weight's dequantize and the matmul that reads it (transpose, cast)."""


@dataclass(frozen=True)
class Kernel:
    """One conv / linear of a lowered x86 graph.

    ``kind``: ``"int8"`` (a oneDNN int8 op), ``"dequantize"`` (an fp32 conv / matmul whose
    weight is an int8 constant dequantized on every call: quantized, but no int8 pattern
    matched) or ``"fp32"`` (an fp32 weight). ``post_ops``: what the kernel computes after
    the conv / matmul (``"add"`` for oneDNN's ``sum`` or ``add``, ``"relu"``…). ``output``:
    the dtype it returns (``"uint8"`` when it also quantizes its output).
    """

    node: str
    op: str
    layer: str
    kind: str
    post_ops: tuple[str, ...]
    output: str


def op_packet(node: Any) -> str | None:
    """``"onednn.qconv_pointwise"``, ``"mkl._mkl_linear"``… for a call_function node's op; None otherwise."""
    if node.op != "call_function":
        return None
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return str(target.overloadpacket)
    if isinstance(target, torch._ops.OpOverloadPacket):
        return str(target)
    return None


def named_arguments(node: Any) -> dict[str, Any]:
    """A call of an op, its arguments by the names of the op's schema."""
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        target = target.default
    names = [argument.name for argument in target._schema.arguments]
    return {**dict(zip(names, node.args, strict=False)), **node.kwargs}


def _reads_int8_constant(node: Any) -> bool:
    for source in node.all_input_nodes:
        while op_packet(source) in PASS_THROUGH:
            source = source.args[0]
        packet = op_packet(source) or ""
        if packet.startswith("quantized_decomposed.dequantize") and source.args[0].op == "get_attr":
            return True
    return False


def value_shape(gm: GraphModule, node: Any) -> tuple[int, ...] | None:
    """The shape of the value ``node`` computes in ``gm``; None for what is not a node.

    A node of an exported graph keeps its example value in ``node.meta["val"]``; the quantize
    and dequantize nodes that ``convert_pt2e`` inserts have none, and have the shape of what
    they (de)quantize (``args[0]``, down to an op with a value or a constant).
    """
    while isinstance(node, torch.fx.Node):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            return tuple(value.shape)
        if node.op == "get_attr":
            constant = gm
            for part in str(node.target).split("."):
                constant = getattr(constant, part)
            return tuple(constant.shape) if isinstance(constant, torch.Tensor) else None
        if node.op != "call_function" or not node.args:
            return None
        node = node.args[0]
    return None


def x86_kernels(lowered: GraphModule) -> list[Kernel]:
    """Every conv / linear kernel of a graph ``lower_x86`` made, in graph order."""
    found = []
    for node in lowered.graph.nodes:
        packet = op_packet(node)
        if packet in INT8_KERNELS:
            arguments = named_arguments(node)
            post_ops = tuple(
                "add" if arguments[name] in ("sum", "add") else arguments[name]
                for name in POST_OP_ARGUMENTS
                if isinstance(arguments.get(name), str) and arguments[name] not in ("", "none")
            )
            output = str(arguments.get("output_dtype") or torch.float32).removeprefix("torch.")
            found.append(Kernel(node.name, packet, INT8_KERNELS[packet], "int8", post_ops, output))
        elif packet in FP32_KERNELS:
            kind = "dequantize" if _reads_int8_constant(node) else "fp32"
            value = node.meta.get("val")
            output = str(value.dtype).removeprefix("torch.") if isinstance(value, torch.Tensor) else "float32"
            found.append(Kernel(node.name, packet, FP32_KERNELS[packet], kind, (), output))
    return found


# --- oneDNN: which instruction set and which implementation ran ----------------------------------


@dataclass
class OneDnnRun:
    """What oneDNN reported (``ONEDNN_VERBOSE``) while a function ran.

    ``isa`` is the instruction set oneDNN dispatches to on this CPU (capped by
    ``ONEDNN_MAX_CPU_ISA``), ``primitives`` the (kind, implementation) of every primitive it
    executed, e.g. ``("convolution", "brg_conv_fwd:avx512_core_vnni")``.
    """

    isa: str
    primitives: list[tuple[str, str]]

    def implementations(self, kind: str) -> list[str]:
        """The implementations of the executed primitives of ``kind`` (``"convolution"``…), each once, in order."""
        return list(dict.fromkeys(impl for k, impl in self.primitives if k == kind))


INT8_FAST_PATHS = ("vnni", "amx", "avx10")
"""Parts of a oneDNN implementation name that mean int8 dot products in hardware: AVX-512 / AVX VNNI
(Intel DL Boost), AMX, and AVX10 (which includes VNNI)."""


def has_int8_fast_path(implementation: str) -> bool:
    """Whether a oneDNN implementation (``brg_conv_fwd:avx2_vnni``, ``jit_uni_int8:avx2``…) multiplies int8 in hardware."""
    return any(tag in implementation.lower() for tag in INT8_FAST_PATHS)


def onednn_run(fn: Any, *args: Any) -> OneDnnRun:
    """Call ``fn(*args)`` with oneDNN's verbose mode on and read what it reported.

    oneDNN prints its report on the process's standard output (C's ``stdout``); for the
    duration of the call file descriptor 1 points at a temporary file, so nothing reaches the
    notebook. Its one-time header (the instruction set) is printed the first time verbose
    output is on in a process; later calls reuse what the first one read.
    """
    import ctypes
    import sys

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(1)
        os.dup2(sink.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                fn(*args)
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode("utf-8", "replace")
    global _ONEDNN_ISA
    primitives = []
    for line in text.splitlines():
        _, header, isa = line.partition(",info,cpu,isa:")
        fields = line.split(",")
        if header:
            _ONEDNN_ISA = isa.strip()
        elif len(fields) > 6 and fields[2] == "primitive" and fields[3] == "exec":
            primitives.append((fields[5], fields[6]))
    return OneDnnRun(_ONEDNN_ISA or "?", primitives)


_ONEDNN_ISA: str | None = None


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
            text = f.read()
    # flatc writes an unbounded clamp (relu) as inf, which JSON spells Infinity
    return json.loads(re.sub(r"(?<=[:\s\[,])(-?)inf\b", r"\1Infinity", text))


def _delegate_graphs(edge: Any) -> list[dict[str, Any]]:
    """The XNNPACK graph (``_xnnpack_graph``) of every subgraph of ``edge`` delegated to XNNPACK, in order."""
    with quiet_imports(), quiet_native_stderr():
        graph_module = edge.exported_program().graph_module
        return [
            _xnnpack_graph(bytes(module.processed_bytes))
            for name, module in graph_module.named_children()
            if name.startswith("lowered_module")
        ]


def _tensor_values(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """The tensor values of an XNNPACK graph (a quantized value wraps its tensor in ``tensor_value``)."""
    return [value["xvalue_union"].get("tensor_value", value["xvalue_union"]) for value in graph["xvalues"]]


def xnnpack_nodes(edge: Any) -> list[list[tuple[str, str]]]:
    """For each subgraph delegated to XNNPACK, its nodes in order as ``(op, dtype of the output)``.

    ``op`` drops XNNPACK's ``XNN`` prefix (``Conv2d``, ``Concatenate2``, ``Convert``…) and the
    dtype its ``xnn_datatype_`` prefix (``fp32``, ``qint8``…). A ``Convert`` node changes dtype:
    quantizing (fp32 → qint8) or dequantizing (qint8 → fp32).
    """
    found = []
    for graph in _delegate_graphs(edge):
        dtypes = {}
        for tensor in _tensor_values(graph):
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


def xnnpack_value_types(edge: Any) -> dict[str, int]:
    """How many tensors of each XNNPACK datatype the delegates of ``edge`` hold (``fp32``, ``qdint8``,
    ``qcint8``, ``qcint4``…), over every delegate: weights show their packing here (``qcint4``: 4-bit
    per-channel values, two to a byte), which ``xnnpack_nodes`` (output dtypes) does not."""
    counts: collections.Counter[str] = collections.Counter()
    for graph in _delegate_graphs(edge):
        for tensor in _tensor_values(graph):
            counts[str(tensor.get("datatype", "?")).removeprefix("xnn_datatype_")] += 1
    return dict(sorted(counts.items()))


__all__ = [
    "DELEGATE",
    "FP32_KERNELS",
    "INT8_FAST_PATHS",
    "INT8_KERNELS",
    "Delegation",
    "Kernel",
    "OneDnnRun",
    "PteProgram",
    "captured_native_stderr",
    "delegation",
    "executorch_available",
    "executorch_xnnpack_quantizer",
    "has_int8_fast_path",
    "lower_to_xnnpack",
    "lower_x86",
    "named_arguments",
    "onednn_run",
    "op_packet",
    "pte_bytes",
    "quiet_native_stderr",
    "symmetric_xnnpack_quantizer",
    "value_shape",
    "x86_kernels",
    "x86_quantizer",
    "xnnpack_nodes",
    "xnnpack_value_types",
]
