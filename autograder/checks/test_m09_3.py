"""Hidden checks of M09-3: LLMQuantizer (4-bit dynamic linears, quantized embeddings) and graph_bytes.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m09_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, value
from selfcheck.public import m09_3 as public

QUANTIZER_CASES = {
    "variant": "隱藏的 TinyLM 變體",
    "flipped": "另一個隱藏的 TinyLM 變體（bias、LN 位置、activation 相反）",
    "composed": "module 名字和深度都和 TinyLM 不同的模型，前一個 Quantizer 已經把 head 設成 8-bit",
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
    expect(
        set(got["linears"]) == set(want["linears"]),
        f"{QUANTIZER_CASES[case]}：轉換後圖上的 linear 和這個模型的 linear 對不上（多了或少了）",
    )
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
                raise Fail(f"{where}的 {name}：{what}應該是 {_weight_text(ours)}，你的是 {_weight_text(theirs)}")


@check("llm_quantizer", 2, "每個 linear 的 weight 是 per-channel（dequantize_per_channel、axis 0、int8 儲存）")
def test_linear_weight_per_channel(seen, expected):
    compare_weights(seen, expected, ("op", "axis", "dtype", "stored"), "weight 的 dequantize ")


@check("llm_quantizer", 2, "4-bit weight：每個 linear 的 weight 範圍是 [-8, 7]（仍以 int8 儲存）")
def test_linear_weight_range(seen, expected):
    # per channel or per tensor (the dequantize op) is test_linear_weight_per_channel's to judge
    compare_weights(seen, expected, ("qmin", "qmax", "dtype"), "weight 的範圍 ")


INPUT_WORDS = {
    "dynamic": "動態（choose_qparams 在執行時算 qparams）",
    "static": "靜態（固定的 scale、zero point）",
    "float": "float（沒有量化）",
}


def _range_text(limits: Any) -> str:
    return f"[{limits[0]}, {limits[1]}]" if isinstance(limits, list) and len(limits) == 2 else "沒有（沒量化）"


@check("llm_quantizer", 1, "每個 linear 的輸入是動態量化（choose_qparams），不是校準出來的固定 qparams")
def test_linear_input_dynamic(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = _linears(seen, expected, case)
        for name, mine in got["linears"].items():
            ours = want["linears"][name]["input"]
            if mine["input"] != ours:
                raise Fail(
                    f"{where}的 {name}：輸入應該是{INPUT_WORDS.get(ours, ours)}，"
                    f"你的是{INPUT_WORDS.get(mine['input'], mine['input'])}"
                )
            ours_range, mine_range = want["linears"][name].get("input_range"), mine.get("input_range")
            if mine_range != ours_range:
                raise Fail(
                    f"{where}的 {name}：輸入量化的整數範圍應該是 {_range_text(ours_range)}，"
                    f"你的是 {_range_text(mine_range)}（4-bit 只改 weight，activation 仍是完整的 int8）"
                )


@check(
    "llm_quantizer", 2, "每個 embedding 的表是 uint8、per-channel、float 的 scale 與 zero point（EmbeddingQuantizer）"
)
def test_embedding_weight(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and isinstance(got.get("embeddings"), dict), f"{where}：證據格式不對")
        expect(
            set(got["embeddings"]) == set(want["embeddings"]),
            f"{where}：轉換後圖上的 embedding 和這個模型的 embedding 對不上（多了或少了）",
        )
        for name, mine in got["embeddings"].items():
            ours = want["embeddings"][name]["weight"]
            if mine["weight"] != ours:
                raise Fail(
                    f"{where}的 {name}：表的 dequantize 應該是 {_weight_text(ours)}，你的是 {_weight_text(mine['weight'])}"
                )


OP_WORDS = {"inputs": "輸入上的 q/dq", "consumers": "consumer 裡的 q/dq"}


@check("llm_quantizer", 1, "layer_norm、softmax、attention 的 matmul、add 等留在 float（只有 linear 的輸入被量化）")
def test_others_float(seen, expected):
    for case, where in QUANTIZER_CASES.items():
        got, want = value(seen, case), value(expected, case)
        expect(isinstance(got, dict) and isinstance(got.get("others"), dict), f"{where}：證據格式不對")
        expect(set(got["others"]) == set(want["others"]), f"{where}：轉換後的圖上多了或少了 op")
        for name, ours in want["others"].items():
            mine = got["others"][name]
            for part, words in OP_WORDS.items():
                if mine[part] != ours[part]:
                    raise Fail(
                        f"{where}的 {name}（{ours['op']}）：{words}應該是 {ours[part] or '沒有'}，你的是 {mine[part] or '沒有'}"
                    )


# --- graph_bytes ------------------------------------------------------------------------------------

BYTES_CASES = {
    "int8_dynamic": "int8 動態量化的隱藏 TinyLM",
    "int4_embedding": "4-bit + embedding 量化的隱藏 TinyLM",
    "float": "沒有量化的隱藏 TinyLM（export 後；float32 常數都是同一塊 storage 的 view）",
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
            raise Fail(f"{BYTES_CASES[case]}：總共應該是 {want['total']:,} byte，你的是 {got['total']:,} byte")
        raise Fail(
            f"{BYTES_CASES[case]}：各 dtype 的 byte 數應該是 {_bytes_text(want[part])}，你的是 {_bytes_text(got[part])}"
        )


@check("graph_bytes", 1, "轉換後的圖：總 byte 數只算 get_attr 讀的 tensor（不是 state_dict）")
def test_bytes_total(seen, expected):
    # int8 only: the bytes of a 4-bit weight are test_bytes_by_dtype's to judge (issue 50: one mistake costs once)
    compare_bytes(seen, expected, ("int8_dynamic",), "total")


@check(
    "graph_bytes", 2, "各 dtype 的 byte 數：numel × element_size，buffer 也算（int8 weight、scale、zero point、mask）"
)
def test_bytes_by_dtype(seen, expected):
    compare_bytes(seen, expected, ("int8_dynamic", "int4_embedding", "float"), "bytes")


@check("graph_bytes", 1, "同一個常數被好幾個 get_attr node 讀，只算一次")
def test_bytes_shared_reads(seen, expected):
    compare_bytes(seen, expected, ("shared_reads",), "bytes")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m09_3.py) --------

RANGE = ("test_linear_weight_range",)


@detects("llm_quantizer", "tinylm_module_names")
def tinylm_module_names(seen: Any, expected: Any) -> bool:
    return public.linears_left_float_elsewhere(seen, expected)


@detects("llm_quantizer", "clears_labels", explains=RANGE)
def clears_labels(seen: Any, expected: Any) -> bool:
    return public.head_relabelled(seen, expected)


@detects("llm_quantizer", "static_config", explains=("test_linear_input_dynamic", "test_others_float"))
def static_config(seen: Any, expected: Any) -> bool:
    return public.static_inputs(seen, expected)


@detects("llm_quantizer", "activation_range", explains=("test_linear_input_dynamic",))
def activation_range(seen: Any, expected: Any) -> bool:
    return public.activation_range(seen, expected)


@detects("llm_quantizer", "embedding_float", explains=("test_embedding_weight",))
def embedding_float(seen: Any, expected: Any) -> bool:
    return public.embeddings_float(seen, expected)


@detects("llm_quantizer", "embedding_as_linear", explains=("test_embedding_weight",))
def embedding_as_linear(seen: Any, expected: Any) -> bool:
    return public.embeddings_like_weights(seen, expected)


@detects("llm_quantizer", "per_tensor_weights", explains=("test_linear_weight_per_channel",))
def per_tensor_weights(seen: Any, expected: Any) -> bool:
    return public.weights_per_tensor(seen, expected)


@detects("llm_quantizer", "eight_bit_range", explains=RANGE)
def eight_bit_range(seen: Any, expected: Any) -> bool:
    return public.eight_bit_weights(seen, expected)


@detects("llm_quantizer", "unsigned_range", explains=RANGE)
def unsigned_range(seen: Any, expected: Any) -> bool:
    return public.unsigned_range(seen, expected)


@detects("llm_quantizer", "symmetric_range", explains=RANGE)
def symmetric_range(seen: Any, expected: Any) -> bool:
    return public.symmetric_range(seen, expected)


@detects("llm_quantizer", "other_range", explains=RANGE)
def other_range(seen: Any, expected: Any) -> bool:
    return public.other_range(seen, expected)


@detects("llm_quantizer", "quantizes_other_ops", explains=("test_others_float",))
def quantizes_other_ops(seen: Any, expected: Any) -> bool:
    return public.others_quantized(seen, expected)


@detects("graph_bytes", "half_byte_4bit", explains=("test_bytes_by_dtype",))
def half_byte_4bit(seen: Any, expected: Any) -> bool:
    """Only ``int4_embedding`` holds 4-bit weights, and only ``test_bytes_by_dtype`` judges it."""
    return public.int8_halved(seen, expected)


@detects("graph_bytes", "numel_only")
def numel_only(seen: Any, expected: Any) -> bool:
    """Elements, not bytes: every check compares bytes, so this one idea costs them all (as do the detectors
    below without ``explains``: which tensors are counted underlies every total)."""
    return public.counts_elements(seen, expected)


@detects("graph_bytes", "counts_every_read", explains=("test_bytes_shared_reads",))
def counts_every_read(seen: Any, expected: Any) -> bool:
    return public.counts_read_twice(seen, expected)


@detects("graph_bytes", "state_dict_size")
def state_dict_size(seen: Any, expected: Any) -> bool:
    return public.state_dict_bytes(seen, expected)


FLAT_CASE = "float"
"""The graph_bytes case whose float32 constants are views into one flat, padded storage."""


@detects("graph_bytes", "storage_bytes", explains=("test_bytes_by_dtype",))
def storage_bytes(seen: Any, expected: Any) -> bool:
    """Every graph right but the one whose constants are views: there, more float32 bytes (each view counted
    as its whole storage), every other dtype right."""
    found = public.byte_pairs(seen, expected)
    others = [got == want for case, got, want in found if case != FLAT_CASE]
    flat = [(got, want) for case, got, want in found if case == FLAT_CASE]
    return (
        bool(others)
        and all(others)
        and any(
            got.get("float32", 0) > want.get("float32", 0)
            and {k: v for k, v in got.items() if k != "float32"} == {k: v for k, v in want.items() if k != "float32"}
            for got, want in flat
        )
    )


@detects("graph_bytes", "module_tensors")
def module_tensors(seen: Any, expected: Any) -> bool:
    return public.unread_tensors_counted(seen, expected)


@detects("graph_bytes", "parameters_only")
def parameters_only(seen: Any, expected: Any) -> bool:
    return public.buffers_missing(seen, expected)
