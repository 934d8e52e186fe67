"""Python's operators on lazy values: the operator sets, declared once, and one installer.

Three classes stand for an array not computed yet and answer Python's operators:
:class:`~codedag.backends.batched.lazy_array.LazyArray` (batched execution),
:class:`~codedag.migrate.cache.prefix_values.PrefixValue` (the prefix cache) and
:class:`~codedag.migrate.tables.run_values.RunValue` (lookup tables). Each gives
:func:`install_operators` its own factories (what ``x + y`` does is the class's business: record
a ufunc, key a step of a chain, extend a run), and the installer puts the methods of
:data:`BINARY` (forward, reflected, in-place), :data:`COMPARISONS` and :data:`UNARY` on the class,
less what the class leaves out with its reason, and sets ``__hash__ = None`` (``__eq__`` is
element-wise, so these values are unhashable, as arrays are).

How each class answers ``isinstance`` and ``type`` is the lazy-value core's one rule, with each
class's declared option (:mod:`codedag.backends.lazy_values`); the core's
:func:`~codedag.backends.lazy_values.install_recording_operators` builds the factories from one
``record`` function per class. ``RunArray``, a real ``ndarray`` subclass, installs no operators:
NumPy's own reach its ``__array_ufunc__``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from codedag.errors import ConfigError

BINARY: tuple[str, ...] = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
    "and_", "or_", "xor", "lshift", "rshift",
)  # fmt: skip
"""Binary operators by their name in :mod:`operator`: forward, reflected and in-place methods."""

COMPARISONS: tuple[str, ...] = ("lt", "le", "gt", "ge", "eq", "ne")
"""Comparisons, forward only: Python reflects one itself (``1 < x`` asks ``x.__gt__(1)``)."""

UNARY: tuple[str, ...] = ("neg", "pos", "abs", "invert")
"""Unary operators by their name in :mod:`operator`."""

OPERATORS: frozenset[str] = frozenset((*BINARY, *COMPARISONS, *UNARY))
"""Every operator :func:`install_operators` knows."""

BinaryFactory = Callable[[str], Callable[[Any, Any], Any]]
"""Makes the method of an operator's name (``"add"``, ``"and_"``): ``method(self, other)``."""
UnaryFactory = Callable[[str], Callable[[Any], Any]]
"""Makes the method of a unary operator's name (``"neg"``): ``method(self)``."""


def dunder(name: str, kind: str = "") -> str:
    """The special method of an operator's name: ``dunder("and_", "r") == "__rand__"``.

    Args:
        name: the operator's name in :mod:`operator`.
        kind: ``""`` (forward), ``"r"`` (reflected) or ``"i"`` (in-place).
    """
    return f"__{kind}{name.rstrip('_')}__"


def in_place(name: str) -> Callable[[Any, Any], Any]:
    """:mod:`operator`'s in-place function of a binary operator's name (``"and_"``: ``iand``)."""
    function: Callable[[Any, Any], Any] = getattr(operator, f"i{name.rstrip('_')}")
    return function


def install_operators(
    cls: type,
    *,
    forward: BinaryFactory,
    reflected: BinaryFactory,
    inplace: BinaryFactory,
    comparison: BinaryFactory,
    unary: UnaryFactory,
    left_out: Mapping[str, str] | None = None,
) -> None:
    """Install Python's operators on ``cls`` from its factories, and ``__hash__ = None``.

    Each factory is called once per operator name and returns a new function, which becomes the
    method (named after it, so tracebacks read ``LazyArray.__add__``): the methods cost what the
    class's functions cost, with no dispatch of their own.

    Args:
        cls: the lazy-value class.
        forward: makes ``__add__`` and the other binary operators' forward methods.
        reflected: makes ``__radd__`` ...
        inplace: makes ``__iadd__`` ...
        comparison: makes ``__lt__`` ... (forward only).
        unary: makes ``__neg__`` ...
        left_out: operator names the class does not install, each with the reason.

    Raises:
        ConfigError: a left-out name is not an operator, or its reason is empty.
    """
    left_out = left_out or {}
    unknown = sorted(set(left_out) - OPERATORS)
    if unknown:
        raise ConfigError(f"left out operators {unknown} are not among {sorted(OPERATORS)}")
    unexplained = sorted(name for name, reason in left_out.items() if not reason.strip())
    if unexplained:
        raise ConfigError(f"left out operators {unexplained} need a reason, got an empty one")
    for name in BINARY:
        if name not in left_out:
            _set(cls, dunder(name), forward(name))
            _set(cls, dunder(name, "r"), reflected(name))
            _set(cls, dunder(name, "i"), inplace(name))
    for name in COMPARISONS:
        if name not in left_out:
            _set(cls, dunder(name), comparison(name))
    for name in UNARY:
        if name not in left_out:
            _set(cls, dunder(name), unary(name))
    cls.__hash__ = None  # type: ignore[assignment]


def _set(cls: type, method_name: str, function: Callable[..., Any]) -> None:
    function.__name__ = method_name
    function.__qualname__ = f"{cls.__qualname__}.{method_name}"
    setattr(cls, method_name, function)
