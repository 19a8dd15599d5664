"""Setup speed: ``scripts/bootstrap.sh`` installing with uv against installing with pip.

``make setup`` (and so the first ``make test`` of a clean clone) creates the virtual environment and
installs torch, then the course with its extras. It installs with uv, given pip's configuration
(``scripts/uv_options.py``); the obvious alternative is pip alone (``PT2E_INSTALLER=pip``). This runs
the whole bootstrap both ways into fresh environments in a temporary folder, in one run on this
machine, prints the wall times and their ratio, and whether both environments hold the same packages.
Both installers' download caches are as this machine left them.

    .venv/bin/python bench/install.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bootstrap(venv: Path, installer: str) -> float:
    """Wall seconds of the bootstrap into ``venv`` with ``installer``."""
    env = {**os.environ, "VENV": str(venv), "PT2E_INSTALLER": installer}
    start = time.perf_counter()
    done = subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the bootstrap with {installer} failed:\n{done.stderr[-2000:]}")
    return seconds


def packages(venv: Path) -> set[str]:
    """``name==version`` of every package in ``venv`` but the installer itself and the course."""
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout
    found = {line.lower().replace("_", "-") for line in listed.split()}
    return {line for line in found if line.split("==")[0] not in ("uv", "pt2e-course")}


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        pip_venv, uv_venv = Path(folder) / "pip", Path(folder) / "uv"
        pip_seconds = bootstrap(pip_venv, "pip")
        uv_seconds = bootstrap(uv_venv, "uv")
        differ = sorted(packages(pip_venv) ^ packages(uv_venv))
    print(f"bootstrap with pip: {pip_seconds:6.1f} s")
    print(f"bootstrap with uv:  {uv_seconds:6.1f} s")
    print(f"ratio uv / pip: {uv_seconds / pip_seconds:.2f}")
    print("same packages" if not differ else f"packages that differ: {', '.join(differ)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
