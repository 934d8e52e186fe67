"""Read-only views of tables derived from the library packages, computed on first use.

A module-level table (``INDEXED_MODULES``, ``TOLERANCES``, ``NON_MIGRATABLE``) that is a view
keeps its name and its type's interface for readers, while its contents come from the packages'
declarations when first read (and again after they are read anew), never at import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from typing import Any, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class MappingView(Mapping[K, V]):
    """A mapping whose contents are ``source()``, read at every access (``source`` caches)."""

    def __init__(self, source: Callable[[], Mapping[K, V]]) -> None:
        self._source = source

    def __getitem__(self, key: K) -> V:
        return self._source()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._source())

    def __len__(self) -> int:
        return len(self._source())

    def __contains__(self, key: object) -> bool:
        return key in self._source()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._source())!r})"


class SequenceView(Sequence[T]):
    """A sequence whose contents are ``source()``, read at every access (``source`` caches)."""

    def __init__(self, source: Callable[[], Sequence[T]]) -> None:
        self._source = source

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: Any) -> Any:
        return self._source()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._source())

    def __len__(self) -> int:
        return len(self._source())

    def __contains__(self, value: object) -> bool:
        return value in self._source()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({tuple(self._source())!r})"


class SetView(Set[T]):
    """A set whose contents are ``source()``, read at every access (``source`` caches)."""

    def __init__(self, source: Callable[[], Set[T]]) -> None:
        self._source = source

    @classmethod
    def _from_iterable(cls, it: Any) -> frozenset[Any]:  # results of ``&``, ``|``, ``-``
        return frozenset(it)

    def __iter__(self) -> Iterator[T]:
        return iter(self._source())

    def __len__(self) -> int:
        return len(self._source())

    def __contains__(self, value: object) -> bool:
        return value in self._source()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({set(self._source())!r})"
