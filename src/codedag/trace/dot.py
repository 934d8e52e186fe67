"""Graphviz DOT text for an ExecutionDAG, and SVG through the ``dot`` program when present.

Nodes are layered by topological rank (``rank=same`` per layer, top to bottom) and styled by
kind: user calls, library calls and C functions are boxes of different colours, values are
ellipses. Edges are labelled with their kind. No Python graphviz package is needed.

A drawing is an extra: when ``dot`` is missing, fails or takes longer than its time limit (large
DAGs can take minutes), the DOT text is written instead with one warning, and whatever asked for
the drawing (``codedag trace``, the demo) goes on with its results.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from codedag.backends.libraries import is_library_module
from codedag.graph.algorithms import topological_ranks
from codedag.graph.model import CallNode, ExecutionDAG, ValueNode
from codedag.trace.filter import KNOWN_LIBRARIES
from codedag.util.drawing import SVG_MAX_NODES as SVG_MAX_NODES
from codedag.util.io import atomic_write_bytes, atomic_write_text
from codedag.util.text import dot_string

log = logging.getLogger(__name__)

CALL_COLORS = {"user": "#dbe9f6", "library": "#e3f2d9", "builtin": "#fde2c8"}
VALUE_COLOR = "#fff6c9"
EDGE_STYLES = {
    "calls": 'color="#7f7f7f", style=dashed, fontcolor="#7f7f7f"',
    "uses": 'color="#1f77b4", fontcolor="#1f77b4"',
    "produces": 'color="#2ca02c", fontcolor="#2ca02c"',
}
INSTALL_HINT = "install Graphviz (apt-get install graphviz) and run: dot -Tsvg {dot} -o {svg}"
DOT_TIMEOUT_S = 60.0


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


def _call_label(node: CallNode) -> str:
    lines = [node.name, f"{node.total_ns / 1e6:.3f} ms (self {node.self_ns / 1e6:.3f})"]
    if node.mem_bytes:
        lines.append(f"mem +{_human_bytes(node.mem_bytes)}")
    return "\n".join(lines)


def _value_label(node: ValueNode) -> str:
    head = f"{node.name} v{node.version}"
    shape = "" if node.shape is None else "[" + ",".join(map(str, node.shape)) + "]"
    lines = [head, f"{shape} {node.dtype or ''}".strip()]
    if node.nbytes:
        lines.append(_human_bytes(node.nbytes))
    return "\n".join(line for line in lines if line)


def _is_library(top: str) -> bool:
    """Whether a top-level module is library code (known, standard or installed); else user code."""
    return top in KNOWN_LIBRARIES or is_library_module(top)


def call_color(node: CallNode) -> str:
    """Fill colour of a call: builtin, library or user code."""
    if node.is_builtin:
        return CALL_COLORS["builtin"]
    top = node.name.split(".", 1)[0]
    return CALL_COLORS["library"] if _is_library(top) else CALL_COLORS["user"]


def to_dot(dag: ExecutionDAG, title: str = "codedag execution DAG", max_nodes: int = 1500) -> str:
    """DOT text of ``dag`` (the first ``max_nodes`` nodes in id order when it is larger)."""
    shown = dag
    if len(dag.nodes) > max_nodes:
        keep = sorted(dag.nodes)[:max_nodes]
        shown = ExecutionDAG()
        shown.nodes = {i: dag.nodes[i] for i in keep}
        shown.edges = [e for e in dag.edges if e[0] in shown.nodes and e[1] in shown.nodes]
        title += f" (first {max_nodes} of {len(dag.nodes)} nodes)"
    ranks = topological_ranks(shown)
    out = [
        "digraph codedag {",
        f"  label={dot_string(title)}; labelloc=t; rankdir=TB; splines=spline;",
        "  nodesep=0.5; ranksep=0.7;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for node_id, node in shown.nodes.items():
        if isinstance(node, CallNode):
            attrs = f'shape=box, style="rounded,filled", fillcolor="{call_color(node)}"'
            label = _call_label(node)
        else:
            attrs = f'shape=ellipse, style=filled, fillcolor="{VALUE_COLOR}"'
            label = _value_label(node)
        out.append(f"  n{node_id} [label={dot_string(label)}, {attrs}];")
    layers: dict[int, list[int]] = {}
    for node_id, rank in ranks.items():
        layers.setdefault(rank, []).append(node_id)
    for rank in sorted(layers):
        members = " ".join(f"n{i};" for i in sorted(layers[rank]))
        out.append(f"  {{ rank=same; {members} }}")
    for src, dst, kind in shown.edges:
        out.append(f"  n{src} -> n{dst} [label={dot_string(kind)}, {EDGE_STYLES.get(kind, '')}];")
    out.append("}")
    return "\n".join(out) + "\n"


def render_svg(dot_text: str, timeout_s: float | None = None) -> bytes | None:
    """SVG bytes from ``dot -Tsvg``; ``None`` when ``dot`` is missing, fails or runs out of time
    (the reason is logged as a warning, except for a missing ``dot``, which callers explain)."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    timeout_s = DOT_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        done = subprocess.run(
            [exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        log.warning(
            "Graphviz took longer than %.0f s to draw the DAG; no SVG (lower --max-nodes)",
            timeout_s,
        )
        return None
    except OSError as error:
        log.warning("Graphviz could not run (%s); no SVG", error)
        return None
    if done.returncode != 0:
        log.warning(
            "Graphviz failed (%s); no SVG", done.stderr.decode(errors="replace").strip()[:300]
        )
        return None
    return done.stdout


READABLE_DRAWING = (
    "`codedag trace` draws it coarsened (dag.svg), as does "
    "codedag.report.dag_drawing.choose_drawing(dag)"
)
"""Where a readable drawing of a DAG too large to draw node by node comes from."""


def write_visualization(
    dag: ExecutionDAG,
    path: str | os.PathLike[str],
    max_nodes: int = 1500,
    timeout_s: float | None = None,
    svg_max_nodes: int = SVG_MAX_NODES,
) -> Path:
    """Write ``path`` as DOT (``.dot``) or SVG; an SVG request writes DOT next to it instead when
    the DAG has more than ``svg_max_nodes`` nodes (Graphviz would take minutes: decided from the
    count, without running ``dot``) or no SVG can be drawn (no ``dot``, a failure, the time limit).
    Each case is said in one warning; a large DAG's says where a readable drawing comes from.

    Returns:
        The file actually written: ``path``, or its ``.dot`` sibling.
    """
    target = Path(path)
    dot_text = to_dot(dag, max_nodes=max_nodes)
    if target.suffix.lower() != ".svg":
        return atomic_write_text(target, dot_text)
    if len(dag.nodes) > svg_max_nodes:
        dot_path = atomic_write_text(target.with_suffix(".dot"), dot_text)
        log.warning(
            "the DAG has %d nodes, more than Graphviz draws node by node in seconds "
            "(svg_max_nodes=%d); wrote %s instead of %s. A readable drawing: %s",
            len(dag.nodes),
            svg_max_nodes,
            dot_path,
            target,
            READABLE_DRAWING,
        )
        return dot_path
    missing = shutil.which("dot") is None
    svg = None if missing else render_svg(dot_text, timeout_s)
    if svg is None:
        dot_path = target.with_suffix(".dot")
        atomic_write_text(dot_path, dot_text)
        if missing:
            log.warning(
                "the dot program is missing; wrote %s instead. To get SVG: %s",
                dot_path,
                INSTALL_HINT.format(dot=dot_path, svg=target),
            )
        else:
            log.warning("wrote %s instead of %s", dot_path, target)
        return dot_path
    return atomic_write_bytes(target, svg)
