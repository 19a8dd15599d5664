"""What a grading run writes (trusted): gradebook, feedback, ``results.json``, progress and the Gradescope bundle.

Every string that came from a submission passes ``hygiene.clean`` before it reaches any of them.
"""
