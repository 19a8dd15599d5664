"""Everything the sandbox can read of ``autograder``: what runs there, and what both sides share.

What runs inside the sandbox, beside a student's code: the fork server and the runner, the hidden
cases (models the student has not seen), the recording namespace and the replay (in a confined replay
worker). What the trusted side imports from here is what both sides must agree on: the protocol
(``protocol``), the limits a job runs under (``limits``), the job descriptions (``runner.Job``,
``replay_job.ReplayJob``). Nothing here is secret, and nothing here imports from the rest of
``autograder``: the sandbox sees this package and ``common``/``selfcheck``, never ``autograder.keys``
or ``autograder.checks``. What a case produces inside the sandbox is only a recording of the student's
answers; the grader recomputes everything else outside it (``autograder.sandboxed.replay``).
"""
