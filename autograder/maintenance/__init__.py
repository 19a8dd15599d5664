"""Course maintenance (trusted, instructor-only): what keeps ``source/`` and ``release/`` right.

``execute`` runs source notebooks, ``release`` generates the student versions with nbgrader, ``outputs``
compares committed outputs as any CPU prints them, ``isa`` runs the course under instruction-set profiles,
``answers`` reads and writes solution cells, ``colab`` writes the Colab setup cells, ``workspace`` copies the
course for a student or a lab, ``weights`` writes the shipped model weights again (``scripts/train_*.py``).
"""
