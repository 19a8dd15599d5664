"""The class report's build time for a class of 240 and of 500, against writing the same class's feedback.

Issue 38 asks for a report that builds in under 10 seconds for a class of 200 on 2 cores, and designs for
500. The obvious work to hold it against is what grading already writes for the same class: every
student's ``feedback.html`` and ``results.json`` (``autograder.reports.results.write_student``). Both
run here, in one process, on the same synthetic class (``autograder.maintenance.synthetic_class``: the
kept answers of M03 graded once, students drawn from them). The last column is the whole
``pt2e-course report`` command, imports and all, as an instructor runs it.

    .venv/bin/python bench/report.py [--students 240 500] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[240, 500])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--module", default="M03")
    args = parser.parse_args()

    from autograder.maintenance.synthetic_class import module_answers, synthetic_students
    from autograder.reports.class_record import write_record
    from autograder.reports.class_report import write_report
    from autograder.reports.results import write_student

    answers = module_answers(args.module, 0)
    print(
        f"{'學生':>6}  {'報告（秒）':>10}  {'每人回饋（秒）':>14}  {'報告 / 回饋':>10}  {'pt2e-course report 整個指令（秒）':>10}"
    )
    for count in args.students:
        students = synthetic_students(answers, count, 0)
        report_times, feedback_times, command_times = [], [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp)
                start = time.perf_counter()
                for student in students:
                    write_student(out, student, 0)
                feedback_times.append(time.perf_counter() - start)
                _, record = write_record(out, args.module, students, 0, "bench")
                start = time.perf_counter()
                write_report(out, record)
                report_times.append(time.perf_counter() - start)
                start = time.perf_counter()  # the whole command, as an instructor runs it: imports included
                command = [sys.executable, "-m", "autograder.cli", "report", args.module, "--out", str(out)]
                subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
                command_times.append(time.perf_counter() - start)
        report, feedback = statistics.median(report_times), statistics.median(feedback_times)
        command = statistics.median(command_times)
        print(f"{count:>6}  {report:>10.2f}  {feedback:>14.2f}  {report / feedback:>10.2f}  {command:>10.2f}")


if __name__ == "__main__":
    main()
