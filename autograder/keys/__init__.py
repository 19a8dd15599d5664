"""Answer keys: the reference solution of every exercise, one module per notebook.

The judge runs the same evidence collection on these definitions that it runs on a
student's, so the expected evidence is computed, never hard-coded.
"""
