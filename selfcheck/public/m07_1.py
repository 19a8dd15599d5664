"""Public cases of M07-1 prepare_qat_pt2e (fake_quant_roles, fake_quant_instances) on the chapter's models.

Also what the hidden cases share: a small QAT Quantizer (fake-quantize modules for the
activations, weights and outputs of every conv2d / linear; an add shares one instance for
its inputs and output), the QAT graph of a model, and how the student's answers are read.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

TITLE = "fake_quant_roles 與 fake_quant_instances：QAT 圖上的 fake-quant 量化的是什麼"

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
QAT_CASE_SECONDS = 60
"""Time limit of a case that prepares a QAT graph with conv → BN: prepare_qat_pt2e traces its conv → BN
patterns with torch.export (a second or two alone, several times that on a shared, loaded machine)."""
ADD = torch.ops.aten.add.Tensor


def qat_quantizer() -> Any:
    """Fake-quantize every conv2d / linear (input, per-channel weight, output); an add of two
    activations shares one fake-quantize instance between its inputs and its output."""
    from torchao.quantization.pt2e import (
        FakeQuantize,
        FusedMovingAvgObsFakeQuantize,
        MovingAveragePerChannelMinMaxObserver,
    )

    from common.pt2e import (
        ANNOTATION_KEY,
        QuantizationAnnotation,
        QuantizationSpec,
        Quantizer,
        SharedQuantizationSpec,
    )

    def act() -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-128,
            quant_max=127,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=FusedMovingAvgObsFakeQuantize,
        )

    def weight() -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-127,
            quant_max=127,
            qscheme=torch.per_channel_symmetric,
            ch_axis=0,
            observer_or_fake_quant_ctr=FakeQuantize.with_args(
                observer=MovingAveragePerChannelMinMaxObserver,
                dtype=torch.int8,
                quant_min=-127,
                quant_max=127,
                qscheme=torch.per_channel_symmetric,
                ch_axis=0,
            ),
        )

    class QatQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op != "call_function":
                    continue
                if node.target in WEIGHTED:
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={node.args[0]: act(), node.args[1]: weight()},
                        output_qspec=act(),
                        _annotated=True,
                    )
                elif node.target == ADD and all(isinstance(a, Node) for a in node.args[:2]):
                    first, second = node.args[:2]
                    shared = SharedQuantizationSpec((first, node))
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={first: act(), second: shared}, output_qspec=shared, _annotated=True
                    )
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return QatQuantizer()


def qat_graph(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``model`` exported in train mode and prepared with ``qat_quantizer()``, annotations removed.

    prepare leaves each node's ``quantization_annotation`` in ``node.meta``; nothing here reads
    it, and the grader's recorder cannot write down a per-channel fake-quant spec (its
    constructor holds an observer *class*), so the leftover labels are dropped before the
    graph reaches the student's code.
    """
    from common.pt2e import ANNOTATION_KEY, export_module, prepare_qat_pt2e

    gm = prepare_qat_pt2e(export_module(model.train(), inputs), qat_quantizer())
    for node in gm.graph.nodes:
        node.meta.pop(ANNOTATION_KEY, None)
    return gm


def module_kinds(gm: GraphModule) -> dict[str, str]:
    """Every call_module node of ``gm`` and the class of its module (for messages)."""
    return {n.name: type(gm.get_submodule(str(n.target))).__name__ for n in gm.graph.nodes if n.op == "call_module"}


def structure(gm: GraphModule) -> list[tuple[str, str]]:
    """Every node of ``gm``: its name and ``op target (args) {kwargs}`` as text (changes when the graph does)."""
    out = []
    for node in gm.graph.nodes:
        args = torch.fx.node.map_arg(node.args, lambda n: f"%{n.name}")
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: f"%{n.name}")
        out.append((node.name, f"{node.op} {node.target} {args} {kwargs}"))
    return out


def graph_change(before: list[tuple[str, str]], after: list[tuple[str, str]]) -> str | None:
    """What changed between two ``structure`` readings, in a few words (``None``: nothing)."""
    if before == after:
        return None
    old, new = dict(before), dict(after)
    edited = [name for name in old if name in new and old[name] != new[name]]
    removed = [name for name in old if name not in new]
    added = [name for name in new if name not in old]
    parts = []
    if edited:
        parts.append(f"{'、'.join(edited[:3])} 的 target 或引數變了")
    if removed:
        parts.append(f"少了 {'、'.join(removed[:3])}")
    if added:
        parts.append(f"多了 {'、'.join(added[:3])}")
    return "，".join(parts) or "node 的順序變了"


def describe_answers(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    """``fake_quant_roles(gm)`` and ``fake_quant_instances(gm)`` as plain data, and whether they left
    ``gm`` as it was (both only read the graph; the notebook goes on using it)."""
    kinds = module_kinds(gm)
    before = structure(gm)
    roles = ns["fake_quant_roles"](gm)
    if type(roles) is not dict:
        raise EvidenceError(f"fake_quant_roles 應該回傳 dict，看到 {type(roles).__name__}")
    table = {}
    for key, role in roles.items():
        name = key.name if type(key) is Node else key
        if type(name) is not str:
            raise EvidenceError(f"fake_quant_roles 的 key 應該是 node 的名字，看到 {type(key).__name__}")
        if type(role) is not str:
            raise EvidenceError(f'fake_quant_roles 的值應該是 "weight" 或 "activation"，看到 {type(role).__name__}')
        table[safe_text(name, 80)] = safe_text(role, 40)
    count = ns["fake_quant_instances"](gm)
    if type(count) is not int:
        raise EvidenceError(f"fake_quant_instances 應該回傳 int，看到 {type(count).__name__}")
    return {"roles": table, "instances": count, "modules": kinds, "changed": graph_change(before, structure(gm))}


# --- public cases -------------------------------------------------------------------------------


def public_conv_bn(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu: BN stays in the QAT graph, the conv's weight is scaled by it before its fake-quant."""
    from common.models import example_inputs, get_model

    return describe_answers(ns, qat_graph(get_model("conv_bn_relu"), example_inputs(2)))


def public_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: two linears, fake-quants on inputs, weights and outputs."""
    from common.models import get_model

    return describe_answers(ns, qat_graph(get_model("mlp"), seeded_inputs(seed, (2, 16))))


PUBLIC = declare(
    __name__,
    Exercise(
        "fake_quant_roles",
        TITLE,
        ("fake_quant_roles", "fake_quant_instances"),
        {"conv_bn_relu": public_conv_bn, "mlp": public_mlp},
        case_seconds=QAT_CASE_SECONDS,
    ),
)
