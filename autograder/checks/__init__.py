"""Hidden checks, as pytest tests: one module ``test_<notebook>.py`` per notebook.

Each test judges evidence through the fixtures ``seen`` (the student's) and
``expected`` (the answer key's, computed in the judging process). A module's notebook is read
from its name (``test_m03_4`` judges M03-4: ``selfcheck.casekit.notebook_of``), when ``check``
registers each test. Run them with
``pytest -p autograder.integrations.pytest_plugin --pyargs autograder.checks`` (without ``--evidence`` they judge the answer
key against itself) or through ``autograder.engine.judge``.
"""
