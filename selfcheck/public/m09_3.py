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
from selfcheck.casekit import Exercise, Namespace, declare, seeded_tokens
from selfcheck.evidence import EvidenceError, returned_dict, safe_text
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


def structure(gm: GraphModule) -> dict[str, Any]:
    """A converted graph's quantization, node by node (plain data, no floats).

    ``linears``: weight (``weight_record``) and input (``input_kind``) of each linear;
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
            linears[node.name] = {"weight": weight_record(gm, node.args[1]), "input": input_kind(node.args[0])}
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


def public_bytes_int4(ns: Namespace, seed: int) -> Any:
    """The chapter's TinyLM, 4-bit weights and quantized embeddings, converted."""
    tokens = chapter_tokens()
    converted = convert_dynamic(tinylm_graph(tinylm_model(), tokens), composed_quantizer(), [(tokens,)])
    return read_bytes(ns["graph_bytes"](converted))


def public_bytes_float(ns: Namespace, seed: int) -> Any:
    """A small TinyLM exported, not quantized: the graph reads its parameters and its masks."""
    model = small_tinylm(TinyLMConfig(vocab=11, context=8, d_model=16, heads=2, layers=2, mlp=24), seed)
    return read_bytes(ns["graph_bytes"](tinylm_graph(model, seeded_tokens(seed, 11, 4, 8))))


PUBLIC = declare(
    __name__,
    Exercise(
        "llm_quantizer",
        TITLE_QUANTIZER,
        ("LLMQuantizer",),
        {"tinylm": public_tinylm, "post_ln": public_post_ln},
        case_seconds=60,  # the first case imports ExecuTorch (seconds, more on a busy machine)
    ),
    Exercise(
        "graph_bytes",
        TITLE_BYTES,
        ("graph_bytes",),
        {"tinylm_int4_embedding": public_bytes_int4, "float_small": public_bytes_float},
        case_seconds=60,
    ),
)
