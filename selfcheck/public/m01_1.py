"""Public cases of M01-1 讀懂 export 出來的圖 (op_targets, neighbors) on the chapter's own models.

Also the helpers that describe what a student's function returned, shared with the hidden
cases: a node becomes its name only when it is a live node of the graph that was asked
about, and a returned target is text plus whether it is the very target object of an op.
Nothing here calls a method of a value the student returned except through ``safe_text``
on exact strings: other objects are described by their type only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

TARGETS_TITLE = "op_targets：依圖上順序列出每個 op 的 target"
NEIGHBORS_TITLE = "neighbors：一個 node 的 producers 與 consumers"


def export(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``export_module`` of ``model`` in eval mode."""
    from common.pt2e import export_module

    return export_module(model.eval(), inputs)


def as_list(value: Any, what: str) -> list[Any]:
    """A student's list (or tuple), refused when it is anything else."""
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 list，看到 {type(value).__name__}")
    if len(value) > 1000:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    return list(value)


def item_text(item: Any) -> str:
    """A returned value that is not what was asked for, in words (never calls the student's methods)."""
    if type(item) is str:
        return f"（字串 {safe_text(item, 60)!r}）"
    return f"（不是 Node：{type(item).__name__}）"


def node_label(gm: GraphModule, item: Any) -> str:
    """The name of ``item`` when it is a live node of ``gm``; otherwise what it is, in words."""
    if type(item) is Node:
        if item.graph is gm.graph and not getattr(item, "_erased", False):
            return item.name
        return f"（別張圖的 node {safe_text(item.name, 60)}）"
    return item_text(item)


def node_labels(gm: GraphModule, value: Any, what: str) -> list[str]:
    return [node_label(gm, item) for item in as_list(value, what)]


def node_kinds(gm: GraphModule) -> dict[str, str]:
    """``{name: op}`` of every node, for messages (``placeholder``, ``get_attr``…)."""
    return {n.name: str(n.op) for n in gm.graph.nodes}


# --- a graph that a reading exercise must leave as it was ------------------------------------------


def graph_state(gm: GraphModule) -> dict[str, Any]:
    """What a function that only reads ``gm`` must leave as it was: every node and every annotation.

    ``nodes``: ``{name: "op target(args, kwargs)"}`` in graph order; ``labels``: the
    ``describe_annotations`` of the graph. Both are what the grader's replay reproduces of a
    call (``autograder.sandboxed.record``), so they compare the same on both sides.
    """
    from selfcheck.evidence import describe_annotations

    nodes = {
        n.name: f"{n.op} {safe_text(n.target, 80)}({safe_text(n.args, 300)}, {n.kwargs!r})" for n in gm.graph.nodes
    }
    return {"nodes": nodes, "labels": describe_annotations(gm)}


def graph_changes(before: dict[str, Any], gm: GraphModule) -> list[str]:
    """How ``gm`` differs from ``before`` (a ``graph_state``), in words; empty when it was left alone."""
    after = graph_state(gm)
    changes: list[str] = []
    added = [n for n in after["nodes"] if n not in before["nodes"]]
    removed = [n for n in before["nodes"] if n not in after["nodes"]]
    if added:
        changes.append(f"多了 node {added[:4]}")
    if removed:
        changes.append(f"少了 node {removed[:4]}")
    edited = [n for n, text in after["nodes"].items() if n in before["nodes"] and before["nodes"][n] != text]
    if edited:
        changes.append(f"改了 node {edited[:4]} 的 target 或輸入")
    if not added and not removed and list(after["nodes"]) != list(before["nodes"]):
        changes.append("改了 node 的順序")
    relabelled = sorted(
        n for n in set(before["labels"]) | set(after["labels"]) if before["labels"].get(n) != after["labels"].get(n)
    )
    if relabelled:
        changes.append(f"改了 {relabelled[:4]} 的標籤")
    return changes


# --- op_targets -----------------------------------------------------------------------------------


def describe_targets(gm: GraphModule, value: Any) -> dict[str, Any]:
    """The returned targets as text, and whether each is the very target object of an op node.

    ``other_targets`` are the targets of the nodes that are not ``call_function`` (sorted), so
    a check can say "you listed a placeholder" without the answer key's help.
    """
    items = as_list(value, "op_targets 的回傳值")
    genuine = {id(n.target): n.target for n in gm.graph.nodes if n.op == "call_function"}
    texts, objects = [], []
    for item in items:
        is_target = id(item) in genuine and genuine[id(item)] is item
        objects.append(is_target)
        if is_target:
            texts.append(str(item))
        elif type(item) is str:
            texts.append(safe_text(item, 80))
        else:
            texts.append(f"（{type(item).__name__}，不是圖上 node 的 target）")
    others = sorted({safe_text(n.target) for n in gm.graph.nodes if n.op != "call_function"})
    return {"targets": texts, "objects": objects, "other_targets": others}


# --- neighbors ------------------------------------------------------------------------------------


def describe_neighbors(ns: Namespace, gm: GraphModule, names: tuple[str, ...]) -> dict[str, Any]:
    """``neighbors(gm, name)`` for each name: producers and consumers as node names."""
    answers: dict[str, Any] = {}
    for name in names:
        value = ns["neighbors"](gm, name)
        if type(value) not in (list, tuple) or len(value) != 2:
            raise EvidenceError(f"neighbors(gm, {name!r}) 應該回傳 (producers, consumers) 兩個 list")
        producers, consumers = value
        answers[name] = {
            "producers": node_labels(gm, producers, "producers "),
            "consumers": node_labels(gm, consumers, "consumers "),
        }
    return answers


# --- public cases: the chapter's models -----------------------------------------------------------


class MaxGate(nn.Module):
    """relu(x) times the row maximum of a linear: ``torch.max(..., dim)`` gives max then getitem."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x)
        b = torch.max(self.fc(x), dim=1, keepdim=True).values
        return b * a


def max_gate_graph(seed: int) -> GraphModule:
    return export(MaxGate(), seeded_inputs(seed, (3, 6)))


def _chapter_graph(name: str, seed: int) -> GraphModule:
    from common.models import get_model

    return export(get_model(name), seeded_inputs(seed, (2, 3, 16, 16)))


def targets_chapter(ns: Namespace, seed: int) -> Any:
    """op_targets on conv_relu, residual (relu twice), cat_pool (cat reads a list) and a max.dim → getitem."""
    result = {}
    for name in ("conv_relu", "residual", "cat_pool"):
        gm = _chapter_graph(name, seed)
        result[name] = describe_targets(gm, ns["op_targets"](gm))
    gm = max_gate_graph(seed)
    result["max_gate"] = describe_targets(gm, ns["op_targets"](gm))
    return result


def neighbors_cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool: x (two convs and _guards_fn read it), a conv, the cat of a list, the pool, output."""
    gm = _chapter_graph("cat_pool", seed)
    return describe_neighbors(ns, gm, ("x", "conv2d_1", "cat", "max_pool2d", "output"))


def neighbors_residual(ns: Namespace, seed: int) -> Any:
    """residual: the add of two tensors, the first relu (read by a conv) and x (read twice)."""
    gm = _chapter_graph("residual", seed)
    return describe_neighbors(ns, gm, ("x", "relu", "add"))


def neighbors_max_gate(ns: Namespace, seed: int) -> Any:
    """relu(x) * max(linear(x)): x read by relu, linear and _guards_fn; getitem reads max (not a tensor op)."""
    return describe_neighbors(ns, max_gate_graph(seed), ("x", "linear", "getitem", "mul"))


PUBLIC = declare(
    __name__,
    Exercise("op_targets", TARGETS_TITLE, ("op_targets",), {"chapter_models": targets_chapter}),
    Exercise(
        "neighbors",
        NEIGHBORS_TITLE,
        ("neighbors",),
        {"cat_pool": neighbors_cat_pool, "residual": neighbors_residual, "max_gate": neighbors_max_gate},
    ),
)
