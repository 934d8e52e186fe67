"""Deferred values: what the chain's calls return inside ``__getitem__`` instead of computing.

A :class:`~.lazy_array.LazyArray` (or :class:`~.lazy_tensor.LazyTensor`, after
``torch.from_numpy``) holds a :class:`~.record.Node`: the recorded operation, its arguments (other
nodes, or concrete values copied when recorded) and the result's shape and dtype, known without
computing. Both are :class:`Lazy`: values of the lazy-value core
(:mod:`codedag.backends.lazy_values`) under its own-type rule: never an ``ndarray`` subclass nor a faked ``__class__`` (C code would
read memory that does not exist), so what one cannot answer from the record *forces* it:
:func:`~.record.evaluate` replays the recorded calls through the original CPU functions in this
process (the per-sample reference itself), the value is kept, and from then on it behaves as
that array. Everything that forces is counted by reason (:mod:`.forcing`).

This module is their public face: the values (:mod:`.lazy_array`, :mod:`.lazy_tensor`), how a
call on them is recorded (:mod:`.recorder`: :func:`call`, :func:`start`, :func:`wrap`,
:func:`ready`) and the sample's record (:mod:`.record`). Recording happens only inside a :func:`~.record.deferring` block in this thread (a DataLoader
fetch of a patched process, calibration's replay, a test); a deferred value used anywhere else is
forced on first use. Shapes and dtypes come from :meth:`Op.meta`, computed once per signature, so
recording a step is a few microseconds.
"""

from __future__ import annotations

from codedag.backends.batched.lazy_array import LazyArray
from codedag.backends.batched.lazy_tensor import LazyTensor
from codedag.backends.batched.record import (
    FREEZE_BYTES,
    STATE,
    Node,
    Scope,
    collating,
    deferring,
    evaluate,
    frozen,
    on_stack,
    recording,
    source,
    thaw,
)
from codedag.backends.batched.recorder import (
    Lazy,
    call,
    force_all,
    has_lazy,
    ready,
    start,
    wrap,
)

__all__ = [
    "FREEZE_BYTES", "STATE", "Lazy", "LazyArray", "LazyTensor", "Node", "Scope", "call",
    "collating", "deferring", "evaluate", "force_all", "frozen", "has_lazy", "on_stack", "ready",
    "recording", "source", "start", "thaw", "wrap",
]  # fmt: skip
