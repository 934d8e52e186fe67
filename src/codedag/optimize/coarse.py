"""The coarsened DAG: cluster nodes that stand for one or many isomorphic original nodes.

A cluster node's id is the id of its representative original node, so a node that was not merged
keeps its id. ``original_ids`` lists every original node it stands for (``instance_count`` of them);
times and memory are sums over those instances, so coarsening preserves totals.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codedag.graph.model import ExecutionDAG

COARSE_SCHEMA_VERSION = 1


@dataclass(slots=True)
class ClusterNode:
    """A node of the coarsened DAG.

    Attributes:
        id: coarse id (the representative's original id).
        kind: ``"call"`` or ``"value"``.
        name: canonical name of the call, or the value's name.
        instance_count: how many original nodes this node stands for.
        original_ids: the original node ids, in id order.
        representative_id: the original node whose structure every instance matches.
        cluster_id: id of the merged subgraph this node belongs to, None when never merged.
        depth: smallest call depth among the instances (0 for values).
        total_ns: sum of the instances' total times (calls).
        self_ns: sum of the instances' self times (calls).
        mem_bytes: sum of the instances' memory (calls).
        nbytes: sum of the instances' sizes (values).
    """

    id: int
    kind: str
    name: str
    instance_count: int
    original_ids: list[int]
    representative_id: int
    cluster_id: int | None = None
    depth: int = 0
    total_ns: int = 0
    self_ns: int = 0
    mem_bytes: int = 0
    nbytes: int = 0

    @property
    def node_type(self) -> str:
        """The node type name of the DAG's JSON form: ``function_call`` or ``variable``."""
        return "function_call" if self.kind == "call" else "variable"

    @property
    def performance(self) -> dict[str, float]:
        """Aggregated times in seconds and memory in bytes."""
        return {
            "execution_time": self.total_ns / 1e9,
            "self_time": self.self_ns / 1e9,
            "memory_bytes": self.mem_bytes if self.kind == "call" else self.nbytes,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the fields by name (lists not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True)
class Cluster:
    """A repeated subgraph merged into one: e.g. the per-sample work of a batch.

    Attributes:
        id: cluster id.
        anchor_name: normalized name of the repeated call the subgraph grew from.
        anchor_id: coarse id of the anchor's cluster node.
        instance_count: how many original subgraphs were merged.
        node_ids: coarse ids of the cluster's nodes.
    """

    id: int
    anchor_name: str
    anchor_id: int
    instance_count: int
    node_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the fields by name (lists not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class CoarsenedDAG:
    """The output of :class:`~codedag.optimize.coarsen.GraphCoarsening`.

    Attributes:
        nodes: cluster nodes by coarse id.
        edges: ``(src, dst, kind)`` between coarse ids, without duplicates.
        clusters: merged subgraphs by id.
        source: the original execution DAG (for context keys).
        original_to_coarse: original id -> coarse id, for merged nodes only (others map to self).
        stats: what the coarsening did.
    """

    def __init__(
        self,
        nodes: dict[int, ClusterNode],
        edges: list[tuple[int, int, str]],
        clusters: dict[int, Cluster],
        source: ExecutionDAG,
        original_to_coarse: dict[int, int] | None = None,
        stats: dict[str, Any] | None = None,
    ) -> None:
        self.nodes = nodes
        self.edges = edges
        self.clusters = clusters
        self.source = source
        self.original_to_coarse = original_to_coarse or {}
        self.stats: dict[str, Any] = stats or {}
        self._succ: dict[int, list[tuple[int, str]]] | None = None
        self._pred: dict[int, list[tuple[int, str]]] | None = None

    @classmethod
    def identity(cls, dag: ExecutionDAG) -> CoarsenedDAG:
        """Every original node as its own cluster node (no merging)."""
        nodes: dict[int, ClusterNode] = {}
        for node_id, node in dag.nodes.items():
            nodes[node_id] = _single(node)
        edges = list(dict.fromkeys(dag.edges))
        return cls(nodes, edges, {}, dag, {}, {"original_nodes": len(nodes)})

    def __len__(self) -> int:
        return len(self.nodes)

    def calls(self) -> Iterator[ClusterNode]:
        """Cluster nodes that are calls."""
        return (n for n in self.nodes.values() if n.kind == "call")

    def values(self) -> Iterator[ClusterNode]:
        """Cluster nodes that are values."""
        return (n for n in self.nodes.values() if n.kind == "value")

    def _index(self) -> None:
        if self._succ is None or self._pred is None:
            succ: dict[int, list[tuple[int, str]]] = {}
            pred: dict[int, list[tuple[int, str]]] = {}
            for src, dst, kind in self.edges:
                succ.setdefault(src, []).append((dst, kind))
                pred.setdefault(dst, []).append((src, kind))
            self._succ, self._pred = succ, pred

    def successors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Coarse ids reached from ``node_id`` (by edges of one ``kind`` when given)."""
        self._index()
        assert self._succ is not None
        return [d for d, k in self._succ.get(node_id, ()) if kind is None or k == kind]

    def predecessors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Coarse ids with an edge into ``node_id`` (of one ``kind`` when given)."""
        self._index()
        assert self._pred is not None
        return [s for s, k in self._pred.get(node_id, ()) if kind is None or k == kind]

    def context_keys(self, node_id: int) -> list[str]:
        """The tracer's context keys of every original call a cluster node stands for."""
        nodes = self.source.nodes
        return [getattr(nodes[i], "context_key", "") for i in self.nodes[node_id].original_ids]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (``coarsening_result.json``)."""
        return {
            "schema_version": COARSE_SCHEMA_VERSION,
            "statistics": self.stats,
            "nodes": [n.to_dict() for n in self.nodes.values()],
            "edges": [[s, d, k] for s, d, k in self.edges],
            "clusters": [c.to_dict() for c in self.clusters.values()],
        }

    def __repr__(self) -> str:
        return (
            f"CoarsenedDAG(nodes={len(self.nodes)}, edges={len(self.edges)}, "
            f"clusters={len(self.clusters)})"
        )


def _single(node: Any) -> ClusterNode:
    is_call = node.kind == "call"
    return ClusterNode(
        id=node.id,
        kind=node.kind,
        name=node.name,
        instance_count=1,
        original_ids=[node.id],
        representative_id=node.id,
        depth=node.depth if is_call else 0,
        total_ns=node.total_ns if is_call else 0,
        self_ns=node.self_ns if is_call else 0,
        mem_bytes=node.mem_bytes if is_call else 0,
        nbytes=0 if is_call else node.nbytes,
    )
