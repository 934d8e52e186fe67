"""The execution DAG: call nodes, SSA value nodes and the edges between them.

Edges are ``(src, dst, kind)`` tuples:

- ``calls``: caller call -> callee call;
- ``uses``: value -> call that received it as an argument;
- ``produces``: call -> value it returned.

``A --produces--> v --uses--> B`` is dataflow from call A to call B. Nodes are numbered in creation
order by the tracer, and every edge it adds goes from a lower to a higher id, so the id order is a
topological order of a traced DAG. The node types live in :mod:`codedag.graph.nodes` and the JSON
form in :mod:`codedag.graph.serialize`; both are re-exported here.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codedag.errors import GraphError, SchemaError
from codedag.graph.nodes import EDGE_KINDS, SCHEMA_VERSION, CallNode, Edge, Node, ValueNode
from codedag.graph.serialize import (
    call_dict,
    fast_node,
    node_from_dict,
    value_dict,
)
from codedag.util.gc_pause import gc_paused

__all__ = [
    "EDGE_KINDS",
    "SCHEMA_VERSION",
    "CallNode",
    "Edge",
    "ExecutionDAG",
    "Node",
    "ValueNode",
]


class ExecutionDAG:
    """A traced execution: nodes by id, typed edges and free-form metadata."""

    def __init__(self, metadata: dict[str, Any] | None = None) -> None:
        self.nodes: dict[int, Node] = {}
        self.edges: list[Edge] = []
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._next_id = 0
        self._succ: dict[int, list[tuple[int, str]]] = {}
        self._pred: dict[int, list[tuple[int, str]]] = {}
        self._indexed_edges: list[Edge] | None = None
        self._indexed_len = 0

    # ----------------------------------------------------------------- building
    def _new_id(self, fields_: dict[str, Any]) -> int:
        node_id = fields_.pop("id", None)
        if node_id is None:
            node_id = self._next_id
        elif node_id in self.nodes:
            raise GraphError(f"node id {node_id} already exists; expected a new id")
        self._next_id = max(self._next_id, node_id + 1)
        return node_id

    def add_call(self, **fields_: Any) -> int:
        """Add a :class:`CallNode` (``id`` optional: the next free id) and return its id."""
        node_id = self._new_id(fields_)
        self.nodes[node_id] = CallNode(id=node_id, **fields_)
        return node_id

    def add_value(self, **fields_: Any) -> int:
        """Add a :class:`ValueNode` (``id`` optional: the next free id) and return its id."""
        node_id = self._new_id(fields_)
        self.nodes[node_id] = ValueNode(id=node_id, **fields_)
        return node_id

    def add_edge(self, src: int, dst: int, kind: str) -> None:
        """Append the edge ``(src, dst, kind)``; ``kind`` is one of ``calls/uses/produces``."""
        if kind not in EDGE_KINDS:
            raise GraphError(f"edge kind {kind!r} is unknown; expected one of {EDGE_KINDS}")
        self.edges.append((src, dst, kind))

    # ----------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self.nodes)

    def calls(self) -> Iterator[CallNode]:
        """Iterate over the call nodes in id order of insertion."""
        return (n for n in self.nodes.values() if isinstance(n, CallNode))

    def values(self) -> Iterator[ValueNode]:
        """Iterate over the value nodes in order of insertion."""
        return (n for n in self.nodes.values() if isinstance(n, ValueNode))

    def call(self, node_id: int) -> CallNode:
        """The call node ``node_id``; :class:`GraphError` when it is a value or missing."""
        node = self.nodes.get(node_id)
        if not isinstance(node, CallNode):
            raise GraphError(f"node {node_id} is not a call: {node!r}")
        return node

    def value(self, node_id: int) -> ValueNode:
        """The value node ``node_id``; :class:`GraphError` when it is a call or missing."""
        node = self.nodes.get(node_id)
        if not isinstance(node, ValueNode):
            raise GraphError(f"node {node_id} is not a value: {node!r}")
        return node

    def _index(self) -> None:
        """Bring the adjacency index up to date with ``self.edges`` (appends are incremental)."""
        if self._indexed_edges is not self.edges or len(self.edges) < self._indexed_len:
            self._succ, self._pred = {}, {}
            self._indexed_edges, self._indexed_len = self.edges, 0
        succ, pred = self._succ, self._pred
        for src, dst, kind in self.edges[self._indexed_len :]:
            succ.setdefault(src, []).append((dst, kind))
            pred.setdefault(dst, []).append((src, kind))
        self._indexed_len = len(self.edges)

    def successors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Ids reached by edges leaving ``node_id`` (of one ``kind`` when given), in edge order."""
        self._index()
        return [d for d, k in self._succ.get(node_id, ()) if kind is None or k == kind]

    def predecessors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Ids with edges into ``node_id`` (of one ``kind`` when given), in edge order."""
        self._index()
        return [s for s, k in self._pred.get(node_id, ()) if kind is None or k == kind]

    def dataflow_successors(self, call_id: int) -> list[int]:
        """Calls that used a value this call produced (``call -> value -> call``)."""
        out: list[int] = []
        for value_id in self.successors(call_id, "produces"):
            out.extend(self.successors(value_id, "uses"))
        return out

    def stats(self) -> dict[str, int]:
        """Counts of nodes and edges by kind."""
        calls = sum(1 for n in self.nodes.values() if n.kind == "call")
        out = {"nodes": len(self.nodes), "calls": calls, "values": len(self.nodes) - calls}
        out["edges"] = len(self.edges)
        for kind in EDGE_KINDS:
            out[f"edges_{kind}"] = 0
        for _, _, kind in self.edges:
            out[f"edges_{kind}"] += 1
        return out

    # ----------------------------------------------------------------- checks
    def self_check(self) -> None:
        """Raise :class:`GraphError` listing every violated invariant, or return None.

        Checks: edge kinds and endpoint kinds, dangling edges, cycles, negative times or memory,
        self time above total time, a callee's total time above its caller's.
        """
        problems: list[str] = []
        nodes = self.nodes
        endpoint_kinds = {
            "calls": ("call", "call"),
            "uses": ("value", "call"),
            "produces": ("call", "value"),
        }
        for src, dst, kind in self.edges:
            if src not in nodes or dst not in nodes:
                missing = [str(i) for i in (src, dst) if i not in nodes]
                problems.append(
                    f"dangling edge ({src}, {dst}, {kind}): no node {', '.join(missing)}"
                )
                continue
            expected = endpoint_kinds.get(kind)
            if expected is None:
                problems.append(f"edge ({src}, {dst}) has unknown kind {kind!r}")
            elif (nodes[src].kind, nodes[dst].kind) != expected:
                problems.append(
                    f"edge ({src}, {dst}, {kind}) joins {nodes[src].kind} -> {nodes[dst].kind}; "
                    f"expected {expected[0]} -> {expected[1]}"
                )
            elif kind == "calls":
                parent, child = nodes[src], nodes[dst]
                assert isinstance(parent, CallNode) and isinstance(child, CallNode)  # kinds checked
                if child.total_ns > parent.total_ns:
                    problems.append(
                        f"call {dst} ({child.name}) takes {child.total_ns} ns, more than its "
                        f"caller {src} ({parent.name}, {parent.total_ns} ns)"
                    )
        for node in nodes.values():
            if isinstance(node, CallNode):
                if node.total_ns < 0 or node.self_ns < 0:
                    problems.append(f"call {node.id} ({node.name}) has a negative time")
                elif node.self_ns > node.total_ns:
                    problems.append(f"call {node.id} ({node.name}) has self time above total time")
                if node.mem_bytes < 0:
                    problems.append(f"call {node.id} ({node.name}) has negative memory")
            elif node.nbytes < 0:
                problems.append(f"value {node.id} ({node.name}) has negative nbytes")
        from codedag.graph.algorithms import find_cycle

        cycle = find_cycle(self)
        if cycle:
            problems.append(f"cycle through nodes {' -> '.join(map(str, cycle))}")
        if problems:
            head = "\n  ".join(problems[:50])
            more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
            raise GraphError(f"execution DAG has {len(problems)} problem(s):\n  {head}{more}")

    # ----------------------------------------------------------------- serialization
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, with ``schema_version``."""
        nodes_out = [
            call_dict(n) if isinstance(n, CallNode) else value_dict(n) for n in self.nodes.values()
        ]
        from codedag.version import __version__

        return {
            "schema_version": SCHEMA_VERSION,
            "codedag_version": __version__,
            "metadata": self.metadata,
            "nodes": nodes_out,
            "edges": [[s, d, k] for s, d, k in self.edges],
        }

    @classmethod
    def from_dict(cls, data: Any) -> ExecutionDAG:
        """Rebuild a DAG from :meth:`to_dict` output; raise :class:`SchemaError` if malformed."""
        if not isinstance(data, dict):
            raise SchemaError(f"execution DAG: expected a JSON object, got {type(data).__name__}")
        if "nodes" not in data:
            hint = (
                " (this is a migration plan; give optimize the dag.json written by trace)"
                if "context_device_map" in data
                else ""
            )
            raise SchemaError(f"execution DAG: expected a 'nodes' list, found none{hint}")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise SchemaError(f"execution DAG: expected an integer schema_version, got {version!r}")
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"execution DAG: schema_version {version} is newer than this codedag reads "
                f"(<= {SCHEMA_VERSION}); upgrade codedag"
            )
        if version < 1:
            raise SchemaError(
                f"execution DAG: schema_version {version} was never written by codedag "
                f"(expected 1 to {SCHEMA_VERSION})"
            )
        raw_nodes, raw_edges = data.get("nodes", []), data.get("edges", [])
        metadata = data.get("metadata", {})
        if not isinstance(raw_nodes, list) or not isinstance(raw_edges, list):
            raise SchemaError("execution DAG: expected 'nodes' and 'edges' to be lists")
        if not isinstance(metadata, dict):
            raise SchemaError("execution DAG: expected 'metadata' to be an object")
        dag = cls(metadata=metadata)
        nodes = dag.nodes
        problems: list[str] = []
        for i, raw in enumerate(raw_nodes):
            node = fast_node(raw)
            if node is not None:
                if node.id in nodes:
                    problems.append(f"nodes[{i}]: duplicate id {node.id}")
                nodes[node.id] = node
                continue
            try:
                node = node_from_dict(raw)
            except SchemaError as error:
                problems.append(f"nodes[{i}]: {error}")
                if len(problems) >= 20:
                    break
                continue
            if node.id in nodes:
                problems.append(f"nodes[{i}]: duplicate id {node.id}")
            nodes[node.id] = node
        edges = dag.edges
        for i, raw in enumerate(raw_edges):
            if (
                isinstance(raw, list | tuple)
                and len(raw) == 3
                and type(raw[0]) is int
                and type(raw[1]) is int
                and raw[2] in EDGE_KINDS
            ):
                edges.append((raw[0], raw[1], raw[2]))
            elif len(problems) < 20:
                problems.append(f"edges[{i}]: expected [src:int, dst:int, kind in {EDGE_KINDS}]")
        if not problems:
            problems = _range_problems(nodes)
        if problems:
            raise SchemaError("execution DAG is malformed:\n  " + "\n  ".join(problems))
        dag._next_id = max(nodes, default=-1) + 1
        return dag

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write JSON atomically (gzip-compressed when the name ends in ``.gz``)."""
        from codedag.util.io import atomic_write_bytes

        indent = 1 if len(self.nodes) <= 10_000 else None
        with gc_paused():
            data_dict = self.to_dict()
            text = json.dumps(data_dict, indent=indent, allow_nan=False, separators=(",", ":"))
        data = text.encode("utf-8")
        if str(path).endswith(".gz"):
            data = gzip.compress(data, compresslevel=5)
        return atomic_write_bytes(path, data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ExecutionDAG:
        """Read a DAG written by :meth:`save`; raise :class:`SchemaError` for a bad file.

        The file is read by :func:`codedag.util.io.read_json` (size caps on the raw and inflated
        bytes, ``CODEDAG_MAX_INPUT_MB`` to raise them, a nesting-depth cap, strict UTF-8).
        """
        from codedag.util.io import DAG_MAX_BYTES, input_limit_bytes, read_json

        limit = input_limit_bytes(DAG_MAX_BYTES)
        with gc_paused():
            data = read_json(path, "execution DAG", expect=dict, max_bytes=limit)
            return cls.from_dict(data)

    def __repr__(self) -> str:
        s = self.stats()
        return f"ExecutionDAG(calls={s['calls']}, values={s['values']}, edges={s['edges']})"


_MAX_INT64 = 2**63 - 1


def _range_problems(nodes: dict[int, Node]) -> list[str]:
    """What a tracer never writes: negative or huge times, sizes and ids (0..2**63 - 1), and
    argument descriptions calibration could not rebuild."""
    from codedag.graph.args_check import args_problems

    problems: list[str] = []
    for node_id, node in nodes.items():
        if isinstance(node, CallNode):
            checked = [
                ("id", node_id),
                ("total_ns", node.total_ns),
                ("self_ns", node.self_ns),
                ("mem_bytes", node.mem_bytes),
                ("depth", node.depth),
            ]
            if node.args:
                problems.extend(args_problems(node.args, f"node {node_id} ({node.name})"))
        else:
            checked = [("id", node_id), ("nbytes", node.nbytes)]
        for name, value in checked:
            if not 0 <= value <= _MAX_INT64:
                problems.append(f"node {node_id} ({node.name}): {name} {value} is out of range")
        if len(problems) >= 20:
            return problems[:20]
    return problems
