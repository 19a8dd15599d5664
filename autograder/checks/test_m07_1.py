"""Hidden checks of M07-1: every fake-quantize node of a QAT graph, what it quantizes, and how many instances."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

NOTEBOOK = "M07-1"

WHERE = {
    "conv_bn": "conv → BN → relu 兩次的模型（QAT 圖裡 conv 的 weight 先乘上 BN 的 γ/σ 才進 fake-quant）",
    "computed": "兩個輸入、add 共用一個 fake-quant、forward 裡算出來的 weight（2·w）、activation 加上 buffer",
    "inserted": "手動插了 nn.Identity（名字像 observer）、一個 observer（不是 fake-quant）、名字特別的 fake-quant",
}


def _answers(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("roles"), dict), f"{WHERE[case]}：證據格式不對")
    return result


def compare_roles(seen: Any, expected: Any, case: str) -> None:
    got, want = _answers(seen, case), _answers(expected, case)
    modules = want.get("modules", {})
    extra = [name for name in got["roles"] if name not in want["roles"]]
    if extra:
        described = "、".join(f"{n}（{modules.get(n, '圖上沒有這個 node')}）" for n in extra[:3])
        raise Fail(f"{WHERE[case]}：多了 {described}：只列 module 是 fake-quant（FakeQuantizeBase）的 call_module node")
    missing = [name for name in want["roles"] if name not in got["roles"]]
    if missing:
        described = "、".join(f"{n}（{modules.get(n, '?')}）" for n in missing[:3])
        raise Fail(f"{WHERE[case]}：少了 {described}")
    for name, role in want["roles"].items():
        if got["roles"][name] != role:
            raise Fail(
                f"{WHERE[case]}：{name}（{modules.get(name, '?')}）量化的是 {role}，你的答案是 {got['roles'][name]!r}"
            )


@check("fake_quant_roles", 1, "conv → BN：weight 的 fake-quant 讀的是乘過 γ/σ 的 weight，仍然是 weight")
def test_roles_conv_bn(seen, expected):
    compare_roles(seen, expected, "conv_bn")


@check("fake_quant_roles", 1, "forward 裡算出來的 weight、activation 加上 buffer、add 共用的 fake-quant")
def test_roles_computed(seen, expected):
    compare_roles(seen, expected, "computed")


@check("fake_quant_roles", 1, "只算 fake-quant：名字像 observer 的 Identity、observer 不算，名字特別的 fake-quant 要算")
def test_only_fake_quants(seen, expected):
    compare_roles(seen, expected, "inserted")


@check("fake_quant_roles", 1, "fake_quant_instances：圖上用到的 fake-quant 有幾個不同的實例（共用的只算一次）")
def test_instances(seen, expected):
    for case in ("conv_bn", "computed", "inserted"):
        got, want = _answers(seen, case), _answers(expected, case)
        if got["instances"] != want["instances"]:
            nodes = len(want["roles"])
            raise Fail(
                f"{WHERE[case]}：fake-quant 實例預期 {want['instances']} 個（fake-quant node {nodes} 個），"
                f"你的答案是 {got['instances']}"
            )
