"""Run values: what a producer's uint8 array and its element-wise calls return while tables run.

* :class:`RunArray`: the producer's array itself (a view, the same memory), an ``ndarray``
  subclass whose element-wise calls (:data:`~.lookup.ELEMENTWISE`) start a run instead of
  computing; everything else it does as a plain array (other ufuncs return plain arrays, it
  pickles as one);
* :class:`RunValue`: a run's value not computed yet. Its element-wise calls extend the run; its
  ``shape``, ``dtype``, ``ndim`` and ``size`` come from the table; anything else computes it:
  through the table where the table matched the calls bit for bit and was faster on this
  process's first samples, else by the calls as written (:func:`.lookup.evaluate`).

A run's first value keeps a copy of the uint8 array (a quarter of the float result's size): user
code writing into its image later cannot change a run computed after the write. In-place
operators compute the value and write into it, as NumPy does.

Tables are found by the calls' plain constants (:func:`_known`): the same calls every sample find
theirs without encoding and hashing their arguments, which is done once per run and process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import codedag.migrate.tables.lookup as lookup
from codedag.backends.lazy_values import (
    MISSING,
    PENDING,
    Args,
    Impersonation,
    Kwargs,
    StandIn,
    holds,
    install_recording_operators,
    resolve_args,
    resolve_kwargs,
)
from codedag.migrate.cache.keys import Unkeyable, encode_argument

COUNTS = ("runs", "gathered", "computed", "trials", "mismatches", "errors")
"""This process's counters (:func:`counts`)."""

_PENDING: Any = PENDING
_EARLIER: Any = object()  # stands for the run's value before a call, among the call's arguments
_ROOT: Any = object()  # the run's uint8 array, in the description a table is found by
_Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class State(threading.local):
    """This thread's state: inside a DataLoader fetch, and whether runs are suspended."""

    def __init__(self) -> None:
        self.fetching = 0
        self.suspended = 0


state = State()
"""This thread's :class:`State`."""
_tally: dict[str, int] = dict.fromkeys(COUNTS, 0)
_table_tally = lookup.new_tally()


def active() -> bool:
    """Whether runs start in this thread now (inside a fetch, not suspended)."""
    return state.fetching > 0 and not state.suspended


# -- the values ------------------------------------------------------------------------------


class RunArray(np.ndarray):
    """A producer's uint8 array, unchanged; its element-wise calls start a run."""

    impersonation = Impersonation.SUBCLASS
    """A real ``ndarray`` subclass: its memory exists (:mod:`codedag.backends.lazy_values`)."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and kwargs.get("out") is None:
            started = start_run(self, f"numpy.{ufunc.__name__}", ufunc, inputs, kwargs, copy=True)
            if started is not None:
                return started
        return getattr(ufunc, method)(*_plain(inputs), **_plain_kwargs(kwargs))

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.astype``: a run's first call."""
        call = (self, *args)
        started = start_run(
            self, "numpy.ndarray.astype", np.ndarray.astype, call, kwargs, copy=True
        )
        if started is not None:
            return started
        return self.view(np.ndarray).astype(*args, **kwargs)

    def __reduce__(self) -> Any:  # pickled (to a worker's parent) as a plain array
        return self.view(np.ndarray).__reduce__()


class RunValue(StandIn):
    """A run's value not computed yet (see the module docstring)."""

    __slots__ = ("__weakref__", "_calls", "_root", "_table", "_value")

    def __init__(self, table: lookup.Table, root: np.ndarray, calls: tuple[_Call, ...]) -> None:
        self._table = table
        self._root = root
        # the run's calls from its uint8 array, flat: no reference to the earlier values, which
        # are freed (or written into) as user code does with them
        self._calls = calls
        self._value: Any = _PENDING

    def _stands_for(self) -> type:  # a run's value is always an array
        return np.ndarray

    def _compute(self) -> Any:
        if self._value is _PENDING:
            self._value = lookup.evaluate(self._table, self._root, self._by_calls, _table_tally)
            self._calls = ()
        return self._value

    def _by_calls(self) -> Any:
        """The value by the calls as written, from the run's uint8 array."""
        value: Any = self._root
        for function, args, kwargs in self._calls:
            value = function(*[value if a is _EARLIER else a for a in args], **kwargs)
        return value

    def _extend(
        self, name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict
    ) -> Any:
        """The call as the run's next value, or computed where it cannot extend the run."""
        if self._value is _PENDING and state.suspended == 0:
            table = _table_for(self._table, self._root, self, name, function, args, kwargs)
            if table is not None:
                call = (function, _owned(args, self), kwargs)
                return RunValue(table, self._root, (*self._calls, call))
        return function(*computed(args), **computed_kwargs(kwargs))

    # -- the lazy-value core's hooks: what the table answers without computing ---------------
    def _use(self, use: str, detail: str) -> Any:
        return self._compute()  # a run's value is computed as without tables: nothing counted

    def _attribute(self, name: str) -> Any:
        if self._value is _PENDING:
            if name == "shape":
                return self._root.shape
            if name == "dtype":
                return self._table.probe.dtype
            if name == "ndim":
                return self._root.ndim
            if name == "size":
                return self._root.size
        if name == "astype":

            def astype(*args: Any, **kwargs: Any) -> Any:
                call = (self, *args)
                return self._extend("numpy.ndarray.astype", np.ndarray.astype, call, kwargs)

            return astype
        return MISSING

    def _record_ufunc(self, ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        name = f"numpy.{ufunc.__name__}"
        if name in lookup.ELEMENTWISE and sum(type(i) is RunValue for i in inputs) == 1:
            return self._extend(name, ufunc, _plain(inputs), kwargs)
        return MISSING

    def _record_function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func is np.clip and args and args[0] is self:
            return self._extend("numpy.clip", func, args, kwargs)
        return MISSING

    def _forced(self, function: Callable[..., Any], args: Args, kwargs: Kwargs, detail: str) -> Any:
        return function(*computed(args), **computed_kwargs(kwargs))

    # -- uses that need the data --------------------------------------------------------------
    @property
    def __array_interface__(self) -> Any:
        return self._compute().__array_interface__

    def __getitem__(self, key: Any) -> Any:
        return self._compute()[key]

    def __copy__(self) -> Any:
        return self._compute().copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self._compute().copy()

    def __repr__(self) -> str:
        return repr(self._compute())


def _record_operator(
    self: RunValue, name: str, function: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    """Extend the run where the operator is element-wise, else compute."""
    if name in lookup.ELEMENTWISE:
        return self._extend(name, function, args, {})
    return function(*computed(args))


install_recording_operators(RunValue, _record_operator)


# -- helpers ---------------------------------------------------------------------------------


def _owned(args: tuple[Any, ...], earlier: Any) -> tuple[Any, ...]:
    """A run call's arguments with the run's earlier value (``earlier``) as a placeholder and
    its constant arrays (at most a few values each) copied, so that user code writing into one
    later does not change a run computed after the write."""
    return tuple(
        [_EARLIER if a is earlier else a.copy() if type(a) is np.ndarray else a for a in args]
    )


def _resolve(value: Any) -> Any:
    return value._compute() if type(value) is RunValue else value.view(np.ndarray)


_RUN_KINDS = (RunValue, RunArray)


def computed(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments with run values computed and run arrays as plain arrays."""
    return resolve_args(args, _resolve, _RUN_KINDS)


def computed_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments with run values computed and run arrays as plain arrays."""
    return resolve_kwargs(kwargs, _resolve, _RUN_KINDS)


def _plain(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple([v.view(np.ndarray) if type(v) is RunArray else v for v in inputs])


def _plain_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    if not kwargs or "out" not in kwargs:
        return kwargs
    out = kwargs["out"]
    return {**kwargs, "out": _plain(out) if isinstance(out, tuple) else _plain((out,))[0]}


def holds_run_value(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an argument (or an item of a list or tuple argument) is a run value (every call
    of a guarded function asks: ``torch.as_tensor`` from ``default_collate`` among them)."""
    return holds(args, kwargs, RunValue)


def _table_for(
    parent: lookup.Table | None,
    root: np.ndarray,
    prefix: Any,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> lookup.Table | None:
    """The table of ``parent``'s run extended by the call (None: it cannot extend it)."""
    if name not in lookup.ELEMENTWISE:
        return None
    known = _known(parent, root, prefix, name, args, kwargs)
    if known is not None:
        found = lookup.described(known)
        if found is not lookup.UNSEEN:
            return found
    if not lookup.constants_fit(root, prefix, args, kwargs):
        return None  # before hashing: another argument may be a whole image
    token = b"<run>"
    parts: list[bytes] = [name.encode(), b"("]
    try:
        for value in args:
            if value is prefix:
                parts.append(token)
            else:
                encode_argument(value, parts)
        for keyword in sorted(kwargs):
            parts.append(keyword.encode() + b"=")
            encode_argument(kwargs[keyword], parts)
    except Unkeyable:
        return None
    table = lookup.extend(parent, root, prefix, name, function, args, kwargs, parts, token)
    if known is not None:
        lookup.remember(known, table)
    return table


_SMALL_ARRAYS = (np.generic, np.ndarray)  # a tuple: isinstance() with it is quicker than a union


def _known(
    parent: lookup.Table | None,
    root: np.ndarray,
    prefix: Any,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[Any, ...] | None:
    """The call described by values alone (scalars, dtypes, arrays of at most 4 values), or
    None where an argument is not that simple."""
    start = parent.signature if parent is not None else root.ndim
    out: list[Any] = [start, root.shape[-1], name]
    keywords = sorted(kwargs) if kwargs else ()
    for value in (*args, *[kwargs[k] for k in keywords]) if keywords else args:
        if value is prefix:
            out.append(_ROOT)
            continue
        kind = type(value)
        if kind is float:  # by its bits: 0.0 and -0.0 are equal keys, not equal results
            out.append((kind, value.hex()))
        elif kind is int or kind is bool or kind is str or kind is type:
            out.append((kind, value))
        elif isinstance(value, _SMALL_ARRAYS) and value.size <= lookup.MAX_CHANNELS:
            out.append((kind, value.dtype.str, value.shape, value.tobytes()))
        elif isinstance(value, np.dtype):
            out.append((kind, value.str))
        else:
            return None
    out.extend(keywords)
    return tuple(out)


def start_run(
    array: RunArray,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    copy: bool,
) -> RunValue | None:
    """A run's first value: the call on ``array``, or None where it starts no run."""
    if state.suspended or name not in lookup.ELEMENTWISE:
        return None
    uses = 0
    for a in args:
        if a is array:
            uses += 1
        elif type(a) is RunValue:
            return None
    if uses != 1:
        return None
    plain = array.view(np.ndarray)
    if not lookup.starts(plain):
        return None
    table = _table_for(None, plain, array, name, function, args, kwargs)
    if table is None:
        return None
    root = plain.copy() if copy else plain
    _tally["runs"] += 1
    return RunValue(table, root, ((function, _owned(args, array), kwargs),))


# -- counts ----------------------------------------------------------------------------------


def runs_started() -> int:
    """Runs this process started so far."""
    return _tally["runs"]


def count_error() -> None:
    """Count a batch that ran again without tables."""
    _tally["errors"] += 1


def counts() -> dict[str, int]:
    """This process's counters (:data:`COUNTS`)."""
    out = dict(_tally)
    for name in ("gathered", "computed", "trials", "mismatches"):
        out[name] = _table_tally[name]
    return out


def reset() -> None:
    """Zero this process's counters (tests)."""
    for name in _tally:
        _tally[name] = 0
    for name in _table_tally:
        _table_tally[name] = 0
