"""Public cases of M06-1 per-tensor 與 per-channel：SQNR (sqnr, layer_sqnr) on the chapter's own models.

Also the helpers the hidden cases share: reading what the student's functions returned as
decibels (``inf`` as the text ``"inf"``, since evidence is JSON) and naming its type, a
symmetric fake-quantizer for making test tensors, a prepared / converted pair of a model, and
whether a call left the graphs it was handed as they were.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn
from torch.fx import Graph, GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

SQNR_TITLE = "sqnr：整個 tensor 或逐個 channel 的 SQNR（dB）"
LAYER_TITLE = "layer_sqnr：prepared 與 converted 逐層比較的 SQNR 表"


def db(value: Any, what: str) -> float | str:
    """One SQNR the student returned: a float (a one-element tensor is accepted), ``inf`` as ``"inf"``."""
    if type(value) is torch.Tensor and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise EvidenceError(f"{what}應該是 float，看到 {type(value).__name__}")
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def db_list(value: Any, what: str) -> list[float | str]:
    """A list of SQNRs (one per slice): a list / tuple of floats, or a one-dimensional float tensor."""
    if type(value) is torch.Tensor and value.dim() == 1 and value.dtype.is_floating_point:
        value = [float(v) for v in value]
    if type(value) not in (list, tuple):
        raise EvidenceError(f"{what}應該是 float 的 list，看到 {type(value).__name__}")
    if len(value) > 4096:
        raise EvidenceError(f"{what}太長（{len(value)} 項）")
    return [db(v, f"{what}的第 {i} 項") for i, v in enumerate(value)]


def kind_of(value: Any) -> str:
    """What a student's function returned, in words for a message: ``float``, ``list[float]``, ``tensor（shape [16]）``…

    Read on the grader's side from the recorded answer, so only what a recording keeps counts: a tensor stays a
    tensor, a tuple a tuple; a NumPy scalar arrives as the Python number it holds.
    """
    kind = type(value)
    if kind is float:
        return "float"
    if kind is torch.Tensor:
        return f"tensor（shape {list(value.shape)}）"
    if kind is list:
        inner = [kind_of(item) for item in value[:64]]
        wrong = next((k for k in inner if k != "float"), None)
        return "list[float]" if wrong is None else f"list[{wrong}]"
    if kind is tuple:
        return "tuple"
    return kind.__name__


def graph_state(gm: GraphModule) -> list[Any]:
    """A graph's nodes as text (name, op, target, arguments): equal before and after a call that left it alone."""
    return [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


def fake_quant(t: torch.Tensor, dim: int | None = None, bits: int = 8) -> torch.Tensor:
    """Symmetric fake quantization of ``t``: one scale for the tensor, or one per slice along ``dim``."""
    qmax = 2 ** (bits - 1) - 1
    if dim is None:
        scale = float(t.abs().max()) / qmax
        return torch.fake_quantize_per_tensor_affine(t, scale, 0, -qmax, qmax)
    scales = t.abs().movedim(dim, 0).flatten(1).amax(dim=1) / qmax
    zeros = torch.zeros(len(scales), dtype=torch.int32)
    return torch.fake_quantize_per_channel_affine(t, scales, zeros, dim % t.dim(), -qmax, qmax)


def outlier_weight(seed: int, out_channels: int, in_channels: int, factor: float) -> torch.Tensor:
    """A conv weight ``(out, in, 3, 3)`` whose channel ``seed % out`` is ``factor`` times larger."""
    (weight,) = seeded_inputs(seed, (out_channels, in_channels, 3, 3))
    weight[seed % out_channels] *= factor
    return weight


def quantized_pair(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, seed: int, calibrate: int = 2
) -> tuple[GraphModule, GraphModule]:
    """``(prepared, converted)`` of ``model``: export, prepare, calibrate on seeded batches, convert a copy."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    return prepared, convert_pt2e(copy.deepcopy(prepared))


def node_kinds(gm: GraphModule) -> dict[str, str]:
    """Every node of ``gm`` by name: ``op`` / ``q/dq`` for call_function nodes, else its op."""
    kinds = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            kinds[node.name] = "q/dq" if str(node.target).startswith("quantized_decomposed.") else "op"
        else:
            kinds[node.name] = str(node.op)
    return kinds


def describe_table(
    ns: Namespace, prepared: GraphModule, converted: GraphModule, inputs: tuple, kinds: bool = True
) -> dict[str, Any]:
    """``layer_sqnr(prepared, converted, inputs)`` as ``{"table": {name: dB}}``.

    With ``kinds``, also ``"kinds"``: what every node of ``converted`` is (read before the call),
    so that a check can say what an extra entry of the table was. ``"changed"`` names the graphs the
    call left different (it should only read them).
    """
    described = {"kinds": node_kinds(converted)} if kinds else {}
    before = [graph_state(prepared), graph_state(converted)]
    result = ns["layer_sqnr"](prepared, converted, inputs)
    changed = [
        name
        for name, gm, state in zip(("prepared", "converted"), (prepared, converted), before, strict=True)
        if graph_state(gm) != state
    ]
    if type(result) is not dict:
        raise EvidenceError(f"layer_sqnr 應該回傳 dict，看到 {type(result).__name__}")
    table = {}
    for key, number in result.items():
        if type(key) is Node:  # a node stands for its name
            key = key.name
        if type(key) is not str:
            raise EvidenceError(f"layer_sqnr 的 key 應該是 node 的名字（str），看到 {type(key).__name__}")
        table[safe_text(key, 80)] = db(number, f"layer_sqnr 的 {safe_text(key, 40)} ")
    return {"table": table, "changed": changed, **described}


# --- public cases -------------------------------------------------------------------------------


def sqnr_weight(ns: Namespace, seed: int) -> Any:
    """A conv weight with an outlier channel, quantized per-tensor and per-channel: whole and per channel."""
    weight = outlier_weight(seed, 6, 4, 12.0)
    result = {}
    for name, test in (("per_tensor", fake_quant(weight)), ("per_channel", fake_quant(weight, dim=0))):
        result[name] = {
            "whole": db(ns["sqnr"](weight, test), "sqnr(weight, test) "),
            "per_channel": db_list(ns["sqnr"](weight, test, dim=0), "sqnr(weight, test, dim=0) "),
        }
    return result


def sqnr_activation(ns: Namespace, seed: int) -> Any:
    """A non-negative activation (N, C, H, W) and its 6-bit version, per channel (dim=1); a copy is inf."""
    (x,) = seeded_inputs(seed + 1, (2, 3, 4, 4))
    x = torch.relu(x) + 0.5
    test = fake_quant(x, bits=6)
    return {
        "whole": db(ns["sqnr"](x, test), "sqnr(x, test) "),
        "per_channel": db_list(ns["sqnr"](x, test, dim=1), "sqnr(x, test, dim=1) "),
        "copy": db(ns["sqnr"](x, x.clone()), "sqnr(x, x.clone()) "),
    }


def sqnr_close(ns: Namespace, seed: int) -> Any:
    """Two float64 tensors near 1000 that differ by about 1e-5: float32 cannot tell them apart."""
    (base,) = seeded_inputs(seed + 2, (400,))
    (noise,) = seeded_inputs(seed + 3, (400,))
    reference = 1000.0 + base.double()
    return db(ns["sqnr"](reference, reference + 1e-5 * noise.double()), "sqnr(reference, test) ")


def sqnr_types(ns: Namespace, seed: int) -> Any:
    """What ``sqnr`` returns: a Python float, and with ``dim`` a list of Python floats."""
    (reference,) = seeded_inputs(seed + 4, (3, 5))
    test = fake_quant(reference, bits=4)
    return {"whole": kind_of(ns["sqnr"](reference, test)), "per_slice": kind_of(ns["sqnr"](reference, test, dim=0))}


def layers_small_cnn(ns: Namespace, seed: int) -> Any:
    """small_cnn quantized with the XNNPACKQuantizer (per-tensor weights)."""
    from common.models import get_model
    from common.pt2e import get_xnnpack_quantizer

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=False)
    prepared, converted = quantized_pair(get_model("small_cnn"), inputs, quantizer, seed)
    return describe_table(ns, prepared, converted, inputs, kinds=False)


def layers_residual(ns: Namespace, seed: int) -> Any:
    """residual (BN folded, an add of two tensors) with per-channel weights."""
    from common.models import get_model
    from common.pt2e import get_xnnpack_quantizer

    inputs = seeded_inputs(seed, (2, 3, 16, 16))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=True)
    prepared, converted = quantized_pair(get_model("residual"), inputs, quantizer, seed)
    return describe_table(ns, prepared, converted, inputs, kinds=False)


def sqnr_dead_channel(ns: Namespace, seed: int) -> Any:
    """An activation (N, C, H, W) after relu whose channel 1 is all zeros (a dead channel), 6-bit, per channel."""
    (x,) = seeded_inputs(seed + 5, (2, 3, 4, 4))
    x = torch.relu(x) + 0.25
    x[:, 1] = 0.0
    return db_list(ns["sqnr"](x, fake_quant(x, bits=6), dim=1), "sqnr(x, test, dim=1) ")


def sqnr_halved(ns: Namespace, seed: int) -> Any:
    """test = reference / 2: a quarter of the reference's power, noise one quarter of it: 6.02 dB."""
    (reference,) = seeded_inputs(seed + 6, (4, 5))
    return db(ns["sqnr"](reference, reference / 2), "sqnr(reference, reference / 2) ")


def sqnr_bfloat16(ns: Namespace, seed: int) -> Any:
    """A bfloat16 activation (2 or 3 significant digits) and its 4-bit version, also bfloat16."""
    (x,) = seeded_inputs(seed + 7, (4, 64))
    x = x.to(torch.bfloat16)
    return db(ns["sqnr"](x, fake_quant(x.float(), bits=4).to(torch.bfloat16)), "sqnr(x, test) ")


class Masked(nn.Module):
    """Two inputs, image and mask: sigmoid of the mask (the quantizer leaves it alone: the same output on both
    graphs, an SQNR of inf), then the model's own ``fake_quant_per_channel`` (a q/dq op by its target, on both
    graphs); the image through conv → relu → chunk (a list of two tensors); low + high × gate."""

    def __init__(self, channels: int = 2) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2 * channels, 3, padding=1)
        self.register_buffer("scales", torch.full((channels,), 0.05))
        self.register_buffer("zero_points", torch.zeros(channels, dtype=torch.int32))

    def forward(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        gate = torch.ops.quantized_decomposed.fake_quant_per_channel(
            torch.sigmoid(mask), self.scales, self.zero_points, 1, -128, 127
        )
        low, high = torch.chunk(torch.relu(self.conv(image)), 2, dim=1)
        return low + high * gate


def layers_masked(ns: Namespace, seed: int) -> Any:
    """Masked (two inputs, a chunk, a q/dq op of the model's own) with the XNNPACKQuantizer."""
    import common.pt2e  # noqa: F401  (registers the quantized_decomposed ops)
    from common.pt2e import get_xnnpack_quantizer

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Masked()
    inputs = seeded_inputs(seed, (2, 1, 6, 6), (2, 2, 6, 6))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=False)
    prepared, converted = quantized_pair(model, inputs, quantizer, seed)
    return describe_table(ns, prepared, converted, inputs)


# --- where the chapter teaches it ----------------------------------------------------------------

SQNR_FORMULA = Section("A. SQNR：用 dB 量誤差")
SQNR_RULES = Section("練習 1：sqnr（6 分）")
LAYER_TABLE = Section("C. 逐層 SQNR 表：誤差從哪一層開始")
LAYER_RULES = Section("練習 2：layer_sqnr（5 分）")


# --- reading the evidence (the public detectors here, the hidden ones in autograder/checks/test_m06_1.py) ---

RELATIVE = 1e-4
ABSOLUTE = 1e-4
"""Two SQNRs agree within 1e-4 relative or 1e-4 dB (the checks' tolerance)."""


def is_db(item: Any) -> bool:
    """An SQNR as the evidence keeps it: a float, or ``"inf"`` / ``"-inf"`` / ``"nan"``."""
    return (isinstance(item, float) and not isinstance(item, bool)) or item in ("inf", "-inf", "nan")


def same_db(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, float):
        return math.isclose(got, want, rel_tol=RELATIVE, abs_tol=ABSOLUTE)
    return got == want


def _zip(got: Any, want: Any, path: tuple[Any, ...], found: list[tuple[tuple[Any, ...], Any, Any]]) -> None:
    if isinstance(want, dict) and isinstance(got, dict):
        for key, item in want.items():
            if key in got:
                _zip(got[key], item, (*path, key), found)
    elif isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        for index, (mine, theirs) in enumerate(zip(got, want, strict=True)):
            _zip(mine, theirs, (*path, index), found)
    elif is_db(want) and is_db(got):
        found.append((path, got, want))


def db_pairs(seen: Any, expected: Any, *cases: str) -> list[tuple[tuple[Any, ...], Any, Any]]:
    """``(place, got, want)`` for every SQNR at the same place of both evidences (lists of the same length
    only); ``cases``: only these cases (all when none)."""
    found: list[tuple[tuple[Any, ...], Any, Any]] = []
    for case, record in diagnosis.cases(expected).items():
        if cases and case not in cases:
            continue
        mine = diagnosis.cases(seen).get(case)
        if isinstance(record, dict) and "value" in record and isinstance(mine, dict) and "value" in mine:
            _zip(mine["value"], record["value"], (case,), found)
    return found


def finite_pairs(seen: Any, expected: Any, *cases: str) -> list[tuple[float, float]]:
    """The ``(got, want)`` SQNRs that are finite numbers on both sides."""
    return [
        (got, want)
        for _, got, want in db_pairs(seen, expected, *cases)
        if isinstance(got, float) and isinstance(want, float)
    ]


def all_right(seen: Any, expected: Any, *cases: str) -> bool:
    """Every SQNR of these cases is there and agrees with the key's (lists of the wrong length do not)."""
    wanted = sum(1 for _ in _places(expected, cases))
    pairs = db_pairs(seen, expected, *cases)
    return wanted > 0 and len(pairs) == wanted and all(same_db(got, want) for _, got, want in pairs)


def _places(expected: Any, cases: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return [place for place, _, _ in db_pairs(expected, expected, *cases)]


def some_wrong(seen: Any, expected: Any, *cases: str) -> bool:
    """Some SQNR of these cases is at the key's place but disagrees with it."""
    return any(not same_db(got, want) for _, got, want in db_pairs(seen, expected, *cases))


def constant_ratio(seen: Any, expected: Any, *cases: str) -> float | None:
    """``k`` when every finite SQNR is ``k`` times the key's (at least three, away from 0 dB), else None."""
    pairs = [(got, want) for got, want in finite_pairs(seen, expected, *cases) if abs(want) > 0.5]
    if len(pairs) < 3:
        return None
    ratios = sorted(got / want for got, want in pairs)
    k = ratios[len(ratios) // 2]
    if all(math.isclose(r, k, rel_tol=1e-3, abs_tol=1e-6) for r in ratios):
        return k
    return None


def amplitude_ratio(seen: Any, expected: Any, *cases: str) -> bool:
    """Every SQNR twice (20·log10 of a power ratio) or half (10·log10 of an amplitude ratio) the key's."""
    k = constant_ratio(seen, expected, *cases)
    return k is not None and (math.isclose(k, 2.0, rel_tol=1e-3) or math.isclose(k, 0.5, rel_tol=1e-3))


def sign_flipped(seen: Any, expected: Any, *cases: str) -> bool:
    """Every SQNR is the key's with the sign flipped: noise over signal."""
    k = constant_ratio(seen, expected, *cases)
    return k is not None and math.isclose(k, -1.0, rel_tol=1e-3)


def not_decibels(seen: Any, expected: Any, *cases: str) -> bool:
    """The ratio itself (10^(dB/10)), or a log scale other than 10·log10 (a constant factor that is not 1, 2,
    ½ or −1: ln, log10 without the 10, log2…)."""
    pairs = finite_pairs(seen, expected, *cases)
    if len(pairs) >= 3 and all(
        want < 300 and math.isclose(got, 10 ** (want / 10), rel_tol=1e-3) for got, want in pairs
    ):
        return True
    k = constant_ratio(seen, expected, *cases)
    return k is not None and not any(math.isclose(k, m, rel_tol=1e-3) for m in (1.0, 2.0, 0.5, -1.0))


def count_factor(seen: Any, expected: Any, *cases: str) -> bool:
    """Every finite SQNR differs from the key's by 10·log10(n) for a whole number n ≥ 2 (a mean on one side of
    the ratio and a sum on the other), in the same direction everywhere."""
    pairs = finite_pairs(seen, expected, *cases)
    if len(pairs) < 3:
        return False
    signs = set()
    for got, want in pairs:
        if abs(got - want) > 70:  # more elements than any case has
            return False
        n = 10 ** (abs(got - want) / 10)
        if n < 1.5 or not math.isclose(n, round(n), rel_tol=1e-3):
            return False
        signs.add(got > want)
    return len(signs) == 1


def inf_made_finite(seen: Any, expected: Any, *cases: str) -> bool:
    """Where the key says ``inf`` (identical tensors) the student has a finite number, and every other SQNR of
    these cases is right."""
    pairs = db_pairs(seen, expected, *cases)
    made_finite = any(want == "inf" and isinstance(got, float) for _, got, want in pairs)
    return made_finite and all(same_db(got, want) for _, got, want in pairs if want != "inf")


def divided_by_zero(seen: Any, expected: Any) -> bool:
    """A case raised what Python's float arithmetic raises on a zero noise (ZeroDivisionError, or math.log10 of
    0 or of inf)."""
    for case, name in diagnosis.errors(seen).items():
        message = diagnosis.error_message(seen, case)
        if name == "ZeroDivisionError" or (name == "ValueError" and "math domain error" in message):
            return True
        if name == "OverflowError" and "math" in message:
            return True
    return False


def list_lengths_differ(seen: Any, expected: Any, *cases: str) -> bool:
    """A per-slice result (a list in the key's evidence) is a list of another length in the student's."""
    for case in diagnosis.cases(expected):
        if cases and case not in cases:
            continue
        for path, want in _lists(diagnosis.value(expected, case)):
            got = diagnosis.value(seen, case, *path)
            if isinstance(got, list) and len(got) != len(want):
                return True
    return False


def _lists(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], list[Any]]]:
    if isinstance(data, list):
        return [(path, data)]
    if isinstance(data, dict):
        return [found for key, item in data.items() for found in _lists(item, (*path, key))]
    return []


def _whole_right_slices_wrong(
    seen: Any, expected: Any, whole: list[tuple[str, ...]], slices: list[tuple[str, ...]]
) -> bool:
    """Each SQNR of a whole tensor right, each per-slice list of the right length, some slice's SQNR wrong."""
    for place in whole:
        if not same_db(diagnosis.value(seen, *place), diagnosis.value(expected, *place)):
            return False
    wrong = False
    for place in slices:
        got, want = diagnosis.value(seen, *place), diagnosis.value(expected, *place)
        if not isinstance(got, list) or not isinstance(want, list) or len(got) != len(want):
            return False
        wrong |= any(not same_db(g, w) for g, w in zip(got, want, strict=True))
    return wrong


def _kinds_differ(seen: Any, expected: Any) -> bool:
    got, want = diagnosis.value(seen, "types"), diagnosis.value(expected, "types")
    if not isinstance(got, dict) or not isinstance(want, dict) or set(got) != set(want):
        return False  # another shape altogether is not this mistake
    return any(got[k] != v for k, v in want.items())


def _public_formula(seen: Any, expected: Any) -> bool:
    return amplitude_ratio(seen, expected)


def _public_variance(seen: Any, expected: Any) -> bool:
    got, want = diagnosis.value(seen, "activation", "whole"), diagnosis.value(expected, "activation", "whole")
    weight = ("outlier_weight", "per_tensor", "whole")
    return (
        isinstance(got, float)
        and isinstance(want, float)
        and got < want - 3
        and same_db(diagnosis.value(seen, *weight), diagnosis.value(expected, *weight))
    )


def _public_float32(seen: Any, expected: Any) -> bool:
    return some_wrong(seen, expected, "close") and all_right(seen, expected, "outlier_weight", "activation")


def _public_dim0(seen: Any, expected: Any) -> bool:
    return all_right(seen, expected, "outlier_weight") and list_lengths_differ(seen, expected, "activation")


def _public_slice_signal(seen: Any, expected: Any) -> bool:
    whole = [("outlier_weight", kind, "whole") for kind in ("per_tensor", "per_channel")] + [("activation", "whole")]
    slices = [("outlier_weight", kind, "per_channel") for kind in ("per_tensor", "per_channel")]
    return _whole_right_slices_wrong(seen, expected, whole, [*slices, ("activation", "per_channel")])


def _public_zero_over_zero(seen: Any, expected: Any) -> bool:
    """nan where the key has inf (an all-zero slice: 0 / 0)."""
    return any(got == "nan" and want == "inf" for _, got, want in db_pairs(seen, expected))


def _public_test_power(seen: Any, expected: Any) -> bool:
    """test = reference / 2: a signal read from test has a quarter of the power, 6.02 dB less."""
    got, want = diagnosis.value(seen, "halved"), diagnosis.value(expected, "halved")
    return isinstance(got, float) and isinstance(want, float) and abs(got - want - 10 * math.log10(0.25)) < 0.02


def _public_input_dtype(seen: Any, expected: Any) -> bool:
    """Wrong on bfloat16 inputs only: float32 and float64 inputs are right."""
    return some_wrong(seen, expected, "bfloat16") and all_right(seen, expected, "outlier_weight", "activation", "close")


# --- practice after a mistake (issue 50): one idea each, on tensors of their own ------------------------------


def _number(value: Any) -> str:
    """A returned value for a message: a float to three decimals, inf and nan as they are, anything else by type."""
    if type(value) is float:
        return f"{value:.3f}" if math.isfinite(value) else str(value)
    if type(value) is torch.Tensor:
        return f"tensor（{value.tolist() if value.numel() <= 4 else list(value.shape)}）"
    return repr(value) if isinstance(value, int | str | type(None)) else type(value).__name__


def _close(got: Any, want: float, tolerance: float) -> bool:
    """``got`` is a Python float and equals ``want`` within ``tolerance`` (inf only where ``want`` is inf)."""
    if type(got) is not float or math.isnan(got):
        return False
    if math.isinf(want) or math.isinf(got):
        return got == want
    return abs(got - want) <= tolerance


_TO_DB_CASES = ((100.0, 1.0), (1.0, 100.0), (2.0, 1.0), (400.0, 4.0), (5.0, 0.0), (0.0, 0.0))
"""(Σ reference², Σ (reference − test)²): a thousand times, a hundredth, double, and no noise at all."""


def _check_to_db(to_db: Any) -> list[str]:
    problems = []
    for signal, noise in _TO_DB_CASES:
        want = math.inf if noise == 0 else 10 * math.log10(signal / noise)
        title = f"to_db(signal={signal:g}, noise={noise:g})"
        try:
            got = to_db(torch.tensor(signal, dtype=torch.float64), torch.tensor(noise, dtype=torch.float64))
        except NotImplementedError:
            raise
        except Exception as error:  # one case crashing should not hide the others
            problems.append(
                f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 60)}），應該回傳 {_number(want)}"
            )
            continue
        if not _close(got, want, 1e-3):
            kind = "" if type(got) is float else "（要回傳 Python float）"
            problems.append(f"{title}：應該是 {_number(want)} dB，你的是 {_number(got)}{kind}")
    return problems


TO_DB = Practice(
    "to_db",
    "寫 to_db(signal, noise)：signal 是 reference 的平方和、noise 是誤差的平方和（兩個 float64 的 0 維 tensor），"
    "回傳 SQNR 的 dB 數，一個 Python float；noise 是 0（完全相同）時回傳 inf。"
    "檢查用訊號是雜訊的 100 倍、1/100、2 倍、100 倍，以及 noise = 0（signal 是 5 與 0）。",
    "import math\n\nimport torch\n\n\ndef to_db(signal, noise):\n    raise NotImplementedError()\n",
    _check_to_db,
    "平方和是功率，功率比換成 dB 是 10 · log10(訊號 / 雜訊)：訊號在分子；20 · log10 是給振幅比用的。"
    "noise 是 0 時不要靠除法（Python 的 float 除以 0 會出錯，torch 的 0 / 0 是 nan），先判斷、直接回傳 "
    'float("inf")；也不要替 noise 加一個 eps。最後用 float(...) 變成 Python float。',
    "import math\n\n\n"
    "def to_db(signal, noise):\n"
    "    if noise == 0:\n"
    '        return float("inf")\n'
    "    return 10 * math.log10(float(signal) / float(noise))\n",
    "訊號是雜訊的 100 倍就是 20 dB；每少一個 bit，雜訊的功率變成 4 倍，少 10 · log10(4) ≈ 6 dB。",
)


def _slice_cases() -> list[tuple[torch.Tensor, int]]:
    """Whole numbers (sums of squares are exact): a (2, 3, 4) activation along each of its dims, a (3, 5) weight."""
    x = (torch.arange(24, dtype=torch.float64) % 7 - 3).reshape(2, 3, 4)
    w = (torch.arange(15, dtype=torch.float64) % 5 - 2).reshape(3, 5)
    return [(x, 1), (x, -1), (x, 0), (w, 0), (w, 1)]


def _check_slice_power(slice_power: Any) -> list[str]:
    problems = []
    for x, dim in _slice_cases():
        want = [float(x.select(dim, i).pow(2).sum()) for i in range(x.shape[dim])]
        title = f"形狀 {tuple(x.shape)}、dim={dim}"
        try:
            got = slice_power(x.clone(), dim)
        except NotImplementedError:
            raise
        except Exception as error:
            problems.append(f"{title}：出錯了（{type(error).__name__}: {safe_text(error, 60)}），應該是 {want}")
            continue
        values = got.tolist() if type(got) is torch.Tensor and got.dim() == 1 else got
        if not isinstance(values, list | tuple) or len(values) != len(want):
            shape = list(got.shape) if type(got) is torch.Tensor else type(got).__name__
            problems.append(f"{title}：應該是 {len(want)} 個數（每個 index 一個），你的是 {shape}")
        elif any(not isinstance(v, int | float) or abs(v - w) > 1e-6 for v, w in zip(values, want, strict=True)):
            problems.append(f"{title}：應該是 {want}，你的是 {[float(v) for v in values]}")
    return problems


SLICE_POWER = Practice(
    "slice_power",
    "寫 slice_power(x, dim)：沿 dim 的每個 index 各算一個平方和（例如 activation (N, C, H, W) 每個 channel 的功率，"
    "dim=1），回傳長度是 x.shape[dim] 的 list 或 1 維 tensor。dim 可以是負數。"
    "檢查用一個 (2, 3, 4) 的 tensor 沿 dim=1、-1、0，和一個 (3, 5) 的 tensor 沿 dim=0、1。",
    "import torch\n\n\ndef slice_power(x, dim):\n    raise NotImplementedError()\n",
    _check_slice_power,
    "「每個 index 一個」是把 dim 那一維留下來、其他每一維都加總掉：x.pow(2).sum(dim) 恰好相反，加總掉的是 dim 那一維；"
    "reshape(x.shape[0], -1) 則不管 dim 都留下第 0 維。x.select(dim, i) 是第 i 個 slice。",
    "import torch\n\n\n"
    "def slice_power(x, dim):\n"
    "    return [float(x.select(dim, i).pow(2).sum()) for i in range(x.shape[dim])]\n",
    "也可以一次算：x.pow(2).sum(dim=[d for d in range(x.dim()) if d != dim % x.dim()])。",
)


def _power_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """A non-negative activation with a large mean and its test at half the size (two tensors of different sizes);
    two float64 tensors near 1000 that differ by about 1e-5; a bfloat16 pair."""
    g = torch.Generator().manual_seed(0)
    activation = torch.rand(3, 8, generator=g, dtype=torch.float64) + 2.0
    small = torch.rand(5, generator=g, dtype=torch.float64) + 2.0
    near = 1000.0 + torch.rand(200, generator=g, dtype=torch.float64)
    wiggle = torch.randn(200, generator=g, dtype=torch.float64)
    low = (torch.rand(64, generator=g) * 4 + 1).to(torch.bfloat16)
    low_test = (low.float() + torch.randn(64, generator=g) * 0.05).to(torch.bfloat16)
    return [
        ("非負、平均值很大的 (3, 8) activation，test = reference / 2", activation, activation / 2),
        ("只有 5 個數的 tensor，test = reference / 2", small, small / 2),
        ("兩個 float64 tensor，都在 1000 附近、只差大約 1e-5", near, near + 1e-5 * wiggle),
        ("兩個 bfloat16 tensor", low, low_test),
    ]


def _check_powers(powers: Any) -> list[str]:
    problems = []
    for title, reference, test in _power_cases():
        ref = reference.to(torch.float64)
        want = (float(ref.pow(2).sum()), float((ref - test.to(torch.float64)).pow(2).sum()))
        got = powers(reference.clone(), test.clone())
        pair = tuple(got) if isinstance(got, tuple | list) and len(got) == 2 else None
        values = [float(v) if type(v) is torch.Tensor and v.numel() == 1 else v for v in (pair or ())]
        if len(values) != 2 or not all(isinstance(v, int | float) for v in values):
            problems.append(f"{title}：要回傳 (訊號, 雜訊) 兩個數，你的是 {type(got).__name__}")
            continue
        for what, mine, right in zip(("訊號", "雜訊"), values, want, strict=True):
            if not math.isclose(mine, right, rel_tol=1e-5, abs_tol=1e-12):
                problems.append(f"{title}：{what}應該是 {right:.6g}，你的是 {mine:.6g}")
    return problems


POWERS = Practice(
    "powers",
    "寫 powers(reference, test)：回傳 (訊號, 雜訊) 兩個 Python float：訊號是 reference 的平方和，雜訊是 "
    "reference − test 的平方和，都在 float64 裡算。檢查用一個非負、平均值很大的 activation（test 是它的一半）、"
    "一個只有 5 個數的 tensor、兩個在 1000 附近只差大約 1e-5 的 float64 tensor，和一對 bfloat16 tensor。",
    "import torch\n\n\ndef powers(reference, test):\n    raise NotImplementedError()\n",
    _check_powers,
    "訊號只看 reference（test 是近似，只出現在雜訊裡），是平方和，不先減平均值；雜訊也是平方和，不是平均"
    "（一邊總和一邊平均，差的是元素個數）。兩個都先 .to(torch.float64) 再相減、平方：float32 分不出 1000 附近 1e-5 的差，"
    "bfloat16 只有 2 到 3 位有效數字。",
    "import torch\n\n\n"
    "def powers(reference, test):\n"
    "    ref = reference.to(torch.float64)\n"
    "    err = ref - test.to(torch.float64)\n"
    "    return float((ref * ref).sum()), float((err * err).sum())\n",
    "test 是 reference 的一半時，雜訊是訊號的 1/4：SQNR 是 10 · log10(4) ≈ 6.02 dB。",
)


def _sqnr_db(reference: torch.Tensor, test: torch.Tensor) -> float:
    """The SQNR the practice hands to ``layer_table`` (reference first)."""
    if not isinstance(reference, torch.Tensor) or not isinstance(test, torch.Tensor):
        raise TypeError(f"sqnr 只收 tensor，收到 {type(reference).__name__} 與 {type(test).__name__}")
    ref = reference.detach().to(torch.float64)
    noise = float((ref - test.detach().to(torch.float64)).square().sum())
    return math.inf if noise == 0 else 10 * math.log10(float(ref.square().sum()) / noise)


def _table_outputs() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two models' outputs node by node: prepared (fp32) and converted (quantized). conv2d's two images are off by
    different amounts; split's output is a list; a quantize node exists on converted only; linear is identical."""
    x = torch.tensor([[4.0, -2.0, 1.0, 3.0], [0.5, 0.25, -0.5, 1.0]], dtype=torch.float64)
    conv = x * torch.tensor([[0.5], [0.9]], dtype=torch.float64)
    low, high = torch.relu(x).split(2, dim=1)
    prepared = {"conv2d": x, "relu": torch.relu(x), "split": [low, high], "getitem": low, "linear": x.sum(1)}
    converted = {
        "quantize_per_tensor_default": torch.round(x * 10).to(torch.int8),
        "conv2d": conv,
        "relu": torch.relu(conv),
        "split": [torch.relu(conv)[:, :2], torch.relu(conv)[:, 2:]],
        "getitem": low * 1.25,
        "linear": x.sum(1).clone(),
    }
    return prepared, converted


def _check_layer_table(layer_table: Any) -> list[str]:
    prepared, converted = _table_outputs()
    want = {
        name: _sqnr_db(prepared[name], out)
        for name, out in converted.items()
        if isinstance(out, torch.Tensor) and isinstance(prepared.get(name), torch.Tensor)
    }
    try:
        got = layer_table(dict(prepared), dict(converted), _sqnr_db)
    except NotImplementedError:
        raise
    except Exception as error:
        return [
            f"layer_table 出錯了（{type(error).__name__}: {safe_text(error, 80)}）：不是每個名稱兩邊都有，"
            "也不是每個輸出都是 tensor（split 的輸出是 tensor 的 list）"
        ]
    if not isinstance(got, dict):
        return [f"layer_table 要回傳 dict，你的是 {type(got).__name__}"]
    problems = []
    if set(got) != set(want):
        problems.append(f"表裡應該剛好是 {sorted(want)}，你的是 {sorted(map(str, got))}")
    for name, value in want.items():
        if name in got and not _close(got[name], value, 1e-3):
            swapped = _sqnr_db(converted[name], prepared[name])
            why = "：看起來 reference 與 test 對調了" if _close(got[name], swapped, 1e-3) and swapped != value else ""
            problems.append(f"{name}：應該是 {_number(value)} dB，你的是 {_number(got[name])}{why}")
    return problems


TABLE_PRACTICE = Practice(
    "layer_table",
    "寫 layer_table(prepared_out, converted_out, sqnr)：兩個 dict 是 prepared 與 converted 逐個 node 的輸出"
    "（node 名稱 → 輸出），sqnr(reference, test) 由檢查傳進來，和練習 1 的一樣。回傳 {名稱: SQNR}，"
    "只放兩邊都有、兩邊的輸出都是 tensor 的名稱。檢查用的輸出裡有輸出是 list 的 split、只在 converted 上的 quantize、"
    "兩張圖誤差不同的 conv2d，和兩邊完全相同的 linear。",
    "def layer_table(prepared_out, converted_out, sqnr):\n    raise NotImplementedError()\n",
    _check_layer_table,
    "prepared 的輸出是 fp32 的值，是 reference（訊號）；converted 的輸出是量化後的近似，是 test：sqnr(prepared 的, "
    "converted 的)，順序不能換。一層一個數字：把整個輸出 tensor 交給 sqnr，不要每張圖各算再平均。"
    "isinstance(..., torch.Tensor) 兩邊都要檢查。",
    "import torch\n\n\n"
    "def layer_table(prepared_out, converted_out, sqnr):\n"
    "    table = {}\n"
    "    for name, test in converted_out.items():\n"
    "        reference = prepared_out.get(name)\n"
    "        if isinstance(reference, torch.Tensor) and isinstance(test, torch.Tensor):\n"
    "            table[name] = sqnr(reference, test)\n"
    "    return table\n",
    "對調之後訊號變成量化後的值的功率：getitem 的 test 大了 1.25 倍，對調會把 SQNR 從 12.04 dB 算成 13.98 dB。",
)


def _converted_graph() -> Graph:
    """A converted graph built by hand: an input, a folded weight, _guards_fn, q/dq of both overloads (one dequantize
    renamed by a pass), the model's own fake_quant_per_channel named gate, conv2d, relu, linear, a mul named
    quantize_gain, the output."""
    import common.pt2e  # noqa: F401  (registers torch.ops.quantized_decomposed)

    aten, qd = torch.ops.aten, torch.ops.quantized_decomposed
    graph = Graph()

    def op(target: Any, name: str, *args: Any) -> Node:
        return graph.create_node("call_function", target, args, {}, name=name)

    x = graph.placeholder("x")
    weight = graph.create_node("get_attr", "conv_weight_int8", name="conv_weight")
    scales = graph.create_node("get_attr", "gate_scales", name="gate_scales")
    graph.create_node("call_module", "_guards_fn", (x,), name="_guards_fn")
    q = op(qd.quantize_per_tensor.default, "quantize_per_tensor_default", x, 0.1, 0, -128, 127, torch.int8)
    dq = op(qd.dequantize_per_tensor.default, "dequantize_per_tensor_default", q, 0.1, 0, -128, 127, torch.int8)
    dq_w = op(qd.dequantize_per_channel.default, "dq_7", weight, scales, scales, 0, -127, 127, torch.int8)
    conv = op(aten.conv2d.default, "conv2d", dq, dq_w)
    relu = op(aten.relu.default, "relu", conv)
    gate = op(qd.fake_quant_per_channel.default, "gate", relu, scales, scales, 1, -128, 127)
    q_1 = op(qd.quantize_per_tensor.tensor, "q_relu", gate, 0.1, 0, -128, 127, torch.int8)
    dq_1 = op(qd.dequantize_per_tensor.tensor, "dq_relu", q_1, 0.1, 0, -128, 127, torch.int8)
    scaled = op(aten.mul.Tensor, "quantize_gain", dq_1, 2.0)
    flat = op(aten.flatten.using_ints, "flatten", scaled, 1)
    graph.output((op(aten.linear.default, "linear", flat, weight),))
    return graph


def _check_is_layer(is_layer: Any) -> list[str]:
    problems = []
    for node in _converted_graph().nodes:
        want = node.op == "call_function" and getattr(node.target, "namespace", None) != "quantized_decomposed"
        got = is_layer(node)
        if not isinstance(got, bool) or got is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={safe_text(node.target, 60)}）："
                f"應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_LAYER = Practice(
    "is_layer",
    "寫 is_layer(node)：converted 圖上的這個 node 是不是逐層 SQNR 表要比較的一層？回傳 True 或 False。"
    "層是模型本身的運算：不是輸入、常數、_guards_fn、output，也不是 quantize / dequantize 這類 quantized_decomposed 的 op。"
    "檢查用一張手工建的圖：兩種 overload 的 q/dq（一個被 pass 改名成 dq_7）、模型自己呼叫的 fake_quant_per_channel"
    "（名叫 gate）、conv2d、relu、flatten、linear，和一個名叫 quantize_gain 的 mul。",
    "def is_layer(node):\n    raise NotImplementedError()\n",
    _check_is_layer,
    '兩個條件：node.op == "call_function"（輸入、常數、_guards_fn、output 都不是）；node.target 不在 '
    'torch.ops.quantized_decomposed 底下（node.target.namespace 是 "quantized_decomposed"，或 str(node.target) 以 '
    '"quantized_decomposed." 開頭）。名字不可靠；relu、flatten 沒有 weight 也是一層。',
    "def is_layer(node):\n"
    '    if node.op != "call_function":\n'
    "        return False\n"
    '    return getattr(node.target, "namespace", "") != "quantized_decomposed"\n',
    "q/dq 有很多種（per-tensor、per-channel、.tensor 版本、fake_quant），只看命名空間就不用一一列出。",
)


SQNR_MISCONCEPTIONS = (
    Misconception(
        "returns_tensor",
        "回傳 tensor，不是 Python float",
        "數字算對了，型別卻不對：torch 的運算結果還是 tensor（0 維或 1 維），或是一個 tuple。"
        "練習要的是 Python float，給了 dim 時是 float 的 list，呼叫的人才能直接比大小、印表格。"
        "最後用 float(...) 轉換，逐個 slice 時每一項都轉，再放進 list。",
        SQNR_RULES,
        public=_kinds_differ,
        practice=TO_DB,
    ),
    Misconception(
        "python_division",
        "用 Python 的 float 相除，雜訊是 0 就出錯",
        "完全相同的兩個 tensor 雜訊是 0，SQNR 應該是 inf。你把 tensor 轉成 Python float 再相除"
        "（或用 math.log10），0 當分母就出錯，而不是得到 inf。"
        '在 torch 裡相除（x / 0 是 inf，torch.log10(inf) 也是 inf），或先判斷雜訊是不是 0、是就回傳 float("inf")。',
        SQNR_RULES,
        public=divided_by_zero,
        practice=TO_DB,
    ),
    Misconception(
        "zero_over_zero",
        "靠 torch 的除法得到 inf，全是 0 的 slice 變成 nan",
        "torch 的 x / 0 是 inf，但 0 / 0 是 nan：一個全是 0 的 slice（例如 relu 之後死掉的 channel）訊號和雜訊都是 0，"
        "你的 SQNR 就成了 nan，而不是 inf。雜訊是 0 表示完全相同，不管訊號是多少都是 inf："
        '先判斷雜訊是不是 0，是就回傳 float("inf")，不要靠除法。',
        SQNR_RULES,
        public=_public_zero_over_zero,
        practice=TO_DB,
    ),
    Misconception(
        "finite_when_identical",
        "完全相同時回傳有限的數字，不是 inf",
        "你可能在雜訊上加了一個很小的數（eps）來避免除以 0。這樣完全相同的 tensor 會得到一個很大但有限的 SQNR，"
        '看起來像是「有一點點誤差」，和真的沒有誤差分不出來。雜訊是 0 時就回傳 float("inf")，不要加 eps。',
        SQNR_RULES,
        public=lambda seen, expected: inf_made_finite(seen, expected),
        practice=TO_DB,
    ),
    Misconception(
        "amplitude_formula",
        "功率比用了 20·log10",
        "平方和是功率，功率比換成 dB 用 10·log10；20·log10 是給振幅比（例如範數的比值）用的。"
        "兩種寫法混在一起，每個 SQNR 都差兩倍。平方和相除就用 10·log10，開根號之後的比值才用 20·log10。",
        SQNR_FORMULA,
        public=_public_formula,
        practice=TO_DB,
    ),
    Misconception(
        "ratio_inverted",
        "把雜訊放在分子，比值倒過來了",
        "SQNR 是訊號比雜訊：分子是 reference 的平方和，分母是誤差的平方和。你把它倒過來，每個 dB 都變成負的，"
        "誤差越小數字反而越小。分子放訊號、分母放雜訊。",
        SQNR_FORMULA,
        public=lambda seen, expected: sign_flipped(seen, expected),
        practice=TO_DB,
    ),
    Misconception(
        "not_decibels",
        "比值沒有換算成 dB",
        "SQNR 的單位是 dB：功率比取 log10 再乘 10。你回傳的是比值本身，或用了別的對數"
        "（自然對數 torch.log、少了乘 10），數字和 dB 差一個固定的倍數，表格之間就沒辦法比較。"
        "照公式寫 10 * torch.log10(訊號 / 雜訊)。",
        SQNR_FORMULA,
        public=lambda seen, expected: not_decibels(seen, expected),
        practice=TO_DB,
    ),
    Misconception(
        "mean_vs_sum",
        "訊號與雜訊一個取平均、一個取總和",
        "你可能用了 MSE（平均）當雜訊，訊號卻是平方和（或反過來），兩者差了元素個數那麼多倍，"
        "SQNR 就偏了 10·log10(元素個數) dB，而且每個 tensor、每個 slice 偏得不一樣。"
        "分子分母要用同一種：都取總和（或都取平均）。",
        SQNR_FORMULA,
        public=lambda seen, expected: count_factor(seen, expected),
        practice=POWERS,
    ),
    Misconception(
        "signal_variance",
        "訊號用了變異數，不是功率",
        "SQNR 的分子是 reference 的平方和（功率），不先減掉平均值。relu 之後的 activation 全是正數、平均值很大，"
        "減掉平均值會把訊號低估很多，SQNR 就算低了。直接用 reference 的平方和。",
        SQNR_FORMULA,
        public=_public_variance,
        practice=POWERS,
    ),
    Misconception(
        "test_power",
        "訊號用了 test 的功率",
        "訊號是原本的值（reference）的功率，test 是量化後的近似，只出現在雜訊 reference − test 裡。"
        "用 test 的平方和當訊號，test 被縮小或放大時 SQNR 就跟著偏了。分子一律用 reference。",
        SQNR_FORMULA,
        public=_public_test_power,
        practice=POWERS,
    ),
    Misconception(
        "slices_on_dim0",
        "以為 slice 一定沿著第 0 維",
        "dim 不一定是 0：activation (N, C, H, W) 的 channel 在 dim=1，feature 常在最後一維 dim=-1。"
        "你的程式不管 dim 是多少都按第 0 維切（例如 x[i] 或 reshape(x.shape[0], -1)），結果的個數就不是 reference.shape[dim]。"
        "先用 x.movedim(dim, 0) 把那一維搬到最前面再攤平。",
        SQNR_RULES,
        public=_public_dim0,
        practice=SLICE_POWER,
    ),
    Misconception(
        "reduces_dim",
        "把 dim 那一維加總掉，不是每個 index 一個",
        "「沿 dim 每個 slice 一個 SQNR」是 dim 上的每個 index（例如每個 output channel）各算一個，"
        "結果的長度是 reference.shape[dim]。你用 sum(dim) 把那一維加總掉了，得到的是「其他位置」各一個 SQNR。"
        "先 movedim(dim, 0).flatten(1)，再沿第 1 維加總。",
        SQNR_RULES,
        public=lambda seen, expected: list_lengths_differ(seen, expected),
        practice=SLICE_POWER,
    ),
    Misconception(
        "slice_uses_whole_signal",
        "逐個 slice 時，訊號或雜訊用了整個 tensor 的",
        "每個 slice 的 SQNR 只看那個 slice 自己：訊號是它的平方和，雜訊是它的誤差平方和。"
        "你混進了整個 tensor 的訊號（或雜訊），大的 channel 和小的 channel 就被拉到差不多的數字，outlier 拖累哪些 channel 也看不出來。"
        "訊號與雜訊都在同一個 slice 裡加總。",
        SQNR_RULES,
        public=_public_slice_signal,
    ),
    Misconception(
        "float32_arithmetic",
        "用 float32 計算，精度不夠",
        "float32 只有大約 7 位有效數字：兩個很大、只差一點點的數相減，差別在 float32 裡就被捨入掉了，雜訊算錯。"
        "練習要求一律先轉成 float64 再算，reference 與 test 都要轉。",
        SQNR_RULES,
        public=_public_float32,
        practice=POWERS,
    ),
    Misconception(
        "input_dtype",
        "用輸入自己的 dtype 計算",
        "bfloat16、float16 只有 2 到 3 位有效數字，在它們裡面平方、加總，誤差比量化雜訊本身還大。"
        "不管輸入是什麼 dtype，都先用 .to(torch.float64) 轉成 float64 再算。",
        SQNR_RULES,
        public=_public_input_dtype,
        practice=POWERS,
    ),
)


def _table(evidence: Any, *place: str) -> dict[str, Any] | None:
    found = diagnosis.value(evidence, *place, "table")
    return found if isinstance(found, dict) else None


def _table_places(expected: Any) -> list[tuple[str, ...]]:
    """Where the key's evidence holds a table: ``(case,)`` or ``(case, part)``."""
    places: list[tuple[str, ...]] = []
    for case in diagnosis.cases(expected):
        want = diagnosis.value(expected, case)
        if not isinstance(want, dict):
            continue
        if "table" in want:
            places.append((case,))
        else:
            places.extend((case, part) for part, item in want.items() if isinstance(item, dict) and "table" in item)
    return places


def tables(seen: Any, expected: Any) -> list[tuple[tuple[str, ...], dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """``(place, got, want, kinds)`` for every SQNR table of both evidences (``kinds``: what each node of the
    converted graph is, where the case recorded it)."""
    found = []
    for place in _table_places(expected):
        got, want = _table(seen, *place), _table(expected, *place)
        if got is not None and want is not None:
            kinds = diagnosis.value(seen, *place, "kinds")
            found.append((place, got, want, kinds if isinstance(kinds, dict) else {}))
    return found


def extra_layers(seen: Any, expected: Any) -> bool:
    """The table lists nodes the key leaves out: model inputs, constants, output, q/dq (or, without the kinds,
    any extra name)."""
    for _, got, want, kinds in tables(seen, expected):
        extra = [name for name in got if name not in want]
        if extra and (not kinds or any(kinds.get(name, "") != "op" for name in extra)):
            return True
    return False


def missing_layers(seen: Any, expected: Any) -> bool:
    """Some table lists only some of the key's layers, nothing else (and no table lists more)."""
    pairs = tables(seen, expected)
    return any(set(got) < set(want) for _, got, want, _ in pairs) and all(
        set(got) <= set(want) for _, got, want, _ in pairs
    )


def named_like_qdq(seen: Any, expected: Any) -> bool:
    """Some table lists q/dq nodes (by target) whose names do not say quantize (a model's own
    ``fake_quant_per_channel``, on both graphs), and nothing else is extra or missing: q/dq told apart by name,
    or only by having no namesake on ``prepared``."""
    pairs = tables(seen, expected)
    extra = [(name, kinds) for _, got, want, kinds in pairs for name in got if name not in want]
    return (
        bool(extra)
        and all(kinds.get(name) == "q/dq" and "quantize" not in name for name, kinds in extra)
        and all(set(want) <= set(got) for _, got, want, _ in pairs)
    )


def swap_bound(want: float) -> tuple[float, float]:
    """How far an SQNR can move when reference and test swap places: the signal becomes Σ test² with
    ‖test‖ = ‖reference‖ ± ‖noise‖ (Cauchy–Schwarz), so at most ±20·log10(1 ± 10^(−SQNR/20)) dB."""
    amplitude = 10 ** (-want / 20)
    low = 20 * math.log10(1 - amplitude) if amplitude < 1 else -math.inf
    return low, 20 * math.log10(1 + amplitude)


def _same_layers(seen: Any, expected: Any) -> list[tuple[Any, Any]]:
    pairs = tables(seen, expected)
    if not pairs or any(set(got) != set(want) for _, got, want, _ in pairs):
        return []
    return [(got[name], want[name]) for _, got, want, _ in pairs for name in want]


def within_swap(got: float, want: float) -> bool:
    low, high = swap_bound(want)
    return low - ABSOLUTE <= got - want <= high + ABSOLUTE


def swapped_roles(seen: Any, expected: Any) -> bool:
    """The same layers, inf where the key has inf, some SQNR off, and every one within what swapping reference and
    test can change."""
    values = _same_layers(seen, expected)
    if not values or any((got == "inf") != (want == "inf") for got, want in values):
        return False
    finite = [(g, w) for g, w in values if isinstance(g, float) and isinstance(w, float)]
    return any(not same_db(g, w) for g, w in finite) and all(within_swap(g, w) for g, w in finite)


def averaged_per_sample(seen: Any, expected: Any) -> bool:
    """The same layers, inf where the key has inf, some SQNR off by more than a swap could, none by more than
    20 dB (an average of the images' dB stays among theirs)."""
    values = _same_layers(seen, expected)
    if not values or any((got == "inf") != (want == "inf") for got, want in values):
        return False
    finite = [(g, w) for g, w in values if isinstance(g, float) and isinstance(w, float)]
    if not finite or any(abs(g - w) > 20 for g, w in finite):
        return False
    return not all(within_swap(g, w) for g, w in finite)


def layer_formula(seen: Any, expected: Any) -> bool:
    """The table's SQNRs stand in a formula-like relation to the key's: a constant factor, the ratio without
    the log, or a count between a mean and a sum."""
    k = constant_ratio(seen, expected)
    off_by_factor = k is not None and not math.isclose(k, 1.0, rel_tol=1e-3)
    return off_by_factor or not_decibels(seen, expected) or count_factor(seen, expected)


def graphs_changed(seen: Any, expected: Any) -> bool:
    """Some case noted that the call changed ``prepared`` or ``converted``."""
    return any(
        isinstance(diagnosis.value(seen, *place, "changed"), list) and diagnosis.value(seen, *place, "changed")
        for place in _table_places(expected)
    )


def _public_non_tensor(seen: Any, expected: Any) -> bool:
    """The model with a chunk (its output a list of tensors) raised about a list or a tuple."""
    message = diagnosis.error_message(seen, "masked")
    return bool(diagnosis.error(seen, "masked")) and ("list" in message or "tuple" in message)


def _public_one_input(seen: Any, expected: Any) -> bool:
    """The two-input model raised for want of an argument, the one-input models did not."""
    message = diagnosis.error_message(seen, "masked")
    missing = any(
        words in message for words in ("positional argument", "required argument", "missing", "not enough values")
    )
    return missing and not any(case != "masked" for case in diagnosis.errors(seen))


LAYER_MISCONCEPTIONS = (
    Misconception(
        "non_tensor_outputs",
        "以為每個 op 的輸出都是 tensor",
        "torch.split 這類 op 的輸出是 tensor 的 list，後面接的 getitem 才是 tensor；拿 list 去算 SQNR 就出錯了。"
        "表裡只放兩邊輸出都是 tensor 的 node：先用 isinstance(..., torch.Tensor) 檢查，不是就跳過。",
        LAYER_RULES,
        public=_public_non_tensor,
        practice=TABLE_PRACTICE,
    ),
    Misconception(
        "one_input_only",
        "以為模型只有一個輸入",
        "inputs 是一個 tuple，模型有幾個輸入它就有幾項。你只把第一項送進模型（例如 run(inputs[0])），"
        "兩個輸入的模型就缺了一個引數而出錯。把整個 tuple 展開傳進去：run(*inputs)。",
        LAYER_TABLE,
        public=_public_one_input,
    ),
    Misconception(
        "layer_python_division",
        "沒量化的層兩邊完全相同，除以 0 出錯",
        "沒有量化的層，prepared 與 converted 的輸出完全相同，雜訊是 0，SQNR 應該是 inf。"
        "你的 SQNR 用 Python 的 float 相除（或 math.log10），0 當分母就出錯了。"
        '用練習 1 的 sqnr（在 torch 裡相除，或雜訊是 0 時回傳 float("inf")）。',
        SQNR_RULES,
        public=divided_by_zero,
    ),
    Misconception(
        "qdq_by_name",
        "沒有用 target 認 quantize / dequantize",
        "q/dq 是 target 在 torch.ops.quantized_decomposed 底下的 op，名字不一定有 quantize："
        "模型自己呼叫的 fake_quant_per_channel 就是一個，而且 prepared 與 converted 上都有同名的 node。"
        "你看名字（或只看 prepared 上有沒有同名的 node）認 q/dq，它就被放進表裡了。改用 node.target 判斷。",
        LAYER_RULES,
        public=named_like_qdq,
        practice=IS_LAYER,
    ),
    Misconception(
        "lists_non_ops",
        "表裡放了不是 op 的 node",
        "逐層表比較的是 op 的輸出：模型的輸入（placeholder）、常數（get_attr）、output 不是層，quantize / dequantize "
        '是量化本身加上的 node，prepared 上也沒有它們。只放 node.op == "call_function"、不是 quantized_decomposed '
        "的 node。",
        LAYER_RULES,
        public=extra_layers,
        practice=IS_LAYER,
    ),
    Misconception(
        "weighted_layers_only",
        "只列有 weight 的層",
        "誤差不只出在 conv、linear：relu、add、cat、max_pool2d 的輸出也都經過量化（每個 activation 都有 q/dq），"
        "逐層表要能看出誤差從哪一層開始，每個 op 都要列。converted 上每個不是 quantize / dequantize 的 call_function "
        "node 都放進表裡。",
        LAYER_RULES,
        public=missing_layers,
        practice=IS_LAYER,
    ),
    Misconception(
        "modifies_graphs",
        "直接改了傳進來的圖",
        "layer_sqnr 只該讀圖：呼叫的人之後還要用 prepared 與 converted。你為了拿到每個 node 的輸出改了圖（例如讓 output "
        "多輸出幾個 node），呼叫的人手上的模型就變了。用 Interpreter 在執行時記下每個 node 的輸出，或先 copy.deepcopy 一份再改。",
        LAYER_TABLE,
        public=graphs_changed,
    ),
    Misconception(
        "layer_formula",
        "逐層表用的 SQNR 公式不對",
        "表裡每一層的 SQNR 和正確值之間差一個固定的倍數（或一個元素個數），問題不在挑哪些層，而在 SQNR 的公式。"
        "用練習 1 的 sqnr：10 * log10(Σ reference² / Σ (reference − test)²)，都在 float64 裡算。",
        SQNR_FORMULA,
        public=layer_formula,
    ),
    Misconception(
        "swapped_roles",
        "reference 與 test 對調了",
        "prepared 的輸出是 fp32 的值，是 reference；converted 的輸出是量化後的近似，是 test。"
        "對調之後訊號變成量化後的值的功率，每層的 SQNR 都偏一點點。呼叫 sqnr(prepared 的輸出, converted 的輸出)。",
        LAYER_RULES,
        public=swapped_roles,
        practice=TABLE_PRACTICE,
    ),
    Misconception(
        "per_sample_mean",
        "每張圖各算一個 SQNR 再平均",
        "一層的 SQNR 是整個 batch 的訊號功率比整個 batch 的雜訊功率，一個數字。"
        "每張圖各算 dB 再平均，和整批一起算不相等（dB 是對數，平均之後就不是功率比了）。把整個輸出 tensor 交給 sqnr。",
        LAYER_TABLE,
        public=averaged_per_sample,
        practice=TABLE_PRACTICE,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "sqnr",
        SQNR_TITLE,
        ("sqnr",),
        {
            "outlier_weight": sqnr_weight,
            "activation": sqnr_activation,
            "close": sqnr_close,
            "types": sqnr_types,
            "dead_channel": sqnr_dead_channel,
            "halved": sqnr_halved,
            "bfloat16": sqnr_bfloat16,
        },
        misconceptions=SQNR_MISCONCEPTIONS,
    ),
    Exercise(
        "layer_sqnr",
        LAYER_TITLE,
        ("layer_sqnr",),
        {"small_cnn": layers_small_cnn, "residual": layers_residual, "masked": layers_masked},
        misconceptions=LAYER_MISCONCEPTIONS,
    ),
)
