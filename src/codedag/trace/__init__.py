"""Trace a data pipeline into an ExecutionDAG: capture, filter, dataflow, DataLoader helpers.

Importing this package installs nothing: the profile hook and library wrappers exist only inside
a tracing window.
"""

from codedag.backends.names import canonical_name
from codedag.trace.builder import DAGBuilder
from codedag.trace.filter import FunctionFilter
from codedag.trace.tracer import EnhancedTracer, trace_dataloader, trace_function

__all__ = [
    "DAGBuilder",
    "EnhancedTracer",
    "FunctionFilter",
    "canonical_name",
    "trace_dataloader",
    "trace_function",
]
