"""The execution DAG model and its graph algorithms (imports nothing of codedag but errors).

* :mod:`.algorithms`: Graph algorithms on any :class:`~codedag.graph.interface.DAGView`, through
  rustworkx
* :mod:`.args_check`: Checks of ``CallNode.args`` read from a file: the tracer's argument
  descriptions
* :mod:`.interface`: What the graph algorithms read of a DAG: nodes by id, typed edges, neighbours
  by edge kind
* :mod:`.model`: The execution DAG: call nodes, SSA value nodes and the edges between them
* :mod:`.nodes`: Node types of the execution DAG: calls and SSA values (see
  :mod:`codedag.graph.model`)
* :mod:`.serialize`: JSON form of the execution DAG: node dicts, fast and checked parsing, GC
  pausing
"""

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
