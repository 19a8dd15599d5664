"""Writing the shipped weights again (``common/digits_weights.pt``, ``common/tinylm_weights.pt``).

``scripts/train_digits.py`` and ``scripts/train_tinylm.py`` start again under an instruction-set profile
(``rerun_capped``: ``default``, the plainest kernels, see ``isa``), train, then ``write_weights`` saves the
state dict where the loading module reads it and writes its checksum into that module's ``WEIGHTS_SHA256``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from autograder.maintenance.isa import PROFILES, environment

if TYPE_CHECKING:
    from torch import nn

PROFILE = "default"
"""The profile the shipped weights were trained under."""


def rerun_capped(profile: str = PROFILE) -> int | None:
    """Run this script again in a process capped to ``profile`` and return its exit code; ``None`` if this one is."""
    if all(os.environ.get(k) == v for k, v in PROFILES[profile].items()):
        return None
    return subprocess.call([sys.executable, *sys.argv], env=environment(profile))


def write_weights(model: nn.Module, module: ModuleType) -> str:
    """Save ``model``'s state dict as ``module.WEIGHTS`` and write its ``state_digest`` into ``module``'s source
    as ``WEIGHTS_SHA256``; returns the digest."""
    import torch

    from common.data import state_digest

    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    digest = state_digest(state)
    source = Path(module.__file__ or "")
    text, count = re.subn(
        r'^WEIGHTS_SHA256 = "[^"]*"$',
        f'WEIGHTS_SHA256 = "{digest}"',
        source.read_text(encoding="utf-8"),
        count=1,
        flags=re.M,
    )
    if count != 1:
        raise ValueError(f'{source} has no line WEIGHTS_SHA256 = "…" to write the checksum into')
    torch.save(state, module.WEIGHTS)
    source.write_text(text, encoding="utf-8")
    return digest
