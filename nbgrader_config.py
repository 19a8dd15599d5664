"""nbgrader configuration of the PT2E course (run nbgrader from the repository root)."""

import os

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

# Exporting a model and calibrating on 2 CPU cores takes seconds, and a hidden test cell
# judges in a fresh process: allow minutes per cell, never nbgrader's default 30 s.
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True
