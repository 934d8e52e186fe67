"""What the graph algorithms read of a DAG: nodes by id, typed edges, neighbours by edge kind.

The traced :class:`~codedag.graph.model.ExecutionDAG` satisfies it, and so does any other DAG
with the same shape (the optimizer's coarsened graph).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from codedag.graph.nodes import Edge, Node


class DAGView(Protocol):
    """Read access to a DAG of call and value nodes."""

    @property
    def nodes(self) -> Mapping[int, Node]:
        """Nodes by id."""
        ...

    @property
    def edges(self) -> Sequence[Edge]:
        """``(source id, destination id, kind)`` triples."""
        ...

    def successors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Ids of the nodes ``node_id`` has edges to (of ``kind`` when given)."""
        ...

    def predecessors(self, node_id: int, kind: str | None = None) -> list[int]:
        """Ids of the nodes with edges to ``node_id`` (of ``kind`` when given)."""
        ...
