"""Host->device copies of constants inside a captured segment, staged on the device first.

Backends make small constants where they run (``torch.tensor(..., device=dev)``, a table's
``.to(dev)``): a copy from pageable host memory, which synchronizes and cannot be captured in a
CUDA graph. Inside a segment (:mod:`.segments`) everything such a copy reads on the host comes
from the signature (the static arguments, shapes and per-batch constants; per-sample values
arrive as device tensors, and a read back to the host is refused before capturing), so the
copies are the same on every run of one signature. :class:`Staging` is a torch function mode: while ``recording`` (the
warm-up, eager) it keeps each host->device copy's source fingerprint and a device copy of its
result; while capturing it answers the same copies, in the same order, with a device-side clone
of the kept result (a copy kernel the graph replays), after checking each source is the one
recorded (else :class:`StagingMismatch`: the capture is refused, never replayed wrong).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

_FACTORIES = (torch.tensor, torch.as_tensor)
_MOVES = (torch.Tensor.to, torch.Tensor.cuda)


class StagingMismatch(RuntimeError):
    """A host->device copy while capturing is not the one recorded at the same place."""


class Staging(TorchFunctionMode):
    """Records (``recording=True``) or answers (``False``) host->device copies to ``device``'s
    type (module docstring)."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type
        self.recording = True
        self.kept: list[tuple[Any, torch.Tensor]] = []
        self._next = 0

    def replaying(self) -> Staging:
        """The same copies answered from what was recorded, from the first one."""
        self.recording = False
        self._next = 0
        return self

    def finished(self) -> None:
        """Raises :class:`StagingMismatch` unless every recorded copy was answered."""
        if self._next != len(self.kept):
            raise StagingMismatch(f"{self._next} host->device copies, {len(self.kept)} recorded")

    @property
    def copies(self) -> int:
        """Host->device copies recorded."""
        return len(self.kept)

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        source = self._source(func, args, kwargs)
        if source is None:
            return func(*args, **kwargs)
        fingerprint = (
            getattr(func, "__name__", repr(func)),
            _describe(source),
            _rest(args, kwargs),
        )
        if self.recording:
            out = func(*args, **kwargs)
            if func is torch.Tensor.copy_:
                kept = source.to(args[0].device)  # the source as it is; copy_ converts it
            else:
                kept = out.detach().clone()
            self.kept.append((fingerprint, kept))
            return out
        if self._next >= len(self.kept) or self.kept[self._next][0] != fingerprint:
            raise StagingMismatch(f"host->device copy {self._next} differs from the recorded one")
        kept = self.kept[self._next][1]
        self._next += 1
        if func is torch.Tensor.copy_:
            return args[0].copy_(kept)
        return kept.clone()

    def _source(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The host value a call copies to the device, or ``None`` (not such a copy)."""
        if func in _FACTORIES:
            data = args[0] if args else kwargs.get("data")
            if isinstance(data, torch.Tensor) and data.device.type != "cpu":
                return None
            return data if self._on_device(kwargs.get("device")) else None
        if not args or not isinstance(args[0], torch.Tensor):
            return None
        if func in _MOVES and args[0].device.type == "cpu":
            if func is torch.Tensor.cuda and self.device_type == "cuda":
                return args[0]
            targets = (*args[1:], *kwargs.values())
            return args[0] if any(self._on_device(t) for t in targets) else None
        src = args[1] if func is torch.Tensor.copy_ and len(args) > 1 else None
        if isinstance(src, torch.Tensor) and src.device.type == "cpu":
            return src if args[0].device.type == self.device_type else None
        return None

    def _on_device(self, target: object) -> bool:
        if isinstance(target, torch.Tensor):
            return target.device.type == self.device_type
        if isinstance(target, torch.device):
            return target.type == self.device_type
        if not isinstance(target, str):
            return False
        try:
            return torch.device(target).type == self.device_type
        except RuntimeError:  # not a device name
            return False


def _describe(value: object) -> Any:
    """A host value's fingerprint (its bytes); a device tensor's shape and dtype only."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            return ("device", str(value.dtype), tuple(value.shape), str(value.device))
        flat = value.detach().resolve_conj().resolve_neg().reshape(-1).contiguous()
        data = flat.view(torch.uint8).numpy().tobytes()
        return ("cpu", str(value.dtype), tuple(value.shape), data)
    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes())
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_describe(v) for v in value))
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.tobytes())
    return repr(value)


def _rest(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call's other arguments (devices, dtypes, flags)."""
    return (
        tuple(_describe(a) for a in args[1:]),
        tuple(sorted((k, _describe(v)) for k, v in kwargs.items() if k != "data")),
    )
