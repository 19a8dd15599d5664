"""The grading engine (trusted): find what a student handed in, run it in the sandbox, judge the evidence.

``submission`` reads a class's folders and notebooks, ``sandbox`` starts and talks to the confined fork
server (``autograder.sandboxed``), ``grading`` drives a class through it, ``judge`` runs the hidden checks
(``autograder.checks``) on the evidence against ``reference_evidence`` (the answer key's, ``autograder.keys``).
"""
