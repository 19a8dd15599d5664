"""Hidden checks of M03-3: the rule-based Quantizer and its validate().

RuleQuantizer checks compare, on the nodes and edges each rule is about, the labels the student
wrote (spec, observer class and sharing, read from the annotations) and the observers they gave.
validate checks ask for a ValueError that names the node on each spoiled label, and for silence
(with the labels left as they were) on correct ones.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
rule_quantizer
- ops found by node name, by ``str(target)`` substring or by ``source_fn_stack`` → conv_alone,
  weights, linear_add, max_pool (inputs named relu / conv2d, conv_transpose2d, relu6, leaky_relu,
  addmm, max_pool2d_with_indices), conv_relu (renamed: a pass swapped the names of the conv and the
  linear, and of max_pool2d and add);
- fusion decided by graph order (``node.next``), or a conv with two consumers fused → conv_relu
  (far_relu), conv_alone (two consumers);
- no fusion, a label inside the pattern, a fused relu left unclaimed → conv_relu;
- linear fused with relu "like XNNPACK" → linear_add;
- per-tensor weights, ``ch_axis=1``, a quantized bias → weights;
- constants or scalars of an add labelled, an add without its output label → linear_add;
- max_pool2d's output not shared with its input → max_pool;
- what another Quantizer claimed first is overwritten, or any label (even unclaimed) skipped →
  claimed, linear_add;
- XNNPACK's HistogramObserver instead of the rule's MinMaxObserver → every case.
validate
- it may fix labels silently, or change correct ones → accepts (labels compared before / after),
  inside_fused;
- ``assert`` instead of ``ValueError``, a message without the node → every spoiled case;
- the edge checked with ``producer in node.args`` (a cat's list) → accepts, not_an_input;
- weights found by name, only per-tensor affine refused, only per-tensor symmetric accepted →
  asymmetric_weight, accepts (per-channel symmetric);
- ranges fixed to int8, ``<=`` allowed, the order only checked, placeholders skipped →
  bad_range, accepts (uint8, int16, int32);
- every spec read for ``quant_min`` (a ``SharedQuantizationSpec`` has none) → accepts;
- only claimed labels checked → asymmetric_weight, inside_fused;
- fusion by graph order → accepts, inside_fused;
- conv / linear recognised by node name → inside_fused (renamed: the conv is called ``linear_90``).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, _relabel, check, compare_edges, expect, value
from autograder.checks.support import spec_text as _spec_text


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="（共用的位置沒有規格）")


# --- comparisons (the same reading of labels as test_m03_4) ---------------------------------------


def _group_text(positions: dict[str, Any], group: Any) -> str:
    members = sorted(p for p, e in positions.items() if e.get("group") == group)
    return "、".join(members) if len(members) > 1 else "誰都不（自己一組）"


def compare_labels(
    got: dict[str, Any],
    want: dict[str, Any],
    where: str,
    nodes: list[str],
    *,
    outputs: bool = True,
    weights: bool = False,
) -> None:
    """The labels carried by ``nodes``: same positions, same spec (observer class included), same sharing.

    ``outputs=False`` leaves output labels out; ``weights=False`` leaves out edges from constants
    (weights and biases), which only the weights check judges.
    """
    try:
        got_positions, want_positions = got["positions"], want["positions"]
    except (KeyError, TypeError):
        raise Fail(f"{where}：證據格式不對") from None

    def mine(entry: dict[str, Any]) -> bool:
        return (
            entry.get("node") in nodes
            and (outputs or not entry.get("output"))
            and (weights or not entry.get("constant"))
        )

    for position in sorted(p for p, e in want_positions.items() if mine(e)):
        entry, seen = want_positions[position], got_positions.get(position)
        if seen is None:
            raise Fail(f"{where}：{position} 應該有標籤（{spec_text(entry['spec'])}），看到沒有標籤")
        if seen.get("spec") != entry["spec"]:
            raise Fail(f"{where}：{position} 的規格預期 {spec_text(entry['spec'])}，看到 {spec_text(seen.get('spec'))}")
        if seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{position} 預期和 {_group_text(want_positions, entry['group'])} 共用，"
                f"看到和 {_group_text(got_positions, seen.get('group'))} 共用"
            )
    for position in sorted(p for p, e in got_positions.items() if mine(e) and p not in want_positions):
        raise Fail(f"{where}：{position} 不該有標籤，看到 {spec_text(got_positions[position].get('spec'))}")


def compare_marks(got: dict[str, Any], want: dict[str, Any], where: str, nodes: list[str]) -> None:
    """``_annotated`` of ``nodes`` right after the student's annotate."""
    got_marks, want_marks = got.get("annotated", {}), want.get("annotated", {})
    for node in nodes:
        expect(
            bool(got_marks.get(node)) == bool(want_marks.get(node)),
            f"{where}：{node} 的 _annotated 預期 {bool(want_marks.get(node))}，看到 {bool(got_marks.get(node))}",
        )


def _activation_edges(prepared: dict[str, Any]) -> dict[str, Any]:
    """``prepared`` without the edges that come from constants (weights, biases)."""
    constants = set(prepared.get("constants", []))
    edges = {c: [e for e in inputs if e[0] not in constants] for c, inputs in prepared["edges"].items()}
    return {**prepared, "edges": edges}


def compare_observer_edges(
    got: dict[str, Any], want: dict[str, Any], where: str, consumers: list[str], *, weights: bool = False
) -> None:
    """``compare_edges`` on the input edges of ``consumers`` (without edges from constants unless
    ``weights``), then the class of each observer instance met there."""
    try:
        if not weights:
            got, want = _activation_edges(got), _activation_edges(want)
        compare_edges(got, want, where, consumers)
        _, got_records = _relabel(got, consumers)
        _, want_records = _relabel(want, consumers)
    except (KeyError, TypeError, IndexError, AttributeError):
        raise Fail(f"{where}：證據格式不對") from None
    for index, want_record in enumerate(want_records):
        got_class = got_records[index].get("class")
        expect(
            got_class == want_record.get("class"),
            f"{where}：observer 實例 #{index} 預期是 {want_record.get('class')}，看到 {got_class}",
        )


Models = dict[str, tuple[list[str], list[str]]]


def _rule(seen, expected, case: str, models: Models, *, outputs: bool = True, weights: bool = False) -> None:
    """For each model: the observers on the inputs of the first list, the labels of the second."""
    got, want = value(seen, case), value(expected, case)
    for model, (consumers, nodes) in models.items():
        compare_labels(got[model]["labels"], want[model]["labels"], model, nodes, outputs=outputs, weights=weights)
        compare_observer_edges(got[model]["prepared"], want[model]["prepared"], model, consumers, weights=weights)


CLAIMED = "conv2d 已被別人標過、linear 有一張 _annotated=False 的標籤"
RENAMED = (
    "node 名字被 pass 對調的圖（叫 linear_90 的是 conv、叫 conv2d_91 的是 linear、叫 add_92 的是 max_pool2d、"
    "叫 max_pool2d_93 的是 add）"
)


# --- RuleQuantizer --------------------------------------------------------------------------------


@check(
    "rule_quantizer",
    1,
    "conv → relu 是一個融合 pattern（relu 在圖上不一定緊接在 conv 後面）：中間沒有 observer，輸出標籤在 relu，relu 也設 _annotated；"
    "node 的名字和 op 對不上時照 target 貼",
)
def test_rule_conv_relu(seen, expected):
    fused = (["relu", "output"], ["conv2d", "relu"])
    models = {"conv_relu": fused, "conv_bn_relu": fused, "far_relu": (["relu_1", "add"], ["conv2d", "relu_1"])}
    _rule(seen, expected, "conv_relu", models)
    got, want = value(seen, "conv_relu")["renamed"], value(expected, "conv_relu")["renamed"]
    nodes = ["linear_90", "relu", "add_92", "conv2d_91", "max_pool2d_93"]
    consumers = [*nodes, "flatten", "output"]
    compare_labels(got["labels"], want["labels"], RENAMED, nodes, weights=True)
    compare_observer_edges(got["prepared"], want["prepared"], RENAMED, consumers, weights=True)
    got, want = value(seen, "claimed")["late"], value(expected, "claimed")["late"]
    compare_labels(got["labels"], want["labels"], CLAIMED, ["conv2d", "relu", "conv2d_1", "relu_1"])
    compare_marks(got["labels"], want["labels"], CLAIMED, ["conv2d", "conv2d_1", "relu", "relu_1"])
    where = CLAIMED + "，之後再跑一個 Quantizer 認領沒人標的 op"
    compare_observer_edges(got["prepared"], want["prepared"], where, ["conv2d", "relu", "conv2d_1", "relu_1", "add"])


@check("rule_quantizer", 1, "conv 後面不是唯一的 relu 時（兩個 consumer、leaky_relu、relu6），conv 自己有輸出標籤")
def test_rule_conv_alone(seen, expected):
    models = {
        "conv_two_users": (["relu", "mul"], ["conv2d", "relu", "mul"]),
        "cat_pool": (["cat"], ["conv2d", "conv2d_1"]),
        "far_relu": (["mul", "slice_1"], ["conv2d_1", "relu", "mul"]),
        "look_alikes": (["leaky_relu", "relu6"], ["conv2d_1", "conv2d_2", "leaky_relu", "relu6"]),
    }
    _rule(seen, expected, "conv_alone", models)


@check(
    "rule_quantizer",
    1,
    "conv 與 linear 的輸入：activation per-tensor affine，weight per-channel symmetric，bias 不量化；conv_transpose2d、addmm 不是",
)
def test_rule_weights(seen, expected):
    look_alikes = ["conv2d_1", "conv2d_2", "conv_transpose2d", "addmm"]
    models = {
        "conv_relu": (["conv2d"], ["conv2d"]),
        "mlp": (["linear", "linear_1"], ["linear", "linear_1"]),
        "conv_relu_pool": (["conv2d", "conv2d_1"], ["conv2d", "conv2d_1"]),
        "look_alikes": (look_alikes, look_alikes),
    }
    _rule(seen, expected, "weights", models, outputs=False, weights=True)


@check("rule_quantizer", 1, "linear 與 add 的輸出都有標籤，add 只標 activation 輸入（常數、純量不標，重複的只標一次）")
def test_rule_linear_add(seen, expected):
    got, want = value(seen, "linear_add"), value(expected, "linear_add")
    adds = ["add", "add_1", "add_2", "add_3"]
    models = {  # model: (consumers whose inputs are compared, linear nodes, add nodes)
        "mlp": (["relu", "output"], ["linear", "linear_1"], []),
        "linear_add": (["add", "output"], ["linear", "linear_1", "linear_2"], ["add"]),
        "residual": (["add", "relu_1"], [], ["add"]),
        "constant_adds": (["add", "relu", *adds[1:], "output"], ["linear"], adds),
        "look_alikes": (["add", "addmm", "output"], [], ["add", "addmm"]),
    }
    for model, (consumers, linears, add_nodes) in models.items():
        g, w = got[model], want[model]
        compare_labels(g["labels"], w["labels"], model, linears)
        compare_labels(g["labels"], w["labels"], model, add_nodes, weights=True)
        compare_observer_edges(g["prepared"], w["prepared"], model, consumers, weights=True)
    got, want = value(seen, "claimed")["early"], value(expected, "claimed")["early"]
    compare_labels(got["labels"], want["labels"], CLAIMED, ["linear", "add"])
    compare_marks(got["labels"], want["labels"], CLAIMED, ["linear", "add"])
    compare_observer_edges(got["prepared"], want["prepared"], CLAIMED, ["output"])


@check(
    "rule_quantizer",
    1,
    "max_pool2d 的輸出和它的輸入共用同一個 observer 實例（max_pool2d_with_indices 不是 max_pool2d）",
)
def test_rule_max_pool(seen, expected):
    models = {
        "conv_relu_pool": (["max_pool2d", "conv2d_1"], ["max_pool2d"]),
        "cat_pool": (["max_pool2d", "output"], ["max_pool2d"]),
        "look_alikes": (["max_pool2d_with_indices", "getitem"], ["max_pool2d_with_indices"]),
    }
    _rule(seen, expected, "max_pool", models)
    got, want = value(seen, "claimed")["late"], value(expected, "claimed")["late"]
    compare_labels(got["labels"], want["labels"], CLAIMED, ["max_pool2d"])
    compare_marks(got["labels"], want["labels"], CLAIMED, ["max_pool2d"])
    compare_observer_edges(
        got["prepared"], want["prepared"], CLAIMED + "，之後再跑一個 Quantizer", ["max_pool2d", "mean"]
    )


# --- validate -------------------------------------------------------------------------------------


def _rejects(seen, case: str, variants: dict[str, tuple[str, str]]) -> None:
    got = value(seen, case)
    for variant, (what, node) in variants.items():
        verdict = got[variant]
        expect(verdict.get("raised") is not None, f"{what}：validate 應該出錯，卻沒有")
        expect(
            verdict.get("value_error") is True,
            f"{what}：應該丟出 ValueError，看到 {verdict.get('raised')}（{verdict.get('message', '')}）",
        )
        expect(verdict.get("names_node") is True, f"{what}：錯誤訊息要寫出標籤所在的 node（{node}）")


@check(
    "validate",
    1,
    "正確的標籤不出錯、也不改動標籤（uint8、int16、共用、Derived、FixedQParams、bias 為 None 的規格都有）",
)
def test_validate_accepts(seen, expected):
    for model, got in value(seen, "accepts").items():
        raised = got.get("raised")
        message = f"（{got.get('message')}）" if got.get("message") else ""
        expect(raised is None, f"{model} 上全是正確的標籤，validate 卻丟出了 {raised}{message}")
        expect(got.get("unchanged") is True, f"{model}：validate 只檢查，不該改動標籤")


@check("validate", 1, "input_qspec_map 的 key 不是這個 node 的輸入：丟出 ValueError，訊息寫出 node")
def test_validate_not_an_input(seen, expected):
    _rejects(
        seen,
        "not_an_input",
        {
            "ancestor": ("conv2d_1 的標籤裡有一條不存在的邊 x → conv2d_1（x 是上上游）", "conv2d_1"),
            "user": ("conv2d 的標籤裡有 relu → conv2d（relu 是 conv2d 的 consumer）", "conv2d"),
            "not_in_list": ("cat 的標籤裡有 conv2d_1 → cat（cat 的 list 裡是 leaky_relu）", "cat"),
        },
    )


@check("validate", 1, "weight（node.args[1]）用了非 symmetric 的規格：丟出 ValueError")
def test_validate_asymmetric_weight(seen, expected):
    _rejects(
        seen,
        "asymmetric_weight",
        {
            "linear": ("linear 的 weight 用 per-tensor affine", "linear"),
            "computed_weight": ("conv2d_2 的 weight 由 mul 算出來，用 per-channel affine", "conv2d_2"),
            "unclaimed": ("conv2d_1（_annotated=False 的標籤）的 weight 用 per-tensor affine", "conv2d_1"),
        },
    )


@check(
    "validate", 1, "conv → relu 融合 pattern 中間（conv 的輸出）有標籤：丟出 ValueError（conv 的名字不像 conv 也一樣）"
)
def test_validate_inside_fused(seen, expected):
    _rejects(
        seen,
        "inside_fused",
        {
            "adjacent": ("conv2d 只接 relu，輸出卻有標籤", "conv2d"),
            "far": ("conv2d 唯一的 consumer 是圖上隔了好幾個 node 的 relu_1，輸出卻有標籤", "conv2d"),
            "renamed": ("名字被 pass 改成 linear_90 的 conv 只接 relu，輸出卻有標籤（認 op 要看 target）", "linear_90"),
        },
    )


@check("validate", 1, "整數範圍超出 dtype、或 quant_min 不小於 quant_max：丟出 ValueError")
def test_validate_bad_range(seen, expected):
    _rejects(
        seen,
        "bad_range",
        {
            "too_wide": ("add 的輸出用 int8 [0, 255]", "add"),
            "empty": ("conv2d 的輸入用 int8 [10, 10]", "conv2d"),
            "uint8_negative": ("conv2d_1 的輸入用 uint8 [-1, 255]", "conv2d_1"),
            "placeholder": ("模型輸入 x 的輸出標籤用 int8 [-129, 127]", "x"),
            "shared_base": ("cat 的輸入共用的那份規格是 int8 [-128, 128]", "cat"),
        },
    )
