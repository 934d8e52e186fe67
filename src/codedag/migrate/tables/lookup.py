"""Lookup tables: a run of element-wise calls on a uint8 array, computed as one gather.

Image pipelines turn a uint8 image into floats with a few element-wise calls, written as
operators: ``(img.astype(np.float32) / 255.0 - mean) / std``. Each element's result depends only
on its own value (256 possible) and, where a constant varies along the last axis, on its channel.
So the same calls, with the same constants and dtypes, are applied once to a *probe*: the 256
values in every channel (shape ``(256, 1, ..., 1)``). Its result is a table of 256 values per
channel, and the run's value is ``table[img]``, gathered in one pass by ``cv2.LUT``. For a 416 px
RGB image that took 0.31 ms, against 1.62 ms for the four NumPy calls.

Two users make runs pending and compute them when something needs them: the prefix cache, while
a chain computes a sample (a miss: :mod:`codedag.migrate.cache.prefix_values`), and a plan's
``tables`` section after a producer the trace found (:mod:`.run_values`, :mod:`.runtime`). Then the
table gives the value, or the calls run as written.

Exact by construction:

* A call extends a run where :mod:`codedag.backends.exact_tables` (the rule the batched executor's
  fusion follows too) admits it on the run's values: the calls it names (:data:`ELEMENTWISE`:
  those that give numbers, as ufuncs, operators or ``astype``), with clip, minimum, maximum,
  powers, exponentials and logarithms admitted on floats where NumPy's loops agree on this
  machine, and casts of floats to integers only where every value is in the target's range.
* A probe that raises any floating-point exception (division by zero, overflow, underflow,
  invalid) is not used: the real array might not hit that value, and NumPy would warn only where
  it does.
* Constants may only vary along the last axis (one value per channel) and may not give the result
  more dimensions than the array has; the array must be C-contiguous (the result of the calls is
  then C-contiguous, as the gathered one is).
* Each table is checked against the calls themselves on its first samples in each process, bit for
  bit, and timed against them: it is used from then on only if it matched every time and was
  faster (the median of :data:`TRIALS` samples, time per element).
"""

from __future__ import annotations

import statistics
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from codedag.backends import exact_tables


def _gives_numbers(name: str) -> bool:
    """Whether a call of the rule can give a table ``cv2.LUT`` gathers (not only booleans), and
    a run value routes it (ufuncs, operators, ``astype``)."""
    if name in exact_tables.CASTS:
        return name == "numpy.ndarray.astype"
    ufunc = exact_tables.ufunc_name(name)
    function = getattr(np, ufunc or "", None)
    if isinstance(function, np.ufunc):
        return not all(t.endswith("?") for t in function.types if "O" not in t)
    return ufunc == "clip"


ELEMENTWISE = frozenset(name for name in exact_tables.NAMES if _gives_numbers(name))
"""Calls that may extend a run (the rule decides on each run's values: see the module docstring)."""

TRIALS = 3
"""Samples on which each table is checked and timed against the calls, per process."""

MAX_CHANNELS = 4
"""The most channels a per-channel table may have (``cv2.LUT`` takes one table per channel)."""

_GATHERED = frozenset(
    np.dtype(name) for name in ("uint8", "int8", "uint16", "int16", "int32", "float32", "float64")
)
"""Table dtypes ``cv2.LUT`` gathers into (OpenCV's depths)."""

_MAX_TABLES = 1024
_ROOT = b"uint8/"


@dataclass
class Table:
    """One run's probe result and what its first samples found.

    Attributes:
        signature: the run's calls and constants, from its uint8 start.
        probe: the calls applied to the probe, ``(256,) + K`` where ``K`` is all ones but its last
            axis (1, or the array's channels).
        use: whether to gather through the table (None while trials go on).
        table_ns: the gather's time per element on each trial.
        calls_ns: the calls' time per element on each trial.
        mismatches: trials where the gather differed from the calls.
    """

    signature: bytes
    probe: np.ndarray
    use: bool | None = None
    table_ns: list[float] = field(default_factory=list)
    calls_ns: list[float] = field(default_factory=list)
    mismatches: int = 0
    _lut: np.ndarray | None = None

    @property
    def channels(self) -> int:
        """1 for one table for all elements, else the channels of the last axis."""
        return int(self.probe.shape[-1])

    def lut(self) -> np.ndarray:
        """The table as ``cv2.LUT`` takes it: ``(1, 256)`` or ``(1, 256, channels)``."""
        if self._lut is None:
            flat = np.ascontiguousarray(self.probe.reshape(256, self.channels))
            self._lut = flat.reshape(1, 256) if self.channels == 1 else flat.reshape(1, 256, -1)
        return self._lut

    def fits(self, root: np.ndarray) -> bool:
        """Whether the table serves ``root`` (its channels match)."""
        return self.channels == 1 or (root.ndim >= 1 and root.shape[-1] == self.channels)


_tables: dict[bytes, Table | None] = {}
_described: dict[tuple[Any, ...], Table | None] = {}  # see :func:`described`
_lock = threading.Lock()
_counts = {"gathered": 0, "computed": 0, "trials": 0, "mismatches": 0}


def starts(value: Any) -> bool:
    """Whether a computed value can start a run: a C-contiguous uint8 array with dimensions."""
    return (
        type(value) is np.ndarray
        and value.dtype == np.uint8
        and value.ndim >= 1
        and value.flags.c_contiguous
    )


def extend(
    parent: Table | None,
    root: np.ndarray,
    prefix: Any,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    parts: list[bytes],
    token: bytes,
) -> Table | None:
    """The table of ``parent``'s run (``None``: the run starts at ``root``) extended by one call,
    or None where the call cannot extend it.

    Args:
        parent: the table of the value the call takes (None: it takes ``root`` itself).
        root: the uint8 array the run starts from.
        prefix: the value of the run among ``args``.
        name: the call's name, one of :data:`ELEMENTWISE` (the caller checks first).
        function: the call.
        args: its positional arguments, ``prefix`` among them.
        kwargs: its keyword arguments.
        parts: the call's encoded key parts (name, arguments); ``token`` stands for ``prefix``.
        token: the encoding of ``prefix`` in ``parts``.
    """
    if not constants_fit(root, prefix, args, kwargs):
        return None
    signature = _signature(parent, root, parts, token)
    table = _tables.get(signature, UNSEEN)
    if table is UNSEEN:
        table = _build(signature, parent, root.ndim, prefix, name, function, args, kwargs)
        with _lock:
            if len(_tables) >= _MAX_TABLES:
                _tables.clear()
            _tables[signature] = table
    if table is None or not table.fits(root):
        return None
    return table


UNSEEN: Any = object()
"""What :func:`described` gives for a description never seen."""


def _signature(parent: Table | None, root: np.ndarray, parts: list[bytes], token: bytes) -> bytes:
    start = parent.signature if parent is not None else _ROOT + str(root.ndim).encode()
    call = b"".join([b"<>" if part == token else part for part in parts])
    return xxhash.xxh3_128_digest(start + b"|" + call)


def constants_fit(root: np.ndarray, prefix: Any, args: tuple[Any, ...], kwargs: dict) -> bool:
    """Whether every other argument is a scalar, a dtype, or an array-like varying at most along
    the last axis, with no more dimensions than ``root`` (checked before any probe is built: a
    full-size constant would make a probe 256 times its size)."""
    found = False
    for value in (*args, *kwargs.values()):
        if value is prefix:
            found = True
            continue
        if isinstance(value, np.ndarray | list | tuple):
            shape = np.shape(value)
            if len(shape) > root.ndim or any(n != 1 for n in shape[:-1]):
                return False
            if shape and shape[-1] not in (1, root.shape[-1]):
                return False
    return found and not any(value is prefix for value in kwargs.values())


def _build(
    signature: bytes,
    parent: Table | None,
    ndim: int,
    prefix: Any,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Table | None:
    """Apply the call to the parent's probe; None where the result cannot serve as a table."""
    source = parent.probe if parent is not None else _identity(ndim)
    probe_args = tuple(source if value is prefix else value for value in args)
    try:
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            probe = function(*probe_args, **kwargs)
    except Exception:  # any failure only means the run is computed as written
        return None
    if exact_tables.refusal(name, source, probe) is not None:
        return None
    if (
        probe.ndim != ndim + 1
        or probe.shape[0] != 256
        or any(n != 1 for n in probe.shape[1:-1])
        or probe.shape[-1] > MAX_CHANNELS
    ):
        return None
    copy = kwargs.get("copy", True)
    if name == "numpy.ndarray.astype" and copy is False and probe.dtype == source.dtype:
        return None  # NumPy returns the array itself: the result aliases its input
    return Table(signature, probe)


_IDENTITIES: dict[int, np.ndarray] = {}


def _identity(ndim: int) -> np.ndarray:
    found = _IDENTITIES.get(ndim)
    if found is None:
        found = np.arange(256, dtype=np.uint8).reshape((256,) + (1,) * ndim)
        found.flags.writeable = False
        _IDENTITIES[ndim] = found
    return found


def gather(table: Table, root: np.ndarray) -> np.ndarray:
    """``table[root]`` per channel: the run's value on ``root``."""
    cv2 = _cv2()
    assert cv2 is not None, "gather needs OpenCV (evaluate checks first)"
    if table.channels == 1:
        out = cv2.LUT(root.reshape(-1, 1), table.lut())
    else:
        out = cv2.LUT(root.reshape(-1, 1, table.channels), table.lut())
    return out.reshape(root.shape)


_OPENCV: list[Any] = []


def prepare() -> None:
    """Import OpenCV, which gathers the tables, in the process applying a plan: workers it forks
    then inherit it, where each would import it at its first table (about 60 ms, every epoch a
    loader starts its workers afresh, in a pipeline that never imports cv2 itself)."""
    _cv2()


def _cv2() -> Any:
    """OpenCV, or None where it cannot be imported (the calls then run as written)."""
    if not _OPENCV:
        module: Any
        try:
            import cv2 as module
        except ImportError:
            module = None
        _OPENCV.append(module)
    return _OPENCV[0]


def evaluate(
    table: Table, root: np.ndarray, calls: Callable[[], Any], tally: dict[str, int] | None = None
) -> Any:
    """The run's value on ``root``: gathered, or computed by ``calls`` (the calls as written)
    while the table is on trial or where it did not pay. ``tally`` counts what was done (default:
    :func:`counts`' counters of the process)."""
    counted = _counts if tally is None else tally
    if table.use:
        counted["gathered"] += 1
        return gather(table, root)
    if table.use is False or table.probe.dtype not in _GATHERED or _cv2() is None:
        table.use = False
        counted["computed"] += 1
        return calls()
    started = time.perf_counter_ns()
    value = calls()
    computed = time.perf_counter_ns()
    gathered = gather(table, root)
    finished = time.perf_counter_ns()
    _record(table, value, gathered, computed - started, finished - computed, root.size, counted)
    counted["computed"] += 1
    return value


def _record(
    table: Table,
    value: Any,
    gathered: np.ndarray,
    calls_ns: int,
    table_ns: int,
    size: int,
    tally: dict[str, int] | None = None,
) -> None:
    counted = _counts if tally is None else tally
    counted["trials"] += 1
    if not same_bits(value, gathered):
        table.mismatches += 1
        counted["mismatches"] += 1
        table.use = False
        return
    table.calls_ns.append(calls_ns / size)
    table.table_ns.append(table_ns / size)
    if len(table.table_ns) >= TRIALS:
        table.use = statistics.median(table.table_ns) < statistics.median(table.calls_ns)


def same_bits(value: Any, gathered: np.ndarray) -> bool:
    """Whether ``value`` is a C-contiguous array equal to ``gathered`` bit for bit."""
    return (
        type(value) is np.ndarray
        and value.flags.c_contiguous
        and value.dtype == gathered.dtype
        and value.shape == gathered.shape
        and value.tobytes() == gathered.tobytes()
    )


def new_tally() -> dict[str, int]:
    """Zeroed counters for :func:`evaluate`'s ``tally``."""
    return dict.fromkeys(_counts, 0)


def counts() -> dict[str, int]:
    """Runs gathered through tables, computed by their calls, trials and mismatches, in this
    process."""
    return dict(_counts)


def described(description: tuple[Any, ...]) -> Any:
    """The table (or None: no table) remembered for a call's plain description (its run's
    start, the calls' constants by value: :func:`remember`), or :data:`UNSEEN`."""
    return _described.get(description, UNSEEN)


def remember(description: tuple[Any, ...], table: Table | None) -> None:
    """Remember what :func:`extend` gave for a call's plain description, so that the same
    calls every sample find their table without encoding and hashing their arguments."""
    with _lock:
        if len(_described) >= _MAX_TABLES:
            _described.clear()
        _described[description] = table


def reset() -> None:
    """Forget every table and count (tests; a changed library in a long-lived process)."""
    with _lock:
        _tables.clear()
        _described.clear()
        for name in _counts:
            _counts[name] = 0
