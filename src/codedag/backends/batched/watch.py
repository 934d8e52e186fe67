"""Delivered tensors that notice where the training loop moves them.

:func:`watch` returns a host tensor as a :class:`WatchedTensor`: a ``torch.Tensor`` subclass
that behaves as the tensor itself, every result of an operation on it a plain tensor, and that
calls back with the device a ``.to(device)`` / ``.to(other)`` / ``.cuda()`` call moved it to.
Batched execution delivers its first batches this way (``deliver="auto"``) to learn whether the
training step consumes them on the device the chain runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Moved = Callable[[torch.device], None]


class WatchedTensor(torch.Tensor):
    """A delivered host tensor reporting the device it is moved to (see the module docstring)."""

    _codedag_moved: Moved | None = None

    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **kwargs)
            plain = _plain(result)
        if args and isinstance(args[0], WatchedTensor) and isinstance(plain, torch.Tensor):
            callback = args[0]._codedag_moved
            if callback is not None and _names_a_device(func, args[1:], kwargs):
                callback(plain.device)
        return plain


def _plain(value: Any) -> Any:
    """``value`` with every watched tensor in it a plain one (called with subclasses disabled)."""
    if isinstance(value, WatchedTensor):
        return value.as_subclass(torch.Tensor)
    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value)
    return value


def _names_a_device(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the call moves the tensor to a device (not only a dtype or memory format)."""
    if func is torch.Tensor.cuda:
        return True
    if func is not torch.Tensor.to:
        return False
    if kwargs.get("device") is not None:
        return True
    return bool(args) and isinstance(args[0], str | int | torch.device | torch.Tensor)


def watch(tensor: torch.Tensor, moved: Moved) -> torch.Tensor:
    """``tensor`` as a :class:`WatchedTensor` calling ``moved(device)`` when it is moved."""
    with torch._C.DisableTorchFunctionSubclass():
        watched = tensor.as_subclass(WatchedTensor)
    watched._codedag_moved = moved
    return watched
