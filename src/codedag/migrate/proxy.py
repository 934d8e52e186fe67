"""Small objects the migration wrapper is made of: call counters and NumPy ufunc proxies.

* :class:`Count`: a counter whose increment is one C call (atomic under the GIL) and that is read
  without advancing it, on every Python version (3.14 removed ``itertools.count.__reduce__``).
* :func:`ufunc_proxy`: a ufunc's replacement. A ufunc carries methods (``np.add.reduce``) that a
  plain function would hide, so its replacement is an object whose calls go to the wrapper and
  whose attributes go to the ufunc; it pickles by name, as the ufunc itself does.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from collections.abc import Callable
from typing import Any


class Count:
    """A call counter: ``add`` is one C call (atomic under the GIL), ``value`` reads it."""

    __slots__ = ("_counter", "add")

    def __init__(self) -> None:
        self._counter = itertools.count()
        self.add: Callable[[], int] = self._counter.__next__

    @property
    def value(self) -> int:
        # ``repr`` is the one way to read an itertools.count without advancing it on every
        # Python version (3.14 removed its __reduce__); it is read for statistics only.
        return int(repr(self._counter)[6:-1])


def _global(module: str, qualname: str) -> Any:
    """What a pickled replacement unpickles to: the attribute ``module.qualname`` there."""
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


class UfuncProxy:
    """A NumPy ufunc's replacement: calls go to the wrapper, ``reduce``/``outer``/... to the ufunc.

    Each proxy has its own subclass whose ``__call__`` *is* the replacement function (a
    staticmethod), so no extra Python frame sits between the caller and the replacement.
    """

    def __init__(self, ufunc: Any, wrapper: Any, module: str) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__qualname__ = ufunc.__name__
        self.__module__ = module
        self.__doc__ = ufunc.__doc__
        self.__codedag_wrapper__ = wrapper

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._ufunc, name)

    def __reduce__(self) -> str | tuple[Any, ...]:
        # Pickled by name, as the ufunc itself: the bytes are the original's while this proxy is
        # the module's attribute; a stale proxy (still referenced after restore) unpickles to
        # whatever the module holds then.
        module = sys.modules.get(self.__module__)
        if module is not None and getattr(module, self.__name__, None) is self:
            return self.__name__
        return (_global, (self.__module__, self.__name__))

    def __repr__(self) -> str:
        return f"<codedag wrapper of {self._ufunc!r}>"


def ufunc_proxy(replacement: Callable[..., Any], ufunc: Any, wrapper: Any, module: str) -> Any:
    """The object installed for ``ufunc``: calling it calls ``replacement``."""
    cls = type(f"codedag_{ufunc.__name__}", (UfuncProxy,), {"__call__": staticmethod(replacement)})
    return cls(ufunc, wrapper, module)
