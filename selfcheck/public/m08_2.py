"""Public cases of M08-2 x86：X86InductorQuantizer 與 oneDNN (predict_kernels) on the chapter's own models.

Also the helpers the hidden cases share: quantizing a model with an ``X86InductorQuantizer``
(``converted_graph``), and reading what the student's ``predict_kernels`` returned as plain
data (``describe_predictions``). A case hands the student's function a converted (q/dq)
graph, before any lowering, and keeps its table; it also keeps what every node of the graph
is (read before the call), so that a check can name a node it talks about, and whether the
call left the graph as it was.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, returned_dict, safe_text

TITLE = "predict_kernels：從 convert 之後的圖預測 oneDNN 的 int8 kernel 與它吃掉的 node"

KINDS = ("int8", "dequantize", "fp32")
"""What a conv / linear becomes after ``lower_x86``: a oneDNN int8 kernel, an fp32 conv / matmul on a weight
dequantized on every call, or an fp32 kernel on an fp32 weight."""


def converted_graph(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, seed: int, calibrate: int = 2
) -> GraphModule:
    """export → prepare_pt2e → calibrate on seeded batches → convert_pt2e."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    return convert_pt2e(prepared)


def target_text(node: Any) -> str:
    """What a node is, in a few words: ``aten.relu.default``, ``placeholder``, ``get_attr``…"""
    if node.op != "call_function":
        return str(node.op)
    target = node.target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    return safe_text(getattr(target, "__name__", target), 80)


def structure(gm: GraphModule) -> list[str]:
    """The graph without its metadata: one line per node (name, op, target, arguments)."""
    return [f"{n.name} {n.op} {n.target} {n.args!r} {n.kwargs!r}" for n in gm.graph.nodes]


def _record(name: Any, record: Any) -> dict[str, Any]:
    where = safe_text(name, 40)
    if type(record) is not dict:
        raise EvidenceError(f"predict_kernels 回傳的 dict 裡，{where} 的值應該是 dict，看到 {type(record).__name__}")
    kernel, fuses = record.get("kernel"), record.get("fuses")
    if type(kernel) is not str:
        raise EvidenceError(f'{where} 的 "kernel" 應該是 {list(KINDS)} 其中一個字串，看到 {type(kernel).__name__}')
    if type(fuses) not in (list, tuple) or not all(type(item) is str for item in fuses) or len(fuses) > 50:
        raise EvidenceError(f'{where} 的 "fuses" 應該是 node 名稱（str）的 list')
    extra = sorted(set(record) - {"kernel", "fuses"})
    if extra:
        raise EvidenceError(f'{where} 的 dict 只該有 "kernel" 與 "fuses" 兩個 key，看到多了 {extra[:3]}')
    return {"kernel": safe_text(kernel, 20), "fuses": [safe_text(item, 80) for item in fuses]}


def describe_predictions(ns: Namespace, gm: GraphModule, nodes: bool = True) -> dict[str, Any]:
    """``predict_kernels(gm)`` as ``{"table": {node name: {"kernel": ..., "fuses": [...]}}, "unchanged": bool}``.

    With ``nodes``, also ``"nodes"``: what every node of ``gm`` is (read before the call), so
    that a check can say what a node in the table is.
    """
    before = structure(gm)
    described: dict[str, Any] = {"nodes": {n.name: target_text(n) for n in gm.graph.nodes}} if nodes else {}
    result = returned_dict(ns["predict_kernels"](gm), "predict_kernels", "node 名稱 → 預測")
    table = {}
    for name, record in result.items():
        if type(name) is not str:
            raise EvidenceError(
                f"predict_kernels 回傳的 dict，key 應該是 node 的名稱（str），看到 {type(name).__name__}"
            )
        table[safe_text(name, 80)] = _record(name, record)
    return {"table": table, "unchanged": structure(gm) == before, **described}


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
    return converted_graph(Net(), seeded_inputs(seed, (4, 3, 16, 16)), quantizer, seed)


def kernels_net(ns: Namespace, seed: int) -> Any:
    """Net, every conv / linear quantized."""
    return describe_predictions(ns, _net_graph(seed, None), nodes=False)


def kernels_net_skip(ns: Namespace, seed: int) -> Any:
    """Net with ``set_module_name_qconfig("conv2", None)``: conv2 stays fp32."""
    return describe_predictions(ns, _net_graph(seed, "conv2"), nodes=False)


def kernels_block(ns: Namespace, seed: int) -> Any:
    """Block: conv + x → relu becomes one kernel; the linear on a 3-D input too."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    graph = converted_graph(Block(), seeded_inputs(seed, (2, 8, 4, 4)), x86_quantizer(), seed)
    return describe_predictions(ns, graph, nodes=False)


PUBLIC = declare(
    __name__,
    Exercise(
        "predict_kernels",
        TITLE,
        ("predict_kernels",),
        {"net": kernels_net, "net_skip_conv2": kernels_net_skip, "block": kernels_block},
    ),
)
