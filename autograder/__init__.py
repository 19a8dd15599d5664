"""The course's grading system.

Hidden checks are pytest functions in ``autograder.checks``; they judge *evidence*:
plain JSON data that ``autograder.untrusted.cases`` collects by running a student's
definitions on hidden models. Evidence is collected where the student's code runs
and judged in a process that never ran it.
"""
