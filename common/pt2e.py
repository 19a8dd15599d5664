"""The PT2E objects the course uses, in one place.

torchao's own classes and functions are re-exported unchanged, so what a notebook
learns here is what it will meet in torchao. Importing this module is silent: the
import-time noise of torch and torchao is suppressed, and ``quiet()`` keeps the
deprecation noise of export / prepare / convert out of notebook outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common._noise import add_warning_filters, quiet_imports, silence_loggers

with quiet_imports():
    import torch
    from torch.fx import GraphModule
    from torchao.quantization.pt2e import (
        FixedQParamsObserver,
        HistogramObserver,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
        MovingAveragePerChannelMinMaxObserver,
        ObserverBase,
        PerChannelMinMaxObserver,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
    from torchao.quantization.pt2e.quantizer import (
        DerivedQuantizationSpec,
        FixedQParamsQuantizationSpec,
        QuantizationAnnotation,
        QuantizationSpec,
        QuantizationSpecBase,
        Quantizer,
        SharedQuantizationSpec,
        annotate_input_qspec_map,
        annotate_output_qspec,
    )
    from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

    from common import fx_code_cache, torchao_cache
    from common.export_cache import export_through

    torchao_cache.remember()  # torchao's pattern traces and histogram searches, once per process
    fx_code_cache.install()  # torch.fx's generated code compiled once per text, provenance without deep copies

ANNOTATION_KEY: str = Q_ANNOTATION_KEY
"""The ``node.meta`` key under which a Quantizer stores a ``QuantizationAnnotation``."""

__all__ = [
    "ANNOTATION_KEY",
    "DerivedQuantizationSpec",
    "FixedQParamsObserver",
    "FixedQParamsQuantizationSpec",
    "HistogramObserver",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver",
    "ObserverBase",
    "PerChannelMinMaxObserver",
    "QuantizationAnnotation",
    "QuantizationSpec",
    "QuantizationSpecBase",
    "Quantizer",
    "SharedQuantizationSpec",
    "annotate_input_qspec_map",
    "annotate_output_qspec",
    "convert_pt2e",
    "export_module",
    "get_xnnpack_quantizer",
    "prepare_pt2e",
    "prepare_qat_pt2e",
    "quiet",
]


def quiet() -> None:
    """Silence the import and deprecation noise of torch and torchao for this process.

    Only warnings the course knows to be noise are filtered (see ``common._noise``);
    a student's own warnings still show.
    """
    silence_loggers()
    add_warning_filters()


def export_module(model: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any = None) -> GraphModule:
    """``torch.export.export(model, example_inputs).module()``: the graph PT2E works on.

    ``dynamic_shapes`` is passed to ``torch.export.export`` (e.g. ``{"x": {0: Dim("batch")}}``
    lets the graph take any batch size instead of only the example's). Inside
    ``common.export_cache.remembered_exports()`` an identical export is a copy of the earlier graph.
    """

    def trace() -> GraphModule:
        with quiet_imports():
            return torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes).module()

    return export_through(trace, model, example_inputs, dynamic_shapes)


def get_xnnpack_quantizer(is_per_channel: bool = False) -> tuple[Quantizer, Any]:
    """torchao's testing XNNPACKQuantizer with its symmetric config set globally.

    Returns ``(quantizer, config)``: activations int8 [-128, 127] per-tensor affine
    (HistogramObserver), weights int8 [-127, 127] symmetric (per-channel when asked),
    bias not quantized.
    """
    with quiet_imports():
        from torchao.testing.pt2e._xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        config = get_symmetric_quantization_config(is_per_channel=is_per_channel)
        return XNNPACKQuantizer().set_global(config), config
