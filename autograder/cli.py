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

from autograder.course import ROOT, modules, notebook_id, source_notebooks


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
        if args.no_validate:
            print(f"release/{module} 已重新產生（沒有驗證）")
            continue
        problems = validate_release(module)
        for problem in problems:
            print(f"✗ {problem}")
        if problems:
            return 1
        print(f"release/{module} 已重新產生，source 通過 nbgrader validate，release 未作答時不通過（--invert）")
    return 0


def _limits(args: argparse.Namespace):
    from autograder.untrusted.confine import Limits

    return Limits(cell_seconds=args.cell_seconds, notebook_seconds=args.notebook_seconds, memory_mb=args.memory_mb)


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder.grading import class_folders, grade_class
    from autograder.progress import Progress
    from autograder.results import gradebook_table, write_csv, write_student

    if not (ROOT / "source" / args.module).is_dir():
        print(f"沒有這個模組：source/{args.module} 不存在", file=sys.stderr)
        return 2
    submitted, out = Path(args.submitted), Path(args.out)
    folders = class_folders(submitted, args.module)
    if not folders:
        print(f"{submitted} 底下沒有任何學生的資料夾（應該是 {submitted}/<學生>/{args.module}/*.ipynb）")
    progress = Progress(len(folders) * len(source_notebooks(args.module)))
    students, seed = grade_class(
        args.module, folders, jobs=args.jobs, seed=args.seed, limits=_limits(args), on_done=progress.update
    )
    for student in students:
        write_student(out, student, seed)
    csv_path = write_csv(out, args.module, students)
    print(gradebook_table(students))
    print()
    print(f"成績表：{csv_path}")
    print(f"回饋：{out}/<學生>/{args.module}/feedback.html（Gradescope 格式：results.json）")
    print(f"隱藏測試的亂數種子：{seed}（--seed {seed} 可重現這次評分）")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from autograder.grading import fork_context, grade_notebook, new_seed
    from autograder.report import exercise_report, points_text
    from autograder.submission import UnreadableNotebook, best_match, grade_ids, load_notebook
    from autograder.untrusted.cases.base import exercises_of

    path = Path(args.notebook)
    known = {notebook_id(p): p for p in source_notebooks()}
    notebook = path.stem if path.stem in known else None
    if notebook is None:
        try:
            ids = grade_ids(load_notebook(path)[0])
        except UnreadableNotebook as exc:
            print(str(exc), file=sys.stderr)
            return 2
        import nbformat

        notebook = best_match(ids, {nb: grade_ids(nbformat.read(p, as_version=4)) for nb, p in known.items()})
        if notebook is None:
            print(f"{path.name} 不是本課程的 notebook（找不到對應的章節）", file=sys.stderr)
            return 2
    fork_context()
    seed = args.seed if args.seed is not None else new_seed()
    result = grade_notebook(notebook, path, seed, _limits(args))
    titles = {key: ex.title for key, ex in exercises_of(notebook).items()}
    for warning in result.tampering:
        print(f"⚠ {warning}")
    for note in result.notes:
        print(f"・{note}")
    for key, title in titles.items():
        print(exercise_report(title, [v for v in result.verdicts if v["exercise"] == key]))
    for error in result.cell_errors:
        print(f"  執行時出錯：{error}")
    print(f"{notebook}：{points_text(result.score)} / {points_text(result.max_score)} 分")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from autograder.gradescope import build_bundle

    try:
        path = build_bundle(args.module, Path(args.output))
    except FileNotFoundError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"Gradescope autograder：{path}（上傳到 Gradescope 的 Configure Autograder）")
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
    p.add_argument("--no-validate", action="store_true", help="skip nbgrader validate (it runs every notebook twice)")
    p.set_defaults(func=cmd_release)

    def limits(p: argparse.ArgumentParser) -> None:
        p.add_argument("--cell-seconds", type=int, default=120, help="time limit of one cell")
        p.add_argument("--notebook-seconds", type=int, default=600, help="time limit of one notebook")
        p.add_argument("--memory-mb", type=int, default=3072, help="memory a submission may add")
        p.add_argument("--seed", type=int, default=None, help="seed of the hidden cases (default: random)")

    p = sub.add_parser("grade", help="grade every submission of a module")
    p.add_argument("module", help="e.g. M03")
    p.add_argument("--submitted", default="submitted", help="nbgrader layout: DIR/<student>/<MODULE>/*.ipynb")
    p.add_argument("--out", default="graded", help="where results.json, feedback.html and the CSV go")
    p.add_argument("--jobs", type=int, default=2, help="notebooks graded at the same time")
    limits(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("check", help="grade one notebook and show each check")
    p.add_argument("notebook", help="path to a notebook, e.g. release/M03/M03-4.ipynb")
    limits(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("gradescope", help="build a Gradescope autograder bundle")
    p.add_argument("module", help="e.g. M03")
    p.add_argument("-o", "--output", default="autograder.zip")
    p.set_defaults(func=cmd_gradescope)

    p = sub.add_parser("lab", help="open JupyterLab on release/")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="more JupyterLab arguments")
    p.set_defaults(func=cmd_lab)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.exit(args.func(args))


if __name__ == "__main__":
    main()
