"""Prefix values: what a cached chain's calls return inside ``__getitem__`` before the cut.

A chain starts at its source call (``numpy.frombuffer(data)``, ``cv2.imread(path)``,
``PIL.Image.open(path)``): the call returns a :class:`PrefixValue` carrying the key of its
provenance (:mod:`.keys`). Each call of the chain that receives one (a patched library function,
an operator, a NumPy function through ``__array_function__``/``__array_ufunc__``, an array or
image method) returns the next one, keyed by the call and its arguments, until the *cut*: there
the store is asked for the key, and user code receives the stored value on a hit.

A prefix value is *deferred* while its input is (nothing is computed) and *computed* otherwise
(the call ran through the original function, as without the cache). The source call is deferred
too, except in a first epoch, on a store holding no value of the chain, where it is computed
and so is the rest of its chain (:meth:`~.session.Session.skips_lookup`). A deferred value's
header (its shape, dtype or mode) is read only when user code asks something it answers
(``.shape``, a method, ``isinstance``); a header the store does not hold computes the value
there, and the chain goes on computed. A chain whose code asks nothing goes from its source to
its cut with one read (the cut's value). On a miss at the cut the deferred calls replay through
the original functions (the source's header is read then, once, to tell a lineage an earlier
epoch stored), and the value is stored with the headers of its intermediates.

Anything else done with a prefix value (an attribute the header cannot answer, a conversion to an
array, a write, a truth test, iteration) gives the real value (replaying the calls if deferred) and
marks the chain *diverged*: it is computed normally and not stored, counted with its reason.
"""

from __future__ import annotations

import operator
import time
import weakref
from collections.abc import Callable
from typing import Any

import codedag.backends.lazy_values as lazy_values
import codedag.migrate.cache.headers as headers
import codedag.migrate.cache.keys as keys
import codedag.migrate.tables.lookup as lookup
from codedag.backends.lazy_values import MISSING, Args, Call, Kwargs, StandIn
from codedag.store.meta import Meta, dtype_str, meta_of

PENDING: Any = lazy_values.PENDING

_Trail = list[Any]
"""A value's key, its header (None until read or computed) and its inputs' trails: None at the
source, the one input's trail, or a tuple of the trails of a call on several values of the chain
(``(img - img.min()) / ...``)."""

MAX_STEPS = 64
"""Calls a chain may make before its cut; past that it is computed normally."""


class Lineage:
    """What the values started by one source call share: the chain, and how it ended.

    Attributes:
        chain: the chain (the runtime's spec).
        session: the process's cache session (store and counters).
        done: the chain was counted (hit, miss or divergence).
        stale: keys of headers read from an older generation (touched on a hit).
        known: the store held the source's own header (an earlier epoch stored this lineage);
            None: not asked yet (a hit never asks: :meth:`~.session.Session._known`).
        source_key: the source value's key.
        key_ns: what computing the source's key cost (a hit costs it too).
    """

    __slots__ = (
        "chain", "done", "key_ns", "known", "pending", "ran", "session", "source_key", "stale",
        "started_ns",
    )  # fmt: skip

    def __init__(self, chain: Any, session: Any, key_ns: int = 0, source_key: bytes = b"") -> None:
        self.chain = chain
        self.source_key = source_key
        self.key_ns = key_ns  # what keying the source cost: a hit pays it too
        self.session = session
        self.done = False
        # the source call ran for the other items it returns (``soundfile.read``'s rate): its
        # value is at hand, yet the calls after it wait, so that a hit at the cut skips them
        self.ran = False
        self.stale: list[bytes] = []
        self.known: bool | None = None
        self.started_ns = time.perf_counter_ns()  # the source call: what computing costs
        # values of element-wise runs not computed yet (:mod:`.lookup`), newest last
        self.pending: list[weakref.ref[PrefixValue]] = []

    def diverge(self, reason: str) -> None:
        """Count the chain as computed normally, for ``reason`` (once)."""
        self.settle()
        if not self.done:
            self.done = True
            self.session.miss(self.chain.id, reason)

    def settle(self) -> None:
        """Compute the pending values of element-wise runs user code still holds, newest first
        (computing one lets go of the earlier ones only it held). Called before any other call
        of the chain, at the cut and at a divergence: a run's array can then not change under
        a value that is not computed yet."""
        pending, self.pending = self.pending, []
        for reference in reversed(pending):
            value = reference()
            if value is not None:
                value._compute()


class HeaderError(RuntimeError):
    """Reading a deferred value's header where user code asked for it (from the store, or by
    computing the value) failed with ``AttributeError``: raised as this instead, so ``hasattr``
    or ``isinstance`` cannot take it for a missing attribute (the batch then runs again without
    the cache, and a failing call raises where user code made it)."""


_DIVERGENCES = {
    "truth": "truth value",
    "conversion": "conversion to an array",
    "write": "a write into an intermediate",
    "inplace": "an in-place operator",
}
"""Why a use diverges the chain, by the core's use (others: the use's detail, ``"float()"``)."""


_SEQUENCE_TYPES = ("builtins.tuple", "builtins.list")
"""The types a header gives the length of (:func:`~codedag.store.meta.meta_of`)."""


class PrefixValue(StandIn):
    """A value of a cached chain before its cut (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_call",
        "_cuts",
        "_depth",
        "_key",
        "_lineage",
        "_lookup",
        "_meta",
        "_trail",
        "_value",
    )

    def __init__(
        self,
        lineage: Lineage,
        key: bytes,
        meta: Meta | None,
        value: Any = PENDING,
        call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None = None,
        parent: PrefixValue | None = None,
        cuts: int = 0,
        run: tuple[lookup.Table, Any] | None = None,
        joined: tuple[PrefixValue, ...] = (),
    ) -> None:
        self._lineage = lineage
        self._lookup = run  # a pending value of an element-wise run: its table and uint8 array
        self._key = key
        self._meta = meta  # None: a deferred value whose header was not read yet (:meth:`_header`)
        self._value = value
        self._call = None if call is None else Call(*call)
        # calls of the cut's function so far on the way from the source through each call's
        # first input of the chain, this one included: the plan counts a chain's calls so,
        # leaving out those on its branches (``img.max()`` of ``img / img.max()``)
        self._cuts = cuts
        self._depth: int = 0 if parent is None else parent._depth + 1  # calls since the source
        # the earlier values' keys and headers, not the values: an intermediate user code no
        # longer holds is freed as it would be without the cache; linked, not copied, so a
        # call adds one link whatever the chain's length
        inputs: Any = None if parent is None else parent._trail
        if joined:  # ``joined``: the call's other inputs of the chain
            inputs = (inputs, *[value._trail for value in joined])
        self._trail: _Trail = [key, meta, inputs]

    # -- the lazy-value core's hooks --------------------------------------------------------
    def _stands_for(self) -> type:
        if self._value is PENDING:
            kind = self._header().kind
            if self._value is PENDING:  # else: computed, its header was not stored
                return headers.stands_for(kind) or PrefixValue
        return type(self._value)

    def _header(self) -> Meta:
        """The value's header: a deferred value's is read from the store at the first question
        it answers; where the store does not hold it (evicted, or this call was never stored),
        the value is computed here, and the chain goes on computed."""
        meta = self._meta
        if meta is None:
            try:
                meta = self._read_header()
            except AttributeError as error:  # hasattr() and isinstance() would swallow it
                raise HeaderError(f"{type(error).__name__}: {error}") from error
        return meta

    def _read_header(self) -> Meta:
        lineage = self._lineage
        found = lineage.session.meta(self._key)
        if found is None:
            self._compute()  # sets the header
            assert self._meta is not None
            return self._meta
        meta, stale = found
        if stale:
            lineage.stale.append(self._key)
        if self._depth == 0 and lineage.known is None:
            lineage.known = not stale
        self._meta = self._trail[1] = meta
        return meta

    @property
    def _done(self) -> bool:
        return self._value is not PENDING

    def _compute(self) -> Any:
        """The value: replay the deferred calls through the original functions."""
        if self._value is PENDING:
            assert self._call is not None
            if self._lookup is not None:
                table, root = self._lookup
                self._value = lookup.evaluate(table, root, self._by_calls)
            else:
                self._value = self._call.compute(_computed_value)
            self._call = self._lookup = None  # the inputs are freed as without the cache
            if self._meta is None:
                self._meta = self._trail[1] = meta_of(self._value)
        return self._value

    def _by_calls(self) -> Any:
        """A pending run's value computed by its calls as written (no table on the way)."""
        if self._value is PENDING:
            assert self._call is not None
            call = self._call
            inputs = [a._by_calls() if isinstance(a, PrefixValue) else a for a in call.args]
            self._value = call.function(*inputs, **call.kwargs)  # type: ignore[misc]
            if self._meta is None:
                self._meta = self._trail[1] = meta_of(self._value)
        return self._value

    def _use(self, use: str, detail: str) -> Any:
        """The real value for a use outside the chain: the chain diverges."""
        return self._real(_DIVERGENCES.get(use, detail))

    def _real(self, reason: str) -> Any:
        """The real value for a use outside the chain: the chain diverges for ``reason``."""
        value = self._compute()
        self._lineage.diverge(reason)
        return value

    def _attribute(self, name: str) -> Any:
        meta = self._meta if self._meta is not None else self._header()
        if headers.is_metadata(meta, name):
            if self._value is not PENDING:
                return getattr(self._value, name)
            return headers.header_attribute(meta, name)
        qualified = headers.METHOD_NAMES.get((meta.kind, name))
        if qualified is not None:
            call = headers.method_call(name)

            def method(*args: Any, **kwargs: Any) -> Any:
                return step(qualified, call, (self, *args), kwargs)

            return method
        if name == "T" and meta.kind == "ndarray":
            return step("numpy.ndarray.T", headers.attribute_reader("T"), (self,), {})
        return MISSING

    def _record_ufunc(self, ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return step(f"numpy.{ufunc.__name__}", ufunc, inputs, kwargs)

    def _record_function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if "out" in kwargs and kwargs["out"] is not None:
            return func(*real_args(args, "out="), **concrete_kwargs(kwargs))
        return step(lazy_values.function_name(func), func, args, kwargs)

    def _forced(self, function: Callable[..., Any], args: Args, kwargs: Kwargs, detail: str) -> Any:
        return function(*real_args(args, detail), **concrete_kwargs(kwargs))

    # -- the chain's keys -------------------------------------------------------------------
    def _lineage_metas(
        self, joined: tuple[PrefixValue, ...] = ()
    ) -> tuple[tuple[bytes, bytes], ...]:
        """``(key, header)`` of this value and every earlier value of its chain (and of the
        values ``joined`` with it in the cut's call: ``np.clip(img, lo, hi)``)."""
        return tuple(
            (key, meta.to_bytes())
            for key, meta in _trails(self._trail, *[value._trail for value in joined])
            if meta is not None  # None: never read nor computed (not on a miss's replay)
        )

    def _lineage_keys(self, joined: tuple[PrefixValue, ...] = ()) -> list[bytes]:
        """The keys of this value and every earlier value of its chain (and of ``joined``)."""
        return [key for key, _ in _trails(self._trail, *[value._trail for value in joined])]

    def __iter__(self) -> Any:
        """Unpacking a small array (``lo, hi = np.percentile(img, (1, 99))``) or a call's tuple
        (``_, mask = cv2.threshold(...)``): its items as steps (``operator.getitem``) while its
        header says how many; anything else gives the real value, and the chain diverges."""
        meta = self._meta if self._meta is not None else self._header()
        sized = meta.kind == "ndarray" or meta.type_name in _SEQUENCE_TYPES
        if sized and meta.shape and meta.shape[0] <= MAX_UNPACKED:
            return iter([self[index] for index in range(meta.shape[0])])
        return iter(self._use("iteration", "iteration"))

    # -- a with block (``with Image.open(path) as im``) -----------------------------------
    def __enter__(self) -> Any:
        if self._value is not PENDING:
            entered = self._value.__enter__()
            return self if entered is self._value else entered
        return self  # deferred: nothing was opened, there is nothing to close

    def __exit__(self, *exc_info: Any) -> Any:
        return self._value.__exit__(*exc_info) if self._value is not PENDING else None

    def __repr__(self) -> str:
        if self._value is PENDING:
            meta = self._header()
            if self._value is PENDING:
                return f"<prefix value {meta.kind} {meta.shape} (deferred)>"
        return f"<prefix value {self._value!r}>"

    def __getitem__(self, key: Any) -> Any:
        if headers.static_index(key):
            return step("operator.getitem", operator.getitem, (self, key), {})
        return self._real("indexing with an array")[key]


MAX_UNPACKED = 64
"""Items of an array a prefix value unpacks or iterates into steps (a clip's frames, a volume's
slices; more: the loop gets the real value, and the chain is computed)."""


def _trails(*trails: _Trail) -> Any:
    """``(key, header)`` of the trails' values and of every earlier value they were computed
    from, each once."""
    todo: list[_Trail] = list(trails)
    seen = {id(trail) for trail in trails}
    while todo:
        key, meta, inputs = todo.pop()
        yield key, meta
        if inputs is None:
            continue
        for earlier in inputs if type(inputs) is tuple else (inputs,):
            if id(earlier) not in seen:
                seen.add(id(earlier))
                todo.append(earlier)


def _record_operator(
    self: PrefixValue, name: str, function: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    return step(name, function, args, {})  # a step keyed by the operator's name


lazy_values.install_recording_operators(
    PrefixValue,
    _record_operator,
    left_out={
        name: "never installed on prefix values: `x << n` raises TypeError unless the other "
        "operand is an ndarray (its reflected operator reaches __array_ufunc__); installing "
        "them would change what a chain keys"
        for name in headers.LEFT_OUT_OPERATORS
    },
)
keys.STAND_INS.append(PrefixValue)


# -- helpers for arguments -------------------------------------------------------------------


def _computed_value(value: PrefixValue) -> Any:
    return value._compute()


def concrete(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Positional arguments with every prefix value computed (no divergence counted)."""
    return lazy_values.resolve_args(args, _computed_value, PrefixValue)


def concrete_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments with every prefix value computed."""
    return lazy_values.resolve_kwargs(kwargs, _computed_value, PrefixValue)


def real_args(args: tuple[Any, ...], reason: str) -> tuple[Any, ...]:
    """Positional arguments as real values: their chains diverge for ``reason``."""
    for value in _prefix_values(args, {}):
        value._lineage.diverge(reason)
    return concrete(args)


def outside_call(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A call outside the chain (a function that takes arrays only) with the prefix values among
    its arguments computed: their chains diverge."""
    for value in _prefix_values(args, kwargs):
        value._lineage.diverge(f"a call outside the chain: {name}")
    return _computed(function, args, kwargs)


SAMPLE_HOLDS = "the sample holds a value before the cut"
"""The divergence of a chain whose value before its cut the sample itself returns."""


def real_samples(data: Any) -> Any:
    """``data`` (a fetch's samples, before collation) with each prefix value in it, in tuples,
    lists and dicts, as its real value. The trace sees the calls a value goes to, not the
    containers a sample returns it in: an image returned beside what the chain makes of it
    (``{"image": rgb, "gray": cvtColor(rgb, ...)}``) is computed here, and its chain diverges,
    rather than reaching ``collate`` as a stand-in (``torch.as_tensor`` of one reads it element
    by element)."""
    if not lazy_values.in_tree(data, PrefixValue):
        return data
    return lazy_values.resolve_tree(data, _sample_value, PrefixValue)


def _sample_value(value: PrefixValue) -> Any:
    return value._compute() if value._done else value._real(SAMPLE_HOLDS)


def _prefix_values(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[PrefixValue]:
    return lazy_values.collect(args, kwargs, PrefixValue)


def has_prefix_value(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether any argument (or an item of a list/tuple argument) is a prefix value."""
    return lazy_values.holds(args, kwargs, PrefixValue)


def _encode(value: Any, out: list[bytes]) -> None:
    kind = type(value)
    opening = keys.SCALARS.get(kind)
    if opening is not None:  # the common case first (the same bytes as encode_argument's)
        out.append(opening + repr(value).encode() + b";")
    elif kind is PrefixValue:
        out.append(b"<" + value._key + b">")
    elif isinstance(value, _SEQUENCES) and _holds_prefix_value(value):
        out.append(f"{type(value).__name__}[{len(value)}](".encode())
        for item in value:
            _encode(item, out)
        out.append(b")")
    else:
        keys.encode_argument(value, out)


_SEQUENCES = (list, tuple)


def _holds_prefix_value(items: list[Any] | tuple[Any, ...]) -> bool:
    for item in items:  # noqa: SIM110 - a loop is cheaper than any() of a generator
        if type(item) is PrefixValue:
            return True
    return False


# -- one call of the chain -------------------------------------------------------------------


def _snapshot(values: Any) -> Any:
    """Array arguments copied (a later write by user code must not reach a deferred call);
    ``values`` itself where it holds none (a call's own tuple or dict, which nothing else
    changes)."""
    import numpy as np

    def own(value: Any) -> Any:  # a prefix value is kept as it is (its type checked first:
        # isinstance(np.ndarray) would read a deferred value's header)
        plain = type(value) is not PrefixValue and isinstance(value, np.ndarray)
        return value.copy(order="K") if plain else value  # as laid out: what it computes follows

    items = values.values() if isinstance(values, dict) else values
    for value in items:
        if type(value) is not PrefixValue and isinstance(value, np.ndarray):
            break
    else:
        return values
    if isinstance(values, dict):
        return {k: own(v) for k, v in values.items()}
    return tuple([own(v) for v in values])


_OPENINGS: dict[str, bytes] = {}
"""Each call name's encoded opening of its key (a chain calls a few names, every sample)."""


def _opening(name: str) -> bytes:
    opening = _OPENINGS.get(name)
    if opening is None:
        opening = _OPENINGS[name] = name.encode() + b"("
    return opening


def _computed(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return function(*concrete(args), **concrete_kwargs(kwargs))


def computed_call(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    inputs: list[PrefixValue] | None = None,
) -> Any:
    """``function`` called with the prefix values among its arguments (``inputs``, where the
    caller collected them) computed; a computed value that is the only one, the first argument,
    is passed as it is (no argument rebuilt: a computed chain's usual call)."""
    if inputs is None:
        inputs = lazy_values.collect(args, kwargs, PrefixValue)
    first = inputs[0] if inputs else None
    if len(inputs) == 1 and args and args[0] is first and first._value is not PENDING:
        return function(first._value, *args[1:], **kwargs)
    return function(*concrete(args), **concrete_kwargs(kwargs))


def step(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A call of the chain on prefix values (see the module docstring)."""
    inputs = lazy_values.collect(args, kwargs, PrefixValue)
    first = inputs[0]
    lineage = first._lineage
    if lineage.done:  # diverged earlier: computed normally from here on
        return _computed(function, args, kwargs)
    chain = lineage.chain
    methods = chain.methods
    if methods is not None and name in headers.RECORDED_METHODS and name not in methods:
        # a sample on a path the trace did not take (a flip drawn in every traced sample, not
        # in this one): its values are computed here, not handed on to code that takes arrays
        lineage.diverge(f"{name}: a path the chain's trace did not take")
        return _computed(function, args, kwargs)
    deferred = _waits(first)
    for value in inputs:
        if value._lineage is not lineage:
            for each in inputs:
                each._lineage.diverge("values of two sources combined")
            return _computed(function, args, kwargs)
        if not _waits(value):
            deferred = False
    if first._depth >= MAX_STEPS:
        lineage.diverge("more calls than a chain may make before its cut")
        return _computed(function, args, kwargs)
    is_cut_function = name == chain.cut_function
    try:
        parts = _key_parts(name, args, kwargs)
    except keys.Unkeyable as error:  # in every sample, as a rule (``im.point(lambda v: ...)``)
        lineage.diverge(f"arguments: {error}")
        lineage.session.never_cached(chain, f"{name}'s arguments: {error}")
        return _computed(function, args, kwargs)
    key = keys.step_key(parts)
    session = lineage.session
    at_cut = is_cut_function and first._cuts == chain.cut_occurrence
    cuts = first._cuts + 1 if is_cut_function else first._cuts
    if not at_cut and len(inputs) == 1 and name in lookup.ELEMENTWISE:
        pending = _pending_run(first, key, cuts, name, function, args, kwargs, parts)
        if pending is not None:
            return pending
    if lineage.pending:
        lineage.settle()
        deferred = all(_waits(value) for value in inputs)
    if at_cut:
        value = session.cut(first, key, deferred, function, args, kwargs, tuple(inputs[1:]))
        lineage.settle()
        return value
    joined = tuple(inputs[1:])
    if deferred:  # its header is read when user code asks (:meth:`PrefixValue._header`)
        call = (function, _snapshot(args), _snapshot(kwargs))
        return PrefixValue(lineage, key, None, call=call, parent=first, cuts=cuts, joined=joined)
    value = computed_call(function, args, kwargs, inputs)
    return PrefixValue(
        lineage, key, meta_of(value), value, parent=first, cuts=cuts, joined=joined
    )  # fmt: skip


def _waits(value: PrefixValue) -> bool:
    """Whether a call on ``value`` waits for the cut (is deferred): ``value`` is not computed,
    or it is the value of a source call that ran for its other items."""
    return value._value is PENDING or (value._depth == 0 and value._lineage.ran)


def _key_parts(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[bytes]:
    """A call's encoded name and arguments (its inputs by their keys)."""
    parts: list[bytes] = [_OPENINGS.get(name) or _opening(name)]
    if name.startswith("torch."):  # torch splits a CPU kernel's work by its threads, and the
        parts.append(_torch_threads())  # split moves bits (F.interpolate: 1 thread or 2)
    for value in args:
        _encode(value, parts)
    if kwargs:
        for keyword in sorted(kwargs):
            parts.append(keyword.encode() + b"=")
            _encode(kwargs[keyword], parts)
    return parts


def _torch_threads() -> bytes:
    """Torch's intra-op thread count, as a key part: a value a process with 2 threads stored is
    not read back by a DataLoader worker, which torch runs with 1 (nor the other way round)."""
    import torch

    return b"threads=%d" % torch.get_num_threads()


def _pending_run(
    first: PrefixValue,
    key: bytes,
    cuts: int,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    parts: list[bytes],
) -> PrefixValue | None:
    """The call as a pending value of an element-wise run (:mod:`.lookup`), if it extends the
    run ``first`` belongs to or starts one at ``first`` (a computed uint8 array)."""
    if name not in lookup.ELEMENTWISE:
        return None
    if first._lookup is not None:
        parent, root = first._lookup
    elif not _waits(first) and lookup.starts(first._value):
        parent, root = None, first._value
    else:
        return None
    token = b"<" + first._key + b">"
    table = lookup.extend(parent, root, first, name, function, args, kwargs, parts, token)
    if table is None:
        return None
    lineage = first._lineage
    call = (function, _snapshot(args), kwargs)
    value = PrefixValue(
        lineage, key, _run_meta(table, root), call=call, parent=first, cuts=cuts,
        run=(table, root),
    )  # fmt: skip
    lineage.pending.append(weakref.ref(value))
    return value


_RUN_METAS: dict[tuple[tuple[int, ...], Any], Meta] = {}
_MAX_RUN_METAS = 1024


def _run_meta(table: lookup.Table, root: Any) -> Meta:
    """The header of a pending run's value on ``root`` (its shape, the table's dtype)."""
    key = (root.shape, table.probe.dtype)
    found = _RUN_METAS.get(key)
    if found is None:
        if len(_RUN_METAS) >= _MAX_RUN_METAS:
            _RUN_METAS.clear()
        found = _RUN_METAS[key] = Meta("ndarray", tuple(root.shape), dtype_str(table.probe.dtype))
    return found
