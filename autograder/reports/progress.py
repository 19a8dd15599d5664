"""A progress display for grading: a bar on a terminal, a line per notebook in a log."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from autograder.engine.grading import NotebookResult
from autograder.reports.hygiene import clean_name
from autograder.reports.report import points_text


class Progress:
    """Counts graded notebooks out of ``total`` and shows it on ``stream``."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.lock = threading.Lock()

    def update(self, student: str, result: NotebookResult) -> None:
        with self.lock:
            self.done += 1
            label = f"{clean_name(student, 40)} {result.notebook} {points_text(result.score)}/{points_text(result.max_score)}"
            if result.tampering:
                label += " ⚠"
            if self.tty:
                width = 30
                filled = width * self.done // max(self.total, 1)
                bar = "█" * filled + "·" * (width - filled)
                self.stream.write(f"\r評分中 [{bar}] {self.done}/{self.total}  {label:<40}")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"[{self.done:>{len(str(self.total))}}/{self.total}] {label}\n")
            self.stream.flush()
