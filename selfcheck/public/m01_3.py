"""Public cases of M01-3 改圖 (replace_op, insert_clamp) on the chapter's own models.

Also how a graph pass is described, shared with the hidden cases: the pass runs on an
exported graph, and the graph *after the call* is described from its FX structure (the
count of every call_function target, how the nodes that were there before are wired,
whether it passes ``lint``, whether the code was regenerated) and by running it on the
same inputs. New nodes are written as ``target(inputs…)``, so their names do not matter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch._ops import OpOverload, OpOverloadPacket
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.public.m01_1 import export

REPLACE_TITLE = "replace_op：把每個 old 換成 new"
CLAMP_TITLE = "insert_clamp：在每個 target 後面插一個 clamp"


def target_text(target: Any) -> str:
    """``aten.clamp.default`` for an op; ``module.name`` for a Python function (no memory address)."""
    if isinstance(target, str | OpOverload | OpOverloadPacket):
        return safe_text(target, 80)
    module = getattr(target, "__module__", None) or getattr(type(target), "__module__", "?")
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return safe_text(f"{module}.{name}", 80)


class Labeler:
    """Names for the nodes of a graph after a pass, independent of the names new nodes got.

    A node whose name, kind and target were in the graph before the pass keeps its name;
    any other node is written as ``target(inputs…)`` with its inputs labelled the same way.
    """

    def __init__(self, gm: GraphModule) -> None:
        self.before = {n.name: (n.op, n.target) for n in gm.graph.nodes}

    def original(self, node: Node) -> bool:
        entry = self.before.get(node.name)
        if entry is None or entry[0] != node.op:
            return False
        target = node.target
        return entry[1] is target or (type(entry[1]) is str and type(target) is str and entry[1] == target)

    def label(self, node: Node, depth: int = 0) -> str:
        if self.original(node):
            return node.name
        if depth >= 4:
            return f"{target_text(node.target)}(…)"
        inputs = ", ".join(self.label(a, depth + 1) for a in node.all_input_nodes)
        return f"{target_text(node.target)}({inputs})"


def output_numbers(value: Any) -> list[float]:
    """Every element of a model's output (tensors only), rounded to 6 decimals."""
    numbers: list[float] = []
    for leaf in torch.utils._pytree.tree_leaves(value):
        if type(leaf) is not torch.Tensor:
            raise EvidenceError(f"模型的輸出裡有不是 tensor 的值：{type(leaf).__name__}")
        numbers.extend(round(float(v), 6) for v in leaf.detach().flatten().tolist())
    if len(numbers) > 5000:
        raise EvidenceError("模型的輸出太大")
    return numbers


def _first_line(exc: BaseException) -> str:
    text = safe_text(exc, 400).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_pass(
    ns: Namespace,
    name: str,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    *args: Any,
    edit: Callable[[GraphModule], None] | None = None,
) -> dict[str, Any]:
    """Export ``model``, call ``ns[name](gm, *args)`` and describe ``gm`` after the call.

    ``edit``, when given, changes the exported graph first (an earlier pass: the student is handed
    its result). ``counts``: every call_function target and how many nodes have it; ``wiring``: for
    each node that was there before (and still has its target), the labels of its inputs;
    ``lint``: ``"ok"`` or lint's complaint; ``recompiled``: the code is the graph's current
    code; ``outputs``: the outputs on ``inputs``; ``unchanged``: the outputs did not change.
    """
    gm = export(model, inputs)
    if edit is not None:
        edit(gm)
        gm.graph.lint()
        gm.recompile()
    with torch.no_grad():
        before_out = output_numbers(gm(*inputs))
    labeler = Labeler(gm)
    result = ns[name](gm, *args)
    if result is not gm:
        raise EvidenceError(f"{name} 應該原地修改傳進來的 gm，最後回傳同一個 gm")
    counts = Counter(target_text(n.target) for n in gm.graph.nodes if n.op == "call_function")
    wiring = {
        n.name: [labeler.label(a) for a in n.all_input_nodes]
        for n in gm.graph.nodes
        if labeler.original(n) and n.op not in ("placeholder", "get_attr", "call_module")
    }
    try:
        gm.graph.lint()
        lint = "ok"
    except Exception as exc:  # the graph is broken: say how
        lint = _first_line(exc)
    try:
        recompiled = gm.code == gm.graph.python_code(root_module="self").src
    except Exception:  # a graph too broken to generate code
        recompiled = False
    try:
        with torch.no_grad():
            outputs: Any = output_numbers(gm(*inputs))
    except EvidenceError:
        raise
    except Exception as exc:  # running the edited graph failed: say how
        outputs = {"error": f"{type(exc).__name__}: {safe_text(exc, 200)}"}
    return {
        "counts": dict(sorted(counts.items())),
        "wiring": wiring,
        "lint": lint,
        "recompiled": recompiled,
        "outputs": outputs,
        "unchanged": outputs == before_out,
    }


# --- public cases: the chapter's models -----------------------------------------------------------


def _chapter(name: str, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from common.models import get_model

    shape = (4, 16) if name == "mlp" else (2, 3, 16, 16)
    return get_model(name), seeded_inputs(seed, shape, scales=(8.0,))


class FanOut(nn.Module):
    """A linear read by a relu and by an add; the relu's output is read by the add and returned."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        r = torch.relu(y)
        return r + y, r


def replace_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: relu → hardtanh(0, 6) (inputs large enough that some values pass 6)."""
    model, inputs = _chapter("mlp", seed)
    aten = torch.ops.aten
    return describe_pass(ns, "replace_op", model, inputs, aten.relu.default, aten.hardtanh.default, (0.0, 6.0))


def replace_residual(ns: Namespace, seed: int) -> Any:
    """residual: both relus → sigmoid, and the add of two tensors → sub (every argument is kept)."""
    aten = torch.ops.aten
    model, inputs = _chapter("residual", seed)
    relus = describe_pass(ns, "replace_op", model, inputs, aten.relu.default, aten.sigmoid.default)
    adds = describe_pass(ns, "replace_op", model, inputs, aten.add.Tensor, aten.sub.Tensor)
    return {"relu → sigmoid": relus, "add → sub": adds}


def replace_fan_out(ns: Namespace, seed: int) -> Any:
    """A relu read by an add and returned: relu → hardtanh(-1, 1)."""
    aten = torch.ops.aten
    inputs = seeded_inputs(seed, (4, 6), scales=(4.0,))
    return describe_pass(ns, "replace_op", FanOut(), inputs, aten.relu.default, aten.hardtanh.default, (-1.0, 1.0))


def clamp_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: a clamp after each of the two linears (the second is the output)."""
    model, inputs = _chapter("mlp", seed)
    return describe_pass(ns, "insert_clamp", model, inputs, torch.ops.aten.linear.default, -0.5, 0.5)


def clamp_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: a clamp after each conv (both read by the cat, inside a list)."""
    model, inputs = _chapter("cat_pool", seed)
    return describe_pass(ns, "insert_clamp", model, inputs, torch.ops.aten.conv2d.default, -1.0, 2.0)


def clamp_fan_out(ns: Namespace, seed: int) -> Any:
    """A linear read by a relu and by an add: both read the clamp."""
    inputs = seeded_inputs(seed, (4, 6))
    return describe_pass(ns, "insert_clamp", FanOut(), inputs, torch.ops.aten.linear.default, -0.3, 0.4)


PUBLIC = declare(
    __name__,
    Exercise(
        "replace_op",
        REPLACE_TITLE,
        ("replace_op",),
        {"mlp": replace_mlp, "residual": replace_residual, "fan_out": replace_fan_out},
    ),
    Exercise(
        "insert_clamp",
        CLAMP_TITLE,
        ("insert_clamp",),
        {"mlp": clamp_mlp, "cat_pool": clamp_cat_pool, "fan_out": clamp_fan_out},
    ),
)
