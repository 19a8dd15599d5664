"""M04-2 linear + BN 與不折的 BN: bn_survives, judged against what prepare_pt2e does on hidden models."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import SUFFIX
from autograder.sandboxed.cases.probes import NoLabels
from common.export_cache import Unkeyable, key_of
from common.pt2e import export_module, prepare_pt2e
from selfcheck.evidence import EvidenceError
from selfcheck.public.m01_1 import graph_changes, graph_state
from selfcheck.public.m04_2 import PUBLIC

BATCH_NORMS = (torch.ops.aten.batch_norm.default, torch.ops.aten._native_batch_norm_legit_no_training.default)


def _stats(module: nn.Module, seed: int) -> nn.Module:
    """Every BN of ``module`` gets running statistics, γ and β away from the defaults; eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in module.modules():
            if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                n = bn.num_features
                bn.running_mean.copy_(torch.randn(n, generator=generator) * 0.5)
                bn.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                bn.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                bn.bias.copy_(torch.randn(n, generator=generator) * 0.3)
    return module.eval()


# --- hidden models ------------------------------------------------------------------------------


class ConvThenBn(nn.Module):
    """A conv of some kind straight into a BN, and a second BN after a relu (that one stays)."""

    def __init__(self, conv: nn.Module, bn: type[nn.Module], channels: int) -> None:
        super().__init__()
        self.conv, self.bn, self.late = conv, bn(channels), bn(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.late(torch.relu(self.bn(self.conv(x))))


class ConvZoo(nn.Module):
    """Every conv op torchao folds, each straight into its BN: conv1d / 2d / 3d with numeric and string
    padding (``.default`` and ``.padding`` overloads) and conv_transpose1d / 2d / 3d.

    Inputs ``a`` (N, 3, L), ``b`` (N, 3, H, W), ``c`` (N, 3, D, H, W); nine outputs.
    """

    NAMES = ("c1", "c1_same", "t1", "c2", "c2_valid", "t2", "c3", "c3_same", "t3")

    def __init__(self, c: int) -> None:
        super().__init__()
        convs = [
            nn.Conv1d(3, c, 3),
            nn.Conv1d(3, c, 3, padding="same"),
            nn.ConvTranspose1d(3, c, 2, stride=2),
            nn.Conv2d(3, c, 3),
            nn.Conv2d(3, c, 3, padding="valid"),
            nn.ConvTranspose2d(3, c, 2, stride=2),
            nn.Conv3d(3, c, 2),
            nn.Conv3d(3, c, 3, padding="same"),
            nn.ConvTranspose3d(3, c, 2, stride=2),
        ]
        norms = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
        for index, (name, conv) in enumerate(zip(self.NAMES, convs, strict=True)):
            # named attributes, not a ModuleList: the grader replays graphs whose get_attr targets are identifiers
            setattr(self, name, conv)
            setattr(self, f"{name}_bn", norms[index // 3](c))

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = (a, a, a, b, b, b, c, c, c)
        return tuple(
            getattr(self, f"{name}_bn")(getattr(self, name)(x)) for name, x in zip(self.NAMES, inputs, strict=True)
        )


class BiaslessConvs(nn.Module):
    """Convs built with ``bias=False``, each straight into its BN: a conv2d whose export has no bias argument at
    all, a conv1d and a conv_transpose2d whose bias argument is None. torchao folds every one (it adds the bias).
    """

    def __init__(self, c: int) -> None:
        super().__init__()
        self.plain, self.plain_bn = nn.Conv2d(3, c, 3, bias=False), nn.BatchNorm2d(c)
        self.seq, self.seq_bn = nn.Conv1d(3, c, 3, padding=1, bias=False), nn.BatchNorm1d(c)
        self.up, self.up_bn = nn.ConvTranspose2d(3, c, 2, stride=2, bias=False), nn.BatchNorm2d(c)

    def forward(self, image: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.plain_bn(self.plain(image)), self.seq_bn(self.seq(seq)), self.up_bn(self.up(image))


class MatmulsThenBn(nn.Module):
    """BNs after the other ways to multiply by a weight on a 2-D input: mm, addmm (with a bias) and matmul (``@``).
    torchao folds only into aten.linear: all three stay."""

    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(features, out)), nn.Parameter(torch.randn(out))
        self.mm_bn, self.addmm_bn, self.matmul_bn = nn.BatchNorm1d(out), nn.BatchNorm1d(out), nn.BatchNorm1d(out)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            self.mm_bn(torch.mm(x, self.w)),
            self.addmm_bn(torch.addmm(self.b, x, self.w)),
            self.matmul_bn(x @ self.w),
        )


class ModuleNamed(nn.Module):
    """Modules whose attribute names lie about what they are: ``conv`` is a linear on a 3-D input (its BN
    stays), ``linear`` is a Conv2d (its BN folds), ``conv_act`` is a ReLU (its BN stays), ``linear_out`` is
    a linear on 2-D (its BN folds). ``renamed_graph`` then names every op after its module."""

    def __init__(self, features: int, length: int) -> None:
        super().__init__()
        self.conv, self.conv_bn = nn.Linear(features, features), nn.BatchNorm1d(length)
        self.linear, self.linear_bn = nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)
        self.conv_act, self.act_bn = nn.ReLU(), nn.BatchNorm2d(3)
        self.linear_out, self.out_bn = nn.Linear(features, features), nn.BatchNorm1d(features)

    def forward(self, seq: torch.Tensor, image: torch.Tensor, flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            self.conv_bn(self.conv(seq)),
            self.linear_bn(self.linear(image)),
            self.act_bn(self.conv_act(image)),
            self.out_bn(self.linear_out(flat)),
        )


def renamed_graph(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``model`` exported, then every op other than a BN renamed after the module that ran it (the innermost
    entry of ``nn_module_stack``), as a pass that makes graphs readable would: names no longer tell the op."""
    gm = export_module(model, inputs)
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and n.target not in BATCH_NORMS]
    for index, node in enumerate(n for n in ops if n.meta.get("nn_module_stack")):
        path = str(list(node.meta["nn_module_stack"].values())[-1][0])
        node._rename(f"{path.rsplit('.', 1)[-1]}_{SUFFIX + index}")  # a name nobody reserved: see SUFFIX
    gm.recompile()
    return gm


class LinearThenBn(nn.Module):
    """linear → BN on an input of any rank (BN over dim 1)."""

    def __init__(self, features: int, out: int, bn_channels: int, bn: type[nn.Module], bias: bool = True) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, out, bias=bias), bn(bn_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class FlattenLinearBn(nn.Module):
    """A 4-D input flattened to 2-D, then linear → BN (the linear sees 2-D: it folds)."""

    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, out), nn.BatchNorm1d(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(torch.flatten(x, 1)))


class BnAfterOtherOps(nn.Module):
    """BN on the input, after a conv (folds), after relu, after max_pool2d, after an add."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn_in = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn_conv = nn.BatchNorm2d(channels)
        self.bn_relu = nn.BatchNorm2d(channels)
        self.bn_pool = nn.BatchNorm2d(channels)
        self.skip = nn.Conv2d(3, channels, 1)
        self.bn_add = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn_in(x)
        y = self.bn_relu(torch.relu(self.bn_conv(self.conv(x))))
        y = self.bn_pool(torch.max_pool2d(y, 2))
        return self.bn_add(y + torch.max_pool2d(self.skip(x), 2))


class LinearReluBn(nn.Module):
    """linear → relu → BN on 2-D input: relu in between, so the BN stays."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, features), nn.BatchNorm1d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.fc(x)))


class ConvSharedOutput(nn.Module):
    """y = conv(x) feeds a BN and an add: the BN still folds (and the add now sees the folded y)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv, self.bn, self.after = (
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.after(self.bn(y) + y)


class LinearSharedOutput(nn.Module):
    """y = linear(x) on 2-D feeds a BN and a relu: the BN still folds."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, features), nn.BatchNorm1d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return self.bn(y) * torch.relu(y)


class ConvBnLater(nn.Module):
    """conv, then other ops, then the conv's BN: the BN is not next to the conv in graph order, yet folds."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv(x)
        b = torch.sigmoid(x).sum(dim=1, keepdim=True)  # computed between the conv and its BN
        return self.bn(a) * b


class ReluBnAfterConv(nn.Module):
    """relu(x) → BN, with a conv computed just before the BN in graph order: the BN stays."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(x)
        c = self.conv(x)  # right before the BN in graph order, but not its input
        return self.bn(r) + c


class NamedLikeOps(nn.Module):
    """BNs on inputs called ``conv2d`` and ``linear``, on a parameter called ``conv``, after a bilinear upsample
    and after an add with a scalar: none of them folds."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.conv = nn.Parameter(torch.randn(2, 3, 4, 4))
        self.bn_input, self.bn_param = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
        self.bn_linear = nn.BatchNorm1d(features)
        self.bn_upsample, self.bn_scalar = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
        self.real = nn.Conv2d(3, 3, 1)

    def forward(self, conv2d: torch.Tensor, linear: torch.Tensor) -> tuple[torch.Tensor, ...]:
        up = torch.nn.functional.interpolate(conv2d, scale_factor=2.0, mode="bilinear")
        return (
            self.bn_input(conv2d),
            self.bn_linear(linear),
            self.bn_param(self.conv),
            self.bn_upsample(up),
            self.bn_scalar(self.real(conv2d) + 1.0),
        )


class CatOfConvs(nn.Module):
    """BN after cat([conv_a(x), conv_b(x)]): both cat inputs are convs, the BN's input is the cat: it stays."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, channels, 3, padding=1), nn.Conv2d(3, channels, 1)
        self.bn = nn.BatchNorm2d(2 * channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.cat([self.a(x), self.b(x)], dim=1))


# --- evidence -----------------------------------------------------------------------------------


def _batch_norm_nodes(gm: GraphModule) -> list[Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target in BATCH_NORMS]


def _has_bias(source: Any) -> bool | None:
    """Whether a conv or linear ``source`` has a bias argument (None for any other node)."""
    if not isinstance(source, Node) or source.op != "call_function":
        return None
    if not str(source.target).startswith(("aten.conv", "aten.linear")):
        return None
    return len(source.args) > 2 and source.args[2] is not None


_KEPT: dict[Hashable, frozenset[str]] = {}
"""``kept_batch_norms`` of the models seen in this process, by ``export_cache.key_of``."""


def kept_batch_norms(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> frozenset[str]:
    """The names of the BNs that ``prepare_pt2e`` keeps in ``model`` exported on ``inputs`` (the truth a prediction
    is judged by). No student code is involved: it is remembered by everything the export depends on
    (``common.export_cache.key_of``: the classes, weights and flags of every submodule, the inputs' bytes), so the
    recording, the replay and every later submission on the same seed prepare each hidden model once."""
    try:
        key: Hashable | None = key_of(model, inputs, None)
    except Unkeyable:
        key = None
    if key is not None and key in _KEPT:
        return _KEPT[key]
    kept = frozenset(n.name for n in _batch_norm_nodes(prepare_pt2e(export_module(model, inputs), NoLabels())))
    if key is not None:
        if len(_KEPT) >= 512:
            _KEPT.clear()
        _KEPT[key] = kept
    return kept


def judge_model(
    ns: Namespace,
    label: str,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    graph: GraphModule | None = None,
) -> dict[str, Any]:
    """For every BN of ``model``: the student's prediction and whether prepare_pt2e really kept it.

    ``graph``: the graph the student is handed (``model`` exported by default; ``renamed_graph`` for
    names that lie). BNs keep their export names in it, so they match the truth's. Every call must leave
    the graph as it was: what changed is kept under the key ``changed`` (``label: [changes]``).
    """
    kept = kept_batch_norms(model, inputs)
    gm = graph if graph is not None else export_module(model, inputs)
    found: dict[str, Any] = {}
    for bn in _batch_norm_nodes(gm):
        source = bn.args[0]
        read = f"{source.name}：{source.target}" if isinstance(source, Node) else repr(source)
        where = f"{label} 的 {bn.name}（輸入是 {read}）"
        found[bn.name] = {"where": where, "survives": bn.name in kept, "input_has_bias": _has_bias(source)}
    before = graph_state(gm)
    for bn in _batch_norm_nodes(gm):
        answer = ns["bn_survives"](bn)
        if type(answer) is not bool:
            raise EvidenceError(f"bn_survives 應該回傳 True 或 False（bool），收到 {type(answer).__name__}")
        found[bn.name]["predicted"] = answer
    out: dict[str, Any] = {f"{label}/{name}": record for name, record in found.items()}
    changes = graph_changes(before, gm)
    out["changed"] = {label: changes} if changes else {}
    return out


def merge(*parts: dict[str, Any]) -> dict[str, Any]:
    """The records of several ``judge_model`` calls in one dict (their ``changed`` merged too)."""
    merged: dict[str, Any] = {"changed": {}}
    for part in parts:
        merged["changed"] |= part.get("changed", {})
        merged |= {key: record for key, record in part.items() if key != "changed"}
    return merged


def conv_family(ns: Namespace, seed: int) -> Any:
    c = seed_size(seed, 3, 6)
    zoo = _stats(ConvZoo(c), seed)
    zoo_inputs = seeded_inputs(seed, (2, 3, 8), (2, 3, 6, 6), (1, 3, 4, 4, 4))
    late = _stats(ConvThenBn(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d, c), seed + 1)
    later = _stats(ConvBnLater(c), seed + 7)
    biasless = _stats(BiaslessConvs(c), seed + 8)
    return merge(
        judge_model(ns, "九種 conv（1d/2d/3d、數字與字串 padding、transpose）各接一個 BN", zoo, zoo_inputs),
        judge_model(
            ns,
            "沒有 bias 的 conv2d、conv1d、conv_transpose2d 各接一個 BN",
            biasless,
            seeded_inputs(seed + 8, (2, 3, 6, 6), (2, 3, 8)),
        ),
        judge_model(ns, "conv → BN → relu → BN", late, seeded_inputs(seed + 1, (2, 3, 6, 6))),
        judge_model(
            ns,
            "conv → sigmoid、sum → BN(conv)（圖的順序上 BN 不緊接在 conv 後面）",
            later,
            seeded_inputs(seed, (2, 3, 6, 6)),
        ),
    )


def linear_rank(ns: Namespace, seed: int) -> Any:
    f, o = seed_size(seed, 4, 7), seed_size(seed + 1, 3, 6)
    length = seed_size(seed + 2, 3, 5)
    models = [
        ("2-D linear", LinearThenBn(f, o, o, nn.BatchNorm1d), (4, f)),
        ("2-D linear（沒有 bias）", LinearThenBn(f, o, o, nn.BatchNorm1d, bias=False), (4, f)),
        ("flatten → linear", FlattenLinearBn(3 * 2 * 2, o), (4, 3, 2, 2)),
        ("3-D linear", LinearThenBn(f, o, length, nn.BatchNorm1d), (2, length, f)),
        ("3-D linear（dim 1、in_features、out_features 一樣大）", LinearThenBn(o, o, o, nn.BatchNorm1d), (2, o, o)),
        ("4-D linear", LinearThenBn(f, o, 3, nn.BatchNorm2d), (2, 3, length, f)),
    ]
    return merge(
        *(
            judge_model(ns, label, _stats(model, seed + index), seeded_inputs(seed + index, shape))
            for index, (label, model, shape) in enumerate(models)
        )
    )


def not_directly_after(ns: Namespace, seed: int) -> Any:
    c = seed_size(seed, 2, 5)
    f = seed_size(seed, 3, 6)
    length = seed_size(seed + 1, 3, 5)
    named = _stats(ModuleNamed(f, length), seed + 5)
    named_inputs = seeded_inputs(seed + 5, (2, length, f), (2, 3, 4, 4), (4, f))
    return merge(
        judge_model(ns, "多種 op 之後的 BN", _stats(BnAfterOtherOps(c), seed), seeded_inputs(seed, (2, 3, 8, 8))),
        judge_model(ns, "linear → relu → BN", _stats(LinearReluBn(f), seed + 1), seeded_inputs(seed, (4, f))),
        judge_model(
            ns,
            "relu → BN（圖的順序上 BN 前面緊接著一個 conv）",
            _stats(ReluBnAfterConv(), seed + 2),
            seeded_inputs(seed, (2, 3, 6, 6)),
        ),
        judge_model(
            ns,
            "名字像 op 的輸入與參數（conv2d、linear、conv）、bilinear upsample、加純量之後的 BN",
            _stats(NamedLikeOps(f), seed + 3),
            seeded_inputs(seed, (2, 3, 4, 4), (5, f)),
        ),
        judge_model(ns, "cat([conv, conv]) → BN", _stats(CatOfConvs(c), seed + 4), seeded_inputs(seed, (2, 3, 6, 6))),
        judge_model(
            ns,
            "2-D 輸入的 mm、addmm、matmul（@）之後的 BN",
            _stats(MatmulsThenBn(f, c + 1), seed + 6),
            seeded_inputs(seed + 6, (4, f)),
        ),
        judge_model(
            ns,
            "op 依 module 改名的圖（叫 conv_90 的是 3-D 輸入的 linear、叫 linear_91 的是 conv、叫 conv_act_92 的是 relu）",
            named,
            named_inputs,
            graph=renamed_graph(named, named_inputs),
        ),
    )


def shared_output(ns: Namespace, seed: int) -> Any:
    c, f = seed_size(seed, 2, 5), seed_size(seed + 1, 3, 6)
    return merge(
        judge_model(
            ns, "conv 的輸出還有別的 consumer", _stats(ConvSharedOutput(c), seed), seeded_inputs(seed, (2, 3, 6, 6))
        ),
        judge_model(
            ns, "linear 的輸出還有別的 consumer", _stats(LinearSharedOutput(f), seed + 1), seeded_inputs(seed, (4, f))
        ),
    )


EXERCISES = with_hidden_cases(
    PUBLIC,
    bn_survives={
        "conv_family": conv_family,
        "linear_rank": linear_rank,
        "not_directly_after": not_directly_after,
        "shared_output": shared_output,
    },
)


STANDINS = {
    "bn_survives": lambda node: False,
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a case goes on to export all its models instead of stopping at its first check."""
