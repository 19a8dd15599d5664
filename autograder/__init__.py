"""The course's grading system, laid out by trust and by role.

Hidden checks are pytest functions in ``autograder.checks``; they judge *evidence*:
plain JSON data that ``autograder.sandboxed.cases`` collects by running a student's
definitions on hidden models. Evidence is collected where the student's code runs
and judged in a process that never ran it.

- ``sandboxed/``: the only part of this package the sandbox can read (what runs there, and the
  protocol and limits both sides share); it imports nothing else from ``autograder``.
- ``keys/``, ``checks/``: the answer keys and the hidden checks; secret, never in the sandbox.
- ``engine/``: grading a class (submissions, sandbox, judging); ``reports/``: what grading writes;
  ``integrations/``: nbgrader and pytest; ``maintenance/``: keeping ``source/`` and ``release/`` right.
- ``cli.py`` (``pt2e-course``), ``course.py`` (where the course's files are), ``notebook.py`` (what a
  source notebook's hidden test cell calls).
"""
