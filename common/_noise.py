"""Silencing the import-time and deprecation noise of torch and torchao.

Only noise is filtered: warnings a student can act on still show. In particular

- ``must run observer before calling calculate_qparams`` (an observer that never saw data gives
  scale 1.0 and zero point 0: a prepared model converted without calibration) is *not* filtered,
  and ends with a sentence of the course saying what to do (``EXPLAINED``);
- DeprecationWarning / FutureWarning are filtered only when a library raises them about its own
  code (torch, torchao, executorch and the standard-library modules they go through); a
  deprecated call in a student's own cell still warns;
- ``XNNPACKQuantizer is deprecated!`` is filtered: M01–M07 use torchao's testing copy of the
  quantizer on purpose, and M01-2 shows that warning once, where the quantizer is introduced
  (the production quantizer is ExecuTorch's, M08-1).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# Loggers that print at import time or on every export / deepcopy without telling
# a student anything they can act on.
NOISY_LOGGERS = (
    "torchao",
    "torch.utils._pytree",
    "torch._export",
    "torch.export",
    "torch._dynamo",
    "torch.fx.experimental.symbolic_shapes",
)

# The modules whose own deprecation warnings are noise for a student (a regex matched against the
# start of the module a warning is attributed to): torch and everything named torch*, executorch,
# and the standard-library modules their deprecated internals are reached through (copyreg: the
# deepcopy of a graph; importlib: executorch's package resources).
LIBRARY_MODULES = r"(torch|executorch|copyreg|importlib)"

# (category, message regex, module regex) of warnings torch 2.13 / torchao 0.18 emit on the code
# paths the course uses.
NOISY_WARNINGS: tuple[tuple[type[Warning], str, str], ...] = (
    (FutureWarning, r".*", LIBRARY_MODULES),
    (DeprecationWarning, r".*", LIBRARY_MODULES),
    (UserWarning, r"Failed to initialize NumPy", r".*"),
    (UserWarning, r"XNNPACKQuantizer is deprecated", r".*"),  # said once in M01-2
    (UserWarning, r".*_guards_fn.*", r".*"),
    (UserWarning, r".*erase_node.*", r".*"),
    (UserWarning, r"Attempted to insert a get_attr Node.*", r".*"),
    (UserWarning, r".*is not a registered.*", r".*"),
    (UserWarning, r"Please use the new API settings.*", r".*"),
    (UserWarning, r"TypedStorage is deprecated.*", r".*"),
    (UserWarning, r".*quantize_per_tensor.*", r".*"),
    (UserWarning, r"The input of maxpool2d is not quantized.*", r".*"),  # X86InductorQuantizer, per model
    # executorch.extension.pybindings.portable_lib, at the first use of the runtime (M08, M09-3): its
    # ExperimentalWarning is a DeprecationWarning, named here whatever module it is attributed to
    (DeprecationWarning, r"This API is experimental and subject to change", r".*"),
)


# Warnings a student should act on, with what the course adds to them (in Chinese, after torchao's text).
EXPLAINED: tuple[tuple[str, str], ...] = (
    (
        "must run observer before calling calculate_qparams",
        "課程提示：這個 observer 從沒看過資料，只能給預設的 scale 1.0、zero point 0。"
        "prepare_pt2e 之後、convert_pt2e 之前，要先用幾批有代表性的資料跑過模型（校準）。",
    ),
)

_plain_format = warnings.formatwarning


def _explained_format(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """``warnings.formatwarning`` plus the course's explanation for the warnings in ``EXPLAINED``."""
    text = _plain_format(message, category, filename, lineno, line)
    for start, explanation in EXPLAINED:
        if str(message).startswith(start):
            text += f"  {explanation}\n"
    return text


def explain_warnings() -> None:
    """Make the warnings in ``EXPLAINED`` end with the course's explanation (idempotent)."""
    if warnings.formatwarning is not _explained_format:
        warnings.formatwarning = _explained_format


def silence_loggers() -> None:
    """Raise the level of torch / torchao loggers that print noise to ERROR."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level != logging.ERROR:  # setLevel clears every logger's cache: costly on each export
            logger.setLevel(logging.ERROR)


def add_warning_filters() -> None:
    """Install ``ignore`` filters for the known noisy warnings, and the explanations of ``EXPLAINED``."""
    explain_warnings()
    for category, message, module in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


@contextmanager
def quiet_imports() -> Iterator[None]:
    """Import torch / torchao inside this block without their import-time noise."""
    silence_loggers()
    with warnings.catch_warnings():
        add_warning_filters()
        yield
    silence_loggers()
