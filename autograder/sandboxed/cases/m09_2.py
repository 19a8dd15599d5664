"""M09-2 動態量化: DynamicLinearQuantizer on hidden TinyLMs.

Every case builds TinyLMs the student has not seen (``common.tinylm.TinyLMConfig``: other
d_model, heads, layers, MLP width, vocabulary and context; with and without bias; pre-LN and
post-LN; GELU and ReLU), runs the student's Quantizer on each the dynamic way and keeps
``selfcheck.public.m09_2.dynamic_record``: the labels right after ``annotate``, the observer
instances after ``prepare_pt2e``, and after ``convert_pt2e`` every linear's input / weight / bias
path, whether its output is quantized, the quantized_decomposed ops counted and the other ops
that read a dequantized value. Seeds change every size, and which model of a case has a bias.
One case (``composed``) builds an LLM-like model named and nested unlike TinyLM and runs the student's
Quantizer between two others (EmbeddingQuantizer before it, XNNPACK's 4-bit dynamic config after it).
Each model is small (a case well under a second).
"""

from __future__ import annotations

from typing import Any

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_tokens, with_hidden_cases
from autograder.sandboxed.cases.m09_1 import renamed_lm
from common.tinylm import TinyLMConfig
from selfcheck.probes import ChainQuantizer
from selfcheck.public.m09_1 import small_tinylm
from selfcheck.public.m09_2 import PUBLIC, dynamic_record


def _config(seed: int, **fixed: Any) -> dict[str, Any]:
    heads = seed_size(seed, 1, 3)
    config = {
        "heads": heads,
        "d_model": heads * seed_size(seed // 3, 4, 7),
        "layers": 1 + (seed // 2) % 2,
        "mlp": 8 * seed_size(seed // 5, 2, 5),
        "vocab": seed_size(seed // 11, 9, 30),
        "context": seed_size(seed // 13, 6, 12),
    }
    return {**config, **fixed}


def _run(ns: Namespace, seed: int, **fixed: Any) -> dict[str, Any]:
    config = _config(seed, **fixed)
    model = small_tinylm(TinyLMConfig(**config), seed)
    batch = (seeded_tokens(seed, config["vocab"], 2, config["context"]),)
    return dynamic_record(ns["DynamicLinearQuantizer"](), model, batch)


def pre_ln(ns: Namespace, seed: int) -> Any:
    """A pre-LN GELU TinyLM of other sizes, with bias."""
    return _run(ns, seed, bias=True)


def no_bias_relu(ns: Namespace, seed: int) -> Any:
    """Linears without bias, ReLU in the MLP, one layer more or less."""
    return _run(ns, seed + 1, bias=False, activation="relu")


def post_ln(ns: Namespace, seed: int) -> Any:
    """A post-LN TinyLM (q / k / v read the residual stream itself); with or without bias by seed."""
    return _run(ns, seed + 2, norm_first=False, bias=seed % 2 == 0, layers=2)


def composed(ns: Namespace, seed: int) -> Any:
    """An LLM-like model named and nested unlike TinyLM (``renamed_lm``: the naming style, and whether q / k / v
    are one fused linear, change with the seed), quantized by a chain of three Quantizers, as ExecuTorch's
    recipes compose them: ``EmbeddingQuantizer`` first (its labels on the embeddings must survive), the
    student's, then XNNPACK's 4-bit dynamic config, which labels only the linears nobody has claimed
    (``_annotated``). The labels are read before that last one runs."""
    from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer

    from common.dynamic import xnnpack_dynamic_quantizer

    model = renamed_lm(seed + 3, seed + 1, fused=seed % 2 == 1, bias=True)
    batch = (seeded_tokens(seed, model.config.vocab, 2, model.config.context),)
    chain = ChainQuantizer([EmbeddingQuantizer(), ns["DynamicLinearQuantizer"]()])
    return dynamic_record(chain, model, batch, after=(xnnpack_dynamic_quantizer(-8, 7),))


EXERCISES = with_hidden_cases(
    PUBLIC,
    dynamic_linear_quantizer={"pre_ln": pre_ln, "no_bias_relu": no_bias_relu, "post_ln": post_ln, "composed": composed},
)
