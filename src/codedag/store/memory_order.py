"""The order an array's axes lie in memory, kept through the store.

What NumPy and torch compute from an array follows its layout: ``np.stack`` of ``(3, H, W)``
views of ``(H, W, 3)`` images is channels-last in memory, and torch's convolutions take another
path over it, rounding differently. So a value is stored in the order it lies in memory, with
that order in its header, and read back as the same view.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Order(NamedTuple):
    """How an array's axes lie in memory, where that is not NumPy's default (C order).

    Attributes:
        axes: the axes from the largest step in memory to the smallest (``(1, 2, 0)`` for a
            ``(3, H, W)`` view of an ``(H, W, 3)`` image).
        flipped: the axes that run backwards in memory (``image[:, ::-1]``).
    """

    axes: tuple[int, ...]
    flipped: tuple[int, ...]

    def fields(self) -> str:
        """The order as the header's JSON fields (``,"axes":[1,2,0],"flipped":[]``)."""
        axes = ",".join([str(n) for n in self.axes])
        flipped = ",".join([str(n) for n in self.flipped])
        return f',"axes":[{axes}],"flipped":[{flipped}]'

    @classmethod
    def read(cls, axes: list[int], flipped: list[int], dimensions: int) -> Order:
        """The order a header's fields give, for an array of ``dimensions`` axes.

        Raises:
            ValueError: the fields are no order of such an array's axes.
        """
        order = cls(tuple(int(n) for n in axes), tuple(int(n) for n in flipped))
        if sorted(order.axes) != list(range(dimensions)) or not set(order.flipped) <= set(axes):
            raise ValueError(f"axes {order.axes} flipped {order.flipped} for {dimensions} axes")
        return order


def in_memory_order(array: np.ndarray) -> tuple[np.ndarray, Order | None]:
    """``array``'s elements in the order they lie in memory, contiguous, and that order (None:
    C order).

    ``array`` itself where it is C-contiguous, else a copy, which code writing into the value
    cannot change before it is stored. Never ``np.ascontiguousarray`` of a 0-d array, which
    makes it 1-d (a label read back as ``[3]``, which ``int()`` refuses).
    """
    if array.flags.c_contiguous:
        return array, None
    strides = array.strides
    flipped = tuple(i for i, n in enumerate(array.shape) if n > 1 and strides[i] < 0)
    array = _flipped(array, flipped)
    axes = tuple(sorted(range(array.ndim), key=lambda i: -abs(strides[i])))
    order = Order(axes, flipped)
    if order == Order(tuple(range(array.ndim)), ()):
        return np.ascontiguousarray(array), None
    return np.array(array.transpose(axes), order="C"), order


def laid_out(array: np.ndarray, order: Order) -> np.ndarray:
    """A contiguous ``array`` of :func:`in_memory_order` read back as the view that lays its
    axes out in ``order``."""
    inverse = [0] * len(order.axes)
    for position, axis in enumerate(order.axes):
        inverse[axis] = position
    return _flipped(array.transpose(inverse), order.flipped)


def _flipped(array: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return array
    steps = [slice(None)] * array.ndim
    for axis in axes:
        steps[axis] = slice(None, None, -1)
    return array[tuple(steps)]
