"""Hidden checks of M04-2: bn_survives against what prepare_pt2e really does to each hidden BN.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m04_2.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import re
from typing import Any

from autograder.checks.support import Fail, check, detects, expect_unchanged, value
from selfcheck import diagnosis

CASES = ("conv_family", "linear_rank", "not_directly_after", "shared_output")


def word(survives: bool) -> str:
    return "還在圖上" if survives else "被折掉"


def compare_predictions(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Every BN of the case: the student's prediction equals what prepare_pt2e did (from the answer key's run)."""
    got, want = value(seen, case), value(expected, case)
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    wrong = []
    for key, record in want.items():
        if key == "changed":
            continue
        mine = got.get(key)
        if not isinstance(mine, dict) or "predicted" not in mine:
            raise Fail(f"{record['where']}：沒有收到你的預測")
        if mine["predicted"] is not record["survives"]:
            wrong.append(
                f"{record['where']}：prepare_pt2e 之後{word(record['survives'])}，"
                f"你預測{word(mine['predicted'])}（回傳 {mine['predicted']}）"
            )
    if wrong:
        total = sum(1 for key in want if key != "changed")
        raise Fail(f"這組 {total} 個 BN 裡，你預測錯了 {len(wrong)} 個：\n" + "\n".join(wrong))


@check(
    "bn_survives",
    1,
    "conv 家族（conv1d／2d／3d、數字與字串 padding、conv_transpose1d／2d／3d）後面的 BN；"
    "中間隔著別的 node（圖的順序上不相鄰）也一樣折；而且不改傳進來的圖",
)
def test_conv_family(seen, expected):
    compare_predictions(seen, expected, "conv_family")
    for case in CASES:
        if "value" in seen.get("cases", {}).get(case, {}):  # a case that stopped fails its own check
            expect_unchanged(value(seen, case).get("changed", {}), "bn_survives")


@check("bn_survives", 1, "linear 後面的 BN：看 linear 的輸入是 2-D 還是更高維")
def test_linear_rank(seen, expected):
    compare_predictions(seen, expected, "linear_rank")


@check(
    "bn_survives",
    1,
    "不是直接接在 conv / linear 後面的 BN（輸入、relu、max_pool2d、add、cat、加純量之後）；"
    "名字和 op 對不上的 node（叫 conv、linear 的輸入、參數，以及依 module 改名的 op）",
)
def test_not_directly_after(seen, expected):
    compare_predictions(seen, expected, "not_directly_after")


@check("bn_survives", 1, "conv / linear 的輸出還有別的 consumer 時，BN 照樣被折")
def test_shared_output(seen, expected):
    compare_predictions(seen, expected, "shared_output")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m04_2.py) --------
# Every BN record says what its input is (``where`` ends with "（輸入是 name：target）"), what prepare_pt2e did
# and what the student predicted; the detectors read which BNs are mispredicted, and what their inputs are.

SOURCE = re.compile(r"（輸入是 (.*?)：(.*?)）$")
REGULAR_CONV = re.compile(r"^aten\.conv[123]d\.")
LINEAR = "aten.linear.default"
SHARED_CASE = "shared_output"


def kind_of_target(target: str) -> str:
    """conv (conv_transpose too), linear, or other (any other op, a placeholder, a get_attr)."""
    if target.startswith("aten.conv"):
        return "conv"
    return "linear" if target == LINEAR else "other"


def kind_of_name(name: str) -> str:
    """What a node's name claims it is."""
    if name.startswith("conv"):
        return "conv"
    return "linear" if name.startswith("linear") else "other"


def batch_norms(seen: Any, expected: Any) -> list[dict[str, Any]]:
    """Every BN of the key's evidence: its case, what prepare_pt2e did, the student's prediction (None when the
    case raised), the name and target of its input, and whether that input (a conv or linear) has a bias."""
    found = []
    for case in diagnosis.cases(expected):
        want, got = diagnosis.value(expected, case), diagnosis.value(seen, case)
        if not isinstance(want, dict):
            continue
        for key, record in want.items():
            if key == "changed" or not isinstance(record, dict):
                continue
            mine = got.get(key) if isinstance(got, dict) else None
            match = SOURCE.search(str(record.get("where", "")))
            name, target = match.groups() if match else ("", "")
            found.append(
                {
                    "case": case,
                    "truth": record.get("survives"),
                    "predicted": mine.get("predicted") if isinstance(mine, dict) else None,
                    "name": name,
                    "target": target,
                    "bias": record.get("input_has_bias"),
                }
            )
    return found


def answered(seen: Any, expected: Any) -> list[dict[str, Any]]:
    return [bn for bn in batch_norms(seen, expected) if isinstance(bn["predicted"], bool)]


def mistakes(seen: Any, expected: Any) -> list[dict[str, Any]]:
    return [bn for bn in answered(seen, expected) if bn["predicted"] is not bn["truth"]]


def misnamed(bn: dict[str, Any]) -> bool:
    """The input's name claims another kind of op than its target."""
    return kind_of_name(bn["name"]) != kind_of_target(bn["target"])


def said_stays(bns: list[dict[str, Any]]) -> bool:
    return bool(bns) and all(bn["predicted"] is True for bn in bns)


@detects("bn_survives", "mutates_graph", explains=("test_conv_family",))
def mutates_graph(seen: Any, expected: Any) -> bool:
    # folding in place adds the folded weights as new constants: the grader refuses to replay that graph
    changed = any(diagnosis.value(seen, case, "changed") for case in diagnosis.cases(seen))
    return changed or "加了新的參數或常數" in diagnosis.refusal(seen)


@detects("bn_survives", "every_bn_folds")
def every_bn_folds(seen: Any, expected: Any) -> bool:
    bns = answered(seen, expected)
    return bool(bns) and all(bn["predicted"] is False for bn in bns) and any(bn["truth"] for bn in bns)


@detects("bn_survives", "no_bn_folds")
def no_bn_folds(seen: Any, expected: Any) -> bool:
    bns = answered(seen, expected)
    return said_stays(bns) and not all(bn["truth"] for bn in bns)


@detects("bn_survives", "rank_rule_for_conv")
def rank_rule_for_conv(seen: Any, expected: Any) -> bool:
    """Every BN after a conv said to stay (a conv's input is never 2-D), a 2-D linear's said to fold."""
    bns = answered(seen, expected)
    convs = [bn for bn in bns if kind_of_target(bn["target"]) == "conv"]
    linears = [bn for bn in bns if kind_of_target(bn["target"]) == "linear"]
    return said_stays(convs) and any(bn["predicted"] is False and bn["truth"] is False for bn in linears)


def _conv_mistakes(seen: Any, expected: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The mistakes on BNs after a conv, and every BN after a conv."""
    convs = [bn for bn in answered(seen, expected) if kind_of_target(bn["target"]) == "conv"]
    return [bn for bn in convs if bn["predicted"] is not bn["truth"]], convs


@detects("bn_survives", "conv2d_only", explains=("test_conv_family",))
def conv2d_only(seen: Any, expected: Any) -> bool:
    """Right after aten.conv2d.default, said to stay after a conv1d or conv3d."""
    wrong, _ = _conv_mistakes(seen, expected)
    return any(bn["target"] in ("aten.conv1d.default", "aten.conv3d.default") for bn in wrong) and not any(
        bn["target"] == "aten.conv2d.default" for bn in wrong
    )


@detects("bn_survives", "transpose_missed", explains=("test_conv_family",))
def transpose_missed(seen: Any, expected: Any) -> bool:
    """Said to stay after a conv_transpose, right after every ordinary conv."""
    wrong, _ = _conv_mistakes(seen, expected)
    return any(bn["target"].startswith("aten.conv_transpose") and bn["predicted"] for bn in wrong) and not any(
        REGULAR_CONV.match(bn["target"]) for bn in wrong
    )


@detects("bn_survives", "padding_overload_missed", explains=("test_conv_family",))
def padding_overload_missed(seen: Any, expected: Any) -> bool:
    """Said to stay after a conv's .padding overload, right after every .default one."""
    wrong, _ = _conv_mistakes(seen, expected)
    return any(bn["target"].endswith(".padding") and bn["predicted"] for bn in wrong) and not any(
        REGULAR_CONV.match(bn["target"]) and bn["target"].endswith(".default") for bn in wrong
    )


@detects("bn_survives", "fold_needs_bias", explains=("test_conv_family", "test_linear_rank"))
def fold_needs_bias(seen: Any, expected: Any) -> bool:
    """Every mistake is a BN said to stay after a conv or linear without a bias; the BNs after one with a bias
    said to fold."""
    bns = answered(seen, expected)
    wrong = [bn for bn in bns if bn["predicted"] is not bn["truth"]]
    return (
        bool(wrong)
        and all(bn["truth"] is False and bn["predicted"] is True and bn["bias"] is False for bn in wrong)
        and any(bn["bias"] is True and bn["truth"] is False and bn["predicted"] is False for bn in bns)
    )


MATMULS = ("aten.mm.default", "aten.addmm.default", "aten.matmul.default")


@detects("bn_survives", "matmul_as_linear", explains=("test_not_directly_after",))
def matmul_as_linear(seen: Any, expected: Any) -> bool:
    """Every mistake is a BN said to fold after mm, addmm or matmul (a weight multiplied, but not aten.linear)."""
    wrong = mistakes(seen, expected)
    return bool(wrong) and all(bn["predicted"] is False and bn["target"] in MATMULS for bn in wrong)


@detects("bn_survives", "linear_shape_not_rank", explains=("test_linear_rank",))
def linear_shape_not_rank(seen: Any, expected: Any) -> bool:
    """Every mistake is a BN said to fold after a linear on 3-D or more (where dim 1 happens to match the
    features), while another such BN is said to stay: decided by comparing sizes, not by the rank."""
    linears = _linear_bns(seen, expected)
    wrong = mistakes(seen, expected)
    return (
        bool(wrong)
        and all(kind_of_target(bn["target"]) == "linear" and bn["truth"] and bn["predicted"] is False for bn in wrong)
        and any(bn["truth"] and bn["predicted"] is True for bn in linears)
    )


def _linear_bns(seen: Any, expected: Any) -> list[dict[str, Any]]:
    return [bn for bn in answered(seen, expected) if kind_of_target(bn["target"]) == "linear"]


@detects("bn_survives", "linear_never_folds")
def linear_never_folds(seen: Any, expected: Any) -> bool:
    """Every BN after a linear said to stay (some folds), none wrong after a conv."""
    linears = _linear_bns(seen, expected)
    wrong, convs = _conv_mistakes(seen, expected)
    return said_stays(linears) and not all(bn["truth"] for bn in linears) and bool(convs) and not wrong


@detects("bn_survives", "linear_ignores_rank")
def linear_ignores_rank(seen: Any, expected: Any) -> bool:
    """Every BN after a linear said to fold, also where the linear's input is 3-D or more."""
    linears = _linear_bns(seen, expected)
    return bool(linears) and all(bn["predicted"] is False for bn in linears) and any(bn["truth"] for bn in linears)


@detects("bn_survives", "rank_of_model_input", explains=("test_linear_rank", "test_not_directly_after"))
def rank_of_model_input(seen: Any, expected: Any) -> bool:
    """Some BNs after a linear that fold said to stay, others right; no mistake after a conv, and not only where
    the linear's output has other users."""
    linears = _linear_bns(seen, expected)
    wrong = [bn for bn in linears if bn["predicted"] is not bn["truth"]]
    folding = [bn for bn in linears if bn["truth"] is False]
    conv_wrong, _ = _conv_mistakes(seen, expected)
    return (
        bool(wrong)
        and all(bn["truth"] is False for bn in wrong)
        and len(wrong) < len(folding)
        and not conv_wrong
        and any(bn["case"] != SHARED_CASE for bn in wrong)
    )


@detects("bn_survives", "found_by_name", explains=("test_not_directly_after",))
def found_by_name(seen: Any, expected: Any) -> bool:
    """Every mistake is on a BN whose input's name claims another kind of op than it is."""
    wrong = mistakes(seen, expected)
    return bool(wrong) and all(misnamed(bn) for bn in wrong)


@detects("bn_survives", "previous_in_graph_order", explains=("test_conv_family", "test_not_directly_after"))
def previous_in_graph_order(seen: Any, expected: Any) -> bool:
    """A BN straight after a conv said to stay where another BN after the same op is said to fold (the node before
    it in graph order is something else), and a BN after a relu or an input said to fold (a conv comes right
    before it in graph order)."""
    bns = answered(seen, expected)
    wrong = [bn for bn in bns if bn["predicted"] is not bn["truth"] and bn["case"] != SHARED_CASE]
    folded_targets = {bn["target"] for bn in bns if bn["predicted"] is False and bn["truth"] is False}
    missed_fold = any(bn["truth"] is False and bn["target"] in folded_targets and not misnamed(bn) for bn in wrong)
    false_fold = any(bn["truth"] is True and kind_of_target(bn["target"]) == "other" for bn in wrong)
    return missed_fold and false_fold


@detects(
    "bn_survives", "looks_past_input", explains=("test_conv_family", "test_not_directly_after", "test_shared_output")
)
def looks_past_input(seen: Any, expected: Any) -> bool:
    """Every mistake is a BN said to fold whose input is an op other than conv or linear (named as what it is)."""
    wrong = mistakes(seen, expected)
    return (
        bool(wrong)
        and all(bn["truth"] is True and bn["predicted"] is False for bn in wrong)
        and all(bn["target"].startswith("aten.") and kind_of_target(bn["target"]) == "other" for bn in wrong)
        and not all(misnamed(bn) for bn in wrong)
    )


@detects("bn_survives", "single_user_required", explains=("test_shared_output",))
def single_user_required(seen: Any, expected: Any) -> bool:
    """Every mistake is a BN said to stay after a conv or linear whose output other ops read too."""
    wrong = mistakes(seen, expected)
    return bool(wrong) and all(bn["case"] == SHARED_CASE and bn["predicted"] is True for bn in wrong)
