"""Evidence collection per notebook: what each exercise runs the student's code on.

One module per notebook (``m03_4`` for M03-4). Each defines ``NOTEBOOK`` and
``EXERCISES``, a dict from exercise key to ``Exercise``.
"""
