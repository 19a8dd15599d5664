"""Hidden checks of M03-3: the rule-based Quantizer and its validate().

RuleQuantizer checks compare, on the nodes and edges each rule is about, the labels the student
wrote (spec, observer class and sharing, read from the annotations) and the observers they gave.
validate checks ask for a ValueError that names the node on each spoiled label, and for silence
(with the labels left as they were) on correct ones.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m03_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import (
    Fail,
    _relabel,
    check,
    compare_edges,
    detects,
    expect,
    label_pairs,
    labelled_nodes,
    marks_missing,
    observer_classes,
    output_labelled,
    spec_field,
    value,
)
from autograder.checks.support import spec_text as _spec_text
from selfcheck import diagnosis
from selfcheck.public.m03_3 import op_named


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="（共用的位置沒有規格）")


# --- comparisons (the same reading of labels as test_m03_4) ---------------------------------------


def _subject(text: str) -> str:
    """``text`` ready to be followed by Chinese: a space after a name, none after Chinese (``x 的輸出``)."""
    return text + " " if text[-1:].isascii() else text


def _partners_text(positions: dict[str, Any], position: str, group: Any, seen: bool = False) -> str:
    """How ``position`` shares, as a sentence: 和 a、b 共用同一個 observer / 自己用一個 observer."""
    partners = sorted(p for p, e in positions.items() if e.get("group") == group and p != position)
    if partners:
        return f"和 {_subject('、'.join(partners))}共用同一個 observer"
    return "沒有和任何位置共用，自己用一個 observer" if seen else "自己用一個 observer，不和別的位置共用"


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
            raise Fail(f"{where}：{_subject(position)}應該有標籤（{spec_text(entry['spec'])}），你的沒有貼")
        if seen.get("spec") != entry["spec"]:
            raise Fail(
                f"{where}：{_subject(position)}的規格應該是 {spec_text(entry['spec'])}，你的是 {spec_text(seen.get('spec'))}"
            )
        if seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{_subject(position)}應該{_partners_text(want_positions, position, entry['group'])}，"
                f"你的{_partners_text(got_positions, position, seen.get('group'), seen=True)}"
            )
    for position in sorted(p for p, e in got_positions.items() if mine(e) and p not in want_positions):
        raise Fail(
            f"{where}：{_subject(position)}不該有標籤，你的貼了（{spec_text(got_positions[position].get('spec'))}）"
        )


def compare_marks(got: dict[str, Any], want: dict[str, Any], where: str, nodes: list[str]) -> None:
    """``_annotated`` of ``nodes`` right after the student's annotate."""
    got_marks, want_marks = got.get("annotated", {}), want.get("annotated", {})
    for node in nodes:
        if bool(got_marks.get(node)) == bool(want_marks.get(node)):
            continue
        if want_marks.get(node):
            raise Fail(f"{where}：{node} 標過之後 _annotated 應該是 True，你的沒有設")
        raise Fail(f"{where}：{node} 的 _annotated 應該維持 False（不是你認領的 node），你的設成了 True")


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
            f"{where}：observer 實例 #{index} 應該是 {want_record.get('class')}，你的是 {got_class}",
        )


Models = dict[str, tuple[list[str], list[str]]]

RENAMED_NODES = {"conv2d": "linear_90", "linear": "conv2d_91", "max_pool2d": "add_92", "add": "max_pool2d_93"}
"""What the cases' pass renamed each node of the renamed graph to (``build("renamed")``)."""


def _renamed_position(position: str) -> str:
    """``position`` (``a → b`` or ``n 的輸出``) with the node names the pass renamed."""
    if position.endswith(" 的輸出"):
        node = position.removesuffix(" 的輸出")
        return f"{RENAMED_NODES.get(node, node)} 的輸出"
    return " → ".join(RENAMED_NODES.get(name, name) for name in position.split(" → "))


def compare_same_labels(renamed: dict[str, Any], unrenamed: dict[str, Any]) -> None:
    """The student's labels on the renamed graph are the student's own labels on the same graph before the pass
    renamed it (names mapped): whatever the rules decide, the names decide nothing. Whether those labels are
    right is the other checks' to judge (issue 50: one mistake costs once)."""
    try:
        mine = renamed["positions"]
        own = {_renamed_position(p): e for p, e in unrenamed["positions"].items()}
    except (KeyError, TypeError, AttributeError):
        raise Fail(f"{RENAMED}：證據格式不對") from None

    def partners(positions: dict[str, Any], position: str, rename: bool) -> list[str]:
        group = positions[position].get("group")
        found = [p for p, e in positions.items() if e.get("group") == group and p != position]
        return sorted(_renamed_position(p) if rename else p for p in found)

    originals = {_renamed_position(p): p for p in unrenamed["positions"]}
    for position in sorted(set(mine) | set(own)):
        before = f"沒改名的同一張圖上你的{_subject(position)}"
        if position not in mine:
            raise Fail(
                f"{RENAMED}：{_subject(position)}沒有標籤，{before}有（{spec_text(own[position].get('spec'))}）：認 op 要看 node.target，不是名字"
            )
        if position not in own:
            raise Fail(
                f"{RENAMED}：{_subject(position)}有標籤（{spec_text(mine[position].get('spec'))}），{before}沒有：認 op 要看 node.target，不是名字"
            )
        if mine[position].get("spec") != own[position].get("spec"):
            raise Fail(
                f"{RENAMED}：{_subject(position)}的規格是 {spec_text(mine[position].get('spec'))}，{before}是 "
                f"{spec_text(own[position].get('spec'))}：認 op 要看 node.target，不是名字"
            )
        if partners(renamed["positions"], position, False) != partners(
            unrenamed["positions"], originals[position], True
        ):
            raise Fail(
                f"{RENAMED}：{_subject(position)}共用 observer 的方式和沒改名時不一樣：認 op 要看 node.target，不是名字"
            )


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
    got = value(seen, "conv_relu")
    compare_same_labels(got["renamed"]["labels"], got["unrenamed"]["labels"])
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
        "linear_add": (["linear", "linear_1", "linear_2"], ["linear", "linear_1", "linear_2"]),  # linear_2: no bias
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


def _rejected(verdict: Any, what: str, node: str) -> None:
    """``verdict``: validate raised a ValueError whose message names ``node``."""
    expect(isinstance(verdict, dict), "證據格式不對")
    expect(verdict.get("raised") is not None, f"{what}：validate 應該出錯，你的沒有出錯")
    expect(
        verdict.get("value_error") is True,
        f"{what}：應該丟出 ValueError，你的丟出 {verdict.get('raised')}（{verdict.get('message', '')}）",
    )
    expect(verdict.get("names_node") is True, f"{what}：丟出了 ValueError，但訊息沒有寫出標籤所在的 node（{node}）")


def _rejects(seen, case: str, variants: dict[str, tuple[str, str]]) -> None:
    """Each spoiled label rejected with a ValueError naming its node.

    Where the student's validate also rejects the same graph unspoiled (``control``: a false alarm,
    ``test_validate_accepts``'s to judge), the rule is judged apart from it: on the graph where only the spoiled
    positions carry labels (``alone``), which it must reject, while it accepts one plain correct label on that
    node (``alone_control``). A validate that refuses everything refuses that one too and still fails (issue 50:
    one mistake costs once).
    """
    got = value(seen, case)
    for variant, (what, node) in variants.items():
        verdict = got[variant]
        try:
            _rejected(verdict, what, node)
        except Fail:
            control, alone = verdict.get("control") or {}, verdict.get("alone")
            if control.get("raised") is None or alone is None or verdict.get("alone_control") is not None:
                raise
            _rejected(alone, f"{what}（圖上只留弄壞的標籤）", node)


REJECTING: dict[str, dict[str, tuple[str, str]]] = {
    "not_an_input": {
        "none_spec": ("relu 的標籤裡有 x → relu，規格是 None（x 是 conv2d 的輸入，不是 relu 的）", "relu"),
        "ancestor": ("conv2d_1 的標籤裡有一條不存在的邊 x → conv2d_1（x 是上上游）", "conv2d_1"),
        "user": ("conv2d 的標籤裡有 relu → conv2d（relu 是 conv2d 的 consumer）", "conv2d"),
        "not_in_list": ("cat 的標籤裡有 conv2d_1 → cat（cat 的 list 裡是 leaky_relu）", "cat"),
    },
    "asymmetric_weight": {
        "linear": ("linear 的 weight 用 per-tensor affine", "linear"),
        "computed_weight": ("conv2d_2 的 weight 由 mul 算出來，用 per-channel affine", "conv2d_2"),
        "unclaimed": ("conv2d_1（_annotated=False 的標籤）的 weight 用 per-tensor affine", "conv2d_1"),
    },
    "inside_fused": {
        "relu_unlabelled": ("conv2d 只接 relu，relu 沒有標籤，conv2d 的輸出卻有標籤", "conv2d"),
        "adjacent": ("conv2d 只接 relu，輸出卻有標籤", "conv2d"),
        "far": ("conv2d 唯一的 consumer 是圖上隔了好幾個 node 的 relu_1，輸出卻有標籤", "conv2d"),
        "renamed": ("名字被 pass 改成 linear_90 的 conv 只接 relu，輸出卻有標籤（認 op 要看 target）", "linear_90"),
    },
    "bad_range": {
        "channel_weight": ("conv2d 的 weight 用 per-channel symmetric int8 [-127, 128]", "conv2d"),
        "too_wide": ("add 的輸出用 int8 [0, 255]", "add"),
        "empty": ("conv2d 的輸入用 int8 [10, 10]", "conv2d"),
        "uint8_negative": ("conv2d_1 的輸入用 uint8 [-1, 255]", "conv2d_1"),
        "placeholder": ("模型輸入 x 的輸出標籤用 int8 [-129, 127]", "x"),
        "shared_base": ("cat 的輸入共用的那份規格是 int8 [-128, 128]", "cat"),
    },
}
"""Each rejecting case's spoiled graphs: variant → (what is wrong, the node the message names)."""


@check(
    "validate",
    1,
    "正確的標籤不出錯、也不改動標籤（uint8、int16、共用、Derived、FixedQParams、bias 為 None 的規格都有）",
)
def test_validate_accepts(seen, expected):
    for model, got in value(seen, "accepts").items():
        raised = got.get("raised")
        message = f"（{got.get('message')}）" if got.get("message") else ""
        expect(raised is None, f"{_subject(model)}上全是正確的標籤，你的 validate 卻丟出了 {raised}{message}")
        expect(got.get("unchanged") is True, f"{model}：validate 只該檢查標籤，你的改動了標籤")
    # the graphs of the rejecting cases before their label was spoiled are correct too (recorded where a
    # spoiled label was not rejected: the rejecting checks then judge the rule apart from this false alarm)
    for case, variants in REJECTING.items():
        cases = seen.get("cases") if isinstance(seen, dict) else None
        record = cases.get(case) if isinstance(cases, dict) else None
        verdicts = record.get("value") if isinstance(record, dict) else None
        for variant, (what, _node) in variants.items() if isinstance(verdicts, dict) else ():
            control = (verdicts.get(variant) or {}).get("control") or {}
            raised = control.get("raised")
            message = f"（{control.get('message')}）" if control.get("message") else ""
            expect(raised is None, f"{what}：弄壞之前全是正確的標籤，你的 validate 就已經丟出了 {raised}{message}")


@check("validate", 1, "input_qspec_map 的 key 不是這個 node 的輸入：丟出 ValueError，訊息寫出 node")
def test_validate_not_an_input(seen, expected):
    _rejects(seen, "not_an_input", REJECTING["not_an_input"])


@check("validate", 1, "weight（node.args[1]）用了非 symmetric 的規格：丟出 ValueError")
def test_validate_asymmetric_weight(seen, expected):
    _rejects(seen, "asymmetric_weight", REJECTING["asymmetric_weight"])


@check(
    "validate", 1, "conv → relu 融合 pattern 中間（conv 的輸出）有標籤：丟出 ValueError（conv 的名字不像 conv 也一樣）"
)
def test_validate_inside_fused(seen, expected):
    _rejects(seen, "inside_fused", REJECTING["inside_fused"])


@check("validate", 1, "整數範圍超出 dtype、或 quant_min 不小於 quant_max：丟出 ValueError")
def test_validate_bad_range(seen, expected):
    _rejects(seen, "bad_range", REJECTING["bad_range"])


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m03_3.py) --------

RULE_CHECKS = (
    "test_rule_conv_relu",
    "test_rule_conv_alone",
    "test_rule_weights",
    "test_rule_linear_add",
    "test_rule_max_pool",
)


def _model(place: tuple[Any, ...]) -> str:
    """The model of a labels record's place (``(case, model, "labels")``)."""
    return str(place[1]) if len(place) > 1 else ""


def _labels(seen: Any, expected: Any, *, claimed: bool = False) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(model, got, want)`` for each labels record; the ``claimed`` case (other Quantizers around the
    student's) only when asked."""
    return [
        (_model(place), got, want)
        for place, got, want in label_pairs(seen, expected)
        if (place[0] == "claimed") == claimed
    ]


def _errors(seen: Any) -> list[tuple[str, str]]:
    """(exception, message) of every case that raised."""
    return [(error, diagnosis.error_message(seen, case)) for case, error in diagnosis.errors(seen).items()]


def _differ(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return got["positions"] != want["positions"] or (got.get("annotated") or {}) != (want.get("annotated") or {})


def _outputs_moved(got: dict[str, Any], want: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The nodes whose output the key labels and the student does not, and the other way round."""
    return output_labelled(want) - output_labelled(got), output_labelled(got) - output_labelled(want)


@detects("rule_quantizer", "source_fn_stack")
def rule_labels_nothing(seen: Any, expected: Any) -> bool:
    records = [(got, want) for _, got, want in _labels(seen, expected) if want["positions"]]
    return bool(records) and all(not got["positions"] for got, _ in records)


@detects("rule_quantizer", "found_by_name")
def rule_found_by_name(seen: Any, expected: Any) -> bool:
    """A node named like a rule's op read as one (a model input has no node.args), or labels wrong only on the
    graph whose names a pass swapped (every op kind of it is right on the other graphs)."""
    if any(
        error == "IndexError" and "tuple index out of range" in message and "args[2]" not in message
        for error, message in _errors(seen)
    ):
        return True  # a placeholder or a get_attr named like an op has no node.args (a missing bias is args[2])
    records = _labels(seen, expected)
    renamed = [got for model, got, want in records if model == "renamed" and _differ(got, want)]
    others = [_differ(got, want) for model, got, want in records if model not in ("renamed", "look_alikes")]
    return bool(renamed) and bool(others) and not any(others)


@detects("rule_quantizer", "bias_assumed")
def rule_bias_assumed(seen: Any, expected: Any) -> bool:
    """Reading ``node.args[2]`` stopped a case: a linear (or conv) without a bias has no third argument."""
    return any(error == "IndexError" and "args[2]" in message for error, message in _errors(seen))


@detects("rule_quantizer", "target_substring", explains=RULE_CHECKS[1:])
def rule_target_substring(seen: Any, expected: Any) -> bool:
    """Ops whose names only look like a rule's op (conv_transpose2d, relu6, addmm...) carry labels, while the
    graph whose names lie is labelled right."""
    records = _labels(seen, expected)
    look_alikes = any(
        labelled_nodes(got) - labelled_nodes(want) for model, got, want in records if model == "look_alikes"
    )
    renamed_right = all(not _differ(got, want) for model, got, want in records if model == "renamed")
    return look_alikes and renamed_right


def _claims(seen: Any, expected: Any, limit: int) -> list[tuple[str, bool]]:
    """For each position of the ``claimed`` case whose spec is the probe's int8 [-limit, limit] in the key or in
    the student's labels: (position, whether the key's is that spec)."""
    found = []
    for _, got, want in _labels(seen, expected, claimed=True):
        for position in set(want["positions"]) | set(got["positions"]):
            mine, key = got["positions"].get(position), want["positions"].get(position)
            if (spec_field(key, "qmax") == limit) != (spec_field(mine, "qmax") == limit):
                found.append((position, spec_field(key, "qmax") == limit))
    return found


@detects(
    "rule_quantizer",
    "overwrites_claimed",
    explains=("test_rule_conv_relu", "test_rule_linear_add", "test_rule_max_pool"),
)
def rule_overwrites_claimed(seen: Any, expected: Any) -> bool:
    """A label another Quantizer claimed first (int8 [-100, 100]) is no longer there."""
    return any(theirs for _, theirs in _claims(seen, expected, 100))


@detects("rule_quantizer", "skips_unclaimed_label", explains=("test_rule_linear_add",))
def rule_skips_unclaimed(seen: Any, expected: Any) -> bool:
    """The label nobody claimed (int8 [-30, 30]) is still there, while the student labelled the rest of that
    graph as the key does."""
    kept = any(not theirs for _, theirs in _claims(seen, expected, 30))
    labelled_rest = any(
        got["positions"].get(position) == entry and spec_field(entry, "qmax") not in (100, 30)
        for _, got, want in _labels(seen, expected, claimed=True)
        for position, entry in want["positions"].items()
    )
    return kept and labelled_rest


@detects("rule_quantizer", "other_observer")
def rule_other_observer(seen: Any, expected: Any) -> bool:
    """Observers of a class the key never uses."""
    return any(
        observer_classes(got) - observer_classes(want)
        for _, got, want in diagnosis.aligned(seen, expected, "instances")
    )


def _conv_relu_moves(got: dict[str, Any], want: dict[str, Any]) -> tuple[bool, bool]:
    """(a conv's output label moved to a relu, a relu's output label moved back to a conv)."""
    lost, gained = _outputs_moved(got, want)
    to_relu = any(op_named(n, "conv2d") for n in lost) and any(op_named(n, "relu") for n in gained)
    to_conv = any(op_named(n, "conv2d") for n in gained) and any(op_named(n, "relu") for n in lost)
    return to_relu, to_conv


@detects("rule_quantizer", "fusion_by_next_node", explains=("test_rule_conv_relu", "test_rule_conv_alone"))
def rule_next_node(seen: Any, expected: Any) -> bool:
    """On far_relu (conv2d's only user far away in graph order, conv2d_1 followed by a relu that does not read
    it) fusion goes wrong, while a conv right before its relu is fused right on every other graph."""
    records = [(model, got, want) for model, got, want in _labels(seen, expected) if model != "renamed"]
    far = [_conv_relu_moves(got, want) for model, got, want in records if model == "far_relu"]
    others = [_conv_relu_moves(got, want)[1] for model, got, want in records if model != "far_relu"]
    return any(to_relu or to_conv for to_relu, to_conv in far) and bool(others) and not any(others)


def _moved_to_relu(seen: Any, expected: Any, op: str, *, skip: tuple[str, ...] = ()) -> bool:
    """An ``op``'s own output label moved to a relu (on a graph whose names are the ops')."""
    for model, got, want in _labels(seen, expected):
        if model in ("renamed", *skip):
            continue
        lost, gained = _outputs_moved(got, want)
        if any(op_named(n, op) for n in lost) and any(op_named(n, "relu") for n in gained):
            return True
    return False


@detects("rule_quantizer", "fuses_shared_conv", explains=("test_rule_conv_alone",))
def rule_fuses_shared_conv(seen: Any, expected: Any) -> bool:
    return _moved_to_relu(seen, expected, "conv2d")


@detects("rule_quantizer", "linear_fuses_relu", explains=("test_rule_linear_add",))
def rule_linear_fuses_relu(seen: Any, expected: Any) -> bool:
    return _moved_to_relu(seen, expected, "linear")


@detects(
    "rule_quantizer", "no_fusion", explains=("test_rule_conv_relu", "test_rule_conv_alone", "test_rule_linear_add")
)
def rule_no_fusion(seen: Any, expected: Any) -> bool:
    """A conv keeps its own output label where the key moves it to the relu (the relu labelled or not)."""
    for model, got, want in _labels(seen, expected):
        if model == "renamed":
            continue
        lost, gained = _outputs_moved(got, want)
        if any(op_named(n, "conv2d") for n in gained) and all(op_named(n, "relu") for n in lost):
            return True
    return False


@detects("rule_quantizer", "label_inside_pattern", explains=("test_rule_conv_relu", "test_rule_conv_alone"))
def rule_label_inside_pattern(seen: Any, expected: Any) -> bool:
    """An input edge labelled on a node whose key label is an output only (the relu of a fused pattern)."""
    for _, got, want in _labels(seen, expected) + _labels(seen, expected, claimed=True):
        with_inputs = {e.get("node") for e in want["positions"].values() if not e.get("output")}
        for position, entry in got["positions"].items():
            node = entry.get("node")
            if (
                position not in want["positions"]
                and not entry.get("output")
                and node not in with_inputs
                and node in output_labelled(want)
            ):
                return True
    return False


@detects("rule_quantizer", "relu_not_marked", explains=("test_rule_conv_relu",))
def rule_relu_not_marked(seen: Any, expected: Any) -> bool:
    """The labels are the key's, but a node the key marks _annotated is left unmarked."""
    records = _labels(seen, expected) + _labels(seen, expected, claimed=True)
    same = all(got["positions"] == want["positions"] for _, got, want in records)
    return same and any(marks_missing(got, want) for _, got, want in records)


def _weights(seen: Any, expected: Any, test: Any) -> bool:
    """Some weight edge (a constant labelled per-channel by the key) whose student spec passes ``test``."""
    for _, got, want in _labels(seen, expected):
        for position, entry in want["positions"].items():
            scheme = str(spec_field(entry, "qscheme"))
            if entry.get("constant") and "per_channel" in scheme and position in got["positions"]:
                if test(got["positions"][position]):
                    return True
    return False


@detects("rule_quantizer", "per_tensor_weight", explains=("test_rule_weights",))
def rule_per_tensor_weight(seen: Any, expected: Any) -> bool:
    return _weights(seen, expected, lambda mine: "per_tensor" in str(spec_field(mine, "qscheme")))


@detects("rule_quantizer", "weight_axis_1", explains=("test_rule_weights",))
def rule_weight_axis(seen: Any, expected: Any) -> bool:
    return _weights(
        seen,
        expected,
        lambda mine: "per_channel" in str(spec_field(mine, "qscheme")) and spec_field(mine, "ch_axis") not in (0, None),
    )


def _constants_added(seen: Any, expected: Any) -> list[tuple[str, bool]]:
    """Edges from constants the student labels and the key does not, on nodes the key labels: (node, whether
    the key labels another constant edge of that node, i.e. it is a conv or linear with its weight)."""
    found = []
    for _, got, want in _labels(seen, expected) + _labels(seen, expected, claimed=True):
        weighted = {e.get("node") for e in want["positions"].values() if e.get("constant")}
        for position, entry in got["positions"].items():
            if (
                entry.get("constant")
                and position not in want["positions"]
                and entry.get("node") in labelled_nodes(want)
            ):
                found.append((str(entry.get("node")), entry.get("node") in weighted))
    return found


@detects("rule_quantizer", "quantizes_bias", explains=("test_rule_weights",))
def rule_quantizes_bias(seen: Any, expected: Any) -> bool:
    return any(weighted for _, weighted in _constants_added(seen, expected))


@detects("rule_quantizer", "add_labels_constants", explains=("test_rule_linear_add",))
def rule_add_labels_constants(seen: Any, expected: Any) -> bool:
    return any(not weighted for _, weighted in _constants_added(seen, expected))


@detects("rule_quantizer", "add_no_output", explains=("test_rule_linear_add",))
def rule_add_no_output(seen: Any, expected: Any) -> bool:
    """Only output labels are missing (nothing extra), on nodes without a weight: the adds."""
    found = False
    for _, got, want in _labels(seen, expected):
        if set(got["positions"]) - set(want["positions"]):
            return False
        lost = set(want["positions"]) - set(got["positions"])
        nodes = {want["positions"][p].get("node") for p in lost}
        weighted = {e.get("node") for e in want["positions"].values() if e.get("constant")}
        if any(not want["positions"][p].get("output") for p in lost) or nodes & weighted:
            return False
        found = found or bool(lost)
    return found


@detects("rule_quantizer", "pool_not_shared", explains=("test_rule_max_pool",))
def rule_pool_not_shared(seen: Any, expected: Any) -> bool:
    """A position the key shares with another one has a group of its own."""
    for _, got, want in _labels(seen, expected) + _labels(seen, expected, claimed=True):
        for position, entry in want["positions"].items():
            mine = got["positions"].get(position)
            shared = entry.get("group") != position
            if mine is not None and shared and mine.get("group") == position:
                return True
    return False


# --- validate ---------------------------------------------------------------------------------------------

VALIDATE_CHECKS = (
    "test_validate_accepts",
    "test_validate_not_an_input",
    "test_validate_asymmetric_weight",
    "test_validate_inside_fused",
    "test_validate_bad_range",
)

# The spoiled graphs whose wrong label nobody claimed (autograder/sandboxed/cases/m03_3.py), and those built
# on the hand-labelled TableNet, whose correct labels use uint8, int16 and int32 too.
UNCLAIMED_SPOILED = {("asymmetric_weight", "unclaimed"), ("bad_range", "uint8_negative"), ("inside_fused", "far")}
PER_TENSOR_MODEL = "per-tensor"  # the one correct graph whose weights are per-tensor symmetric
PER_CHANNEL_MODELS = ("small_cnn", "residual", "cat_pool", "mlp", "far_relu")  # every weight per-channel symmetric


def _verdict_pairs(seen: Any, expected: Any) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """``(case, graph, mine, key)`` for each graph validate was handed, in both evidences."""
    found = []
    for case, record in diagnosis.cases(expected).items():
        want = record.get("value") if isinstance(record, dict) else None
        got = diagnosis.value(seen, case)
        if not isinstance(want, dict) or not isinstance(got, dict):
            continue
        for graph, key in want.items():
            mine = got.get(graph)
            if isinstance(key, dict) and isinstance(mine, dict) and "raised" in key and "raised" in mine:
                found.append((str(case), str(graph), mine, key))
    return found


def _rejecting(seen: Any, expected: Any) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """The spoiled graphs: the key raises a ValueError on each."""
    return [v for v in _verdict_pairs(seen, expected) if v[3].get("raised") is not None]


def _accepting(seen: Any, expected: Any) -> dict[str, bool]:
    """Correctly labelled graph → whether the student's validate raised on it."""
    return {
        graph: mine.get("raised") is not None
        for _, graph, mine, key in _verdict_pairs(seen, expected)
        if key.get("raised") is None
    }


def _quiet(seen: Any, expected: Any) -> set[tuple[str, str]]:
    """The spoiled graphs the student's validate let through."""
    return {(case, graph) for case, graph, mine, _ in _rejecting(seen, expected) if mine.get("raised") is None}


def _loud(seen: Any, expected: Any, case: str) -> list[bool]:
    """For each spoiled graph of ``case``: whether the student's validate raised."""
    return [mine.get("raised") is not None for c, _, mine, _ in _rejecting(seen, expected) if c == case]


@detects("validate", "fixes_silently")
def validate_fixes_silently(seen: Any, expected: Any) -> bool:
    return any(mine.get("unchanged") is False for _, _, mine, _ in _verdict_pairs(seen, expected))


@detects("validate", "reads_every_spec")
def validate_reads_every_spec(seen: Any, expected: Any) -> bool:
    return any(
        mine.get("raised") in ("AttributeError", "TypeError") and "QuantizationSpec" in str(mine.get("message"))
        for _, _, mine, _ in _verdict_pairs(seen, expected)
    )


ACCIDENTS = ("AttributeError", "TypeError", "KeyError", "IndexError", "RecursionError", "Timeout")


@detects("validate", "wrong_error_type", explains=VALIDATE_CHECKS[1:])
def validate_wrong_error_type(seen: Any, expected: Any) -> bool:
    """A spoiled label refused on purpose, with another exception than ValueError."""
    for _, _, mine, _ in _rejecting(seen, expected):
        error = mine.get("raised")
        if error not in (None, "ValueError") and (error not in ACCIDENTS or mine.get("names_node") is True):
            return True
    return False


@detects("validate", "checks_nothing", explains=VALIDATE_CHECKS[1:])
def validate_checks_nothing(seen: Any, expected: Any) -> bool:
    rejecting = _rejecting(seen, expected)
    return len(rejecting) >= 3 and all(mine.get("raised") is None for _, _, mine, _ in rejecting)


@detects("validate", "rejects_any_label")
def validate_rejects_any_label(seen: Any, expected: Any) -> bool:
    """A validate that refuses every label tells no rule apart: each rejecting check finds it refusing the
    correct labels too, even one plain label on the spoiled node alone. Accepting correct labels underlies
    every check of the exercise, so this one mistake keeps costing them all."""
    accepting = _accepting(seen, expected)
    return len(accepting) >= 3 and all(accepting.values())


def _named(seen: Any, expected: Any) -> list[tuple[str, bool]]:
    """(case, whether the message names the node) for each spoiled graph refused with a ValueError."""
    return [
        (case, mine.get("names_node") is True)
        for case, _, mine, _ in _rejecting(seen, expected)
        if mine.get("raised") == "ValueError"
    ]


@detects("validate", "vague_message", explains=VALIDATE_CHECKS[1:])
def validate_vague_message(seen: Any, expected: Any) -> bool:
    named = _named(seen, expected)
    return not any(_accepting(seen, expected).values()) and len(named) >= 3 and not any(n for _, n in named)


@detects("validate", "names_producer", explains=("test_validate_not_an_input",))
def validate_names_producer(seen: Any, expected: Any) -> bool:
    named = _named(seen, expected)
    edges = [n for case, n in named if case == "not_an_input"]
    others = [n for case, n in named if case != "not_an_input"]
    return bool(edges) and not any(edges) and any(others) and not any(_accepting(seen, expected).values())


@detects("validate", "one_symmetric_only", explains=("test_validate_accepts",))
def validate_one_symmetric_only(seen: Any, expected: Any) -> bool:
    """Correct weights of one symmetric scheme refused, those of the other let through: the graph with
    per-tensor weights passes while most per-channel ones are refused, or the other way round."""
    accepting = _accepting(seen, expected)
    per_tensor = [refused for graph, refused in accepting.items() if PER_TENSOR_MODEL in graph]
    per_channel = [accepting[graph] for graph in PER_CHANNEL_MODELS if graph in accepting]
    if not per_tensor or len(per_channel) < 3:
        return False
    if not any(per_tensor):
        return sum(per_channel) >= 3
    return not any(per_channel)


@detects("validate", "any_conv_output", explains=("test_validate_accepts",))
def validate_any_conv_output(seen: Any, expected: Any) -> bool:
    """Graphs whose convs all feed one relu pass (small_cnn, mlp); graphs with a conv into cat or add do not."""
    accepting = _accepting(seen, expected)
    fused_only = [accepting.get(g) for g in ("small_cnn", "mlp")]
    with_conv_output = [accepting.get(g) for g in ("cat_pool", "residual", "far_relu")]
    return fused_only == [False, False] and sum(bool(r) for r in with_conv_output) >= 2


@detects("validate", "fusion_by_next_node", explains=("test_validate_accepts", "test_validate_inside_fused"))
def validate_next_node(seen: Any, expected: Any) -> bool:
    """far_relu (a relu right after conv2d_1 that does not read it) refused while cat_pool passes, or the conv
    whose only relu is far away let through while its claimed twins are refused."""
    accepting = _accepting(seen, expected)
    if accepting.get("far_relu") and accepting.get("cat_pool") is False:
        return True
    quiet = _quiet(seen, expected)
    far_only = ("inside_fused", "far") in quiet and ("inside_fused", "adjacent") not in quiet
    return far_only and not (quiet & (UNCLAIMED_SPOILED - {("inside_fused", "far")}))


@detects("validate", "claimed_only")
def validate_claimed_only(seen: Any, expected: Any) -> bool:
    """Wrong labels nobody claimed let through, while claimed ones are refused."""
    quiet = _quiet(seen, expected)
    refused_claimed = any(
        mine.get("raised") is not None and (case, graph) not in UNCLAIMED_SPOILED
        for case, graph, mine, _ in _rejecting(seen, expected)
    )
    return len(quiet & UNCLAIMED_SPOILED) >= 2 and refused_claimed


@detects("validate", "found_by_name", explains=("test_validate_inside_fused",))
def validate_found_by_name(seen: Any, expected: Any) -> bool:
    quiet = _quiet(seen, expected)
    return ("inside_fused", "renamed") in quiet and ("inside_fused", "adjacent") not in quiet


def _weight_missed(seen: Any, expected: Any) -> bool:
    """The per-channel affine weight computed by an op let through, the per-tensor affine ones refused."""
    quiet = _quiet(seen, expected)
    return ("asymmetric_weight", "computed_weight") in quiet and ("asymmetric_weight", "linear") not in quiet


@detects("validate", "affine_only", explains=("test_validate_asymmetric_weight",))
def validate_affine_only(seen: Any, expected: Any) -> bool:
    return _weight_missed(seen, expected)


@detects("validate", "weight_by_name", explains=("test_validate_asymmetric_weight",))
def validate_weight_by_name(seen: Any, expected: Any) -> bool:
    return _weight_missed(seen, expected)


def _only_table_refused(seen: Any, expected: Any) -> bool:
    """Only TableNet (a labelled cat; uint8, int16 and int32 specs) is refused, and every spoiled label is."""
    refused = [graph for graph, r in _accepting(seen, expected).items() if r]
    return refused == ["table_net"] and not _quiet(seen, expected)


@detects("validate", "int8_range_only", explains=("test_validate_accepts",))
def validate_int8_only(seen: Any, expected: Any) -> bool:
    """Only the graph with uint8, int16 and int32 labels is refused, and on its spoiled twins validate stops at
    a correct non-int8 label before the spoiled one."""
    return _only_table_refused(seen, expected) and any(not n for _, n in _named(seen, expected))


@detects("validate", "key_in_args", explains=("test_validate_accepts",))
def validate_key_in_args(seen: Any, expected: Any) -> bool:
    """Only the graph with a labelled cat (its inputs in a list) is refused, every spoiled label named right."""
    return _only_table_refused(seen, expected) and all(n for _, n in _named(seen, expected))


def _range_quiet(seen: Any, expected: Any) -> set[str]:
    return {graph for case, graph in _quiet(seen, expected) if case == "bad_range"}


@detects("validate", "allows_equal", explains=("test_validate_bad_range",))
def validate_allows_equal(seen: Any, expected: Any) -> bool:
    return _range_quiet(seen, expected) == {"empty"}


@detects("validate", "order_only", explains=("test_validate_bad_range",))
def validate_order_only(seen: Any, expected: Any) -> bool:
    quiet = _range_quiet(seen, expected)
    return "empty" not in quiet and len(quiet & {"too_wide", "uint8_negative", "placeholder", "shared_base"}) >= 2


@detects("validate", "call_function_only", explains=("test_validate_bad_range",))
def validate_call_function_only(seen: Any, expected: Any) -> bool:
    return _range_quiet(seen, expected) == {"placeholder"}


def _quiet_only(seen: Any, expected: Any, *spoiled: tuple[str, str]) -> bool:
    """Of the spoiled labels, exactly ``spoiled`` are let through, and no correct one is refused."""
    return _quiet(seen, expected) == set(spoiled) and not any(_accepting(seen, expected).values())


@detects("validate", "skips_none_keys", explains=("test_validate_not_an_input",))
def validate_skips_none_keys(seen: Any, expected: Any) -> bool:
    return _quiet_only(seen, expected, ("not_an_input", "none_spec"))


@detects("validate", "fusion_from_relu", explains=("test_validate_inside_fused",))
def validate_fusion_from_relu(seen: Any, expected: Any) -> bool:
    return _quiet_only(seen, expected, ("inside_fused", "relu_unlabelled"))


@detects("validate", "range_skips_weights", explains=("test_validate_bad_range",))
def validate_range_skips_weights(seen: Any, expected: Any) -> bool:
    return _quiet_only(seen, expected, ("bad_range", "channel_weight"))
