"""Quantizers that the public and the hidden cases put around a student's Quantizer.

They hold no answer: each runs other Quantizers, or reads the labels at the moment it runs.
The hidden cases' own probes (``autograder/sandboxed/cases/probes.py``) build on these.

- ``ChainQuantizer`` runs several Quantizers in order (like ``ComposableQuantizer``).
- ``CaptureLabels`` runs an inner Quantizer and keeps a copy of the graph right after ``annotate``.
- ``AnnotationSnapshot`` keeps ``describe_annotations`` of the graph at the moment it runs (put it
  right after the student's Quantizer in a chain).
"""

from __future__ import annotations

import copy
from typing import Any

from torch.fx import GraphModule

from common.pt2e import Quantizer
from selfcheck.evidence import describe_annotations


class ChainQuantizer(Quantizer):
    """Runs several Quantizers' annotate / validate in order (like ComposableQuantizer)."""

    def __init__(self, quantizers: list[Quantizer]) -> None:
        self.quantizers = quantizers

    def annotate(self, model: GraphModule) -> GraphModule:
        for quantizer in self.quantizers:
            quantizer.annotate(model)
        return model

    def validate(self, model: GraphModule) -> None:
        for quantizer in self.quantizers:
            quantizer.validate(model)


class CaptureLabels(Quantizer):
    """Runs an inner Quantizer and keeps a copy of the graph right after annotate."""

    def __init__(self, inner: Quantizer) -> None:
        self.inner = inner
        self.annotated: GraphModule | None = None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        return self.inner.transform_for_annotation(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        self.inner.annotate(model)
        self.annotated = copy.deepcopy(model)
        return model

    def validate(self, model: GraphModule) -> None:
        self.inner.validate(model)


class AnnotationSnapshot(Quantizer):
    """Keeps ``describe_annotations`` of the graph at the moment it runs."""

    def __init__(self) -> None:
        self.annotations: dict[str, Any] = {}

    def annotate(self, model: GraphModule) -> GraphModule:
        self.annotations = describe_annotations(model)
        return model

    def validate(self, model: GraphModule) -> None:
        pass
