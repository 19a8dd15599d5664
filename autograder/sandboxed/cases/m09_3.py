"""M09-3: LLMQuantizer and graph_bytes on hidden TinyLM variants.

``llm_quantizer``: the student's ``LLMQuantizer()`` prepares, and (after one forward) the grader
converts, two TinyLM variants per seed that differ from the chapter's in every size (vocabulary,
context, width, heads, layers, MLP) and in the flags of ``TinyLMConfig`` (linears with or without
bias, pre-LN or post-LN, GELU or ReLU; the two cases of a seed take opposite flags). The evidence
is ``selfcheck.public.m09_3.structure``: each linear's weight dequantize (op, axis, range, dtype)
and input (dynamic or static), each embedding's weight, and the q / dq around every other op. No
case lowers to ExecuTorch. A third case (``composed``) builds an LLM-like model whose modules are named and
nested unlike TinyLM's, and runs ``LLMQuantizer()`` after another Quantizer that keeps its head at 8 bits.

``graph_bytes``: the student's function on graphs the grader converts with the course's own
Quantizers (never the student's): int8 dynamic, 4-bit + embedding, a float export whose float32
constants are views into one flat, padded storage (a view's bytes are its own, not its storage's),
and an int8 dynamic model whose LayerNorms share one module, with every extra read of a constant given its
own ``get_attr`` node (the same target read by several nodes is one tensor).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_tokens, with_hidden_cases
from autograder.sandboxed.cases.m09_1 import renamed_lm
from common.dynamic import convert_dynamic, xnnpack_dynamic_quantizer
from common.tinylm import TinyLMConfig
from selfcheck.probes import ChainQuantizer
from selfcheck.public.m09_1 import small_tinylm
from selfcheck.public.m09_3 import PUBLIC, composed_quantizer, quantizer_case, read_bytes, structure, tinylm_graph

ACTIVATIONS = ("gelu", "relu")


def variant_sizes(seed: int, flip: bool) -> dict[str, Any]:
    """The ``TinyLMConfig`` of a hidden variant: flags from ``seed`` (opposite when ``flip``), sizes from ``seed``
    (from another seed when ``flip``)."""
    sizes_seed = seed + 11 if flip else seed
    heads = seed_size(sizes_seed, 1, 3)
    flags = [bool(seed % 2), bool((seed // 2) % 2), (seed // 4) % 2]
    if flip:
        flags = [not flags[0], not flags[1], 1 - flags[2]]
    return {
        "vocab": seed_size(sizes_seed + 1, 9, 17),
        "context": seed_size(sizes_seed + 2, 5, 9),
        "d_model": heads * seed_size(sizes_seed + 3, 4, 8),
        "heads": heads,
        "layers": seed_size(sizes_seed + 4, 1, 2),
        "mlp": seed_size(sizes_seed + 5, 10, 30),
        "bias": flags[0],
        "norm_first": flags[1],
        "activation": ACTIVATIONS[flags[2]],
    }


def variant(seed: int, flip: bool = False) -> tuple[nn.Module, torch.Tensor]:
    sizes = variant_sizes(seed, flip)
    return small_tinylm(TinyLMConfig(**sizes), seed), seeded_tokens(seed, sizes["vocab"], 3, sizes["context"])


# --- llm_quantizer --------------------------------------------------------------------------------


def quantizer_variant(ns: Namespace, seed: int) -> Any:
    return quantizer_case(ns, *variant(seed))


def quantizer_flipped(ns: Namespace, seed: int) -> Any:
    return quantizer_case(ns, *variant(seed, flip=True))


def head_at_8_bit(head: str) -> Any:
    """XNNPACK's 8-bit dynamic config on the module ``head`` only (``set_module_name``): the head kept at 8 bits."""
    quantizer = xnnpack_dynamic_quantizer()
    config, quantizer.global_config = quantizer.global_config, None
    return quantizer.set_module_name(head, config)


def quantizer_composed(ns: Namespace, seed: int) -> Any:
    """An LLM-like model named and nested unlike TinyLM (``renamed_lm``: style, fused q/k/v and bias from the
    seed) whose head another Quantizer keeps at 8 bits before ``LLMQuantizer()`` runs (a chain of the two):
    the student's must leave that head's labels alone and quantize everything else."""
    model = renamed_lm(seed + 4, seed + 2, fused=seed % 2 == 0, bias=seed % 3 != 1)
    tokens = seeded_tokens(seed, model.config.vocab, 3, model.config.context)
    chain = ChainQuantizer([head_at_8_bit(model.head_name), ns["LLMQuantizer"]()])
    return structure(convert_dynamic(tinylm_graph(model, tokens), chain, [(tokens,)]))


# --- graph_bytes ----------------------------------------------------------------------------------


def split_reads(gm: GraphModule) -> GraphModule:
    """Every further consumer of a ``get_attr`` node gets a ``get_attr`` node of its own, same target (in place)."""
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        for user in list(node.users)[1:]:
            with gm.graph.inserting_before(user):
                again = gm.graph.get_attr(str(node.target))
            again.meta.update(node.meta)
            user.replace_input_with(node, again)
    gm.graph.lint()
    gm.recompile()
    return gm


FLAT_PADDING = 64
"""Elements at the end of the flat storage that no constant is a view of (as alignment leaves them)."""


def flat_storage(gm: GraphModule, dtype: torch.dtype = torch.float32) -> GraphModule:
    """Every ``dtype`` constant the graph reads made a view into one flat storage (in place), the way a
    flattened parameter or a memory-mapped checkpoint keeps them, with padding at the end: a tensor's
    bytes are its own (``numel() * element_size()``), not its storage's."""
    targets = list(dict.fromkeys(str(n.target) for n in gm.graph.nodes if n.op == "get_attr"))
    found = []
    for target in targets:
        owner_path, _, name = target.rpartition(".")
        owner = gm.get_submodule(owner_path) if owner_path else gm
        tensor = getattr(owner, name)
        if isinstance(tensor, torch.Tensor) and tensor.dtype == dtype:
            found.append((owner, name, tensor))
    flat = torch.zeros(sum(t.numel() for _, _, t in found) + FLAT_PADDING, dtype=dtype)
    start = 0
    for owner, name, tensor in found:
        view = flat[start : start + tensor.numel()].view(tensor.shape)
        view.copy_(tensor.detach())
        start += tensor.numel()
        if name in owner._parameters:
            owner._parameters[name] = nn.Parameter(view, requires_grad=False)
        elif name in owner._buffers:
            owner._buffers[name] = view
        else:
            setattr(owner, name, view)
    return gm


class SharedNorms(nn.Module):
    """A TinyLM whose LayerNorms are one module (ln1, ln2 of every block and ln_f)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        norm = model.ln_f
        for block in model.blocks:
            block.ln1 = norm
            block.ln2 = norm
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens)


def bytes_of(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    return read_bytes(ns["graph_bytes"](gm))


def bytes_int8(ns: Namespace, seed: int) -> Any:
    model, tokens = variant(seed)
    return bytes_of(ns, convert_dynamic(tinylm_graph(model, tokens), xnnpack_dynamic_quantizer(), [(tokens,)]))


def bytes_int4_embedding(ns: Namespace, seed: int) -> Any:
    model, tokens = variant(seed, flip=True)
    return bytes_of(ns, convert_dynamic(tinylm_graph(model, tokens), composed_quantizer(), [(tokens,)]))


def bytes_float(ns: Namespace, seed: int) -> Any:
    model, tokens = variant(seed + 2)
    return bytes_of(ns, flat_storage(tinylm_graph(model, tokens)))


def bytes_shared(ns: Namespace, seed: int) -> Any:
    """int8 dynamic, not 4-bit: this case judges constants read twice, and only ``int4_embedding`` the bytes of a
    4-bit weight (issue 50: one mistake costs once)."""
    model, tokens = variant(seed + 3, flip=True)
    converted = convert_dynamic(tinylm_graph(SharedNorms(model), tokens), xnnpack_dynamic_quantizer(), [(tokens,)])
    return bytes_of(ns, split_reads(converted))


EXERCISES = with_hidden_cases(
    PUBLIC,
    llm_quantizer={"variant": quantizer_variant, "flipped": quantizer_flipped, "composed": quantizer_composed},
    graph_bytes={
        "int8_dynamic": bytes_int8,
        "int4_embedding": bytes_int4_embedding,
        "float": bytes_float,
        "shared_reads": bytes_shared,
    },
)


def _no_bytes(gm: GraphModule) -> dict[str, int]:
    """The stand-in of ``graph_bytes``: an answer of the right type, no content."""
    return {}


STANDINS = {"graph_bytes": _no_bytes}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``)."""
