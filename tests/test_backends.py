"""common.backends (M08): ExecuTorch's quantizer, XNNPACK lowering and runtime, x86 lowering and what it makes;
M08-2's answer key against the real lowering."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from common import backends
from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e


class CatPool(nn.Module):
    """Two convs → cat → max_pool2d → flatten → linear: what torchao's testing quantizer half-labels."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.max_pool2d(torch.cat([self.a(x), self.b(x)], dim=1), 2)
        return self.fc(torch.flatten(y, 1))


@pytest.fixture(scope="module")
def model_and_inputs() -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return CatPool().eval(), (torch.randn(2, 3, 8, 8),)


def quantized(model: nn.Module, inputs: tuple, quantizer) -> torch.fx.GraphModule:
    prepared = prepare_pt2e(export_module(model, inputs), quantizer)
    with torch.no_grad():
        prepared(*inputs)
    return convert_pt2e(prepared)


WITHOUT_VNNI_COSINE = 0.9
"""How alike oneDNN's int8 kernels and the q/dq graph must be (cosine of the two outputs) on a CPU without int8
dot products in hardware (no VNNI, AMX or AVX10; an AVX2-only AMD EPYC, say). There oneDNN adds pairs of
u8 × s8 products in 16 bits (``vpmaddubsw``), which saturates: measured drifts reach 30 % of the largest output,
so no tolerance on values would still mean something. A kernel fed the wrong weights or the wrong input gives a
cosine near 0; with VNNI the kernels compute the graph's integers and each test's tight tolerance holds."""


def int8_in_hardware(lowered: torch.fx.GraphModule, *inputs: torch.Tensor) -> bool:
    """Whether the int8 kernels oneDNN ran for ``lowered`` multiply int8 in hardware on this CPU."""
    with torch.no_grad():
        run = backends.onednn_run(lowered, *inputs)
    ran = [impl for kind in ("convolution", "inner_product", "matmul") for impl in run.implementations(kind)]
    return any(backends.has_int8_fast_path(impl) for impl in ran)


def assert_computes_alike(lowered: torch.fx.GraphModule, reference: torch.Tensor, inputs: tuple, atol: float) -> None:
    """``lowered(*inputs)`` computes ``reference`` within ``atol`` where oneDNN multiplies int8 in hardware, and
    pointing the same way (``WITHOUT_VNNI_COSINE``) where it cannot."""
    with torch.no_grad():
        out = lowered(*inputs).float()
    drift = (out - reference).abs().max().item()
    if int8_in_hardware(lowered, *inputs):
        assert drift <= atol + 1e-5 * reference.abs().max().item(), drift
    else:
        cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0).item()
        assert cosine >= WITHOUT_VNNI_COSINE, f"without int8 in hardware: cosine {cosine:.3f}, drift {drift:.3f}"


def test_executorch_quantizer_labels_cat_and_leaves_the_global_rng_alone(model_and_inputs) -> None:
    model, inputs = model_and_inputs
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    prepared = prepare_pt2e(export_module(model, inputs), backends.executorch_xnnpack_quantizer())
    assert torch.equal(torch.rand(3), expected), "annotate consumed the global random numbers"
    cat = next(n for n in prepared.graph.nodes if n.target == torch.ops.aten.cat.default)
    assert all(arg.op == "call_module" for arg in cat.args[0]), "each input of cat is observed"
    users = [u for u in cat.users if u.op == "call_module"]
    assert users, "cat's output is observed"
    assert type(backends.executorch_xnnpack_quantizer()).__name__ == "XNNPACKQuantizer"


def test_a_lowered_program_runs_in_the_runtime_as_its_pytorch_graph(model_and_inputs) -> None:
    model, inputs = model_and_inputs
    converted = quantized(model, inputs, backends.executorch_xnnpack_quantizer())
    edge = backends.lower_to_xnnpack(converted, inputs)
    delegation = backends.delegation(edge)
    assert delegation.subgraphs == 1 and delegation.fully_delegated and delegation.coverage == 1.0
    pte = backends.pte_bytes(edge)
    assert pte[4:8] == b"ET12", "an ExecuTorch program"
    program = backends.PteProgram(pte)
    out = program.run(*inputs)[0]
    with torch.no_grad():
        reference = converted(*inputs)
    assert out.shape == reference.shape
    assert torch.allclose(out, reference, atol=0.05), (out - reference).abs().max()
    nodes = backends.xnnpack_nodes(edge)[0]
    assert ("Concatenate2", "qint8") in nodes, nodes


def test_an_op_xnnpack_cannot_take_stays_in_the_portable_runtime() -> None:
    class Cumsum(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(torch.relu(x), dim=1) + 1

    inputs = (torch.randn(2, 6),)
    delegation = backends.delegation(backends.lower_to_xnnpack(Cumsum().eval(), inputs))
    assert any("cumsum" in op for op in delegation.portable_ops), delegation
    assert delegation.coverage < 1.0


def test_x86_lowering_turns_q_dq_patterns_into_onednn_kernels_and_runs_after_flatten(model_and_inputs) -> None:
    model, inputs = model_and_inputs
    converted = quantized(model, inputs, backends.x86_quantizer())
    lowered = backends.lower_x86(converted, inputs)
    targets = {str(n.target) for n in lowered.graph.nodes if n.op == "call_function"}
    assert "onednn.qconv_pointwise.default" in targets and "onednn.qlinear_pointwise.default" in targets
    assert "aten.view.default" not in targets
    with torch.no_grad():
        reference = converted(*inputs)
    assert_computes_alike(lowered, reference, inputs, atol=0.05)


def test_torchaos_testing_quantizer_is_still_the_default_one(model_and_inputs) -> None:
    """M08-1's contrast: the testing quantizer leaves cat unlabelled under the default export."""
    model, inputs = model_and_inputs
    prepared = prepare_pt2e(export_module(model, inputs), get_xnnpack_quantizer(True)[0])
    cat = next(n for n in prepared.graph.nodes if n.target == torch.ops.aten.cat.default)
    assert not any(u.op == "call_module" for u in cat.users)


def test_native_lines_on_stderr_are_kept_out() -> None:
    code = (
        "import os, sys\n"
        "from common.backends import quiet_native_stderr\n"
        "with quiet_native_stderr():\n"
        "    os.write(2, b'native line\\n')\n"
        "    print('python line', file=sys.stderr)\n"
        "os.write(2, b'after\\n')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""}
    )
    assert run.stderr == "after\n"


def test_without_its_qat_patterns_executorchs_quantizer_labels_a_bn_model_alike() -> None:
    """BN is folded before annotate, so the QAT-only conv → BN patterns match nothing in PTQ."""

    class ConvBn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn(self.conv(x))) + 1

    torch.manual_seed(0)
    model, inputs = ConvBn().eval(), (torch.randn(2, 3, 8, 8),)
    full = backends.executorch_xnnpack_quantizer()
    lean = backends.executorch_xnnpack_quantizer(qat_patterns=False)
    assert len(lean.SUPPORTED_PATTERNS) < len(full.SUPPORTED_PATTERNS)
    assert all(not p.is_qat for p in lean.SUPPORTED_PATTERNS)
    codes = [prepare_pt2e(export_module(model, inputs), q).code for q in (full, lean)]
    assert codes[0] == codes[1] and "activation_post_process" in codes[0]


# --- x86: lower_x86, its kernels, and M08-2's answer key against the real lowering ----------------


def test_lower_x86_makes_views_reshapes_before_freezing_so_a_3d_linear_is_an_int8_kernel() -> None:
    """torchao's own function leaves a linear on a 3-D input (with or without bias) as fp32 matmuls."""
    from torchao.quantization.pt2e.lowering import lower_pt2e_quantized_to_x86

    class ThreeD(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(6, 6)
            self.b = nn.Linear(6, 4, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.relu(self.a(x)))

    torch.manual_seed(0)
    inputs = (torch.randn(2, 3, 6),)
    converted = quantized(ThreeD().eval(), inputs, backends.x86_quantizer())
    with torch.no_grad():
        raw = lower_pt2e_quantized_to_x86(converted, inputs)
    ours = backends.lower_x86(converted, inputs)
    assert [k.kind for k in backends.x86_kernels(raw)] == ["dequantize", "dequantize"]
    assert [(k.kind, k.post_ops) for k in backends.x86_kernels(ours)] == [("int8", ("relu",)), ("int8", ())]
    with torch.no_grad():
        reference = converted(*inputs)
    assert_computes_alike(ours, reference, inputs, atol=1e-4)


def test_lower_x86_of_an_fp32_model_prepacks_and_fuses_nothing() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)).eval()
    inputs = (torch.randn(2, 3, 8, 8),)
    lowered = backends.lower_x86(model, inputs)
    kernels = backends.x86_kernels(lowered)
    assert [(k.op, k.kind, k.post_ops) for k in kernels] == [
        ("mkldnn._convolution_pointwise", "fp32", ()),
        ("mkl._mkl_linear", "fp32", ()),
    ]
    with torch.no_grad():
        assert torch.allclose(lowered(*inputs), model(*inputs), atol=1e-5)


def test_lower_x86_bf16_gives_int8_kernels_with_bfloat16_outputs(model_and_inputs) -> None:
    model, inputs = model_and_inputs
    converted = quantized(model, inputs, backends.x86_quantizer())
    lowered = backends.lower_x86(converted, inputs, bf16=True)
    kernels = backends.x86_kernels(lowered)
    assert {k.kind for k in kernels} == {"int8"}
    assert "bfloat16" in {k.output for k in kernels}
    with torch.no_grad():
        out = lowered(*inputs)
        reference = converted(*inputs)
    assert out.dtype == torch.bfloat16
    assert_computes_alike(lowered, reference, inputs, atol=0.05)


def test_onednn_run_names_the_isa_and_the_implementations_and_prints_nothing() -> None:
    code = (
        "import torch\n"
        "from common.backends import onednn_run, has_int8_fast_path\n"
        "conv = torch.nn.Conv2d(16, 16, 3).eval()\n"
        "x = torch.randn(8, 16, 32, 32)\n"
        "with torch.no_grad():\n"
        "    run = onednn_run(conv, x)\n"
        "print('ISA', bool(run.isa) and run.isa != '?')\n"
        "print('CONV', bool(run.implementations('convolution')))\n"
        "print('FAST', has_int8_fast_path('brg_conv_fwd:avx512_core_vnni'), has_int8_fast_path('jit_uni_int8:avx2'))\n"
    )
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.splitlines() == ["ISA True", "CONV True", "FAST True False"], done.stdout


def test_value_shape_reads_through_quantize_and_dequantize() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    inputs = (torch.randn(2, 3, 5, 5),)
    converted = quantized(model, inputs, backends.x86_quantizer())
    shapes = {n.name: backends.value_shape(converted, n) for n in converted.graph.nodes if n.op == "call_function"}
    dequantize = next(
        n for n in converted.graph.nodes if n.target == torch.ops.quantized_decomposed.dequantize_per_tensor.default
    )
    assert "val" not in dequantize.meta and shapes[dequantize.name] == (2, 3, 5, 5)
    weight = next(
        n for n in converted.graph.nodes if n.target == torch.ops.quantized_decomposed.dequantize_per_channel.default
    )
    assert shapes[weight.name] == (4, 3, 3, 3)
    assert backends.value_shape(converted, 1.5) is None


def _predicted(converted: torch.fx.GraphModule, table: dict) -> collections.Counter:
    """The answer key's table as what ``x86_kernels`` reports: (layer, kind, post-ops, output dtype)."""
    nodes = {n.name: n for n in converted.graph.nodes}
    counted: collections.Counter = collections.Counter()
    for name, record in table.items():
        layer = "linear" if nodes[name].target == torch.ops.aten.linear.default else "conv"
        fused = [nodes[f].target for f in record["fuses"]]
        post = tuple("add" if t == torch.ops.aten.add.Tensor else "relu" for t in fused if "quantize" not in str(t))
        output = "uint8" if any("quantize" in str(t) for t in fused) else "float32"
        counted[(layer, record["kernel"], post, output)] += 1
    return counted


def _lowered(lowered: torch.fx.GraphModule) -> collections.Counter:
    return collections.Counter((k.layer, k.kind, k.post_ops, k.output) for k in backends.x86_kernels(lowered))


@pytest.mark.parametrize("seed", [0, 1, 2_147_483_646])
@pytest.mark.parametrize("kind", ["convs", "linears", "dynamic", "skipped", "per_tensor"])
# per_tensor's hidden model pools an input it leaves in float: X86InductorQuantizer says so, as it should
@pytest.mark.filterwarnings("ignore:The input of maxpool2d is not quantized:UserWarning")
def test_m08_2_answer_key_predicts_what_lower_x86_does_on_the_hidden_models(kind: str, seed: int) -> None:
    """The hidden checks compare a student's predictions with the key's; the key is right when
    ``lower_x86`` makes exactly the kernels it predicts, and the lowered graph computes what the
    converted one does."""
    from autograder.keys.m08_2 import predict_kernels
    from autograder.sandboxed.cases.m08_2 import hidden_graph

    converted, inputs = hidden_graph(kind, seed)
    table = predict_kernels(converted)
    lowered = backends.lower_x86(converted, inputs)
    assert _predicted(converted, table) == _lowered(lowered)
    assert {record["kernel"] for record in table.values()} >= ({"int8"} if kind != "skipped" else {"int8", "fp32"})
    first = inputs[0]
    x = first.contiguous(memory_format=torch.channels_last) if first.dim() == 4 else first
    with torch.no_grad():
        reference = converted(*inputs)
    assert_computes_alike(lowered, reference, (x,), atol=1e-3)


@pytest.mark.parametrize("case", ["net", "net_skip_conv2", "block"])
def test_m08_2_answer_key_predicts_what_lower_x86_does_on_the_public_models(case: str) -> None:
    from autograder.keys.m08_2 import predict_kernels
    from selfcheck.public import m08_2

    graphs: dict = {}

    def record(ns, gm, nodes=True):  # what the public case hands the student, kept
        graphs["converted"] = gm
        return {}

    original = m08_2.describe_predictions
    m08_2.describe_predictions = record
    try:
        m08_2.PUBLIC["predict_kernels"].cases[case]({"predict_kernels": predict_kernels}, 0)
    finally:
        m08_2.describe_predictions = original
    converted = graphs["converted"]
    example = next(n for n in converted.graph.nodes if n.op == "placeholder").meta["val"]
    inputs = (torch.randn(tuple(example.shape)),)
    assert _predicted(converted, predict_kernels(converted)) == _lowered(backends.lower_x86(converted, inputs))


def test_captured_native_stderr_keeps_the_lines_that_quiet_native_stderr_would_drop() -> None:
    code = (
        "import os, sys\n"
        "from common.backends import captured_native_stderr, quiet_native_stderr\n"
        "with captured_native_stderr() as log:\n"
        "    with quiet_native_stderr():\n"
        "        os.write(2, b'native line\\n')\n"
        "    print('python line', file=sys.stderr)\n"
        "print(log)\n"
        "os.write(2, b'after\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": ""}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert run.stdout.strip() == "['native line', 'python line']" and run.stderr == "after\n"


def test_xnnpack_nodes_reads_an_fp32_relu_whose_clamp_is_unbounded() -> None:
    """flatc writes the clamp of an fp32 relu as ``inf``, which plain JSON does not allow."""

    class ReluAdd(nn.Module):  # a relu XNNPACK cannot fuse into an op before it
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) + x

    nodes = backends.xnnpack_nodes(backends.lower_to_xnnpack(ReluAdd().eval(), (torch.randn(2, 4),)))
    assert ("Clamp", "fp32") in [node for graph in nodes for node in graph], nodes


def test_a_lowering_is_kept_with_the_kernel_libraries_it_ran_beside(model_and_inputs, monkeypatch) -> None:
    """M08-3's ``backend_run`` lowers a graph once, failure or not, until another ExecuTorch kernel
    library is imported (out variants and kernels it registers can turn a failed stage into a done one)."""
    import types

    from selfcheck.public import m08_3

    model, inputs = model_and_inputs
    graph = export_module(model, inputs)
    outcomes = iter([m08_3.BackendRun(stage="pte", error="RuntimeError: Missing out variants"), m08_3.BackendRun()])
    lowered = []

    def fake_backend_run(gm, example):
        lowered.append(gm)
        run = next(outcomes)
        if run.error is None:
            run.stage, run.outputs = "done", torch.zeros(1)
        return run

    monkeypatch.setattr(m08_3, "_runs", collections.OrderedDict())
    monkeypatch.setattr(m08_3, "_backend_run", fake_backend_run)
    first, again = m08_3.backend_run(graph, inputs), m08_3.backend_run(graph, inputs)
    assert len(lowered) == 1 and first.stage == again.stage == "pte" and first.error == again.error
    monkeypatch.setitem(sys.modules, "executorch.kernels.course_probe", types.ModuleType("probe"))
    after_import = m08_3.backend_run(graph, inputs)
    assert len(lowered) == 2 and after_import.ok
    other_inputs = (inputs[0] + 1,)
    with pytest.raises(StopIteration):  # other inputs: lowered anew
        m08_3.backend_run(graph, other_inputs)


EMBEDDING_FLOW = """
import torch
from torch import nn
from torchao.quantization.pt2e.quantizer import ComposableQuantizer
from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer

from common import backends
from common.dynamic import quantize_dynamic, xnnpack_dynamic_quantizer


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(10, 8)
        self.fc = nn.Linear(8, 10)

    def forward(self, tokens):
        return self.fc(torch.relu(self.tok(tokens)))


torch.manual_seed(0)
inputs = (torch.randint(0, 10, (2, 5)),)
quantizer = ComposableQuantizer([EmbeddingQuantizer(), xnnpack_dynamic_quantizer(-8, 7)])
converted = quantize_dynamic(Tiny().eval(), quantizer, inputs)
with torch.no_grad():
    reference = converted(*inputs)
pte = backends.pte_bytes(backends.lower_to_xnnpack(converted, inputs), quant_fusion=True)
assert b"embedding_byte" in pte, "the fused embedding is in the program"
out = backends.PteProgram(pte, quantized_kernels=True).run(*inputs)[0]
assert out.shape == reference.shape and torch.allclose(out, reference, atol=0.1), (out - reference).abs().max()
print("ok")
"""


@pytest.mark.slow  # a process of its own that imports ExecuTorch and lowers: about 10 s
def test_an_embedding_quantized_program_needs_the_fusion_and_the_quantized_kernels() -> None:
    """M09-3's flow: ``pte_bytes(quant_fusion=True)`` gives ``embedding_byte``, ``PteProgram(quantized_kernels=True)``
    runs it (in a process of its own: the kernels, once imported, stay registered, and M08-3 shows a program before)."""
    run = subprocess.run(
        [sys.executable, "-c", EMBEDDING_FLOW], capture_output=True, text=True, timeout=300, cwd=os.getcwd()
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_the_program_lowered_with_the_fx_code_cache_is_torchs_own(model_and_inputs) -> None:
    """``common.fx_code_cache`` changes no byte of a ``.pte``: ExecuTorch's debug handles read the provenance."""
    from common import fx_code_cache

    model, inputs = model_and_inputs
    converted = quantized(model, inputs, backends.executorch_xnnpack_quantizer(is_per_channel=True))
    ours = backends.pte_bytes(backends.lower_to_xnnpack(converted, inputs))
    with fx_code_cache.torch_alone():
        theirs = backends.pte_bytes(backends.lower_to_xnnpack(converted, inputs))
    assert ours == theirs
