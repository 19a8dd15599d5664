"""torch.fx's generated code, compiled once per text, and provenance kept without deep copies.

Two costs of torch.fx repeat in this course without need:

- **Compiling generated code.** Every ``GraphModule.recompile`` (a new GraphModule, a deep copy, most passes
  of ``prepare_pt2e`` and ``convert_pt2e``) generates Python for the graph and compiles it with the built-in
  ``compile``. The course's small graphs give the same text again and again: judging every kept wrong
  solution of the hidden checks on one seed compiles 30,000 times, 1,800 different texts, and the compiling
  alone is a tenth of that time. Here the code object of a text is compiled once; each later use gets a copy
  whose file name is the fresh name torch.fx registered for it, as if compiled again (tracebacks and
  ``linecache`` show the same lines).
- **Provenance.** Each pass that rebuilds a graph node by node (ExecuTorch's lowering runs about fifty) records
  where a node came from (``node.meta["from_node"]``, a ``torch.fx.traceback.NodeSource``) and deep-copies
  the node's whole history into it, so the copying grows with every pass: a tenth of a lowering to XNNPACK.
  Nothing changes a history once it is recorded (torch, torchao and ExecuTorch only read it), so here a new
  record refers to the earlier ones instead of copying them; every record holds the same values.

``install()`` (called when ``common.pt2e`` is imported) puts both in place only where torch's own two functions
are the ones these were written from (their source is compared); ``tests/test_common.py`` checks that code,
file names and provenance are what torch itself gives.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import types
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

CAPACITY = 4096
"""Compiled texts kept at most (the least recently used goes first)."""
REPLACED = {"_exec_with_source": "3a1510761d07726e", "NodeSource.__init__": "99395e7f40a4a049"}
"""The functions replaced, by the digest of their source in torch 2.13.0: another torch keeps its own."""

_codes: OrderedDict[str, types.CodeType] = OrderedDict()
_originals: dict[str, Any] = {}
"""torch's own two functions, kept by ``install()`` (empty until then)."""


def installed() -> bool:
    """Whether ``install()`` put both in place in this process."""
    return bool(_originals)


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` with ``filename`` as the file name of it and of every function defined in it."""
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def compiled(src: str, filename: str) -> types.CodeType:
    """``compile(src, filename, "exec", dont_inherit=True)``, compiling each text once."""
    code = _codes.get(src)
    if code is None:
        code = compile(src, filename, "exec", dont_inherit=True)
        _codes[src] = code
        while len(_codes) > CAPACITY:
            _codes.popitem(last=False)
        return code
    _codes.move_to_end(src)
    return _renamed(code, filename)


def size() -> int:
    """Compiled texts kept now."""
    return len(_codes)


def _exec_with_source(src: str, globals: dict[str, Any], co_fields: dict[str, Any] | None = None) -> None:
    """torch.fx's ``_exec_with_source`` (torch 2.13), with ``compiled`` in place of ``compile``."""
    from torch.fx import graph_module

    key = graph_module._loader.cache(src, globals, co_fields)
    exec(compiled(src, key), globals)


def _node_source_init(self: Any, node: Any, pass_name: str = "", action: Any = None) -> None:
    """torch's ``NodeSource.__init__``, referring to the node's earlier records instead of deep-copying them."""
    _originals["node_source_init"](self, None, pass_name, action)  # torch's own checks, no node: nothing copied
    if node:
        self.node_info = self.NodeInfo(name=node.name, target=str(node.target), graph_id=id(node.graph))
        self.from_node = list(node.meta["from_node"]) if "from_node" in node.meta else []


def _digest(function: Any) -> str:
    try:
        return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return ""


def install() -> bool:
    """Compile torch.fx's code through ``compiled`` and record provenance without copies (once per process).

    Returns False, changing nothing, where torch's functions are not the ones of ``REPLACED``."""
    if installed():
        return True
    from torch.fx import graph_module, traceback

    found = {
        "_exec_with_source": _digest(graph_module._exec_with_source),
        "NodeSource.__init__": _digest(traceback.NodeSource.__init__),
    }
    if found != REPLACED:
        return False
    _originals.update(exec_with_source=graph_module._exec_with_source, node_source_init=traceback.NodeSource.__init__)
    graph_module._exec_with_source = _exec_with_source
    traceback.NodeSource.__init__ = _node_source_init
    return True


@contextlib.contextmanager
def torch_alone() -> Iterator[None]:
    """Inside this block, torch.fx compiles every text itself and deep-copies provenance, as without ``install()``
    (what ``tests/test_common.py`` and ``bench/fx_code.py`` compare the course with); put back after."""
    from torch.fx import graph_module, traceback

    if not installed():
        yield
        return
    graph_module._exec_with_source = _originals["exec_with_source"]
    traceback.NodeSource.__init__ = _originals["node_source_init"]
    try:
        yield
    finally:
        graph_module._exec_with_source = _exec_with_source
        traceback.NodeSource.__init__ = _node_source_init
