"""How large a traced DAG Graphviz draws in seconds: the limit ``codedag trace``, its drawings
and the reports share, readable without importing the tracer."""

from __future__ import annotations

SVG_MAX_NODES = 150
"""Largest DAG ``codedag trace`` draws node by node: ``dot`` took 3 s for 150 nodes of a traced
batch, 5 s for 200 and 27 s for 400; a larger DAG is drawn coarsened
(:mod:`codedag.report.dag_drawing`)."""
