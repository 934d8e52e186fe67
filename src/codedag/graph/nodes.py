"""Node types of the execution DAG: calls and SSA values (see :mod:`codedag.graph.model`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

SCHEMA_VERSION = 1
EDGE_KINDS: tuple[str, ...] = ("calls", "uses", "produces")
Edge = tuple[int, int, str]


@dataclass(slots=True)
class CallNode:
    """One call of a Python or C function.

    Attributes:
        id: node id, unique in the DAG.
        name: canonical qualified name (``cv2.resize``, ``numpy.clip``, ``pkg.mod.Cls.method``).
        context_key: the chain of calls from the outermost traced call, ``name#i`` segments
            joined by ``/`` where ``i`` counts earlier calls of that name under the same parent.
        call_site: ``file:line`` of the calling line.
        depth: nesting depth, 0 for the outermost traced call.
        total_ns: wall time of the call including callees (tracer cost subtracted).
        self_ns: ``total_ns`` minus the total of the traced callees.
        mem_bytes: peak increase of traced memory during the call (0 when not measured).
        arg_summaries: short text summaries of the arguments.
        return_summary: short summary of the returned value (None when nothing was returned).
        is_builtin: True for C functions (builtins, extension functions).
        args: JSON descriptions of the arguments of a library call, in call order (positional
            ones named ``"0"``, ``"1"``, ..., then keywords by name), enough to synthesize inputs
            of the same shapes, dtypes and parameters (see docs/dag-format.md); ``None`` when
            not recorded.
        operations: for a step that merges several operations of one statement (``(img /
            255.0 - MEAN) / STD``), the canonical names of those on the way to its value
            (through each one's first data operand), in the order they ran, its own ``name``
            last; empty for any other call.
    """

    id: int
    name: str
    context_key: str = ""
    call_site: str = ""
    depth: int = 0
    total_ns: int = 0
    self_ns: int = 0
    mem_bytes: int = 0
    arg_summaries: list[str] = field(default_factory=list)
    return_summary: str | None = None
    is_builtin: bool = False
    args: list[dict[str, Any]] | None = None
    operations: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "call"
    node_type: ClassVar[str] = "function_call"
    """The node type name of the DAG's JSON form."""

    @property
    def performance(self) -> dict[str, float]:
        """``execution_time`` and ``self_time`` in seconds, ``memory_bytes``."""
        return {
            "execution_time": self.total_ns / 1e9,
            "self_time": self.self_ns / 1e9,
            "memory_bytes": self.mem_bytes,
        }


@dataclass(slots=True)
class ValueNode:
    """One SSA version of a value that flows between calls.

    Attributes:
        id: node id, unique in the DAG.
        name: short name of the value (usually its type, e.g. ``ndarray``).
        version: SSA version: 0 for a value first seen as an argument, +1 each time a call
            returns the same object again.
        type_name: qualified type name (``numpy.ndarray``, ``torch.Tensor``).
        shape: array shape, or None.
        dtype: element type, or None.
        nbytes: size of the data in bytes (0 when unknown).
        device: ``cpu`` or ``cuda:i``.
    """

    id: int
    name: str
    version: int = 0
    type_name: str = ""
    shape: list[int] | None = None
    dtype: str | None = None
    nbytes: int = 0
    device: str = "cpu"
    kind: ClassVar[str] = "value"
    node_type: ClassVar[str] = "variable"
    """The node type name of the DAG's JSON form."""

    @property
    def performance(self) -> dict[str, float]:
        """A value's performance fields: no time, its size as memory."""
        return {"execution_time": 0.0, "self_time": 0.0, "memory_bytes": self.nbytes}


Node = CallNode | ValueNode
