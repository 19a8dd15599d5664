"""Public cases of M09-3 4-bit weight、embedding 與出貨 (LLMQuantizer, graph_bytes) on the chapter's TinyLM.

Also what the chapter and the hidden cases share:

- ``tinylm_graph``: a TinyLM exported for PT2E, its Python-scalar operands already turned into
  constants (``mul(scores, 0.25)`` → ``mul(scores, _tensor_constant_0)``, what XNNPACKQuantizer's
  ``transform_for_annotation`` does), so that every Quantizer sees the same nodes;
- converting goes through ``common.dynamic.convert_dynamic`` (prepare, one forward: the weights'
  observers need it, convert in place: a dynamic spec breaks ``convert_pt2e(copy.deepcopy(...))``);
- ``structure``: what a converted graph does to each linear (weight dequantize and its range, input
  dynamic or static), each embedding (weight dequantize) and every other op (q / dq around it), as
  plain data without a float in it;
- ``read_bytes``: what ``graph_bytes`` returned, checked and with its keys as dtype names.

ExecuTorch is imported only inside the functions that need it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from common.dynamic import convert_dynamic
from common.tinylm import TinyLMConfig, example_inputs, tinylm_model
from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_model, seeded_tokens
from selfcheck.evidence import EvidenceError, returned_dict, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.probes import ChainQuantizer
from selfcheck.public.m09_1 import small_tinylm

TITLE_QUANTIZER = "LLMQuantizer：embedding 用 EmbeddingQuantizer、linear 用 4-bit 動態 XNNPACKQuantizer"
TITLE_BYTES = "graph_bytes：轉換後的圖真正讀的 tensor 有多少 byte"

LINEAR = torch.ops.aten.linear.default
EMBEDDING = torch.ops.aten.embedding.default
OTHER_OPS = {
    torch.ops.aten.layer_norm.default: "layer_norm",
    torch.ops.aten.softmax.int: "softmax",
    torch.ops.aten.matmul.default: "matmul",
    torch.ops.aten.gelu.default: "gelu",
    torch.ops.aten.relu.default: "relu",
    torch.ops.aten.add.Tensor: "add",
    torch.ops.aten.mul.Tensor: "mul",
    torch.ops.aten.masked_fill.Scalar: "masked_fill",
}
"""The ops of TinyLM that no Quantizer of the chapter quantizes (they compute in float)."""


# --- graphs ---------------------------------------------------------------------------------------


def scalars_to_constants(gm: GraphModule) -> GraphModule:
    """``gm`` with every Python-scalar operand of a binary op made a constant tensor (in place).

    The same rewrite XNNPACKQuantizer's ``transform_for_annotation`` does (torchao's
    ``_convert_scalars_to_attrs``): done here, before any Quantizer sees the graph, it leaves
    nothing for a Quantizer's own transform to change.
    """
    from torchao.testing.pt2e._xnnpack_quantizer_utils import _convert_scalars_to_attrs

    return _convert_scalars_to_attrs(gm)


def tinylm_graph(model: nn.Module, tokens: torch.Tensor) -> GraphModule:
    """``model`` (eval mode) exported on ``tokens`` for PT2E, scalars made constants."""
    from common.pt2e import export_module

    return scalars_to_constants(export_module(model.eval(), (tokens,)))


# --- reading a converted graph --------------------------------------------------------------------


def _op(node: Any) -> str:
    """``dequantize_per_channel.default`` for a quantized_decomposed op, ``aten.relu.default`` for others."""
    text = str(node.target) if isinstance(node, Node) else type(node).__name__
    return text.removeprefix("quantized_decomposed.")


def _is_qdq(node: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and "quantize" in str(node.target)


def _tensor_dtype(gm: GraphModule, node: Any) -> str | None:
    if isinstance(node, Node) and node.op == "get_attr":
        value: Any = gm
        for part in str(node.target).split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor):
            return str(value.dtype).removeprefix("torch.")
    return None


def weight_record(gm: GraphModule, node: Any) -> Any:
    """How a weight reaches its op: ``"float"``, or its dequantize (op, axis, range, dtype, zero point's dtype)."""
    if not _is_qdq(node):
        return "float"
    op = _op(node)
    if op.startswith("dequantize_per_channel"):
        axis, qmin, qmax, dtype = node.args[3:7]
    elif op.startswith("dequantize_per_tensor"):
        axis, (qmin, qmax, dtype) = None, node.args[3:6]
    else:
        return {"op": op}
    return {
        "op": op,
        "axis": axis if isinstance(axis, int) else None,
        "qmin": int(qmin) if isinstance(qmin, int) else None,
        "qmax": int(qmax) if isinstance(qmax, int) else None,
        "dtype": str(dtype).removeprefix("torch."),
        "stored": _tensor_dtype(gm, node.args[0]),
        "zero_point": _tensor_dtype(gm, node.args[2]) if len(node.args) > 2 else None,
    }


def input_kind(node: Any) -> str:
    """How an activation reaches a linear: ``"float"``, ``"dynamic"`` (qparams from ``choose_qparams`` at run
    time), ``"static"`` (constant qparams), or the dequantize op's name."""
    if not _is_qdq(node):
        return "float"
    op = _op(node)
    if op == "dequantize_per_tensor.tensor":
        scale = node.args[1]
        while isinstance(scale, Node) and scale.op == "call_function" and "getitem" in str(scale.target):
            scale = scale.args[0]
        if isinstance(scale, Node) and "choose_qparams" in str(scale.target):
            return "dynamic"
    if op == "dequantize_per_tensor.default":
        return "static"
    return op


def input_range(node: Any) -> list[int] | None:
    """The integer range ``[qmin, qmax]`` an activation is quantized to on its way into a linear (the
    arguments of its per-tensor dequantize), or None when it is not quantized per tensor."""
    if not _is_qdq(node) or not _op(node).startswith("dequantize_per_tensor") or len(node.args) < 5:
        return None
    qmin, qmax = node.args[3:5]
    return [int(qmin), int(qmax)] if isinstance(qmin, int) and isinstance(qmax, int) else None


def structure(gm: GraphModule) -> dict[str, Any]:
    """A converted graph's quantization, node by node (plain data, no floats).

    ``linears``: weight (``weight_record``), input (``input_kind``) and the input's range (``input_range``) of
    each linear;
    ``embeddings``: the weight of each embedding; ``others``: for each op of ``OTHER_OPS``, the
    q / dq ops on its inputs and among its consumers (an op computed in float has none of its own).
    """
    linears: dict[str, Any] = {}
    embeddings: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target == LINEAR:
            linears[node.name] = {
                "weight": weight_record(gm, node.args[1]),
                "input": input_kind(node.args[0]),
                "input_range": input_range(node.args[0]),
            }
        elif node.target == EMBEDDING:
            embeddings[node.name] = {"weight": weight_record(gm, node.args[0])}
        elif node.target in OTHER_OPS:
            others[node.name] = {
                "op": OTHER_OPS[node.target],
                "inputs": [_op(a) for a in node.all_input_nodes if _is_qdq(a)],
                "consumers": sorted(_op(u) for u in node.users if _is_qdq(u)),
            }
    return {"linears": linears, "embeddings": embeddings, "others": others}


def quantizer_case(ns: Namespace, model: nn.Module, tokens: torch.Tensor) -> dict[str, Any]:
    """``LLMQuantizer()`` on ``model``: prepare, one forward, convert; the converted graph's ``structure``."""
    quantizer = ns["LLMQuantizer"]()
    return structure(convert_dynamic(tinylm_graph(model, tokens), quantizer, [(tokens,)]))


def read_bytes(value: Any) -> dict[str, Any]:
    """What ``graph_bytes`` returned: ``{dtype name: bytes}`` (a ``torch.dtype`` key or ``"torch.int8"`` is
    read as ``"int8"``), and the total."""
    returned_dict(value, "graph_bytes", "dtype 名稱 → byte 數", limit=64)
    out: dict[str, int] = {}
    for key, count in value.items():
        name = str(key).removeprefix("torch.") if isinstance(key, str | torch.dtype) else None
        if name is None:
            raise EvidenceError(f"graph_bytes 的 key 應該是 dtype 名稱（例如 'int8'），看到 {type(key).__name__}")
        if type(count) is not int:
            raise EvidenceError(
                f"graph_bytes 的值應該是 byte 數（int），{safe_text(name, 20)} 看到 {type(count).__name__}"
            )
        out[safe_text(name, 20)] = out.get(safe_text(name, 20), 0) + count
    out = {k: v for k, v in sorted(out.items()) if v != 0}
    return {"bytes": out, "total": sum(out.values())}


def chapter_tokens() -> torch.Tensor:
    """The first eight held-out windows of the chapter."""
    return example_inputs(8)[0]


def composed_quantizer() -> Any:
    """The course's own 4-bit + embedding recipe (EmbeddingQuantizer, then XNNPACKQuantizer 4-bit dynamic),
    used to make the graphs ``graph_bytes`` is run on (never the student's)."""
    from torchao.quantization.pt2e.quantizer import ComposableQuantizer
    from torchao.quantization.pt2e.quantizer.embedding_quantizer import EmbeddingQuantizer

    from common.dynamic import xnnpack_dynamic_quantizer

    return ComposableQuantizer([EmbeddingQuantizer(), xnnpack_dynamic_quantizer(-8, 7)])


# --- models and graphs made for one rule ----------------------------------------------------------


class Attention(nn.Module):
    """One-head causal self-attention, its linears named as many LLMs name them (``q_proj`` … ``o_proj``)."""

    def __init__(self, width: int, context: int) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(width, width) for _ in range(4))
        self.register_buffer("causal", torch.ones(context, context, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]
        scores = self.q_proj(x) @ self.k_proj(x).transpose(-2, -1) * x.shape[-1] ** -0.5
        scores = scores.masked_fill(~self.causal[:length, :length], float("-inf"))
        return self.o_proj(torch.softmax(scores, dim=-1) @ self.v_proj(x))


class FeedForward(nn.Module):
    """``up_proj`` → ReLU → ``down_proj``."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.up_proj, self.down_proj = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(torch.relu(self.up_proj(x)))


class DecoderLayer(nn.Module):
    """A pre-LN decoder layer: ``self_attn`` and ``feed_forward``, each after its own LayerNorm."""

    def __init__(self, width: int, hidden: int, context: int) -> None:
        super().__init__()
        self.input_norm, self.self_attn = nn.LayerNorm(width), Attention(width, context)
        self.output_norm, self.feed_forward = nn.LayerNorm(width), FeedForward(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_norm(x))
        return x + self.feed_forward(self.output_norm(x))


class Decoder(nn.Module):
    """Token and position tables, the layers, a final LayerNorm."""

    def __init__(self, vocab: int, width: int, hidden: int, context: int, layers: int) -> None:
        super().__init__()
        self.embed_tokens, self.embed_positions = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.layers = nn.ModuleList(DecoderLayer(width, hidden, context) for _ in range(layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(tokens) + self.embed_positions(torch.arange(tokens.shape[1]))
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class OtherLM(nn.Module):
    """An LLM-like model named and nested unlike TinyLM: ``model.layers[i].self_attn.q_proj``, ``lm_head``…,
    no module of TinyLM's classes (``CausalSelfAttention``, ``Mlp``) and no module called ``head``."""

    def __init__(self, vocab: int = 13, width: int = 8, hidden: int = 16, context: int = 6, layers: int = 1) -> None:
        super().__init__()
        self.model = Decoder(vocab, width, hidden, context, layers)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(tokens))


def head_at_8_bits(head: str) -> Any:
    """Another Quantizer, run before ``LLMQuantizer``: XNNPACK's 8-bit dynamic config on the module ``head``
    only, nothing else labelled."""
    from common.dynamic import xnnpack_dynamic_quantizer

    eight_bits = xnnpack_dynamic_quantizer()
    config = eight_bits.global_config
    eight_bits.set_global(None)
    return eight_bits.set_module_name(head, config)


def reads_apart(gm: GraphModule) -> GraphModule:
    """``gm`` with each use of a constant read by a ``get_attr`` node of its own (in place): a target read by
    two consumers is then read by two nodes, one tensor all the same. The ``get_attr`` nodes nothing reads go
    first (export leaves one for each other name of a tied parameter: ``tok.weight`` beside ``head.weight``)."""
    gm.graph.eliminate_dead_code()
    for node in [n for n in gm.graph.nodes if n.op == "get_attr"]:
        for user in list(node.users)[1:]:
            with gm.graph.inserting_before(user):
                read = gm.graph.get_attr(str(node.target))
            read.meta = dict(node.meta)
            user.replace_input_with(node, read)
    gm.graph.lint()
    gm.recompile()
    return gm


SPARE = 32
"""Elements after the last view in ``one_storage``'s flat tensor (alignment padding no constant uses)."""


def one_storage(gm: GraphModule) -> GraphModule:
    """``gm`` with every float32 constant it reads moved into one flat tensor (in place): each a view of its
    own stretch of the same storage, ``SPARE`` elements left over at the end, as a flattened parameter or a
    memory-mapped checkpoint keeps them."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            owner, _, name = str(node.target).rpartition(".")
            module = gm.get_submodule(owner)
            value = getattr(module, name)
            if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
                found[str(node.target)] = (module, name, value)
    flat = torch.zeros(sum(v.numel() for _, _, v in found.values()) + SPARE)
    offset = 0
    for module, name, value in found.values():
        view = flat[offset : offset + value.numel()].view(value.shape)
        view.copy_(value.detach())
        offset += value.numel()
        if name in module._parameters:
            module._parameters[name] = nn.Parameter(view, requires_grad=False)
        elif name in module._buffers:
            module._buffers[name] = view
        else:
            setattr(module, name, view)
    return gm


# --- public cases -------------------------------------------------------------------------------


def public_tinylm(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM (shipped weights) on eight held-out windows."""
    return quantizer_case(ns, tinylm_model(), chapter_tokens())


def public_post_ln(ns: Namespace, seed: int) -> Any:
    """A small post-LN TinyLM with ReLU and linears without bias."""
    config = TinyLMConfig(
        vocab=11, context=8, d_model=16, heads=2, layers=1, mlp=24, bias=False, norm_first=False, activation="relu"
    )
    return quantizer_case(ns, small_tinylm(config, seed), seeded_tokens(seed, 11, 4, 8))


def public_other_names(ns: Namespace, seed: int) -> Any:
    """A small LLM named unlike TinyLM (``OtherLM``): ``LLMQuantizer`` must find its linears all the same."""
    return quantizer_case(ns, seeded_model(seed, OtherLM), seeded_tokens(seed, 13, 3, 6))


def public_head_kept(ns: Namespace, seed: int) -> Any:
    """A small TinyLM whose head another Quantizer keeps at 8 bits, run before ``LLMQuantizer()`` (a chain of
    the two): that label stays, everything else is labelled as usual."""
    config = TinyLMConfig(vocab=9, context=6, d_model=8, heads=2, layers=1, mlp=12)
    tokens = seeded_tokens(seed, 9, 3, 6)
    chain = ChainQuantizer([head_at_8_bits("head"), ns["LLMQuantizer"]()])
    return structure(convert_dynamic(tinylm_graph(small_tinylm(config, seed), tokens), chain, [(tokens,)]))


def public_bytes_int4(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM, 4-bit weights and quantized embeddings, converted."""
    tokens = chapter_tokens()
    converted = convert_dynamic(tinylm_graph(tinylm_model(), tokens), composed_quantizer(), [(tokens,)])
    return read_bytes(ns["graph_bytes"](converted))


def public_bytes_float(ns: Namespace, seed: int) -> Any:
    """A small TinyLM exported, not quantized: the graph reads its parameters and its masks, every float32 one
    a view into one flat storage (``one_storage``)."""
    model = small_tinylm(TinyLMConfig(vocab=11, context=8, d_model=16, heads=2, layers=2, mlp=24), seed)
    return read_bytes(ns["graph_bytes"](one_storage(tinylm_graph(model, seeded_tokens(seed, 11, 4, 8)))))


def public_bytes_tied(ns: Namespace, seed: int) -> Any:
    """A small TinyLM whose head shares the token table (weight tying), exported, not quantized; each use of a
    constant read by a ``get_attr`` node of its own (``reads_apart``): the table is read twice, one tensor."""
    model = small_tinylm(TinyLMConfig(vocab=9, context=6, d_model=8, heads=2, layers=1, mlp=12, bias=False), seed)
    model.head.weight = model.tok.weight
    return read_bytes(ns["graph_bytes"](reads_apart(tinylm_graph(model, seeded_tokens(seed, 9, 3, 6)))))


# --- where the chapter teaches it ----------------------------------------------------------------

FOUR_BIT_CONFIG = Section("A. 4-bit 的動態 config")
FOUR_BIT_RANGE = Section("A. 4 bit 怎麼表示、有多粗", notebook="M07-3")
EMBEDDING_QUANTIZER = Section("B. embedding：EmbeddingQuantizer 與 ComposableQuantizer")
PER_CHANNEL = Section("B. 一個 outlier channel：per-tensor 與 per-channel weight", notebook="M06-1")
RUN_TIME_QPARAMS = Section("convert 之後：執行時才算的 qparams", notebook="M09-2")
WHAT_IS_LABELLED = Section("C. XNNPACKQuantizer 標了什麼", notebook="M09-1")
SIZE = Section("C. 模型多大：數圖真正讀的 tensor")
BYTES_RULES = Section("練習 2：graph_bytes（4 分）")


# --- reading the evidence (the public detectors here; the hidden ones in the checks use them too) ------


def pairs(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(case, got, want)`` for every case where both returned a dict (``selfcheck.diagnosis.case_pairs``)."""
    return diagnosis.case_pairs(seen, expected)


def parts(seen: Any, expected: Any, group: str, part: str) -> list[tuple[Any, Any]]:
    """``(got, want)`` of ``part`` of every node of ``group`` (``linears``, ``embeddings``, ``others``) in both."""
    out = []
    for _, got, want in pairs(seen, expected):
        mine, ours = got.get(group), want.get(group)
        if isinstance(mine, dict) and isinstance(ours, dict):
            out.extend(
                (mine[name].get(part), record.get(part))
                for name, record in ours.items()
                if isinstance(record, dict) and isinstance(mine.get(name), dict)
            )
    return out


def _quantized_weights(seen: Any, expected: Any, group: str = "linears") -> list[tuple[dict, dict]]:
    return [
        (got, want)
        for got, want in parts(seen, expected, group, "weight")
        if isinstance(got, dict) and isinstance(want, dict)
    ]


def static_inputs(seen: Any, expected: Any) -> bool:
    """A linear's input quantized with constant (calibrated) qparams, where the key's are chosen at run time."""
    return any(got == "static" and want == "dynamic" for got, want in parts(seen, expected, "linears", "input"))


def activation_range(seen: Any, expected: Any) -> bool:
    """A linear's input quantized as the key's (dynamic, or static alike) but to another integer range."""
    kinds = parts(seen, expected, "linears", "input")
    ranges = parts(seen, expected, "linears", "input_range")
    return all(got == want for got, want in kinds) and any(
        isinstance(got, list) and isinstance(want, list) and got != want for got, want in ranges
    )


def embeddings_float(seen: Any, expected: Any) -> bool:
    """An embedding's table left in float, where the key quantizes it."""
    return any(got == "float" and isinstance(want, dict) for got, want in parts(seen, expected, "embeddings", "weight"))


def embeddings_like_weights(seen: Any, expected: Any) -> bool:
    """An embedding's table quantized, but not as EmbeddingQuantizer does (another dtype, range or zero point)."""
    return any(
        (got.get("dtype"), got.get("zero_point"), got.get("qmin"), got.get("qmax"))
        != (want.get("dtype"), want.get("zero_point"), want.get("qmin"), want.get("qmax"))
        for got, want in _quantized_weights(seen, expected, "embeddings")
    )


def weights_per_tensor(seen: Any, expected: Any) -> bool:
    return any(
        str(got.get("op")).startswith("dequantize_per_tensor")
        and str(want.get("op")).startswith("dequantize_per_channel")
        for got, want in _quantized_weights(seen, expected)
    )


def _ranges(seen: Any, expected: Any) -> list[tuple[int, int, int, int]]:
    """``(got qmin, got qmax, key qmin, key qmax)`` of every linear weight whose range differs from the key's."""
    out = []
    for got, want in _quantized_weights(seen, expected):
        mine, ours = (got.get("qmin"), got.get("qmax")), (want.get("qmin"), want.get("qmax"))
        if all(isinstance(v, int) for v in (*mine, *ours)) and mine != ours:
            out.append((*mine, *ours))
    return out


def eight_bit_weights(seen: Any, expected: Any) -> bool:
    """The weights keep an int8 range ([-127, 127] by default, or [-128, 127]): not 4 bits at all."""
    return any(qmax - qmin >= 200 for qmin, qmax, _, _ in _ranges(seen, expected))


def unsigned_range(seen: Any, expected: Any) -> bool:
    """A range starting at 0 ([0, 15]) where the key's is signed."""
    return any(qmin == 0 and key_min < 0 for qmin, _, key_min, _ in _ranges(seen, expected))


def symmetric_range(seen: Any, expected: Any) -> bool:
    """A range as wide on both sides ([-7, 7]): one integer of the 4 bits left unused."""
    return any(
        qmin == -qmax and key_min != -key_max and qmax - qmin < 200
        for qmin, qmax, key_min, key_max in _ranges(seen, expected)
    )


def other_range(seen: Any, expected: Any) -> bool:
    """Another range than the key's, none of the three above, and not a head another Quantizer kept at 8 bits
    made 4-bit (``head_relabelled``: the range is right, the label was not this Quantizer's to change)."""
    named = (eight_bit_weights, unsigned_range, symmetric_range, head_relabelled)
    return bool(_ranges(seen, expected)) and not any(found(seen, expected) for found in named)


def others_quantized(seen: Any, expected: Any) -> bool:
    """q / dq around an op the key leaves in float (layer_norm, softmax…), every linear's input still dynamic;
    not the q / dq missing because the linears that read those ops stayed float (``linears_left_float_elsewhere``)."""
    moved = any(got != want for part in ("inputs", "consumers") for got, want in parts(seen, expected, "others", part))
    return moved and not static_inputs(seen, expected) and not linears_left_float_elsewhere(seen, expected)


def byte_pairs(seen: Any, expected: Any) -> list[tuple[str, dict[str, int], dict[str, int]]]:
    """``(case, got bytes, key bytes)`` by dtype, for every case where both returned a count."""
    return [
        (case, got["bytes"], want["bytes"])
        for case, got, want in pairs(seen, expected)
        if isinstance(got.get("bytes"), dict) and isinstance(want.get("bytes"), dict)
    ]


ELEMENT_SIZE = {"float32": 4, "int64": 8, "int32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int16": 2}


def counts_elements(seen: Any, expected: Any) -> bool:
    """A dtype of more than one byte counted one byte an element (numel without element_size)."""
    return any(
        got.get(dtype, 0) * size == want[dtype] and want[dtype] > 0
        for _, got, want in byte_pairs(seen, expected)
        for dtype, size in ELEMENT_SIZE.items()
        if dtype in want
    )


def _more_float32(seen: Any, expected: Any) -> bool:
    return any(got.get("float32", 0) > want.get("float32", 0) for _, got, want in byte_pairs(seen, expected))


def _missing(seen: Any, expected: Any, *dtypes: str) -> bool:
    """A dtype the graph reads (one of ``dtypes``) is missing altogether in some case."""
    return any(
        want.get(dtype) and not got.get(dtype) for _, got, want in byte_pairs(seen, expected) for dtype in dtypes
    )


SHARED_READS = ("shared_reads", "tied_small")
"""The graph_bytes cases (hidden, public) where one target is read by several ``get_attr`` nodes."""


def counts_read_twice(seen: Any, expected: Any) -> bool:
    """More bytes only where one target is read by several get_attr nodes; every other graph right."""
    found = byte_pairs(seen, expected)
    shared = [(got, want) for case, got, want in found if case in SHARED_READS]
    others = [got == want for case, got, want in found if case not in SHARED_READS]
    return bool(others) and all(others) and any(sum(got.values()) > sum(want.values()) for got, want in shared)


FLAT_STORAGE = ("float", "float_small")
"""The graph_bytes cases (hidden, public) whose float32 constants are views into one flat, padded storage."""


def views_counted_whole(seen: Any, expected: Any) -> bool:
    """More float32 bytes only where the float32 constants are views of one storage (each counted as the whole
    storage), every other dtype there and every other graph right."""
    found = byte_pairs(seen, expected)
    flat = [(got, want) for case, got, want in found if case in FLAT_STORAGE]
    others = [got == want for case, got, want in found if case not in FLAT_STORAGE]
    return (
        bool(others)
        and all(others)
        and any(
            got.get("float32", 0) > want.get("float32", 0)
            and {k: v for k, v in got.items() if k != "float32"} == {k: v for k, v in want.items() if k != "float32"}
            for got, want in flat
        )
    )


def int8_halved(seen: Any, expected: Any) -> bool:
    """Fewer int8 bytes than the graph reads, but at least half of them (rounded per tensor): the 4-bit weights
    (stored as int8) counted as half a byte each."""
    return any(
        0 < want.get("int8", 0) and want["int8"] / 2 - 64 <= got.get("int8", 0) < want["int8"]
        for _, got, want in byte_pairs(seen, expected)
    )


BUFFERS = ("int8", "int64", "uint8")
"""What convert adds as buffers: the quantized weights and tables, the zero points."""


def state_dict_bytes(seen: Any, expected: Any) -> bool:
    """Tensors the graph no longer reads counted (more float32), and the mask the graph reads missing (a buffer
    ``state_dict`` leaves out: bool), while the quantized buffers are there."""
    return _more_float32(seen, expected) and _missing(seen, expected, "bool") and not _missing(seen, expected, *BUFFERS)


def unread_tensors_counted(seen: Any, expected: Any) -> bool:
    """More float32 than the graph reads (the original weights convert left behind), nothing missing."""
    unread = _more_float32(seen, expected) and not _missing(seen, expected, "bool", *BUFFERS)
    return unread and not counts_read_twice(seen, expected) and not views_counted_whole(seen, expected)


def buffers_missing(seen: Any, expected: Any) -> bool:
    """The quantized weights, tables or zero points (buffers) missing altogether."""
    return _missing(seen, expected, *BUFFERS)


COMPOSED = "composed"
"""The hidden case with an LLM-like model named unlike TinyLM, its head kept at 8 bits by another Quantizer."""
OTHER_NAMES = (COMPOSED, "other_names")
"""The llm_quantizer cases (hidden, public) whose model is named unlike TinyLM."""
HEAD_KEPT = (COMPOSED, "head_kept")
"""The llm_quantizer cases (hidden, public) where another Quantizer keeps the head at 8 bits first."""


def _only_in(seen: Any, expected: Any, cases: tuple[str, ...]) -> list[tuple[Any, Any]]:
    """``[(got, want)]`` linear weights of ``cases`` when only they differ (every other case right)."""
    found = pairs(seen, expected)
    if any(got != want for case, got, want in found if case not in cases):
        return []
    out = []
    for case, got, want in found:
        mine, ours = got.get("linears"), want.get("linears")
        if case in cases and got != want and isinstance(mine, dict) and isinstance(ours, dict):
            out += [(mine[n].get("weight"), ours[n].get("weight")) for n in ours if isinstance(mine.get(n), dict)]
    return out


def linears_left_float_elsewhere(seen: Any, expected: Any) -> bool:
    """Only a model named unlike TinyLM is wrong: linears the key quantizes stay float there."""
    return any(got == "float" and isinstance(want, dict) for got, want in _only_in(seen, expected, OTHER_NAMES))


def head_relabelled(seen: Any, expected: Any) -> bool:
    """Only a case with the head kept at 8 bits is wrong: that head ([-127, 127]) became 4-bit."""
    return any(
        isinstance(got, dict)
        and isinstance(want, dict)
        and (want.get("qmin"), want.get("qmax")) == (-127, 127)
        and (got.get("qmin"), got.get("qmax")) == (-8, 7)
        for got, want in _only_in(seen, expected, HEAD_KEPT)
    )


# --- practice (issue 50): each a small setting of its own --------------------------------------------


_BIT_CASES = (
    # (what the values are, their least and greatest value)
    ("4-bit 的 weight", -8, 7),
    ("少用了 −8 的 weight", -7, 7),
    ("正負各到 8", -8, 8),
    ("從 0 數到 15", 0, 15),
    ("int8 weight 的預設範圍", -127, 127),
    ("int8 的全部", -128, 127),
    ("正負各 16 格", -16, 15),
    ("只有 −1 與 0", -1, 0),
)


def _int8_values(low: int, high: int) -> torch.Tensor:
    """An int8 tensor (2 × 5) whose least value is ``low`` and greatest ``high``, the others between."""
    middle = torch.linspace(low, high, 8).round().to(torch.int8)
    return torch.cat([torch.tensor([high, low], dtype=torch.int8), middle]).reshape(2, 5)


def _whole(got: Any) -> Any:
    """A one-element tensor read as its Python number; another tensor as its list (so ``==`` gives one bool)."""
    if isinstance(got, torch.Tensor):
        return got.item() if got.numel() == 1 else got.tolist()
    return got


def _check_bits_used(bits_used: Any) -> list[str]:
    problems = []
    for title, low, high in _BIT_CASES:
        want = next(n for n in range(1, 9) if -(2 ** (n - 1)) <= low and high <= 2 ** (n - 1) - 1)
        got = _whole(bits_used(_int8_values(low, high)))
        if got != want or isinstance(got, bool):
            problems.append(
                f"一個 int8 tensor，值從 {low} 到 {high}（{title}）：應該是 {want}（有號的 {want}-bit 是 "
                f"[{-(2 ** (want - 1))}, {2 ** (want - 1) - 1}]），你的是 {got!r}"
            )
    return problems


BITS_USED = Practice(
    "bits_used",
    "寫 bits_used(q)：q 是一個 int8 tensor（PT2E 量化過的 weight 都這樣存），回傳它的值其實用了幾個 bit："
    "最小的 n，讓每個值都在有號 n-bit 整數的範圍 [−2^(n−1), 2^(n−1) − 1] 裡。dtype 都是 int8，答案卻不一定是 8。"
    "檢查用八個小的 int8 tensor，值的範圍像 [−8, 7]、[−8, 8]、[0, 15]、[−128, 127]。",
    "import torch\n\n\ndef bits_used(q):\n    raise NotImplementedError()\n",
    _check_bits_used,
    "n 個 bit 的有號整數有 2^n 個，負的比正的多一個：4 bit 是 [−8, 7]，5 bit 是 [−16, 15]，8 bit 是 [−128, 127]。"
    "先取 low = int(q.min())、high = int(q.max())，再從 n = 1 往上試，直到 low ≥ −2^(n−1) 而且 high ≤ 2^(n−1) − 1。"
    "不要看 q.dtype：它只說明一個值存在幾個 byte 裡。",
    "import torch\n\n\n"
    "def bits_used(q):\n"
    "    low, high = int(q.min()), int(q.max())\n"
    "    n = 1\n"
    "    while low < -(2 ** (n - 1)) or high > 2 ** (n - 1) - 1:\n"
    "        n += 1\n"
    "    return n\n",
    "[−8, 7] 的 int8 tensor 只用了 4 個 bit：這就是 PT2E 的 4-bit weight。範圍要自己用 weight_qmin、weight_qmax 收窄，"
    "dtype 不會替你收；[−8, 8] 與 [0, 15] 都要 5 個 bit。",
)


def _packed_pairs() -> torch.Tensor:
    """24 values in [0, 15] packed two a byte into a uint8 tensor (3 × 4), the low one in the low nibble."""
    values = torch.arange(24, dtype=torch.uint8).remainder(16).reshape(3, 8)
    return values[:, ::2] | (values[:, 1::2] << 4)


def _byte_cases() -> list[tuple[str, torch.Tensor, int, str]]:
    """(what the tensor is, the tensor, its bytes, what a wrong count most likely missed)."""
    flat = torch.arange(40, dtype=torch.float32)
    four_bit = torch.arange(15).remainder(16).sub(8).to(torch.int8).reshape(3, 5)
    return [
        (
            "int8 的 4-bit weight，值都在 [-8, 7]，形狀 (3, 5)",
            four_bit,
            15,
            "dtype 是 int8，一個值 1 byte，值的範圍不影響大小",
        ),
        ("float32 的 scale，形狀 (3,)", torch.tensor([0.5, 0.25, 0.125]), 12, "float32 一個元素 4 byte"),
        ("int64 的 zero point，形狀 (3,)", torch.zeros(3, dtype=torch.int64), 24, "int64 一個元素 8 byte"),
        ("bool 的 mask，形狀 (4, 4)", torch.ones(4, 4, dtype=torch.bool).tril(), 16, "bool 一個元素 1 byte"),
        (
            "一塊 40 個 float32 的 storage 中間的一段 (3, 4)",
            flat[8:20].view(3, 4),
            48,
            "只算這一段自己的 12 個元素，不是整塊 storage",
        ),
        (
            "打包好的 4-bit：24 個值兩個一個 byte，存成 uint8 (3, 4)",
            _packed_pairs(),
            12,
            "打包之後是 12 個 uint8 元素，一個 1 byte",
        ),
    ]


def _check_stored_bytes(stored_bytes: Any) -> list[str]:
    problems = []
    for title, tensor, want, why in _byte_cases():
        got = _whole(stored_bytes(tensor))
        if got != want:
            problems.append(f"{title}：應該是 {want} byte（{why}），你的是 {got!r}")
        elif not isinstance(got, int):
            problems.append(f"{title}：數目對了（{want}），但要回傳 int，你的是 {type(got).__name__}")
    return problems


STORED_BYTES = Practice(
    "stored_bytes",
    "寫 stored_bytes(t)：回傳 tensor t 自己在記憶體裡占幾個 byte（int）。大小只由它有幾個元素、一個元素是什麼 dtype 決定："
    "值的範圍、它是不是一大塊 storage 裡的一段，都不算。"
    "檢查用六個小 tensor：值都在 [−8, 7] 的 int8、float32、int64、bool、一個 view，和一個打包好的 4-bit（uint8）。",
    "import torch\n\n\ndef stored_bytes(t):\n    raise NotImplementedError()\n",
    _check_stored_bytes,
    "兩個數相乘：t.numel() 個元素，每個 t.element_size() 個 byte（int8、uint8、bool 1 個，float32 4 個，int64 8 個）。"
    "值都在 [−8, 7] 的 int8 仍是一個值 1 byte；真正打包的 4-bit 是另一個 tensor：uint8、元素少了一半。"
    "不要用 untyped_storage().nbytes()：那是整塊 storage，不是這一段。",
    "import torch\n\n\n"
    "def stored_bytes(t):\n"
    "    return t.nbytes  # numel() × element_size()：看 dtype 與形狀，不看值\n",
    "打包的 4-bit 省下的一半，表現在 uint8 tensor 的元素個數（24 個值只有 12 個元素），不是 int8 的值變成半個 byte。"
    "convert 之後的 q/dq 圖裡，4-bit 的 weight 就是那個值在 [−8, 7] 的 int8 tensor。",
)


QUANTIZER_MISCONCEPTIONS = (
    Misconception(
        "tinylm_module_names",
        "照 TinyLM 的名字或類別設定 Quantizer",
        'set_module_name("head", …)、set_module_type(CausalSelfAttention, …) 只認得 TinyLM 的名字和類別；'
        "別的模型叫 lm_head、self_attn，類別也不一樣，對不上的 linear 就一個也沒量化。"
        "LLMQuantizer 要能用在任何模型上：用 set_global(config)，或 set_module_type(nn.Linear, config)。",
        FOUR_BIT_CONFIG,
        public=linears_left_float_elsewhere,
    ),
    Misconception(
        "clears_labels",
        "清掉了前一個 Quantizer 貼的標籤",
        "Quantizer 常常和別的組合（例如先用一個 Quantizer 把 head 留在 8-bit，再用 LLMQuantizer）。"
        "你的 LLMQuantizer 先把圖上的標籤全部拿掉再標，前一個 Quantizer 的決定就不見了，head 也被量化成 4-bit。"
        "不要改寫 annotate，交給兩個 Quantizer：XNNPACKQuantizer 本來就會跳過已經有 Quantizer 認領的 node。",
        EMBEDDING_QUANTIZER,
        public=head_relabelled,
    ),
    Misconception(
        "static_config",
        "linear 的輸入用了靜態的 config",
        "少了 is_dynamic=True，XNNPACKQuantizer 用的是靜態 config：linear 的輸入在校準時就定死 scale 與 zero point，"
        "連 add 這些 op 也會被標。出貨給 XNNPACK 的 LLM 用的是動態 config，每次執行時才用 choose_qparams 算 qparams；"
        "get_symmetric_quantization_config 要傳 is_dynamic=True。",
        RUN_TIME_QPARAMS,
        public=static_inputs,
    ),
    Misconception(
        "activation_range",
        "activation 的範圍也改了",
        "4-bit 說的只是 weight：出貨的 recipe 只傳 weight_qmin=-8、weight_qmax=7，linear 的輸入仍在執行時動態量化成完整的 int8 [−128, 127]。"
        "你另外改了 act_qmin、act_qmax（例如也寫成 4-bit，或對稱的 [−127, 127]），activation 的格子變粗或少了一格。"
        "activation 的範圍用 config 的預設值，不要動。",
        FOUR_BIT_CONFIG,
        public=activation_range,
    ),
    Misconception(
        "embedding_float",
        "以為 XNNPACKQuantizer 也會量化 embedding",
        "XNNPACKQuantizer 只標 linear（動態 config 下也只有 linear 與 conv 的 pattern），embedding 的表留在 float。"
        "embedding 要另外交給 EmbeddingQuantizer，兩個 Quantizer 用 ComposableQuantizer 組起來。",
        EMBEDDING_QUANTIZER,
        public=embeddings_float,
    ),
    Misconception(
        "embedding_as_linear",
        "embedding 的表當成 linear 的 weight 量化",
        "embedding 不是矩陣乘法，它用 token 當索引取出一列，所以量化方式和 linear 的 weight 不同："
        "每一列一組 scale 與 zero point，值是 uint8 [0, 255]，scale 和 zero point 都是 float（per_channel_affine_float_qparams）。"
        "不要拿 linear 的 weight 規格去標它，交給 EmbeddingQuantizer。",
        EMBEDDING_QUANTIZER,
        public=embeddings_like_weights,
    ),
    Misconception(
        "per_tensor_weights",
        "4-bit weight 用了 per-tensor",
        "4-bit 只有 16 個整數，整個 weight 共用一個 scale 時，範圍最大的那個 channel 決定了所有 channel 的格子寬度，誤差很大。"
        "每個輸出 channel 一組 scale 才行：get_symmetric_quantization_config 要傳 is_per_channel=True。",
        PER_CHANNEL,
        public=weights_per_tensor,
    ),
    Misconception(
        "eight_bit_range",
        "weight 範圍沒有改成 4-bit",
        "dtype 是 int8 不代表範圍就是 int8 的全部：PT2E 的 4-bit 是「用 int8 儲存、把範圍限制在 [−8, 7]」。"
        "沒傳 weight_qmin、weight_qmax 時預設是 int8 的 [−127, 127]，寫成 [−128, 127] 也一樣是 8 個 bit；"
        "要傳 weight_qmin=-8、weight_qmax=7。",
        FOUR_BIT_CONFIG,
        public=eight_bit_weights,
        practice=BITS_USED,
    ),
    Misconception(
        "unsigned_range",
        "4-bit 寫成 unsigned 的 [0, 15]",
        "[0, 15] 是 unsigned 的 4-bit，可是這裡的 weight 是 symmetric、以 int8 儲存，zero point 是 0："
        "範圍從 0 開始，負的 weight 全都被截成 0。有號的 4-bit 是 [−8, 7]，XNNPACK 也是看 qmin == -8、qmax == 7 認出 4-bit。",
        FOUR_BIT_RANGE,
        public=unsigned_range,
        practice=BITS_USED,
    ),
    Misconception(
        "symmetric_range",
        "4-bit 寫成正負對稱的範圍",
        "4 個 bit 有 16 個整數，有號的範圍是 [−8, 7]，負的比正的多一格：寫成 [−7, 7] 少用了 −8，寫成 [−8, 8] 又超出 4 個 bit。"
        "而且 XNNPACK 只在 qmin == -8、qmax == 7 時才把 weight 認成 4-bit 打包。",
        FOUR_BIT_RANGE,
        public=symmetric_range,
        practice=BITS_USED,
    ),
    Misconception(
        "other_range",
        "weight 範圍不是 4-bit 的 [−8, 7]",
        "PT2E 的 4-bit weight 是用 int8 儲存、範圍限制在 [−8, 7]（16 個整數），後端也是從這組範圍認出 4-bit。"
        "傳 weight_qmin=-8、weight_qmax=7。",
        FOUR_BIT_RANGE,
        public=other_range,
        practice=BITS_USED,
    ),
    Misconception(
        "quantizes_other_ops",
        "layer_norm、softmax 也量化了",
        "你可能以為 Transformer 裡的每個 op 都該是 int8。XNNPACK 的動態 recipe 只量化 linear（embedding 交給 EmbeddingQuantizer），"
        "layer_norm、softmax、attention 的 matmul 留在 float：替它們加上 q/dq 只多了量化誤差，並沒有 int8 的 kernel 來算。"
        "LLMQuantizer 只要組合那兩個 Quantizer，不要再加別的。",
        WHAT_IS_LABELLED,
        public=others_quantized,
    ),
)

BYTES_MISCONCEPTIONS = (
    Misconception(
        "half_byte_4bit",
        "把 4-bit 的 weight 算成半個 byte",
        "你可能以為 weight_qmin=-8、weight_qmax=7 之後，兩個 weight 就擠進一個 byte。"
        "可是 convert 之後的 q/dq 圖只是把值限制在 [−8, 7]，tensor 的 dtype 仍是 torch.int8，一個值占一個 byte；"
        "要到 lower 到 XNNPACK 才打包成半個 byte。graph_bytes 數的是圖讀的 tensor，一律用 numel() * element_size()。",
        FOUR_BIT_CONFIG,
        public=int8_halved,
        practice=STORED_BYTES,
    ),
    Misconception(
        "numel_only",
        "把元素個數當成 byte 數",
        "numel() 是元素的個數，不是 byte：float32 一個元素 4 byte，int64 的 zero point 一個 8 byte，只有 int8、uint8、bool 剛好 1 byte。"
        "每個 tensor 的 byte 數是 numel() * element_size()。",
        BYTES_RULES,
        public=counts_elements,
        practice=STORED_BYTES,
    ),
    Misconception(
        "counts_every_read",
        "同一個 tensor 被讀幾次就算幾次",
        "同一個 target 可以被好幾個 get_attr node 讀，它們指向的是同一個 tensor，記憶體裡只有一份。"
        "記下已經算過的 target，同一個 target 只算一次。",
        BYTES_RULES,
        public=counts_read_twice,
    ),
    Misconception(
        "state_dict_size",
        "用 state_dict() 算模型大小",
        "convert 之後的 GraphModule 還留著原本的 fp32 weight，只是圖不再讀它們，state_dict 把它們也算進去了；"
        "反過來，attention 的 mask 這種不存檔（persistent=False）的 buffer 圖會讀，state_dict 卻沒有。"
        "真正的大小是圖在執行時讀的東西：每個 get_attr node 指向的 tensor。",
        SIZE,
        public=state_dict_bytes,
    ),
    Misconception(
        "storage_bytes",
        "用 storage 的大小當成 tensor 的大小",
        "untyped_storage().nbytes() 是整塊 storage 的大小；一個 view 的常數（例如攤平在同一塊記憶體裡的 parameter）只占其中一段，"
        "好幾個 tensor 共用一塊 storage 時，每個都算整塊就重複算了，連沒有人用的那一段也算進去。"
        "一個 tensor 的 byte 數是它自己的 numel() * element_size()。",
        BYTES_RULES,
        public=views_counted_whole,
        practice=STORED_BYTES,
    ),
    Misconception(
        "module_tensors",
        "模組上所有的 parameter 與 buffer 都算",
        "convert 之後模組上還掛著原本的 fp32 weight，可是圖已經改讀 int8 的 weight，不會再用到它們。"
        "named_parameters、named_buffers 列的是模組上有什麼，不是圖讀了什麼；要從圖上的 get_attr node 找 tensor。",
        SIZE,
        public=unread_tensors_counted,
    ),
    Misconception(
        "parameters_only",
        "只算 parameter，漏了 buffer",
        "convert 之後 int8 的 weight、scale、zero point 都是 buffer，attention 的 mask 也是；只看 named_parameters 會全部漏掉。"
        "不要分 parameter 或 buffer：get_attr node 讀的每個 tensor 都要算。",
        SIZE,
        public=buffers_missing,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "llm_quantizer",
        TITLE_QUANTIZER,
        ("LLMQuantizer",),
        {
            "tinylm": public_tinylm,
            "post_ln": public_post_ln,
            "other_names": public_other_names,
            "head_kept": public_head_kept,
        },
        case_seconds=60,  # the first case imports ExecuTorch (seconds, more on a busy machine)
        misconceptions=QUANTIZER_MISCONCEPTIONS,
    ),
    Exercise(
        "graph_bytes",
        TITLE_BYTES,
        ("graph_bytes",),
        {
            "tinylm_int4_embedding": public_bytes_int4,
            "float_small": public_bytes_float,
            "tied_small": public_bytes_tied,
        },
        case_seconds=60,
        misconceptions=BYTES_MISCONCEPTIONS,
    ),
)
