"""What a deferred value can record, and how each recorded operation runs on a batch.

An :class:`Op` is one operation of a sample's chain: a library call with a torch backend
(``cv2.resize``), a NumPy elementwise function or operator (``img / 255.0`` is ``numpy.divide``),
a view or cast (:mod:`.views`), or a conversion to torch. Each op answers three questions:

* :meth:`Op.original`: the per-sample CPU function, the reference itself (forcing replays it);
* :meth:`Op.infer`: the result's shape and dtype, computed without running any work (views on a
  zero-stride dummy array, NumPy's own promotion on 0-d probes, or the backend on torch's ``meta``
  device, cached per signature);
* :meth:`Op.run`: the same operation for a group of samples at once, on the device.

Each argument slot of a call is *data* (per-sample arrays: they get the batch axis), *per-sample*
(declared by the backend: stacked into one tensor when the samples differ) or *static* (equal
across a group; part of the group key).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codedag.backends.batched.backends import Backend, backend_for
from codedag.backends.ops.numpy._common import NUMPY_OF_TORCH, TORCH_OF_NUMPY
from codedag.errors import UnsupportedOperation

DATA = "data"
PER_SAMPLE = "per_sample"
STATIC = "static"

SMALL_BYTES = 4096
_MAX_ZERO_ELEMENTS = 1 << 24  # zeros a shape rule may run on when meta tensors cannot
"""Concrete arrays up to this size are static arguments (compared by value); larger ones are
per-sample data shipped with the batch."""


@dataclass(frozen=True)
class Meta:
    """Shape and dtype of one sample's value (NumPy dtype for arrays, torch dtype for tensors)."""

    shape: tuple[int, ...]
    dtype: Any
    kind: str = "array"

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def torch_dtype(self) -> torch.dtype:
        """The dtype as torch names it."""
        return self.dtype if self.kind == "tensor" else torch_dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of one sample's value."""
        count = int(np.prod(self.shape, dtype=np.int64))
        return count * torch.empty((), dtype=self.torch_dtype).element_size()


@dataclass
class Batch:
    """A data argument of a group: one tensor for the group's samples.

    Attributes:
        tensor: ``(n, *shape)``, or ``shape`` alone when ``shared``.
        meta: one sample's shape and dtype.
        shared: every sample has this same value (no batch axis: it broadcasts).
    """

    tensor: torch.Tensor
    meta: Meta
    shared: bool = False

    def expanded(self, n: int) -> torch.Tensor:
        """The tensor with a batch axis of ``n``."""
        if not self.shared:
            return self.tensor
        return self.tensor.unsqueeze(0).expand(n, *self.tensor.shape)

    def aligned(self, ndim: int) -> torch.Tensor:
        """For broadcasting against per-sample results of ``ndim`` dimensions plus the batch."""
        if self.shared:
            return self.tensor
        missing = ndim - self.meta.ndim
        if missing <= 0:
            return self.tensor
        n = self.tensor.shape[0]
        return self.tensor.reshape(n, *([1] * missing), *self.meta.shape)


class Op:
    """One recordable operation; subclasses define the three questions (module docstring)."""

    name: str = ""
    result: str = "array"
    view: bool = False
    """Whether the result may share memory with the first argument (writes through it force)."""

    def key(self) -> tuple[Any, ...]:
        """What identifies this op in another process (see :func:`op_from_key`)."""
        raise NotImplementedError

    def original(self, *args: Any, **kwargs: Any) -> Any:
        """The per-sample CPU function (the library's own)."""
        raise NotImplementedError

    def slot_kind(self, key: int | str, value: Any) -> str:
        """``DATA``, ``PER_SAMPLE`` or ``STATIC`` for the argument at ``key``."""
        return DATA if isinstance(value, Meta) else STATIC

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        """Result shape and dtype; lazy inputs arrive as :class:`Meta`.

        Raises:
            UnsupportedOperation: this call cannot be recorded (it then runs eagerly).
        """
        raise NotImplementedError

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        """The operation for ``n`` samples; data slots arrive as :class:`Batch`."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        return (op_from_key, (self.key(),))

    def __repr__(self) -> str:
        return f"<op {self.name}>"


# -- library calls with a batch-first backend ------------------------------------------------


class LibraryOp(Op):
    """A library function (cv2, librosa, PIL) run through its batch-first torch backend."""

    def __init__(self, name: str, original: Callable[..., Any], backend: Backend) -> None:
        self.name = name
        self._original = original
        self.backend = backend
        self._meta_cache: dict[Any, Meta] = {}
        self._lock = threading.Lock()

    def key(self) -> tuple[Any, ...]:
        return ("library", self.name)

    def original(self, *args: Any, **kwargs: Any) -> Any:
        return self._original(*args, **kwargs)

    def param(self, key: int | str) -> str:
        """The library's name of a positional or keyword slot."""
        if isinstance(key, int):
            names = self.backend.positional
            return names[key] if key < len(names) else f"#{key}"
        return key

    def slot_kind(self, key: int | str, value: Any) -> str:
        name = self.param(key)
        if name in self.backend.data and (
            isinstance(value, Meta) or (is_array(value) and value.ndim >= 1)
        ):
            return DATA
        if name in self.backend.per_sample:
            return PER_SAMPLE
        return STATIC

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        slots = [(i, a) for i, a in enumerate(args)] + list(kwargs.items())
        if not any(self.slot_kind(k, v) == DATA for k, v in slots):
            raise UnsupportedOperation(f"{self.name}: no image or signal argument")
        signature: Any = (tuple(_shape_key(v) for v in args), tuple(sorted(_kw_keys(kwargs))))
        try:
            hash(signature)
        except TypeError:
            signature = None  # unhashable arguments: infer afresh
        if signature is not None:
            cached = self._meta_cache.get(signature)
            if cached is not None:
                return cached
        try:
            out = self._described(args, kwargs, torch.device("meta"))
        except UnsupportedOperation:
            raise
        except Exception:
            # the backend reads data on some path (e.g. a fast path choosing on the values):
            # run it once on zeros of the same shapes on the CPU (cached per signature below)
            try:
                out = self._described(args, kwargs, torch.device("cpu"))
            except UnsupportedOperation:
                raise
            except Exception as e:
                raise UnsupportedOperation(
                    f"{self.name}: no shape rule ({type(e).__name__})"
                ) from e
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != 1:
            raise UnsupportedOperation(f"{self.name}: the backend returns {type(out).__name__}")
        meta = Meta(tuple(out.shape[1:]), numpy_dtype(out.dtype))
        if signature is not None:
            with self._lock:
                self._meta_cache[signature] = meta
        return meta

    def _described(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], device: torch.device
    ) -> Any:
        """The backend's result for one sample of placeholder data on ``device`` (``meta``:
        shapes only; the CPU: zeros, for backends that read values)."""
        call_args = [self._placeholder(k, v, device) for k, v in enumerate(args)]
        call_kwargs = {k: self._placeholder(k, v, device) for k, v in kwargs.items()}
        return self.backend.call(call_args, call_kwargs, device)

    def _placeholder(self, key: int | str, value: Any, device: torch.device) -> Any:
        if self.slot_kind(key, value) != DATA:
            return value
        meta = value if isinstance(value, Meta) else meta_of(value)
        shape = (1, *meta.shape)
        if device.type == "meta":
            return torch.empty(shape, dtype=meta.torch_dtype, device=device)
        if math.prod(shape) > _MAX_ZERO_ELEMENTS:
            raise UnsupportedOperation(f"{self.name}: no shape rule for {meta.shape}")
        return torch.zeros(shape, dtype=meta.torch_dtype, device=device)

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        call_args = [a.expanded(n) if isinstance(a, Batch) else a for a in args]
        call_kwargs = {k: (v.expanded(n) if isinstance(v, Batch) else v) for k, v in kwargs.items()}
        out = self.backend.call(call_args, call_kwargs, device)
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != n:
            raise UnsupportedOperation(f"{self.name}: backend returned {type(out).__name__}")
        return out


# -- NumPy elementwise functions -------------------------------------------------------------


class ElementwiseOp(Op):
    """A NumPy ufunc (operators included) or ``clip``, run through the NumPy torch backend.

    NumPy's backends follow NumPy's promotion (NEP 50) and broadcasting; the batch axis is one more
    leading axis, so every per-sample operand is aligned to the result's rank first.
    """

    def __init__(
        self,
        name: str,
        original: Callable[..., Any],
        backend: Callable[..., Any],
        keywords: frozenset[str] = frozenset({"dtype", "casting"}),
    ) -> None:
        self.name = name
        self._original = original
        self.backend = backend
        self.keywords = keywords

    def key(self) -> tuple[Any, ...]:
        return ("elementwise", self.name)

    def original(self, *args: Any, **kwargs: Any) -> Any:
        return self._original(*args, **kwargs)

    def slot_kind(self, key: int | str, value: Any) -> str:
        if isinstance(value, Meta):
            return DATA
        if isinstance(key, int) and is_array(value) and value.nbytes > SMALL_BYTES:
            return DATA
        return STATIC

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        extra = set(kwargs) - self.keywords
        if extra:
            raise UnsupportedOperation(f"{self.name}: keyword arguments {sorted(extra)}")
        if kwargs.get("out") is not None:
            raise UnsupportedOperation(f"{self.name}: writes into out=")
        probe = [self._probe(v) for v in args]
        try:
            out = self.backend(*probe, **kwargs)
        except UnsupportedOperation:
            raise
        except Exception as e:
            raise UnsupportedOperation(f"{self.name}: {type(e).__name__}: {e}") from e
        if not isinstance(out, torch.Tensor):
            raise UnsupportedOperation(f"{self.name}: the backend returns {type(out).__name__}")
        return Meta(tuple(out.shape), numpy_dtype(out.dtype))

    def _probe(self, value: Any) -> Any:
        if isinstance(value, Meta) or (is_array(value) and value.nbytes > SMALL_BYTES):
            meta = value if isinstance(value, Meta) else meta_of(value)
            return torch.empty(meta.shape, dtype=meta.torch_dtype, device="meta")
        return value

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        ndim = max((a.meta.ndim for a in args if isinstance(a, Batch)), default=0)
        ndim = max([ndim, *(np.ndim(a) for a in args if is_array(a))])
        operands = [a.aligned(ndim) if isinstance(a, Batch) else _on(a, device) for a in args]
        return self.backend(*operands, **kwargs)


def _on(value: Any, device: torch.device) -> Any:
    """A small static array as a tensor on ``device`` (NumPy backends take tensors or scalars)."""
    if isinstance(value, np.ndarray):
        return torch.as_tensor(np.ascontiguousarray(value)).to(device)
    return value


# -- helpers -------------------------------------------------------------------------------------


def is_array(value: Any) -> bool:
    """A NumPy array or a torch tensor."""
    return isinstance(value, np.ndarray | torch.Tensor)


def meta_of(value: Any) -> Meta:
    """The :class:`Meta` of a concrete array or tensor."""
    if isinstance(value, torch.Tensor):
        return Meta(tuple(value.shape), value.dtype, "tensor")
    array = np.asarray(value)
    return Meta(tuple(array.shape), array.dtype, "array")


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a NumPy dtype (anything ``numpy.dtype()`` takes).

    Raises:
        UnsupportedOperation: torch has no such dtype.
    """
    try:
        return TORCH_OF_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise UnsupportedOperation(f"dtype {dtype!r} has no torch equivalent") from None


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype.

    Raises:
        UnsupportedOperation: NumPy has no such dtype (bfloat16).
    """
    try:
        return NUMPY_OF_TORCH[dtype]
    except KeyError:
        raise UnsupportedOperation(f"{dtype} has no NumPy equivalent") from None


def _shape_key(value: Any) -> Any:
    if isinstance(value, Meta):
        return ("meta", value.shape, str(value.dtype))
    if is_array(value):
        return ("array", tuple(value.shape), str(value.dtype))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_shape_key(v) for v in value))
    return value


def _kw_keys(kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, _shape_key(v)) for k, v in kwargs.items()]


# -- lookup by key (records travel between processes with their ops named, not pickled) -------

_OPS: dict[tuple[Any, ...], Op] = {}
_OPS_LOCK = threading.Lock()


def register_op(op: Op) -> Op:
    """Make ``op`` the one instance for its key in this process (returns the registered one)."""
    with _OPS_LOCK:
        return _OPS.setdefault(op.key(), op)


def op_from_key(key: tuple[Any, ...]) -> Op:
    """The op of ``key`` in this process (built on first use)."""
    with _OPS_LOCK:
        found = _OPS.get(key)
    if found is not None:
        return found
    return register_op(_build_op(key))


_BUILDERS: list[Callable[[tuple[Any, ...]], Op | None]] = []


def register_builder(builder: Callable[[tuple[Any, ...]], Op | None]) -> None:
    """Let ``builder`` rebuild ops of other kinds from their keys (:mod:`.views` registers its
    own when imported, as every process that records or runs batches does)."""
    if builder not in _BUILDERS:
        _BUILDERS.append(builder)


def _build_op(key: tuple[Any, ...]) -> Op:
    kind = key[0]
    op: Op | None = None
    if kind == "library":
        op = library_op(key[1])
    elif kind == "elementwise":
        op = elementwise_op(key[1])
    else:
        for builder in _BUILDERS:
            if (op := builder(key)) is not None:
                break
    if op is None:
        raise UnsupportedOperation(f"no batched op {key!r} in this process")
    return op


def unpatched(name: str) -> Callable[..., Any]:
    """The library's own function of ``name``, even while a patch replaces it."""
    from codedag.backends.probe import original_function
    from codedag.patching import original_of

    return original_of(original_function(name))


def library_op(name: str) -> LibraryOp | None:
    """The op of a library function with a batch-first backend (``None`` if it has none)."""
    found = _OPS.get(("library", name))
    if isinstance(found, LibraryOp):
        return found
    backend = backend_for(name)
    if backend is None or not backend.batch_first or not backend.data:
        return None
    op = LibraryOp(name, unpatched(name), backend)
    return register_op(op)  # type: ignore[return-value]


def elementwise_op(name: str) -> ElementwiseOp | None:
    """The op of a NumPy ufunc or ``numpy.clip`` (``None`` without a NumPy backend)."""
    found = _OPS.get(("elementwise", name))
    if isinstance(found, ElementwiseOp):
        return found
    backend = backend_for(name)
    if backend is None or backend.batch_first:
        return None
    keywords = frozenset({"dtype", "casting"})
    if name == "numpy.clip":
        keywords = frozenset({"a_min", "a_max", "min", "max"})
    op = ElementwiseOp(name, unpatched(name), backend.function, keywords)
    return register_op(op)  # type: ignore[return-value]
