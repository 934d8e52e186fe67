"""Torch backends of ``numpy.fft``.

``torch.fft`` with NumPy's ``n``/``s``, ``axis``/``axes`` and ``norm`` ("backward", "ortho",
"forward"); the output dtype is NumPy's (NumPy 2 keeps float32 input in complex64, integers give
complex128), asked from NumPy on a tiny probe.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Check, Tolerance
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._checks import declared, operands, refuse
from codedag.backends.ops.numpy._common import (
    check_computable,
    computable_tensor,
    named,
    numpy_dtype,
    require_default,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation

_NORMS = (None, "backward", "ortho", "forward")


@functools.lru_cache(maxsize=256)
def _fft_dtype(name: str, dtype: np.dtype) -> np.dtype:
    fn = getattr(np.fft, name)
    probe = np.ones((4, 4), dtype=dtype)
    return np.asarray(fn(probe)).dtype


def _fft_input(
    a: object, name: str, norm: str | None, out: object
) -> tuple[torch.Tensor, torch.dtype]:
    a = computable_tensor(a)
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
        out: object = None,
    ) -> torch.Tensor:
        x, res = _fft_input(a, name, norm, out)
        return torch_fn(x, n=n, dim=axis, norm=norm).to(res)

    return named(backend, name, f"``numpy.fft.{name}``.")


def _fftn(name: str, default_axes: Sequence[int] | None) -> Callable[..., torch.Tensor]:
    torch_fn = getattr(torch.fft, name)

    def backend(
        a: torch.Tensor,
        s: Sequence[int] | None = None,
        axes: Sequence[int] | None = default_axes,
        norm: str | None = None,
        out: object = None,
    ) -> torch.Tensor:
        x, res = _fft_input(a, name, norm, out)
        dims = tuple(axes) if axes is not None else None
        if s is not None and dims is None:
            dims = tuple(range(-len(s), 0))
        return torch_fn(x, s=s, dim=dims, norm=norm).to(res)

    return named(backend, name, f"``numpy.fft.{name}``.")


def fftshift(x: torch.Tensor, axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.fft.fftshift``."""
    check_computable(x)
    return torch.fft.fftshift(x, dim=axes)


def ifftshift(x: torch.Tensor, axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.fft.ifftshift``."""
    check_computable(x)
    return torch.fft.ifftshift(x, dim=axes)


# -- declared checks ---------------------------------------------------------------------------


def _fft_check(name: str) -> Check:
    np_fn = getattr(np.fft, name)
    shift = name.endswith("shift")

    @declared
    def check(a: Any, *args: Any, **kwargs: Any) -> None:
        refuse(not isinstance(a, np.ndarray) or a.ndim == 0, "a scalar or 0-d array")
        operands(a, real=name.startswith("rfft"), name=f"numpy.fft.{name}")
        refuse(a.dtype == np.float16, "float16 FFTs are not reproduced")
        refuse(kwargs.get("out") is not None, "out=")
        if shift:
            return
        refuse(a.size == 0, "the FFT of an empty array: NumPy raises")
        refuse(
            a.dtype.kind in "fc" and not np.isfinite(a).all(),
            "non-finite values: which outputs of an FFT of an infinity are NaN depends on the "
            "implementation's order of operations",
        )
        small = np.ones(tuple(min(s, 2) for s in a.shape), dtype=a.dtype)
        try:  # NumPy on a tiny array of the same rank checks n/s, axes and norm
            with np.errstate(all="ignore"):
                np_fn(small, *args, **kwargs)
        except Exception as e:
            raise UnsupportedOperation(f"NumPy refuses these arguments: {e}") from e

    return check


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
}

_SHIFTS = ("fftshift", "ifftshift")
# Shifts are exact (no tolerance).
FFT = Tolerance(
    atol=1e-3,
    rtol=1e-5,
    scale_rtol=1e-6,
    note="NumPy's pocketfft vs torch's FFT (pocketfft/MKL on the CPU, cuFFT): a few float32 ulp "
    "of sum(|x|), spread over every element (within 1e-6 of the largest magnitude: 0.5 on the "
    "8e6 of a 256x256 float32 image of 0..255); shifts are exact",
)
OPS = ops_of(
    BACKENDS,
    {
        (short := name.rsplit(".", 1)[1]): {
            "check": _fft_check(short),
            "order": "A",
            **({} if short in _SHIFTS else {"tolerance": FFT}),
        }
        for name in BACKENDS
    },
)
