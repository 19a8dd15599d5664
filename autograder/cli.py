"""The ``pt2e-course`` command: maintain the course and grade it.

pt2e-course execute [NOTEBOOK ...]   run source notebooks in place, keeping their outputs
pt2e-course release [MODULE ...]     regenerate release/ from source/ and validate both
pt2e-course lab                      open JupyterLab on release/
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from autograder.course import ROOT, modules, source_notebooks


def cmd_execute(args: argparse.Namespace) -> int:
    from autograder.execute import execute_in_place

    paths = [Path(p) for p in args.notebooks] or source_notebooks()
    for path in paths:
        seconds = execute_in_place(path)
        print(f"執行完成 {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}（{seconds:.1f} 秒）")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from autograder.release import generate_release, validate_release

    for module in args.modules or modules():
        generate_release(module)
        problems = validate_release(module)
        for problem in problems:
            print(f"✗ {problem}")
        if problems:
            return 1
        print(f"release/{module} 已重新產生，source 通過 nbgrader validate，release 未作答時不通過（--invert）")
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    return subprocess.call([sys.executable, "-m", "jupyterlab", f"--notebook-dir={ROOT / 'release'}", *args.extra])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pt2e-course", description="PT2E 量化實作課：維護與評分")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("execute", help="run source notebooks in place (outputs are committed)")
    p.add_argument("notebooks", nargs="*", help="notebook paths (default: every notebook under source/)")
    p.set_defaults(func=cmd_execute)

    p = sub.add_parser("release", help="regenerate release/ from source/ with nbgrader and validate it")
    p.add_argument("modules", nargs="*", help="modules such as M03 (default: all)")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("lab", help="open JupyterLab on release/")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="more JupyterLab arguments")
    p.set_defaults(func=cmd_lab)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
