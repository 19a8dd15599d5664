"""Hidden checks of M07-1: every fake-quantize node of a QAT graph, what it quantizes, and how many instances.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m07_1.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, detects, expect, raised, value
from selfcheck.public.m07_1 import answers, flipped, graph_changed, role_flips

WHERE = {
    "conv_bn": "conv → BN → relu 兩次的模型（QAT 圖裡 conv 的 weight 先乘上 BN 的 γ/σ 才進 fake-quant）",
    "computed": "兩個輸入、add 共用一個 fake-quant、forward 裡算出來的 weight（2·w）、activation 加上 buffer",
    "inserted": (
        "手動插了 nn.Identity（名字像 observer）、一個 observer（不是 fake-quant）、名字特別的 fake-quant、"
        "一個 LearnableFakeQuantize（FakeQuantizeBase，但不是 FakeQuantize）"
    ),
    "operands_count": (
        "activation 是 addcmul 的第三個運算元、sub 的 keyword 引數（other=）、weight 經過轉置與 cat 的圖"
        "（這裡只呼叫 fake_quant_instances）"
    ),
    "operands": (
        "activation 是 addcmul 的第三個運算元、sub 的 keyword 引數（other=），weight 經過轉置與 cat，"
        "linear 的 weight 位置放的是模型的第二個輸入"
    ),
}


def _answers(evidence: Any, case: str) -> dict[str, Any]:
    result = value(evidence, case)
    expect(
        isinstance(result, dict) and isinstance(result.get("roles"), dict), f"{WHERE[case]}：收到的結果不是預期的格式"
    )
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
        raise Fail(
            f"{WHERE[case]}：你的答案多了 {described}。只列呼叫 fake-quant module（FakeQuantizeBase）的 call_module node"
        )
    missing = [name for name in want["roles"] if name not in got["roles"]]
    if missing:
        described = "、".join(f"{n}（{modules.get(n, '?')}）" for n in missing[:3])
        raise Fail(f"{WHERE[case]}：你的答案少了 {described}，它們也是 fake-quant")
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
    # the operands graph's count comes from a case that calls fake_quant_instances alone: a fake_quant_roles
    # that raises there is test_roles_operands' to judge, not this count's
    for case in ("conv_bn", "computed", "inserted", "operands_count"):
        got, want = _answers(seen, case), _answers(expected, case)
        unchanged(got, case)
        if got["instances"] != want["instances"]:
            nodes = len(want["roles"])
            raise Fail(
                f"{WHERE[case]}：fake-quant 實例應該有 {want['instances']} 個（fake-quant node 有 {nodes} 個），"
                f"你的答案是 {got['instances']}"
            )


# --- what a wrong answer probably believed (the record: selfcheck/public/m07_1.py) ----------------------

ROLE_CHECKS = ("test_roles_conv_bn", "test_roles_computed", "test_only_fake_quants", "test_roles_operands")
OTHER_CASES = ("conv_bn", "computed", "inserted")


def _listed(seen: Any, expected: Any, case: str) -> tuple[list[str], list[str], dict[str, str]]:
    """The fake-quants the student lists and the key does not, those the key lists and the student does not,
    and every call_module node's module class."""
    got, want = answers(seen, case).get("roles", {}), answers(expected, case).get("roles", {})
    modules = answers(expected, case).get("modules", {})
    return [n for n in got if n not in want], [n for n in want if n not in got], modules


@detects("fake_quant_roles", "changes_graph")
def roles_change_graph(seen: Any, expected: Any) -> bool:
    return graph_changed(seen, expected)


@detects("fake_quant_roles", "found_by_name", explains=("test_only_fake_quants", "test_instances"))
def roles_found_by_name(seen: Any, expected: Any) -> bool:
    """A module that is no fake-quant nor observer listed (an Identity named like one), or a fake-quant with
    another kind of name left out."""
    extra, missing, modules = _listed(seen, expected, "inserted")
    lookalike = any("Observer" not in modules.get(name, "Observer") for name in extra)
    renamed = any(not name.startswith("activation_post_process") for name in missing)
    return lookalike or renamed


@detects("fake_quant_roles", "fake_quantize_class", explains=("test_only_fake_quants", "test_instances"))
def roles_fake_quantize_class(seen: Any, expected: Any) -> bool:
    """Only the fake-quants that are no FakeQuantize (a LearnableFakeQuantize) left out, nothing extra."""
    extra, missing, modules = _listed(seen, expected, "inserted")
    return bool(missing) and not extra and all(modules.get(name) == "LearnableFakeQuantize" for name in missing)


@detects("fake_quant_roles", "observers_too", explains=("test_only_fake_quants", "test_instances"))
def roles_observers_too(seen: Any, expected: Any) -> bool:
    extra, missing, modules = _listed(seen, expected, "inserted")
    return bool(extra) and not missing and all("Observer" in modules.get(name, "") for name in extra)


@detects("fake_quant_roles", "by_class", explains=ROLE_CHECKS)
def roles_by_class(seen: Any, expected: Any) -> bool:
    """Every answer is "weight" exactly for the fake-quants of the weight's class, and some answer is wrong."""
    if not role_flips(seen, expected):
        return False
    for case in expected.get("cases", {}):
        got, modules = answers(seen, case).get("roles", {}), answers(expected, case).get("modules", {})
        for name, role in got.items():
            weight_class = modules.get(name) == "FakeQuantize"
            if (role == "weight") != weight_class:
                return False
    return True


@detects("fake_quant_roles", "direct_get_attr_only", explains=ROLE_CHECKS)
def roles_direct_get_attr(seen: Any, expected: Any) -> bool:
    """Weights scaled by BN's γ/σ (and other computed weights) answered as activations; no activation as a weight."""
    return flipped(seen, expected, "weight", "conv_bn") > 0 and flipped(seen, expected, "activation") == 0


@detects("fake_quant_roles", "only_inputs_are_activations", explains=ROLE_CHECKS)
def roles_only_inputs(seen: Any, expected: Any) -> bool:
    """Activations deeper in an ordinary conv → BN network answered as weights; no weight as an activation."""
    return flipped(seen, expected, "activation", "conv_bn") > 0 and flipped(seen, expected, "weight") == 0


@detects("fake_quant_roles", "digits_shapes", explains=ROLE_CHECKS)
def roles_digits_shapes(seen: Any, expected: Any) -> bool:
    """Weights the digits graph shows (a parameter, a parameter × γ/σ) right; weights that reach their fake-quant
    another way (a transpose, a cat, through an inserted module) answered as activations."""
    return (
        flipped(seen, expected, "weight", "conv_bn") == 0
        and flipped(seen, expected, "weight") > 0
        and flipped(seen, expected, "activation") == 0
    )


def _operand_activations_lost(seen: Any, expected: Any) -> int:
    """Activations of the operands case answered as weights, when the other cases and every weight are right."""
    if role_flips(seen, expected, *OTHER_CASES) or flipped(seen, expected, "weight", "operands"):
        return 0
    return flipped(seen, expected, "activation", "operands")


@detects("fake_quant_roles", "args0_only", explains=("test_roles_operands",))
def roles_args0_only(seen: Any, expected: Any) -> bool:
    """Following args[0] crashes on cat's list, or loses the activation wherever a constant comes first (addcmul,
    sub) and all the way downstream: most of that graph's activations."""
    crashed = raised(seen, ("AttributeError", "TypeError"), cases=("operands",), says="list")
    activations = sum(1 for role in answers(expected, "operands").get("roles", {}).values() if role == "activation")
    return crashed or 2 * _operand_activations_lost(seen, expected) > activations


@detects("fake_quant_roles", "positional_only", explains=("test_roles_operands",))
def roles_positional_only(seen: Any, expected: Any) -> bool:
    """Only the activation reached through a keyword argument (and what follows it) lost: a few of that graph's
    activations."""
    activations = sum(1 for role in answers(expected, "operands").get("roles", {}).values() if role == "activation")
    lost = _operand_activations_lost(seen, expected)
    return 0 < lost and 2 * lost <= activations


@detects("fake_quant_roles", "by_consumer_position", explains=ROLE_CHECKS)
def roles_by_consumer_position(seen: Any, expected: Any) -> bool:
    """Wrong both ways (a constant used by an add as an activation, a model input in a weight's position as a
    weight), while the conv → BN network's roles are right."""
    return (
        not role_flips(seen, expected, "conv_bn")
        and flipped(seen, expected, "weight") > 0
        and flipped(seen, expected, "activation") > 0
    )


def _instances(evidence: Any, case: str) -> Any:
    return answers(evidence, case).get("instances")


@detects("fake_quant_roles", "counts_nodes", explains=("test_instances",))
def instances_count_nodes(seen: Any, expected: Any) -> bool:
    """Where fake-quant nodes share an instance, the count is the number of nodes."""
    for case in expected.get("cases", {}):
        nodes = len(answers(expected, case).get("roles", {}))
        want = _instances(expected, case)
        if isinstance(want, int) and want < nodes and _instances(seen, case) == nodes:
            return True
    return False


@detects("fake_quant_roles", "counts_registered_modules", explains=("test_instances",))
def instances_count_registered(seen: Any, expected: Any) -> bool:
    """Only the graph with a registered fake-quant no node calls is off (by more), with every fake-quant listed."""
    got, want = _instances(seen, "inserted"), _instances(expected, "inserted")
    others_right = all(_instances(seen, case) == _instances(expected, case) for case in ("conv_bn", "computed"))
    extra, missing, _ = _listed(seen, expected, "inserted")
    return isinstance(got, int) and isinstance(want, int) and got > want and others_right and not extra and not missing
