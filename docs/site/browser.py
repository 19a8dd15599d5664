"""A reader's browser for tests and screenshots: headless Chromium driven over the DevTools protocol.

Chromium is started with ``--remote-debugging-pipe``: it reads protocol commands (JSON, each ended
by a NUL byte) from file descriptor 3 and writes answers and events to descriptor 4, so nothing
listens on a port and nothing beyond the standard library is needed. The flags are the ones this
machine needs (no background networking, a new empty profile). Debian: ``apt-get install chromium``.

    with Browser() as browser:
        browser.open("http://127.0.0.1:8000/M03/M03-4.html")
        browser.evaluate("document.title")
        browser.fonts("article p")          # the fonts that drew the first such element's text
        browser.screenshot(Path("page.png"))
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def chromium() -> str:
    """The Chromium binary; raises with the install command when there is none."""
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        raise RuntimeError("找不到 Chromium：apt-get install chromium（scripts/bootstrap.sh 以 root 執行時會安裝）")
    return found


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, closed, or did not answer in time."""


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        self.width, self.height, self.timeout = width, height, timeout
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def descriptors() -> None:  # in the child: the protocol's pipes become fds 3 and 4
            high_in = fcntl.fcntl(to_browser, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_out = fcntl.fcntl(from_browser, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)  # inheritable: they stay open across exec (os.pipe's ends do not)
            os.dup2(high_out, 4)

        self._process = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=descriptors,
            close_fds=False,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "DOM", "CSS"):
            self.send(f"{domain}.enable")
        self._viewport(height)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.send("Browser.close", session=False)
            except BrowserError:
                pass
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def _message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium 沒有在時限內回應")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium 關閉了")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send one protocol command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self._events.append(answer)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(i)
            self._events.append(self._message(deadline))

    def open(self, url: str) -> None:
        """Go to ``url`` and wait for its load event."""
        self._events.clear()
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, seconds: float = 15.0) -> Any:
        """Evaluate ``expression`` until it is truthy; its value, or BrowserError after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression} 在 {seconds} 秒內沒有成立")
            time.sleep(0.2)

    def fonts(self, selector: str) -> list[dict[str, Any]]:
        """The platform fonts that drew the text of the first element matching ``selector``."""
        root = self.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = self.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        if not node:
            raise BrowserError(f"沒有符合 {selector} 的元素")
        return self.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]

    def set_width(self, width: int) -> None:
        """Make the page's viewport ``width`` pixels wide (a phone's 390, a desktop's 1280); the page lays out again."""
        self.width = width
        self._viewport(self.height)
        time.sleep(0.3)

    def resize(self, height: int) -> None:
        """Make the page's viewport ``height`` pixels tall (the width stays)."""
        self.height = height
        self._viewport(height)
        time.sleep(0.3)  # let the page lay out at the new height

    def _viewport(self, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        """Save a PNG of the viewport, or of the whole page (up to 12,000 px tall)."""
        if full_page:
            self._viewport(min(int(self.evaluate("document.documentElement.scrollHeight")), 12_000))
            time.sleep(0.5)  # let the page lay out at the new height
        try:
            path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        finally:
            if full_page:
                self._viewport(self.height)
