"""Where a chapter's section is on the course site: an anchor derived from the heading's text.

The feedback links a misconception to the section that teaches it (``selfcheck.misconceptions``), and the
site's build labels every section heading (``docs/site/build.py``); both derive the anchor here, from the
heading alone, so they agree without a table. This module imports nothing heavy: the site is built
without torch.
"""

from __future__ import annotations

import hashlib
import re


def heading_anchor(heading: str) -> str:
    """The heading's ASCII words and a short hash of the whole heading: ``a-sharedquantizationspec-a6e4d2``."""
    words = re.findall(r"[a-z0-9]+", heading.lower())[:6]
    digest = hashlib.sha1(heading.encode("utf-8")).hexdigest()[:6]
    return "-".join([*words, digest])


def site_anchor(notebook: str, anchor: str) -> str:
    """The id of a section on the course site: ``("M03-4", "a-sharedquantizationspec-a6e4d2")`` →
    ``"m03-4-a-sharedquantizationspec-a6e4d2"``."""
    return f"{notebook.lower()}-{anchor}"
