"""Element-wise runs through lookup tables at run time: a plan's ``tables`` section applied.

Image pipelines end with a normalization written as operators on the augmented uint8 image:
``(img.astype(np.float32) / 255.0 - mean) / std``. NumPy makes four passes over the image, and
with a per-channel ``mean`` its inner loops are three elements long: 0.37 ms for a 128 px RGB
image, a quarter of the demo's whole sample. Each element's result depends only on its uint8
value and its channel, so the run is one gather from a table of 256 values per channel
(:mod:`codedag.migrate.prefix.lookup`, which builds, checks and times the tables).

A run starts at a *producer*: the library call the plan names whose uint8 result the traced
samples normalized (``cv2.warpAffine``, or ``np.asarray(pil_image, dtype=np.float32)``). While
the plan is applied, inside a DataLoader fetch and called from the traced function:

* the producer returns its array as a :class:`RunArray`: the same memory, an ``ndarray``
  subclass whose element-wise calls (:data:`~codedag.migrate.prefix.lookup.ELEMENTWISE`) return
  a :class:`RunValue` instead of computing;
* a :class:`RunValue`'s element-wise calls extend the run; anything else done with it (an
  attribute beyond its shape and dtype, a NumPy function, indexing, a conversion) computes it,
  through the table where the table matched the calls bit for bit and was faster on this
  process's first samples, else by the calls as written;
* the plan's *guards* (the samples' other functions of libraries that take arrays only: cv2,
  torch, PIL) compute a run value they receive;
* a batch whose code fails while run values exist in it runs again without tables, from the
  random state it started with; after :data:`GIVE_UP_AFTER` such batches in a row the process
  stops starting runs.

The run's first value keeps a copy of the uint8 array (a quarter of the float result's size):
user code writing into its image later cannot change a run computed after the write.
"""

from __future__ import annotations

import logging
import operator
import sys
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

import codedag.migrate.prefix.lookup as lookup
import codedag.migrate.random_states as random_states
from codedag.migrate.prefix.keys import Unkeyable, encode_argument
from codedag.patching import Patcher, like_original

log = logging.getLogger(__name__)

FETCH = "torch.utils.data._utils.fetch._MapDatasetFetcher.fetch"
GIVE_UP_AFTER = 3
"""Failing batches in a row after which a process starts no more runs."""
FIELDS = ("runs", "gathered", "computed", "trials", "mismatches", "errors")
"""Counters of :meth:`TablesRuntime.stats`, per process."""
CONVERSIONS = frozenset({"numpy.asarray", "numpy.array"})
"""Producers whose ``dtype=`` is a cast of the uint8 array they make: the run's first call."""

_PENDING: Any = object()
_ROOT: Any = object()  # stands for the run's uint8 array among a first call's arguments


@dataclass(frozen=True)
class RunSpec:
    """Where runs start: a producer function called from one of ``callers`` (any: empty)."""

    producer: str
    callers: tuple[str, ...] = ()


class _State(threading.local):
    def __init__(self) -> None:
        self.fetching = 0
        self.suspended = 0


_state = _State()
_tally: dict[str, int] = dict.fromkeys(FIELDS, 0)
_table_tally = lookup.new_tally()


def _active() -> bool:
    return _state.fetching > 0 and not _state.suspended


# -- the values ------------------------------------------------------------------------------


class RunArray(np.ndarray):
    """A producer's uint8 array, unchanged; its element-wise calls start a run."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and kwargs.get("out") is None:
            started = _start(self, f"numpy.{ufunc.__name__}", ufunc, inputs, kwargs, copy=True)
            if started is not None:
                return started
        return getattr(ufunc, method)(*_plain(inputs), **_plain_kwargs(kwargs))

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.astype``: a run's first call."""
        call = (self, *args)
        started = _start(self, "numpy.ndarray.astype", np.ndarray.astype, call, kwargs, copy=True)
        if started is not None:
            return started
        return self.view(np.ndarray).astype(*args, **kwargs)

    def __reduce__(self) -> Any:  # pickled (to a worker's parent) as a plain array
        return self.view(np.ndarray).__reduce__()


class RunValue:
    """A run's value not computed yet (see the module docstring)."""

    __slots__ = ("__weakref__", "_args", "_function", "_kwargs", "_root", "_table", "_value")
    __array_priority__ = 1000.0

    def __init__(
        self,
        table: lookup.Table,
        root: np.ndarray,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._table = table
        self._root = root
        self._function = function
        self._args = args
        self._kwargs = kwargs
        self._value: Any = _PENDING

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(value, np.ndarray) holds, as without tables
        """``numpy.ndarray``, for ``isinstance``; ``type()`` stays :class:`RunValue`."""
        return np.ndarray

    def _compute(self) -> Any:
        if self._value is _PENDING:
            value = lookup.evaluate(self._table, self._root, self._by_calls, _table_tally)
            self._value = value
            self._args = ()
            self._kwargs = {}
        return self._value

    def _by_calls(self) -> Any:
        """The value by the calls as written, from the run's uint8 array."""
        if self._value is _PENDING:
            inputs = [_input(a, self._root) for a in self._args]
            self._value = self._function(*inputs, **self._kwargs)
        return self._value

    def _extend(
        self, name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict
    ) -> Any:
        """The call as the run's next value, or computed where it cannot extend the run."""
        if self._value is _PENDING and _state.suspended == 0:
            table = _table_for(self._table, self._root, self, name, function, args, kwargs)
            if table is not None:
                return RunValue(table, self._root, function, args, kwargs)
        return function(*_computed(args), **_computed_kwargs(kwargs))

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
        return value if dtype is None else value.astype(dtype, copy=False)

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
        return getattr(ufunc, method)(*_computed(inputs), **_computed_kwargs(kwargs))

    def __array_function__(
        self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return func(*_computed(args), **_computed_kwargs(kwargs))

    def __getitem__(self, key: Any) -> Any:
        return self._compute()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._compute()[key] = _computed((value,))[0]

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
        return func(*_computed(args), **_computed_kwargs(kwargs or {}))


def _identity(value: Any) -> Any:
    return value


def _install_operators() -> None:
    extending = {"add", "sub", "mul", "truediv"}
    binary = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_",
              "or_", "xor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne")  # fmt: skip
    for name in binary:
        function = getattr(operator, name)
        short = name.rstrip("_")
        qualified = f"operator.{name}"
        run = name in extending
        in_place = getattr(operator, f"i{short}", None)

        def forward(self: Any, other: Any, q: str = qualified, f: Any = function, r: bool = run):
            if r:
                return self._extend(q, f, (self, other), {})
            return f(self._compute(), *_computed((other,)))

        def reflected(self: Any, other: Any, q: str = qualified, f: Any = function, r: bool = run):
            if r:
                return self._extend(q, f, (other, self), {})
            return f(*_computed((other,)), self._compute())

        def inplace(self: Any, other: Any, f: Any = in_place) -> Any:
            return f(self._compute(), *_computed((other,)))

        setattr(RunValue, f"__{short}__", forward)
        if name not in ("lt", "le", "gt", "ge", "eq", "ne"):
            setattr(RunValue, f"__r{short}__", reflected)
            setattr(RunValue, f"__i{short}__", inplace)
    for name in ("neg", "pos", "abs", "invert"):
        function = getattr(operator, name)
        qualified = f"operator.{name}"

        def unary(self: Any, q: str = qualified, f: Any = function, r: bool = name != "invert"):
            return self._extend(q, f, (self,), {}) if r else f(self._compute())

        setattr(RunValue, f"__{name}__", unary)
    RunValue.__hash__ = None  # type: ignore[assignment]


_install_operators()


# -- helpers ---------------------------------------------------------------------------------


def _input(value: Any, root: np.ndarray) -> Any:
    if value is _ROOT:
        return root
    if type(value) is RunValue:
        return value._by_calls()
    return value


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


def _computed(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arguments with run values computed and run arrays as plain arrays."""
    return tuple([_resolve(a) for a in args])


def _computed_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: _resolve(v) for k, v in kwargs.items()} if kwargs else {}


def _plain(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple([v.view(np.ndarray) if type(v) is RunArray else v for v in inputs])


def _plain_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    if not kwargs or "out" not in kwargs:
        return kwargs
    out = kwargs["out"]
    return {**kwargs, "out": _plain(out) if isinstance(out, tuple) else _plain((out,))[0]}


def _holds_run_value(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for value in (*args, *kwargs.values()):
        kind = type(value)
        if kind is RunValue:
            return True
        if kind in (list, tuple) and any(type(v) is RunValue for v in value):
            return True
    return False


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
        found = _KNOWN.get(known, _UNSEEN)
        if found is not _UNSEEN:
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
        if len(_KNOWN) >= _MAX_KNOWN:
            _KNOWN.clear()
        _KNOWN[known] = table
    return table


_KNOWN: dict[tuple[Any, ...], lookup.Table | None] = {}
"""Tables by their calls' plain description (scalars, dtypes, arrays of at most 4 values): the
same calls every sample find theirs without encoding and hashing the arguments."""
_MAX_KNOWN = 1024
_UNSEEN: Any = object()


def _known(
    parent: lookup.Table | None,
    root: np.ndarray,
    prefix: Any,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[Any, ...] | None:
    """The call described by values alone, or None where an argument is not that simple."""
    start = parent.signature if parent is not None else root.ndim
    out: list[Any] = [start, root.shape[-1], name]
    for value in (*args, *(v for _, v in sorted(kwargs.items()))):
        if value is prefix:
            out.append(_ROOT)
            continue
        kind = type(value)
        if kind is float:  # by its bits: 0.0 and -0.0 are equal keys, not equal results
            out.append((kind, value.hex()))
        elif kind is int or kind is bool or kind is str or kind is type:
            out.append((kind, value))
        elif isinstance(value, np.generic | np.ndarray) and value.size <= lookup.MAX_CHANNELS:
            out.append((kind, value.dtype.str, value.shape, value.tobytes()))
        elif isinstance(value, np.dtype):
            out.append((kind, value.str))
        else:
            return None
    out.extend(sorted(kwargs))
    return tuple(out)


def _start(
    array: RunArray,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    copy: bool,
) -> RunValue | None:
    """A run's first value: the call on ``array``, or None where it starts no run."""
    if _state.suspended or name not in lookup.ELEMENTWISE:
        return None
    if sum(1 for a in args if a is array) != 1 or any(type(a) is RunValue for a in args):
        return None
    plain = array.view(np.ndarray)
    if not lookup.starts(plain):
        return None
    table = _table_for(None, plain, array, name, function, args, kwargs)
    if table is None:
        return None
    root = plain.copy() if copy else plain
    _tally["runs"] += 1
    calls = tuple(_ROOT if a is array else _plain((a,))[0] for a in args)
    return RunValue(table, root, function, calls, kwargs)


# -- the runtime -----------------------------------------------------------------------------


class TablesRuntime:
    """The ``tables`` section of a plan, applied (see the module docstring).

    Args:
        runs: where runs start.
        guards: functions that take arrays only and compute a run value they receive.
    """

    def __init__(self, runs: list[RunSpec], guards: list[str] | None = None) -> None:
        self.runs = runs
        self.guards = sorted(set(guards or ()) - {r.producer for r in runs})
        self.patcher = Patcher("lookup-tables")
        self.workers: Any = None
        self.failures = 0
        self._applied = False
        callers: dict[str, set[str]] = {}
        for run in runs:
            callers.setdefault(run.producer, set()).update(run.callers or ("",))
        self._callers = {name: frozenset(found) for name, found in callers.items()}

    @property
    def active(self) -> bool:
        """Whether the plan names any producer."""
        return bool(self.runs)

    def apply(self, skip: Collection[str] = ()) -> dict[str, int]:
        """Install the producers', guards' and the fetch's replacements; the functions in
        ``skip`` are patched by another runtime, which calls :meth:`layer` for them."""
        if self._applied or not self.active:
            return {"patched": 0, "failed": 0}
        from codedag.backends.registry import default_registry
        from codedag.migrate.injector import patch_each
        from codedag.migrate.workerstats import WorkerStats

        names = sorted((set(self._callers) | set(self.guards)) - set(skip))
        current: list[str] = []

        def factory(site: str, original: Any) -> Any:
            return self.layer(current[0] if current else site, original)

        failed = patch_each(
            self.patcher, names, factory, current, "lookup tables", default_registry()
        )
        if FETCH not in skip:
            self.patcher.patch_many([FETCH], factory, rebind_references=False)
        self.workers = WorkerStats(["tables"], lambda _name: _values(), FIELDS)
        self._applied = True
        return {"patched": len(names) - failed, "failed": failed}

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The replacement of ``name`` calling ``original`` (``original`` itself where the
        plan does not patch ``name``)."""
        if not self.active:
            return original
        if name == FETCH:
            return self._fetch(original)
        if name in self._callers:
            return _producer(name, original, self._callers[name])
        if name in self.guards:
            return _guard(original)
        return original

    def restore(self) -> int:
        """Remove the patches; returns how many were removed."""
        if not self._applied:
            return 0
        count = self.patcher.restore()
        if self.workers is not None:
            self.workers.stop_tracking()
        self._applied = False
        return count

    def _fetch(self, original: Callable[..., Any]) -> Callable[..., Any]:
        runtime = self

        def fetch(fetcher: Any, index: Any) -> Any:
            if _state.suspended or runtime.failures >= GIVE_UP_AFTER:
                return original(fetcher, index)
            states = random_states.capture()
            runs = _tally["runs"]
            _state.fetching += 1
            try:
                batch = original(fetcher, index)
            except Exception as error:
                if _tally["runs"] == runs:
                    raise
                runtime.failures += 1
                _tally["errors"] += 1
                log.info(
                    "a batch failed with lookup-table runs (%s: %s); it runs again without them",
                    type(error).__name__,
                    str(error).splitlines()[0][:120] if str(error) else "",
                )
                random_states.restore(states)
                _state.suspended += 1
                try:
                    return original(fetcher, index)
                finally:
                    _state.suspended -= 1
            finally:
                _state.fetching -= 1
                if runtime.workers is not None:
                    runtime.workers.publish()
            runtime.failures = 0
            return batch

        return fetch

    def stats(self) -> dict[str, Any]:
        """``get_stats()["tables"]``: runs started, computed through a table or by their calls,
        trials and mismatches, failed batches (all processes)."""
        local = _values()
        remote = self.workers.totals("tables") if self.workers is not None else {}
        merged = {k: local.get(k, 0) + remote.get(k, 0) for k in FIELDS}
        return {
            "enabled": self.active,
            "producers": sorted({r.producer for r in self.runs}),
            **merged,
        }


def _values() -> dict[str, int]:
    out = dict(_tally)
    for name in ("gathered", "computed", "trials", "mismatches"):
        out[name] = _table_tally[name]
    return out


def reset() -> None:
    """Forget the tables found by their calls and zero this process's counters (tests; after
    :func:`codedag.migrate.prefix.lookup.reset`)."""
    _KNOWN.clear()
    for name in _tally:
        _tally[name] = 0
    for name in _table_tally:
        _table_tally[name] = 0


def _producer(
    name: str, original: Callable[..., Any], callers: frozenset[str]
) -> Callable[..., Any]:
    from codedag.plan.context import frame_name

    anywhere = "" in callers
    conversion = name in CONVERSIONS

    def producer(*args: Any, **kwargs: Any) -> Any:
        if not _active():
            return original(*args, **kwargs)
        if _holds_run_value(args, kwargs):
            args, kwargs = _computed(args), _computed_kwargs(kwargs)
        if not anywhere and not _called_from(sys._getframe(1), callers, frame_name):
            return original(*args, **kwargs)
        if conversion:
            started = _converted(original, args, kwargs)
            if started is not None:
                return started
        out = original(*args, **kwargs)
        if lookup.starts(out):
            return out.view(RunArray)
        return out

    return like_original(producer, original)


LAYERS = 3
"""Frames looked through for the caller: another runtime's replacement may call this one."""


def _called_from(frame: Any, callers: frozenset[str], name_of: Callable[[Any], str]) -> bool:
    for _ in range(LAYERS):
        if frame is None:
            return False
        if name_of(frame) in callers:
            return True
        frame = frame.f_back
    return False


def _converted(original: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """``np.asarray(image, dtype=D)`` as ``np.asarray(image).astype(D)``, the cast starting a
    run, where the array is uint8 (a PIL image's): the same values, cast the same way."""
    if len(args) != 1 or set(kwargs) != {"dtype"}:
        return None
    dtype = np.dtype(kwargs["dtype"])
    if dtype == np.uint8:
        return None
    base = original(args[0])
    if not lookup.starts(base):
        return None
    array = base.view(RunArray)
    return _start(array, "numpy.ndarray.astype", np.ndarray.astype, (array, dtype), {}, copy=False)


def _guard(original: Callable[..., Any]) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if _holds_run_value(args, kwargs):
            return original(*_computed(args), **_computed_kwargs(kwargs))
        return original(*args, **kwargs)

    return like_original(guard, original)
