"""Counting what a piece of torch code asks of a device: aten ops and host synchronizations.

Every aten op is at least one kernel launch on a GPU, and every op that reads a tensor's values
on the host (``item()``, ``bool(t)``, ``nonzero``, a boolean mask index, ``tolist()``, a copy to
the host) stalls the device's queue until it has caught up. :class:`LaunchCounter` counts both
while its block runs, on any device, the CPU included (where nothing stalls, but the same code
would on a GPU): aten ops through a ``TorchDispatchMode``, host reads that never reach the
dispatcher on the CPU (``tolist()``, ``numpy()``) through a ``TorchFunctionMode``.

Nothing is installed at import; a counter is active only inside its ``with`` block.
"""

from __future__ import annotations

from collections import Counter
from types import TracebackType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = frozenset(
    {
        "aten._local_scalar_dense",  # item(), bool(), int(), float() of a tensor
        "aten.is_nonzero",
        "aten.nonzero",
        "aten.masked_select",
        "aten.equal",
        "aten._unique",
        "aten._unique2",
        "aten.unique_dim",
        "aten.unique_consecutive",
        "aten.unique_dim_consecutive",
    }
)
"""aten ops whose result's size or value must be known on the host: a data-dependent sync."""
_MASK_INDEXED = frozenset(
    {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}
)
"""Ops that count as a sync when an index is a boolean mask (``x[mask]``: a ``nonzero`` inside)."""
_COPIES = frozenset({"aten._to_copy", "aten.copy_"})
_HOST_READS = frozenset({"tolist", "numpy"})
"""Tensor methods that read values on the host without an aten op on the CPU."""


def _name(func: Any) -> str:
    return f"aten.{func.overloadpacket.__name__}" if hasattr(func, "overloadpacket") else str(func)


def _has_mask(indices: Any) -> bool:
    items = indices if isinstance(indices, list | tuple) else [indices]
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in items)


def _to_host(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> bool:
    """A copy of a device tensor to the host."""
    if name == "aten._to_copy":
        src = args[0] if args else None
        return (
            isinstance(src, torch.Tensor)
            and src.device.type != "cpu"
            and isinstance(out, torch.Tensor)
            and out.device.type == "cpu"
        )
    dst, src = (*args, None, None)[:2]
    return (
        isinstance(dst, torch.Tensor)
        and isinstance(src, torch.Tensor)
        and dst.device.type == "cpu"
        and src.device.type != "cpu"
    )


class _Owned:
    """A torch mode that counts into its :class:`LaunchCounter`."""

    def __init__(self, owner: LaunchCounter) -> None:
        super().__init__()
        self.owner = owner


class _Dispatch(_Owned, TorchDispatchMode):
    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = _name(func)
        owner = self.owner
        owner.ops[name] += 1
        if (
            name in SYNC_OPS
            or (name in _MASK_INDEXED and len(args) > 1 and _has_mask(args[1]))
            or (name in _COPIES and _to_host(name, args, kwargs, out))
        ):
            owner.syncs[name] += 1
        return out


class _Function(_Owned, TorchFunctionMode):
    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        name = getattr(func, "__name__", "")
        if name in _HOST_READS and args and isinstance(args[0], torch.Tensor):
            self.owner.syncs[f"Tensor.{name}"] += 1
        return func(*args, **(kwargs or {}))


class LaunchCounter:
    """Counts aten ops (``ops``) and data-dependent host syncs (``syncs``) by name in a block.

    Example::

        with LaunchCounter() as counted:
            executor.run(record)
        counted.total_ops, counted.total_syncs
    """

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.syncs: Counter[str] = Counter()
        self._modes: list[Any] = []

    @property
    def total_ops(self) -> int:
        """aten ops run in the block."""
        return sum(self.ops.values())

    @property
    def total_syncs(self) -> int:
        """Data-dependent host synchronizations in the block."""
        return sum(self.syncs.values())

    def __enter__(self) -> LaunchCounter:
        self._modes = [_Function(self), _Dispatch(self)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(kind, error, trace)
        self._modes = []
