"""Public cases of M08-1 兩個 XNNPACKQuantizer (quantizer_report) on the chapter's own models.

Also what the chapter and the hidden cases share: reading what ``quantizer_report`` returned
(names only, compared sorted), the two Quantizers by name, ``KeepFp32`` (empty claimed labels
that keep ops out of a Quantizer's reach). ExecuTorch is imported only inside the functions
that need it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text

TITLE = "quantizer_report：沒標到的 op 與共用的 observer 實例"

QUANTIZERS = ("torchao", "executorch")
"""torchao's testing XNNPACKQuantizer and ExecuTorch's, both per-channel by default."""


def make_quantizer(which: str, is_per_channel: bool = True) -> Any:
    """A fresh XNNPACKQuantizer: ``"torchao"`` (its testing copy) or ``"executorch"``, with the symmetric config.

    ExecuTorch's without its QAT-only conv → BN patterns (``qat_patterns=False``): by the time
    ``prepare_pt2e`` annotates, BN is folded into its conv and they match nothing, so the cases'
    copy gets the same labels in a fraction of the time.
    """
    if which == "torchao":
        from common.pt2e import get_xnnpack_quantizer

        return get_xnnpack_quantizer(is_per_channel=is_per_channel)[0]
    from common.backends import executorch_xnnpack_quantizer

    return executorch_xnnpack_quantizer(is_per_channel=is_per_channel, qat_patterns=False)


class KeepFp32(Quantizer):
    """Runs ``inner``, after putting an empty claimed label (``_annotated=True``, no spec) on the ``keep`` nodes.

    Both XNNPACKQuantizers skip nodes that are already claimed, so those ops stay in fp32.
    """

    def __init__(self, inner: Quantizer, keep: Iterable[str]) -> None:
        self.inner, self.keep = inner, set(keep)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.name in self.keep:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
        self.inner.annotate(model)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


def _names(value: Any, what: str) -> list[str]:
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 node 名稱（str）的 list，看到 {type(value).__name__}")
    if len(value) > 2000:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    for item in value:
        if type(item) is not str:
            raise EvidenceError(f"{what}的每一項應該是 node 的名稱（str），看到 {type(item).__name__}")
    return sorted(safe_text(item, 80) for item in value)


def report(ns: Namespace, model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any) -> dict[str, Any]:
    """``quantizer_report(model, inputs, quantizer)`` as sorted names: the order does not matter."""
    got = ns["quantizer_report"](model.eval(), inputs, quantizer)
    if type(got) is not dict or set(got) != {"unannotated", "shared"}:
        raise EvidenceError('quantizer_report 應該回傳 {"unannotated": [...], "shared": [[...], ...]} 這樣的 dict')
    groups = got["shared"]
    if type(groups) not in (list, tuple):
        raise EvidenceError(f"shared 應該是 list（每個共用的 observer 實例一組），看到 {type(groups).__name__}")
    if len(groups) > 500:
        raise EvidenceError(f"shared 太長（{len(groups)} 組）")
    return {
        "unannotated": _names(got["unannotated"], "unannotated "),
        "shared": sorted(_names(group, "shared 的每一組") for group in groups),
    }


def both(ns: Namespace, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """The report of each XNNPACKQuantizer (per-channel) on ``model``."""
    return {which: report(ns, model, inputs, make_quantizer(which)) for which in QUANTIZERS}


# --- public cases -------------------------------------------------------------------------------


def cat_pool(ns: Namespace, seed: int) -> Any:
    """cat_pool (x → two convs → cat → max_pool2d) with each XNNPACKQuantizer."""
    from common.models import get_model

    torch.manual_seed(seed)
    return both(ns, get_model("cat_pool"), seeded_inputs(seed, (2, 3, 16, 16)))


def cat_pool_keep_cat(ns: Namespace, seed: int) -> Any:
    """cat_pool with ExecuTorch's Quantizer, cat kept in fp32 by an empty claimed label."""
    from common.models import get_model

    torch.manual_seed(seed)
    quantizer = KeepFp32(make_quantizer("executorch"), ["cat"])
    return report(ns, get_model("cat_pool"), seeded_inputs(seed, (2, 3, 16, 16)), quantizer)


PUBLIC = declare(
    __name__,
    Exercise(
        "quantizer_report",
        TITLE,
        ("quantizer_report",),
        {"cat_pool": cat_pool, "cat_pool_keep_cat": cat_pool_keep_cat},
        case_seconds=90,  # the first case imports ExecuTorch (seconds, more on a busy machine)
    ),
)
