"""The deferred torch tensor: what ``torch.from_numpy`` of a deferred array returns.

A :class:`LazyTensor` records the torch functions, tensor methods and operators of :mod:`.views`;
``shape``, ``dtype``, ``device``, ``size()``, ``dim()`` and ``numel()`` are answered without
computing. The rest forces it (:mod:`.recorder`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import codedag.backends.batched.recorder as _recorder
import codedag.backends.batched.views as _views
from codedag.backends.batched.recorder import Lazy, call


class LazyTensor(Lazy):
    """A deferred torch tensor (after ``torch.from_numpy`` of a deferred array)."""

    __slots__ = ()

    @property
    def shape(self) -> torch.Size:
        """The shape (no computation)."""
        return torch.Size(self._node.meta.shape)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype (no computation)."""
        return self._node.meta.dtype

    @property
    def device(self) -> torch.device:
        """Deferred tensors live on the CPU, as the per-sample code made them."""
        return torch.device("cpu")

    @property
    def is_cuda(self) -> bool:
        """Always False (deferred tensors are CPU tensors)."""
        return False

    @property
    def requires_grad(self) -> bool:
        """Always False."""
        return False

    def size(self, dim: int | None = None) -> Any:
        """``Tensor.size`` (no computation)."""
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        """``Tensor.dim`` (no computation)."""
        return self._node.meta.ndim

    def numel(self) -> int:
        """``Tensor.numel`` (no computation)."""
        return int(np.prod(self._node.meta.shape, dtype=np.int64))

    def element_size(self) -> int:
        """``Tensor.element_size`` (no computation)."""
        return torch.empty((), dtype=self.dtype).element_size()

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.stack:
            axis = args[1] if len(args) > 1 else kwargs.get("dim", 0)
            return _recorder._stacked(
                args[0] if args else kwargs.get("tensors"), axis, func, args, kwargs
            )
        op = _views.torch_function(func)
        if op is None:
            name = getattr(func, "__name__", "torch function")
            return _recorder._forced_call(func, args, kwargs, "unsupported", f"torch.{name}")
        return call(op, func, args, kwargs, op.name)

    def __getattr__(self, name: str) -> Any:
        op = None if name.startswith("__") else _views.tensor_method(name)
        if op is None:
            return super().__getattr__(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            return call(op, op.function, (self, *args), kwargs, f".{name}()")

        return method

    def __getitem__(self, key: object) -> Any:
        return self._force(
            "data_dependent" if _dynamic(key) else "unsupported", "t[...]"
        ).__getitem__(key)

    def __array_wrap__(self, *args: Any, **kwargs: Any) -> Any:
        """What NumPy makes of a result computed from this tensor: torch's answer (a tensor; a
        bool array becomes uint8), as for the tensor itself (forces)."""
        return self._force("conversion", "__array_wrap__").__array_wrap__(*args, **kwargs)

    def numpy(self) -> np.ndarray:
        """Forces."""
        return self._force("conversion", ".numpy()").numpy()

    def tolist(self) -> Any:
        """Forces."""
        return self._force("number", ".tolist()").tolist()

    def item(self) -> Any:
        """Forces."""
        return self._force("number", ".item()").item()


def _dynamic(key: object) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(i, Lazy | torch.Tensor | np.ndarray | list) for i in items)


def _install_tensor_operators() -> None:
    for name in _views.TORCH_OPERATORS:
        # what runs where the op is not recorded: the tensor's own operator (NotImplemented for
        # an operand it does not take, as `t - ndarray` leaves to NumPy; its own errors)
        own = getattr(torch.Tensor, name)

        def operator_method(self: object, *others: Any, name: str = name, own: Any = own) -> Any:
            op = _views.torch_operator(name)
            assert op is not None
            return call(op, own, (self, *others), {}, name)

        setattr(LazyTensor, name, operator_method)
    for short in ("add", "sub", "mul", "truediv"):

        def forward(self: Any, other: Any, short: str = short) -> Any:
            return getattr(self, f"__{short}__")(other)

        setattr(LazyTensor, f"__i{short}__", _recorder.recording_inplace(short, forward))
    LazyTensor.__hash__ = None  # type: ignore[assignment]


_install_tensor_operators()
_recorder.KINDS["tensor"] = LazyTensor
