#!/usr/bin/env bash
# Set up everything the course needs, once: a virtual environment with torch 2.13.0 (CPU)
# installed first, then this project with its dev tools, then graphviz's `dot`.
# Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
# Prefer the system's Python 3.11: other users can read it, so the grader can run
# submissions as an unprivileged user (a Python under /root cannot be read by them).
if [ -z "${PYTHON:-}" ]; then
  for candidate in /usr/bin/python3.11 /usr/local/bin/python3.11 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON="$candidate"; break; fi
  done
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "需要 Python 3.11（找到 $("$PYTHON" --version 2>&1)）。Python 3.11 is required." >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> 建立虛擬環境 $VENV"
  "$PYTHON" -m venv "$VENV"
fi

if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2.13.0"))' 2>/dev/null; then
  echo "==> 安裝 torch 2.13.0（CPU 版；先裝它，後面的套件才不會拉進 CUDA 版）"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==2.13.0"
fi

echo "==> 安裝本課程（common、autograder）與開發工具"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -e ".[dev]"

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
echo "==> 環境就緒：$("$VENV/bin/python" -c 'import torch, torchao; print(f"torch {torch.__version__}, torchao {torchao.__version__}")' 2>/dev/null), $(dot -V 2>&1)"
