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

import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

import codedag.migrate.tables.lookup as lookup
from codedag.backends.lazy_operators import in_place, install_operators
from codedag.migrate.prefix.keys import Unkeyable, encode_argument

COUNTS = ("runs", "gathered", "computed", "trials", "mismatches", "errors")
"""This process's counters (:func:`counts`)."""

_PENDING: Any = object()
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


class RunValue:
    """A run's value not computed yet (see the module docstring)."""

    __slots__ = ("__weakref__", "_calls", "_root", "_table", "_value")
    __array_priority__ = 1000.0

    def __init__(self, table: lookup.Table, root: np.ndarray, calls: tuple[_Call, ...]) -> None:
        self._table = table
        self._root = root
        # the run's calls from its uint8 array, flat: no reference to the earlier values, which
        # are freed (or written into) as user code does with them
        self._calls = calls
        self._value: Any = _PENDING

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(value, np.ndarray) holds, as without tables
        """``numpy.ndarray``, for ``isinstance``; ``type()`` stays :class:`RunValue`."""
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

    # -- what the table answers without computing ---------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
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
        return getattr(self._compute(), name)

    # -- uses that need the data --------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        value = self._compute()
        if dtype is not None:
            return value.astype(dtype, copy=bool(copy))
        return value.copy() if copy else value

    @property
    def __array_interface__(self) -> Any:
        return self._compute().__array_interface__

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and kwargs.get("out") is None:
            name = f"numpy.{ufunc.__name__}"
            runs = [i for i in inputs if type(i) is RunValue]
            if name in lookup.ELEMENTWISE and len(runs) == 1:
                kwargs.pop("out", None)
                return runs[0]._extend(name, ufunc, _plain(inputs), kwargs)
        return getattr(ufunc, method)(*computed(inputs), **computed_kwargs(kwargs))

    def __array_function__(
        self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if func is np.clip and args and args[0] is self:
            return self._extend("numpy.clip", func, args, kwargs)
        return func(*computed(args), **computed_kwargs(kwargs))

    def __getitem__(self, key: Any) -> Any:
        return self._compute()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._compute()[key] = computed((value,))[0]

    def __len__(self) -> int:
        return len(self._root) if self._value is _PENDING else len(self._value)

    def __iter__(self) -> Any:
        return iter(self._compute())

    def __bool__(self) -> bool:
        return bool(self._compute())

    def __float__(self) -> float:
        return float(self._compute())

    def __int__(self) -> int:
        return int(self._compute())

    def __index__(self) -> int:
        return operator.index(self._compute())

    def __reduce__(self) -> Any:
        return (_identity, (self._compute(),))

    def __copy__(self) -> Any:
        return self._compute().copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self._compute().copy()

    def __repr__(self) -> str:
        return repr(self._compute())

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict | None = None
    ) -> Any:
        return func(*computed(args), **computed_kwargs(kwargs or {}))


def _identity(value: Any) -> Any:
    return value


def _forward(name: str) -> Callable[[Any, Any], Any]:
    function = getattr(operator, name)
    qualified = f"operator.{name}"
    if qualified in lookup.ELEMENTWISE:

        def extend(self: Any, other: Any) -> Any:
            return self._extend(qualified, function, (self, other), {})

        return extend

    def compute(self: Any, other: Any) -> Any:
        return function(self._compute(), *computed((other,)))

    return compute


def _reflected(name: str) -> Callable[[Any, Any], Any]:
    function = getattr(operator, name)
    qualified = f"operator.{name}"
    if qualified in lookup.ELEMENTWISE:

        def extend(self: Any, other: Any) -> Any:
            return self._extend(qualified, function, (other, self), {})

        return extend

    def compute(self: Any, other: Any) -> Any:
        return function(*computed((other,)), self._compute())

    return compute


def _inplace(name: str) -> Callable[[Any, Any], Any]:
    function = in_place(name)

    def inplace(self: Any, other: Any) -> Any:  # computes, then writes into it, as NumPy does
        return function(self._compute(), *computed((other,)))

    return inplace


def _unary(name: str) -> Callable[[Any], Any]:
    function = getattr(operator, name)
    qualified = f"operator.{name}"
    if qualified in lookup.ELEMENTWISE:

        def extend(self: Any) -> Any:
            return self._extend(qualified, function, (self,), {})

        return extend

    def compute(self: Any) -> Any:
        return function(self._compute())

    return compute


install_operators(
    RunValue,
    forward=_forward,
    reflected=_reflected,
    inplace=_inplace,
    comparison=_forward,  # extends the run where the comparison is element-wise, else computes
    unary=_unary,
)


# -- helpers ---------------------------------------------------------------------------------


def _owned(args: tuple[Any, ...], earlier: Any) -> tuple[Any, ...]:
    """A run call's arguments with the run's earlier value (``earlier``) as a placeholder and
    its constant arrays (at most a few values each) copied, so that user code writing into one
    later does not change a run computed after the write."""
    return tuple(
        [_EARLIER if a is earlier else a.copy() if type(a) is np.ndarray else a for a in args]
    )


def _resolve(value: Any) -> Any:
    kind = type(value)
    if kind is RunValue:
        return value._compute()
    if kind is RunArray:
        return value.view(np.ndarray)
    if kind in (list, tuple) and any(type(v) in (RunValue, RunArray) for v in value):
        items = [_resolve(v) for v in value]
        return items if kind is list else tuple(items)
    return value


def computed(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments with run values computed and run arrays as plain arrays."""
    return tuple([_resolve(a) for a in args])


def computed_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments with run values computed and run arrays as plain arrays."""
    return {k: _resolve(v) for k, v in kwargs.items()} if kwargs else {}


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
    for value in args:
        if _is_or_holds_run_value(value):
            return True
    if kwargs:
        for value in kwargs.values():
            if _is_or_holds_run_value(value):
                return True
    return False


def _is_or_holds_run_value(value: Any) -> bool:
    kind = type(value)
    if kind is RunValue:
        return True
    return (kind is list or kind is tuple) and any(type(v) is RunValue for v in value)


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
