"""Public cases of M02-1 比較 observer (observer_errors, best_observer) on the chapter's own data.

Also how a scenario is run, shared with the hidden cases: the student's functions get fresh
observers built by the case (never one the student configured) and copies of the batches;
the errors come back as ``{name: float}`` and the best observer as its name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare
from selfcheck.evidence import EvidenceError, plain
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

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


# --- where the chapter teaches it ----------------------------------------------------------------

RULES = Section("練習 1：observer_errors 與 best_observer（5 分）")
SAME_DATA = Section("A. 四個 observer 看同一批資料")
ERROR = Section("B. 量化誤差")
BATCH_ORDER = Section("C. MovingAverage 與 batch 的順序")
HISTOGRAM = Section("D. Histogram 什麼時候比 MinMax 好")
RANGES = Section("B. symmetric 與整數範圍", notebook="M02-3")


# --- reading the evidence (the public cases' and the hidden ones' alike) ---------------------------
# Each scenario: "observers" (``name：Class [qmin,qmax] qscheme …``), "errors" {name: MSE}, "best", "data".

RELATIVE = 1e-4
DESCRIPTION = re.compile(r"^(?P<name>.+?)：(?P<cls>\w+) \[(?P<qmin>-?\d+),(?P<qmax>-?\d+)\] (?P<qscheme>\w+)")


def scenarios(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(case, got, want)`` for each scenario both evidences hold."""
    found = []
    for case in diagnosis.cases(expected):
        got, want = diagnosis.value(seen, case), diagnosis.value(expected, case)
        if isinstance(got, dict) and isinstance(want, dict):
            if isinstance(got.get("errors"), dict) and isinstance(want.get("errors"), dict):
                found.append((case, got, want))
    return found


def observers_of(scenario: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Name → ``{"cls", "qmin", "qmax", "qscheme"}`` from the scenario's descriptions."""
    found = {}
    for text in scenario.get("observers") or []:
        match = DESCRIPTION.match(str(text))
        if match:
            found[match["name"]] = {
                "cls": match["cls"],
                "qmin": int(match["qmin"]),
                "qmax": int(match["qmax"]),
                "qscheme": match["qscheme"],
            }
    return found


def _close(a: Any, b: Any, rel: float = RELATIVE) -> bool:
    return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def wrong_observers(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [name for name, number in want["errors"].items() if not _close(got["errors"].get(name), number)]


def _all_wrong(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any], list[str]]]:
    return [
        (case, got, want, wrong)
        for case, got, want in scenarios(seen, expected)
        if (wrong := wrong_observers(got, want))
    ]


def _batches(scenario: dict[str, Any]) -> int | None:
    """How many batches the scenario has (from its ``data`` text: ``5 個 batch，…``)."""
    match = re.match(r"(\d+) 個 batch", str(scenario.get("data", "")))
    return int(match.group(1)) if match else None


def _elements(scenario: dict[str, Any]) -> int | None:
    """How many values the scenario's data holds: batches × the batch shape's product."""
    match = re.match(r"(\d+) 個 batch，每個形狀 \(([\d, ]+)\)", str(scenario.get("data", "")))
    if not match:
        return None
    count = int(match.group(1))
    for size in match.group(2).split(","):
        if size.strip():
            count *= int(size)
    return count


def _channel_axis_crash(seen: Any, expected: Any) -> bool:
    return any(
        error == "RuntimeError" and "scale and zero-point are not consistent" in diagnosis.error_message(seen, case)
        for case, error in diagnosis.errors(seen).items()
    )


def _int8_range(seen: Any, expected: Any) -> bool:
    """A uint8 [0, 255] observer goes wrong (or a zero point above 127 crashes), and every wrong observer has
    another range than int8's: the range is always [-128, 127]."""
    if any(
        "must be between `quant_min` and `quant_max`" in diagnosis.error_message(seen, case)
        for case in diagnosis.errors(seen)
    ):
        return True
    ranges = [
        (observers_of(want).get(name, {}).get("qmin"), observers_of(want).get(name, {}).get("qmax"))
        for _, _, want, wrong in _all_wrong(seen, expected)
        for name in wrong
    ]
    return bool(ranges) and (0, 255) in ranges and (-128, 127) not in ranges


def _ratios(seen: Any, expected: Any) -> list[tuple[dict[str, Any], list[float]]]:
    found = []
    for _, got, want in scenarios(seen, expected):
        pairs = [(got["errors"].get(n), w) for n, w in want["errors"].items()]
        if all(isinstance(g, float) and isinstance(w, float) and w > 0 for g, w in pairs):
            found.append((want, [g / w for g, w in pairs]))
    return found


def _summed(seen: Any, expected: Any) -> bool:
    """Every error is the key's times the number of values: a sum of squares, not their mean."""
    found = _ratios(seen, expected)
    return bool(found) and all(
        (count := _elements(want)) is not None and count > 1 and all(_close(r, float(count), 1e-3) for r in ratios)
        for want, ratios in found
    )


def _not_squared(seen: Any, expected: Any) -> bool:
    """Errors that behave like a root of the MSE (MAE, RMSE): their square is about the key's MSE."""
    values = []
    for _, got, want in scenarios(seen, expected):
        for name, number in want["errors"].items():
            mine = got["errors"].get(name)
            if isinstance(mine, float) and number > 0 and mine > 0:
                values.append(mine * mine / number)
    if len(values) < 3:
        return False
    values.sort()
    middle = values[len(values) // 2]
    if all(_close(v, 1.0) for v in values):
        return True  # the root of the MSE
    return 0.3 <= middle <= 1.2  # the mean of absolute values: about the root of the MSE


def _histogram_as_min_max(seen: Any, expected: Any) -> bool:
    """A Histogram observer's error equals a MinMax observer's of the same range, where the key's differ:
    the range came from min_val / max_val, not from calculate_qparams."""
    for _, got, want in scenarios(seen, expected):
        kinds = observers_of(want)
        for name, info in kinds.items():
            if info["cls"] != "HistogramObserver" or _close(got["errors"].get(name), want["errors"].get(name)):
                continue
            for other, twin in kinds.items():
                if twin["cls"] != "MinMaxObserver" or (twin["qmin"], twin["qmax"]) != (info["qmin"], info["qmax"]):
                    continue
                mine = got["errors"].get(name)
                if _close(mine, got["errors"].get(other), 1e-6) or _close(mine, want["errors"].get(other), 1e-6):
                    return True
    return False


def _only(
    seen: Any, expected: Any, test: Callable[[dict[str, Any]], bool]
) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """``(got, want, name)`` for each wrong observer when all of them pass ``test`` (empty otherwise)."""
    found = []
    for _, got, want, wrong in _all_wrong(seen, expected):
        kinds = observers_of(want)
        for name in wrong:
            if not test(kinds.get(name, {})):
                return []
            found.append((got, want, name))
    return found


def _per_channel_as_tensor(seen: Any, expected: Any) -> bool:
    """Only per-channel observers are wrong, and all worse than the key's: one scale for every channel."""
    found = _only(seen, expected, lambda info: str(info.get("qscheme", "")).startswith("per_channel"))
    return bool(found) and all(got["errors"][name] > want["errors"][name] for got, want, name in found)


def _narrow(info: dict[str, Any]) -> bool:
    span = info.get("qmax", 0) - info.get("qmin", 0)
    return 0 < span < 250


def _dtype_range(seen: Any, expected: Any) -> bool:
    """Only observers with a range narrower than their dtype's (4 bit [-8, 7]) are wrong: the values were not
    clipped at the observer's quant_min / quant_max."""
    return bool(_only(seen, expected, _narrow))


def _moving_average_only(seen: Any, expected: Any) -> bool:
    """Only the observers whose state depends on how the data arrives are wrong (MovingAverage, and slightly the
    Histogram, whose bins follow the first batch), a MovingAverage among them: they saw the data once."""
    found = _only(seen, expected, lambda info: info.get("cls") in (MOVING_AVERAGE, "HistogramObserver"))
    return any(observers_of(want).get(name, {}).get("cls") == MOVING_AVERAGE for _, want, name in found)


MOVING_AVERAGE = "MovingAverageMinMaxObserver"


def _single_batch_right(seen: Any, expected: Any) -> bool:
    """Where there is one batch everything is right, and some scenario with several batches is wrong."""
    found = scenarios(seen, expected)
    single = [(got, want) for _, got, want in found if _batches(want) == 1]
    several = [(got, want) for _, got, want in found if (_batches(want) or 0) > 1]
    return (
        bool(single)
        and all(not wrong_observers(got, want) for got, want in single)
        and any(wrong_observers(got, want) for got, want in several)
    )


def _early_qparams(seen: Any, expected: Any) -> bool:
    """MinMax errors never above the key's and some below: each batch measured with the range seen so far."""
    if not _single_batch_right(seen, expected):
        return False
    smaller = False
    for _, got, want in scenarios(seen, expected):
        for name, info in observers_of(want).items():
            if info["cls"] != "MinMaxObserver":
                continue
            mine, key = got["errors"].get(name), want["errors"].get(name)
            if not isinstance(mine, float) or not isinstance(key, float):
                return False
            if mine > key * (1 + RELATIVE) + 1e-12:
                return False
            smaller = smaller or not _close(mine, key)
    return smaller


def _bests(seen: Any, expected: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(got, want) for _, got, want in scenarios(seen, expected) if isinstance(got.get("best"), str)]


def _best_disagrees(got: dict[str, Any]) -> bool:
    errors = got["errors"]
    return bool(errors) and got["best"] != min(errors, key=errors.get)


def _best_by(seen: Any, expected: Any, pick: Callable[[dict[str, float]], str]) -> bool:
    """Wherever the best is not the student's own smallest error (at least twice), it is ``pick(errors)``."""
    wrong = [got for got, _ in _bests(seen, expected) if _best_disagrees(got)]
    return len(wrong) >= 2 and all(got["best"] == pick(got["errors"]) for got in wrong)


def _best_first_name(seen: Any, expected: Any) -> bool:
    return _best_by(seen, expected, min)


def _best_largest(seen: Any, expected: Any) -> bool:
    return _best_by(seen, expected, lambda errors: max(errors, key=errors.get))


def _best_not_measured(seen: Any, expected: Any) -> bool:
    return any(_best_disagrees(got) for got, _ in _bests(seen, expected))


# --- practice after a mistake (issue 50): one idea each, checked on tiny tensors of its own ----------------


def _short(values: Any) -> Any:
    """A tensor (or anything else) as a short list for a message."""
    if isinstance(values, torch.Tensor):
        return [round(v, 3) for v in values.detach().float().flatten().tolist()]
    return values


def _same_values(got: Any, want: torch.Tensor) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and torch.allclose(got.detach().float(), want, rtol=1e-4, atol=1e-4)
    )


def _reference_fake_quantize(observer: Any, x: torch.Tensor) -> torch.Tensor:
    scale, zero_point = observer.calculate_qparams()
    if observer.qscheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        return torch.fake_quantize_per_channel_affine(
            x, scale, zero_point.to(torch.int32), observer.ch_axis, observer.quant_min, observer.quant_max
        )
    return torch.fake_quantize_per_tensor_affine(
        x, float(scale), int(zero_point), observer.quant_min, observer.quant_max
    )


def _calibrated(make: ObserverFactory, *batches: torch.Tensor) -> torch.nn.Module:
    observer = make()
    for batch in batches:
        observer(batch)
    return observer


def _tensor_problem(title: str, want: torch.Tensor, answer: Callable[..., Any], *args: Any) -> str | None:
    """What is wrong with the tensor ``answer(*args)`` returns beside ``want`` (None when they agree). A crash
    is reported, not raised, so that one case crashing does not hide the others; the stub's
    NotImplementedError goes through."""
    try:
        got = answer(*args)
    except NotImplementedError:
        raise
    except Exception as error:
        return f"{title}：執行時出錯（{type(error).__name__}: {error}）"
    if _same_values(got, want):
        return None
    shape = (
        f"（shape {tuple(got.shape)}，應該是 {tuple(want.shape)}）"
        if isinstance(got, torch.Tensor) and got.shape != want.shape
        else ""
    )
    return f"{title}：應該是 {_short(want)}，你的是 {_short(got)}{shape}"


def _check_fake_quantize_tensor(fake_quantize_tensor: Any) -> list[str]:
    data = torch.tensor([-1.0, -0.3, 0.0, 0.4, 2.0, 3.1])
    problems = []
    for title, make, seen, x in (
        ("uint8 [0, 255] 的 MinMaxObserver", observer_factory("MinMax", 0, 255), data, data),
        ("4 bit [-8, 7] 的 MinMaxObserver（dtype 是 int8）", observer_factory("MinMax", -8, 7), data, data * 2),
        ("symmetric [-127, 127] 的 MinMaxObserver", observer_factory("MinMax", -127, 127, True), data, data),
    ):
        observer = _calibrated(make, seen)
        want = _reference_fake_quantize(observer, x)
        problems.append(_tensor_problem(f"{title}，x = {_short(x)}", want, fake_quantize_tensor, observer, x.clone()))
    return [p for p in problems if p]


FAKE_QUANTIZE_TENSOR = Practice(
    "fake_quantize_tensor",
    "寫 fake_quantize_tensor(observer, x)：observer 是看過資料的 per-tensor observer，"
    "用它的 qparams 與它自己的整數範圍把 x quantize 再 dequantize，回傳 float tensor。"
    "檢查用 uint8 [0, 255]、4 bit [-8, 7]、symmetric [-127, 127] 三個看過同一批資料的 MinMaxObserver。",
    "import torch\n\n\ndef fake_quantize_tensor(observer, x):\n    raise NotImplementedError()\n",
    _check_fake_quantize_tensor,
    "三樣東西都向 observer 拿：scale 與 zero point 來自 observer.calculate_qparams()（Histogram 的截斷、symmetric 的對稱都在裡面），"
    "範圍是 observer.quant_min、observer.quant_max（4 bit 的 dtype 還是 int8，範圍卻是 [-8, 7]）。",
    "import torch\n\n\n"
    "def fake_quantize_tensor(observer, x):\n"
    "    scale, zero_point = observer.calculate_qparams()\n"
    "    return torch.fake_quantize_per_tensor_affine(\n"
    "        x, float(scale), int(zero_point), observer.quant_min, observer.quant_max\n"
    "    )\n",
    "不要自己用 min_val、max_val 重算，也不要用 dtype 猜範圍：observer 怎麼設定，答案就跟著它。",
)


def _check_fake_quantize_channels(fake_quantize_channels: Any) -> list[str]:
    weight = torch.tensor([[0.1, -0.2, 0.3, 0.05], [4.0, -3.0, 1.0, 2.5], [0.02, 0.01, -0.03, 0.0]])
    activation = torch.linspace(-2.0, 2.0, 24).reshape(2, 3, 4) * torch.tensor([0.1, 1.0, 5.0]).reshape(1, 3, 1)
    problems = []
    for title, make, x in (
        ("weight (3, 4)，ch_axis=0", observer_factory("PerChannel", -127, 127, True, ch_axis=0), weight),
        ("activation (2, 3, 4)，ch_axis=1", observer_factory("PerChannel", ch_axis=1), activation),
    ):
        observer = _calibrated(make, x)
        want = _reference_fake_quantize(observer, x)
        problems.append(_tensor_problem(title, want, fake_quantize_channels, observer, x.clone()))
    return [p for p in problems if p]


FAKE_QUANTIZE_CHANNELS = Practice(
    "fake_quantize_channels",
    "寫 fake_quantize_channels(observer, x)：observer 是看過 x 的 PerChannelMinMaxObserver，"
    "每個 channel 用自己的 scale 與 zero point 把 x quantize 再 dequantize，回傳 float tensor。"
    "檢查用一個 channel 在第 0 維的 weight (3, 4)，和一個 channel 在第 1 維的 activation (2, 3, 4)，每個 channel 的大小差很多。",
    "import torch\n\n\ndef fake_quantize_channels(observer, x):\n    raise NotImplementedError()\n",
    _check_fake_quantize_channels,
    "calculate_qparams() 回傳的 scale 與 zero point 每個 channel 一個值，要整組交給 "
    "torch.fake_quantize_per_channel_affine；channel 在哪一維記在 observer.ch_axis，不是固定的 1。",
    "import torch\n\n\n"
    "def fake_quantize_channels(observer, x):\n"
    "    scale, zero_point = observer.calculate_qparams()\n"
    "    return torch.fake_quantize_per_channel_affine(\n"
    "        x, scale, zero_point.to(torch.int32), observer.ch_axis, observer.quant_min, observer.quant_max\n"
    "    )\n",
    "小的 channel 用大 channel 的 scale 時，幾乎全變成 0：per-channel 的好處正在於每個 channel 有自己的格子。",
)


def _check_mse(mse: Any) -> list[str]:
    problems = []
    for x, x_hat in (
        (torch.tensor([0.0, 1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 2.0, 6.0])),
        (torch.zeros(2, 4), torch.full((2, 4), 0.5)),
    ):
        want = float(((x - x_hat) ** 2).mean())
        got = mse(x.clone(), x_hat.clone())
        try:
            value = float(got)
        except (TypeError, ValueError):
            value = None
        if value is None or abs(value - want) > 1e-6:
            problems.append(f"x = {_short(x)}，x_hat = {_short(x_hat)}：均方誤差是 {want}，你的是 {_short(got)}")
    return problems


MSE = Practice(
    "mse",
    "寫 mse(x, x_hat)：x 是原值，x_hat 是量化後的值（shape 相同），回傳兩者的均方誤差（一個 float）。"
    "檢查用一組只有一個值差 3 的四個數，和一組八個值都差 0.5 的 (2, 4) tensor。",
    "import torch\n\n\ndef mse(x, x_hat):\n    raise NotImplementedError()\n",
    _check_mse,
    "均方誤差的三個字各是一步：誤差 x - x_hat，平方 ** 2，平均 .mean()（不是 .sum()，也不是絕對值，最後也不開根號）。",
    "import torch\n\n\ndef mse(x, x_hat):\n    return float(((x - x_hat) ** 2).mean())\n",
    "平均讓資料量不同的情況可以比；平方讓被截掉的 outlier 這種大誤差佔更重的份量。",
)


def _check_lowest(lowest: Any) -> list[str]:
    problems = []
    for errors in (
        {"a_minmax": 0.5, "histogram": 0.02, "moving": 0.9},
        {"zeta": 0.01, "beta": 0.3, "alpha": 0.2},
    ):
        want = min(errors, key=errors.__getitem__)
        got = lowest(dict(errors))
        if got != want:
            problems.append(f"{errors}：誤差最小的是 {want!r}，你的是 {got!r}")
    return problems


LOWEST = Practice(
    "lowest",
    "寫 lowest(errors)：errors 是 {observer 的名字: 誤差} 的 dict，回傳誤差最小的那個名字。"
    "檢查用兩個 dict，誤差最小的名字都不是字母最前面的。",
    "def lowest(errors):\n    raise NotImplementedError()\n",
    _check_lowest,
    "min(errors) 與 sorted(errors.items()) 比的都是名字；要比誤差，給 min 一個 key：min(errors, key=errors.get)。",
    "def lowest(errors):\n    return min(errors, key=errors.get)\n",
    "誤差越小越好，所以是 min，不是 max。",
)


def _check_calibrated_output(calibrated_output: Any) -> list[str]:
    batches = [
        torch.tensor([[0.5, -0.5], [1.0, 0.0]]),
        torch.tensor([[0.2, -1.0], [0.8, 0.1]]),
        torch.tensor([[6.0, -0.4], [0.3, 0.9]]),
    ]
    problems = []
    for title, make in (
        (
            "MovingAverageMinMaxObserver（averaging_constant=0.5）",
            observer_factory("MovingAverage", averaging_constant=0.5),
        ),
        ("MinMaxObserver", observer_factory("MinMax")),
    ):
        want = _reference_fake_quantize(_calibrated(make, *batches), torch.cat(batches))
        batch_copies = [b.clone() for b in batches]
        title += "，三個 batch 最後一個有 6.0"
        problems.append(_tensor_problem(title, want, calibrated_output, make(), batch_copies, _reference_fake_quantize))
    return [p for p in problems if p]


CALIBRATED_OUTPUT = Practice(
    "calibrated_output",
    "寫 calibrated_output(observer, batches, fake_quantize)：用 batches 校準這個新的 observer，"
    "再回傳全部資料（接起來的 batches）fake quantize 之後的值；fake_quantize(observer, x) 由檢查傳給你。"
    "檢查用三個 batch（最後一個有 outlier 6.0），observer 有 MovingAverage 與 MinMax。",
    "import torch\n\n\ndef calibrated_output(observer, batches, fake_quantize):\n    raise NotImplementedError()\n",
    _check_calibrated_output,
    "分兩段：先 for batch in batches: observer(batch)，一個一個依序看（MovingAverage 每看一個 batch 移動一點）；"
    "迴圈結束後範圍才定下來，這時才 fake quantize，而且是 torch.cat(batches) 的全部資料。",
    "import torch\n\n\n"
    "def calibrated_output(observer, batches, fake_quantize):\n"
    "    for batch in batches:\n"
    "        observer(batch)\n"
    "    return fake_quantize(observer, torch.cat(batches))\n",
    "接起來一次餵給 MovingAverage 只更新一次；每個 batch 後就量，用的是還沒看到 outlier 的範圍。",
)


def _mean_squared_error(observer: torch.nn.Module, batches: list[torch.Tensor]) -> float:
    """The ``measure`` handed to measured_best: calibrate on the batches in turn, then the MSE on all of them."""
    for batch in batches:
        observer(batch)
    data = torch.cat(batches)
    return float(((data - _reference_fake_quantize(observer, data)) ** 2).mean())


def _best_scenarios() -> list[tuple[str, list[torch.Tensor], str]]:
    """(what the data is like, its batches, the observer with the smallest error there): each of the three wins
    or loses somewhere, by a wide margin (3×, 1.1×, 3×)."""
    u = torch.linspace(-1.0, 1.0, 41)
    return [
        ("對稱的資料，outlier 6.0 在最後一個 batch", [u, u * 0.5, torch.cat([u, torch.tensor([6.0])])], "minmax"),
        ("對稱的長尾資料，一個 batch", [torch.sign(u) * u.abs() ** 4 * 10], "symmetric"),
        ("沒有負值的資料，兩個 batch", [torch.linspace(0.0, 3.0, 21), torch.linspace(0.0, 2.0, 21)], "minmax"),
    ]


def _candidates() -> dict[str, torch.nn.Module]:
    return {
        "minmax": observer_factory("MinMax")(),
        "moving_average": observer_factory("MovingAverage", averaging_constant=0.5)(),
        "symmetric": observer_factory("MinMax", -127, 127, True)(),
    }


def _check_measured_best(measured_best: Any) -> list[str]:
    problems = []
    for title, batches, want in _best_scenarios():
        errors = {
            name: _mean_squared_error(observer, [b.clone() for b in batches])
            for name, observer in _candidates().items()
        }
        got = measured_best(_candidates(), [b.clone() for b in batches], _mean_squared_error)
        if got != want:
            shown = "、".join(f"{name} {error:.2e}" for name, error in errors.items())
            problems.append(f"{title}：量出來的誤差是 {shown}，最好的是 {want!r}，你的是 {got!r}")
    return problems


MEASURED_BEST = Practice(
    "measured_best",
    "寫 measured_best(observers, batches, measure)：observers 是 {名字: 還沒看過資料的 observer}，"
    "measure(observer, batches) 會用 batches 校準那個 observer 並回傳它的均方誤差（檢查傳給你）。回傳在這份資料上誤差最小的名字。"
    "檢查用三份資料，每次都是同樣三個 observer：minmax（int8 affine）、moving_average、symmetric。",
    "def measured_best(observers, batches, measure):\n    raise NotImplementedError()\n",
    _check_measured_best,
    "不要從資料的樣子或 observer 的種類猜：每個 observer 都交給 measure 量一次，"
    "再從量到的誤差裡取最小的，例如先做一個 {名字: 誤差} 的 dict。",
    "def measured_best(observers, batches, measure):\n"
    "    scores = {}\n"
    "    for name in observers:\n"
    "        scores[name] = measure(observers[name], batches)\n"
    "    return min(scores, key=scores.get)\n",
    "三份資料三種結果：後面才出現的 outlier 讓 MovingAverage 輸，長尾的對稱資料 symmetric 贏，沒有負值時 affine 贏。",
)

MISCONCEPTIONS = (
    Misconception(
        "fixed_channel_axis",
        "per-channel 的軸寫死成 1",
        "activation 的 channel 在第 1 維，conv weight 的 output channel 卻在第 0 維，每個 per-channel observer 記在自己的 ch_axis 裡。"
        "寫死成 1，scale 的個數和那一維的長度對不上就出錯。用 observer.ch_axis。",
        RULES,
        public=_channel_axis_crash,
        practice=FAKE_QUANTIZE_CHANNELS,
    ),
    Misconception(
        "int8_range_always",
        "quantize 的範圍寫死成 int8 [-128, 127]",
        "每個 observer 有自己的整數範圍：uint8 是 [0, 255]，4 bit 是 [-8, 7]，symmetric 是 [-127, 127]。"
        "寫死 [-128, 127] 時，uint8 的 zero point 可能超出範圍而出錯。用 observer.quant_min 與 observer.quant_max。",
        RANGES,
        public=_int8_range,
        practice=FAKE_QUANTIZE_TENSOR,
    ),
    Misconception(
        "sum_of_squares",
        "誤差用平方和，沒有取平均",
        "練習要的是均方誤差（MSE）：平方誤差的平均。平方和會隨資料的個數變大，資料量不同的情況就沒辦法比較。"
        "最後用 .mean()，不是 .sum()。",
        RULES,
        public=_summed,
        practice=MSE,
    ),
    Misconception(
        "not_squared_error",
        "誤差不是均方誤差",
        "平均絕對誤差或開過根號的 RMSE 排出來的順序可能不同：MSE 讓大的誤差（例如被截掉的 outlier）佔更重的份量，"
        "Histogram 搜尋範圍時最小化的也是平方誤差。照練習算 ((x - fake_quantize(observer, x)) ** 2).mean()。",
        ERROR,
        public=_not_squared,
        practice=MSE,
    ),
    Misconception(
        "own_range_formula",
        "自己用 min_val、max_val 算 qparams",
        "observer 的範圍不一定是看過的最小值與最大值：HistogramObserver 會搜尋要截掉多少，symmetric 的 observer 讓範圍對稱於 0。"
        "這些都在 calculate_qparams() 裡；自己用 min_val、max_val 算，就把它們全丟了。用 observer.calculate_qparams()。",
        HISTOGRAM,
        public=_histogram_as_min_max,
        practice=FAKE_QUANTIZE_TENSOR,
    ),
    Misconception(
        "per_channel_as_per_tensor",
        "per-channel 的 observer 當成 per-tensor 用",
        "PerChannelMinMaxObserver 的 calculate_qparams() 給的是每個 channel 一組 scale 與 zero point；"
        "只取一組套到整個 tensor，其他 channel 就用錯了格子。per-channel 要用 torch.fake_quantize_per_channel_affine 與 observer.ch_axis。",
        SAME_DATA,
        public=_per_channel_as_tensor,
        practice=FAKE_QUANTIZE_CHANNELS,
    ),
    Misconception(
        "range_from_dtype",
        "以為範圍由 dtype 決定",
        "4 bit 的 observer 用的 dtype 還是 int8，範圍卻是 [-8, 7]；torch.iinfo(dtype) 或 torch.quantize_per_tensor 給的是整個 dtype 的範圍，"
        "超出 [-8, 7] 的值就沒被截掉。fake quantize 時傳 observer.quant_min 與 observer.quant_max。",
        RANGES,
        public=_dtype_range,
        practice=FAKE_QUANTIZE_TENSOR,
    ),
    Misconception(
        "calibrates_once",
        "把 batch 接起來一次餵給 observer",
        "MinMax 只記極值，接起來一次看完結果一樣；MovingAverage 卻是每個 batch 移動一點，一次看完就只更新一次，範圍完全不同。"
        "校準要依序把每個 batch 交給 observer：for batch in batches: observer(batch)。",
        BATCH_ORDER,
        public=_moving_average_only,
        practice=CALIBRATED_OUTPUT,
    ),
    Misconception(
        "qparams_each_batch",
        "每個 batch 看完就算 qparams 與誤差",
        "校準是先看完所有 batch，範圍才定下來：中途算的 qparams 只反映前面幾個 batch，後面的 outlier 還沒進來。"
        "全部看完再呼叫一次 calculate_qparams()，用它量接起來的全部資料。",
        RULES,
        public=_early_qparams,
        practice=CALIBRATED_OUTPUT,
    ),
    Misconception(
        "error_on_part",
        "誤差只在一部分資料上算",
        "observer 看過全部的 batch，誤差也要在全部的資料上算：只用最後一個 batch，outlier 所在的 batch 可能根本沒算進去。"
        "用 torch.cat(batches) 接起來再量。",
        RULES,
        public=_single_batch_right,
        practice=CALIBRATED_OUTPUT,
    ),
    Misconception(
        "best_sorted_by_name",
        "以為 sorted(errors.items()) 依誤差排序",
        "sorted 一個 (名字, 誤差) 的串列，比的是第一個元素，也就是名字，取第一個就是字母最前面的 observer。"
        "要依誤差取最小的：min(errors, key=errors.get)。",
        RULES,
        public=_best_first_name,
        practice=LOWEST,
    ),
    Misconception(
        "best_is_largest",
        "best_observer 取了誤差最大的",
        "誤差越小，量化後的值越接近原值，所以最好的 observer 是 MSE 最小的那一個。"
        "用 min(errors, key=errors.get)，不是 max。",
        RULES,
        public=_best_largest,
        practice=LOWEST,
    ),
    Misconception(
        "best_not_measured",
        "不量誤差，直接猜哪個 observer 最好",
        "沒有一種 observer 永遠最好：outlier 在後面的 batch 時 MinMax 贏過 MovingAverage，資料沒有負值時 affine 贏過 symmetric，"
        "長尾資料時 Histogram 才贏過 MinMax。best_observer 要用 observer_errors 量過，再取 MSE 最小的。",
        RULES,
        public=_best_not_measured,
        practice=MEASURED_BEST,
    ),
)


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
        misconceptions=MISCONCEPTIONS,
    ),
)
