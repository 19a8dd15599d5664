"""Hidden checks of M04-2: bn_survives against what prepare_pt2e really does to each hidden BN.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- "any BN folds" / "no BN folds" → every case mixes BNs that fold and BNs that stay;
- only ``aten.conv2d.default`` folds, or a hand-written list without the transposed convs or the
  ``.padding`` overloads → conv_family: all nine conv ops torchao folds (conv1d/2d/3d with numeric and
  string padding, conv_transpose1d/2d/3d), each straight into a BN;
- "the BN's neighbour in graph order" (``bn.prev``) instead of its input ``bn.args[0]`` → conv_family
  (a sigmoid computed between conv and BN), not_directly_after (a conv right before a relu's BN);
- conv / linear recognised by node name → not_directly_after: inputs and a parameter named conv2d,
  linear, conv, and a graph whose ops were renamed after their modules (``conv`` is a 3-D linear,
  ``linear`` is a conv, ``conv_act`` is a relu);
- walking upstream through relu, pooling, a scalar add or a cat → not_directly_after;
- linear BNs always fold, or the rank of the model input instead of the linear's own input →
  linear_rank (2-D, no bias, flatten → linear, 3-D, 4-D);
- "the rank rule applies to convs too" → conv_family (3-D conv1d and 5-D conv3d fold);
- "a conv / linear output read elsewhere does not fold" → shared_output (torchao 0.18 folds anyway);
- "a predicting function may run the fold on the graph it is handed" → every case checks that the
  graph comes back unchanged (first check).
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect_unchanged, value

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
        raise Fail(f"{len(wrong)} / {total} 個 BN 預測錯了：\n" + "\n".join(wrong))


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
