"""The drawing of a traced DAG that Graphviz lays out in seconds: node by node, or coarsened.

Graphviz's ``dot`` takes time that grows much faster than the graph: on one traced YOLO batch
(4,595 nodes) its first 100 nodes drew in 0.15 s, 200 in 5 s, 400 in 27 s and 600 in 88 s. So
what is drawn is decided up front from the node count, never by waiting for ``dot`` to time out:

1. the DAG node by node (:func:`codedag.trace.dot.to_dot`) when it has at most ``max_nodes``;
2. else the coarsened DAG (:class:`~codedag.optimize.coarsen.GraphCoarsening`: repeated,
   isomorphic subgraphs merged into one node saying how many it stands for, ``x16``), when that
   has at most ``max_nodes``;
3. else the coarsened DAG's calls down to the deepest call depth that fits: each call shown
   stands for the calls below it (``+12 calls``); values are left out, and a value one call made
   and another used becomes a ``data`` edge between them;
4. should even the outermost calls be too many, the first ``max_nodes`` of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codedag.graph.model import CallNode, ExecutionDAG
from codedag.optimize.coarse import ClusterNode, CoarsenedDAG
from codedag.optimize.coarsen import GraphCoarsening
from codedag.trace.dot import EDGE_STYLES, SVG_MAX_NODES, VALUE_COLOR, call_color, to_dot
from codedag.util.text import dot_string

_DATA_STYLE = 'color="#1f77b4", style=bold'


@dataclass(frozen=True)
class Drawing:
    """DOT text to draw and what it shows.

    Attributes:
        dot_text: the DOT text.
        nodes: how many nodes it draws.
        dag_nodes: how many nodes the traced DAG has.
        coarsened: whether it draws fewer nodes than the DAG has.
        shows: what it shows, in words (``the coarsened DAG's calls down to depth 2``).
    """

    dot_text: str
    nodes: int
    dag_nodes: int
    coarsened: bool
    shows: str


def choose_drawing(dag: ExecutionDAG, max_nodes: int = SVG_MAX_NODES) -> Drawing:
    """The finest drawing of ``dag`` with at most ``max_nodes`` nodes (see the module docstring)."""
    total = len(dag.nodes)
    if total <= max_nodes:
        return Drawing(to_dot(dag, max_nodes=total), total, total, False, "the DAG node by node")
    coarse = GraphCoarsening().coarsen(dag)
    if len(coarse.nodes) <= max_nodes:
        title = f"codedag execution DAG, coarsened: {len(coarse.nodes)} nodes for {total}"
        return Drawing(
            _coarse_dot(coarse, title),
            len(coarse.nodes),
            total,
            True,
            "the coarsened DAG (repeated subgraphs merged)",
        )
    return outer_calls_drawing(coarse, max_nodes)


def outer_calls_drawing(coarse: CoarsenedDAG, max_nodes: int) -> Drawing:
    """The coarsened DAG's calls down to the deepest call depth with at most ``max_nodes`` calls
    (each standing for the calls below it); the first ``max_nodes`` outermost ones when even
    depth 0 has more."""
    total = len(coarse.source.nodes)
    calls = {i: n for i, n in coarse.nodes.items() if n.kind == "call"}
    depths = sorted({n.depth for n in calls.values()}, reverse=True) or [0]
    for depth in depths:
        shown = {i for i, n in calls.items() if n.depth <= depth}
        if len(shown) <= max_nodes or depth == depths[-1]:
            break
    cut = len(shown) > max_nodes
    if cut:
        shown = set(sorted(shown)[:max_nodes])
    owner = _owners(coarse, calls, shown)
    hidden: dict[int, int] = {}
    for node_id, target in owner.items():
        if node_id != target:
            hidden[target] = hidden.get(target, 0) + 1
    shows = f"the coarsened DAG's calls down to depth {depth}"
    if cut:
        shows = f"the first {max_nodes} of the coarsened DAG's {len(calls)} calls at depth {depth}"
    title = f"codedag execution DAG, coarsened: {shows} ({len(shown)} nodes for {total})"
    lines = _head(title)
    for node_id in sorted(shown):
        node = calls[node_id]
        label = _cluster_label(node)
        if hidden.get(node_id):
            label += f"\n+{hidden[node_id]} calls"
        lines.append(f"  n{node_id} [label={dot_string(label)}, {_call_attrs(coarse, node)}];")
    for src, dst, kind in _folded_edges(coarse, owner):
        style = _DATA_STYLE if kind == "data" else EDGE_STYLES["calls"]
        lines.append(f"  n{src} -> n{dst} [{style}];")
    lines.append("}")
    return Drawing("\n".join(lines) + "\n", len(shown), total, True, shows)


def _owners(coarse: CoarsenedDAG, calls: dict[int, ClusterNode], shown: set[int]) -> dict[int, int]:
    """Each call -> the shown call it is drawn in: itself, or its nearest shown caller."""
    caller: dict[int, int] = {}
    for src, dst, kind in coarse.edges:
        if kind == "calls" and dst in calls and src in calls:
            caller[dst] = min(caller.get(dst, src), src)
    owner = {i: i for i in shown}
    for node_id in calls:
        path: list[int] = []
        current: int | None = node_id
        while current is not None and current not in owner:
            path.append(current)
            current = caller.get(current)
        if current is not None:  # else no shown caller (a cut drawing): the calls are left out
            owner.update((step, owner[current]) for step in path)
    return owner


def _folded_edges(coarse: CoarsenedDAG, owner: dict[int, int]) -> list[tuple[int, int, str]]:
    """``calls`` edges between shown calls, and ``data`` edges from a value's maker to its users."""
    makers: dict[int, list[int]] = {}
    users: dict[int, list[int]] = {}
    edges: dict[tuple[int, int, str], None] = {}
    for src, dst, kind in coarse.edges:
        if kind == "calls" and src in owner and dst in owner:
            edges[(owner[src], owner[dst], "calls")] = None
        elif kind == "produces" and src in owner:
            makers.setdefault(dst, []).append(owner[src])
        elif kind == "uses" and dst in owner:
            users.setdefault(src, []).append(owner[dst])
    for value, made_by in makers.items():
        for src in made_by:
            for dst in users.get(value, ()):
                if (src, dst, "calls") not in edges:
                    edges[(src, dst, "data")] = None
    return [e for e in edges if e[0] != e[1]]


def _head(title: str) -> list[str]:
    return [
        "digraph codedag {",
        f"  label={dot_string(title)}; labelloc=t; rankdir=TB;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]


def _cluster_label(node: ClusterNode) -> str:
    label = node.name if node.instance_count == 1 else f"{node.name} x{node.instance_count}"
    if node.kind == "call":
        label += f"\n{node.total_ns / 1e6:.3f} ms"
    return label


def _call_attrs(coarse: CoarsenedDAG, node: ClusterNode) -> str:
    rep = coarse.source.nodes.get(node.representative_id)
    fill = call_color(rep) if isinstance(rep, CallNode) else "white"
    return f'shape=box, style="rounded,filled", fillcolor="{fill}"'


def _coarse_dot(coarse: CoarsenedDAG, title: str) -> str:
    lines = _head(title)
    for node in coarse.nodes.values():
        label = _dot_label(node)
        if node.kind == "call":
            attrs = _call_attrs(coarse, node)
        else:
            attrs = f'shape=ellipse, style=filled, fillcolor="{VALUE_COLOR}"'
        lines.append(f"  n{node.id} [label={label}, {attrs}];")
    lines.extend(_edge_lines(coarse.edges))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_label(node: ClusterNode) -> str:
    return dot_string(_cluster_label(node))


def _edge_lines(edges: Iterable[tuple[int, int, str]]) -> list[str]:
    return [f"  n{src} -> n{dst} [{EDGE_STYLES.get(kind, '')}];" for src, dst, kind in edges]
