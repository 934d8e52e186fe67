"""Trace a data pipeline into an ExecutionDAG: capture, filter, dataflow, DataLoader helpers.

Importing this package installs nothing: the profile hook and library wrappers exist only inside
a tracing window.

* :mod:`.args`: Argument descriptions of library calls (``CallNode.args``)
* :mod:`.builder`: Turn a session's raw records into an :class:`ExecutionDAG`: ids, times, context
  keys, edges
* :mod:`.overhead`: Measure the tracer's unmeasured per-event cost, once per process and memory
  setting
* :mod:`.call_arguments`: Operations computed in the arguments of a user call, made steps as
  the call starts
* :mod:`.calls`: Call records: what the hooks do with a call that passed the filter and the stack
  checks
* :mod:`.capture`: What a recorded call received: its arguments in the raw form of call records
* :mod:`.classify`: Which code objects and C functions a window records: classified once, looked up
  per event
* :mod:`.costs`: Cost accounting: the tracer's own time, each call's memory, and total and self
  times
* :mod:`.dataloader`: Trace the first batch of a PyTorch DataLoader, warmed up, with or without
  worker processes
* :mod:`.dot`: Graphviz DOT text for an ExecutionDAG, and SVG through the ``dot`` program when
  present
* :mod:`.evaluation`: Evaluating a finished statement's expression against what ran (see
  :mod:`codedag.trace.steps`)
* :mod:`.filter`: Which calls the tracer records: user code and the entry points of libraries
* :mod:`.hooks`: The tracer's event source on Python 3.11: the ``sys.setprofile`` hook
* :mod:`.identity`: Values by identity for one tracing window: which object is which value node
* :mod:`.interpose`: Recording wrappers around C-implemented library entry points (cv2, numpy, ...)
* :mod:`.lines`: Following the statements of user frames: where one ends, the next starts (line
  events)
* :mod:`.monitoring`: The tracer's event source on Python 3.12+: ``sys.monitoring`` (PEP 669)
* :mod:`.rebuild`: Calls rebuilt from the argument entries of the trace (``CallNode.args``)
* :mod:`.recorder`: A tracing window: the session that builds the tracer's core and installs its
  event source
* :mod:`.records`: Layout of the tracer's raw records: field indices, kinds, memory modes, small
  helpers
* :mod:`.replay`: Random state for replaying a DataLoader batch: snapshots, and the seeding of
  worker 0
* :mod:`.session_state`: The state of a tracing window: its configuration, raw records, open calls
  and status
* :mod:`.statements`: Static analysis of user functions for line-level dataflow: statements and
  their expressions
* :mod:`.steps`: Steps: what one statement of a user frame computed outside recorded calls
* :mod:`.tracer`: EnhancedTracer: trace a data pipeline into an ExecutionDAG, and a decorator
  form
* :mod:`.value_nodes`: Which values become value nodes, how they are described and how arguments are
  summarized
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codedag.util.exports import lazy_exports

if TYPE_CHECKING:
    from codedag.backends.names import canonical_name
    from codedag.trace.builder import DAGBuilder
    from codedag.trace.filter import FunctionFilter
    from codedag.trace.tracer import EnhancedTracer, trace_dataloader, trace_function

# Imported on first use: a module of the package (``codedag.trace.replay`` saving random state
# around a stored plan) must not pay for the tracer.
_EXPORTS = {
    "DAGBuilder": "codedag.trace.builder",
    "EnhancedTracer": "codedag.trace.tracer",
    "FunctionFilter": "codedag.trace.filter",
    "canonical_name": "codedag.backends.names",
    "trace_dataloader": "codedag.trace.tracer",
    "trace_function": "codedag.trace.tracer",
}

__all__ = [
    "DAGBuilder",
    "EnhancedTracer",
    "FunctionFilter",
    "canonical_name",
    "trace_dataloader",
    "trace_function",
]


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
