"""The record of every exercise, with its public cases: one module per notebook, run by the preview.

Each module (``m03_4`` for M03-4) declares ``PUBLIC = declare(__name__, Exercise(key, title, names,
public_cases, ...), ...)``: the exercise's title, the names the student defines, its tolerances and a
few public cases. Title and names are declared here and nowhere else: the notebook is read from the
module's name (``selfcheck.casekit.notebook_of``), and the hidden cases module of the same name
(``autograder/sandboxed/cases``) extends this record with its hidden cases (``with_hidden_cases``).

They ship to students: they build the chapters' own models, never the hidden ones, and
hold no answer. Their expected evidence is in ``selfcheck/expected`` (computed at release).
"""
