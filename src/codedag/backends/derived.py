"""Read-only views of tables derived from the library packages, computed on first use.

A module-level table (``INDEXED_MODULES``, ``TOLERANCES``, ``NON_MIGRATABLE``) that is a view
keeps its name and its type's interface for readers, while its contents come from the packages'
declarations when first read (and again after they are read anew), never at import.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence, Set
from typing import Any, Generic, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
S = TypeVar("S", bound=Collection[Any])


class _View(Generic[S]):
    """What every view reads from ``source()`` at each access (``source`` caches); ``_shown``
    turns the contents into the built-in collection its ``repr`` shows."""

    _shown: Callable[[S], object]

    def __init__(self, source: Callable[[], S]) -> None:
        self._source = source

    def __iter__(self) -> Iterator[Any]:
        return iter(self._source())

    def __len__(self) -> int:
        return len(self._source())

    def __contains__(self, item: object) -> bool:
        return item in self._source()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._shown(self._source())!r})"


class MappingView(_View[Mapping[K, V]], Mapping[K, V]):
    """A mapping whose contents are ``source()``, read at every access (``source`` caches)."""

    _shown = dict

    def __getitem__(self, key: K) -> V:
        return self._source()[key]


class SequenceView(_View[Sequence[T]], Sequence[T]):
    """A sequence whose contents are ``source()``, read at every access (``source`` caches)."""

    _shown = tuple

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: Any) -> Any:
        return self._source()[index]


class SetView(_View[Set[T]], Set[T]):
    """A set whose contents are ``source()``, read at every access (``source`` caches)."""

    _shown = set

    @classmethod
    def _from_iterable(cls, it: Any) -> frozenset[Any]:  # results of ``&``, ``|``, ``-``
        return frozenset(it)
