"""Noticing and undoing patches that student code makes to the modules grading relies on.

Before a submission's first cell runs, ``Snapshot`` records the objects bound in the
dictionaries of builtins, ``common``, ``autograder``, and the torch / torchao modules the
evidence collection calls. Before each exercise's evidence is collected, ``restore()``
puts back every entry that was replaced or deleted (and removes what was added to a watched
class, such as a ``Node.__eq__`` or ``__hash__``) and returns the names it repaired,
so a patch neither helps a submission nor goes unreported.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

WATCHED_PREFIXES = ("common", "autograder")
WATCHED_MODULES = (
    "builtins",
    "json",
    "math",
    "torch",
    "torch.fx",
    "torch.fx.node",
    "torch.fx.graph",
    "torch.fx.graph_module",
    "torch.export",
    "torch.nn.modules.module",
    "torchao.quantization.pt2e",
    "torchao.quantization.pt2e.quantize_pt2e",
    "torchao.quantization.pt2e.prepare",
    "torchao.quantization.pt2e.convert",
    "torchao.quantization.pt2e.observer",
    "torchao.quantization.pt2e.quantizer",
    "torchao.quantization.pt2e.quantizer.quantizer",
    "torchao.quantization.pt2e.quantizer.utils",
)
WATCHED_CLASSES = ("torch.fx.Node", "torch.fx.Graph", "torch.fx.GraphModule", "torch.nn.Module")

_MISSING = object()


def _watched_names() -> list[str]:
    names = [name for name in WATCHED_MODULES if name in sys.modules]
    names += [name for name in sys.modules if name.split(".")[0] in WATCHED_PREFIXES]
    return sorted(set(names))


def _resolve(path: str) -> Any:
    module_name, _, attribute = path.rpartition(".")
    return getattr(sys.modules[module_name], attribute)


class Snapshot:
    """The bindings of the watched modules and classes at one moment."""

    def __init__(self) -> None:
        self.modules: dict[str, dict[str, Any]] = {}
        for name in _watched_names():
            module = sys.modules[name]
            self.modules[name] = dict(vars(module))
        self.module_objects = {name: sys.modules[name] for name in self.modules}
        self.classes: dict[str, tuple[type, dict[str, Any]]] = {}
        for path in WATCHED_CLASSES:
            try:
                cls = _resolve(path)
            except (KeyError, AttributeError):
                continue
            self.classes[path] = (cls, dict(vars(cls)))

    def restore(self) -> list[str]:
        """Undo replaced or deleted entries; returns ``module.name`` of each one repaired."""
        repaired: list[str] = []
        for name, saved in self.modules.items():
            module = self.module_objects[name]
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
                repaired.append(name)
            current = vars(module)
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    try:
                        setattr(module, key, value)
                    except (AttributeError, TypeError):
                        current[key] = value
                    repaired.append(f"{name}.{key}")
        for path, (cls, saved) in self.classes.items():
            for key, value in saved.items():
                if vars(cls).get(key, _MISSING) is not value:
                    try:
                        setattr(cls, key, value)
                    except (AttributeError, TypeError):
                        continue
                    repaired.append(f"{path}.{key}")
            for key in [k for k in vars(cls) if k not in saved]:  # added: a Node.__eq__ would break every dict
                try:
                    delattr(cls, key)
                except (AttributeError, TypeError):
                    continue
                repaired.append(f"{path}.{key}")
        if builtins.__dict__ is not vars(builtins):  # pragma: no cover - cannot happen in CPython
            repaired.append("builtins")
        return repaired
