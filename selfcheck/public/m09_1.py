"""Public cases of M09-1 一個小 Transformer (linear_roles, annotation_census) on the chapter's own TinyLM.

Also what the chapter and the hidden cases share: ExecuTorch's XNNPACKQuantizer with the static or the
dynamic symmetric config (``make_quantizer``), a TinyLM exported as PT2E takes it (``exported``), prepared
with a Quantizer (``prepared``) or only annotated (``annotated``), and reading what the two answers
returned. ExecuTorch is imported only inside the functions that need it.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.fx import GraphModule

from common import tinylm
from selfcheck.casekit import Exercise, Namespace, declare, seeded_model, seeded_tokens
from selfcheck.evidence import EvidenceError, returned_dict, safe_text

ROLES_TITLE = "linear_roles：每個 linear node 來自哪個 nn.Linear"
CENSUS_TITLE = "annotation_census：每種 aten op 標了幾個、沒標幾個"

KINDS = ("static", "dynamic")
"""The two configs of this chapter: activations observed at calibration (static) or at run time (dynamic)."""


def make_quantizer(kind: str = "static", module_type: type[nn.Module] | None = None) -> Any:
    """ExecuTorch's XNNPACKQuantizer with ``get_symmetric_quantization_config(is_per_channel=True, is_dynamic=...)``.

    ``kind`` is ``"static"`` or ``"dynamic"``. The config is set globally, or with ``module_type`` only on
    that module class (``set_module_type``). Built without the QAT-only conv → BN patterns
    (``qat_patterns=False``): TinyLM has no conv, and they cost a second or more per ``prepare_pt2e``.
    """
    from common.backends import symmetric_xnnpack_quantizer

    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {KINDS}")
    quantizer = symmetric_xnnpack_quantizer(qat_patterns=False, is_per_channel=True, is_dynamic=kind == "dynamic")
    if module_type is None:
        return quantizer
    config, quantizer.global_config = quantizer.global_config, None
    return quantizer.set_module_type(module_type, config)


def exported(model: nn.Module, batch: int = 4) -> GraphModule:
    """``model`` (eval) exported on ``batch`` windows of its own context: the graph PT2E works on.

    The tokens come from a fixed generator (the global RNG is left alone) and stay inside the model's vocabulary.
    """
    from common.pt2e import export_module

    config = model.config  # type: ignore[attr-defined]
    return export_module(model.eval(), (seeded_tokens(batch, config.vocab, batch, config.context),))


def prepared(model: nn.Module, quantizer: Any) -> GraphModule:
    """``prepare_pt2e(exported(model), quantizer)``: the annotations stay in ``node.meta``, observers are inserted."""
    from common.pt2e import prepare_pt2e

    return prepare_pt2e(exported(model), quantizer)


def annotated(model: nn.Module, quantizer: Any) -> GraphModule:
    """``exported(model)`` only annotated by ``quantizer`` (``transform_for_annotation``, then ``annotate``): no observers."""
    gm = quantizer.transform_for_annotation(exported(model))
    quantizer.annotate(gm)
    return gm


def small_tinylm(config: tinylm.TinyLMConfig, seed: int) -> tinylm.TinyLM:
    """An untrained ``TinyLM(config)`` whose weights come from ``seed`` (the global RNG is left alone)."""
    return seeded_model(seed, tinylm.TinyLM, config)  # type: ignore[return-value]


# --- reading the answers ----------------------------------------------------------------------------


def roles(ns: Namespace, gm: GraphModule) -> dict[str, str]:
    """``linear_roles(gm)``, checked to be ``{node name: module name}`` (plain strings)."""
    got = returned_dict(ns["linear_roles"](gm), "linear_roles", "node 名稱 → nn.Linear 的名稱")
    out = {}
    for key, name in got.items():
        if type(key) is not str or type(name) is not str:
            raise EvidenceError("linear_roles 的 key 與值都應該是 str（node 的名稱、nn.Linear 的名稱）")
        out[safe_text(key, 80)] = safe_text(name, 120)
    return out


def census(ns: Namespace, gm: GraphModule) -> dict[str, dict[str, int]]:
    """``annotation_census(gm)``, checked to be ``{op: {"annotated": int, "unannotated": int}}``."""
    got = returned_dict(ns["annotation_census"](gm), "annotation_census", "op → 次數")
    out = {}
    for op, counts in got.items():
        if type(op) is not str:
            raise EvidenceError(
                f"annotation_census 的 key 應該是 op 的名稱（str(node.target)），看到 {type(op).__name__}"
            )
        if type(counts) is not dict or set(counts) != {"annotated", "unannotated"}:
            raise EvidenceError(
                f'annotation_census["{safe_text(op, 60)}"] 應該是 {{"annotated": 次數, "unannotated": 次數}}'
            )
        if any(type(counts[k]) is not int for k in counts):
            raise EvidenceError(f'annotation_census["{safe_text(op, 60)}"] 的次數應該是 int')
        out[safe_text(op, 80)] = {"annotated": counts["annotated"], "unannotated": counts["unannotated"]}
    return out


# --- public cases -----------------------------------------------------------------------------------


def shipped(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM (shipped weights), exported."""
    return roles(ns, exported(tinylm.tinylm_model()))


def one_layer_no_bias(ns: Namespace, seed: int) -> Any:
    """A one-block TinyLM whose linears have no bias."""
    config = tinylm.TinyLMConfig(layers=1, d_model=32, heads=2, mlp=48, bias=False)
    return roles(ns, exported(small_tinylm(config, seed)))


def static(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM prepared with the static config."""
    return census(ns, prepared(tinylm.tinylm_model(), make_quantizer("static")))


def dynamic(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM prepared with the dynamic config."""
    return census(ns, prepared(tinylm.tinylm_model(), make_quantizer("dynamic")))


PUBLIC = declare(
    __name__,
    Exercise(
        "linear_roles", ROLES_TITLE, ("linear_roles",), {"shipped": shipped, "one_layer_no_bias": one_layer_no_bias}
    ),
    Exercise(
        "annotation_census",
        CENSUS_TITLE,
        ("annotation_census",),
        {"static": static, "dynamic": dynamic},
        case_seconds=90,  # the first case imports ExecuTorch (seconds, more on a busy machine)
    ),
)
