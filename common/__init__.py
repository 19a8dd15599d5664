"""Helpers the PT2E course notebooks import.

Modules:
    pt2e         torchao's PT2E objects re-exported, ``export_module``, ``quiet``
    models       the small models the chapters use, by name
    graph_utils  reading prepared / converted graphs (observers, annotations)
    qspecs       ready-made ``QuantizationSpec`` objects
    viz          drawings of FX graphs and tables that render in JupyterLab
"""
