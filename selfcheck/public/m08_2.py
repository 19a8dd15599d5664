"""Public cases of M08-2 x86：X86InductorQuantizer 與 oneDNN (classify_kernels) on the chapter's own models.

Also the helpers the hidden cases share: quantizing a model with an ``X86InductorQuantizer``
and lowering it with ``lower_pt2e_quantized_to_x86`` (``common.backends.lower_x86``), and
reading what the student's ``classify_kernels`` returned as plain data. A case calls the
student's function on a lowered graph and keeps its table; hidden cases also keep what every
node of the graph is (read before the call), so that a check can name a node it talks about.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, seeded_inputs
from selfcheck.evidence import EvidenceError, plain, safe_text

NOTEBOOK = "M08-2"

TITLE = "classify_kernels：lowered 圖上的 conv / linear，哪些是 oneDNN 的 int8 kernel"


def lowered_graph(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, seed: int, calibrate: int = 2
) -> GraphModule:
    """export → prepare_pt2e → calibrate on seeded batches → convert_pt2e → ``lower_x86``."""
    from common.backends import lower_x86
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    return lower_x86(convert_pt2e(prepared), inputs)


def target_text(node: Any) -> list[str]:
    """``[packet, overload]`` of a call_function node (``["mkl._mkl_linear", ""]`` for a packet), else ``[op, ""]``."""
    if node.op != "call_function":
        return [str(node.op), ""]
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return [str(target.overloadpacket), target._overloadname]
    if isinstance(target, torch._ops.OpOverloadPacket):
        return [str(target), ""]
    return [safe_text(getattr(target, "__name__", target), 80), ""]


def node_targets(gm: GraphModule) -> dict[str, list[str]]:
    """Every node of ``gm`` by name: what it is (see ``target_text``)."""
    return {node.name: target_text(node) for node in gm.graph.nodes}


def describe_kernels(ns: Namespace, gm: GraphModule, nodes: bool = True) -> dict[str, Any]:
    """``classify_kernels(gm)`` as ``{"table": {node name: record}}``.

    With ``nodes``, also ``"nodes"``: every node of ``gm`` (read before the call) as
    ``[packet, overload]``, so that a check can say what a node in the table is.
    """
    described = {"nodes": node_targets(gm)} if nodes else {}
    result = ns["classify_kernels"](gm)
    if type(result) is not dict:
        raise EvidenceError(f"classify_kernels 應該回傳 dict，看到 {type(result).__name__}")
    table = plain(result)
    for name, record in table.items():
        if type(record) is not dict:
            raise EvidenceError(
                f"classify_kernels 回傳的 dict 裡，{safe_text(name, 40)} 的值應該是 dict，看到 {type(record).__name__}"
            )
    return {"table": table, **described}


# --- the chapter's models --------------------------------------------------------------------------


class Net(nn.Module):
    """conv → ReLU → MaxPool2d → conv → ReLU → flatten → linear (relu and pool as modules), input 3×16×16."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    """conv → relu → conv, + x, relu; then a linear on the last dimension of the (batch, 8, 16) flattened map."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.proj = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv2(F.relu(self.conv1(x))) + x)
        return self.proj(torch.flatten(y, 2))


def _net_graph(seed: int, skip: str | None) -> GraphModule:
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    quantizer = x86_quantizer()
    if skip is not None:
        quantizer.set_module_name_qconfig(skip, None)
    return lowered_graph(Net(), seeded_inputs(seed, (4, 3, 16, 16)), quantizer, seed)


def kernels_net(ns: Namespace, seed: int) -> Any:
    """Net, every conv / linear quantized."""
    return describe_kernels(ns, _net_graph(seed, None), nodes=False)


def kernels_net_skip(ns: Namespace, seed: int) -> Any:
    """Net with ``set_module_name_qconfig("conv2", None)``: conv2 stays fp32."""
    return describe_kernels(ns, _net_graph(seed, "conv2"), nodes=False)


def kernels_block(ns: Namespace, seed: int) -> Any:
    """Block: conv + x → relu becomes one kernel; the linear on a 3-D input is not fused."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    graph = lowered_graph(Block(), seeded_inputs(seed, (2, 8, 4, 4)), x86_quantizer(), seed)
    return describe_kernels(ns, graph, nodes=False)


PUBLIC = {
    "classify_kernels": Exercise(
        NOTEBOOK,
        "classify_kernels",
        TITLE,
        ("classify_kernels",),
        {"net": kernels_net, "net_skip_conv2": kernels_net_skip, "block": kernels_block},
    ),
}
