"""Silencing the import-time and deprecation noise of torch and torchao."""

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

# (category, message regex) pairs of warnings torch 2.13 / torchao 0.18 emit on
# the code paths the course uses.
NOISY_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r".*"),
    (DeprecationWarning, r".*"),
    (UserWarning, r"Failed to initialize NumPy"),
    (UserWarning, r"XNNPACKQuantizer is deprecated"),
    (UserWarning, r".*_guards_fn.*"),
    (UserWarning, r".*erase_node.*"),
    (UserWarning, r"Attempted to insert a get_attr Node.*"),
    (UserWarning, r".*is not a registered.*"),
    (UserWarning, r"Please use the new API settings.*"),
    (UserWarning, r"TypedStorage is deprecated.*"),
    (UserWarning, r".*quantize_per_tensor.*"),
    (UserWarning, r"must run observer before calling calculate_qparams.*"),
    (UserWarning, r"The input of maxpool2d is not quantized.*"),  # X86InductorQuantizer, per model
)


def silence_loggers() -> None:
    """Raise the level of torch / torchao loggers that print noise to ERROR."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level != logging.ERROR:  # setLevel clears every logger's cache: costly on each export
            logger.setLevel(logging.ERROR)


def add_warning_filters() -> None:
    """Install ``ignore`` filters for the known noisy warnings."""
    for category, message in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


@contextmanager
def quiet_imports() -> Iterator[None]:
    """Import torch / torchao inside this block without their import-time noise."""
    silence_loggers()
    with warnings.catch_warnings():
        add_warning_filters()
        yield
    silence_loggers()
