"""M04-1 BN 折進 conv: fold_bn, judged against the constants prepare_pt2e folds into hidden convs.

Every fold is asked twice on the same arguments: a fold_bn that changes them in place answers differently
the second time."""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

import torch
from torch import nn
from torch.fx import Node

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.probes import NoLabels
from common.export_cache import Unkeyable, key_of
from common.pt2e import export_module, prepare_pt2e
from selfcheck.evidence import EvidenceError, getattr_value, plain
from selfcheck.public.m04_1 import PUBLIC

CONV_TARGETS = (
    torch.ops.aten.conv1d.default,
    torch.ops.aten.conv2d.default,
    torch.ops.aten.conv3d.default,
)
MAX_VALUES = 5000


class ConvBn(nn.Module):
    """conv → bn: prepare_pt2e folds the bn into the conv."""

    def __init__(self, conv: nn.Module, bn: nn.Module) -> None:
        super().__init__()
        self.conv = conv
        self.bn = bn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def set_bn_statistics(bn: nn.Module, seed: int) -> None:
    """Give ``bn`` running statistics (and, when affine, γ and β) far from the defaults.

    When affine, the last channel's γ is negative on every seed: a fold that loses γ's sign
    (``sqrt(γ² / (σ² + ε))``, ``γ.abs()``) shows up.
    """
    generator = torch.Generator().manual_seed(seed)
    channels = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(channels, generator=generator) * 0.8)
        bn.running_var.copy_(torch.rand(channels, generator=generator) * 2.0 + 0.05)
        if bn.affine:
            bn.weight.copy_(torch.randn(channels, generator=generator) * 0.6 + 1.0)
            bn.weight[-1] = -bn.weight[-1].abs() - 0.3
            bn.bias.copy_(torch.randn(channels, generator=generator) * 0.5)
    bn.eval()


_FOLDED: dict[Hashable, tuple[torch.Tensor, torch.Tensor]] = {}
"""``folded_constants`` of the models seen in this process, by ``export_cache.key_of``."""


def folded_constants(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of the (only) conv after prepare_pt2e folded the BN into it. No student code is
    involved: remembered by everything the export depends on (``common.export_cache.key_of``), so the recording,
    the replay and every later submission on the same seed fold each hidden model once (copies are handed out)."""
    model.eval()
    try:
        key: Hashable | None = key_of(model, inputs, None)
    except Unkeyable:
        key = None
    if key is None or key not in _FOLDED:
        folded = _folded_constants(model, inputs)
        if key is None:
            return folded
        if len(_FOLDED) >= 256:
            _FOLDED.clear()
        _FOLDED[key] = folded
    weight, bias = _FOLDED[key]
    return weight.clone(), bias.clone()


def _folded_constants(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    prepared = prepare_pt2e(export_module(model, inputs), NoLabels())
    convs = [n for n in prepared.graph.nodes if n.op == "call_function" and n.target in CONV_TARGETS]
    if len(convs) != 1 or any("batch_norm" in str(n.target) for n in prepared.graph.nodes):
        raise RuntimeError("hidden model: expected one conv and its BN folded")
    weight, bias = convs[0].args[1], convs[0].args[2]
    assert isinstance(weight, Node) and isinstance(bias, Node)
    return getattr_value(prepared, weight).detach(), getattr_value(prepared, bias).detach()


def tensor_record(value: Any, what: str) -> dict[str, Any]:
    """``{"shape": [...], "values": [...]}`` of a tensor returned by student code (exact types only)."""
    if type(value) not in (torch.Tensor, nn.Parameter):
        raise EvidenceError(f"{what} 應該是 torch.Tensor，收到 {type(value).__name__}")
    tensor = torch.Tensor.detach(value)
    if tensor.numel() > MAX_VALUES:
        raise EvidenceError(f"{what} 太大（{tensor.numel()} 個數）")
    if not tensor.is_floating_point():
        raise EvidenceError(f"{what} 的 dtype {tensor.dtype} 不是浮點數")
    return plain({"shape": list(tensor.shape), "values": tensor.to(torch.float64).flatten().tolist()})


def fold_record(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The weight and bias records of what ``fold_bn`` returned."""
    if type(result) not in (tuple, list) or len(result) != 2:
        raise EvidenceError(f"fold_bn 應該回傳 (weight, bias) 兩個 tensor，收到 {type(result).__name__}")
    return tensor_record(result[0], "回傳的 weight"), tensor_record(result[1], "回傳的 bias")


def run_fold(ns: Namespace, conv: nn.Module, bn: nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """The graph's folded constants, then the student's ``fold_bn`` on copies of the same conv and BN, called
    twice on the very same tensors and module: what the second call returns differently (``changed``) shows
    that the first changed its arguments in place (the caller's conv and BN must stay as they were). Only the
    returns leave the sandbox, so the two calls are compared here."""
    graph_weight, graph_bias = folded_constants(ConvBn(copy.deepcopy(conv), copy.deepcopy(bn)), inputs)
    conv_w = conv.weight.detach().clone()
    conv_b = conv.bias.detach().clone() if conv.bias is not None else None
    bn_copy = copy.deepcopy(bn)
    weight, bias = fold_record(ns["fold_bn"](conv_w, conv_b, bn_copy))
    again = fold_record(ns["fold_bn"](conv_w, conv_b, bn_copy))
    return {
        "weight": weight,
        "bias": bias,
        "changed": [
            what
            for what, first, second in zip(("weight", "bias"), (weight, bias), again, strict=True)
            if first != second
        ],
        "graph_weight": tensor_record(graph_weight, "graph weight"),
        "graph_bias": tensor_record(graph_bias, "graph bias"),
        "conv": f"{type(conv).__name__}（weight {list(conv.weight.shape)}，"
        f"{'有' if conv.bias is not None else '沒有'} bias）",
    }


# --- cases --------------------------------------------------------------------------------------


def conv2d_with_bias(ns: Namespace, seed: int) -> Any:
    cin, cout = seed_size(seed, 2, 4), seed_size(seed + 1, 3, 7)
    conv, bn = nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout)
    set_bn_statistics(bn, seed)
    return run_fold(ns, conv, bn, seeded_inputs(seed, (2, cin, 6, 6)))


def conv2d_without_bias(ns: Namespace, seed: int) -> Any:
    cin, cout = seed_size(seed + 2, 2, 5), seed_size(seed, 3, 6)
    conv, bn = nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
    set_bn_statistics(bn, seed + 10)
    return run_fold(ns, conv, bn, seeded_inputs(seed, (2, cin, 6, 6)))


def conv1d(ns: Namespace, seed: int) -> Any:
    cin, cout = seed_size(seed, 2, 4), seed_size(seed + 3, 4, 8)
    conv, bn = nn.Conv1d(cin, cout, seed_size(seed, 2, 3)), nn.BatchNorm1d(cout)
    set_bn_statistics(bn, seed + 20)
    return run_fold(ns, conv, bn, seeded_inputs(seed, (2, cin, 9)))


def conv3d(ns: Namespace, seed: int) -> Any:
    cin, cout = seed_size(seed + 1, 2, 3), seed_size(seed, 3, 5)
    conv, bn = nn.Conv3d(cin, cout, 2, bias=False), nn.BatchNorm3d(cout)
    set_bn_statistics(bn, seed + 30)
    return run_fold(ns, conv, bn, seeded_inputs(seed, (1, cin, 4, 4, 4)))


def other_eps(ns: Namespace, seed: int) -> Any:
    cin, cout = seed_size(seed, 2, 3), seed_size(seed + 2, 3, 6)
    eps = (0.05, 0.2, 0.5)[seed % 3]
    conv, bn = nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout, eps=eps)
    set_bn_statistics(bn, seed + 40)
    with torch.no_grad():  # small variances, so that where eps goes matters
        bn.running_var.mul_(0.1)
    return run_fold(ns, conv, bn, seeded_inputs(seed, (2, cin, 6, 6)))


def not_affine(ns: Namespace, seed: int) -> Any:
    """BatchNorm2d(affine=False) after a conv with a bias and after one without (both on every seed)."""
    cin, cout = seed_size(seed + 1, 2, 4), seed_size(seed + 1, 3, 6)
    found = {}
    for offset, bias in enumerate((True, False)):
        conv, bn = nn.Conv2d(cin, cout, 3, padding=1, bias=bias), nn.BatchNorm2d(cout, affine=False)
        set_bn_statistics(bn, seed + 50 + offset)
        found["with_bias" if bias else "without_bias"] = run_fold(ns, conv, bn, seeded_inputs(seed, (2, cin, 6, 6)))
    return found


EXERCISES = with_hidden_cases(
    PUBLIC,
    fold_bn={
        "conv2d_with_bias": conv2d_with_bias,
        "conv2d_without_bias": conv2d_without_bias,
        "conv1d": conv1d,
        "conv3d": conv3d,
        "other_eps": other_eps,
        "not_affine": not_affine,
    },
)
