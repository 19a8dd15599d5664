"""M09's dynamic quantization: activation qparams chosen at run time, weights quantized once.

- ``xnnpack_dynamic_quantizer``: ExecuTorch's XNNPACKQuantizer with a *dynamic* symmetric config set
  globally (``get_symmetric_quantization_config(is_per_channel=..., is_dynamic=True, weight_qmin=...,
  weight_qmax=...)``): the input of every linear int8 per-tensor affine with its scale and zero point
  computed on every call (``PlaceholderObserver``, ``is_dynamic=True``), each weight int8 symmetric,
  per channel by default (``PerChannelMinMaxObserver``).
- ``quantize_dynamic``: export → ``prepare_pt2e`` → a forward → ``convert_pt2e``, avoiding the three
  traps of dynamic PT2E (``docs/design/m09-findings.md``, pitfalls 1–3):

  1. ``convert_pt2e(copy.deepcopy(prepared))`` fails for a dynamic spec (``No chose qparams node
     found for linear``): the copy's annotations point at nodes of the original graph. So the
     prepared graph itself is converted (it is consumed; prepare again for another conversion).
  2. A forward is still needed before converting: the weights' observers only see their weight
     during a forward; without one every weight gets scale 1.0 and the model is broken.
  3. ``convert_pt2e`` draws from the global random generator: it runs inside
     ``torch.random.fork_rng()``, so a notebook's later random numbers do not depend on it.

ExecuTorch (the ``backends`` extra) is imported only inside ``xnnpack_dynamic_quantizer``, as in
``common.backends``: ``import common.dynamic`` is cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch.fx import GraphModule

from common._noise import quiet_imports


def xnnpack_dynamic_quantizer(weight_qmin: int = -127, weight_qmax: int = 127, per_channel: bool = True) -> Any:
    """ExecuTorch's ``XNNPACKQuantizer`` with a dynamic symmetric config set globally.

    Activations (the inputs of linears): int8 [-128, 127] per-tensor affine, qparams computed at
    run time (``choose_qparams.tensor`` in the converted graph). Weights: int8 symmetric in
    ``[weight_qmin, weight_qmax]`` (``-8, 7`` for 4-bit values stored in int8), per output channel
    unless ``per_channel=False``. Bias stays float; outputs are not quantized.

    Its ``annotate`` leaves the global random state as it found it.
    """
    from common.backends import symmetric_xnnpack_quantizer

    return symmetric_xnnpack_quantizer(
        is_per_channel=per_channel, is_dynamic=True, weight_qmin=weight_qmin, weight_qmax=weight_qmax
    )


def quantize_dynamic(
    model: torch.nn.Module,
    quantizer: Any,
    example_inputs: Sequence[Any],
    batches: Iterable[Sequence[Any]] | None = None,
) -> GraphModule:
    """``model`` quantized with ``quantizer`` (a dynamic one): the converted graph.

    ``model`` (put in eval mode) is exported on ``example_inputs`` (so the graph takes inputs of
    that shape only), prepared with ``quantizer``, run once on each of ``batches`` (default: the
    example itself; one forward is enough for a dynamic config, and needed for the weights'
    observers) and converted in place (no ``copy.deepcopy``: it breaks dynamic specs), with the
    global random state forked around ``convert_pt2e``.
    """
    from common.pt2e import export_module

    graph = export_module(model.eval(), tuple(example_inputs))
    return convert_dynamic(graph, quantizer, batches if batches is not None else [tuple(example_inputs)])


def convert_dynamic(graph: GraphModule, quantizer: Any, batches: Iterable[Sequence[Any]]) -> GraphModule:
    """An exported ``graph`` prepared with ``quantizer``, run once on each of ``batches`` (at least one: the
    weights' observers need it) and converted in place, with the global random state forked around
    ``convert_pt2e`` (``quantize_dynamic`` after its export)."""
    from common.pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    with torch.random.fork_rng(), quiet_imports():
        return convert_pt2e(prepared)


__all__ = ["convert_dynamic", "quantize_dynamic", "xnnpack_dynamic_quantizer"]
