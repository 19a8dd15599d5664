"""M02-1 比較 observer: observer_errors and best_observer, judged on hidden data and observers.

Each case builds fresh observers (the student never chooses their configuration) and seeded
calibration batches, and asks the student's functions for every observer's quantization error
and for the best observer (``selfcheck.public.m02_1.run_scenario``). Scenarios are built so
that different observers win: a channel outlier (PerChannelMinMax), an outlier in a late batch
(MinMax beats MovingAverage), data that is never negative (affine beats symmetric) and
long-tailed data (Histogram beats MinMax). Every scenario appears on every seed; observer
names are shuffled per seed, so no fixed answer fits.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.sandboxed.cases.base import Namespace, seed_size, with_hidden_cases
from selfcheck.public.m02_1 import PUBLIC, ObserverFactory, observer_factory, run_scenario


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 104729 + salt)


def _shuffled(seed: int, factories: dict[str, ObserverFactory]) -> dict[str, ObserverFactory]:
    order = torch.randperm(len(factories), generator=_generator(seed, 17)).tolist()
    names = list(factories)
    return {names[i]: factories[names[i]] for i in order}


def scenario(ns: Namespace, seed: int, title: str, factories: dict[str, ObserverFactory], batches: list) -> Any:
    return run_scenario(ns, title, _shuffled(seed, factories), batches)


# --- data ---------------------------------------------------------------------------------------


def channel_outlier_batches(seed: int) -> list[torch.Tensor]:
    g = _generator(seed, 1)
    channels = seed_size(seed, 4, 10)
    batches = [torch.randn(seed_size(seed, 32, 64), channels, generator=g) for _ in range(seed_size(seed, 4, 8))]
    channel = int(torch.randint(channels, (1,), generator=g))
    batches[int(torch.randint(len(batches), (1,), generator=g))][0, channel] = 10.0 + 10 * float(
        torch.rand(1, generator=g)
    )
    return batches


def late_outlier_batches(seed: int) -> list[torch.Tensor]:
    """5–9 batches; a large negative outlier in one of the later half (never the first batch)."""
    g = _generator(seed, 2)
    count = seed_size(seed, 5, 9)
    batches = [torch.randn(seed_size(seed, 40, 80), seed_size(seed, 3, 6), generator=g) for _ in range(count)]
    where = int(torch.randint(count // 2, count, (1,), generator=g))
    batches[where][1, 0] = -(8.0 + 8 * float(torch.rand(1, generator=g)))
    return batches


def relu_batches(seed: int) -> list[torch.Tensor]:
    g = _generator(seed, 3)
    return [torch.relu(torch.randn(seed_size(seed, 40, 80), 6, generator=g)) * 2 for _ in range(seed_size(seed, 3, 6))]


def laplace_batches(seed: int) -> list[torch.Tensor]:
    g = _generator(seed, 4)
    batches = []
    for _ in range(8):
        u = torch.rand(1024, 8, generator=g) - 0.5
        batches.append(-torch.sign(u) * torch.log1p(-2 * u.abs()))
    return batches


def weight_batches(seed: int) -> list[torch.Tensor]:
    g = _generator(seed, 5)
    rows = seed_size(seed, 8, 16)
    weight = torch.randn(rows, 3, 3, 3, generator=g) * (torch.rand(rows, 1, 1, 1, generator=g) * 3 + 0.05)
    return [weight]


# --- scenarios ----------------------------------------------------------------------------------


def four_observers() -> dict[str, ObserverFactory]:
    return {
        "MinMax": observer_factory("MinMax"),
        "MovingAverage": observer_factory("MovingAverage"),
        "Histogram": observer_factory("Histogram"),
        "PerChannel": observer_factory("PerChannel", ch_axis=1),
    }


def case_channel_outlier(ns: Namespace, seed: int) -> Any:
    title = "一個 channel 有 outlier，四種 observer（int8 [-128,127] affine）"
    return scenario(ns, seed, title, four_observers(), channel_outlier_batches(seed))


def case_late_outlier(ns: Namespace, seed: int) -> Any:
    factories = {"MinMax": observer_factory("MinMax"), "MovingAverage": observer_factory("MovingAverage")}
    title = "outlier 出現在後面的 batch"
    return scenario(ns, seed, title, factories, late_outlier_batches(seed))


def case_relu(ns: Namespace, seed: int) -> Any:
    factories = {
        "MinMax_symmetric": observer_factory("MinMax", -127, 127, symmetric=True),
        "Histogram_symmetric": observer_factory("Histogram", -127, 127, symmetric=True),
        "MinMax_affine": observer_factory("MinMax"),
    }
    title = "ReLU 之後的資料（沒有負值）"
    return scenario(ns, seed, title, factories, relu_batches(seed))


def case_long_tail(ns: Namespace, seed: int) -> Any:
    factories = {"MinMax": observer_factory("MinMax"), "Histogram": observer_factory("Histogram")}
    title = "長尾分布（Laplace），65536 個值"
    return scenario(ns, seed, title, factories, laplace_batches(seed))


def case_configs(ns: Namespace, seed: int) -> Any:
    """Observers whose range is not their dtype's: a 4-bit MovingAverage clips the late outlier at -8."""
    factories = {
        "MinMax_symmetric": observer_factory("MinMax", -127, 127, symmetric=True),
        "MovingAverage_uint8": observer_factory("MovingAverage", 0, 255, averaging_constant=0.3),
        "MovingAverage_4bit": observer_factory("MovingAverage", -8, 7, averaging_constant=0.05),
        "Histogram_256_bins": observer_factory("Histogram", bins=256),
        "PerChannel_symmetric": observer_factory("PerChannel", -127, 127, symmetric=True, ch_axis=1),
        "MinMax_4bit": observer_factory("MinMax", -8, 7),
    }
    title = "不同設定的 observer（範圍、qscheme、averaging_constant、bins）"
    return scenario(ns, seed, title, factories, late_outlier_batches(seed + 1000))


def case_weight(ns: Namespace, seed: int) -> Any:
    factories = {
        "MinMax_symmetric": observer_factory("MinMax", -127, 127, symmetric=True),
        "PerChannel_symmetric": observer_factory("PerChannel", -127, 127, symmetric=True, ch_axis=0),
        "PerChannel_affine": observer_factory("PerChannel", ch_axis=0),
    }
    title = "conv weight（channel 在第 0 維，只有一個 batch）"
    return scenario(ns, seed, title, factories, weight_batches(seed))


EXERCISES = with_hidden_cases(
    PUBLIC,
    observer_errors={
        "channel_outlier": case_channel_outlier,
        "late_outlier": case_late_outlier,
        "relu": case_relu,
        "long_tail": case_long_tail,
        "configs": case_configs,
        "weight": case_weight,
    },
)
