"""M08-1 兩個 XNNPACKQuantizer: quantizer_report on hidden models, with both XNNPACKQuantizers.

Every case hands the student's ``quantizer_report`` a hidden model and a fresh Quantizer (torchao's
testing XNNPACKQuantizer and ExecuTorch's, per-channel; ExecuTorch's per-tensor once) and keeps
what it returned, names sorted (``selfcheck.public.m08_1.report``). The models: a cat whose inputs
are a list (two ``getitem`` of a split, a conv without bias, the model input) followed by
max_pool2d; conv → relu → max_pool2d → conv → reshape / flatten → transpose; abs, mean, sigmoid,
softmax and tanh (nobody annotates abs, sigmoid, softmax and tanh; abs and sigmoid feed a conv and a
linear, whose labels quantize the edge from them); adds (add → relu, a residual add, linear →
relu, a scalar add); and a conv → BN → relu model whose cat and one conv are kept in fp32 by claimed
labels without a spec (cat's names each input edge with ``None``), another conv gets a claimed label
with only its weight's spec (weight-only: labelled), and sigmoid gets a label with ``_annotated`` left
False. Every model is built on every seed; seeds change sizes, the order of cat's inputs and which
conv is kept (and which is weight-only). ExecuTorch is imported only when a case runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from common.qspecs import act_spec, weight_spec
from selfcheck.public.m08_1 import PUBLIC, KeepFp32, both, make_quantizer, report

# --- hidden models ------------------------------------------------------------------------------


class CatList(nn.Module):
    """conv → split in two; cat of [both pieces, a bias-free conv, x] in a seed's order → max_pool2d."""

    def __init__(self, channels: int, first: int, order: tuple[int, ...]) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, 2, 1, bias=False)
        self.sizes = [first, channels - first]
        self.order = list(order)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low, high = torch.split(self.a(x), self.sizes, dim=1)
        parts = [high, low, self.b(x), x]
        return torch.max_pool2d(torch.cat([parts[i] for i in self.order], dim=1), 2)


class PoolChain(nn.Module):
    """conv → relu → max_pool2d → conv (no bias) → reshape → linear, and → flatten → transpose."""

    def __init__(self, channels: int, size: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 1, bias=False)
        self.fc = nn.Linear(channels * (size // 2) ** 2, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.conv2(torch.max_pool2d(torch.relu(self.conv1(x)), 2))
        return self.fc(z.reshape(z.shape[0], -1)), torch.flatten(z, 2).transpose(1, 2)


class Nobody(nn.Module):
    """abs(x) → conv → mean → sigmoid → linear → softmax, and tanh of the mean: abs, sigmoid, softmax and tanh
    stay unlabelled; abs and sigmoid are quantized all the same, by the input edge of their consumer
    (the conv, the linear), which is labelled on the consumer, not on them."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.conv(torch.abs(x)).mean((2, 3))
        return torch.softmax(self.fc(torch.sigmoid(h)), dim=-1), torch.tanh(h)


class Adds(nn.Module):
    """relu(conv(x) + conv_no_bias(x)) → residual add → mean → linear → relu → linear → + 1."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1, bias=False)
        self.c = nn.Conv2d(channels, channels, 3, padding=1)
        self.fc1 = nn.Linear(channels, channels)
        self.fc2 = nn.Linear(channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.a(x) + self.b(x))
        t = s + self.c(s)
        return self.fc2(torch.relu(self.fc1(t.mean((2, 3))))) + 1.0


class BnCat(nn.Module):
    """cat of relu(bn(conv(x))), conv(x), conv_no_bias(x) → sigmoid; the BN folds into its conv."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.b = nn.Conv2d(3, channels, 1)
        self.c = nn.Conv2d(3, channels, 1, bias=False)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([torch.relu(self.bn(self.a(x))), self.b(x), self.c(x)], dim=1)
        return torch.sigmoid(y)


class KeepSpelledOut(KeepFp32):
    """Like ``KeepFp32``, but the label on ``cat`` names each input edge with a ``None`` spec ("not quantized"),
    and the ``weight_only`` convs get a claimed label whose one spec is their weight's (weight-only quantization:
    labelled, though no activation edge and no output is)."""

    def __init__(self, inner: Quantizer, keep: Iterable[str], weight_only: Iterable[str] = ()) -> None:
        super().__init__(inner, keep)
        self.weight_only = set(weight_only)

    def annotate(self, model: GraphModule) -> GraphModule:
        self.inner.annotate(self._claim(model))
        return model

    def _claim(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.name in self.keep:
                edges = dict.fromkeys(node.all_input_nodes) if node.name == "cat" else {}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=edges, _annotated=True)
            elif node.name in self.weight_only:
                edges = {node.args[1]: weight_spec()}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map=edges, _annotated=True)
        return model


class LabelAfter(Quantizer):
    """Runs ``inner``, then labels the output of the ``label`` nodes, leaving ``_annotated`` False."""

    def __init__(self, inner: Quantizer, label: Iterable[str]) -> None:
        self.inner, self.label = inner, set(label)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        self.inner.annotate(model)
        for node in model.graph.nodes:
            if node.name in self.label:
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=act_spec())
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


# --- cases --------------------------------------------------------------------------------------

ORDERS = list(itertools.permutations(range(4)))
KEPT_CONVS = ("conv2d", "conv2d_1", "conv2d_2")


def cat_inputs(ns: Namespace, seed: int) -> Any:
    channels = seed_size(seed, 4, 7)
    model = CatList(channels, 1 + seed % (channels - 1), ORDERS[seed % len(ORDERS)])
    return both(ns, model, seeded_inputs(seed, (2, 3, 8, 8)))


def pool_chain(ns: Namespace, seed: int) -> Any:
    size = 2 * seed_size(seed, 3, 5)
    model, inputs = PoolChain(seed_size(seed, 3, 6), size), seeded_inputs(seed, (2, 3, size, size))
    result = both(ns, model, inputs)
    result["executorch_per_tensor"] = report(ns, model, inputs, make_quantizer("executorch", is_per_channel=False))
    return result


def nobody(ns: Namespace, seed: int) -> Any:
    return both(ns, Nobody(seed_size(seed, 3, 6), seed_size(seed, 3, 5)), seeded_inputs(seed, (2, 3, 6, 6)))


def adds(ns: Namespace, seed: int) -> Any:
    return both(ns, Adds(seed_size(seed, 3, 6)), seeded_inputs(seed, (2, 3, 6, 6)))


def kept(ns: Namespace, seed: int) -> Any:
    model, inputs = BnCat(seed_size(seed, 3, 6)), seeded_inputs(seed, (2, 3, 6, 6))
    keep = ["cat", KEPT_CONVS[seed % len(KEPT_CONVS)]]
    weight_only = [KEPT_CONVS[(seed + 1) % len(KEPT_CONVS)]]
    return {
        which: report(
            ns, model, inputs, LabelAfter(KeepSpelledOut(make_quantizer(which), keep, weight_only), ["sigmoid"])
        )
        for which in ("torchao", "executorch")
    }


EXERCISES = with_hidden_cases(
    PUBLIC,
    quantizer_report={"cat_inputs": cat_inputs, "pool_chain": pool_chain, "nobody": nobody, "adds": adds, "kept": kept},
)


def _export_only(model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any) -> dict[str, list[Any]]:
    """The stand-in of ``quantizer_report``: exports the model as an answer would, reports nothing."""
    from common.pt2e import export_module

    export_module(model, inputs)
    return {"unannotated": [], "shared": []}


STANDINS = {
    "quantizer_report": _export_only,
}
"""Answers of the right type and no content, for warming the fork server (``autograder.sandboxed.warm``):
with them a case goes on to export all its models instead of stopping at its first check."""
