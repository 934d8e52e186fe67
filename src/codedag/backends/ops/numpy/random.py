"""Torch backends of the legacy ``numpy.random`` draws.

Honest semantics: torch's generators (Philox on CUDA, MT19937 with another output transform on the
CPU) cannot reproduce NumPy's stream. Each call therefore draws one 63-bit seed from NumPy's global
``RandomState`` (``numpy.random.randint``, which advances that state exactly once) and seeds a fresh
``torch.Generator`` on the target device with it. Results are distributionally equivalent to
NumPy's (same distribution, shape, dtype and range), reproducible under ``numpy.random.seed(s)``,
and never bit-identical to NumPy's: every op here is declared random, differing from the library.
A draw of a single scalar (``size=None``) is declared unsupported: NumPy's own draw is cheaper
than a device launch and keeps the exact stream. Draws with no array argument run on ``device``
(keyword-only, default the CPU), which the executor fills in with the call's device. ``shuffle``
permutes its tensor in place and returns None, as NumPy does: the executor copies the tensor back
into the user's array unless it shares memory with it (``torch.from_numpy`` on the CPU does).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._checks import computable, declared, operands, refuse
from codedag.backends.ops.numpy._common import (
    shape_tuple,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation


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


def random_sample(size: object = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """``numpy.random.random_sample`` / ``numpy.random.random``: float64 uniform on [0, 1)."""
    shape = _size(size)
    return torch.rand(shape, generator=_generator(device), dtype=torch.float64, device=device)


def _param(v: object, device: object) -> Any:
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
    low: int,
    high: int | None = None,
    size: object = None,
    dtype: object = int,
    *,
    device: object = None,
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


def permutation(x: object) -> torch.Tensor:
    """``numpy.random.permutation``: a shuffled copy along axis 0 (an int stays on NumPy)."""
    if isinstance(x, numbers.Integral):
        raise UnsupportedOperation("permutation(int) has no array input; it stays on NumPy")
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        raise UnsupportedOperation("permutation needs an array of at least 1 dim")
    perm = torch.randperm(x.shape[0], generator=_generator(x.device), device=x.device)
    return x[perm]


def choice(a: object, size: object = None, replace: bool = True, p: object = None) -> torch.Tensor:
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


# -- declared checks ---------------------------------------------------------------------------


def _draw_size(size: object) -> None:
    refuse(size is None, "a scalar draw (size=None) stays on NumPy: it keeps the exact stream")


@declared
def check_dims(*dims: Any, **kwargs: Any) -> None:
    """At least one dimension (``rand()`` is a scalar draw), non-negative integers."""
    _draw_size(dims or None)
    refuse(not all(isinstance(d, numbers.Integral) and int(d) >= 0 for d in dims), f"dims {dims!r}")


@declared
def check_size(size: object = None, **kwargs: Any) -> None:
    """An explicit size."""
    _draw_size(size)


def _params(*values: Any) -> None:
    for v in values:
        ok = isinstance(v, numbers.Real) or (isinstance(v, np.ndarray) and v.dtype.kind in "iuf")
        refuse(not ok, f"distribution parameter {v!r}")


@declared
def check_uniform(
    low: object = 0.0, high: object = 1.0, size: object = None, **kwargs: Any
) -> None:
    """An explicit size and real parameters."""
    _draw_size(size)
    _params(low, high)


@declared
def check_normal(
    loc: object = 0.0, scale: object = 1.0, size: object = None, **kwargs: Any
) -> None:
    """An explicit size, real parameters, no negative scale (NumPy raises)."""
    _draw_size(size)
    _params(loc, scale)
    refuse(bool(np.any(np.asarray(scale) < 0)), "a negative scale: NumPy raises")


@declared
def check_randint(
    low: Any, high: Any = None, size: Any = None, dtype: Any = int, **kwargs: Any
) -> None:
    """An explicit size, integer bounds that fit the dtype (NumPy raises otherwise)."""
    _draw_size(size)
    ints = isinstance(low, numbers.Integral) and (
        high is None or isinstance(high, numbers.Integral)
    )
    refuse(not ints, "only scalar integer bounds are reproduced")
    lo, hi = (0, int(low)) if high is None else (int(low), int(high))
    try:
        npd = np.dtype(dtype)
    except TypeError as e:
        raise UnsupportedOperation(f"dtype {dtype!r}") from e
    refuse(npd.kind not in "iu" or not computable(npd), "dtype {}", npd)
    info = np.iinfo(npd)
    refuse(lo >= hi or lo < info.min or hi - 1 > info.max, f"bounds [{lo}, {hi}) for {npd}")


@declared
def check_shuffle(x: object) -> None:
    """An array of at least one dimension."""
    refuse(not isinstance(x, np.ndarray) or x.ndim == 0, "an array of at least 1 dim")
    operands(x)


@declared
def check_choice(a: Any, size: Any = None, replace: bool = True, p: Any = None) -> None:
    """A 1-D array population, an explicit size, enough elements without replacement, and
    probabilities NumPy accepts."""
    _draw_size(size)
    refuse(not isinstance(a, np.ndarray) or a.ndim != 1, "an int or N-d population stays on NumPy")
    operands(a)
    k = int(np.prod(shape_tuple(size), dtype=np.int64))
    refuse(a.shape[0] == 0 or (not replace and k > a.shape[0]), f"{k} of {a.shape[0]} elements")
    if p is not None:
        w = np.asarray(p, dtype=np.float64)
        refuse(w.shape != a.shape or (w < 0).any(), "probabilities p of another shape or sign")
        refuse(not np.isclose(w.sum(), 1.0), "probabilities p do not sum to 1")


BACKENDS: dict[str, Callable[..., Any]] = {
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

_CHECKS: dict[str, Any] = {
    "rand": check_dims,
    "randn": check_dims,
    "random": check_size,
    "random_sample": check_size,
    "uniform": check_uniform,
    "normal": check_normal,
    "randint": check_randint,
    "shuffle": check_shuffle,
    "permutation": check_shuffle,
    "choice": check_choice,
}
_DIFFERS = (
    "torch's generators cannot reproduce NumPy's stream: same distribution, shape and dtype, "
    "other numbers"
)
OPS = ops_of(
    BACKENDS,
    {
        name.rsplit(".", 1)[1]: {
            "random": True,
            "differs": _DIFFERS,
            "check": _CHECKS[name.rsplit(".", 1)[1]],
            **({"inplace": (0,)} if name.endswith(".shuffle") else {}),
        }
        for name in BACKENDS
    },
)
