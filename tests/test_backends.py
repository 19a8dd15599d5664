"""common.backends (M08): ExecuTorch's quantizer, XNNPACK lowering and runtime, x86 lowering."""

from __future__ import annotations

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
        assert torch.allclose(lowered(*inputs), converted(*inputs), atol=0.05)


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
