"""Hidden checks of M09-3: LLMQuantizer (4-bit dynamic linears, quantized embeddings) and graph_bytes.

Assumptions a half-understanding can bake in, and the check that refutes each:

- "4-bit means any small range" / "the default config is already small" (``linear_weight_range``):
  ``weight_qmin=-7`` (symmetric), ``[0, 15]`` (unsigned), ``[-128, 127]`` or the default ``[-127, 127]``
  all give another range on each linear's ``dequantize_per_channel``;
- "per-tensor weights are enough" (``linear_weight_per_channel``): ``is_per_channel=False`` gives
  ``dequantize_per_tensor`` weights;
- "dynamic or static, the same thing" (``linear_input_dynamic``): a static config quantizes each
  linear's input with constant qparams (``dequantize_per_tensor.default``), no ``choose_qparams``;
- "XNNPACKQuantizer quantizes the embeddings too" / "an embedding is a linear" (``embedding_weight``):
  without EmbeddingQuantizer the tables stay float; labelled with the linear's weight spec they are
  int8 symmetric with int64 zero points instead of uint8 with float qparams;
- "everything in a transformer should be quantized" (``others_float``): q / dq around layer_norm,
  softmax or the attention's matmuls, which XNNPACK's dynamic recipe leaves in float.

``graph_bytes``:

- "the size of a model is its ``state_dict``" / "its parameters" (``bytes_total``, ``bytes_by_dtype``):
  a converted graph keeps the unused fp32 originals of its weights, and its int8 weights, scales and
  zero points are buffers;
- "bytes are ``numel``" (``bytes_by_dtype``): int64 zero points and fp32 scales take 8 and 4;
- "one ``get_attr`` node, one tensor" (``bytes_shared_reads``): a target read by two nodes is one tensor.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

QUANTIZER_CASES = {
    "variant": "隱藏的 TinyLM 變體",
    "flipped": "另一個隱藏的 TinyLM 變體（bias、LN 位置、activation 相反）",
}


def _weight_text(record: Any) -> str:
    if record == "float":
        return "float（沒有量化）"
    if not isinstance(record, dict):
        return str(record)
    parts = [str(record.get("op"))]
    if record.get("axis") is not None:
        parts.append(f"axis {record['axis']}")
    if record.get("qmin") is not None:
        parts.append(f"[{record['qmin']}, {record['qmax']}]")
    parts.append(f"{record.get('dtype')}，zero point {record.get('zero_point')}")
    return "、".join(parts)


def _linears(seen: Any, expected: Any, case: str) -> tuple[dict[str, Any], dict[str, Any]]:
    got, want = value(seen, case), value(expected, case)
    expect(isinstance(got, dict) and isinstance(got.get("linears"), dict), f"{QUANTIZER_CASES[case]}：證據格式不對")
    expect(set(got["linears"]) == set(want["linears"]), f"{QUANTIZER_CASES[case]}：轉換後的 linear 和預期的不一樣")
    return got, want


def compare_weights(seen: Any, expected: Any, fields: tuple[str, ...], what: str) -> None:
    for case, where in QUANTIZER_CASES.items():
        got, want = _linears(seen, expected, case)
        for name, mine in got["linears"].items():
            ours = want["linears"][name]["weight"]
            theirs = mine["weight"]
            same = (
                isinstance(theirs, dict) and all(theirs.get(f) == ours.get(f) for f in fields)
                if isinstance(ours, dict)
                else theirs == ours
            )
            if not same:
                raise Fail(f"{where}的 {name}：{what}預期 {_weight_text(ours)}，看到 {_weight_text(theirs)}")


@check("llm_quantizer", 2, "每個 linear 的 weight 是 per-channel（dequantize_per_channel、axis 0、int8 儲存）")
def test_linear_weight_per_channel(seen, expected):
    compare_weights(seen, expected, ("op", "axis", "dtype", "stored"), "weight 的 dequantize ")


@check("llm_quantizer", 2, "4-bit weight：每個 linear 的 weight 範圍是 [-8, 7]（仍以 int8 儲存）")
def test_linear_weight_range(seen, expected):
    compare_weights(seen, expected, ("op", "qmin", "qmax", "dtype"), "weight 的範圍 ")


INPUT_WORDS = {
    "dynamic": "動態（choose_qparams 在執行時算 qparams）",
    "static": "靜態（固定的 scale、zero point）",
    "float": "float（沒有量化）",
}


@check("llm_quantizer", 1, "每個 linear 的輸入是動態量化（choose_qparams），不是校準出來的固定 qparams")
def test_linear_input_dynamic(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = _linears(seen, expected, case)
        for name, mine in got["linears"].items():
            ours = want["linears"][name]["input"]
            if mine["input"] != ours:
                raise Fail(
                    f"{where}的 {name}：輸入預期是{INPUT_WORDS.get(ours, ours)}，"
                    f"看到{INPUT_WORDS.get(mine['input'], mine['input'])}"
                )


@check(
    "llm_quantizer", 2, "每個 embedding 的表是 uint8、per-channel、float 的 scale 與 zero point（EmbeddingQuantizer）"
)
def test_embedding_weight(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and isinstance(got.get("embeddings"), dict), f"{where}：證據格式不對")
        expect(set(got["embeddings"]) == set(want["embeddings"]), f"{where}：轉換後的 embedding 和預期的不一樣")
        for name, mine in got["embeddings"].items():
            ours = want["embeddings"][name]["weight"]
            if mine["weight"] != ours:
                raise Fail(
                    f"{where}的 {name}：表的 dequantize 預期 {_weight_text(ours)}，看到 {_weight_text(mine['weight'])}"
                )


OP_WORDS = {"inputs": "輸入上的 q/dq", "consumers": "consumer 裡的 q/dq"}


@check("llm_quantizer", 1, "layer_norm、softmax、attention 的 matmul、add 等留在 float（只有 linear 的輸入被量化）")
def test_others_float(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and isinstance(got.get("others"), dict), f"{where}：證據格式不對")
        expect(set(got["others"]) == set(want["others"]), f"{where}：轉換後的圖多了或少了 op")
        for name, ours in want["others"].items():
            mine = got["others"][name]
            for part, words in OP_WORDS.items():
                if mine[part] != ours[part]:
                    raise Fail(
                        f"{where}的 {name}（{ours['op']}）：{words}預期 {ours[part] or '沒有'}，看到 {mine[part] or '沒有'}"
                    )


# --- graph_bytes ------------------------------------------------------------------------------------

BYTES_CASES = {
    "int8_dynamic": "int8 動態量化的隱藏 TinyLM",
    "int4_embedding": "4-bit + embedding 量化的隱藏 TinyLM",
    "float": "沒有量化的隱藏 TinyLM（export 後）",
    "shared_reads": "LayerNorm 共用一個模組、同一個常數被好幾個 get_attr node 讀的隱藏 TinyLM",
}


def _bytes_text(by_dtype: dict[str, int]) -> str:
    return "、".join(f"{k} {v:,}" for k, v in by_dtype.items()) or "（空的）"


def compare_bytes(seen: Any, expected: Any, cases: tuple[str, ...], part: str) -> None:
    for case in cases:
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and part in got, f"{BYTES_CASES[case]}：證據格式不對")
        if got[part] == want[part]:
            continue
        if part == "total":
            raise Fail(f"{BYTES_CASES[case]}：總共預期 {want['total']:,} byte，看到 {got['total']:,}")
        raise Fail(
            f"{BYTES_CASES[case]}：各 dtype 的 byte 預期 {_bytes_text(want[part])}，看到 {_bytes_text(got[part])}"
        )


@check("graph_bytes", 1, "轉換後的圖：總 byte 數只算 get_attr 讀的 tensor（不是 state_dict）")
def test_bytes_total(seen, expected):
    compare_bytes(seen, expected, ("int8_dynamic", "int4_embedding"), "total")


@check(
    "graph_bytes", 2, "各 dtype 的 byte 數：numel × element_size，buffer 也算（int8 weight、scale、zero point、mask）"
)
def test_bytes_by_dtype(seen, expected):
    compare_bytes(seen, expected, ("int8_dynamic", "int4_embedding", "float"), "bytes")


@check("graph_bytes", 1, "同一個常數被好幾個 get_attr node 讀，只算一次")
def test_bytes_shared_reads(seen, expected):
    compare_bytes(seen, expected, ("shared_reads",), "bytes")
