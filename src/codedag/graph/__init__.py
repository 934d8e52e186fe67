"""The execution DAG model and its graph algorithms (imports nothing of codedag but errors)."""

from codedag.graph.model import (
    EDGE_KINDS,
    SCHEMA_VERSION,
    CallNode,
    Edge,
    ExecutionDAG,
    Node,
    ValueNode,
)

__all__ = ["EDGE_KINDS", "SCHEMA_VERSION", "CallNode", "Edge", "ExecutionDAG", "Node", "ValueNode"]
