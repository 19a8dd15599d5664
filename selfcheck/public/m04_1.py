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

TITLE = "fold_bn：把 BN 折進 conv 的 weight 與 bias"

RTOL, ATOL = 1e-4, 1e-5


def trained_like(model: nn.Module, seed: int) -> nn.Module:
    """Every BN gets γ, β, running mean and variance away from the defaults; eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in model.modules():
            if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                n = bn.num_features
                bn.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                bn.bias.copy_(torch.rand(n, generator=generator) - 0.5)
                bn.running_mean.copy_(torch.rand(n, generator=generator) * 2 - 1)
                bn.running_var.copy_(torch.rand(n, generator=generator) * 1.5 + 0.5)
    return model.eval()


def graph_constants(
    model: nn.Module, seed: int, conv: str, shape: tuple[int, ...] = (2, 3, 16, 16)
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias that prepare_pt2e folded into the conv node called ``conv``."""
    from common.pt2e import Quantizer, export_module, prepare_pt2e

    class NoLabels(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    folded = prepare_pt2e(export_module(model, seeded_inputs(seed, shape)), NoLabels())
    node = next(n for n in folded.graph.nodes if n.name == conv)
    weight, bias = node.args[1], node.args[2]
    return folded.get_parameter(weight.target).detach(), folded.get_parameter(bias.target).detach()


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


def judge_fold(
    ns: Namespace,
    model: nn.Module,
    conv: nn.Module,
    bn: nn.Module,
    node: str,
    seed: int,
    shape: tuple[int, ...] = (2, 3, 16, 16),
) -> dict[str, Any]:
    """The student's fold of ``conv`` and ``bn`` against the graph's constants: shapes and the channels that differ."""
    graph_weight, graph_bias = graph_constants(model, seed, node, shape)
    conv_b = conv.bias.detach().clone() if conv.bias is not None else None
    result = ns["fold_bn"](conv.weight.detach().clone(), conv_b, bn)
    if type(result) not in (tuple, list) or len(result) != 2:
        raise EvidenceError(f"fold_bn 應該回傳 (weight, bias) 兩個 tensor，收到 {type(result).__name__}")
    weight, bias = _tensor(result[0], "回傳的 weight"), _tensor(result[1], "回傳的 bias")
    return {
        "weight_shape": list(weight.shape),
        "bias_shape": list(bias.shape),
        "weight_channels_off": channels_off(weight, graph_weight),
        "bias_channels_off": channels_off(bias, graph_bias),
    }


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
    """Conv1d → BatchNorm1d(eps=0.1) on a (batch, 3, length) input: a 3-D weight and an eps that matters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)
        self.bn = nn.BatchNorm1d(4, eps=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def conv1d_eps(ns: Namespace, seed: int) -> Any:
    """A Conv1d (3-D weight) and a BatchNorm1d with eps=0.1 and small variances."""
    model = trained_like(Conv1dBn(), seed)
    with torch.no_grad():
        model.bn.running_var.mul_(0.2)
    return judge_fold(ns, model, model.conv, model.bn, "conv1d", seed, (2, 3, 10))


# --- where the chapter teaches it ----------------------------------------------------------------

FORMULA = Section("M04-1 | BN 折進 conv：prepare_pt2e 在標註之前做的事")
WHAT_IT_FOLDS_TO = Section("B. 折成什麼")
RULES = Section("練習 1：fold_bn（5 分）")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------

CONV2D_CASES = ("residual_conv1", "conv_bn_relu")


def _off(evidence: Any, case: str, what: str) -> list[Any] | None:
    found = diagnosis.value(evidence, case, f"{what}_channels_off")
    return found if isinstance(found, list) else None


def _right(evidence: Any, case: str, what: str) -> bool:
    return _off(evidence, case, what) == []


def _wrong(evidence: Any, case: str, what: str) -> bool:
    return bool(_off(evidence, case, what))


def _none_error(seen: Any, case: str) -> bool:
    return diagnosis.error(seen, case) is not None and "NoneType" in diagnosis.error_message(seen, case)


def _returns_none_bias(seen: Any, expected: Any) -> bool:
    return diagnosis.error(seen, "residual_conv1") == "EvidenceError" and "NoneType" in diagnosis.error_message(
        seen, "residual_conv1"
    )


def _crashes_without_conv_bias(seen: Any, expected: Any) -> bool:
    return _none_error(seen, "residual_conv1") and diagnosis.error(seen, "residual_conv1") != "EvidenceError"


def _rank_hardcoded(seen: Any, expected: Any) -> bool:
    conv2d_right = all(_right(seen, case, "weight") for case in CONV2D_CASES)
    shape = diagnosis.value(seen, "conv1d_eps", "weight_shape")
    wrong_shape = shape is not None and shape != diagnosis.value(expected, "conv1d_eps", "weight_shape")
    return conv2d_right and (wrong_shape or diagnosis.error(seen, "conv1d_eps") == "RuntimeError")


def _input_channels(seen: Any, expected: Any) -> bool:
    return any(
        diagnosis.error(seen, case) == "RuntimeError" and "dimension 1" in diagnosis.error_message(seen, case)
        for case in CONV2D_CASES
    )


def _eps_only(seen: Any, expected: Any) -> bool:
    """Right where eps is the default 1e-5, the weight wrong (shape right) where it is 0.1."""
    default_right = all(_right(seen, case, what) for case in CONV2D_CASES for what in ("weight", "bias"))
    shape = diagnosis.value(seen, "conv1d_eps", "weight_shape")
    return (
        default_right
        and shape == diagnosis.value(expected, "conv1d_eps", "weight_shape")
        and _wrong(seen, "conv1d_eps", "weight")
    )


def _scale_wrong(seen: Any, expected: Any) -> bool:
    """Weight and bias both off on the Conv2d cases (eps at its default): the scale s itself."""
    return all(_wrong(seen, case, "weight") and _wrong(seen, case, "bias") for case in CONV2D_CASES)


def _weight_only(seen: Any, expected: Any) -> bool:
    return all(_wrong(seen, case, "weight") and _right(seen, case, "bias") for case in CONV2D_CASES)


def _conv_bias_only(seen: Any, expected: Any) -> bool:
    """Right on residual's conv1 (no bias), the bias off after conv_bn_relu's conv (which has one)."""
    weights_right = all(_right(seen, case, "weight") for case in CONV2D_CASES)
    return weights_right and _right(seen, "residual_conv1", "bias") and _wrong(seen, "conv_bn_relu", "bias")


MISCONCEPTIONS = (
    Misconception(
        "returns_none_bias",
        "conv 沒有 bias 時回傳了 None",
        "你可能以為 conv 原本沒有 bias，折完也就不需要 bias。其實 BN 的平移一定要有地方放："
        "torchao 會替這個 conv 新增一個 <weight>_bias 常數（像 residual 的 conv1_weight_bias）。"
        "conv_b 是 None 時把 b 當成 0，照樣算出 shape (out,) 的新 bias 回傳。",
        WHAT_IT_FOLDS_TO,
        public=_returns_none_bias,
    ),
    Misconception(
        "assumes_conv_bias",
        "沒想到 conv_b 可能是 None",
        "conv 以 bias=False 建立時（像 residual 的兩個 conv），conv_b 是 None，拿它直接做減法或乘法就出錯了。"
        "這時公式裡的 b 就是 0：先把 None 換成和 running_mean 一樣 shape 的零，再照同一個公式算新 bias。",
        RULES,
        public=_crashes_without_conv_bias,
    ),
    Misconception(
        "assumes_affine",
        "以為 bn.weight 與 bn.bias 一定存在",
        "BatchNorm 以 affine=False 建立時沒有可學的 γ、β，bn.weight 與 bn.bias 都是 None，拿來運算就出錯了。"
        "這時等於 γ = 1、β = 0：先檢查是不是 None，是的話換成全 1 與全 0 的 tensor。",
        RULES,
    ),
    Misconception(
        "rank_hardcoded",
        "s 的 reshape 寫死成 Conv2d 的四維",
        "reshape(-1, 1, 1, 1) 只和 4 維的 Conv2d weight 對得上；Conv1d 的 weight 是 3 維、Conv3d 是 5 維，"
        "廣播會對到錯的維度，結果 shape 不對，或直接出錯。s 要 reshape 成 (out, 1, …, 1)，1 的個數是 conv_w.dim() - 1。",
        RULES,
        public=_rank_hardcoded,
    ),
    Misconception(
        "scales_input_channels",
        "s 沒有乘在 output channel 上",
        "s 是 BN 每個 channel 一個數，而 BN 的 channel 就是 conv 的 output channel，也就是 weight 的第 0 維；"
        "第 1 維是 input channel，和 BN 無關。你的 weight 沒有讓每個 output channel 乘上它自己的 s。"
        "把 s reshape 成 (out, 1, …, 1) 再乘，第 c 個 output channel 的整塊 weight 就乘上 s[c]。",
        RULES,
        public=_input_channels,
    ),
    Misconception(
        "gamma_sign_lost",
        "γ 是負數時 s 的正負號不見了",
        "γ 可以是負的，s = γ / sqrt(σ² + ε) 的正負號跟著 γ 走。寫成 sqrt(γ² / (σ² + ε)) 或 γ.abs()，"
        "負號就丟了，那個 channel 的 weight 與 bias 整個反了號。只對 σ² + ε 開根號，γ 留在根號外面。",
        FORMULA,
    ),
    Misconception(
        "eps_not_bn_eps",
        "沒有用 bn.eps",
        "ε 是每個 BN 自己的設定，不一定是預設的 1e-5，也不能省略：variance 小的 channel，ε 佔了分母的一大部分。"
        "s 的分母要用 sqrt(bn.running_var + bn.eps)。",
        RULES,
        public=_eps_only,
    ),
    Misconception(
        "eps_outside_sqrt",
        "ε 加在 sqrt 外面",
        "BN 的分母是 sqrt(σ² + ε)：ε 先加在 variance 上，再開根號。寫成 sqrt(σ²) + ε 時，"
        "預設的 ε = 1e-5 小到看不出差別，eps 比較大、variance 比較小的 BN 就差很多。把 bn.eps 放進 sqrt 裡面。",
        FORMULA,
        public=_eps_only,
    ),
    Misconception(
        "no_sqrt",
        "s 的分母少了開根號",
        "你可能把 BN 想成除以 variance。BN 除的是標準差 sqrt(σ² + ε)，少了開根號，每個 channel 的 s 都不對，"
        "weight 與 bias 也就跟著錯；s 要寫成 γ / sqrt(σ² + ε)。",
        FORMULA,
        public=_scale_wrong,
    ),
    Misconception(
        "weight_not_scaled",
        "weight 沒有乘上 s",
        "BN 不只是平移，還把每個 channel 乘上 s：BN(w * x + b) = (s·w) * x + …，所以折完 weight 也要變。"
        "只改 bias、weight 原封不動，折完的圖算出來就和原模型不同。新的 weight 是 conv_w 沿 output channel 乘上 s。",
        FORMULA,
        public=_weight_only,
    ),
    Misconception(
        "weight_divided",
        "weight 除以 s，而不是乘上 s",
        "BN 把 conv 的輸出 y 變成 s·y + (β − s·μ)，所以 weight 要乘上 s，折完才和 BN 的效果一樣。"
        "「除以標準差」已經包含在 s = γ / sqrt(σ² + ε) 裡，weight 再除以 s 就反過來了。"
        "新的 weight 是 conv_w 沿 output channel 乘上 s。",
        FORMULA,
        public=_weight_only,
    ),
    Misconception(
        "mean_sign_flipped",
        "running_mean 的正負號弄反了",
        "BN 先把 conv 的輸出減掉 running_mean，也就是 y − μ，所以新 bias 是 (b − μ)·s + β。"
        "你的新 bias 裡 μ 的正負號反了（像是寫成 b + μ）：μ 要減掉，不是加上。",
        FORMULA,
    ),
    Misconception(
        "mean_not_subtracted",
        "新 bias 沒有減掉 running_mean",
        "BN 先減 running_mean 再乘 s，這一步也要折進 bias：新 bias 是 (b − μ)·s + β。"
        "你的新 bias 少了 −μ·s 這一項，所以 conv 沒有 bias、BN 也沒有 β 時，它整個變成 0。",
        FORMULA,
    ),
    Misconception(
        "beta_misplaced",
        "β 沒有原封不動加在最後",
        "BN 的最後一步才加 β，β 不乘 s：新 bias 是 (b − μ)·s + β。你的新 bias 少加了 β，或讓 β 也乘上了 s"
        "（affine=False 的 BN 沒有 β，所以在那裡看不出來）。先算 (b − μ)·s，最後再加上 bn.bias。",
        FORMULA,
    ),
    Misconception(
        "conv_bias_not_through_bn",
        "conv 原本的 bias 沒有一起經過 BN",
        "BN 處理的是 conv 的整個輸出 w * x + b，所以 conv 原本的 b 也要先減 μ、再乘 s。"
        "你的新 bias 漏掉了 b，或讓 b 沒有乘 s 就直接加上去：conv 沒有 bias 時看不出來，有 bias 時就錯了。"
        "conv_b 有值時，把它放進 (b − μ)·s + β 裡的 b。",
        WHAT_IT_FOLDS_TO,
        public=_conv_bias_only,
    ),
    Misconception(
        "mutates_arguments",
        "就地修改了傳進來的 conv_w、conv_b 或 BN",
        "你可能覺得反正要回傳折完的值，直接在 conv_w、conv_b 或 BN 的統計量上用 mul_、+= 這類就地運算比較省事。"
        "可是這些引數是呼叫端模型自己的 tensor（.detach() 之後仍然共用同一塊記憶體），改了它們，原模型的 conv 或 BN 也跟著變了，"
        "之後再跑原模型或再折一次都會算錯。用一般的乘法、加法產生新的 tensor 回傳，傳進來的引數保持原樣。",
        RULES,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "fold_bn",
        TITLE,
        ("fold_bn",),
        {"residual_conv1": residual_conv1, "conv_bn_relu": conv_bn_relu, "conv1d_eps": conv1d_eps},
        misconceptions=MISCONCEPTIONS,
    ),
)
