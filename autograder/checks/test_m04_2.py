"""Hidden checks of M04-2: bn_survives against what prepare_pt2e really does to each hidden BN."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, value

NOTEBOOK = "M04-2"


def word(survives: bool) -> str:
    return "還在圖上" if survives else "被折掉"


def compare_predictions(seen: dict[str, Any], expected: dict[str, Any], case: str) -> None:
    """Every BN of the case: the student's prediction equals what prepare_pt2e did (from the answer key's run)."""
    got, want = value(seen, case), value(expected, case)
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    wrong = []
    for key, record in want.items():
        mine = got.get(key)
        if not isinstance(mine, dict) or "predicted" not in mine:
            raise Fail(f"{record['where']}：沒有收到你的預測")
        if mine["predicted"] is not record["survives"]:
            wrong.append(
                f"{record['where']}：prepare_pt2e 之後{word(record['survives'])}，"
                f"你預測{word(mine['predicted'])}（回傳 {mine['predicted']}）"
            )
    if wrong:
        raise Fail(f"{len(wrong)} / {len(want)} 個 BN 預測錯了：\n" + "\n".join(wrong))


@check(
    "bn_survives",
    1,
    "conv 家族（Conv1d、padding='same'、ConvTranspose2d、Conv3d）後面的 BN；中間隔著別的 node（圖的順序上不相鄰）也一樣折",
)
def test_conv_family(seen, expected):
    compare_predictions(seen, expected, "conv_family")


@check("bn_survives", 1, "linear 後面的 BN：看 linear 的輸入是 2-D 還是更高維")
def test_linear_rank(seen, expected):
    compare_predictions(seen, expected, "linear_rank")


@check(
    "bn_survives",
    1,
    "不是直接接在 conv / linear 後面的 BN（輸入、relu、max_pool2d、add、cat、加純量之後；名字像 conv / linear 的輸入與參數）",
)
def test_not_directly_after(seen, expected):
    compare_predictions(seen, expected, "not_directly_after")


@check("bn_survives", 1, "conv / linear 的輸出還有別的使用者時，BN 照樣被折")
def test_shared_output(seen, expected):
    compare_predictions(seen, expected, "shared_output")
