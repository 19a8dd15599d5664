"""The maintainers' and instructors' pages lead somewhere: every relative link of the README, CONTRIBUTING,
SECURITY and ``docs/*.md`` names a file of the checkout, and ``docs/hub.md`` shows one screenshot for each step
the browser test of the hub takes (``tests/test_hub.py``), no more, no fewer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.course import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]


def local_links(page: Path) -> list[str]:
    """The link targets of a markdown page that are files of the checkout (no scheme, no bare anchor)."""
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
    return [t for t in targets if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(page: Path) -> None:
    missing = [t for t in local_links(page) if not (page.parent / t).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to what is not in the checkout"


def test_the_hub_page_shows_each_step_of_the_browser_test() -> None:
    shots = re.findall(r'\.shot\("([\w-]+)"\)', (ROOT / "tests" / "test_hub.py").read_text(encoding="utf-8"))
    shown = [Path(t).stem for t in local_links(ROOT / "docs" / "hub.md") if t.endswith(".png")]
    assert len(shots) == 13 and shown == shots, (shots, shown)
    kept = sorted(p.stem for p in (ROOT / "docs" / "hub").glob("*.png"))
    assert kept == sorted(shots), "a screenshot in docs/hub/ that no step takes, or a step without one"
