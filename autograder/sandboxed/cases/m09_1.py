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


# --- models named and nested unlike the chapter's -------------------------------------------------

NAME_STYLES: tuple[dict[str, Any], ...] = (
    {  # Llama-like: q_proj… under self_attn, up/down under mlp, everything but the head one level down
        "outer": ("model",),
        "layers": "layers",
        "norm1": "input_layernorm",
        "norm2": "post_attention_layernorm",
        "attn": "self_attn",
        "qkv": ("q_proj", "k_proj", "v_proj"),
        "out": "o_proj",
        "mlp": "mlp",
        "up": "up_proj",
        "down": "down_proj",
        "embed": "embed_tokens",
        "pos": "embed_positions",
        "final": "norm",
        "head": "lm_head",
    },
    {  # GPT-2-like: one fused c_attn (split into q, k, v), c_fc / c_proj, under transformer.h
        "outer": ("transformer",),
        "layers": "h",
        "norm1": "ln_1",
        "norm2": "ln_2",
        "attn": "attn",
        "qkv": ("c_attn",),
        "out": "c_proj",
        "mlp": "mlp",
        "up": "c_fc",
        "down": "c_proj",
        "embed": "wte",
        "pos": "wpe",
        "final": "ln_f",
        "head": "lm_head",
    },
    {  # two levels deeper, the MLP an nn.Sequential (its linears are named "0" and "2")
        "outer": ("model", "decoder"),
        "layers": "stack",
        "norm1": "pre_norm",
        "norm2": "ffn_norm",
        "attn": "attention",
        "qkv": ("query", "key", "value"),
        "out": "dense",
        "mlp": "ffn",
        "up": None,
        "down": None,
        "embed": "token_embedding",
        "pos": "position_embedding",
        "final": "final_norm",
        "head": "output_projection",
    },
)
"""How the hidden LLM-like models name their modules: none of the chapter's names, other depths (the head at the
top, the blocks one to three levels down), names with underscores and digits."""


class RenamedAttention(nn.Module):
    """Causal self-attention whose linears carry ``style``'s names (one fused q/k/v linear, split, or three)."""

    def __init__(self, config: tinylm.TinyLMConfig, style: dict[str, Any]) -> None:
        super().__init__()
        self.heads, self.d = config.heads, config.d_model
        self.qkv = style["qkv"]
        d, bias = config.d_model, config.bias
        if len(self.qkv) == 1:
            setattr(self, self.qkv[0], nn.Linear(d, 3 * d, bias=bias))
        else:
            for name in self.qkv:
                setattr(self, name, nn.Linear(d, d, bias=bias))
        self.out_name = style["out"]
        setattr(self, self.out_name, nn.Linear(d, d, bias=bias))
        self.register_buffer("causal", torch.ones(config.context, config.context, dtype=torch.bool).triu(1), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        if len(self.qkv) == 1:
            q, k, v = getattr(self, self.qkv[0])(x).split(d, dim=-1)
        else:
            q, k, v = (getattr(self, name)(x) for name in self.qkv)
        q, k, v = (y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        scores = scores.masked_fill(self.causal[:t, :t], float("-inf"))
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return getattr(self, self.out_name)(y.transpose(1, 2).reshape(b, t, d))


class RenamedMlp(nn.Module):
    """up → activation → down, under ``style``'s names."""

    def __init__(self, config: tinylm.TinyLMConfig, style: dict[str, Any]) -> None:
        super().__init__()
        self.names = (style["up"], style["down"])
        setattr(self, style["up"], nn.Linear(config.d_model, config.mlp, bias=config.bias))
        self.act = tinylm.ACTIVATIONS[config.activation]()
        setattr(self, style["down"], nn.Linear(config.mlp, config.d_model, bias=config.bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up, down = (getattr(self, name) for name in self.names)
        return down(self.act(up(x)))


class RenamedLayer(nn.Module):
    """A pre-LN block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``, under ``style``'s names."""

    def __init__(self, config: tinylm.TinyLMConfig, style: dict[str, Any]) -> None:
        super().__init__()
        self.style = {key: style[key] for key in ("norm1", "norm2", "attn", "mlp")}
        setattr(self, style["norm1"], nn.LayerNorm(config.d_model))
        setattr(self, style["attn"], RenamedAttention(config, style))
        setattr(self, style["norm2"], nn.LayerNorm(config.d_model))
        if style["up"] is None:
            act = tinylm.ACTIVATIONS[config.activation]()
            mlp: nn.Module = nn.Sequential(
                nn.Linear(config.d_model, config.mlp, bias=config.bias),
                act,
                nn.Linear(config.mlp, config.d_model, bias=config.bias),
            )
        else:
            mlp = RenamedMlp(config, style)
        setattr(self, style["mlp"], mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        part = {key: getattr(self, name) for key, name in self.style.items()}
        x = x + part["attn"](part["norm1"](x))
        return x + part["mlp"](part["norm2"](x))


class RenamedDecoder(nn.Module):
    """Embeddings, ``config.layers`` layers and the final norm (no head), under ``style``'s names."""

    def __init__(self, config: tinylm.TinyLMConfig, style: dict[str, Any]) -> None:
        super().__init__()
        self.names = (style["embed"], style["pos"], style["layers"], style["final"])
        setattr(self, style["embed"], nn.Embedding(config.vocab, config.d_model))
        setattr(self, style["pos"], nn.Embedding(config.context, config.d_model))
        setattr(self, style["layers"], nn.ModuleList([RenamedLayer(config, style) for _ in range(config.layers)]))
        setattr(self, style["final"], nn.LayerNorm(config.d_model))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        embed, pos, layers, final = (getattr(self, name) for name in self.names)
        x = embed(tokens) + pos(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in layers:
            x = layer(x)
        return final(x)


class Nest(nn.Module):
    """One more level of modules: ``inner`` under ``name``."""

    def __init__(self, name: str, inner: nn.Module) -> None:
        super().__init__()
        self.name = name
        setattr(self, name, inner)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.name)(tokens)


class RenamedLM(nn.Module):
    """An LLM-like decoder named like ``style`` (``NAME_STYLES``): the decoder under ``style["outer"]``, the head
    at the top. ``tied``: the head's weight is the token embedding's (as in GPT-2 and small Llamas)."""

    def __init__(self, config: tinylm.TinyLMConfig, style: dict[str, Any], tied: bool = False) -> None:
        super().__init__()
        self.config = config
        self.head_name = style["head"]  # registered first: a tied weight is then exported under the embedding's name
        setattr(self, self.head_name, nn.Linear(config.d_model, config.vocab, bias=config.bias and not tied))
        decoder: nn.Module = RenamedDecoder(config, style)
        for name in reversed(style["outer"][1:]):
            decoder = Nest(name, decoder)
        self.outer = style["outer"][0]
        setattr(self, self.outer, decoder)
        if tied:
            inner = decoder
            while isinstance(inner, Nest):
                inner = getattr(inner, inner.name)
            getattr(self, self.head_name).weight = getattr(inner, style["embed"]).weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.head_name)(getattr(self, self.outer)(tokens))


def renamed_config(seed: int, **changes: Any) -> tinylm.TinyLMConfig:
    """The sizes of a ``RenamedLM``: they change with ``seed``, like ``variant_config``'s."""
    heads = seed_size(seed // 3, 1, 2)
    fields: dict[str, Any] = {
        "vocab": seed_size(seed + 5, 10, 19),
        "context": 8,
        "d_model": 8 * heads,
        "heads": heads,
        "layers": seed_size(seed // 2, 1, 2),
        "mlp": 16 + 8 * (seed % 2),
        "bias": seed % 4 != 1,
        "activation": ("gelu", "relu")[(seed // 3) % 2],
    }
    fields.update(changes)
    return tinylm.TinyLMConfig(**fields)


def renamed_lm(seed: int, style: int, tied: bool = False, fused: bool = False, **changes: Any) -> RenamedLM:
    """A ``RenamedLM`` in naming style ``style`` (any int: taken modulo the styles), sizes and weights from
    ``seed`` (the global RNG left alone). ``fused``: one q/k/v linear split in three (``split`` and ``getitem``
    nodes in the graph) whatever the style."""
    chosen = NAME_STYLES[style % len(NAME_STYLES)]
    if fused and len(chosen["qkv"]) > 1:
        chosen = {**chosen, "qkv": ("qkv_proj",)}
    return seeded_model(seed, RenamedLM, renamed_config(seed, **changes), chosen, tied)


# --- linear_roles -------------------------------------------------------------------------------


def variants(ns: Namespace, seed: int) -> Any:
    return roles(ns, exported(small_tinylm(variant_config(seed), seed)))


def no_bias(ns: Namespace, seed: int) -> Any:
    return roles(ns, exported(small_tinylm(variant_config(seed + 1, bias=False), seed)))


def mlp_first(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 2, layers=seed_size(seed, 1, 2))
    return roles(ns, exported(seeded_model(seed, MlpFirstLM, config)))


def renamed(ns: Namespace, seed: int) -> Any:
    """An LLM-like model named and nested unlike TinyLM (the style changes with the seed)."""
    return roles(ns, exported(renamed_lm(seed, seed)))


def tied(ns: Namespace, seed: int) -> Any:
    """Another naming style, the head's weight tied to the token embedding (its get_attr names the embedding)."""
    return roles(ns, exported(renamed_lm(seed + 7, seed + 1, tied=True)))


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


class LabelShapes(Quantizer):
    """Runs ``inner``, then rewrites some labels into every other shape a label can take.

    On the first layer_norm: ``None`` under ``ANNOTATION_KEY`` (no label object at all). On every add: a label
    whose input edges are listed with ``None`` specs (keys, no spec: not annotated). On every masked_fill: a
    ``FixedQParamsQuantizationSpec`` output. On every matmul: a ``DerivedQuantizationSpec`` on its first input.
    """

    def __init__(self, inner: Quantizer) -> None:
        self.inner = inner

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        from torchao.quantization.pt2e.quantizer import DerivedQuantizationSpec, FixedQParamsQuantizationSpec

        self.inner.annotate(model)
        norms = [n for n in model.graph.nodes if n.target == torch.ops.aten.layer_norm.default]
        norms[0].meta[ANNOTATION_KEY] = None
        for node in model.graph.nodes:
            if node.target == torch.ops.aten.add.Tensor:
                edges = {arg: None for arg in node.args if isinstance(arg, torch.fx.Node)}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=edges, _annotated=True)
            elif node.target == torch.ops.aten.masked_fill.Scalar:
                fixed = FixedQParamsQuantizationSpec(dtype=torch.uint8, scale=1.0 / 256, zero_point=0)
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=fixed, _annotated=True)
            elif node.target == torch.ops.aten.matmul.default:
                first = node.args[0]
                derived = DerivedQuantizationSpec(
                    derived_from=[(first, node)], derive_qparams_fn=_derive_nothing, dtype=torch.int32
                )
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={first: derived}, _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


def _derive_nothing(observers: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The derive function of ``LabelShapes``' derived spec (never called: the graph is only annotated)."""
    return torch.ones(1), torch.zeros(1, dtype=torch.int64)


def label_shapes(ns: Namespace, seed: int) -> Any:
    """An LLM-like model (fused q/k/v: split and getitem nodes) only annotated by the static config, then
    ``LabelShapes``: a None label, input edges without specs, a fixed-qparams output, a derived input spec."""
    model = renamed_lm(seed + 5, seed + 2, fused=True)
    return census(ns, annotated(model, LabelShapes(make_quantizer("static"))))


def annotated_only(ns: Namespace, seed: int) -> Any:
    config = variant_config(seed + 4, norm_first=False, activation="relu")
    return census(ns, annotated(small_tinylm(config, seed), make_quantizer("static")))


EXERCISES = with_hidden_cases(
    PUBLIC,
    linear_roles={
        "variants": variants,
        "renamed": renamed,
        "tied": tied,
        "no_bias": no_bias,
        "mlp_first": mlp_first,
        "shared_layers": shared_layers,
    },
    annotation_census={
        "static": static,
        "dynamic": dynamic,
        "module_type": module_type,
        "other_labels": other_labels,
        "label_shapes": label_shapes,
        "annotated_only": annotated_only,
    },
)

STANDINS = {
    "linear_roles": lambda gm: {},
    "annotation_census": lambda gm: {},
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``)."""
