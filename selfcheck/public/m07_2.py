"""Public cases of M07-2 訓練、凍結、convert (freeze_bn_stats) on the chapter's own models.

Also what the hidden cases share: what a graph looks like after the student's
``freeze_bn_stats``, read by the case itself: every ``batch_norm`` node's ``training`` flag,
whether the running statistics still change when the graph runs on training batches, and a
fingerprint of every other node (so a change elsewhere shows). ``freeze_bn_stats`` works on
the graph it is handed (the training loop calls ``freeze_bn_stats(qat)`` and goes on with
``qat``): a module other than that graph coming back (an edited copy) is refused with a
sentence that says so. The graphs are handed over without export's ``_guards_fn`` module,
so that such a copy can be told apart in the grader's replay too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

TITLE = "freeze_bn_stats：QAT 後段凍結 BN 的統計"

BATCH_NORM = torch.ops.aten.batch_norm.default


def without_guards(gm: GraphModule) -> GraphModule:
    """``gm`` without export's ``_guards_fn`` call (a shape check of the inputs; nothing reads its result)."""
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn" and not node.users:
            gm.graph.erase_node(node)
    if hasattr(gm, "_guards_fn"):
        delattr(gm, "_guards_fn")
    gm.recompile()
    return gm


def export_train(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``model`` exported as it is (``.train()`` it first; a submodule may be left in eval mode), without ``_guards_fn``."""
    from common.pt2e import export_module

    return without_guards(export_module(model, inputs))


def freeze(ns: Namespace, gm: GraphModule) -> None:
    """``freeze_bn_stats(gm)``; an nn.Module other than ``gm`` coming back is refused (``gm`` itself or anything else is fine)."""
    returned = ns["freeze_bn_stats"](gm)
    if isinstance(returned, torch.nn.Module) and returned is not gm:
        raise EvidenceError(
            f"freeze_bn_stats 要直接改傳進來的 gm（in place），不需要回傳值：你回傳了另一個 {type(returned).__name__}"
            "（例如改過的複本），但呼叫的地方不看回傳值，之後訓練與評分用的都是傳進來的那個 gm"
        )


def _fingerprint(gm: GraphModule) -> list[str]:
    """Every node that is not a batch_norm, as ``op target args`` text (names only for nodes)."""
    out = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == BATCH_NORM:
            continue
        args = [a.name if isinstance(a, torch.fx.Node) else repr(a) for a in node.args]
        out.append(f"{node.op} {node.target} ({', '.join(args)})")
    return out


def _statistics(gm: GraphModule) -> list[torch.Tensor]:
    return [b.detach().clone() for name, b in gm.named_buffers() if name.endswith(("running_mean", "running_var"))]


def describe_frozen(ns: Namespace, gm: GraphModule, batches: list[tuple[torch.Tensor, ...]]) -> dict[str, Any]:
    """Call ``freeze_bn_stats(gm)``, then read the graph and run it on ``batches`` (grad off)."""
    freeze(ns, gm)
    flags = [
        bool(node.args[5]) if len(node.args) > 5 else "（沒有 training 引數）"
        for node in gm.graph.nodes
        if node.op == "call_function" and node.target == BATCH_NORM
    ]
    before = _statistics(gm)
    shape, problem = None, None
    try:
        with torch.no_grad():
            for batch in batches:
                shape = list(gm(*batch).shape)
    except Exception as exc:  # the graph the answer left does not run (e.g. a shape changed elsewhere)
        problem = f"{type(exc).__name__}: {safe_text(exc, 160)}"
    after = _statistics(gm)
    changed = sum(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    return {
        "training_flags": flags,
        "statistics_changed": changed,
        "output_shape": shape,
        "run_error": problem,
        "others": _fingerprint(gm),
    }


# --- public cases -------------------------------------------------------------------------------


def public_conv_bn_relu(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu exported in training mode: one BN."""
    from common.models import get_model

    inputs = seeded_inputs(seed, (4, 3, 16, 16))
    gm = export_train(get_model("conv_bn_relu").train(), inputs)
    return describe_frozen(ns, gm, [seeded_inputs(seed + 1, (4, 3, 16, 16))])


def public_residual(ns: Namespace, seed: int) -> Any:
    """residual exported in training mode: two BNs, an add."""
    from common.models import get_model

    inputs = seeded_inputs(seed, (4, 3, 16, 16))
    gm = export_train(get_model("residual").train(), inputs)
    return describe_frozen(ns, gm, [seeded_inputs(seed + 1, (4, 3, 16, 16))])


PUBLIC = declare(
    __name__,
    Exercise(
        "freeze_bn_stats",
        TITLE,
        ("freeze_bn_stats",),
        {"conv_bn_relu": public_conv_bn_relu, "residual": public_residual},
    ),
)
