"""What runs inside the sandbox, beside a student's code.

The runner, the fork server and the hidden cases (models the student has not seen) live
here. Nothing here is secret: the sandbox sees this package and ``common``/``selfcheck``,
and never ``autograder.keys`` or ``autograder.checks``. What a case produces inside the
sandbox is only a recording of the student's answers; the grader recomputes everything
else on the trusted side (``autograder.untrusted.replay``).
"""
