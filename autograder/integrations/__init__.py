"""Other tools driving the grader (trusted): nbgrader's autograde (``nbgrader_bridge``) and pytest (``pytest_plugin``)."""
