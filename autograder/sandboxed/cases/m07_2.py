"""M07-2 訓練、凍結、convert: freeze_bn_stats on hidden training-mode graphs.

Why BN and not the observers: freezing the fake-quants is ``gm.apply(disable_observer)``, a
change of module buffers, which the grader's recording does not carry (it records what a
call returned and what it did to the graph). Freezing BN is a graph edit (each batch_norm's
``training`` argument), which it does. So the exercise is the BN half of the freezing
schedule, and the case, not the student, runs the graph afterwards: after the student's
call, the case reads every batch_norm's flag, runs training batches and checks whether the
running statistics still move, and fingerprints every other node.

The graphs: a QAT graph (conv → BN twice, prepared with fake-quants), and a training-mode
export with a conv → BN, a linear → BatchNorm1d, a BN that was already in eval mode (its
flag must stay False: toggling would unfreeze it), a max_pool2d with ceil_mode=True (a True
at args[5] that is not BN), dropout (must stay active) and an input named ``batch_norm``. The
BatchNorm1d has its own eps and momentum, and the case records every batch_norm's other arguments:
rebuilding the arguments with F.batch_norm's defaults loses them.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from selfcheck.public.m07_1 import QAT_CASE_SECONDS, qat_graph
from selfcheck.public.m07_2 import BATCH_NORM, PUBLIC, describe_frozen, export_train, freeze, run_on_batches


class ConvBn(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


class LinearBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class Mixed(nn.Module):
    """conv → BN → relu → max_pool2d(ceil_mode) → flatten → linear → BN1d → dropout, plus a frozen BN on the side input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels * 9, 6)
        self.bn1d = nn.BatchNorm1d(6, eps=1e-3, momentum=0.3)  # its own eps / momentum: freezing keeps them
        self.side = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor, batch_norm: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2, ceil_mode=True)
        y = self.bn1d(self.fc(torch.flatten(y, 1)))
        return self.drop(y) + self.side(batch_norm)


def _batches(seed: int, *shapes: tuple[int, ...]) -> list[tuple[torch.Tensor, ...]]:
    return [seeded_inputs(seed * 100 + i, *shapes) for i in range(2)]


@functools.cache
def _qat_graph(seed: int) -> GraphModule:
    """The QAT graph of ``seed``, made once per process (prepare_qat_pt2e matches conv → BN patterns
    by exporting them, about a second and a half): recording and replaying in one process, as a
    notebook's graded cell does, then reuse it. Weights come from a generator seeded with ``seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = ConvBn(seed_size(seed, 2, 4))
    return qat_graph(model, seeded_inputs(seed, (4, 3, 4, 4)))


def case_qat(ns: Namespace, seed: int) -> Any:
    # First a small training graph: an edited copy coming back instead of the graph is refused
    # there, in one sentence, before the QAT graph (whose fake-quants a copy would carry) is handed over.
    freeze(ns, export_train(LinearBn().train(), seeded_inputs(seed, (4, 3))))
    gm = copy.deepcopy(_qat_graph(seed))
    return describe_frozen(ns, gm, _batches(seed, (4, 3, 4, 4)))


def _bn_arguments(gm: GraphModule) -> list[str]:
    """Every batch_norm's arguments but the training flag (args[5]), as text: eps and momentum stay the model's."""
    return [
        ", ".join(a.name if isinstance(a, torch.fx.Node) else repr(a) for i, a in enumerate(node.args) if i != 5)
        for node in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.batch_norm.default)
    ]


def _statistics_alone(
    original: GraphModule, answered: GraphModule, batches: list[tuple[torch.Tensor, ...]]
) -> dict[str, Any] | None:
    """The student's batch_norm nodes alone: ``original`` (a copy taken before the call, its running stats
    untouched) with each batch_norm given the arguments the student's has, every other node as it was, run on
    ``batches``: whether the running stats still move. For a graph the answer left unrunnable by editing
    another node (test_others_untouched judges that), so its BN freezing is still judged on its own. ``None``
    when the student's batch_norm nodes do not map onto the original's (replaced, renamed, added, removed)."""
    mine = list(answered.graph.find_nodes(op="call_function", target=BATCH_NORM))
    theirs = list(original.graph.find_nodes(op="call_function", target=BATCH_NORM))
    by_name = {node.name: node for node in original.graph.nodes}
    if len(mine) != len(theirs) or any(a.name != b.name for a, b in zip(mine, theirs, strict=True)):
        return None
    missing = []

    def mapped(node: torch.fx.Node) -> torch.fx.Node:
        if node.name not in by_name:
            missing.append(node.name)
            return node
        return by_name[node.name]

    for answer, node in zip(mine, theirs, strict=True):
        node.args = torch.fx.node.map_arg(answer.args, mapped)
        node.kwargs = torch.fx.node.map_arg(answer.kwargs, mapped)
    if missing:
        return None
    original.recompile()
    changed, _, problem = run_on_batches(original, batches)
    return {"changed": 0 if problem else changed, "run_error": problem}


def case_mixed(ns: Namespace, seed: int) -> Any:
    channels = seed_size(seed, 2, 4)
    model = Mixed(channels).train()
    model.side.eval()  # exported with training=False: already frozen
    shapes = ((4, 3, 5, 5), (4, 6))
    gm = export_train(model, seeded_inputs(seed, *shapes))
    original = copy.deepcopy(gm)
    result = describe_frozen(ns, gm, _batches(seed, *shapes))
    result["bn_arguments"] = _bn_arguments(gm)
    if result["run_error"] is not None:
        result["statistics_alone"] = _statistics_alone(original, gm, _batches(seed, *shapes))
    if result["run_error"] is None:
        with torch.no_grad():  # dropout still active: the same input twice gives different outputs
            x = seeded_inputs(seed + 7, *shapes)
            result["dropout_active"] = not torch.equal(gm(*x), gm(*x))
    return result


EXERCISES = with_hidden_cases(
    PUBLIC,
    freeze_bn_stats={"qat": case_qat, "mixed": case_mixed},
    # the hidden case qat prepares a QAT graph (prepare_qat_pt2e, as M07-1's cases do): M07's QAT limit; the
    # public cases only export, within the default
    case_seconds={"freeze_bn_stats": QAT_CASE_SECONDS},
)
