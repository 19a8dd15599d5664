#!/usr/bin/env bash
# Set up everything the course needs, once: a virtual environment with torch 2.13.0 (the CPU
# build on Linux) installed first, then this project with its dev tools and the site's packages,
# then graphviz's `dot`, a CJK font, bubblewrap and Chromium (for the site's test).
# Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
# Any Python the course supports (3.11–3.13: torch 2.13.0 and torchao 0.18.0 have wheels for
# them). The system's Python comes first: other users can read it, so the grader can run
# submissions as an unprivileged user (a Python under /root cannot be read by them).
supported() { "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' >/dev/null 2>&1; }
if [ -z "${PYTHON:-}" ]; then
  for candidate in /usr/bin/python3.11 /usr/bin/python3.12 /usr/bin/python3.13 /usr/bin/python3 \
                   python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then PYTHON="$candidate"; break; fi
  done
fi
if [ -z "${PYTHON:-}" ] || ! supported "$PYTHON"; then
  echo "需要 Python 3.11、3.12 或 3.13（找到：$("${PYTHON:-python3}" --version 2>&1)）。" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> 建立虛擬環境 $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# The installer: uv where it can be had, else pip. uv installs what pip would (scripts/uv_options.py
# hands it pip's own configuration: indexes, wheel folders, constraints, certificate; the best version
# over all indexes, as pip takes) in about a third of the time. PT2E_INSTALLER=pip uses pip alone.
INSTALLER=pip UV_ENV=() UV_ARGS=() UV_INDEX=()
if [ "${PT2E_INSTALLER:-uv}" = "uv" ] && UV_OPTIONS="$("$VENV/bin/python" scripts/uv_options.py)" \
    && { [ -x "$VENV/bin/uv" ] || "$VENV/bin/pip" install --quiet --disable-pip-version-check "uv>=0.9" >/dev/null 2>&1; }; then
  INSTALLER=uv
  while IFS=$'\t' read -r kind word; do
    case "$kind" in
      env) UV_ENV+=("$word") ;;
      index) UV_INDEX=(--default-index "$word") ;;
      *) UV_ARGS+=("$word") ;;
    esac
  done <<< "$UV_OPTIONS"
fi
# install [--index-url URL] PACKAGE...: into the venv with uv, or with pip where uv fails (pip then says
# what fails); URL replaces the configured index
install() {
  local index=() uv_index=(${UV_INDEX[@]+"${UV_INDEX[@]}"})
  if [ "$1" = "--index-url" ]; then index=(--index-url "$2") uv_index=(--default-index "$2"); shift 2; fi
  if [ "$INSTALLER" = "uv" ]; then
    # uv's own temporary files (it leaves a lock file per package it builds) go in a folder removed afterwards
    local scratch status=0
    scratch="$(mktemp -d)"
    env TMPDIR="$scratch" ${UV_ENV[@]+"${UV_ENV[@]}"} "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" \
      --compile-bytecode ${UV_ARGS[@]+"${UV_ARGS[@]}"} ${uv_index[@]+"${uv_index[@]}"} "$@" || status=$?
    rm -rf "$scratch"
    if [ "$status" = 0 ]; then return 0; fi
    echo "==> uv 沒能安裝，改用 pip" >&2
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check ${index[@]+"${index[@]}"} "$@"
}

# torch first, so that nothing after it pulls in another build. On Linux, PyPI's torch is the
# CUDA build (about 2.7 GB with its nvidia-* packages): take the CPU build from PyTorch's CPU
# wheel index, and fall back to what pip finds only where that index cannot be reached.
TORCH_CPU_INDEX="${PT2E_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2.13.0"))' 2>/dev/null; then
  if [ "$(uname -s)" = "Linux" ] && "$VENV/bin/python" -c \
      'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=15)' \
      "$TORCH_CPU_INDEX" >/dev/null 2>&1; then
    echo "==> 安裝 torch 2.13.0（CPU 版，來自 PyTorch 的 CPU wheel index）"
    install --index-url "$TORCH_CPU_INDEX" "torch==2.13.0"
  else
    if [ "$(uname -s)" = "Linux" ]; then
      echo "==> 連不到 PyTorch 的 CPU wheel index（$TORCH_CPU_INDEX）：改裝 pip 找到的 torch 2.13.0"
    else
      echo "==> 安裝 torch 2.13.0"
    fi
    install "torch==2.13.0"
  fi
  "$VENV/bin/python" scripts/torch_build.py
fi

echo "==> 安裝本課程（學生端的 common、selfcheck）、開發工具與課程網站的套件"
install -e ".[instructor,dev,backends,site]"
# jsonschema (under nbformat and nbgrader) imports rfc3987-syntax where it is installed, to check the "iri"
# format, which no notebook and no nbgrader file has; that import builds a parser: 0.7 s more for every
# process that reads a notebook (python-jsonschema/jsonschema#1428). Only jupyter-events' extra
# jsonschema[format-nongpl] brings it; without it, jsonschema leaves that one format unchecked.
"$VENV/bin/python" -m pip uninstall --quiet --yes rfc3987-syntax >/dev/null 2>&1 || true

# The instructor's side is not in the package (students must not get it): make this
# checkout's autograder importable in the venv and add the pt2e-course command.
echo "==> 講師端：autograder 與 pt2e-course 指令（只在這份 checkout，不在學生安裝的套件裡）"
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
pwd > "$SITE/pt2e_course_instructor.pth"
printf '#!/bin/sh\nexec "%s/bin/python" -P -m autograder.cli "$@"\n' "$(cd "$VENV" && pwd)" > "$VENV/bin/pt2e-course"
chmod +x "$VENV/bin/pt2e-course"

if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> 安裝 graphviz（畫圖用的 dot 程式）"
    apt-get install -y -qq graphviz >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq graphviz >/dev/null; }
  else
    echo "找不到 graphviz 的 dot 程式：請執行 sudo apt-get install graphviz（macOS：brew install graphviz）。" >&2
    echo "沒有 dot 時圖會改用文字顯示，但測試需要它。" >&2
    exit 1
  fi
fi

# A font with the Chinese glyphs for the drawings (dot draws their PNGs with it; common.viz.FONT names
# Noto Sans CJK TC first). Without one every Chinese character of a drawing is a box.
if [ "$(uname -s)" = "Linux" ] && [ -z "$(fc-list ':lang=zh-tw' family 2>/dev/null)" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> 安裝中文字型 fonts-noto-cjk（圖上的中文才不會變成方框）"
    apt-get install -y -qq fonts-noto-cjk >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq fonts-noto-cjk >/dev/null; }
  else
    echo "找不到中文字型：圖上的中文會變成方框，測試也需要它。請執行 sudo apt-get install fonts-noto-cjk。" >&2
  fi
fi

# bubblewrap: the grading sandbox (only the course's student-side code is visible to submissions).
# Without it grading still runs, and says which isolation measures it could not apply.
if [ "$(uname -s)" = "Linux" ] && ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> 安裝 bubblewrap（評分沙箱）"
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null; }
  else
    echo "找不到 bubblewrap（bwrap）：評分時的隔離會少幾項，請執行 sudo apt-get install bubblewrap。" >&2
  fi
fi
# Chromium: tests/test_site.py reads the course site as a reader does, in headless Chromium.
if [ "$(uname -s)" = "Linux" ] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> 安裝 Chromium（用瀏覽器測試課程網站）"
    apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }
  else
    echo "找不到 Chromium：課程網站的測試需要它，請執行 sudo apt-get install chromium。" >&2
  fi
fi
echo "==> 環境就緒：$("$VENV/bin/python" -c 'import torch, torchao; print(f"torch {torch.__version__}, torchao {torchao.__version__}")' 2>/dev/null), $(dot -V 2>&1)"
