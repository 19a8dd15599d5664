"""What one submission may use: every limit, its default and its help text, declared once.

The sandbox enforces them (``confine``, ``memory``, ``server``); the command line
(``pt2e-course grade`` / ``check``), nbgrader's bridge (``SandboxedExecute``'s settings in
``nbgrader_config.py``) and the Gradescope bundle all read them from here, so a default is
changed in one place (``tests/test_settings.py`` fails if one is restated anywhere else).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def limit(default: int, help: str, unit: str) -> Any:
    """A field of ``Limits``: its default, what it bounds (Chinese, for the command's help) and its unit."""
    return field(default=default, metadata={"help": help, "unit": unit})


@dataclass(frozen=True)
class Limits:
    """What one submission may use."""

    cell_seconds: int = limit(120, "每一格的時間上限", "秒")
    notebook_seconds: int = limit(600, "每本 notebook 的時間上限", "秒")
    memory_mb: int = limit(3072, "一份作業（所有行程合計）可以多用的記憶體", "MB")
    output_kb: int = limit(256, "印出的內容保留多少，之後的只計數", "KB")
    file_mb: int = limit(64, "寫出的單一檔案上限", "MB")
    processes: int = limit(512, "行程數上限", "個")
    tmp_mb: int = limit(256, "每個私有的 /tmp、/var/tmp、/dev/shm 的大小（/dev/shm 也算進記憶體）", "MB")


def described() -> list[tuple[str, int, str, str]]:
    """(name, default, help, unit) of every limit, in the order they are declared."""
    return [(f.name, f.default, f.metadata["help"], f.metadata["unit"]) for f in fields(Limits)]


def option(name: str) -> str:
    """The command-line option of a limit: ``memory_mb`` → ``--memory-mb``."""
    return "--" + name.replace("_", "-")
