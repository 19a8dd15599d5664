"""``scripts/bootstrap.sh`` installs with uv what pip would: ``scripts/uv_options.py`` hands uv pip's configuration.

A machine's pip configuration (local wheel folders, extra indexes, constraints, a certificate) must
reach uv, or uv would install other versions than pip, or none. A setting whose meaning for uv is not
known sends the install to pip rather than dropping it silently.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from uv_options import pip_settings, uv_options


def arguments(options: list[tuple[str, str]]) -> list[str]:
    return [word for kind, word in options if kind == "arg"]


def test_every_index_folder_and_constraint_reaches_uv_and_pip_picks_over_all_indexes() -> None:
    settings = {
        "index-url": "https://mirror.example/simple",
        "extra-index-url": "file:///opt/a/simple\nfile:///opt/b/simple",
        "find-links": "/opt/wheels /srv/wheels",
        "constraint": "/etc/pip/constraints.txt",
        "cert": "/etc/ssl/ca.pem",
        "default-timeout": "180",
        "disable-pip-version-check": "1",
    }
    options = uv_options(settings)
    words = arguments(options)
    assert words[:2] == ["--index-strategy", "unsafe-best-match"], "pip takes the best version over every index"
    pairs = list(zip(words[::2], words[1::2], strict=True))
    assert ("--extra-index-url", "file:///opt/a/simple") in pairs and (
        "--extra-index-url",
        "file:///opt/b/simple",
    ) in pairs
    assert ("--find-links", "/opt/wheels") in pairs and ("--find-links", "/srv/wheels") in pairs
    assert ("--constraints", "/etc/pip/constraints.txt") in pairs
    assert ("env", "SSL_CERT_FILE=/etc/ssl/ca.pem") in options and ("env", "UV_HTTP_TIMEOUT=180") in options
    assert ("index", "https://mirror.example/simple") in options, "apart from the words: another index replaces it"
    assert "https://mirror.example/simple" not in words


@pytest.mark.parametrize("setting", ["proxy-auth-helper", "use-feature", "no-binary", "only-binary", "pre"])
def test_a_setting_not_known_for_uv_sends_the_install_to_pip(setting: str) -> None:
    with pytest.raises(ValueError, match=setting):
        uv_options({setting: ":all:"})


def test_the_settings_are_read_from_the_section_pip_lets_win(tmp_path: Path) -> None:
    """``PIP_*`` variables over ``[install]`` over ``[global]``, as pip applies them."""
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /global\nconstraint = /c.txt\n[install]\nfind-links = /install\n")
    env = {"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": str(config), "PIP_EXTRA_INDEX_URL": "file:///env/simple"}
    settings = pip_settings(sys.executable, env)
    assert settings["find-links"] == "/install" and settings["constraint"] == "/c.txt"
    assert settings["extra-index-url"] == "file:///env/simple"


def test_the_bootstrap_installs_with_uv_and_falls_back_to_pip() -> None:
    """Every install of the bootstrap goes through its ``install`` (uv, or pip where uv fails)."""
    text = (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
    body = text[text.index("\ninstall() {") :]
    body = body[body.index("\n}\n") :]
    assert 'pip" install' not in body, "a pip install outside install()"
    assert 'install --index-url "$TORCH_CPU_INDEX" "torch==2.13.0"' in body
    assert 'install -e ".[instructor,dev,backends,site]"' in body


def test_reading_a_notebook_builds_no_iri_parser() -> None:
    """The bootstrap leaves rfc3987-syntax out: with it, each process that imports nbformat (every nbgrader
    run, every ``pt2e-course`` command) builds a parser for a format no notebook has (0.7 s)."""
    code = "import sys, nbformat; print('rfc3987_syntax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", "rfc3987-syntax is installed: run make setup (scripts/bootstrap.sh)"
