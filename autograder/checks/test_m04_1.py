"""Hidden checks of M04-1: fold_bn against the weight and bias prepare_pt2e folds into the conv.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m04_1.py``); their detectors are at the end of this module.
Each fold calls fold_bn twice on the very same conv_w, conv_b and BN and records which returned tensor the
second call changed (``changed``): a fold that changes its arguments in place folds them twice. The caller's
conv and BN must stay as they were.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.checks.support import Fail, check, detects, raised, value
from selfcheck import diagnosis

RTOL, ATOL = 1e-4, 1e-5


def compare_tensor(got: Any, want: dict[str, Any], what: str) -> None:
    """Same shape, and every value within RTOL / ATOL of the graph's constant."""
    if not isinstance(got, dict) or "shape" not in got or "values" not in got:
        raise Fail(f"{what}：證據格式不對")
    if got["shape"] != want["shape"]:
        raise Fail(f"{what} 的 shape 應該是 {want['shape']}，你的是 {got['shape']}")
    worst, where = 0.0, -1
    for index, (g, w) in enumerate(zip(got["values"], want["values"], strict=True)):
        if not math.isclose(g, w, rel_tol=RTOL, abs_tol=ATOL) and abs(g - w) > worst:
            worst, where = abs(g - w), index
    if where >= 0:
        g, w = got["values"][where], want["values"][where]
        per_channel = max(1, len(want["values"]) // max(1, want["shape"][0] if want["shape"] else 1))
        place = f"output channel {where // per_channel}" + (
            f" 的第 {where % per_channel} 個值" if per_channel > 1 else ""
        )
        raise Fail(f"{what} 和 prepare_pt2e 折出來的常數不同，差最多的是 {place}：應該是 {w:.6g}，你的是 {g:.6g}")


def compare_one(got: Any, want: dict[str, Any]) -> None:
    if not isinstance(got, dict) or "weight" not in got or "bias" not in got:
        raise Fail("證據格式不對")
    conv = want["conv"]
    compare_tensor(got["weight"], want["graph_weight"], f"{conv}：折完的 weight")
    compare_tensor(got["bias"], want["graph_bias"], f"{conv}：折完的 bias")
    changed = got.get("changed")
    if changed != want.get("changed", []):
        names = "、".join(map(str, changed)) if isinstance(changed, list) and changed else "（證據格式不對）"
        raise Fail(
            f"{conv}：用同一組 conv_w、conv_b、bn 再呼叫一次 fold_bn，回傳的 {names} 變了："
            "第一次呼叫就地修改了傳進來的引數。呼叫端的 conv 與 BN 要保持原樣，折完的值要放在新的 tensor 裡"
        )


def compare_fold(seen: dict[str, Any], expected: dict[str, Any], case: str, parts: tuple[str, ...] = ()) -> None:
    got, want = value(seen, case), value(expected, case)
    if not parts:
        compare_one(got, want)
        return
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    for part in parts:
        compare_one(got.get(part), want[part])


@check("fold_bn", 1, "Conv2d 有 bias：折完的 weight 與 bias 和 prepare_pt2e 圖上的常數相同")
def test_conv_with_bias(seen, expected):
    compare_fold(seen, expected, "conv2d_with_bias")


@check("fold_bn", 1, "Conv2d 沒有 bias（conv_b 是 None）：仍要回傳 BN 算出的新 bias")
def test_conv_without_bias(seen, expected):
    compare_fold(seen, expected, "conv2d_without_bias")


@check("fold_bn", 1, "Conv1d + BatchNorm1d 與 Conv3d + BatchNorm3d：weight 的維度數不是 4")
def test_other_ranks(seen, expected):
    compare_fold(seen, expected, "conv1d")
    compare_fold(seen, expected, "conv3d")


@check("fold_bn", 1, "eps 不是預設的 1e-5：用 bn.eps，加在 sqrt 裡面")
def test_other_eps(seen, expected):
    compare_fold(seen, expected, "other_eps")


@check(
    "fold_bn",
    1,
    "BatchNorm2d(affine=False)：bn.weight 與 bn.bias 是 None，當成 1 與 0（conv 有 bias 與沒有 bias 各一次）",
)
def test_not_affine(seen, expected):
    compare_fold(seen, expected, "not_affine", ("with_bias", "without_bias"))


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m04_1.py) --------
# A fold record (one conv + BN) has the student's weight and bias and the graph's; every relation below is
# between the two: which records are right, and by what per-channel factor a wrong weight or bias is off.

ALL = ()
WITHOUT_CONV_BIAS = ("test_conv_without_bias", "test_other_ranks", "test_not_affine")
AFFINE = ("test_conv_with_bias", "test_conv_without_bias", "test_other_ranks", "test_other_eps")
WITH_CONV_BIAS = ("test_conv_with_bias", "test_other_ranks", "test_other_eps", "test_not_affine")
EPS_CASE = "other_eps"
NOT_AFFINE = "not_affine"
NO_BIAS_CASES = ("conv2d_without_bias", "conv3d")  # affine BNs after a conv without a bias


def folds(seen: Any, expected: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    """``(place, got, want)`` for every fold record of the key (``not_affine/with_bias`` for a nested one);
    ``got`` is None where the student's case raised or has no such record."""
    found = []
    for case in diagnosis.cases(expected):
        want = diagnosis.value(expected, case)
        if not isinstance(want, dict):
            continue
        got = diagnosis.value(seen, case)
        parts = {"": want} if "graph_weight" in want else want
        for part, record in parts.items():
            if isinstance(record, dict) and "graph_weight" in record:
                mine = got if not part else (got.get(part) if isinstance(got, dict) else None)
                found.append((f"{case}/{part}" if part else case, mine if isinstance(mine, dict) else None, record))
    return found


def has_conv_bias(want: dict[str, Any]) -> bool:
    return "沒有 bias" not in str(want.get("conv"))


def close(got: Any, want: dict[str, Any]) -> bool:
    """The student's tensor has the graph's shape and values (the checks' tolerance)."""
    return (
        isinstance(got, dict)
        and got.get("shape") == want["shape"]
        and len(got["values"]) == len(want["values"])
        and all(
            math.isclose(g, w, rel_tol=RTOL, abs_tol=ATOL) for g, w in zip(got["values"], want["values"], strict=True)
        )
    )


def right(got: Any, want: dict[str, Any], what: str) -> bool:
    return got is not None and close(got.get(what), want[f"graph_{what}"])


def channel_factors(got: Any, want: dict[str, Any], what: str = "weight") -> list[float] | None:
    """Per output channel, the one number the student's tensor is the graph's times (None when the shapes differ
    or some channel is not the graph's times a single number)."""
    mine, graph = (got or {}).get(what), want[f"graph_{what}"]
    if not isinstance(mine, dict) or mine.get("shape") != graph["shape"] or not graph["shape"]:
        return None
    channels = graph["shape"][0]
    per = len(graph["values"]) // channels
    factors = []
    for c in range(channels):
        pairs = list(
            zip(mine["values"][c * per : (c + 1) * per], graph["values"][c * per : (c + 1) * per], strict=True)
        )
        biggest = max(abs(w) for _, w in pairs)
        ratios = sorted(g / w for g, w in pairs if biggest and abs(w) >= 0.05 * biggest)
        if not ratios:
            return None
        middle = ratios[len(ratios) // 2]
        if ratios[-1] - ratios[0] > 1e-3 * max(abs(middle), 1e-6):
            return None
        factors.append(middle)
    return factors


def input_factors(got: Any, want: dict[str, Any]) -> bool:
    """The weight is the graph's times a factor that changes along the input channels (dim 1) too: within an
    output channel the ratio is not one number, but every output channel varies the same way over dim 1."""
    mine, graph = (got or {}).get("weight"), want["graph_weight"]
    if not isinstance(mine, dict) or mine.get("shape") != graph["shape"] or len(graph["shape"]) < 3:
        return False
    out, inp = graph["shape"][0], graph["shape"][1]
    per = len(graph["values"]) // (out * inp)
    grid = []
    for o in range(out):
        row = []
        for i in range(inp):
            start = (o * inp + i) * per
            pairs = [
                (g, w)
                for g, w in zip(mine["values"][start : start + per], graph["values"][start : start + per], strict=True)
                if abs(w) > 1e-6
            ]
            if not pairs:
                return False
            row.append(sorted(g / w for g, w in pairs)[len(pairs) // 2])
        grid.append(row)
    if all(max(row) - min(row) <= 1e-3 * max(abs(x) for x in row) for row in grid):
        return False  # one number per output channel: not this
    first = grid[0]
    return all(
        all(math.isclose(row[i] * first[0], first[i] * row[0], rel_tol=1e-3, abs_tol=1e-9) for i in range(inp))
        for row in grid
    )


def weights_right(records: list[tuple[str, Any, dict[str, Any]]]) -> bool:
    return all(got is not None and right(got, want, "weight") for _, got, want in records)


def changed_in_place(records: list[tuple[str, Any, dict[str, Any]]]) -> bool:
    """Some fold changed one of fold_bn's arguments (``changed`` not empty)."""
    return any(got is not None and got.get("changed") for _, got, _ in records)


@detects("fold_bn", "mutates_arguments", explains=ALL)
def mutates_arguments(seen: Any, expected: Any) -> bool:
    """Every returned weight and bias right, yet some argument (conv_w, conv_b, the BN's state) changed in place."""
    records = folds(seen, expected)
    answered = [(got, want) for _, got, want in records if got is not None]
    return (
        changed_in_place(records)
        and bool(answered)
        and all(right(got, want, "weight") and right(got, want, "bias") for got, want in answered)
    )


def _errors_on_none(seen: Any, cases: tuple[str, ...], errors: tuple[str, ...]) -> bool:
    return raised(seen, errors, cases=cases, says="NoneType")


@detects("fold_bn", "returns_none_bias", explains=WITHOUT_CONV_BIAS)
def returns_none_bias(seen: Any, expected: Any) -> bool:
    return raised(seen, ("EvidenceError",), says="bias 應該是 torch.Tensor，收到 NoneType")


@detects("fold_bn", "assumes_conv_bias", explains=WITHOUT_CONV_BIAS)
def assumes_conv_bias(seen: Any, expected: Any) -> bool:
    return _errors_on_none(seen, NO_BIAS_CASES, ("TypeError", "AttributeError"))


@detects("fold_bn", "assumes_affine", explains=("test_not_affine",))
def assumes_affine(seen: Any, expected: Any) -> bool:
    return _errors_on_none(seen, (NOT_AFFINE,), ("TypeError", "AttributeError")) and not raised(
        seen, cases=NO_BIAS_CASES
    )


@detects("fold_bn", "rank_hardcoded", explains=("test_other_ranks",))
def rank_hardcoded(seen: Any, expected: Any) -> bool:
    """Right on every Conv2d (4-D weight), wrong (or raised) on a Conv1d or Conv3d."""
    records = folds(seen, expected)
    four = [(p, g, w) for p, g, w in records if len(w["graph_weight"]["shape"]) == 4]
    other = [(p, g, w) for p, g, w in records if len(w["graph_weight"]["shape"]) != 4]
    return bool(four and other) and weights_right(four) and not weights_right(other)


@detects("fold_bn", "scales_input_channels", explains=ALL)
def scales_input_channels(seen: Any, expected: Any) -> bool:
    """The bias right, the weight scaled along dim 1: a broadcast error at dimension 1, factors that vary over
    the input channels, or one common factor (the mean of s) spread over every input channel."""
    records = [(p, g, w) for p, g, w in folds(seen, expected) if len(w["graph_weight"]["shape"]) == 4]
    if raised(seen, ("RuntimeError",), cases=tuple(p.split("/")[0] for p, _, _ in records), says="dimension 1"):
        return True
    answered = [(g, w) for _, g, w in records if g is not None]
    if not answered or not all(right(g, w, "bias") for g, w in answered):
        return False
    if any(input_factors(g, w) for g, w in answered):
        return True
    spread = []
    for g, w in answered:
        factors = channel_factors(g, w)
        if factors is None or right(g, w, "weight"):
            continue
        spread.append(math.isclose(sum(1 / f for f in factors) / len(factors), 1.0, rel_tol=1e-3))
    return bool(spread) and all(spread)


def scale_factors(seen: Any, expected: Any, places: Any) -> list[float] | None:
    """The per-channel factors of the weight on ``places`` (a predicate on the place), all together;
    None when a record there raised or is not the graph's weight times one number per channel."""
    found: list[float] = []
    for place, got, want in folds(seen, expected):
        if not places(place):
            continue
        factors = channel_factors(got, want)
        if factors is None:
            return None
        found += factors
    return found


def _one(x: float, tolerance: float = 1e-3) -> bool:
    return abs(x - 1) <= tolerance


@detects("fold_bn", "gamma_sign_lost", explains=AFFINE)
def gamma_sign_lost(seen: Any, expected: Any) -> bool:
    """Every weight is the graph's times +1 or -1 per channel, some channel -1 (where γ < 0)."""
    factors = scale_factors(seen, expected, lambda place: True)
    return bool(factors) and all(_one(abs(f)) for f in factors) and any(f < 0 for f in factors)


def _eps_only(seen: Any, expected: Any) -> tuple[list[float], list[float]] | None:
    """When everything is right but the BN whose eps is not 1e-5, whose weight is off by a positive factor
    per channel: those factors, and the tiny factors (within the tolerance) where eps is 1e-5."""
    records = folds(seen, expected)
    default = [(p, g, w) for p, g, w in records if not p.startswith(EPS_CASE)]
    odd = [(p, g, w) for p, g, w in records if p.startswith(EPS_CASE)]
    if (
        not default
        or not odd
        or not all(g is not None and right(g, w, "weight") and right(g, w, "bias") for _, g, w in default)
    ):
        return None
    factors = scale_factors(seen, expected, lambda place: place.startswith(EPS_CASE))
    if not factors or all(_one(f, 1e-4) for f in factors) or any(f <= 0 for f in factors):
        return None
    drift = scale_factors(seen, expected, lambda place: not place.startswith(EPS_CASE))
    return factors, drift or []


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 1.0


@detects("fold_bn", "eps_outside_sqrt", explains=("test_other_eps",))
def eps_outside_sqrt(seen: Any, expected: Any) -> bool:
    """sqrt(σ²) + ε: |s| smaller than the graph's on some channel where eps is large (dropping or fixing eps
    only ever makes it larger), or, where eps is 1e-5, smaller on most channels by a few parts in a million
    (sqrt(σ² + 1e-5) < σ + 1e-5 once σ > 0.5)."""
    found = _eps_only(seen, expected)
    if found is None:
        return False
    factors, drift = found
    return min(factors) < 1 - 1e-6 or _median(drift) < 1 - 1e-6


@detects("fold_bn", "eps_not_bn_eps", explains=("test_other_eps",))
def eps_not_bn_eps(seen: Any, expected: Any) -> bool:
    """ε left out or fixed at 1e-5: |s| larger than the graph's on every channel where eps is large, and not
    smaller where eps is 1e-5."""
    found = _eps_only(seen, expected)
    if found is None:
        return False
    factors, drift = found
    return min(factors) > 1 and _median(drift) >= 1 - 1e-6


@detects("fold_bn", "no_sqrt", explains=ALL)
def no_sqrt(seen: Any, expected: Any) -> bool:
    """A consistent wrong s even where γ = 1, β = 0 and eps is the default (affine=False): the weight off by a
    positive factor per channel, and the bias of the conv without a bias off by the same factor."""
    for place, got, want in folds(seen, expected):
        if place != f"{NOT_AFFINE}/without_bias":
            continue
        factors = channel_factors(got, want)
        bias_factors = _bias_factors(got, want)
        return (
            factors is not None
            and bias_factors is not None
            and all(f > 0 for f in factors)
            and not all(_one(f, 1e-4) for f in factors)
            and all(math.isclose(f, b, rel_tol=1e-3) for f, b in zip(factors, bias_factors, strict=True))
        )
    return False


def _bias_factors(got: Any, want: dict[str, Any]) -> list[float] | None:
    mine, graph = (got or {}).get("bias"), want["graph_bias"]
    if not isinstance(mine, dict) or mine.get("shape") != graph["shape"]:
        return None
    if any(abs(w) < 1e-6 for w in graph["values"]):
        return None
    return [g / w for g, w in zip(mine["values"], graph["values"], strict=True)]


def _weight_only(seen: Any, expected: Any) -> list[float] | None:
    """Every bias right, the weights wrong by one factor per output channel: the factors (None otherwise)."""
    records = folds(seen, expected)
    if not records or not all(got is not None and right(got, want, "bias") for _, got, want in records):
        return None
    if weights_right(records):
        return None
    factors = scale_factors(seen, expected, lambda place: True)
    return factors or None


@detects("fold_bn", "weight_divided", explains=ALL)
def weight_divided(seen: Any, expected: Any) -> bool:
    """w / s instead of w · s: off by 1 / s², positive on every channel, also where γ < 0."""
    factors = _weight_only(seen, expected)
    return factors is not None and all(f > 0 for f in factors)


@detects("fold_bn", "weight_not_scaled", explains=ALL)
def weight_not_scaled(seen: Any, expected: Any) -> bool:
    """w unchanged: off by 1 / s, so negative on the channels where γ < 0."""
    factors = _weight_only(seen, expected)
    return factors is not None and any(f < 0 for f in factors)


def _bias_only(seen: Any, expected: Any) -> list[tuple[str, Any, dict[str, Any]]] | None:
    """Every weight right, some bias wrong, nothing raised: the records (None otherwise)."""
    records = folds(seen, expected)
    if not records or not weights_right(records):
        return None
    if all(right(got, want, "bias") for _, got, want in records):
        return None
    return records


def _plain_bias(records: list[tuple[str, Any, dict[str, Any]]]) -> tuple[list[float], list[float]] | None:
    """The student's and the graph's bias where b = 0, γ = 1, β = 0 (affine=False, no conv bias): −μ·s."""
    for place, got, want in records:
        if place == f"{NOT_AFFINE}/without_bias":
            return got["bias"]["values"], want["graph_bias"]["values"]
    return None


@detects("fold_bn", "mean_sign_flipped", explains=ALL)
def mean_sign_flipped(seen: Any, expected: Any) -> bool:
    """Where the new bias is just −μ·s, the student's is +μ·s."""
    records = _bias_only(seen, expected)
    plain = _plain_bias(records) if records else None
    return (
        plain is not None
        and all(math.isclose(g, -w, rel_tol=1e-3, abs_tol=ATOL) for g, w in zip(*plain, strict=True))
        and any(abs(w) > 1e-3 for w in plain[1])
    )


@detects("fold_bn", "mean_not_subtracted", explains=ALL)
def mean_not_subtracted(seen: Any, expected: Any) -> bool:
    """Where the new bias is just −μ·s, the student's is 0; and it is off after a conv with a bias too."""
    records = _bias_only(seen, expected)
    plain = _plain_bias(records) if records else None
    if plain is None or not any(abs(w) > 1e-3 for w in plain[1]) or not all(abs(g) <= ATOL for g in plain[0]):
        return False
    return any(has_conv_bias(want) and not right(got, want, "bias") for _, got, want in records)


@detects("fold_bn", "beta_misplaced", explains=AFFINE)
def beta_misplaced(seen: Any, expected: Any) -> bool:
    """Right wherever β = 0 (affine=False), the bias off on an affine BN."""
    records = _bias_only(seen, expected)
    if not records:
        return False
    plain = [(got, want) for place, got, want in records if place.startswith(NOT_AFFINE)]
    affine = [(got, want) for place, got, want in records if not place.startswith(NOT_AFFINE)]
    return (
        bool(plain)
        and all(right(got, want, "bias") for got, want in plain)
        and any(not right(got, want, "bias") for got, want in affine)
    )


@detects("fold_bn", "conv_bias_not_through_bn", explains=WITH_CONV_BIAS)
def conv_bias_not_through_bn(seen: Any, expected: Any) -> bool:
    """Right after every conv without a bias, the bias off after a conv that has one."""
    records = _bias_only(seen, expected)
    if not records:
        return False
    without = [(got, want) for _, got, want in records if not has_conv_bias(want)]
    with_bias = [(got, want) for _, got, want in records if has_conv_bias(want)]
    return (
        bool(without)
        and all(right(got, want, "bias") for got, want in without)
        and any(not right(got, want, "bias") for got, want in with_bias)
    )
