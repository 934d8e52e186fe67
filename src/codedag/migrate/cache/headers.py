"""What a prefix value's header answers without computing: metadata, recorded methods, types.

A deferred prefix value reads the header its key's value had when stored (:class:`Meta`: an
array's shape and dtype, an image's size and mode) at the first question it answers:
:func:`header_attribute` answers its metadata from it, the methods of :data:`METHODS` become
steps of the chain, and :func:`stands_for` is the type ``isinstance`` sees (the lazy-value core's
stand-in rule, :mod:`codedag.backends.lazy_values`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from codedag.backends.lazy_values import ARRAY_METADATA, IMAGE_METADATA
from codedag.store.meta import Meta

ARRAY_METHODS = frozenset(
    {"astype", "copy", "transpose", "reshape", "clip", "squeeze", "ravel", "mean", "sum", "min",
     "max", "std", "var"}
)  # fmt: skip
"""(A reduction over an axis keeps an array: ``y.mean(axis=1)`` makes a stereo file mono.)"""
IMAGE_METHODS = frozenset(
    {"convert", "resize", "crop", "transpose", "rotate", "copy", "reduce", "filter", "getchannel"}
)
TENSOR_METHODS = frozenset(
    {"float", "double", "half", "byte", "long", "int", "to", "contiguous", "permute", "unsqueeze",
     "squeeze", "clone", "div", "mul", "sub", "add", "flip", "clamp", "clip", "abs", "sqrt", "pow",
     "exp", "log", "neg", "reshape", "view", "transpose", "repeat", "expand", "mean", "std",
     "sum"}
)  # fmt: skip
"""(``to`` keys its dtype or device name; a value moved off the CPU is never stored. No method
that writes in place, ``clamp_``: a write into a value before the cut computes its chain.)"""
METHODS = {"ndarray": ARRAY_METHODS, "pil": IMAGE_METHODS, "tensor": TENSOR_METHODS}
"""The methods each header kind records as a step."""
METHOD_OWNERS = {
    "ndarray": "numpy.ndarray",
    "pil": "PIL.Image.Image",
    "tensor": "torch._C.TensorBase",
}
"""The qualified owner of each kind's methods, as the tracer names the class that defines them
(a step's name: ``numpy.ndarray.astype``; torch's tensor methods are ``TensorBase``'s, in C)."""
METHOD_NAMES = {
    (kind, name): f"{METHOD_OWNERS[kind]}.{name}"
    for kind, names in METHODS.items()
    for name in names
}
"""Each kind's recorded methods by their step names (``("ndarray", "astype")``:
``numpy.ndarray.astype``)."""
LEFT_OUT_OPERATORS = ("lshift", "rshift")
"""Operators prefix values do not install (:mod:`.prefix_values` says why): a chain's planner
follows neither."""
RECORDED_METHODS = frozenset(METHOD_NAMES.values()) | {"numpy.ndarray.T"}
"""The step names of every method (and attribute) a prefix value records: a chain's planner
follows no other method."""


@functools.cache
def stands_for(kind: str) -> type | None:
    """The type of a header's kind (its library imported at the first use), None if unknown."""
    if kind == "ndarray":
        import numpy as np

        return np.ndarray
    if kind == "tensor":
        import torch

        return torch.Tensor
    if kind == "pil":
        from PIL import Image

        return Image.Image
    return None


def is_metadata(meta: Meta, name: str) -> bool:
    """Whether the header of ``meta``'s kind answers ``name``."""
    if meta.kind in ("ndarray", "tensor"):
        return name in ARRAY_METADATA
    return meta.kind == "pil" and name in IMAGE_METADATA


def header_attribute(meta: Meta, name: str) -> Any:
    """The metadata ``name`` (:func:`is_metadata`) as the value would answer it."""
    if meta.kind == "pil":
        width, height = meta.size
        return {"size": (width, height), "width": width, "height": height, "mode": meta.mode}[name]
    import numpy as np

    if meta.kind == "tensor":
        import torch

        if name == "shape":
            return torch.Size(meta.shape)
        if name == "dtype":
            return getattr(torch, meta.dtype)
    dtype = np.dtype(meta.dtype) if meta.kind == "ndarray" else None
    size = int(np.prod(meta.shape, dtype=np.int64))
    values = {
        "shape": tuple(meta.shape),
        "dtype": dtype,
        "ndim": len(meta.shape),
        "size": size,
        "itemsize": dtype.itemsize if dtype is not None else None,
        "nbytes": size * dtype.itemsize if dtype is not None else None,
    }
    return values[name]


@functools.cache
def method_call(name: str) -> Callable[..., Any]:
    """``target.name(*args, **kwargs)`` as a function of the target (a step's function; one
    per name)."""

    def call(target: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(target, name)(*args, **kwargs)

    call.__name__ = name
    return call


@functools.cache
def attribute_reader(name: str) -> Callable[[Any], Any]:
    """``target.name`` as a function of the target (a step's function; one per name)."""

    def read(target: Any) -> Any:
        return getattr(target, name)

    return read


def static_index(key: Any) -> bool:
    """Whether an index is static (integers, slices, ``None``, ``...``, a name: ``mat["data"]``
    of a MATLAB file's variables): a step, not data."""
    items = key if isinstance(key, tuple) else (key,)
    return all(
        i is None or i is Ellipsis or (isinstance(i, int | slice | str) and not isinstance(i, bool))
        for i in items
    )
