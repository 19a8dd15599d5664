"""Public cases of M02-1 比較 observer (observer_errors, best_observer) on the chapter's own data.

Also how a scenario is run, shared with the hidden cases: the student's functions get fresh
observers built by the case (never one the student configured) and copies of the batches;
the errors come back as ``{name: float}`` and the best observer as its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import EvidenceError, plain

TITLE = "observer_errors 與 best_observer：量出每個 observer 的量化誤差"

ObserverFactory = Callable[[], torch.nn.Module]


def _qscheme(per_channel: bool, symmetric: bool) -> torch.qscheme:
    if per_channel:
        return torch.per_channel_symmetric if symmetric else torch.per_channel_affine
    return torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine


def observer_factory(
    kind: str, qmin: int = -128, qmax: int = 127, symmetric: bool = False, **extra: Any
) -> ObserverFactory:
    """A function building a fresh torchao observer of ``kind`` (MinMax, MovingAverage, Histogram, PerChannel)."""
    from common import pt2e

    dtype = torch.uint8 if qmin >= 0 else torch.int8
    cls = {
        "MinMax": pt2e.MinMaxObserver,
        "MovingAverage": pt2e.MovingAverageMinMaxObserver,
        "Histogram": pt2e.HistogramObserver,
        "PerChannel": pt2e.PerChannelMinMaxObserver,
    }[kind]
    qscheme = _qscheme(kind == "PerChannel", symmetric)

    def make() -> torch.nn.Module:
        return cls(dtype=dtype, quant_min=qmin, quant_max=qmax, qscheme=qscheme, **extra)

    return make


def describe_observer(name: str, make: ObserverFactory) -> str:
    """``name：MinMaxObserver [-128,127] per_tensor_affine …`` for messages."""
    observer = make()
    qscheme = str(observer.qscheme).removeprefix("torch.")
    text = f"{type(observer).__name__} [{observer.quant_min},{observer.quant_max}] {qscheme}"
    if hasattr(observer, "ch_axis"):
        text += f" ch_axis={observer.ch_axis}"
    if hasattr(observer, "averaging_constant"):
        text += f" averaging_constant={observer.averaging_constant}"
    if hasattr(observer, "bins"):
        text += f" bins={observer.bins}"
    return f"{name}：{text}"


def errors_value(result: Any, names: list[str]) -> dict[str, float]:
    """What observer_errors returned, as ``{name: float}`` with exactly the observers' names."""
    value = plain(result)
    if type(value) is not dict:
        raise EvidenceError(f"observer_errors 應該回傳 dict，收到 {type(value).__name__}")
    for key, number in value.items():
        if type(number) is not float:
            raise EvidenceError(f"observer_errors 的值應該是 Python float，{key!r} 的值是 {type(number).__name__}")
    if sorted(value) != sorted(names):
        raise EvidenceError(f"observer_errors 的 key 應該是 {sorted(names)}，收到 {sorted(value)}")
    return value


def run_scenario(
    ns: Namespace, title: str, factories: dict[str, ObserverFactory], batches: list[torch.Tensor]
) -> dict[str, Any]:
    """Ask the student for the errors and for the best observer, each time with fresh observers."""
    names = list(factories)
    fresh = {name: make() for name, make in factories.items()}
    errors = errors_value(ns["observer_errors"](fresh, [b.clone() for b in batches]), names)
    fresh = {name: make() for name, make in factories.items()}
    best = plain(ns["best_observer"](fresh, [b.clone() for b in batches]))
    if type(best) is not str:
        raise EvidenceError(f"best_observer 應該回傳 observer 的名字（str），收到 {type(best).__name__}")
    shape = "、".join(str(tuple(b.shape)) for b in batches[:1])
    return {
        "title": title,
        "data": f"{len(batches)} 個 batch，每個形狀 {shape}",
        "observers": [describe_observer(name, factories[name]) for name in names],
        "errors": errors,
        "best": best,
    }


# --- public cases: the chapter's data ------------------------------------------------------------


def chapter_batches(seed: int, outlier_batch: int) -> list[torch.Tensor]:
    """Like the chapter's ``make_batches``: 8 batches of (64, 8), one outlier 12.0 in channel 2."""
    generator = torch.Generator().manual_seed(seed)
    batches = [torch.randn(64, 8, generator=generator) for _ in range(8)]
    batches[outlier_batch][10, 2] = 12.0
    return batches


def chapter_observers() -> dict[str, ObserverFactory]:
    """The chapter's four observers, int8 [-128, 127] affine (PerChannel along axis 1)."""
    return {
        "MinMax": observer_factory("MinMax"),
        "MovingAverage": observer_factory("MovingAverage"),
        "Histogram": observer_factory("Histogram"),
        "PerChannel": observer_factory("PerChannel", ch_axis=1),
    }


def chapter_late_outlier(ns: Namespace, seed: int) -> Any:
    return run_scenario(ns, "章節的資料：outlier 在第 5 個 batch", chapter_observers(), chapter_batches(seed, 5))


def chapter_first_outlier(ns: Namespace, seed: int) -> Any:
    return run_scenario(ns, "章節的資料：outlier 在第 0 個 batch", chapter_observers(), chapter_batches(seed, 0))


def uint8_and_symmetric(ns: Namespace, seed: int) -> Any:
    """ReLU-like data (no negatives) for uint8 affine and int8 symmetric MinMax."""
    generator = torch.Generator().manual_seed(seed + 1)
    batches = [torch.relu(torch.randn(64, 8, generator=generator)) for _ in range(4)]
    factories = {
        "MinMax_symmetric": observer_factory("MinMax", -127, 127, symmetric=True),
        "MinMax_uint8": observer_factory("MinMax", 0, 255),
    }
    return run_scenario(ns, "沒有負值的資料：uint8 affine 與 int8 symmetric", factories, batches)


def four_bit(ns: Namespace, seed: int) -> Any:
    """The chapter's data with 4-bit [-8, 7] observers: MovingAverage clips the late outlier at its range."""
    factories = {
        "MovingAverage_4bit": observer_factory("MovingAverage", -8, 7),
        "MinMax_4bit": observer_factory("MinMax", -8, 7),
    }
    return run_scenario(ns, "章節的資料，4 bit [-8,7] 的 observer", factories, chapter_batches(seed, 5))


def conv_weight(ns: Namespace, seed: int) -> Any:
    """A conv weight (8 output channels, axis 0) with very different scales per channel: one batch."""
    generator = torch.Generator().manual_seed(seed + 2)
    scales = torch.linspace(0.05, 3.0, 8).reshape(8, 1, 1, 1)
    weight = torch.randn(8, 3, 3, 3, generator=generator) * scales
    factories = {
        "MinMax_symmetric": observer_factory("MinMax", -127, 127, symmetric=True),
        "PerChannel_symmetric": observer_factory("PerChannel", -127, 127, symmetric=True, ch_axis=0),
    }
    return run_scenario(ns, "conv weight（channel 在第 0 維）", factories, [weight])


PUBLIC = declare(
    __name__,
    Exercise(
        "observer_errors",
        TITLE,
        ("observer_errors", "best_observer"),
        {
            "late_outlier": chapter_late_outlier,
            "first_outlier": chapter_first_outlier,
            "uint8_symmetric": uint8_and_symmetric,
            "four_bit": four_bit,
            "conv_weight": conv_weight,
        },
    ),
)
