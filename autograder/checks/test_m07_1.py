"""Hidden checks of M07-1: every fake-quantize node of a QAT graph, what it quantizes, and how many instances.

What a student who half-understood fake-quant roles could assume, and the hidden case that refutes it:
- "a fake-quant is a module named activation_post_process_N", or "every observer is one":
  ``inserted`` (an Identity named like one, an observer, a fake-quant named otherwise);
- "a weight's fake-quant reads a parameter (get_attr) directly": ``conv_bn`` (weight × γ/σ),
  ``computed`` (2·w);
- "a weight reaches its fake-quant the way the digits graph shows (get_attr, or mul of one)":
  ``operands`` (a transpose of a parameter, cat of two parameters);
- "the tensor to follow upstream is each op's first argument (args[0])", or "its positional
  arguments": ``operands`` (addcmul(shift, gain, x): the activation is the third operand;
  sub(offset, other=h): the activation is a keyword argument);
- "the role follows the fake-quant's class or the consumer's argument position (args[1] of a
  linear is a weight)": ``computed`` (classes), ``operands`` (linear(x, y): y is a model input);
- "instances = fake-quant nodes", or "= fake-quant modules registered on gm": ``computed`` (an
  add shares one instance among three nodes), ``inserted`` (a registered fake-quant no node calls);
- "reading the graph may change it" (e.g. moving it to eval first): every case checks that the
  graph comes back unchanged.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

WHERE = {
    "conv_bn": "conv → BN → relu 兩次的模型（QAT 圖裡 conv 的 weight 先乘上 BN 的 γ/σ 才進 fake-quant）",
    "computed": "兩個輸入、add 共用一個 fake-quant、forward 裡算出來的 weight（2·w）、activation 加上 buffer",
    "inserted": "手動插了 nn.Identity（名字像 observer）、一個 observer（不是 fake-quant）、名字特別的 fake-quant",
    "operands": (
        "activation 是 addcmul 的第三個運算元、sub 的 keyword 引數（other=），weight 經過轉置與 cat，"
        "linear 的 weight 位置放的是模型的第二個輸入"
    ),
}


def _answers(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(isinstance(result, dict) and isinstance(result.get("roles"), dict), f"{WHERE[case]}：證據格式不對")
    return result


def unchanged(got: dict[str, Any], case: str) -> None:
    """The student's functions only read the graph: it must come back as it was handed over."""
    if got.get("changed"):
        raise Fail(
            f"{WHERE[case]}：fake_quant_roles / fake_quant_instances 改了傳進來的圖（{got['changed']}）："
            "它們只該讀圖，notebook 之後還要用同一張圖"
        )


def compare_roles(seen: Any, expected: Any, case: str) -> None:
    got, want = _answers(seen, case), _answers(expected, case)
    unchanged(got, case)
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


@check(
    "fake_quant_roles",
    1,
    "運算元不在 args[0]（第三個運算元、keyword 引數）、weight 經過轉置與 cat、輸入放在 weight 的位置",
)
def test_roles_operands(seen, expected):
    compare_roles(seen, expected, "operands")


@check("fake_quant_roles", 1, "fake_quant_instances：圖上用到的 fake-quant 有幾個不同的實例（共用的只算一次）")
def test_instances(seen, expected):
    for case in ("conv_bn", "computed", "inserted", "operands"):
        got, want = _answers(seen, case), _answers(expected, case)
        unchanged(got, case)
        if got["instances"] != want["instances"]:
            nodes = len(want["roles"])
            raise Fail(
                f"{WHERE[case]}：fake-quant 實例預期 {want['instances']} 個（fake-quant node {nodes} 個），"
                f"你的答案是 {got['instances']}"
            )
