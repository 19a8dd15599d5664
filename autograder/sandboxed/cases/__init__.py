"""Evidence collection per notebook: the hidden cases each exercise runs the student's code on.

One module per notebook (``m03_4`` for M03-4). Each imports its public twin's record
(``from selfcheck.public.m03_4 import PUBLIC``) and extends it:
``EXERCISES = with_hidden_cases(PUBLIC, key={hidden cases}, ...)``, a dict from exercise key to
``Exercise`` with the public record's notebook, title, names and tolerances and the hidden cases
(``selfcheck.casekit.with_hidden_cases``, which refuses a missing or an extra exercise).
"""
