"""Layout of the tracer's raw records: field indices, kinds, memory modes, small helpers.

A call record is a plain list indexed by the constants below (lists are the cheapest mutable
records in CPython); :mod:`codedag.trace.calls` fills them and :mod:`codedag.trace.builder`
turns them into DAG nodes. Calls, steps and values share one numbering (:class:`Sequence`): a
record's sequence number is its node id.
"""

from __future__ import annotations

from typing import Any

from codedag.trace.value_nodes import MAX_CONTAINER_SCAN

# Call record fields (records are plain lists, indexed by these constants).
(
    SEQ,
    NAME,
    PARENT,
    SITE,
    DEPTH,
    KIND,
    T0,
    T1,
    OV0,
    OV1,
    SKIP0,
    SKIP1,
    N0,
    N1,
    MEM,
    ARGS,
    RET,
    LIB,
    FRAME,
    CUR0,
    PEAK,
    OWN0,
    INFO,
    LINES,
    NL0,
    NL1,
    DATA,
) = range(27)
# Record kinds: a Python frame, a wrapped library call, a C function seen by the profiler, and a
# step: the operators, subscripts and unrecorded calls of one statement of a user frame.
KIND_PY, KIND_WRAPPED, KIND_C, KIND_STEP = 0, 1, 2, 3
NFIELDS = 27


def step_record(
    seq: int,
    name: str,
    parent: int,
    site: object,
    depth: int,
    times: tuple[int, int, int, int, int, int, int, int],
    args: Any,
    info: object,
) -> list[Any]:
    """A ``KIND_STEP`` record: ``times`` are ``(t0, t1, ov0, ov1, skip0, skip1, nl0, nl1)``;
    ``args`` its raw arguments (None: what it read, from its uses); ``info`` the unit of
    steps that share one statement's time, their recorded siblings, and the names of the
    operations merged on the way to it (:attr:`~codedag.trace.evaluation.Region.path`)."""
    step: list[Any] = [None] * NFIELDS
    step[SEQ], step[NAME], step[PARENT], step[SITE] = seq, name, parent, site
    step[DEPTH], step[KIND] = depth, KIND_STEP
    step[T0], step[T1], step[OV0], step[OV1], step[SKIP0], step[SKIP1], step[NL0], step[NL1] = times
    step[N0] = step[N1] = step[MEM] = 0
    step[ARGS], step[INFO] = args, info
    return step


# Memory measurement modes (Session.memory_mode):
# - per_call (tracemalloc not running when the window opens): a tracemalloc session of its own
#   (start/stop cost ~0.3 us) around each recorded C-level call (wrapped library functions and
#   recorded C functions) gives its peak and retained bytes; nothing is traced in between, so
#   Python code runs at full speed. A Python call reports the peak implied by its callees: the
#   running sum of the bytes they retained plus the largest callee peak on top of it (frees
#   between callees and Python-level allocations are not seen).
# - window (tracemalloc already running, e.g. started by the user): every call reads
#   get_traced_memory()/reset_peak() and the peak is carried up the stack; the tracer's own
#   allocations are measured and subtracted. Much slower: every allocation is traced.
MEMORY_OFF, MEMORY_PER_CALL, MEMORY_WINDOW = "off", "per_call", "window"
# Classification of module bodies (``<module>`` code): an import triggered inside the window.
# Nothing is recorded until the module body returns; its time is the caller's self time.
IMPORT = ("<import>", None, (), None)
# Argument payload kinds in ARGS entries ``(label, payload_kind, payload)``. Labels are ints for
# positional arguments of wrapped calls, parameter names for Python frames, keyword names.
# - ARG_VALUE: the value's sequence number (a value node);
# - ARG_SMALL: ``(sequence number, C-order bytes)`` of a small array argument of a library call
#   (at most ``codedag.trace.args.SMALL_ARRAY_BYTES``);
# - ARG_SCALAR: the scalar itself (int, float, bool, str, bytes, None, complex);
# - ARG_CONTAINER: ``(type name, length, items)`` with ``items`` a list of ``(kind, payload)``
#   (``(key, kind, payload)`` for dicts) for small containers of library calls, else None;
# - ARG_OBJ: an immutable descriptive object kept as is (NumPy scalar, dtype, type, slice);
# - ARG_TYPE: the type of anything else.
ARG_VALUE, ARG_SCALAR, ARG_TYPE, ARG_CONTAINER, ARG_SMALL, ARG_OBJ = 0, 1, 2, 3, 4, 5
# Containers up to this length, nested up to this depth, carry their items.
MAX_ITEMS, MAX_NESTING = 32, 2


class Sequence:
    """The next sequence number of a window (calls, steps and values share one numbering).

    Hot paths read and bump ``next`` inline; :meth:`take` is for the others.
    """

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        """Allocate a sequence number."""
        number = self.next
        self.next = number + 1
        return number


def first_items(obj: Any, limit: int) -> list[Any]:
    """The first ``limit`` items of a list or tuple, or values of a dict."""
    items = obj.values() if type(obj) is dict else obj
    return list(items)[:limit]


def has_data(obj: Any, is_data: Any) -> bool:
    """Whether one of the first items of a container is a data value."""
    items = obj.values() if type(obj) is dict else obj
    for i, item in enumerate(items):
        if i >= MAX_CONTAINER_SCAN:
            break
        if is_data(type(item)):
            return True
    return False
