"""M09-1 一個小 Transformer: linear_roles and annotation_census on hidden TinyLM-like models.

``linear_roles`` is handed exported graphs of untrained TinyLMs the student has not seen: other sizes,
layer counts, heads and vocabularies, post-LN and ReLU blocks, linears without bias; a model whose
blocks run the MLP before attention (the linears meet in another order); and a model that applies one
block several times (ALBERT-style shared layers: each nn.Linear gives several linear nodes).

``annotation_census`` is handed graphs of such models that ExecuTorch's XNNPACKQuantizer prepared:
static config, dynamic config, the static config only on one module class (``set_module_type``), the
static config with two labels of another Quantizer (an empty claimed label on the head, an output-only
label with ``_annotated`` left False on each softmax), and a graph only annotated (no observers yet).
Every model is built on every seed; seeds change the sizes and which variant. ExecuTorch is imported
only when a case runs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_model, with_hidden_cases
from common import tinylm
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from common.qspecs import act_spec
from selfcheck.public.m09_1 import PUBLIC, annotated, census, exported, make_quantizer, prepared, roles, small_tinylm

# --- hidden models ------------------------------------------------------------------------------


def variant_config(seed: int, **changes: Any) -> tinylm.TinyLMConfig:
    """A small TinyLM configuration that changes with ``seed``: sizes, layers, pre/post-LN, GELU/ReLU."""
    heads = seed_size(seed, 1, 3)
    fields: dict[str, Any] = {
        "vocab": seed_size(seed, 9, 17),
        "context": 8,
        "d_model": 8 * heads,
        "heads": heads,
        "layers": 1 + (seed + 1) % 3,
        "mlp": 16 + 8 * (seed % 3),
        "norm_first": seed % 2 == 0,
        "activation": ("gelu", "relu")[(seed // 2) % 2],
    }
    fields.update(changes)
    return tinylm.TinyLMConfig(**fields)


class MlpFirstBlock(tinylm.Block):
    """A block that runs its MLP before its attention: ``x + mlp(ln2(x))``, then ``x + attn(ln1(x))``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mlp(self.ln2(x))
        return x + self.attn(self.ln1(x))


class MlpFirstLM(tinylm.TinyLM):
    """TinyLM whose blocks are ``MlpFirstBlock``: fc1, fc2 come before q, k, v, out in the graph."""

    def __init__(self, config: tinylm.TinyLMConfig) -> None:
        super().__init__(config)
        self.blocks = nn.ModuleList([MlpFirstBlock(config) for _ in range(config.layers)])


class SharedLayersLM(tinylm.TinyLM):
    """TinyLM with one block applied ``repeat`` times (shared layers): each of its linears gives ``repeat`` nodes."""

    def __init__(self, config: tinylm.TinyLMConfig, repeat: int) -> None:
        super().__init__(config)
        self.repeat = repeat

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for _ in range(self.repeat):
            x = self.blocks[0](x)
        return self.head(self.ln_f(x))


class OtherLabels(Quantizer):
    """Runs ``inner`` between the labels of another Quantizer.

    Before: an empty claimed label (``_annotated=True``, no spec) on the last linear (the head), which
    keeps it in fp32. After: an output-only label with ``_annotated`` left False on each softmax.
    """

    def __init__(self, inner: Quantizer) -> None:
        self.inner = inner

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        linears = [n for n in model.graph.nodes if n.target == torch.ops.aten.linear.default]
        linears[-1].meta[ANNOTATION_KEY] = QuantizationAnnotation(_annotated=True)
        self.inner.annotate(model)
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.softmax.int:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=act_spec())
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


# --- linear_roles -------------------------------------------------------------------------------


def variants(ns: Namespace, seed: int) -> Any:
    return roles(ns, exported(small_tinylm(variant_config(seed), seed)))


def no_bias(ns: Namespace, seed: int) -> Any:
    return roles(ns, exported(small_tinylm(variant_config(seed + 1, bias=False), seed)))


def mlp_first(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 2, layers=seed_size(seed, 1, 2))
    return roles(ns, exported(seeded_model(seed, MlpFirstLM, config)))


def shared_layers(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 3, layers=1)
    return roles(ns, exported(seeded_model(seed, SharedLayersLM, config, seed_size(seed, 2, 3))))


# --- annotation_census ----------------------------------------------------------------------------


def static(ns: Namespace, seed: int) -> Any:
    return census(ns, prepared(small_tinylm(variant_config(seed), seed), make_quantizer("static")))


def dynamic(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 1, layers=seed_size(seed, 1, 2))
    return census(ns, prepared(seeded_model(seed, MlpFirstLM, config), make_quantizer("dynamic")))


def module_type(ns: Namespace, seed: int) -> Any:
    which = (tinylm.Mlp, tinylm.CausalSelfAttention)[seed % 2]
    model = small_tinylm(variant_config(seed + 2, bias=seed % 3 != 0), seed)
    return census(ns, prepared(model, make_quantizer("static", which)))


def other_labels(ns: Namespace, seed: int) -> Any:
    model = small_tinylm(variant_config(seed + 3), seed)
    return census(ns, prepared(model, OtherLabels(make_quantizer("static"))))


def annotated_only(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 4, norm_first=False, activation="relu")
    return census(ns, annotated(small_tinylm(config, seed), make_quantizer("static")))


EXERCISES = with_hidden_cases(
    PUBLIC,
    linear_roles={"variants": variants, "no_bias": no_bias, "mlp_first": mlp_first, "shared_layers": shared_layers},
    annotation_census={
        "static": static,
        "dynamic": dynamic,
        "module_type": module_type,
        "other_labels": other_labels,
        "annotated_only": annotated_only,
    },
)

STANDINS = {
    "linear_roles": lambda gm: {},
    "annotation_census": lambda gm: {},
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``)."""
