"""The student side of the course's grading: the preview a notebook runs while you work.

Everything in this package ships to students (the wheel, Colab, ``pip install``): the
public cases of each exercise, their expected evidence for the preview seed (data
computed from the answer key when the course is released, in ``selfcheck/expected``),
and the comparison. It holds no answer key and no hidden case.
"""

from selfcheck.practice import practice
from selfcheck.preview import PREVIEW_SEED, ChecksFailed, preview

__all__ = ["PREVIEW_SEED", "ChecksFailed", "practice", "preview"]
