"""The ``pt2e-course`` command: maintain the course and grade it.

pt2e-course execute [NOTEBOOK ...]   run source notebooks in place, keeping their outputs
pt2e-course release [MODULE ...]     compute the preview's expected evidence, regenerate release/, validate
pt2e-course grade MODULE [--student NAME ...]   grade a class in the sandbox; merge into the CSV gradebook
pt2e-course check NOTEBOOK           grade one notebook and show every check
pt2e-course gradescope MODULE        build a Gradescope autograder bundle
pt2e-course isa [NOTEBOOK ...]       previews and notebooks under every instruction set this CPU can mimic
pt2e-course lab [JUPYTERLAB OPTIONS]  open JupyterLab on your own working copy (work/)
pt2e-course scaffold NOTEBOOK KEY --title T   a new notebook's exercise in all seven places, from templates

Its help and messages are in Chinese (Taiwan), for the course's instructors.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autograder.course import ROOT, CourseNotFound, modules, notebook_id, require_root, source_notebooks


def cmd_execute(args: argparse.Namespace) -> int:
    from autograder.maintenance.execute import execute_in_place

    paths = [Path(p) for p in args.notebooks] or source_notebooks()
    for path in paths:
        seconds = execute_in_place(path)
        print(f"執行完成 {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}（{seconds:.1f} 秒）")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from autograder.maintenance.colab import update_readme
    from autograder.maintenance.release import finish_release, generate_release, validate_release, write_expected

    for module in args.modules or modules():
        write_expected(module)
        generate_release(module)
        finish_release(module)  # the Colab setup cell, and what an unanswered run shows
        update_readme()
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
    from autograder.sandboxed.limits import Limits, described

    return Limits(**{name: getattr(args, name) for name, *_ in described()})


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder.engine.grading import grade_class
    from autograder.engine.submission import class_folders
    from autograder.reports.class_record import command_line, record_path, recorded_seed, write_record
    from autograder.reports.progress import Progress
    from autograder.reports.results import gradebook_table, write_csv, write_student

    if not (ROOT / "source" / args.module).is_dir():
        print(f"沒有這個模組：source/{args.module} 不存在（有的模組：{'、'.join(modules())}）", file=sys.stderr)
        return 2
    submitted, out = Path(args.submitted), Path(args.out)
    if not submitted.is_dir():
        print(
            f"找不到交作業的資料夾 {submitted}（用 --submitted 指定，格式是 <資料夾>/<學生>/{args.module}/*.ipynb）",
            file=sys.stderr,
        )
        return 2
    folders = class_folders(submitted, args.module)
    if args.student:
        unknown = [name for name in args.student if name not in folders]
        if unknown:
            print(f"{submitted} 底下沒有這些學生的資料夾：{'、'.join(unknown)}", file=sys.stderr)
            return 2
        folders = {name: folder for name, folder in folders.items() if name in args.student}
    if not folders:
        print(
            f"{submitted} 底下沒有任何學生的資料夾（應該是 {submitted}/<學生>/{args.module}/*.ipynb）", file=sys.stderr
        )
        return 2
    seed = args.seed
    if args.student and seed is None:  # a regrade meets the hidden models the class met
        seed = recorded_seed(out, args.module)
        if seed is None:
            print(f"找不到全班的評分紀錄（{record_path(out, args.module)}）：這次重評用新的亂數種子")
        else:
            print(f"重評沿用全班的亂數種子 {seed}（來自 {record_path(out, args.module)}；要換一個就加 --seed）")
    progress = Progress(len(folders) * len(source_notebooks(args.module)))
    students, seed = grade_class(
        args.module, folders, jobs=args.jobs, seed=seed, limits=_limits(args), on_done=progress.update
    )
    for student in students:
        write_student(out, student, seed)
    csv_path, kept = write_csv(out, args.module, students, seed)
    record_file, record = write_record(out, args.module, students, seed, command_line(seed=seed))
    print(gradebook_table(students))
    if any(n.tampering for s in students for n in s.notebooks):
        print("⚠：這本 notebook 有竄改紀錄（原因見成績表的 tampering_reason 欄與全班報告）")
    print()
    print(f"隱藏測試的亂數種子：{seed}（--seed {seed} 可重現這次評分）")
    for note in sandbox_notes(students):
        print(f"沙盒：{note}")
    print("寫出的檔案：")
    print(f"成績表：{csv_path}" + (f"（更新了 {len(students)} 位，保留先前評過的 {len(kept)} 位）" if kept else ""))
    print(
        f"回饋：{out}/<學生>/{args.module}/feedback.html 與 results.json（Gradescope 格式），"
        f"這次評的 {len(students)} 位各一份"
    )
    print(f"評分紀錄：{record_file}")
    if not args.no_similarity:
        from autograder.reports.similarity import write_similarity

        similarity = write_similarity(
            out, args.module, class_folders(submitted, args.module), [Path(p) for p in args.similar_to or []]
        )
        print(f"相似度比對：{similarity}")
    print_outputs(write_outputs(out, record))
    return 0


OUTPUT_LABELS = {"canvas": "匯入 Canvas", "moodle": "匯入 Moodle", "report": "全班報告"}


def write_outputs(out: Path, record: Any) -> dict[str, Path]:
    """The gradebook exports and the class report of ``record``: ``OUTPUT_LABELS`` key → path, the report last."""
    from autograder.reports.class_report import write_report
    from autograder.reports.exports import write_canvas, write_moodle

    return {
        "canvas": write_canvas(out, record),
        "moodle": write_moodle(out, record),
        "report": write_report(out, record),
    }


def print_outputs(paths: dict[str, Path]) -> None:
    """One line per file ``write_outputs`` wrote; the class report's is the last line."""
    for key, path in paths.items():
        print(f"{OUTPUT_LABELS[key]}：{path}")


def cmd_report(args: argparse.Namespace) -> int:
    from autograder.reports.class_record import load_record

    try:
        record = load_record(Path(args.out), args.module)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print_outputs(write_outputs(Path(args.out), record))
    return 0


def cmd_synthetic_class(args: argparse.Namespace) -> int:
    from autograder.maintenance.synthetic_class import write_synthetic_class

    path = write_synthetic_class(Path(args.out), args.module, students=args.students, seed=args.seed)
    print(f"合成的全班評分紀錄：{path}（pt2e-course report {args.module} --out {args.out} 產生報告）")
    return 0


def sandbox_notes(students: list[Any]) -> list[str]:
    """How the sandbox ran, said once for the class (the students' feedback leaves it out)."""
    from autograder.reports.hygiene import clean

    return list(dict.fromkeys(clean(n) for s in students for r in s.notebooks for n in r.instructor_notes))


def cmd_check(args: argparse.Namespace) -> int:
    from autograder.engine.grading import fork_context, grade_notebook, new_seed
    from autograder.engine.submission import UnreadableNotebook, best_match, grade_ids, load_notebook
    from autograder.reports.hygiene import clean
    from autograder.reports.report import exercise_report, points_text
    from autograder.sandboxed.cases.base import exercises_of

    path = Path(args.notebook)
    if not path.is_file():
        print(f"找不到檔案：{path}", file=sys.stderr)
        return 2
    try:
        submitted = load_notebook(path)[0]
    except UnreadableNotebook as exc:
        print(str(exc), file=sys.stderr)
        return 2
    known = {notebook_id(p): p for p in source_notebooks()}
    notebook = path.stem if path.stem in known else None
    if notebook is None:
        import nbformat

        ids = grade_ids(submitted)
        notebook = best_match(ids, {nb: grade_ids(nbformat.read(p, as_version=4)) for nb, p in known.items()})
        if notebook is None:
            print(f"{path.name} 不是本課程的 notebook（找不到對應的章節）", file=sys.stderr)
            return 2
    fork_context()
    seed = args.seed if args.seed is not None else new_seed()
    result = grade_notebook(notebook, path, seed, _limits(args))
    titles = {key: ex.title for key, ex in exercises_of(notebook).items()}
    for warning in result.tampering:
        print(f"⚠ {clean(warning)}")
    for note in result.notes:
        print(f"・{clean(note)}")
    for note in result.instructor_notes:
        print(f"・沙盒：{clean(note)}")
    for key, title in titles.items():
        print(exercise_report(title, [v for v in result.verdicts if v["exercise"] == key]))
    for error in result.cell_errors:
        print(f"  執行時出錯：{clean(error)}")
    print(f"{notebook}：{points_text(result.score)} / {points_text(result.max_score)} 分")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from autograder.reports.gradescope import build_bundle

    try:
        path = build_bundle(args.module, Path(args.output))
    except FileNotFoundError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"Gradescope autograder：{path}（上傳到 Gradescope 的 Configure Autograder）")
    return 0


def cmd_isa(args: argparse.Namespace) -> int:
    from autograder.course import ROOT
    from autograder.maintenance import isa

    profiles = args.profile or isa.available()
    print(f"這台機器：torch 選的是 {isa.native_capability()}；要檢查的 profile：{'、'.join(profiles)}")
    failed = 0
    for profile in profiles:
        failures = isa.previews_under(profile, ROOT / "tests" / "fixtures" / "right")
        failed += len(failures)
        print(
            f"{'✓' if not failures else '✗'} {profile}：答案與正確寫法的評分預覽" + ("全部通過" if not failures else "")
        )
        for where, problem in failures.items():
            print(f"    {where}：{problem}")
    for path in [Path(p) for p in args.notebooks]:
        for profile in [p for p in profiles if p != isa.NATIVE]:
            problems = isa.notebook_problems(path, profile)
            failed += len(problems)
            print(f"{'✓' if not problems else '✗'} {profile}：{path}")
            for problem in problems:
                print(f"    {problem}")
    return 1 if failed else 0


def cmd_diagnoses(args: argparse.Namespace) -> int:
    from autograder.maintenance.fixtures import notebook_report, once_report, report

    if args.notebook:
        print(notebook_report(args.notebooks))
    elif args.once:
        print(once_report(args.notebooks, (args.seed or [0])[0]))
    else:
        print(report(args.notebooks, args.seed or [0]))
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from autograder.maintenance.workspace import open_lab

    return open_lab(solutions=args.solutions, extra=args.extra)


def cmd_scaffold(args: argparse.Namespace) -> int:
    from autograder.maintenance.scaffold import NEXT_STEPS, ScaffoldError, scaffold

    root = Path(args.root).resolve() if args.root else ROOT
    try:
        written = scaffold(root, args.notebook, args.exercise, args.title)
    except ScaffoldError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"已在 {root} 建好 {args.notebook} 的練習 {args.exercise}（七個地方）：")
    for path in written:
        print(f"  {path.relative_to(root)}")
    module = args.notebook.split("-")[0]
    source = written[0].relative_to(root)
    print(NEXT_STEPS.format(source=source, module=module, notebook=args.notebook))
    return 0


ARGPARSE_CHINESE = {
    "usage: ": "用法：",
    "positional arguments": "位置引數",
    "options": "選項",
    "show this help message and exit": "顯示這份說明後結束",
    "show program's version number and exit": "顯示版本後結束",
    "argument %(argument_name)s: %(message)s": "引數 %(argument_name)s：%(message)s",
    "the following arguments are required: %s": "缺少必要的引數：%s",
    "unrecognized arguments: %s": "不認得的引數：%s",
    "invalid choice: %(value)r (choose from %(choices)s)": "沒有 %(value)r 這個選項（可以用 %(choices)s）",
    "invalid %(type)s value: %(value)r": "%(value)r 不是有效的 %(type)s",
    "expected one argument": "後面要接一個值",
    "ambiguous option: %(option)s could match %(matches)s": "選項 %(option)s 不明確，可能是 %(matches)s",
    "%(prog)s: error: %(message)s\n": "%(prog)s：錯誤：%(message)s\n",
}
"""argparse's own words, in the language of the rest of the command (argparse reads them through ``_``)."""


@contextlib.contextmanager
def _argparse_in_chinese() -> Iterator[None]:
    english = argparse._
    argparse._ = lambda text: ARGPARSE_CHINESE.get(text, english(text))
    try:
        yield
    finally:
        argparse._ = english


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} 不是整數") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"要是正整數（至少 1），收到 {value}")
    return value


def version() -> str:
    """The installed version of the course package (the repository's pyproject.toml when not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("pt2e-course")
    except PackageNotFoundError:
        import tomllib

        try:
            return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "未知"


def build_parser() -> argparse.ArgumentParser:
    """The command line, in Chinese for the course's instructors (option names stay English)."""
    parser = argparse.ArgumentParser(
        prog="pt2e-course",
        description="PT2E 量化實作課：維護課程與評分（要在課程 repository 的 checkout 裡執行）",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}", help="顯示版本後結束")
    sub = parser.add_subparsers(
        dest="command", required=True, title="指令（pt2e-course <指令> -h 列出它的選項）", metavar="<指令>"
    )

    p = sub.add_parser("execute", help="執行 source/ 的 notebook 並把輸出存回檔案（輸出要 commit）")
    p.add_argument("notebooks", nargs="*", help="notebook 的路徑（預設：source/ 底下全部）")
    p.set_defaults(func=cmd_execute)

    p = sub.add_parser("release", help="用 nbgrader 從 source/ 重新產生 release/ 並驗證")
    p.add_argument("modules", nargs="*", help="模組，例如 M03（預設：全部）")
    p.add_argument("--no-validate", action="store_true", help="不跑 nbgrader validate（它會把每本 notebook 跑兩次）")
    p.set_defaults(func=cmd_release)

    def limits(p: argparse.ArgumentParser) -> None:
        from autograder.sandboxed.limits import described, option

        for name, default, text, unit in described():
            p.add_argument(
                option(name),
                dest=name,
                type=positive_int,
                metavar={"秒": "SECONDS", "個": "N"}.get(unit, unit),
                default=default,
                help=f"{text}（{unit}，預設 {default}）",
            )
        p.add_argument(
            "--seed", type=int, metavar="N", default=None, help="隱藏測試的亂數種子（預設：每次評分隨機選一個）"
        )

    p = sub.add_parser("grade", help="評一個模組全班的作業（沙盒執行），寫出成績表與回饋")
    p.add_argument("module", help="模組，例如 M03")
    p.add_argument(
        "--submitted",
        default="submitted",
        metavar="DIR",
        help="交作業的資料夾，nbgrader 的格式：<資料夾>/<學生>/<模組>/*.ipynb",
    )
    p.add_argument(
        "--out",
        default="graded",
        metavar="DIR",
        help="成績輸出的資料夾：<學生>/<模組>/results.json、feedback.html 與成績表 CSV",
    )
    p.add_argument(
        "--student",
        action="append",
        metavar="NAME",
        help="只重評這位學生（可重複）；成績併入既有的成績表，其他學生的成績保留；沒有 --seed 時沿用全班評分紀錄的亂數種子",
    )
    p.add_argument("--jobs", type=positive_int, metavar="N", default=2, help="同時評幾本 notebook（預設 2）")
    p.add_argument(
        "--similar-to",
        action="append",
        metavar="DIR",
        help="也和這個資料夾裡往屆的作業比相似度（格式同 --submitted；可重複）",
    )
    p.add_argument(
        "--no-similarity", action="store_true", help="不比對答案的相似度（預設：全班互比，也和公開的解答比）"
    )
    limits(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser(
        "report",
        help="從評分紀錄（<out>/<模組>-class.json）產生全班報告 HTML 與 Canvas、Moodle 的匯入檔（grade 結束時也會做）",
    )
    p.add_argument("module", help="模組，例如 M03")
    p.add_argument("--out", default="graded", metavar="DIR", help="評分輸出的資料夾（預設 graded）")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "synthetic-class",
        help="用保留的錯誤答案合成一個全班的評分紀錄（測試與效能量測用），之後可用 report 產生報告",
    )
    p.add_argument("module", help="模組，例如 M03")
    p.add_argument("--students", type=positive_int, default=240, metavar="N", help="學生人數（預設 240）")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="隱藏測試與抽樣的亂數種子（預設 0）")
    p.add_argument("--out", default="synthetic", metavar="DIR", help="寫到哪個資料夾（預設 synthetic）")
    p.set_defaults(func=cmd_synthetic_class)

    p = sub.add_parser("check", help="評一本 notebook，列出每一項檢查的結果")
    p.add_argument("notebook", help="notebook 的路徑，例如 release/M03/M03-4.ipynb")
    limits(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("gradescope", help="打包 Gradescope 的 autograder（zip）")
    p.add_argument("module", help="模組，例如 M03")
    p.add_argument(
        "-o", "--output", default="autograder.zip", metavar="ZIP", help="zip 檔的路徑（預設 autograder.zip）"
    )
    p.set_defaults(func=cmd_gradescope)

    p = sub.add_parser(
        "isa",
        help="在這台 CPU 能模擬的每一種指令集（default、avx2、avx512）下，跑答案的評分預覽與指定的 notebook",
    )
    p.add_argument("notebooks", nargs="*", help="也要在每種指令集下重跑、比對輸出的 source notebook")
    p.add_argument(
        "--profile", action="append", choices=["native", "default", "avx2", "avx512"], help="只跑這種（可重複）"
    )
    p.set_defaults(func=cmd_isa)

    p = sub.add_parser(
        "diagnoses",
        help="把 tests/fixtures/wrong 的錯誤答案照正式評分的方式評一次，列出回饋點名的原因與每個模組診斷對的比例",
    )
    p.add_argument("notebooks", nargs="*", help="notebook 或模組，例如 M03-4、M03（預設：全部）")
    p.add_argument("--seed", type=int, action="append", metavar="N", help="隱藏測試的亂數種子（可重複；預設 0）")
    p.add_argument(
        "--notebook", action="store_true", help="只看筆記本裡看得到的：跑預覽的公開例子，列出它點名的原因（不評分）"
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="一個錯只扣一次：列出每個錯誤答案的分數，和它的原因沒有解釋到、還沒通過的檢查",
    )
    p.set_defaults(func=cmd_diagnoses)

    p = sub.add_parser(
        "scaffold", help="為一本新的 notebook 建一題練習的七個地方（可以評分的範例：數 call_function node），再照著改"
    )
    p.add_argument("notebook", help="新的 notebook，例如 M03-5（模組要已經存在）")
    p.add_argument("exercise", help="練習的 key，也是學生要寫的函式名稱，例如 count_ops")
    p.add_argument("--title", required=True, help="練習的標題，例如「count_ops：數一數圖上的 op」")
    p.add_argument("--root", metavar="DIR", help="寫到這份 repository 的副本（預設：這個 checkout）")
    p.set_defaults(func=cmd_scaffold)

    p = sub.add_parser(
        "lab",
        help="在你自己的作業副本（work/）打開 JupyterLab；其他選項（--no-browser、--ip…）原樣交給 JupyterLab",
    )
    p.add_argument("--solutions", action="store_true", help="改為打開 source/（含解答、已執行、已信任的 notebook）")
    p.set_defaults(func=cmd_lab, extra=[])
    return parser


def main(argv: list[str] | None = None) -> None:
    with _argparse_in_chinese():
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        if unknown and args.func is not cmd_lab:
            parser.error("不認得的引數：" + " ".join(unknown))
        args.extra = unknown  # lab passes JupyterLab's own options through
    try:
        require_root()
        code = args.func(args)
    except CourseNotFound as exc:
        print(f"pt2e-course：{exc}", file=sys.stderr)
        code = 2
    sys.exit(code)


if __name__ == "__main__":
    main()
