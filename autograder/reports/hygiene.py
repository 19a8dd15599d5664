"""Output hygiene: the one function every string from a submission passes before anyone reads it.

A submission controls more text than it seems: its folder and file names, the messages of the
errors its cells raise, the names it patches, the node names and values its answers hold (they
come back inside the checks' messages), and anything it forges. That text reaches the
instructor's terminal, the gradebook CSV, the grading log, ``results.json`` and
``feedback.html``. ``clean`` makes it inert for all of them:

- control characters go (C0 but newline and tab, DEL, C1), and with them every terminal escape
  sequence (``ESC [ … m`` colours, ``ESC ] … BEL`` titles and links), whole;
- Unicode's invisible direction overrides and isolates go (they reorder what a reader sees);
- unpaired surrogates become ``?`` (they cannot be written as UTF-8);
- the text is cut to ``limit`` characters.

HTML escaping is the HTML writer's part: ``results.feedback_html`` escapes everything it writes,
cleaned or not, so a cleaned string is never escaped twice and never left unescaped. CSV quoting
is the ``csv`` module's. Where a sink is written, the code says which of the two it relies on.
"""

from __future__ import annotations

import re

LIMIT = 2000
"""Characters kept of one string, unless the caller asks for fewer."""

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks (ended by BEL or ST)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI in its one-byte C1 form
    r"|\x1b[@-_]?"  # any other escape, and a lone ESC
)
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(value: object, limit: int = LIMIT) -> str:
    """``value`` as text that is safe to show anywhere (see the module docstring); never raises."""
    try:
        text = value if type(value) is str else str.__str__(value) if isinstance(value, str) else str(value)
        if type(text) is not str:
            text = object.__repr__(value)
    except BaseException:  # a hostile __str__ may raise anything
        text = object.__repr__(value)
    text = text.encode("utf-8", "replace").decode("utf-8")  # unpaired surrogates
    text = _INVISIBLE.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n")))
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def clean_name(value: object, limit: int = 80) -> str:
    """A name (a student's folder, a file) on one line: ``clean``, with line breaks and tabs as spaces."""
    return " ".join(clean(value, limit * 4).split())[:limit]
