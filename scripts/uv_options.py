"""pip's configuration, said to uv: how ``scripts/bootstrap.sh`` installs with uv what pip would install.

uv installs the same packages as pip several times as fast (it downloads, unpacks and compiles in
parallel), but it does not read pip's configuration: the indexes, local wheel folders, constraint
files and certificate a machine gives pip in ``pip.conf`` or ``PIP_*`` variables. This reads that
configuration with ``pip config list`` and prints, one per line, what uv needs to do the same:

- ``arg<TAB>WORD``: a word of ``uv pip install``'s command line;
- ``env<TAB>NAME=VALUE``: a variable of uv's environment;
- ``index<TAB>URL``: the index in place of PyPI (pip's ``index-url``), apart from the words: an install
  from another index (torch's CPU wheels) replaces it.

Over several indexes pip takes the best version any of them has, so uv is told to do the same
(``--index-strategy unsafe-best-match``). A setting whose meaning for uv is not known here exits with
status 1 and names it: the caller then installs with pip, which reads its configuration itself.

    python scripts/uv_options.py
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

IGNORED = {
    # how pip talks to its user: uv has its own (bootstrap.sh runs it quietly)
    "disable-pip-version-check",
    "progress-bar",
    "quiet",
    "verbose",
    "no-input",
    "root-user-action",
    "no-warn-script-location",
    "require-virtualenv",
    "break-system-packages",
}
"""pip settings that change nothing in what is installed."""

SECTIONS = (":env:", "install", "global")
"""Where pip looks for a setting, from the one that wins: ``PIP_*`` variables, ``[install]``, ``[global]``."""


def pip_settings(python: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """Every setting ``pip config list`` shows (in ``env``, default this process's), by name, from the
    section that wins."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True, env=env
    ).stdout.splitlines()
    found: dict[str, dict[str, str]] = {}
    for line in listed:
        matched = re.fullmatch(r"(:env:|[\w-]+)\.([\w-]+)=(.*)", line.strip())
        if matched is None:
            raise ValueError(f"pip config list: a line not understood: {line!r}")
        section, name, value = matched.groups()
        found.setdefault(name, {})[section] = str(ast.literal_eval(value))
    settings = {}
    for name, by_section in found.items():
        for section in (*SECTIONS, *sorted(by_section)):
            if section in by_section:
                settings[name] = by_section[section]
                break
    return settings


def uv_options(settings: dict[str, str]) -> list[tuple[str, str]]:
    """``("arg", word)``, ``("env", "NAME=VALUE")`` and ``("index", url)`` for uv; ValueError names a setting
    not known here."""
    options: list[tuple[str, str]] = [("arg", "--index-strategy"), ("arg", "unsafe-best-match")]
    for name, value in sorted(settings.items()):
        if name in IGNORED:
            continue
        if name == "index-url":
            options.append(("index", value.strip()))
        elif name in ("extra-index-url", "find-links", "constraint", "trusted-host"):
            flag = {
                "extra-index-url": "--extra-index-url",
                "find-links": "--find-links",
                "constraint": "--constraints",
                "trusted-host": "--allow-insecure-host",
            }[name]
            for word in value.split():
                options += [("arg", flag), ("arg", word)]
        elif name == "no-index":
            if value.strip().lower() in ("1", "true", "yes", "on"):
                options.append(("arg", "--no-index"))
        elif name == "cert":
            options.append(("env", f"SSL_CERT_FILE={value.strip()}"))
        elif name in ("timeout", "default-timeout"):
            options.append(("env", f"UV_HTTP_TIMEOUT={value.strip()}"))
        elif name == "proxy":
            options += [("env", f"HTTP_PROXY={value.strip()}"), ("env", f"HTTPS_PROXY={value.strip()}")]
        elif name == "no-cache-dir":
            options.append(("arg", "--no-cache"))
        else:
            raise ValueError(f"pip's setting {name} has no meaning known here for uv")
    return options


def main(argv: list[str]) -> int:
    try:
        options = uv_options(pip_settings(sys.executable))
    except (ValueError, SyntaxError, subprocess.CalledProcessError) as exc:
        print(f"uv_options: {exc}", file=sys.stderr)
        return 1
    for kind, word in options:
        print(f"{kind}\t{word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
