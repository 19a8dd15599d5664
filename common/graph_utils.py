"""Reading the graphs PT2E produces: observers, annotations, quantization specs."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from common.pt2e import (
    ANNOTATION_KEY,
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    QuantizationSpecBase,
    SharedQuantizationSpec,
)

_QSCHEME_WORDS: dict[torch.qscheme, tuple[str, str]] = {
    torch.per_tensor_affine: ("per-tensor", "affine"),
    torch.per_tensor_symmetric: ("per-tensor", "symmetric"),
    torch.per_channel_affine: ("per-channel", "affine"),
    torch.per_channel_symmetric: ("per-channel", "symmetric"),
    torch.per_channel_affine_float_qparams: ("per-channel", "affine (float qparams)"),
}


def is_observer(module: object) -> bool:
    """True for observer and fake-quantize modules, from torchao or from torch.ao."""
    from torch.ao.quantization.fake_quantize import FakeQuantizeBase as TorchFakeQuantizeBase
    from torch.ao.quantization.observer import ObserverBase as TorchObserverBase
    from torchao.quantization.pt2e import FakeQuantizeBase, ObserverBase

    return isinstance(module, ObserverBase | FakeQuantizeBase | TorchObserverBase | TorchFakeQuantizeBase)


def observer_nodes(gm: GraphModule) -> list[tuple[Node, torch.nn.Module]]:
    """Every ``call_module`` node that runs an observer, in graph order, with its module.

    A shared observer instance appears once per node that calls it, so count
    instances with ``len({id(m) for _, m in observer_nodes(gm)})``.
    """
    found = []
    for node in gm.graph.nodes:
        if node.op == "call_module":
            module = gm.get_submodule(str(node.target))
            if is_observer(module):
                found.append((node, module))
    return found


def dtype_name(dtype: torch.dtype | None) -> str:
    """``torch.int8`` → ``"int8"``."""
    return str(dtype).removeprefix("torch.") if dtype is not None else "?"


def observer_class_name(ctr: object) -> str:
    """The class name behind an ``observer_or_fake_quant_ctr`` (a class or ``Cls.with_args(...)``)."""
    partial = getattr(ctr, "p", None)  # _PartialWrapper keeps the functools.partial in .p
    target = getattr(partial, "func", ctr)
    return getattr(target, "__name__", type(target).__name__)


def spec_short(spec: QuantizationSpecBase | None) -> str:
    """One short phrase for a spec: dtype + granularity + scheme, e.g. ``int8 per-tensor affine``."""
    if spec is None:
        return "不量化"
    if isinstance(spec, SharedQuantizationSpec):
        where = spec.edge_or_node
        if isinstance(where, tuple):
            return f"共用 {where[0].name} → {where[1].name}"
        return f"共用 {where.name} 的輸出"
    if isinstance(spec, FixedQParamsQuantizationSpec):
        return f"{dtype_name(spec.dtype)} fixed scale={spec.scale:g} zp={spec.zero_point}"
    if isinstance(spec, DerivedQuantizationSpec):
        return f"{dtype_name(spec.dtype)} derived（由 {len(spec.derived_from)} 個位置推得）"
    if isinstance(spec, QuantizationSpec):
        granularity, scheme = _QSCHEME_WORDS.get(spec.qscheme, ("?", str(spec.qscheme)))
        dynamic = " dynamic" if spec.is_dynamic else ""
        return f"{dtype_name(spec.dtype)} {granularity} {scheme}{dynamic}"
    return type(spec).__name__


def qspec_summary(spec: QuantizationSpecBase | None) -> str:
    """Two lines: what the spec quantizes to, and which observer collects its statistics.

    >>> print(qspec_summary(act_spec()))
    int8 per-tensor affine [-128,127]
    MinMaxObserver
    """
    if not isinstance(spec, QuantizationSpec):
        return spec_short(spec)
    line1 = f"{spec_short(spec)} [{spec.quant_min},{spec.quant_max}]"
    line2 = observer_class_name(spec.observer_or_fake_quant_ctr)
    if spec.qscheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        line2 += f", ch_axis={spec.ch_axis}"
    return f"{line1}\n{line2}"


def annotation_of(node: Node):
    """The ``QuantizationAnnotation`` a Quantizer left on ``node``, or None."""
    return node.meta.get(ANNOTATION_KEY)


def unannotated_ops(gm: GraphModule) -> list[Node]:
    """``call_function`` nodes that carry no quantization annotation, in graph order."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and annotation_of(n) is None]
