"""Torch backends of ``numpy.fft`` and of the legacy ``numpy.random`` draws.

FFT: ``torch.fft`` with NumPy's ``n``/``s``, ``axis``/``axes`` and ``norm`` ("backward", "ortho",
"forward"); the output dtype is NumPy's (NumPy 2 keeps float32 input in complex64, integers give
complex128), asked from NumPy on a tiny probe.

Random draws -- honest semantics: torch's generators (Philox on CUDA, MT19937 with another output
transform on the CPU) cannot reproduce NumPy's stream. Each call therefore draws one 63-bit seed
from NumPy's global ``RandomState`` (``numpy.random.randint``, which advances that state exactly
once) and seeds a fresh ``torch.Generator`` on the target device with it. Results are
distributionally equivalent to NumPy's (same distribution, shape, dtype and range), reproducible
under ``numpy.random.seed(s)``, and never bit-identical to NumPy's. A draw of a single scalar
(``size=None``) raises UnsupportedOperation: NumPy's own draw is cheaper than a device launch and
keeps the exact stream. Draws with no array argument run on ``device`` (keyword-only, default the
CPU), which the migration wrapper fills in with the call's planned device. ``shuffle`` permutes its
tensor in place and returns None, as NumPy does: the caller must copy the tensor back into the
user's array unless it shares memory with it (``torch.from_numpy`` on the CPU does).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.ops._npcommon import (
    check_computable,
    numpy_dtype,
    require_default,
    shape_tuple,
    torch_dtype,
)

_NORMS = (None, "backward", "ortho", "forward")


@functools.lru_cache(maxsize=256)
def _fft_dtype(name: str, dtype: np.dtype) -> np.dtype:
    fn = getattr(np.fft, name)
    probe = np.ones((4, 4), dtype=dtype)
    return np.asarray(fn(probe)).dtype


def _fft_input(a: Any, name: str, norm: str | None, out: Any) -> tuple[torch.Tensor, torch.dtype]:
    if not isinstance(a, torch.Tensor):
        raise UnsupportedOperation(f"received {type(a).__name__}; expected a tensor")
    check_computable(a)
    require_default("out", out, None)
    if norm not in _NORMS:
        raise UnsupportedOperation(f"norm={norm!r}; expected one of {_NORMS}")
    res = torch_dtype(_fft_dtype(name, numpy_dtype(a)))
    real_res = {torch.complex64: torch.float32, torch.complex128: torch.float64}
    if name.startswith("irfft"):
        work = {torch.float32: torch.complex64, torch.float64: torch.complex128}[res]
    else:
        work = real_res[res] if name.startswith("rfft") else res
    if name.startswith("rfft") and a.dtype.is_complex:
        raise UnsupportedOperation("rfft of complex input discards the imaginary part in NumPy")
    return a.to(work), res


def _fft1(name: str) -> Callable[..., torch.Tensor]:
    torch_fn = getattr(torch.fft, name)

    def backend(
        a: torch.Tensor,
        n: int | None = None,
        axis: int = -1,
        norm: str | None = None,
        out: Any = None,
    ) -> torch.Tensor:
        x, res = _fft_input(a, name, norm, out)
        return torch_fn(x, n=n, dim=axis, norm=norm).to(res)

    backend.__name__ = name
    backend.__doc__ = f"``numpy.fft.{name}``."
    return backend


def _fftn(name: str, default_axes: Sequence[int] | None) -> Callable[..., torch.Tensor]:
    torch_fn = getattr(torch.fft, name)

    def backend(
        a: torch.Tensor,
        s: Sequence[int] | None = None,
        axes: Sequence[int] | None = default_axes,
        norm: str | None = None,
        out: Any = None,
    ) -> torch.Tensor:
        x, res = _fft_input(a, name, norm, out)
        dims = tuple(axes) if axes is not None else None
        if s is not None and dims is None:
            dims = tuple(range(-len(s), 0))
        return torch_fn(x, s=s, dim=dims, norm=norm).to(res)

    backend.__name__ = name
    backend.__doc__ = f"``numpy.fft.{name}``."
    return backend


def fftshift(x: torch.Tensor, axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.fft.fftshift``."""
    check_computable(x)
    return torch.fft.fftshift(x, dim=axes)


def ifftshift(x: torch.Tensor, axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.fft.ifftshift``."""
    check_computable(x)
    return torch.fft.ifftshift(x, dim=axes)


def _generator(device: torch.device | str | None) -> torch.Generator:
    """A torch generator seeded by one draw from NumPy's global state (advancing it once)."""
    seed = int(np.random.randint(0, 2**63 - 1, dtype=np.int64))
    return torch.Generator(device=torch.device(device or "cpu")).manual_seed(seed)


def _size(size: Any) -> tuple[int, ...]:
    if size is None:
        raise UnsupportedOperation("a scalar draw (size=None) stays on NumPy")
    return shape_tuple(size)


def rand(*dims: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``numpy.random.rand``: float64 uniform on [0, 1)."""
    shape = _size(dims or None)
    return torch.rand(shape, generator=_generator(device), dtype=torch.float64, device=device)


def randn(*dims: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``numpy.random.randn``: float64 standard normal."""
    shape = _size(dims or None)
    return torch.randn(shape, generator=_generator(device), dtype=torch.float64, device=device)


def random_sample(size: Any = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """``numpy.random.random_sample`` / ``numpy.random.random``: float64 uniform on [0, 1)."""
    shape = _size(size)
    return torch.rand(shape, generator=_generator(device), dtype=torch.float64, device=device)


def _param(v: Any, device: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.to(torch.float64)
    if isinstance(v, numbers.Real):
        return float(v)
    raise UnsupportedOperation(f"distribution parameter of type {type(v).__name__}")


def uniform(
    low: Any = 0.0, high: Any = 1.0, size: Any = None, *, device: Any = None
) -> torch.Tensor:
    """``numpy.random.uniform``: float64 ``low + (high - low) * U[0, 1)``."""
    shape = _size(size)
    dev = next((v.device for v in (low, high) if isinstance(v, torch.Tensor)), device)
    u = torch.rand(shape, generator=_generator(dev), dtype=torch.float64, device=dev)
    lo, hi = _param(low, dev), _param(high, dev)
    return lo + (hi - lo) * u


def normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, *, device: Any = None) -> Any:
    """``numpy.random.normal``: float64 ``loc + scale * N(0, 1)``."""
    shape = _size(size)
    dev = next((v.device for v in (loc, scale) if isinstance(v, torch.Tensor)), device)
    z = torch.randn(shape, generator=_generator(dev), dtype=torch.float64, device=dev)
    return _param(loc, dev) + _param(scale, dev) * z


def randint(
    low: int, high: int | None = None, size: Any = None, dtype: Any = int, *, device: Any = None
) -> torch.Tensor:
    """``numpy.random.randint``: integers on [low, high) (or [0, low)) in NumPy's dtype."""
    shape = _size(size)
    if not isinstance(low, numbers.Integral) or not (
        high is None or isinstance(high, numbers.Integral)
    ):
        raise UnsupportedOperation("only scalar integer bounds are supported")
    lo, hi = (0, int(low)) if high is None else (int(low), int(high))
    npd = np.dtype(dtype)
    if npd.kind not in "iu" or lo >= hi or lo < np.iinfo(npd).min or hi - 1 > np.iinfo(npd).max:
        raise UnsupportedOperation(f"bounds [{lo}, {hi}) do not fit dtype {npd}")
    td = torch_dtype(npd)
    g = _generator(device)
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64, device=device).to(td)


def shuffle(x: torch.Tensor) -> None:
    """``numpy.random.shuffle``: permutes ``x`` along axis 0 in place; returns None."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise UnsupportedOperation("shuffle needs an array of at least 1 dim")
    perm = torch.randperm(x.shape[0], generator=_generator(x.device), device=x.device)
    x.copy_(x[perm])


def permutation(x: Any) -> torch.Tensor:
    """``numpy.random.permutation``: a shuffled copy along axis 0 (an int stays on NumPy)."""
    if isinstance(x, numbers.Integral):
        raise UnsupportedOperation("permutation(int) has no array input; it stays on NumPy")
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise UnsupportedOperation("permutation needs an array of at least 1 dim")
    perm = torch.randperm(x.shape[0], generator=_generator(x.device), device=x.device)
    return x[perm]


def choice(a: Any, size: Any = None, replace: bool = True, p: Any = None) -> torch.Tensor:
    """``numpy.random.choice`` from a 1-D tensor, with or without replacement and weights ``p``."""
    shape = _size(size)
    if not isinstance(a, torch.Tensor) or a.dim() != 1:
        raise UnsupportedOperation("choice needs a 1-D array (an int population stays on NumPy)")
    n, k = a.shape[0], int(np.prod(shape, dtype=np.int64))
    if n == 0 or (not replace and k > n):
        raise UnsupportedOperation(f"cannot take {k} of {n} elements (replace={replace})")
    g = _generator(a.device)
    if p is None:
        if replace:
            idx = torch.randint(0, n, (k,), generator=g, device=a.device)
        else:
            idx = torch.randperm(n, generator=g, device=a.device)[:k]
    else:
        w = torch.as_tensor(p, dtype=torch.float64, device=a.device)
        idx = torch.multinomial(w, k, replacement=replace, generator=g)
    return a[idx].reshape(shape)


BACKENDS: dict[str, Callable[..., Any]] = {
    "numpy.fft.fft": _fft1("fft"),
    "numpy.fft.ifft": _fft1("ifft"),
    "numpy.fft.rfft": _fft1("rfft"),
    "numpy.fft.irfft": _fft1("irfft"),
    "numpy.fft.fft2": _fftn("fft2", (-2, -1)),
    "numpy.fft.ifft2": _fftn("ifft2", (-2, -1)),
    "numpy.fft.rfft2": _fftn("rfft2", (-2, -1)),
    "numpy.fft.fftn": _fftn("fftn", None),
    "numpy.fft.ifftn": _fftn("ifftn", None),
    "numpy.fft.fftshift": fftshift,
    "numpy.fft.ifftshift": ifftshift,
    "numpy.random.rand": rand,
    "numpy.random.randn": randn,
    "numpy.random.random": random_sample,
    "numpy.random.random_sample": random_sample,
    "numpy.random.uniform": uniform,
    "numpy.random.normal": normal,
    "numpy.random.randint": randint,
    "numpy.random.shuffle": shuffle,
    "numpy.random.permutation": permutation,
    "numpy.random.choice": choice,
}
