"""Gradescope: build an autograder bundle, and grade /autograder/submission inside it.

``build_bundle`` writes a zip with ``setup.sh`` (the image's own python3 when it is 3.11–3.13,
else one installed from the image's package lists; torch 2.13.0 CPU, graphviz and this course),
``run_autograder`` and the course itself (packages and the module's source notebooks, which
the grader needs to restore locked cells; students never see the bundle). ``run_autograder``
calls ``python -m autograder.reports.gradescope``, which grades with the same sandbox and checks as
``pt2e-course grade`` and writes ``results/results.json``. The roots can be moved with ``AUTOGRADER_ROOT`` (and the
interpreter with ``PT2E_PYTHON``), which is how the tests run it locally.
"""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path

from autograder.course import ROOT

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built. Checked for the
# Ubuntu 22.04 and 24.04 base images (README: Gradescope). AUTOGRADER_ROOT moves it elsewhere.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
ROOT="${AUTOGRADER_ROOT:-/autograder}"
supported() { "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' >/dev/null 2>&1; }

apt-get update -qq
apt-get install -y -qq graphviz bubblewrap fonts-noto-cjk >/dev/null  # bubblewrap: the sandbox

# The image's own python3 when the course supports it (3.11-3.13: Ubuntu 24.04 has 3.12); else
# the newest supported python3.X its package lists have (Ubuntu 22.04, whose python3 is 3.10: 3.11).
PYTHON=""
if command -v python3 >/dev/null 2>&1 && supported python3; then
  PYTHON="$(command -v python3)"
else
  for version in 3.13 3.12 3.11; do
    if apt-cache show "python$version" >/dev/null 2>&1; then
      echo "python3 是 $(python3 --version 2>&1 || echo 沒有)：安裝 python$version"
      apt-get install -y -qq "python$version" "python$version-venv" >/dev/null
      PYTHON="$(command -v "python$version")"
      break
    fi
  done
fi
if [ -z "$PYTHON" ] || ! supported "$PYTHON"; then
  echo "這個映像檔沒有 Python 3.11–3.13，套件清單裡也沒有：請選 Ubuntu 22.04 或 24.04 的 base image。" >&2
  exit 1
fi
VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
echo "用 Python $VERSION：$PYTHON"
# Debian and Ubuntu ship venv's pip bootstrap apart (python3.X-venv): install it when venv fails.
if ! "$PYTHON" -m venv "$ROOT/venv" >/dev/null 2>&1; then
  rm -rf "$ROOT/venv"
  apt-get install -y -qq "python$VERSION-venv" >/dev/null
  "$PYTHON" -m venv "$ROOT/venv"
fi
"$ROOT/venv/bin/pip" install --quiet --upgrade pip
"$ROOT/venv/bin/pip" install --quiet torch==2.13.0 --index-url {torch_index}
"$ROOT/venv/bin/pip" install --quiet "$ROOT/source/course{extra}"
# The package is the students' side only; the grader (autograder/) is imported from the bundle.
echo "$ROOT/source/course" > "$("$ROOT/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/pt2e_course_instructor.pth"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT / PT2E_PYTHON move it elsewhere;
# PT2E_SEED fixes the hidden cases (default: a new seed each run).
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{PT2E_PYTHON:-$ROOT/venv/bin/python}}"
mkdir -p "$ROOT/results"
export PT2E_COURSE_ROOT="$ROOT/source/course"
exec "$PYTHON" -m autograder.reports.gradescope --module {module} \\
    --submission "$ROOT/submission" --results "$ROOT/results/results.json" ${{PT2E_SEED:+--seed "$PT2E_SEED"}}
"""

PACKAGE_FILES = ("pyproject.toml", "README.md", "nbgrader_config.py")


def _add_tree(bundle: zipfile.ZipFile, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
            bundle.write(path, f"{prefix}/{path.relative_to(folder).as_posix()}")


def setup_script(module: str) -> str:
    """``setup.sh`` of ``module``'s bundle (its extra installed with the course: M08's ExecuTorch)."""
    from autograder.maintenance.colab import MODULE_EXTRAS, TORCH_CPU_INDEX

    extra = f"[{MODULE_EXTRAS[module]}]" if module in MODULE_EXTRAS else ""
    return SETUP_SH.replace("{extra}", extra).replace("{torch_index}", TORCH_CPU_INDEX)


def build_bundle(module: str, output: Path) -> Path:
    """Write the Gradescope autograder zip for ``module`` to ``output``."""
    if not (ROOT / "source" / module).is_dir():
        raise FileNotFoundError(f"source/{module} 不存在")
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, text in (
            ("setup.sh", setup_script(module)),
            ("run_autograder", RUN_AUTOGRADER.format(module=module)),
        ):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            bundle.writestr(info, text)
        for name in PACKAGE_FILES:
            bundle.write(ROOT / name, f"course/{name}")
        _add_tree(bundle, ROOT / "common", "course/common")
        _add_tree(bundle, ROOT / "selfcheck", "course/selfcheck")
        _add_tree(bundle, ROOT / "autograder", "course/autograder")
        _add_tree(bundle, ROOT / "source" / module, f"course/source/{module}")
    return output


def run(module: str, submission: Path, results: Path, seed: int | None = None) -> dict:
    """Grade the notebooks under ``submission`` (one student) and write Gradescope's results.json."""
    from autograder.engine.grading import grade_class
    from autograder.reports.results import gradescope_results

    students, seed = grade_class(module, {"submission": submission}, jobs=2, seed=seed)
    payload = gradescope_results(students[0].notebooks, seed)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    return payload


def main() -> None:
    parser = argparse.ArgumentParser(description="grade a Gradescope submission")
    parser.add_argument("--module", required=True)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    run(args.module, args.submission, args.results, args.seed)


if __name__ == "__main__":
    main()
