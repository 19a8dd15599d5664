"""Public cases of each notebook's exercises (``mXX_Y.py``: ``NOTEBOOK`` and ``PUBLIC``), run by the preview.

They ship to students: they build the chapters' own models, never the hidden ones, and
hold no answer. Their expected evidence is in ``selfcheck/expected`` (computed at release).
"""
