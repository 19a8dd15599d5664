"""Public cases of M04-1 BN 折進 conv (fold_bn) on the chapter's own models.

Each case folds a BN of a chapter model with prepare_pt2e (no labels: only the fold
happens) and compares the student's ``fold_bn`` with the constants on the graph. The
evidence is canonical: the shapes returned, and the output channels whose weight or bias
differ from the graph's (empty when right), so any correct way of computing the fold gives
the same data.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "fold_bn：把 BN 折進 conv 的 weight 與 bias"

RTOL, ATOL = 1e-4, 1e-5


NEGATIVE_GAMMA = (1,)
"""The output channels whose γ is negative in every affine BN of the public cases."""


def trained_like(model: nn.Module, seed: int) -> nn.Module:
    """Every BN gets running mean and variance away from the defaults, and, when affine, γ and β too (γ negative
    on the channels ``NEGATIVE_GAMMA``); eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                n = bn.num_features
                gamma = torch.rand(n, generator=generator) + 0.5
                beta = torch.rand(n, generator=generator) - 0.5
                bn.running_mean.copy_(torch.rand(n, generator=generator) * 2 - 1)
                bn.running_var.copy_(torch.rand(n, generator=generator) * 1.5 + 0.5)
                if bn.affine:
                    gamma[list(NEGATIVE_GAMMA)] *= -1
                    bn.weight.copy_(gamma)
                    bn.bias.copy_(beta)
    return model.eval()


def graph_constants(
    model: nn.Module, seed: int, conv: str, shape: tuple[int, ...] = (2, 3, 16, 16)
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias that prepare_pt2e folded into the conv node called ``conv``."""
    return graph_folds(model, seed, (conv,), shape)[conv]


def graph_folds(
    model: nn.Module, seed: int, convs: tuple[str, ...], shape: tuple[int, ...] = (2, 3, 16, 16)
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The weight and bias that prepare_pt2e folded into each conv node named in ``convs`` (one export)."""
    from common.pt2e import Quantizer, export_module, prepare_pt2e

    class NoLabels(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    folded = prepare_pt2e(export_module(model, seeded_inputs(seed, shape)), NoLabels())
    found = {}
    for node in folded.graph.nodes:
        if node.name in convs:
            weight, bias = node.args[1], node.args[2]
            found[node.name] = (
                folded.get_parameter(weight.target).detach(),
                folded.get_parameter(bias.target).detach(),
            )
    return found


def _tensor(value: Any, what: str) -> torch.Tensor:
    if type(value) not in (torch.Tensor, nn.Parameter):
        raise EvidenceError(f"{what} 應該是 torch.Tensor，收到 {type(value).__name__}")
    tensor = torch.Tensor.detach(value)
    if not tensor.is_floating_point():
        raise EvidenceError(f"{what} 的 dtype {tensor.dtype} 不是浮點數")
    return tensor


def channels_off(got: torch.Tensor, want: torch.Tensor) -> list[int]:
    """The output channels (first dimension) where ``got`` is not within RTOL / ATOL of ``want``."""
    if tuple(got.shape) != tuple(want.shape):
        return list(range(want.shape[0]))
    close = torch.isclose(got.to(torch.float64), want.to(torch.float64), rtol=RTOL, atol=ATOL)
    return [c for c in range(want.shape[0]) if not bool(close[c].all())]


def channel_factors(got: torch.Tensor, want: torch.Tensor) -> list[float | None] | None:
    """Per output channel, the one number ``got`` is ``want`` times (4 significant digits): 1.0 where the channel
    is right, None where it is not one number times the graph's; None for the whole when the shapes differ.
    Canonical: every right fold gives 1.0 everywhere."""
    if tuple(got.shape) != tuple(want.shape) or got.dim() == 0:
        return None
    off = set(channels_off(got, want))
    mine, graph = got.to(torch.float64).reshape(got.shape[0], -1), want.to(torch.float64).reshape(want.shape[0], -1)
    factors: list[float | None] = []
    for c in range(want.shape[0]):
        if c not in off:
            factors.append(1.0)
            continue
        biggest = float(graph[c].abs().max())
        keep = graph[c].abs() >= 0.05 * biggest if biggest > ATOL else None
        if keep is None:
            factors.append(None)
            continue
        ratios = (mine[c][keep] / graph[c][keep]).sort().values
        middle = float(ratios[len(ratios) // 2])
        spread = float(ratios[-1] - ratios[0])
        finite = bool(torch.isfinite(ratios).all())
        factors.append(float(f"{middle:.4g}") if finite and spread <= 1e-3 * max(abs(middle), 1e-6) else None)
    return factors


BN_STATE = ("weight", "bias", "running_mean", "running_var")


def judge_fold(
    ns: Namespace,
    model: nn.Module,
    conv: nn.Module,
    bn: nn.Module,
    node: str,
    seed: int,
    shape: tuple[int, ...] = (2, 3, 16, 16),
    graph: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """The student's fold of ``conv`` and ``bn`` against the graph's constants: shapes, the channels that differ,
    per channel by what factor (1.0 where right), and which arguments the call changed in place."""
    graph_weight, graph_bias = graph if graph is not None else graph_constants(model, seed, node, shape)
    conv_w = conv.weight.detach().clone()
    conv_b = conv.bias.detach().clone() if conv.bias is not None else None
    before = {
        "conv_w": conv_w.clone(),
        "conv_b": conv_b.clone() if conv_b is not None else None,
        "bn": [getattr(bn, name).detach().clone() for name in BN_STATE if getattr(bn, name) is not None],
    }
    result = ns["fold_bn"](conv_w, conv_b, bn)
    if type(result) not in (tuple, list) or len(result) != 2:
        raise EvidenceError(f"fold_bn 應該回傳 (weight, bias) 兩個 tensor，收到 {type(result).__name__}")
    weight, bias = _tensor(result[0], "回傳的 weight"), _tensor(result[1], "回傳的 bias")
    after = {
        "conv_w": conv_w,
        "conv_b": conv_b,
        "bn": [getattr(bn, name).detach() for name in BN_STATE if getattr(bn, name) is not None],
    }
    changed = [what for what in ("conv_w", "conv_b", "bn") if not _same_tensors(before[what], after[what])]
    return {
        "weight_shape": list(weight.shape),
        "bias_shape": list(bias.shape),
        "weight_channels_off": channels_off(weight, graph_weight),
        "bias_channels_off": channels_off(bias, graph_bias),
        "weight_factors": channel_factors(weight, graph_weight),
        "bias_factors": channel_factors(bias, graph_bias),
        "arguments_changed": changed,
    }


def _same_tensors(before: Any, after: Any) -> bool:
    if before is None or after is None:
        return before is None and after is None
    if isinstance(before, list):
        return len(before) == len(after) and all(_same_tensors(b, a) for b, a in zip(before, after, strict=True))
    return tuple(before.shape) == tuple(after.shape) and bool(torch.equal(before, after))


def residual_conv1(ns: Namespace, seed: int) -> Any:
    """residual's conv1 (no bias) and bn1: the graph's conv1_weight and conv1_weight_bias."""
    from common.models import get_model

    model = trained_like(get_model("residual"), seed)
    return judge_fold(ns, model, model.conv1, model.bn1, "conv2d", seed)


def conv_bn_relu(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu's conv (with a bias) and bn: the graph's conv_weight and conv_bias."""
    from common.models import get_model

    model = trained_like(get_model("conv_bn_relu"), seed)
    return judge_fold(ns, model, model.conv, model.bn, "conv2d", seed)


class Conv1dBn(nn.Module):
    """On a (batch, 3, length) input, two Conv1d → BatchNorm1d branches: a conv with a bias and a BN whose eps is
    0.1 (an eps that matters), and a conv without a bias and a BN without γ and β (affine=False)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.bn = nn.BatchNorm1d(4, eps=0.1)
        self.plain_conv = nn.Conv1d(3, 4, 3, bias=False)
        self.plain_bn = nn.BatchNorm1d(4, affine=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.bn(self.conv(x)), self.plain_bn(self.plain_conv(x))


def conv1d(ns: Namespace, seed: int) -> Any:
    """Two Conv1d folds (3-D weights) from one graph: a BatchNorm1d with eps=0.1 and small variances after a conv
    with a bias (``eps``), and a BatchNorm1d(affine=False) after a conv without one (``affine_false``: γ = 1,
    β = 0, so the new bias is −μ·s alone)."""
    model = trained_like(Conv1dBn(), seed)
    with torch.no_grad():
        model.bn.running_var.mul_(0.2)
    folds = graph_folds(model, seed, ("conv1d", "conv1d_1"), (2, 3, 10))
    return {
        "eps": judge_fold(ns, model, model.conv, model.bn, "conv1d", seed, graph=folds["conv1d"]),
        "affine_false": judge_fold(
            ns, model, model.plain_conv, model.plain_bn, "conv1d_1", seed, graph=folds["conv1d_1"]
        ),
    }


# --- where the chapter teaches it ----------------------------------------------------------------

FORMULA = Section("M04-1 | BN 折進 conv：prepare_pt2e 在標註之前做的事")
WHAT_IT_FOLDS_TO = Section("B. 折成什麼")
RULES = Section("練習 1：fold_bn（5 分）")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------

CONV2D_CASES = ("residual_conv1", "conv_bn_relu")
EPS = ("conv1d", "eps")
AFFINE_FALSE = ("conv1d", "affine_false")
AFFINE = (("residual_conv1",), ("conv_bn_relu",), EPS)
"""The folds whose BN has γ and β (γ negative on ``NEGATIVE_GAMMA``)."""
FOLDS = (*AFFINE, AFFINE_FALSE)
CONV_BIAS = (("conv_bn_relu",), EPS)
"""The folds whose conv has a bias."""


def _record(evidence: Any, place: tuple[str, ...]) -> dict[str, Any] | None:
    found = diagnosis.value(evidence, *place)
    return found if isinstance(found, dict) else None


def _off(evidence: Any, case: str | tuple[str, ...], what: str) -> list[Any] | None:
    place = (case,) if isinstance(case, str) else case
    found = diagnosis.at(_record(evidence, place), f"{what}_channels_off")
    return found if isinstance(found, list) else None


def _right(evidence: Any, case: str | tuple[str, ...], what: str) -> bool:
    return _off(evidence, case, what) == []


def _wrong(evidence: Any, case: str | tuple[str, ...], what: str) -> bool:
    return bool(_off(evidence, case, what))


def _factors(evidence: Any, place: tuple[str, ...], what: str) -> list[float] | None:
    """The per-channel factors of a fold's weight or bias, None unless every channel is one number times the graph's."""
    found = diagnosis.at(_record(evidence, place), f"{what}_factors")
    if not isinstance(found, list) or not found or not all(type(f) in (int, float) for f in found):
        return None
    return [float(f) for f in found]


def _near(x: float, target: float, tolerance: float = 1e-3) -> bool:
    return abs(x - target) <= tolerance * max(1.0, abs(target))


def _none_error(seen: Any, case: str) -> bool:
    return diagnosis.error(seen, case) is not None and "NoneType" in diagnosis.error_message(seen, case)


def _returns_none_bias(seen: Any, expected: Any) -> bool:
    return diagnosis.error(seen, "residual_conv1") == "EvidenceError" and "NoneType" in diagnosis.error_message(
        seen, "residual_conv1"
    )


def _crashes_without_conv_bias(seen: Any, expected: Any) -> bool:
    return _none_error(seen, "residual_conv1") and diagnosis.error(seen, "residual_conv1") != "EvidenceError"


def _crashes_without_affine(seen: Any, expected: Any) -> bool:
    """Right on the Conv2d folds (affine BNs), a crash on None only in the case with a BatchNorm1d(affine=False)."""
    return (
        _none_error(seen, "conv1d")
        and diagnosis.error(seen, "conv1d") != "EvidenceError"
        and all(_right(seen, case, what) for case in CONV2D_CASES for what in ("weight", "bias"))
    )


def _rank_hardcoded(seen: Any, expected: Any) -> bool:
    conv2d_right = all(_right(seen, case, "weight") for case in CONV2D_CASES)
    shape = diagnosis.value(seen, *EPS, "weight_shape")
    wrong_shape = shape is not None and shape != diagnosis.value(expected, *EPS, "weight_shape")
    return conv2d_right and (wrong_shape or diagnosis.error(seen, "conv1d") == "RuntimeError")


def _input_channels(seen: Any, expected: Any) -> bool:
    """A broadcast error at dimension 1, or, with every bias right, each output channel's weight off by a factor
    whose reciprocals average to 1: one common s (its mean) spread over the input channels."""
    if any(
        diagnosis.error(seen, case) == "RuntimeError" and "dimension 1" in diagnosis.error_message(seen, case)
        for case in CONV2D_CASES
    ):
        return True
    if not all(_right(seen, case, "bias") for case in CONV2D_CASES):
        return False
    spread = []
    for case in CONV2D_CASES:
        factors = _factors(seen, (case,), "weight")
        if factors is None or not _wrong(seen, case, "weight") or any(f == 0 for f in factors):
            return False
        inverse = [1 / f for f in factors]  # s[c] / the one s spread over the input channels: they average to 1
        spread.append(abs(sum(inverse) - len(inverse)) <= 1e-3 * sum(abs(x) for x in inverse))
    return all(spread)


def _gamma_sign_lost(seen: Any, expected: Any) -> bool:
    """On every affine fold, the weight is the graph's times −1 exactly where γ < 0 and right elsewhere."""
    for place in AFFINE:
        factors = _factors(seen, place, "weight")
        if factors is None:
            return False
        if not all(_near(f, -1.0 if c in NEGATIVE_GAMMA else 1.0) for c, f in enumerate(factors)):
            return False
    return True


def _eps_only(seen: Any, expected: Any) -> list[float] | None:
    """Right where eps is the default 1e-5, the weight wrong (shape right) where it is 0.1: its per-channel factors
    (positive), None otherwise."""
    default_right = all(_right(seen, case, what) for case in CONV2D_CASES for what in ("weight", "bias"))
    shape = diagnosis.value(seen, *EPS, "weight_shape")
    if not (default_right and shape == diagnosis.value(expected, *EPS, "weight_shape") and _wrong(seen, EPS, "weight")):
        return None
    factors = _factors(seen, EPS, "weight")
    return factors if factors and all(f > 0 for f in factors) else None


def _eps_too_small(seen: Any, expected: Any) -> bool:
    """eps left out or fixed at 1e-5: |s| larger than the graph's on every channel where eps is 0.1."""
    factors = _eps_only(seen, expected)
    return factors is not None and all(f > 1 for f in factors)


def _eps_outside(seen: Any, expected: Any) -> bool:
    """sqrt(σ²) + ε: |s| smaller than the graph's on some channel where eps is 0.1 (dropping eps only makes it larger)."""
    factors = _eps_only(seen, expected)
    return factors is not None and min(factors) < 1


def _scale_wrong(seen: Any, expected: Any) -> bool:
    """Weight and bias both off on the Conv2d cases (eps at its default), the weight by a positive factor on every
    channel: the size of s itself, not its sign."""
    return all(
        _wrong(seen, case, "weight")
        and _wrong(seen, case, "bias")
        and all(f > 0 for f in _factors(seen, (case,), "weight") or [0.0])
        for case in CONV2D_CASES
    )


def _weight_only(seen: Any, expected: Any) -> list[float] | None:
    """Every bias right and the Conv2d weights wrong by one factor per output channel: those factors."""
    if not all(_right(seen, case, "bias") for case in CONV2D_CASES):
        return None
    found: list[float] = []
    for case in CONV2D_CASES:
        factors = _factors(seen, (case,), "weight")
        if factors is None or not _wrong(seen, case, "weight"):
            return None
        found += factors
    return found


def _weight_unscaled(seen: Any, expected: Any) -> bool:
    """w unchanged: off by 1 / s, so negative on the channels where γ < 0."""
    factors = _weight_only(seen, expected)
    return factors is not None and any(f < 0 for f in factors)


def _weight_divided(seen: Any, expected: Any) -> bool:
    """w / s: off by 1 / s², positive on every channel, also where γ < 0."""
    factors = _weight_only(seen, expected)
    return factors is not None and all(f > 0 for f in factors)


def _bias_only(seen: Any, expected: Any) -> bool:
    """Every weight right, some bias wrong (nothing raised)."""
    return all(_right(seen, place, "weight") for place in FOLDS) and any(_wrong(seen, place, "bias") for place in FOLDS)


def _mean_flipped(seen: Any, expected: Any) -> bool:
    """Where the new bias is −μ·s alone (affine=False, no conv bias), the student's is +μ·s."""
    factors = _factors(seen, AFFINE_FALSE, "bias")
    return _bias_only(seen, expected) and factors is not None and all(_near(f, -1.0) for f in factors)


def _mean_missing(seen: Any, expected: Any) -> bool:
    """Where the new bias is −μ·s alone, the student's is 0; and it is off after a conv with a bias too."""
    factors = _factors(seen, AFFINE_FALSE, "bias")
    return (
        _bias_only(seen, expected)
        and factors is not None
        and all(abs(f) <= 1e-3 for f in factors)
        and any(_wrong(seen, place, "bias") for place in CONV_BIAS)
    )


def _beta_misplaced(seen: Any, expected: Any) -> bool:
    """Right where β = 0 (affine=False), the bias off on an affine BN after a conv without a bias."""
    return _bias_only(seen, expected) and _right(seen, AFFINE_FALSE, "bias") and _wrong(seen, "residual_conv1", "bias")


def _conv_bias_only(seen: Any, expected: Any) -> bool:
    """Right after every conv without a bias, the bias off after conv_bn_relu's conv (which has one)."""
    return (
        _bias_only(seen, expected)
        and _right(seen, "residual_conv1", "bias")
        and _right(seen, AFFINE_FALSE, "bias")
        and _wrong(seen, "conv_bn_relu", "bias")
    )


def _mutates(seen: Any, expected: Any) -> bool:
    """Every fold right, yet some call changed conv_w, conv_b or the BN in place."""
    records = [_record(seen, place) for place in FOLDS]
    return all(
        record is not None and _right(seen, place, "weight") and _right(seen, place, "bias")
        for place, record in zip(FOLDS, records, strict=True)
    ) and any(isinstance(r.get("arguments_changed"), list) and r["arguments_changed"] for r in records if r)


# --- practice after a mistake (issue 50): one idea each, on BatchNorm layers of their own -------------------


def _practice_bns() -> list[tuple[str, nn.Module]]:
    """A BatchNorm2d with a negative γ, a variance near 0 and an ε of its own; a BatchNorm1d without γ and β."""
    affine = nn.BatchNorm2d(3, eps=1e-3).eval()
    with torch.no_grad():
        affine.weight.copy_(torch.tensor([-2.0, 0.5, 1.0]))
        affine.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
        affine.running_mean.copy_(torch.tensor([1.0, -1.0, 0.5]))
        affine.running_var.copy_(torch.tensor([4.0, 0.25, 1e-6]))
    plain = nn.BatchNorm1d(2, affine=False).eval()
    with torch.no_grad():
        plain.running_mean.copy_(torch.tensor([2.0, -3.0]))
        plain.running_var.copy_(torch.tensor([9.0, 16.0]))
    return [("BatchNorm2d(3, eps=1e-3)，γ = [-2, 0.5, 1]", affine), ("BatchNorm1d(2, affine=False)", plain)]


def _reference_scale(bn: nn.Module) -> torch.Tensor:
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)
    return gamma.detach() / torch.sqrt(bn.running_var + bn.eps)


def _compare(what: str, got: Any, want: torch.Tensor) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f"{what}：應該是形狀 {tuple(want.shape)} 的 tensor，你的是 {shape}"
    if not torch.allclose(got.detach().float(), want, rtol=1e-4, atol=1e-6):
        return f"{what}：應該是 {[round(v, 4) for v in want.tolist()]}，你的是 {[round(v, 4) for v in got.detach().float().tolist()]}"
    return None


def _check_bn_scale(bn_scale: Any) -> list[str]:
    problems = []
    for title, bn in _practice_bns():
        found = _compare(title, bn_scale(bn), _reference_scale(bn))
        if found:
            problems.append(found)
    return problems


BN_SCALE = Practice(
    "bn_scale",
    "寫 bn_scale(bn)：回傳 BN 對每個 channel 乘上的倍數 s（一個 tensor，每個 channel 一個值）。"
    "檢查用一個 γ 有負數、variance 幾乎是 0、ε 不是預設值的 BatchNorm2d，和一個沒有 γ、β 的 BatchNorm1d。",
    "import torch\n\n\ndef bn_scale(bn):\n    raise NotImplementedError()\n",
    _check_bn_scale,
    "BN 的公式是 γ · (x − μ) / sqrt(σ² + ε) + β：乘在 x 上的是 γ / sqrt(σ² + ε)。ε 在根號裡面，用的是 bn.eps；"
    "γ 的正負號要留著；affine=False 的 BN 沒有 γ（bn.weight 是 None），當成 1。",
    "import torch\n\n\n"
    "def bn_scale(bn):\n"
    "    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_var)\n"
    "    return gamma.detach() / torch.sqrt(bn.running_var + bn.eps)\n",
    "variance 接近 0 的 channel 最能看出 ε 放在哪裡：sqrt(1e-6 + 1e-3) 和 sqrt(1e-6) + 1e-3 差了好幾倍。",
)


def _check_folded_bias(folded_bias: Any) -> list[str]:
    problems = []
    for title, bn in _practice_bns():
        scale = _reference_scale(bn)
        channels = scale.shape[0]
        beta = bn.bias.detach() if bn.bias is not None else torch.zeros(channels)
        for which, conv_b in (("conv 有 bias", torch.linspace(-0.5, 0.5, channels)), ("conv 沒有 bias", None)):
            base = conv_b if conv_b is not None else torch.zeros(channels)
            want = (base - bn.running_mean) * scale + beta
            found = _compare(f"{title}，{which}", folded_bias(conv_b, bn, scale.clone()), want)
            if found:
                problems.append(found)
    return problems


FOLDED_BIAS = Practice(
    "folded_bias",
    "寫 folded_bias(conv_b, bn, s)：conv 的 bias 經過 BN 以後變成多少？s 是 bn_scale(bn)（已經算好給你），"
    "conv_b 可能是 None（conv 沒有 bias）。回傳每個 channel 一個值的 tensor。",
    "import torch\n\n\ndef folded_bias(conv_b, bn, s):\n    raise NotImplementedError()\n",
    _check_folded_bias,
    "把 conv 的輸出 y = W·x + b 代進 BN：γ · (y − μ) / sqrt(σ² + ε) + β = s · W·x + s · (b − μ) + β。"
    "新 bias 是 s · (b − μ) + β：先減 μ 再乘 s，β 最後原封不動加上；b 是 None 時當成 0。",
    "import torch\n\n\n"
    "def folded_bias(conv_b, bn, s):\n"
    "    b = conv_b if conv_b is not None else torch.zeros_like(bn.running_mean)\n"
    "    beta = bn.bias.detach() if bn.bias is not None else torch.zeros_like(bn.running_mean)\n"
    "    return (b - bn.running_mean) * s + beta\n",
    "conv 沒有 bias 時，折完也一定要有 bias：BN 的平移 −s·μ + β 要有地方放。",
)


def _weights_of_every_rank() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(title, weight, s): a Linear's 2-D weight (in = out), a Conv1d's 3-D one (in = out), a Conv2d's 4-D one
    (in ≠ out) and a Conv3d's 5-D one (in ≠ out); small integers, so every right answer is exact."""
    found = []
    for title, shape in (
        ("Linear(3, 3) 的 2-D weight", (3, 3)),
        ("Conv1d(2, 2, 3) 的 3-D weight", (2, 2, 3)),
        ("Conv2d(3, 2, 1) 的 4-D weight", (2, 3, 1, 1)),
        ("Conv3d(3, 2, (1, 2, 2)) 的 5-D weight", (2, 3, 1, 2, 2)),
    ):
        count = 1
        for size in shape:
            count *= size
        weight = (torch.arange(count, dtype=torch.float32) % 5 + 1).reshape(shape)
        scale = torch.tensor([2.0, -0.5, 3.0][: shape[0]])
        found.append((f"{title}（形狀 {shape}）", weight, scale))
    return found


def _per_channel(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``weight`` with output channel c times ``scale[c]``."""
    return torch.stack([weight[c] * scale[c] for c in range(weight.shape[0])])


def _channels_differ(title: str, got: Any, want: torch.Tensor) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"{title}：應該回傳一個 tensor，你的是 {type(got).__name__}"
    if tuple(got.shape) != tuple(want.shape):
        return f"{title}：結果的形狀應該和 weight 一樣是 {tuple(want.shape)}，你的是 {tuple(got.shape)}"
    wrong = [c for c in range(want.shape[0]) if not torch.allclose(got[c].detach().float(), want[c])]
    if wrong:
        return f"{title}：output channel {wrong} 不對：第 c 個 output channel 的整塊 weight 應該乘上同一個數 s[c]"
    return None


def _check_scale_out_channels(scale_out_channels: Any) -> list[str]:
    problems = []
    for title, weight, scale in _weights_of_every_rank():
        try:
            got = scale_out_channels(weight.clone(), scale.clone())
        except NotImplementedError:
            raise
        except Exception as error:
            problems.append(f"{title}：執行時出錯（{type(error).__name__}：{error}）")
            continue
        found = _channels_differ(title, got, _per_channel(weight, scale))
        if found:
            problems.append(found)
    return problems


SCALE_OUT_CHANNELS = Practice(
    "scale_out_channels",
    "寫 scale_out_channels(w, s)：w 是任何維度的 weight（第 0 維是 output channel），s 每個 output channel 一個數；"
    "回傳 w 的每個 output channel 乘上自己的 s[c] 之後的新 tensor。"
    "檢查用 Linear 的 2-D、Conv1d 的 3-D、Conv2d 的 4-D 與 Conv3d 的 5-D weight，有的 in 與 out 相等、有的不相等。",
    "import torch\n\n\ndef scale_out_channels(w, s):\n    raise NotImplementedError()\n",
    _check_scale_out_channels,
    "s 的 out 個數要對到 w 的第 0 維：把 s 變成 (out, 1, …, 1) 再乘，1 的個數是 w.dim() - 1，"
    "不是固定的 3 個；直接 w * s 會對到最後一維，reshape(1, -1, …) 會對到第 1 維（input channel）。",
    "import torch\n\n\n"
    "def scale_out_channels(w, s):\n"
    "    shape = [len(s)] + [1] * (w.dim() - 1)\n"
    "    return w * s.view(shape)\n",
    "in 與 out 剛好相等時，乘錯維度不會出錯，只是結果不對：Linear(3, 3) 與 Conv1d(2, 2, 3) 就是這種。",
)


def _check_fold_weight(fold_weight: Any) -> list[str]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, 3, 4, 4, generator=generator)
    weight = torch.randn(3, 3, 1, 1, generator=generator)
    scale = torch.tensor([2.0, -0.5, 4.0])
    before = torch.nn.functional.conv2d(x, weight)
    folded = fold_weight(weight.clone(), scale.clone())
    if not isinstance(folded, torch.Tensor) or tuple(folded.shape) != tuple(weight.shape):
        shape = tuple(folded.shape) if isinstance(folded, torch.Tensor) else type(folded).__name__
        return [f"應該回傳和 w 一樣形狀 {tuple(weight.shape)} 的 tensor，你的是 {shape}"]
    after = torch.nn.functional.conv2d(x, folded.detach().float())
    problems = []
    for c in range(3):
        want = before[0, c] * scale[c]
        if torch.allclose(after[0, c], want, rtol=1e-4, atol=1e-5):
            continue
        ratio = float((after[0, c] / before[0, c]).median())
        if abs(ratio - 1.0) < 1e-3:
            told = "和折之前一樣：weight 沒有跟著 BN 的倍數變"
        elif abs(ratio * float(scale[c]) - 1.0) < 1e-3:
            told = f"是折之前的 1/s = {1 / float(scale[c]):.3g} 倍：weight 被除以 s 了"
        else:
            told = f"大約是折之前的 {ratio:.3g} 倍"
        problems.append(
            f"channel {c}（s = {float(scale[c]):g}）：用你的 weight 算出的 conv 輸出應該是折之前的 s 倍，你的{told}"
        )
    return problems


FOLD_WEIGHT = Practice(
    "fold_weight",
    "BN 把 conv 輸出的第 c 個 channel 乘上 s[c]（再平移）。寫 fold_weight(w, s)：回傳新的 conv weight，"
    "讓 conv 用它直接算出「折之前的輸出乘上 s」。檢查用一個 3 個 channel 的 1×1 conv（w 的形狀 (3, 3, 1, 1)），"
    "把你的 weight 拿去跑 conv，和折之前的輸出乘上 s 比較。",
    "import torch\n\n\ndef fold_weight(w, s):\n    raise NotImplementedError()\n",
    _check_fold_weight,
    "conv 對 weight 是線性的：conv(x, a·w) = a·conv(x, w)。要輸出變成 s 倍，weight 就乘上 s（不是除以，也不是不動）；"
    "s 對到 weight 的第 0 維，也就是 output channel。",
    "import torch\n\n\ndef fold_weight(w, s):\n    return w * s[:, None, None, None]\n",
    "「除以標準差」已經在 s = γ / sqrt(σ² + ε) 裡面了；weight 只要乘上 s 一次。",
)


def _normalization_cases() -> list[tuple[str, torch.Tensor, nn.Module]]:
    """(title, y, bn): an affine BatchNorm1d with statistics of its own, and y of shape (2, 3)."""
    bn = nn.BatchNorm1d(3, eps=1e-3).eval()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([2.0, -1.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.5, 0.0, -1.0]))
        bn.running_mean.copy_(torch.tensor([1.0, -2.0, 0.0]))
        bn.running_var.copy_(torch.tensor([4.0, 0.25, 1.0]))
    y = torch.tensor([[3.0, 0.0, 1.0], [-1.0, -2.5, 2.0]])
    return [("y 的形狀 (2, 3)，BatchNorm1d(3, eps=1e-3)", y, bn)]


def _check_apply_bn(apply_bn: Any) -> list[str]:
    problems = []
    for title, y, bn in _normalization_cases():
        want = bn(y.clone()).detach()
        state = {name: getattr(bn, name).detach().clone() for name in BN_STATE}
        given = y.clone()
        got = apply_bn(given, bn)
        if not torch.equal(given, y):
            problems.append(
                f"{title}：你的程式改到了傳進來的 y（就地運算像 -=、/=、sub_、mul_ 改的是呼叫端那一塊記憶體），"
                "呼叫端的 tensor 也跟著變了"
            )
        changed = [name for name in BN_STATE if not torch.equal(getattr(bn, name).detach(), state[name])]
        if changed:
            problems.append(
                f"{title}：你的程式改到了 BN 的 {'、'.join(changed)}（把它們指給別的名字再就地運算，改的還是 BN 自己的 tensor），"
                "之後再用這個 BN 就算錯了"
            )
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            problems.append(f"{title}：應該回傳形狀 {tuple(want.shape)} 的 tensor，你的是 {shape}")
        elif not torch.allclose(got.detach().float(), want, rtol=1e-4, atol=1e-5):
            problems.append(
                f"{title}：結果應該是 {want.round(decimals=3).tolist()}，你的是 {got.detach().round(decimals=3).tolist()}"
            )
    return problems


APPLY_BN = Practice(
    "apply_bn",
    "寫 apply_bn(y, bn)：自己算 eval 模式的 BN，回傳 γ·(y − μ) / sqrt(σ² + ε) + β（μ、σ² 是 running_mean、running_var，"
    "γ、β 是 bn.weight、bn.bias，y 的第 1 維是 channel）。傳進來的 y 和 bn 都是呼叫端的，算完要原封不動。",
    "import torch\n\n\ndef apply_bn(y, bn):\n    raise NotImplementedError()\n",
    _check_apply_bn,
    "y - μ、a / b 這類一般的運算會產生新的 tensor；y -= μ、var += eps、mul_ 這類就地運算改的是原本那一塊記憶體，"
    "就算先寫 var = bn.running_var，var 和 BN 的 buffer 也是同一塊。全部用一般的運算寫就好。",
    "import torch\n\n\n"
    "def apply_bn(y, bn):\n"
    "    centered = y - bn.running_mean\n"
    "    spread = torch.sqrt(bn.running_var + bn.eps)\n"
    "    return centered / spread * bn.weight.detach() + bn.bias.detach()\n",
    "每一步都得到新的 tensor，y 和 BN 的 running_mean、running_var、weight、bias 都沒有被動到。",
)


MISCONCEPTIONS = (
    Misconception(
        "returns_none_bias",
        "conv 沒有 bias 時回傳了 None",
        "你可能以為 conv 原本沒有 bias，折完也就不需要 bias。其實 BN 的平移一定要有地方放："
        "torchao 會替這個 conv 新增一個 <weight>_bias 常數（像 residual 的 conv1_weight_bias）。"
        "conv_b 是 None 時把 b 當成 0，照樣算出 shape (out,) 的新 bias 回傳。",
        WHAT_IT_FOLDS_TO,
        public=_returns_none_bias,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "assumes_conv_bias",
        "沒想到 conv_b 可能是 None",
        "conv 以 bias=False 建立時（像 residual 的兩個 conv），conv_b 是 None，拿它直接做減法或乘法就出錯了。"
        "這時公式裡的 b 就是 0：先把 None 換成和 running_mean 一樣 shape 的零，再照同一個公式算新 bias。",
        RULES,
        public=_crashes_without_conv_bias,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "assumes_affine",
        "以為 bn.weight 與 bn.bias 一定存在",
        "BatchNorm 以 affine=False 建立時沒有可學的 γ、β，bn.weight 與 bn.bias 都是 None，拿來運算就出錯了。"
        "這時等於 γ = 1、β = 0：先檢查是不是 None，是的話換成全 1 與全 0 的 tensor。",
        RULES,
        public=_crashes_without_affine,
        practice=BN_SCALE,
    ),
    Misconception(
        "rank_hardcoded",
        "s 的 reshape 寫死成 Conv2d 的四維",
        "reshape(-1, 1, 1, 1) 只和 4 維的 Conv2d weight 對得上；Conv1d 的 weight 是 3 維、Conv3d 是 5 維，"
        "廣播會對到錯的維度，結果 shape 不對，或直接出錯。s 要 reshape 成 (out, 1, …, 1)，1 的個數是 conv_w.dim() - 1。",
        RULES,
        public=_rank_hardcoded,
        practice=SCALE_OUT_CHANNELS,
    ),
    Misconception(
        "scales_input_channels",
        "s 沒有乘在 output channel 上",
        "s 是 BN 每個 channel 一個數，而 BN 的 channel 就是 conv 的 output channel，也就是 weight 的第 0 維；"
        "第 1 維是 input channel，和 BN 無關。你的 weight 沒有讓每個 output channel 乘上它自己的 s。"
        "把 s reshape 成 (out, 1, …, 1) 再乘，第 c 個 output channel 的整塊 weight 就乘上 s[c]。",
        RULES,
        public=_input_channels,
        practice=SCALE_OUT_CHANNELS,
    ),
    Misconception(
        "gamma_sign_lost",
        "γ 是負數時 s 的正負號不見了",
        "γ 可以是負的，s = γ / sqrt(σ² + ε) 的正負號跟著 γ 走。寫成 sqrt(γ² / (σ² + ε)) 或 γ.abs()，"
        "負號就丟了，那個 channel 的 weight 與 bias 整個反了號。只對 σ² + ε 開根號，γ 留在根號外面。",
        FORMULA,
        public=_gamma_sign_lost,
        practice=BN_SCALE,
    ),
    Misconception(
        "eps_not_bn_eps",
        "沒有用 bn.eps",
        "ε 是每個 BN 自己的設定，不一定是預設的 1e-5，也不能省略：variance 小的 channel，ε 佔了分母的一大部分。"
        "s 的分母要用 sqrt(bn.running_var + bn.eps)。",
        RULES,
        public=_eps_too_small,
        practice=BN_SCALE,
    ),
    Misconception(
        "eps_outside_sqrt",
        "ε 加在 sqrt 外面",
        "BN 的分母是 sqrt(σ² + ε)：ε 先加在 variance 上，再開根號。寫成 sqrt(σ²) + ε 時，"
        "預設的 ε = 1e-5 小到看不出差別，eps 比較大、variance 比較小的 BN 就差很多。把 bn.eps 放進 sqrt 裡面。",
        FORMULA,
        public=_eps_outside,
        practice=BN_SCALE,
    ),
    Misconception(
        "no_sqrt",
        "s 的分母少了開根號",
        "你可能把 BN 想成除以 variance。BN 除的是標準差 sqrt(σ² + ε)，少了開根號，每個 channel 的 s 都不對，"
        "weight 與 bias 也就跟著錯；s 要寫成 γ / sqrt(σ² + ε)。",
        FORMULA,
        public=_scale_wrong,
        practice=BN_SCALE,
    ),
    Misconception(
        "weight_not_scaled",
        "weight 沒有乘上 s",
        "BN 不只是平移，還把每個 channel 乘上 s：BN(w * x + b) = (s·w) * x + …，所以折完 weight 也要變。"
        "只改 bias、weight 原封不動，折完的圖算出來就和原模型不同。新的 weight 是 conv_w 沿 output channel 乘上 s。",
        FORMULA,
        public=_weight_unscaled,
        practice=FOLD_WEIGHT,
    ),
    Misconception(
        "weight_divided",
        "weight 除以 s，而不是乘上 s",
        "BN 把 conv 的輸出 y 變成 s·y + (β − s·μ)，所以 weight 要乘上 s，折完才和 BN 的效果一樣。"
        "「除以標準差」已經包含在 s = γ / sqrt(σ² + ε) 裡，weight 再除以 s 就反過來了。"
        "新的 weight 是 conv_w 沿 output channel 乘上 s。",
        FORMULA,
        public=_weight_divided,
        practice=FOLD_WEIGHT,
    ),
    Misconception(
        "mean_sign_flipped",
        "running_mean 的正負號弄反了",
        "BN 先把 conv 的輸出減掉 running_mean，也就是 y − μ，所以新 bias 是 (b − μ)·s + β。"
        "你的新 bias 裡 μ 的正負號反了（像是寫成 b + μ）：μ 要減掉，不是加上。",
        FORMULA,
        public=_mean_flipped,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "mean_not_subtracted",
        "新 bias 沒有減掉 running_mean",
        "BN 先減 running_mean 再乘 s，這一步也要折進 bias：新 bias 是 (b − μ)·s + β。"
        "你的新 bias 少了 −μ·s 這一項，所以 conv 沒有 bias、BN 也沒有 β 時，它整個變成 0。",
        FORMULA,
        public=_mean_missing,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "beta_misplaced",
        "β 沒有原封不動加在最後",
        "BN 的最後一步才加 β，β 不乘 s：新 bias 是 (b − μ)·s + β。你的新 bias 少加了 β，或讓 β 也乘上了 s"
        "（affine=False 的 BN 沒有 β，所以在那裡看不出來）。先算 (b − μ)·s，最後再加上 bn.bias。",
        FORMULA,
        public=_beta_misplaced,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "conv_bias_not_through_bn",
        "conv 原本的 bias 沒有一起經過 BN",
        "BN 處理的是 conv 的整個輸出 w * x + b，所以 conv 原本的 b 也要先減 μ、再乘 s。"
        "你的新 bias 漏掉了 b，或讓 b 沒有乘 s 就直接加上去：conv 沒有 bias 時看不出來，有 bias 時就錯了。"
        "conv_b 有值時，把它放進 (b − μ)·s + β 裡的 b。",
        WHAT_IT_FOLDS_TO,
        public=_conv_bias_only,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "mutates_arguments",
        "就地修改了傳進來的 conv_w、conv_b 或 BN",
        "你可能覺得反正要回傳折完的值，直接在 conv_w、conv_b 或 BN 的統計量上用 mul_、+= 這類就地運算比較省事。"
        "可是這些引數是呼叫端模型自己的 tensor（.detach() 之後仍然共用同一塊記憶體），改了它們，原模型的 conv 或 BN 也跟著變了，"
        "之後再跑原模型或再折一次都會算錯。用一般的乘法、加法產生新的 tensor 回傳，傳進來的引數保持原樣。",
        RULES,
        public=_mutates,
        practice=APPLY_BN,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "fold_bn",
        TITLE,
        ("fold_bn",),
        {"residual_conv1": residual_conv1, "conv_bn_relu": conv_bn_relu, "conv1d": conv1d},
        misconceptions=MISCONCEPTIONS,
    ),
)
