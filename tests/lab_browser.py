"""Driving JupyterHub and JupyterLab in headless Chromium as a person does: mouse clicks, menus and keys
sent through the DevTools protocol (``Input.dispatch*``), not JavaScript ``click()`` calls.

``Lab`` wraps the site's ``Browser`` (``docs/site/browser.py``). What it knows of JupyterLab 4:

- menus open on a real mouse press and sometimes close again while the page is still settling, so
  ``menu`` retries (Escape, open again);
- a notebook is *windowed*: only the cells near the viewport are drawn, so a cell is found by scrolling
  the notebook's ``.jp-WindowedPanel-outer`` step by step as a reader scrolls (a jump to the end draws
  nothing until the panel catches up);
- whether Run All has finished is not read from the page: prompts are drawn for the cells near the
  viewport only, and the toolbar's kernel indicator (``.jp-Notebook-ExecutionIndicator``) is an icon
  without text ("Idle" is in the status bar only). ``run_all`` waits on the kernel's own state from the
  server's ``/api/kernels`` (fetched by the page, with its cookies and XSRF token); the caller saves and
  reads the notebook's file to see what ran.
- a terminal (xterm.js) draws its text on a canvas: ``Terminal`` reads it as a screen reader does, from the
  accessibility tree xterm.js keeps beside the canvas (one element per row of the viewport, the row's text as
  the terminal shows it), which JupyterLab's "Screen Reader Mode" setting turns on (``TERMINAL_READABLE``: the
  user's settings file, written before the user's JupyterLab loads).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from autograder.course import ROOT

sys.path.insert(0, str(ROOT / "docs" / "site"))

from browser import Browser, BrowserError

__all__ = ["Browser", "BrowserError", "Lab"]

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
"""The notebook in front."""
MODIFIERS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}
TERMINAL = ".jp-Terminal:not(.lm-mod-hidden)"
"""The terminal in front."""
TERMINAL_READABLE = (
    Path(".jupyter/lab/user-settings/@jupyterlab/terminal-extension/plugin.jupyterlab-settings"),
    '{"screenReaderMode": true}\n',
)
"""Where in a user's home JupyterLab keeps the terminal's settings, and the setting that turns xterm.js's
accessibility tree on (what ``Terminal`` reads)."""


def js(value: Any) -> str:
    """``value`` as a JavaScript literal."""
    return json.dumps(value)


class Lab:
    """A person at JupyterHub's pages in one ``Browser``; screenshots go to ``shots``."""

    def __init__(self, browser: Browser, url: str, shots: Path) -> None:
        self.browser, self.url, self.shots = browser, url, shots
        shots.mkdir(parents=True, exist_ok=True)
        self.user = ""

    # --- the person's hands ---------------------------------------------------------------------------------

    def shot(self, name: str) -> Path:
        """A screenshot of the viewport, ``<shots>/<name>.png``."""
        path = self.shots / f"{name}.png"
        self.browser.screenshot(path)
        return path

    def click_at(self, x: float, y: float) -> None:
        """A left click at the viewport's ``(x, y)``: move, press, release, as a mouse does."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.browser.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            )

    def find(self, selector: str, text: str | None = None) -> str:
        """A JavaScript expression for the first element matching ``selector`` whose trimmed text is ``text``
        (any text when None)."""
        return (
            f"[...document.querySelectorAll({js(selector)})]"
            f".find(e => {js(text)} === null || e.textContent.trim() === {js(text)})"
        )

    def click(self, selector: str, text: str | None = None, seconds: float = 30.0) -> None:
        """Wait until the element (``find``) is shown, scroll it into view and click its middle."""
        element = self.find(selector, text)
        self.browser.wait_for(
            f"(() => {{ const e = {element}; return !!e && e.getBoundingClientRect().width > 0 }})()", seconds
        )
        x, y = self.browser.evaluate(
            f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2] })()"
        )
        self.click_at(x, y)

    def key(self, key: str, code: str, key_code: int, *modifiers: str) -> None:
        """Press and release one key (``key`` as in ``KeyboardEvent.key``, ``code``, the virtual key code),
        with modifiers held ("Control", "Shift"...)."""
        mask = sum(MODIFIERS[m] for m in modifiers)
        for kind in ("keyDown", "keyUp"):
            self.browser.send(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code, "modifiers": mask},
            )

    def escape(self) -> None:
        self.key("Escape", "Escape", 27)

    def type(self, text: str) -> None:
        """Text typed into what has the focus (``Input.insertText``: what a keyboard or an input method
        sends; no shortcut fires, no auto-indent is added)."""
        self.browser.send("Input.insertText", {"text": text})

    def wait(self, expression: str, seconds: float = 30.0) -> Any:
        return self.browser.wait_for(expression, seconds)

    def text(self, selector: str = "body") -> str:
        """The shown text of the first element matching ``selector`` ("" when there is none)."""
        return self.browser.evaluate(f"(document.querySelector({js(selector)}) || {{innerText: ''}}).innerText")

    # --- JupyterHub and JupyterLab ----------------------------------------------------------------------------

    def login(self, user: str, password: str) -> None:
        """Log in through the hub's form and wait for the user's JupyterLab (their server starts meanwhile)."""
        self.browser.open(f"{self.url}/hub/login")
        for field, value in (("#username_input", user), ("#password_input", password)):
            self.click(field)
            self.type(value)
        self.click("#login_submit")
        self.user = user
        self.wait_lab()

    def wait_lab(self, seconds: float = 120.0) -> None:
        """Wait until JupyterLab has drawn its main area and its menus (the splash screen is gone)."""
        self.wait(
            f"location.pathname.startsWith('/user/{self.user}/lab')"
            " && !!document.querySelector('#jp-main-dock-panel') && !document.querySelector('#jupyterlab-splash')"
            " && document.querySelectorAll('.lm-MenuBar-item').length > 3",
            seconds,
        )

    def menu(self, top: str, item: str, attempts: int = 5) -> None:
        """Click the menu bar's ``top`` and then its ``item``; tries again when the menu closed too soon."""
        for _ in range(attempts):
            self.click(".lm-MenuBar-item", top)
            try:
                self.click(".lm-Menu-item", item, seconds=3)
                return
            except BrowserError:
                self.escape()
        raise BrowserError(f"選單 {top} > {item} 打不開")

    def submenu(self, top: str, item: str, sub: str, attempts: int = 5) -> None:
        """Click the menu bar's ``top``, then its ``item`` (which opens a submenu), then the submenu's ``sub``."""
        label = ".lm-Menu-item .lm-Menu-itemLabel"
        for _ in range(attempts):
            self.click(".lm-MenuBar-item", top)
            try:
                self.click(label, item, seconds=3)
                self.click(label, sub, seconds=3)
                return
            except BrowserError:
                self.escape()
                self.escape()
        raise BrowserError(f"選單 {top} > {item} > {sub} 打不開")

    def new_terminal(self, seconds: float = 60.0) -> Terminal:
        """File > New > Terminal, as the README says; waits for the shell's first prompt."""
        self.submenu("File", "New", "Terminal")
        self.wait(f"!!document.querySelector('{TERMINAL} .xterm-accessibility-tree')", seconds)
        terminal = Terminal(self)
        terminal.wait_prompt(seconds)
        return terminal

    def dialog(self, seconds: float = 60.0) -> str:
        """The text of the dialog shown (waits for one)."""
        return self.wait(
            "(() => { const d = document.querySelector('.jp-Dialog-content'); return d && d.innerText.trim() })()",
            seconds,
        )

    def close_dialog(self) -> None:
        """Click the dialog's accepting button (OK) and wait until it is gone."""
        self.click(".jp-Dialog-button.jp-mod-accept")
        self.wait("document.querySelector('.jp-Dialog') === null", 10)

    def modal(self, seconds: float = 120.0) -> str:
        """The text of the formgrader's answer (a Bootstrap modal, ``#success-modal`` or ``#error-modal``)."""
        return self.wait(
            "(() => { const m = document.querySelector('#success-modal, #error-modal');"
            " return m && m.classList.contains('in') && m.id + ': ' + m.innerText })()",
            seconds,
        )

    def close_modal(self, seconds: float = 10.0) -> None:
        """Click the modal's button until the modal is gone (a click during its fade-in is lost)."""
        deadline = time.monotonic() + seconds
        while self.browser.evaluate("!!document.querySelector('.modal')"):
            if time.monotonic() > deadline:
                raise BrowserError("formgrader 的對話框關不掉")
            if self.browser.evaluate("!!document.querySelector('.modal.in .modal-footer button')"):
                self.click(".modal.in .modal-footer button")
            time.sleep(0.3)

    def api(self, path: str) -> Any:
        """GET ``/user/<user>/api/<path>`` from the page, with its cookies and its XSRF token (which JupyterHub's
        servers ask of every request authenticated by a cookie); the decoded JSON."""
        return self.browser.evaluate(
            "(() => { const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';"
            f" return fetch({js(f'/user/{self.user}/api/{path}')},"
            " {credentials: 'same-origin', headers: {'X-XSRFToken': decodeURIComponent(xsrf)}}).then(r => r.json()) })()"
        )

    # --- a notebook ---------------------------------------------------------------------------------------

    def cell_with(self, marker: str) -> str:
        """A JavaScript expression for the front notebook's drawn cell whose editor's text holds ``marker``."""
        return (
            f"[...document.querySelectorAll('{NOTEBOOK} .jp-Cell')].find(c => c.querySelector('.cm-content')"
            f" && c.querySelector('.cm-content').innerText.includes({js(marker)}))"
        )

    def scroll_to_cell(self, marker: str) -> str:
        """Scroll the front notebook from the top until the cell holding ``marker`` is drawn; its expression."""
        cell = self.cell_with(marker)
        outer = f"document.querySelector('{NOTEBOOK} .jp-WindowedPanel-outer')"
        self.browser.evaluate(f"{outer}.scrollTop = 0")
        stuck = 0
        while stuck < 20:  # a windowed notebook draws the cells near the viewport only; its height grows meanwhile
            if self.browser.evaluate(f"{cell} !== undefined"):
                return cell
            moved = self.browser.evaluate(
                f"(() => {{ const o = {outer}; const before = o.scrollTop; o.scrollTop += 400;"
                " return o.scrollTop !== before })()"
            )
            stuck = 0 if moved else stuck + 1
            time.sleep(0.1)
        raise BrowserError(f"notebook 裡沒有含 {marker!r} 的格子")

    def replace_cell(self, marker: str, text: str) -> None:
        """Click into the cell holding ``marker``, select its text (Ctrl+A) and type ``text`` in its place."""
        cell = self.scroll_to_cell(marker)
        x, y = self.browser.evaluate(
            f"(() => {{ const e = {cell}.querySelector('.cm-line'); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + 20, r.y + r.height / 2] })()"
        )
        self.click_at(x, y)
        self.wait(f"{cell}.querySelector('.cm-editor').classList.contains('cm-focused')", 10)
        self.key("a", "KeyA", 65, "Control")
        self.type(text)
        first = text.strip().splitlines()[0]
        self.wait(f"{self.cell_with(first)} !== undefined", 10)

    def save(self) -> None:
        """Ctrl+S, and wait until the notebook is no longer marked as changed."""
        self.key("s", "KeyS", 83, "Control")
        self.wait("document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.jp-mod-dirty') === null", 30)

    def kernel_state(self) -> str:
        """The execution state of the user's only kernel (``idle``, ``busy``, ``starting``...)."""
        kernels = self.api("kernels")
        if len(kernels) != 1:
            raise BrowserError(f"{self.user} 應該只有一個 kernel：{kernels}")
        return kernels[0]["execution_state"]

    def run_all(self, seconds: float = 300.0, quiet: float = 1.5) -> float:
        """Run > Run All Cells, and wait until the kernel has been busy and then idle for ``quiet`` seconds; the
        seconds it took. Run All sends every cell's request at once, so the kernel has no idle gap between cells
        longer than a message's round trip; the caller checks the cells' outcome (``save`` and read the file)."""
        start = time.monotonic()
        self.menu("Run", "Run All Cells")
        deadline, busy, idle_since = start + seconds, False, None
        while True:
            state = self.kernel_state()
            busy = busy or state == "busy"
            if busy and state == "idle":
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= quiet:
                    return idle_since - start
            else:
                idle_since = None
            if time.monotonic() > deadline:
                raise BrowserError(f"Run All 在 {seconds} 秒內沒跑完（kernel {state}）")
            time.sleep(0.25)


PROMPT = re.compile(r"^[\w.-]+@[\w.-]+:(?P<cwd>\S.*?)\$$")
"""bash's prompt on Debian (``\\u@\\h:\\w\\$``, ``/etc/bash.bashrc`` and ``/etc/skel/.bashrc``): user, host and folder."""


class Terminal:
    """The JupyterLab terminal in front, typed into and read as a person does: keys go to xterm.js's input, what
    it shows is read from its accessibility tree (``TERMINAL_READABLE``), one string per row of the viewport."""

    def __init__(self, lab: Lab) -> None:
        self.lab, self.browser = lab, lab.browser
        self.count = 0

    def rows(self) -> list[str]:
        """The viewport's rows as shown (no trailing blanks; an empty row is "")."""
        return self.browser.evaluate(self._rows_js())

    def last_row(self) -> str:
        shown = [r for r in self.rows() if r.strip()]
        return shown[-1] if shown else ""

    def wait_prompt(self, seconds: float = 60.0) -> str:
        """Wait until the last row shown is a bare prompt (the shell waits for a command); returns its folder."""
        deadline = time.monotonic() + seconds
        while not (found := PROMPT.match(self.last_row())):
            if time.monotonic() > deadline:
                raise BrowserError(f"終端機在 {seconds} 秒內沒有出現提示字元：{self.rows()[-5:]}")
            time.sleep(0.2)
        return found["cwd"]

    def type(self, text: str) -> None:
        """Type ``text`` key by key (in screen reader mode xterm.js takes printable keys from their key presses, not
        from the text an input method inserts)."""
        for char in text:
            for kind in ("keyDown", "keyUp"):
                self.browser.send("Input.dispatchKeyEvent", {"type": kind, "key": char, "text": char})

    def focus(self) -> None:
        """Click into the terminal (its xterm.js takes the keys from then on)."""
        self.lab.click(f"{TERMINAL} .xterm-screen")
        self.lab.wait(f"document.querySelector('{TERMINAL} .xterm').classList.contains('focus')", 10)

    def run(self, command: str, seconds: float = 300.0) -> tuple[int, str]:
        """Type ``command`` and Enter, as a person does, and read what the terminal shows until the prompt is back;
        then type ``echo pt2e-exit-<n>-$?`` for its exit status. Returns the status and the rows the command
        printed, in order, each once (a long output scrolls: the rows are read every 0.2 s, so a line that
        scrolled past within 0.2 s can be missed)."""
        self.focus()
        self.type(command)
        self.lab.wait(f"{self._rows_js()}.some(t => t.endsWith({js(command)}))", 10)
        self.lab.key("Enter", "Enter", 13)
        printed: dict[str, None] = {}
        deadline = time.monotonic() + seconds
        while True:
            time.sleep(0.2)
            rows = [r for r in self.rows() if r.strip()]
            typed_at = [
                i for i, r in enumerate(rows) if r.endswith(command) and PROMPT.match(r[: -len(command)].rstrip())
            ]
            after = rows[typed_at[-1] + 1 :] if typed_at else rows
            done = bool(after) and PROMPT.match(after[-1]) is not None
            printed.update(dict.fromkeys(after[:-1] if done else after))
            if done:
                break
            if time.monotonic() > deadline:
                raise BrowserError(f"{command!r} 在 {seconds} 秒內沒有結束：{rows[-5:]}")
        self.count += 1
        marker = f"pt2e-exit-{self.count}-"
        self.type(f"echo {marker}$?")
        self.lab.wait(f"{self._rows_js()}.some(t => t.endsWith({js(marker + '$?')}))", 10)
        self.lab.key("Enter", "Enter", 13)
        status = self.lab.wait(
            f"{self._rows_js()}.map(t => t.trim()).find(t => t.startsWith({js(marker)})) || null", 10
        )
        self.wait_prompt(10)
        return int(status.removeprefix(marker)), "\n".join(printed)

    def _rows_js(self) -> str:
        return (
            f"[...document.querySelectorAll('{TERMINAL} .xterm-accessibility-tree > div')]"
            ".map(r => r.textContent.replace(/\\u00a0/g, ' ').trimEnd())"
        )
