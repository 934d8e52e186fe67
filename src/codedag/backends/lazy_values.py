"""The lazy-value core: the recorded call, forcing, operators and the one impersonation rule.

Three values stand for an array a patched library call returned but nobody computed yet:
:class:`~codedag.backends.batched.deferred.LazyArray` (and ``LazyTensor``: batched execution),
:class:`~codedag.migrate.cache.prefix_values.PrefixValue` (the prefix cache) and
:class:`~codedag.migrate.tables.run_values.RunValue` (lookup tables). Each is a
:class:`LazyValue`: it holds what it recorded (a :class:`Call`, or what its own kind records on
top: a batched op and its shape, a prefix key and header, a run's table), answers what the record
knows without computing, and otherwise *forces*: computes once, keeps the result, lets go of the
recording, and from then on answers as that value.

What each class supplies (the rest is here, once):

* :meth:`LazyValue._use`: the value for a use outside the record (``bool(v)``, ``float(v)``,
  iteration, a write, ``__array__``, pickling, an attribute the record cannot answer), counted
  as the class counts it (a forced value by reason, a diverged chain, nothing);
* :meth:`LazyValue._attribute`: an attribute the record answers (``shape``, ``dtype``, a
  recorded method), or :data:`MISSING`;
* :meth:`LazyValue._record_ufunc` / :meth:`LazyValue._record_function`: a NumPy ufunc or
  function recorded as the next value, or :data:`MISSING` where the class does not record it;
* :meth:`LazyValue._forced`: a call with the class's lazy values among its arguments computed;
* the operators, through :func:`install_recording_operators` (one ``record`` function: what
  ``x + y`` does is the class's business).

The impersonation rule, one for all three, with one declared option (:class:`Impersonation`):

* ``type(v)`` is always the lazy class itself: C code (OpenCV, torch, PIL) checks the real type,
  so a lazy value never reaches it as an array; the plan's guards compute one before it does.
* ``isinstance(v, np.ndarray)`` follows the class's declared :attr:`LazyValue.impersonation`:
  :attr:`Impersonation.OWN_TYPE` (``LazyArray``, ``LazyTensor``) answers False: a type check in
  user code sees no array, which ends a batched chain where the record cannot follow it;
  :attr:`Impersonation.STANDS_FOR` (:class:`StandIn`: ``PrefixValue``, ``RunValue``) fakes
  ``__class__`` as the type the value stands for, so user code takes the branch it takes without
  the cache or tables (a prefix value's header may stand for ``PIL.Image.Image`` or
  ``torch.Tensor``; a run's value is always an array); :attr:`Impersonation.SUBCLASS`
  (``RunArray``, the producer's array a run starts from) is a real ``ndarray`` subclass: its
  memory exists, so C code may read it as it is, and NumPy's own operators reach its
  ``__array_ufunc__``. The batched value cannot stand for an array: inside a recording block a
  type check that passed would hand C code memory that does not exist yet.
* ``__array__`` forces and honours NumPy's ``copy`` (``np.array(v)`` copies, ``np.asarray(v)``
  does not); ``__array_ufunc__`` and ``__array_function__`` record what the class records and
  force the arguments of the rest; a stand-in also forces the arguments of torch functions.
* Attributes the record answers (``shape``, ``dtype``, ``ndim``, ``size`` ...) cost nothing;
  any other attribute forces; ``len(v)`` reads the recorded shape.
* Operators follow :mod:`codedag.backends.lazy_operators`' sets; ``__hash__`` is None.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from codedag.backends.lazy_operators import in_place, install_operators

PENDING: Any = object()
"""A value not computed yet."""
MISSING: Any = object()
"""What a hook answers where the record cannot answer (the caller forces or falls back)."""
Args = tuple[Any, ...]
"""A call's positional arguments."""
Kwargs = dict[str, Any]
"""A call's keyword arguments."""


class Impersonation(enum.Enum):
    """How a lazy class answers ``isinstance(v, np.ndarray)`` (the module docstring's rule)."""

    OWN_TYPE = "own type"
    """``isinstance`` sees the lazy class only (``LazyArray``, ``LazyTensor``)."""
    STANDS_FOR = "stands for"
    """``__class__`` is faked as the type the value stands for (``PrefixValue``, ``RunValue``)."""
    SUBCLASS = "subclass"
    """A real ``ndarray`` subclass over memory that exists (``RunArray``)."""


class Call:
    """A recorded call: ``function(*args, **kwargs)``, and its value once computed.

    A source (a value known from the start) has no function. :meth:`compute` computes once,
    keeps the value and lets go of the call (its arguments are freed as without recording).
    """

    __slots__ = ("args", "function", "kwargs", "value")

    def __init__(
        self,
        function: Callable[..., Any] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        value: Any = PENDING,
    ) -> None:
        self.function, self.args, self.kwargs, self.value = function, args, kwargs, value

    @property
    def done(self) -> bool:
        """Whether the value is known (a source, or computed)."""
        return self.value is not PENDING

    def compute(self, resolve: Callable[[Any], Any]) -> Any:
        """The value: the call on its arguments, each lazy one through ``resolve``, once."""
        if self.value is PENDING:
            assert self.function is not None
            args = resolve_args(self.args, resolve)
            self.value = self.function(*args, **resolve_kwargs(self.kwargs, resolve))
            self.release()
        return self.value

    def release(self) -> None:
        """Let go of the call (the value is known)."""
        self.function, self.args, self.kwargs = None, (), {}


class LazyValue:
    """A value not computed yet (see the module docstring for what a subclass supplies)."""

    __slots__ = ()
    __array_priority__ = 1000.0
    impersonation: ClassVar[Impersonation] = Impersonation.OWN_TYPE
    """How this class answers ``isinstance`` (declared; :class:`StandIn` fakes ``__class__``)."""

    # -- what a subclass supplies -------------------------------------------------------------
    def _use(self, use: str, detail: str) -> Any:
        """The value for a use outside the record: ``use`` is one of ``truth``, ``number``,
        ``iteration``, ``write``, ``inplace``, ``conversion``, ``pickle``, ``attribute``,
        ``len``; ``detail`` says which (``"bool()"``, ``"attribute .flags"``)."""
        raise NotImplementedError

    def _attribute(self, name: str) -> Any:
        """An attribute the record answers without computing, or :data:`MISSING`."""
        return MISSING

    def _record_ufunc(self, ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The ufunc's call recorded as the next value, or :data:`MISSING`."""
        return MISSING

    def _record_function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A NumPy function's call recorded as the next value, or :data:`MISSING`."""
        return MISSING

    def _forced(self, function: Callable[..., Any], args: Args, kwargs: Kwargs, detail: str) -> Any:
        """``function`` called with this class's lazy values among its arguments computed."""
        raise NotImplementedError

    # -- what the record answers --------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        found = self._attribute(name)
        if found is not MISSING:
            return found
        return getattr(self._use("attribute", f"attribute .{name}"), name)

    def __len__(self) -> int:
        shape = self._attribute("shape")
        if shape is MISSING:
            return len(self._use("len", "len()"))
        if not shape:
            raise TypeError("len() of unsized object")
        return int(shape[0])

    # -- uses that need the value -------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = np.asarray(self._use("conversion", "__array__"))
        if dtype is not None:
            return array.astype(dtype, copy=bool(copy))
        return array.copy() if copy else array

    def __bool__(self) -> bool:
        return bool(self._use("truth", "bool()"))

    def __float__(self) -> float:
        return float(self._use("number", "float()"))

    def __int__(self) -> int:
        return int(self._use("number", "int()"))

    def __index__(self) -> int:
        return operator.index(self._use("number", "index"))

    def __complex__(self) -> complex:
        return complex(self._use("number", "complex()"))

    def __iter__(self) -> Any:
        return iter(self._use("iteration", "iteration"))

    def __setitem__(self, key: Any, value: Any) -> None:
        target = self._use("write", "x[...] = v")
        target[key] = value._use("write", "x[...] = v") if isinstance(value, LazyValue) else value

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (a user's cache, a queue, a worker's parent) as the value it stands for
        return (self._rebuild(), (self._use("pickle", "pickle"),))

    def _rebuild(self) -> Callable[[Any], Any]:
        """What unpickles the forced value (:func:`identity`: the value itself)."""
        return identity


class RecordsNumpy(LazyValue):
    """A lazy value that answers NumPy's protocols: ufuncs and functions it records become the
    next value, the rest run on its computed arguments (``LazyArray`` and the stand-ins;
    ``LazyTensor`` leaves NumPy to its ``__array__``)."""

    __slots__ = ()

    # -- NumPy's protocols --------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and kwargs.get("out") is None:
            kwargs.pop("out", None)
            recorded = self._record_ufunc(ufunc, inputs, kwargs)
            if recorded is not MISSING:
                return recorded
        detail = f"numpy.{ufunc.__name__}.{method}"
        return self._forced(getattr(ufunc, method), inputs, kwargs, detail)

    def __array_function__(
        self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        recorded = self._record_function(func, args, kwargs)
        if recorded is not MISSING:
            return recorded
        return self._forced(func, args, kwargs, function_name(func))


class StandIn(RecordsNumpy):
    """A lazy value that fakes ``__class__`` (:attr:`Impersonation.STANDS_FOR`)."""

    __slots__ = ()
    impersonation = Impersonation.STANDS_FOR

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # what isinstance() sees; type() stays the lazy class
        """The type the value stands for (:meth:`_stands_for`)."""
        return self._stands_for()

    def _stands_for(self) -> type:
        """The type user code sees through ``isinstance``."""
        raise NotImplementedError

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: Args = (), kwargs: Kwargs | None = None
    ) -> Any:
        kwargs = kwargs or {}
        found = collect(args, kwargs, cls)
        if not found:
            return func(*args, **kwargs)
        return found[0]._forced(func, args, kwargs, "a torch function")


def value_of(value: Any, detail: str) -> Any:
    """``value`` itself, or where it is a lazy value, its value computed (a ``conversion`` use,
    ``detail`` saying whose: another part's lazy value reaching code that needs the data)."""
    return value._use("conversion", detail) if isinstance(value, LazyValue) else value


def identity(value: Any) -> Any:
    """The value itself (what unpickles a forced lazy value)."""
    return value


def function_name(func: Any) -> str:
    """A NumPy function's qualified name (``numpy.clip``), or another function's qualname."""
    module = getattr(func, "__module__", "numpy") or "numpy"
    return f"numpy.{func.__name__}" if module.startswith("numpy") else func.__qualname__


# -- arguments ------------------------------------------------------------------------------------

Kinds = type | tuple[type, ...]
_SEQUENCES = (list, tuple)  # a tuple: isinstance() with it is quicker than with a union


_PLAIN: frozenset[type] = frozenset({int, float, str, bytes, bool, type(None), np.ndarray})
"""Exact types no lazy value has and that hold none: skipped by :func:`holds` at one look."""


def holds(args: tuple[Any, ...], kwargs: Mapping[str, Any], kinds: Kinds) -> bool:
    """Whether an argument (or an item of a list or tuple argument) is one of ``kinds`` (lazy
    value classes)."""
    for value in (*args, *kwargs.values()) if kwargs else args:
        if type(value) in _PLAIN:  # a patched function's usual arguments: an array, numbers
            continue
        if isinstance(value, kinds):
            return True
        if isinstance(value, _SEQUENCES):
            for item in value:
                if isinstance(item, kinds):
                    return True
    return False


def _holds(items: list[Any] | tuple[Any, ...], kinds: Kinds) -> bool:
    for item in items:  # noqa: SIM110 - a loop is cheaper than any() of a generator
        if isinstance(item, kinds):
            return True
    return False


def collect(args: tuple[Any, ...], kwargs: Mapping[str, Any], kinds: Kinds) -> list[Any]:
    """The arguments (and items of list or tuple arguments) that are one of ``kinds``."""
    found: list[Any] = []
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, kinds):
            found.append(value)
        elif isinstance(value, _SEQUENCES):
            found.extend(item for item in value if isinstance(item, kinds))
    return found


def _resolved(value: Any, resolve: Callable[[Any], Any], kinds: Kinds) -> Any:
    if isinstance(value, kinds):
        return resolve(value)
    if isinstance(value, _SEQUENCES) and _holds(value, kinds):
        items = [resolve(v) if isinstance(v, kinds) else v for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def resolve_args(
    args: tuple[Any, ...], resolve: Callable[[Any], Any], kinds: Kinds = LazyValue
) -> tuple[Any, ...]:
    """Positional arguments with each one of ``kinds`` (also in a list or tuple) resolved."""
    return tuple([_resolved(a, resolve, kinds) for a in args])


def resolve_kwargs(
    kwargs: dict[str, Any], resolve: Callable[[Any], Any], kinds: Kinds = LazyValue
) -> dict[str, Any]:
    """Keyword arguments with each one of ``kinds`` (also in a list or tuple) resolved."""
    return {k: _resolved(v, resolve, kinds) for k, v in kwargs.items()} if kwargs else {}


ARRAY_METADATA = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize"})
"""An array's or a tensor's attributes that describe it without its elements."""
IMAGE_METADATA = frozenset({"size", "width", "height", "mode"})
"""A PIL image's attributes that describe it without its pixels."""


def is_metadata_member(name: str) -> bool:
    """Whether ``name`` (``numpy.ndarray.shape``, ``PIL.Image.Image.size``) reads a value's
    metadata: what a stand-in answers from its header, and no use of the value's data."""
    owner, _, attribute = name.rpartition(".")
    if owner == "PIL.Image.Image":
        return attribute in IMAGE_METADATA
    return owner in ("numpy.ndarray", "torch.Tensor") and attribute in ARRAY_METADATA


TREE_DEPTH = 6
"""How deep :func:`in_tree` and :func:`resolve_tree` look into tuples, lists and dicts."""


def in_tree(value: object, kinds: Kinds, pending: Callable[[Any], bool] | None = None) -> int:
    """How many values of ``kinds`` are in ``value`` and its tuples, lists and dicts (``pending``:
    count only those it says are not computed yet)."""

    def count(item: object, depth: int) -> int:
        if isinstance(item, kinds):
            return 1 if pending is None or pending(item) else 0
        if depth > TREE_DEPTH or type(item) in _PLAIN:
            return 0
        if isinstance(item, _SEQUENCES):
            return sum(count(v, depth + 1) for v in item)
        if isinstance(item, dict):
            return sum(count(v, depth + 1) for v in item.values())
        return 0

    return count(value, 0)


def resolve_tree(value: object, resolve: Callable[[Any], Any], kinds: Kinds) -> Any:
    """``value`` with each value of ``kinds`` in it, and in its tuples (named ones too), lists
    and dicts, resolved; containers that hold none are returned as they are."""

    def walk(item: object, depth: int) -> Any:
        if isinstance(item, kinds):
            return resolve(item)
        if depth > TREE_DEPTH or type(item) in _PLAIN:
            return item
        if isinstance(item, _SEQUENCES):
            return rebuilt(item, [walk(v, depth + 1) for v in item])
        if isinstance(item, dict):
            items = {k: walk(v, depth + 1) for k, v in item.items()}
            if all(items[k] is v for k, v in item.items()):
                return item
            clone = dict(item) if type(item) is dict else item.copy()
            clone.update(items)
            return clone
        return item

    return walk(value, 0)


def rebuilt(original: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """``original`` again where ``items`` are its own, else a container of its type holding
    ``items`` (a named tuple by its fields)."""
    if all(a is b for a, b in zip(original, items, strict=True)):
        return original
    if isinstance(original, tuple):
        if hasattr(original, "_fields"):
            return type(original)(*items)
        return type(original)(items)
    return type(original)(items) if type(original) is not list else items


# -- operators ------------------------------------------------------------------------------------

Record = Callable[[Any, str, Callable[..., Any], tuple[Any, ...]], Any]
"""``record(self, name, function, args)``: what an operator does (``name``: ``operator.add``)."""


def forcing_inplace(name: str) -> Callable[[Any, Any], Any]:
    """The in-place operator that computes the value and writes into it, as NumPy does."""
    function = in_place(name)

    def inplace(self: Any, other: Any) -> Any:
        target = self._use("inplace", "in-place operator")
        if isinstance(other, LazyValue):
            other = other._use("inplace", "in-place operator")
        return function(target, other)

    return inplace


def install_recording_operators(
    cls: type,
    record: Record,
    *,
    function_of: Callable[[str], Callable[..., Any]] | None = None,
    inplace: Callable[[str], Callable[[Any, Any], Any]] = forcing_inplace,
    left_out: Mapping[str, str] | None = None,
) -> None:
    """Install the operators of :mod:`codedag.backends.lazy_operators` on ``cls``, each one a
    call of ``record`` (comparisons as forward operators).

    Args:
        cls: the lazy class.
        record: what an operator does, given the value, ``operator.<name>``, the function
            (``function_of(name)``) and the operands in order.
        function_of: an operator's function by its name (default: :mod:`operator`'s).
        inplace: makes the in-place methods (default: :func:`forcing_inplace`).
        left_out: operators ``cls`` does not install, each with the reason.
    """
    function_for = function_of or (lambda name: getattr(operator, name))

    def forward(name: str) -> Callable[[Any, Any], Any]:
        function, qualified = function_for(name), f"operator.{name}"

        def method(self: Any, other: Any) -> Any:
            return record(self, qualified, function, (self, other))

        return method

    def reflected(name: str) -> Callable[[Any, Any], Any]:
        function, qualified = function_for(name), f"operator.{name}"

        def method(self: Any, other: Any) -> Any:
            return record(self, qualified, function, (other, self))

        return method

    def unary(name: str) -> Callable[[Any], Any]:
        function, qualified = function_for(name), f"operator.{name}"

        def method(self: Any) -> Any:
            return record(self, qualified, function, (self,))

        return method

    install_operators(
        cls, forward=forward, reflected=reflected, inplace=inplace, comparison=forward,
        unary=unary, left_out=left_out,
    )  # fmt: skip
