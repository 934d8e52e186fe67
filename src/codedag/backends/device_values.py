"""Values crossing devices: NumPy arrays (and CPU tensors) to device tensors and back.

Rules (docs/migration.md explains the trade-off):

* Arrays ship in their own dtype (uint8 stays uint8: four times fewer bytes than float32) and are
  converted on the device by the backend.
* Wherever a value reaches code that is not migrated it is what the library returns: a NumPy
  array of the same dtype and layout (``OpSpec.output_order``), a NumPy scalar for reductions, a
  PIL image of the expected mode, a tensor on the caller's device for torch functions. User code
  never receives a device tensor where it got an array before.
* On the CPU device a tensor *is* the array (``torch.from_numpy`` shares memory): no copy in
  either direction, and a value is a tensor across consecutive migrated calls for free.
* On another device every array returned to user code is remembered with its device tensor and
  a host snapshot (the pinned buffer of the device-to-host copy). When a later migrated call
  receives that same array object, one ``memcmp`` against the snapshot proves the user did not
  change it and the device tensor is reused: no host-to-device copy. If the bytes differ (the user
  wrote into the array) the array is shipped again. The array the user holds is always an
  ordinary, writable, correct NumPy array.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codedag.devices.torch_devices import cuda_available
from codedag.errors import UnsupportedOperation

_SUPPORTED_KINDS = frozenset("biufc")
CONVERTIBLE: frozenset[str] = frozenset(
    {
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    }
)
"""NumPy dtypes that a tensor holds (torch stores uint16/32/64 but computes little on them)."""


@functools.cache
def accepted_dtypes(names: frozenset[str] | None) -> frozenset[np.dtype]:
    """The dtype objects (native byte order) of dtype names (``None``: every convertible one):
    a membership test is one hash, where ``dtype.name`` is computed in Python on every access."""
    return frozenset(np.dtype(n) for n in (CONVERTIBLE if names is None else names & CONVERTIBLE))


_CONVERTIBLE_DTYPES = accepted_dtypes(None)


def _load_memcmp() -> Any:
    try:  # the C library of this process (Linux, macOS); elsewhere NumPy compares
        memcmp = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):
        return None
    memcmp.restype = ctypes.c_int
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return memcmp


_memcmp = _load_memcmp()


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold identical bytes (``memcmp`` for C-contiguous arrays)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if _memcmp is not None and a.flags.c_contiguous and b.flags.c_contiguous:
        return _memcmp(a.ctypes.data, b.ctypes.data, a.nbytes) == 0
    return bool(np.array_equal(a, b))


class HostBuffers:
    """Reusable host staging buffers (pinned where CUDA is the target), by size class.

    A buffer released after an asynchronous copy carries the CUDA event recorded after that
    copy; it is handed out again only once the event has completed.
    """

    def __init__(self, pinned: bool, max_free_bytes: int = 256 * 2**20) -> None:
        self.pinned = pinned
        self.max_free_bytes = max_free_bytes
        self._free: dict[int, list[tuple[torch.Tensor, Any]]] = {}
        self._free_bytes = 0
        self._lock = threading.Lock()

    def acquire(self, nbytes: int) -> torch.Tensor:
        """A uint8 buffer of at least ``nbytes`` (rounded up to a power of two)."""
        size = 1 << max(12, (max(nbytes, 1) - 1).bit_length())
        with self._lock:
            bucket = self._free.get(size)
            if bucket:
                self._free_bytes -= size
                buffer, event = bucket.pop()
            else:
                buffer, event = None, None
        if buffer is None:
            return torch.empty(size, dtype=torch.uint8, pin_memory=self.pinned)
        if event is not None and not event.query():
            event.synchronize()  # the copy that last read this buffer is still running
        return buffer

    def release(self, buffer: torch.Tensor, event: object = None) -> None:
        """Give a buffer back (dropped when the free pool is full)."""
        size = buffer.numel()
        with self._lock:
            if self._free_bytes + size <= self.max_free_bytes:
                self._free.setdefault(size, []).append((buffer, event))
                self._free_bytes += size


def _view(buffer: torch.Tensor, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    return buffer.numpy()[: count * dtype.itemsize].view(dtype).reshape(shape)


@dataclass
class _Entry:
    ref: weakref.ref[np.ndarray]
    tensor: torch.Tensor
    snapshot: np.ndarray
    buffer: torch.Tensor


class DeviceCache:
    """Returned array -> its device tensor, valid while the array's bytes are unchanged."""

    def __init__(self, buffers: HostBuffers, max_bytes: int = 512 * 2**20) -> None:
        self.buffers = buffers
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.stale = 0

    def put(self, array: np.ndarray, tensor: torch.Tensor, snapshot: np.ndarray, buf: Any) -> None:
        """Remember ``array`` (returned to user code) with its device tensor and snapshot."""
        key = id(array)

        def _dead(_ref: object, key: int = key) -> None:
            self._drop(key, _ref)

        entry = _Entry(weakref.ref(array, _dead), tensor, snapshot, buf)
        with self._lock:
            old = self._entries.pop(key, None)
            self._entries[key] = entry
            self._bytes += snapshot.nbytes
            evicted = [] if old is None else [old]
            if old is not None:
                self._bytes -= old.snapshot.nbytes
            while self._bytes > self.max_bytes and self._entries:
                _key, victim = self._entries.popitem(last=False)
                self._bytes -= victim.snapshot.nbytes
                evicted.append(victim)
        for victim in evicted:
            self.buffers.release(victim.buffer)

    def _drop(self, key: int, ref: object) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.ref is not ref:
                return
            del self._entries[key]
            self._bytes -= entry.snapshot.nbytes
        self.buffers.release(entry.buffer)

    def get(self, array: np.ndarray) -> torch.Tensor | None:
        """The device tensor of ``array`` if it is a remembered, unchanged returned array."""
        with self._lock:
            entry = self._entries.get(id(array))
        if entry is None or entry.ref() is not array:
            return None
        if same_bytes(array, entry.snapshot):
            self.hits += 1
            return entry.tensor
        self.stale += 1
        self._drop(id(array), entry.ref)
        return None

    def __len__(self) -> int:
        return len(self._entries)


class CallValues:
    """What a call's inputs were, to convert its outputs back to the same kinds.

    ``sources`` pairs each tensor that shares an input array's memory with that array (the CPU
    without copies): a result that is one of them, or a view of one, is returned as a copy.
    """

    __slots__ = ("bases", "sources", "staging", "torch_device")

    def __init__(self) -> None:
        self.sources: list[tuple[torch.Tensor, np.ndarray]] = []
        self.torch_device: torch.device | None = None
        self.staging: list[torch.Tensor] = []
        # results' bases brought back once per call, by id (the tensor kept, so no id is reused)
        self.bases: dict[int, tuple[torch.Tensor, np.ndarray]] = {}

    def shares_input(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` uses the memory of one of the call's input arrays (it is one of
        their tensors or a view of one: its first element lies in an input's bytes)."""
        if not self.sources:
            return False
        pointer = tensor.data_ptr()
        for source, array in self.sources:
            start = source.data_ptr()
            if source is tensor or (pointer >= start and pointer < start + _span(array)):
                return True
        return False


def _compact(array: np.ndarray) -> np.ndarray | None:
    """The distinct values of a broadcast view (its stride-0 axes cut to length 1, copied), or
    ``None`` when ``array`` repeats nothing."""
    repeated = [n > 1 and s == 0 for n, s in zip(array.shape, array.strides, strict=True)]
    if not any(repeated):
        return None
    index = tuple(slice(0, 1) if r else slice(None) for r in repeated)
    return np.array(array[index])


def fortran_only(array: np.ndarray) -> bool:
    """Whether ``array`` is Fortran-ordered and not also C-ordered (a 1-d array is both)."""
    return bool(array.flags.f_contiguous and not array.flags.c_contiguous)


def keep_order_axes(
    operands: list[tuple[tuple[int, ...], tuple[int, ...]]], ndim: int, *, ufunc: bool = True
) -> list[int]:
    """The axes, outermost first, of a new array laid out after its operands as NumPy lays out
    order-K results: by decreasing absolute stride, an axis moved only where every operand that
    orders the pair agrees (C order wins conflicts; an axis of length 1 or stride 0 orders
    nothing). The stable insertion sort runs as NumPy's: over the axes innermost first for
    ufuncs (``nditer``), outermost first for ``concatenate`` and ``stack``
    (``PyArray_CreateMultiSortedStridePerm``); with conflicts the two orders can differ.

    Args:
        operands: the (shape, strides) of each operand (any unit), aligned at the last axis
            (fewer axes broadcast).
        ndim: the result's number of axes.
        ufunc: sort as ``nditer`` does (else as concatenation does).
    """
    table = []
    for shape, strides in operands:
        pad = [0] * (ndim - len(shape))
        table.append(pad + [abs(st) if n != 1 else 0 for n, st in zip(shape, strides, strict=True)])
    perm = list(range(ndim))
    if ufunc:
        perm.reverse()
    for i0 in range(1, ndim):
        ax0, ipos = perm[i0], i0
        for i1 in range(i0 - 1, -1, -1):
            ax1 = perm[i1]
            # does ax1 (earlier in the list) belong after ax0?
            votes = [
                (row[ax1] > row[ax0]) if ufunc else (row[ax0] > row[ax1])
                for row in table
                if row[ax0] and row[ax1]
            ]
            if not votes:
                continue  # nothing orders this pair: look further
            if all(votes):
                ipos = i1
            else:
                break
        if ipos != i0:
            perm[ipos + 1 : i0 + 1] = perm[ipos:i0]
            perm[ipos] = ax0
    return perm[::-1] if ufunc else perm


def laid_out(array: np.ndarray, axes: list[int]) -> np.ndarray:
    """``array`` itself when it is contiguous with ``axes`` outermost first (positive strides),
    else a copy laid out so."""
    expected = array.itemsize
    fits = True
    for axis in reversed(axes):
        n = array.shape[axis]
        if n != 1 and array.strides[axis] != expected:
            fits = False
            break
        expected *= n
    if fits or array.size <= 1:
        return array
    inverse = np.argsort(axes)
    out = np.empty([array.shape[a] for a in axes], dtype=array.dtype).transpose(inverse)
    np.copyto(out, array, casting="no")
    return out


def keep_order(result: np.ndarray, inputs: list[np.ndarray]) -> np.ndarray:
    """``result`` laid out as a NumPy ufunc lays out its order-K output after ``inputs``."""
    if result.ndim < 2:
        return result
    operands = [(a.shape, a.strides) for a in inputs if a.ndim]
    return laid_out(result, keep_order_axes(operands, result.ndim))


def _span(array: np.ndarray) -> int:
    """Bytes from an array's first element to the end of its last (strides not negative)."""
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return int(array.nbytes)
    if array.size == 0:
        return 0
    return sum((n - 1) * s for n, s in zip(array.shape, array.strides, strict=True)) + int(
        array.itemsize
    )


_BASE_PER_VIEW = 64
"""Most elements of a base brought back for one element of a view of it (NumPy's nonzero gives
one index array per axis, of at most 64 axes)."""


class ValueConverter:
    """Converts arguments to tensors on ``device`` and results back to library types.

    Args:
        device: where backends run.
        zero_copy: share memory between arrays and tensors (default: when ``device`` is the
            CPU). ``False`` on the CPU exercises the staging and cache path of other devices.
    """

    def __init__(self, device: torch.device | str, zero_copy: bool | None = None) -> None:
        self.device = torch.device(device)
        self.zero_copy = self.device.type == "cpu" if zero_copy is None else zero_copy
        pinned = self.device.type == "cuda" and cuda_available()
        self.buffers = HostBuffers(pinned=pinned)
        self.cache = DeviceCache(self.buffers)

    # -- inputs ------------------------------------------------------------------------------
    def array_to_tensor(self, array: np.ndarray, call: CallValues) -> torch.Tensor:
        """Ship one array (own dtype) to the device, or reuse its cached device tensor.

        A broadcast view (``numpy.broadcast_to``: axes of stride 0) ships only its distinct
        values and is expanded again on the device, never materialized.
        """
        if array.dtype not in _CONVERTIBLE_DTYPES:
            if array.dtype.kind not in _SUPPORTED_KINDS or array.dtype.hasobject:
                raise UnsupportedOperation(
                    f"arrays of dtype {array.dtype} have no torch equivalent"
                )
            if not array.dtype.isnative:
                raise UnsupportedOperation(f"non-native byte order {array.dtype.str}")
        if not array.flags.writeable:
            compact = _compact(array)
            if compact is not None:
                return self.array_to_tensor(compact, call).expand(array.shape)
        if self.zero_copy:
            if not array.flags.writeable:  # from_numpy warns on read-only arrays
                array = np.array(array)
            try:
                tensor = torch.from_numpy(array)
            except ValueError:  # negative strides
                return torch.from_numpy(np.array(array))
            call.sources.append((tensor, array))
            return tensor
        cached = self.cache.get(array)
        if cached is not None:
            return cached
        buffer = self.buffers.acquire(array.nbytes)
        call.staging.append(buffer)
        # A Fortran-ordered array travels as its transpose and keeps its strides on the device:
        # results that follow their input's layout (NumPy's order "K") come back Fortran-ordered.
        fortran = array.ndim > 1 and fortran_only(array)
        source = array.T if fortran else array
        staged = _view(buffer, array.dtype, source.shape)
        np.copyto(staged, source, casting="no")
        host = torch.from_numpy(staged)
        if fortran:
            host = host.permute(*reversed(range(array.ndim)))
        if self.device.type == "cpu":  # a copy, as a real transfer makes: the buffer is reused
            return host.clone()
        return host.to(self.device, non_blocking=self.buffers.pinned)

    def to_device(self, value: object, call: CallValues) -> Any:
        """Convert one argument: arrays and CPU tensors, lists and tuples of arrays; other
        values are returned as they are."""
        if isinstance(value, np.ndarray):
            return self.array_to_tensor(value, call)
        if isinstance(value, torch.Tensor):
            if call.torch_device is None:
                call.torch_device = value.device
            return value.to(self.device, non_blocking=True)
        if isinstance(value, list | tuple) and value and isinstance(value[0], np.ndarray):
            return type(value)(self.to_device(v, call) for v in value)
        return value

    # -- outputs -----------------------------------------------------------------------------
    def tensor_to_array(
        self, tensor: torch.Tensor, order: str, call: CallValues | None = None
    ) -> np.ndarray:
        """Bring a result tensor back as the NumPy array the library would return.

        On the CPU a result that is (a view of) one of the call's own input arrays is copied:
        user code never gets memory the library would not have shared.
        """
        if self.zero_copy and tensor.is_cpu:
            shared = call is not None and call.shares_input(tensor)
            try:
                array = tensor.numpy()
            except RuntimeError:  # requires grad, or a lazy conjugate/negative view
                array = tensor.detach().resolve_conj().resolve_neg().numpy()
            if shared:
                return np.array(array, order="F" if order == "F" else "C", copy=True)
            if order == "C" and not array.flags.c_contiguous:
                array = np.ascontiguousarray(array)
            elif order == "F" and not array.flags.f_contiguous:
                array = np.asfortranarray(array)
            return array
        if order == "K" and call is not None and not tensor.is_contiguous():
            view = self._view_of_base(tensor, call)
            if view is not None:
                return view
        tensor = tensor.detach()
        dtype = np.dtype(str(tensor.dtype).removeprefix("torch."))
        # order K keeps the order of the backend's strides (any permutation of the axes): the
        # tensor travels in that order and the array is its transpose back
        axes = list(range(tensor.dim()))
        if order == "K" and not tensor.is_contiguous():
            sizes, strides = tuple(tensor.shape), tensor.stride()
            axes = sorted(axes, key=lambda d: -abs(strides[d]) if sizes[d] > 1 else 0)
            axes = axes if tensor.permute(axes).is_contiguous() else list(range(tensor.dim()))
        inverse = sorted(range(len(axes)), key=axes.__getitem__)
        contiguous = tensor.permute(axes).contiguous()
        buffer = self.buffers.acquire(contiguous.numel() * dtype.itemsize)
        staged = _view(buffer, dtype, tuple(contiguous.shape))
        torch.from_numpy(staged).copy_(contiguous)  # synchronous device-to-host copy
        if order == "F":
            array = np.array(staged, order="F", copy=True)
        else:
            array = np.array(staged, copy=True).transpose(inverse)
        self.cache.put(array, contiguous.permute(inverse), staged.transpose(inverse), buffer)
        return array

    def _view_of_base(self, tensor: torch.Tensor, call: CallValues) -> np.ndarray | None:
        """A strided view the backend made of a tensor it built (as the columns of
        ``torch.nonzero``), as the same view of that base brought back once per call: results
        keep the backend's strides and share one array, as the zero-copy path's do; ``None`` when
        the base is not contiguous or much larger than the view."""
        base = tensor._base
        if (
            base is None
            or not base.is_contiguous()
            or base.numel() > _BASE_PER_VIEW * max(tensor.numel(), 1)
            or any(st < 0 for st in tensor.stride())
        ):
            return None
        known = call.bases.get(id(base))
        if known is None or known[0] is not base:
            known = (base, self.tensor_to_array(base, "C", call))
            call.bases[id(base)] = known
        array = known[1]
        start = tensor.storage_offset() - base.storage_offset()
        return np.lib.stride_tricks.as_strided(
            array.reshape(-1)[start:],
            shape=tuple(tensor.shape),
            strides=tuple(st * array.itemsize for st in tensor.stride()),
        )

    def finish(self, call: CallValues) -> None:
        """Release the staging buffers of a call; on CUDA, behind an event after its copies."""
        if not call.staging:
            return
        event = None
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
        for buffer in call.staging:
            self.buffers.release(buffer, event)
        call.staging.clear()


def numpy_scalar(array: np.ndarray) -> Any:
    """A 0-d array as the NumPy scalar that NumPy reductions return."""
    return array[()]
