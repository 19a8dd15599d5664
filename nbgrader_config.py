"""nbgrader configuration of the PT2E course (run nbgrader from the repository root)."""

import os
import sys

c = get_config()  # noqa: F821  (nbgrader injects get_config)

ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "pt2e-course"
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# The gradebook holds the hidden tests and the students' grades: it lives beside the
# course but is never committed (.gitignore); PT2E_GRADEBOOK moves it elsewhere.
c.CourseDirectory.db_url = "sqlite:///" + os.environ.get("PT2E_GRADEBOOK", os.path.join(ROOT, "gradebook.db"))
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".*"]

# What students see in place of the solutions.
c.ClearSolutions.code_stub = {"python": "# 請在這裡寫你的程式碼\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "請在這裡寫你的答案。"

# `nbgrader autograde` runs no Jupyter kernel: the autograde step that would (Execute) is
# replaced by autograder.integrations.nbgrader_bridge.SandboxedExecute, which runs each submission in the
# same sandbox as `pt2e-course grade` (no answer key reachable, a crash keeps what was earned)
# and judges it here. A fresh clone has no gradebook: the assignment is registered first
# (generate_assignment into a temporary folder; release/ is left alone). Set PT2E_SEED to
# fix the hidden cases' seed (it is otherwise new on every run and printed in the log).
# `nbgrader generate_feedback` writes the course's own page for each notebook (the page of `pt2e-course grade`,
# with the gradebook's scores): autograder.integrations.nbgrader_feedback, set up by configure() too.
try:
    try:
        from autograder.integrations.nbgrader_bridge import configure
    except ImportError:
        sys.path.insert(0, ROOT)  # a checkout that is not installed
        from autograder.integrations.nbgrader_bridge import configure
    configure(c, ROOT, c.CourseDirectory.db_url)
except Exception as exc:
    if sys.argv[1:2] == ["autograde"]:
        # never fall back to nbgrader's own Execute: it would grade in a kernel that can import the answer keys
        missing = getattr(exc, "filename", None) if isinstance(exc, FileNotFoundError) else None
        why = f"找不到 {missing}" if missing else f"{type(exc).__name__}：{exc}"
        print(f"nbgrader_config.py：無法設定沙盒評分（{why}），nbgrader autograde 不執行", file=sys.stderr)
        raise SystemExit(1) from None

# nbgrader validate (pt2e-course release) still runs the source notebooks in a kernel:
# exporting a model and calibrating on 2 CPU cores takes seconds, so allow minutes per cell.
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
