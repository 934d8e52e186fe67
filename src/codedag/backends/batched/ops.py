"""What a deferred value can record, and how each recorded operation runs on a batch.

An :class:`Op` is one operation of a sample's chain: a library call with a torch backend
(``cv2.resize``), a NumPy elementwise function or operator (``img / 255.0`` is ``numpy.divide``),
a view or cast (:mod:`.views`), or a conversion to torch. Each op answers three questions:

* :meth:`Op.original`: the per-sample CPU function, the reference itself (forcing replays it);
* :meth:`Op.infer`: the result's shape and dtype, computed without running any work (views on a
  zero-stride dummy array, NumPy's own promotion on 0-d probes, or the backend on torch's ``meta``
  device). Recording asks :meth:`Op.meta`, which computes it once per *signature* (the inputs'
  shapes and dtypes and the static arguments, :meth:`Op.signature`) and remembers the answer, a
  refusal included: recording a step costs a dictionary look-up, not an inference;
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
from codedag.backends.ops.numpy._common import NUMPY_OF_TORCH, torch_dtype
from codedag.errors import UnsupportedOperation

DATA = "data"
PER_SAMPLE = "per_sample"
STATIC = "static"

SMALL_BYTES = 4096
_MAX_ZERO_ELEMENTS = 1 << 24  # zeros a shape rule may run on when meta tensors cannot
"""Concrete arrays up to this size are static arguments (compared by value); larger ones are
per-sample data shipped with the batch."""


class Meta:
    """Shape and dtype of one sample's value (NumPy dtype for arrays, torch dtype for tensors).

    Immutable and hashed once (signatures and group keys hash it on every recorded step).
    """

    __slots__ = ("_hash", "dtype", "kind", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: Any, kind: str = "array") -> None:
        self.shape = tuple(shape)
        self.dtype = dtype if kind == "tensor" or isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.kind = kind
        self._hash = hash((self.shape, self.dtype, kind))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Meta:
            return NotImplemented
        return (
            self._hash == other._hash
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.kind == other.kind
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (Meta, (self.shape, self.dtype, self.kind))  # the hash is made anew in each process

    def __repr__(self) -> str:
        return f"Meta(shape={self.shape}, dtype={self.dtype}, kind={self.kind!r})"

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def torch_dtype(self) -> torch.dtype:
        """The dtype as torch names it."""
        return self.dtype if self.kind == "tensor" else torch_dtype(self.dtype)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize if self.kind == "tensor" else np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of one sample's value."""
        return math.prod(self.shape) * self.itemsize


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
    weak_scalars: bool = False
    """Whether Python scalars enter the result only by their kind (NumPy's NEP 50 promotion):
    their values are then left out of the signature, except where an ``int`` decides an
    overflow."""
    checks_samples: bool = False
    """Whether :meth:`sample_refusal` looks at a call's values (recording asks it only then);
    true for a subclass that overrides it, unless the subclass says otherwise."""
    _metas: dict[Any, Meta | str] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "checks_samples" not in cls.__dict__:
            cls.checks_samples = cls.sample_refusal is not Op.sample_refusal

    def key(self) -> tuple[Any, ...]:
        """What identifies this op in another process (see :func:`op_from_key`)."""
        raise NotImplementedError

    def original(self, *args: Any, **kwargs: Any) -> Any:
        """The per-sample CPU function (the library's own)."""
        raise NotImplementedError

    def slot_kind(self, key: int | str, value: object) -> str:
        """``DATA``, ``PER_SAMPLE`` or ``STATIC`` for the argument at ``key``: deferred values
        and the concrete values of :meth:`concrete_data` are data."""
        return DATA if isinstance(value, Meta) or self.concrete_data(key, value) else STATIC

    def concrete_data(self, key: int | str, value: Any) -> bool:
        """Whether a concrete argument is data (stacked per sample), not static: none here."""
        return False

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        """Result shape and dtype; lazy inputs arrive as :class:`Meta`.

        Raises:
            UnsupportedOperation: this call cannot be recorded (it then runs eagerly).
        """
        raise NotImplementedError

    def signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What :meth:`infer`'s answer depends on: the inputs' :class:`Meta`, static arguments
        by value (arrays by shape and dtype), ``None`` when an argument cannot be compared."""
        weak = self.weak_scalars
        try:
            key = tuple([v if type(v) is Meta else signature_of(v, weak) for v in args])
            if kwargs:
                key = (key, tuple([(k, signature_of(v, weak)) for k, v in kwargs.items()]))
        except TypeError:
            return None
        return key

    def meta(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        """:meth:`infer`, computed once per :meth:`signature` (refusals are remembered too).

        Raises:
            UnsupportedOperation: as :meth:`infer`.
        """
        key = self.signature(args, kwargs)
        cache = self._metas
        if cache is None:
            cache = self._metas = {}
        try:
            found = cache.get(key) if key is not None else None
        except TypeError:  # an unhashable argument: infer afresh
            key = None
            found = None
        if found is None:
            try:
                found = self.infer(args, kwargs)
            except UnsupportedOperation as e:
                found = str(e) or self.name
            if key is not None:
                if len(cache) >= _MAX_SIGNATURES:
                    cache.clear()
                cache[key] = found
        if type(found) is str:
            raise UnsupportedOperation(found)
        return found  # type: ignore[return-value]

    def forget(self) -> None:
        """Drop the remembered signatures (tests; a backend registered anew)."""
        self._metas = None

    def sample_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """Why this call's own values (not its signature) refuse it: checked on every call
        (``None`` here; ops with per-sample parameters look at them)."""
        return None

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        """The operation for ``n`` samples; data slots arrive as :class:`Batch`."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        return (op_from_key, (self.key(),))

    def __repr__(self) -> str:
        return f"<op {self.name}>"


# -- library calls with a batch-first backend ------------------------------------------------


class FunctionOp(Op):
    """An op standing for one library function: its name, the function it replays, and the key
    ``(family, name)`` another process rebuilds it from."""

    family = ""

    def __init__(self, name: str, original: Callable[..., Any]) -> None:
        self.name = name
        self._original = original

    def key(self) -> tuple[Any, ...]:
        return (self.family, self.name)

    def original(self, *args: Any, **kwargs: Any) -> Any:
        return self._original(*args, **kwargs)


class LibraryOp(FunctionOp):
    """A library function (cv2, librosa, PIL) run through its batch-first torch backend."""

    family = "library"

    def __init__(self, name: str, original: Callable[..., Any], backend: Backend) -> None:
        super().__init__(name, original)
        self.backend = backend
        self.checks_samples = bool(backend.per_sample) and backend.refuse is not None
        self._per_sample_at = frozenset(
            i for i, p in enumerate(backend.positional) if p in backend.per_sample
        )

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
        reason = self._declared_refusal(args, kwargs)
        if reason is not None:
            raise UnsupportedOperation(f"{self.name}: {reason}")
        try:
            out = self._described(args, kwargs, torch.device("meta"))
        except UnsupportedOperation:
            raise
        except Exception:
            # the backend reads data on some path (e.g. a fast path choosing on the values):
            # run it once on zeros of the same shapes on the CPU (once per signature: meta())
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
        return Meta(tuple(out.shape[1:]), numpy_dtype(out.dtype))

    def signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """As :meth:`Op.signature`, per-sample parameters by shape and kind only (the backend
        takes one per sample: their values cannot change the result's shape)."""
        per_sample = self.backend.per_sample
        if not per_sample:
            return super().signature(args, kwargs)
        at = self._per_sample_at  # the positions of per-sample parameters
        try:
            key = tuple(
                [
                    v if type(v) is Meta else _per_sample_key(v) if i in at else signature_of(v)
                    for i, v in enumerate(args)
                ]
            )
            if kwargs:
                key = (
                    key,
                    tuple(
                        [
                            (k, _per_sample_key(v) if k in per_sample else signature_of(v))
                            for k, v in kwargs.items()
                        ]
                    ),
                )
        except TypeError:
            return None
        return key

    def sample_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The declared refusal on this call's per-sample parameters (a warp's matrix: the
        signature knows only their shapes), deferred inputs as zero-stride stand-ins."""
        if not self.backend.per_sample or self.backend.refuse is None:
            return None
        try:
            concrete = tuple([_stand_in(v) if type(v) is Meta else v for v in args])
            concrete_kw = {k: _stand_in(v) for k, v in kwargs.items()} if kwargs else kwargs
            return self.backend.refusal(concrete, concrete_kw)
        except Exception:  # a check that cannot look at stand-ins: the signature decided
            return None

    def refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The op's declared refusal of a call on concrete arguments (an entry's data: what
        only values tell, such as NaN and inf, is checked here; later steps' deferred inputs
        are checked by shape and dtype only)."""
        return self.backend.refusal(args, kwargs)

    def _declared_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The op's declared refusal (the per-call migration's) on zeros of the deferred
        arguments' shapes and dtypes: a call the library refuses must not be recorded."""
        if self.backend.refuse is None:
            return None
        try:
            concrete = tuple(_zeros_like(v) for v in args)
            concrete_kw = {k: _zeros_like(v) for k, v in kwargs.items()}
        except UnsupportedOperation:
            return None  # no zeros to check with (a tensor, or too large): the backend decides
        try:
            return self.backend.refusal(concrete, concrete_kw)
        except Exception as e:  # a check that cannot look at zeros: the backend decides
            return None if isinstance(e, ValueError | TypeError) else f"{type(e).__name__}"

    def _described(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], device: torch.device
    ) -> Any:
        """The backend's result for one sample of placeholder data on ``device`` (``meta``:
        shapes only; the CPU: zeros, for backends that read values)."""
        call_args = [self._placeholder(k, v, device) for k, v in enumerate(args)]
        call_kwargs = {k: self._placeholder(k, v, device) for k, v in kwargs.items()}
        return self.backend.call(call_args, call_kwargs, device)

    def _placeholder(self, key: int | str, value: object, device: torch.device) -> Any:
        if self.slot_kind(key, value) != DATA:
            return value
        meta = value if isinstance(value, Meta) else meta_of(value)
        shape = (1, *self._shape(meta.shape))
        if device.type == "meta":
            return torch.empty(shape, dtype=meta.torch_dtype, device=device)
        if math.prod(shape) > _MAX_ZERO_ELEMENTS:
            raise UnsupportedOperation(f"{self.name}: no shape rule for {meta.shape}")
        return torch.zeros(shape, dtype=meta.torch_dtype, device=device)

    def _shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A sample's shape as the backend takes it (cv2's ``(H, W, 1)`` is ``(H, W)``)."""
        if self.backend.squeeze_channel and len(shape) == 3 and shape[2] == 1:
            return shape[:2]
        return shape

    def _data(self, batch: Batch, n: int) -> torch.Tensor:
        tensor = batch.expanded(n)
        shape = self._shape(batch.meta.shape)
        return tensor if len(shape) == batch.meta.ndim else tensor.reshape(n, *shape)

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        call_args = [self._data(a, n) if isinstance(a, Batch) else a for a in args]
        call_kwargs = {
            k: (self._data(v, n) if isinstance(v, Batch) else v) for k, v in kwargs.items()
        }
        out = self.backend.call(call_args, call_kwargs, device)
        if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != n:
            raise UnsupportedOperation(f"{self.name}: backend returned {type(out).__name__}")
        return out


# -- NumPy elementwise functions -------------------------------------------------------------


class ElementwiseOp(FunctionOp):
    """A NumPy ufunc (operators included) or ``clip``, run through the NumPy torch backend.

    NumPy's backends follow NumPy's promotion (NEP 50) and broadcasting; the batch axis is one more
    leading axis, so every per-sample operand is aligned to the result's rank first.
    """

    family = "elementwise"
    weak_scalars = True

    def __init__(
        self,
        name: str,
        original: Callable[..., Any],
        backend: Callable[..., Any],
        keywords: frozenset[str] = frozenset({"dtype", "casting"}),
    ) -> None:
        super().__init__(name, original)
        self.backend = backend
        self.keywords = keywords

    def concrete_data(self, key: int | str, value: Any) -> bool:
        """Positional arrays larger than ``SMALL_BYTES``."""
        return isinstance(key, int) and is_array(value) and value.nbytes > SMALL_BYTES

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


def _on(value: object, device: torch.device) -> Any:
    """A small static array as a tensor on ``device`` (NumPy backends take tensors or scalars)."""
    if isinstance(value, np.ndarray):
        return torch.as_tensor(np.ascontiguousarray(value)).to(device)
    return value


# -- helpers -------------------------------------------------------------------------------------


def is_array(value: object) -> bool:
    """A NumPy array or a torch tensor."""
    return isinstance(value, np.ndarray | torch.Tensor)


def meta_of(value: object) -> Meta:
    """The :class:`Meta` of a concrete array or tensor."""
    if isinstance(value, torch.Tensor):
        return Meta(tuple(value.shape), value.dtype, "tensor")
    array = np.asarray(value)
    return Meta(tuple(array.shape), array.dtype, "array")


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype.

    Raises:
        UnsupportedOperation: NumPy has no such dtype (bfloat16).
    """
    try:
        return NUMPY_OF_TORCH[dtype]
    except KeyError:
        raise UnsupportedOperation(f"{dtype} has no NumPy equivalent") from None


_MAX_SIGNATURES = 4096
"""Signatures remembered per op; past that the memory starts afresh (a pipeline has a few)."""

_INT_RANGES = tuple(
    (int(np.iinfo(t).min), int(np.iinfo(t).max))
    for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)
)


def _int_class(value: int) -> tuple[bool, ...]:
    """Which integer dtypes hold ``value``: all NEP 50 decides with a Python ``int``."""
    found = _INT_CLASSES.get(value)
    if found is None:
        found = tuple([low <= value <= high for low, high in _INT_RANGES])
        if len(_INT_CLASSES) >= _MAX_SIGNATURES:
            _INT_CLASSES.clear()
        _INT_CLASSES[value] = found
    return found


_INT_CLASSES: dict[int, tuple[bool, ...]] = {}
_FLAT = frozenset({int, float, bool, str, type(None)})
"""Item types whose equality implies equal signatures once the types are equal too (a flat
tuple's signature is remembered by its items and their types: ``1 == 1.0 == True``)."""
_FLAT_SIGNATURES: dict[Any, Any] = {}


def signature_of(value: Any, weak_scalars: bool = False) -> Any:
    """A hashable stand-in for one argument in an op's signature (see :meth:`Op.signature`).

    Hashing the result raises ``TypeError`` for a value that cannot be compared (the signature
    is then unknown).
    """
    kind = type(value)
    if kind is Meta:
        return value
    if kind is np.ndarray:  # a small static array (a mean, a matrix): by shape and dtype
        return ("array", value.shape, value.dtype.str)
    if kind in _BY_VALUE:
        return (kind, value)
    if kind is float or kind is complex:
        return kind if weak_scalars else (kind, value)
    if kind is int:
        return ("int", _int_class(value)) if weak_scalars else (kind, value)
    if kind is tuple:  # sizes, axes: remembered (a recorded step's static arguments)
        types = tuple(map(type, value))
        if _FLAT.issuperset(types):
            key = (value, types, weak_scalars)
            found = _FLAT_SIGNATURES.get(key)
            if found is None:
                found = (kind, tuple([signature_of(v, weak_scalars) for v in value]))
                if len(_FLAT_SIGNATURES) >= _MAX_SIGNATURES:
                    _FLAT_SIGNATURES.clear()
                _FLAT_SIGNATURES[key] = found
            return found
    if kind is tuple or kind is list:
        return (kind, tuple([signature_of(v, weak_scalars) for v in value]))
    if kind is slice:
        return (slice, value.start, value.stop, value.step)
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.dtype.str)
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype)
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str) if weak_scalars else ("scalar", value.dtype.str, value)
    return (kind, value)


_BY_VALUE = frozenset({bool, str, bytes, type(None), type(Ellipsis)})


def _stand_in(value: Any) -> Any:
    """A deferred array as a read-only zero-stride array of its shape and dtype (no memory;
    one per shape and dtype, made once)."""
    if type(value) is not Meta:
        return value
    found = _STAND_INS.get(value)
    if found is None:
        if value.kind != "array":
            raise UnsupportedOperation("no stand-in")
        found = np.broadcast_to(np.zeros((), dtype=value.dtype), value.shape)  # read-only
        if len(_STAND_INS) >= _MAX_SIGNATURES:
            _STAND_INS.clear()
        _STAND_INS[value] = found
    return found


_STAND_INS: dict[Meta, np.ndarray] = {}


def _zeros_like(value: object) -> Any:
    """A deferred array's stand-in for a declared check: zeros of its shape and dtype."""
    if not isinstance(value, Meta):
        return value
    if value.kind != "array" or math.prod(value.shape) > _MAX_ZERO_ELEMENTS:
        raise UnsupportedOperation("no stand-in")
    return np.zeros(value.shape, dtype=value.dtype)


def _per_sample_key(value: Any) -> Any:
    if isinstance(value, Meta):
        return value
    if is_array(value):
        return ("per_sample", tuple(value.shape), value.dtype)
    return ("per_sample", type(value), np.shape(value))


# -- lookup by key (records travel between processes with their ops named, not pickled) -------

_OPS: dict[tuple[Any, ...], Op] = {}
_OPS_LOCK = threading.Lock()


def registered_ops() -> dict[tuple[Any, ...], Op]:
    """The ops of this process by key (read without the lock: look-ups on the recording path)."""
    return _OPS


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
