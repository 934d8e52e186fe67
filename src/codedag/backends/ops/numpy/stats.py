"""Torch backends of NumPy order statistics and norms: median, percentile, quantile, sort, argsort,
linalg.norm (vector norms).

Result dtypes are NumPy's (asked from NumPy on a probe). Order statistics sort along the axis
(no 16M-element limit as ``torch.quantile`` has) and interpolate as NumPy's default
``method='linear'`` does, including its two-sided lerp; a NaN in a slice gives NaN as in NumPy.
``argsort`` is supported with ``kind='stable'`` only: NumPy's default quicksort leaves the order of
equal elements unspecified, so no backend can promise the same indices.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._checks import (
    axes,
    declared,
    no_repeated_view,
    operands,
    reduced_sizes,
    refuse,
)
from codedag.backends.ops.numpy._common import (
    check_computable,
    computable_tensor,
    named,
    norm_axes,
    on_one_element,
    probe_dtype,
    require_default,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation


def _tensor(a: object) -> torch.Tensor:
    if not isinstance(a, torch.Tensor) or a.dim() == 0:
        raise UnsupportedOperation("expected a tensor of at least 1 dim")
    check_computable(a)
    if a.dtype.is_complex or a.dtype == torch.bool:
        raise UnsupportedOperation(f"order statistics of {a.dtype} are not supported")
    return a


def _sorted_slices(
    a: torch.Tensor, axis: int | Sequence[int] | None, work: torch.dtype, what: str
) -> torch.Tensor:
    """``a`` in ``work`` with the reduced axes moved last and merged, sorted along them."""
    dims = norm_axes(axis, a.dim())
    if dims is None:
        x = a.reshape(-1)
    else:
        keep = [d for d in range(a.dim()) if d not in dims]
        x = a.permute(*keep, *dims).reshape(*[a.shape[d] for d in keep], -1)
    xs = x.to(work).sort(dim=-1).values
    if xs.shape[-1] == 0:
        raise UnsupportedOperation(f"{what} of an empty slice")
    return xs


def _keepdims_shape(a: torch.Tensor, axis: Any) -> list[int]:
    dims = norm_axes(axis, a.dim())
    return [1 if dims is None or d in dims else a.shape[d] for d in range(a.dim())]


def _lerp(lo: torch.Tensor, hi: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """NumPy's _lerp: a + (b - a) * t below t = 0.5, b - (b - a) * (1 - t) from there."""
    diff = hi - lo
    return torch.where(t >= 0.5, hi - diff * (1 - t), lo + diff * t)


def _quantiles(a: torch.Tensor, q: torch.Tensor, axis: Any, keepdims: bool, res: Any) -> Any:
    work = torch.float64 if not res.is_floating_point or res == torch.float64 else res
    if res == torch.float16:
        work = torch.float32
    xs = _sorted_slices(a, axis, work, "quantile")
    n = xs.shape[-1]
    v = q.to(torch.float64) * (n - 1)
    lo_i = torch.floor(v).long().clamp(0, n - 1)
    hi_i = (lo_i + 1).clamp(max=n - 1)
    t = (v - lo_i.to(torch.float64)).to(work)
    lo = xs.index_select(-1, lo_i)
    hi = xs.index_select(-1, hi_i)
    out = _lerp(lo, hi, t)
    nan = torch.isnan(xs).any(dim=-1, keepdim=True)
    out = torch.where(nan, torch.full_like(out, float("nan")), out)
    out = out.movedim(-1, 0)  # NumPy puts the q axis first
    if keepdims:
        out = out.reshape(out.shape[0], *_keepdims_shape(a, axis))
    return out.to(res)


def _q_tensor(q: object, scale: float, device: torch.device) -> tuple[torch.Tensor, bool]:
    arr = np.asarray(q, dtype=np.float64) / scale
    if ((arr < 0) | (arr > 1)).any():
        raise UnsupportedOperation(f"quantiles {q!r} out of range")
    return torch.from_numpy(arr.reshape(-1)).to(device), arr.ndim == 0


def _quantile_like(fn: Callable[..., Any], scale: float) -> Callable[..., torch.Tensor]:
    """The backend of ``fn`` (``numpy.quantile``, or ``numpy.percentile`` with ``scale`` 100)."""

    def backend(
        a: torch.Tensor,
        q: Any,
        axis: int | Sequence[int] | None = None,
        out: object = None,
        overwrite_input: bool = False,
        method: str = "linear",
        keepdims: bool = False,
        *,
        weights: object = None,
        interpolation: object = None,
    ) -> torch.Tensor:
        a = _tensor(a)
        require_default("out", out, None)
        require_default("weights", weights, None)
        if method != "linear":
            raise UnsupportedOperation(f"method={method!r}; only 'linear' is supported")
        if a.dtype == torch.float16:
            raise UnsupportedOperation("float16 quantiles: NumPy interpolates in float16")
        q_probe = q if isinstance(q, (int, float)) else np.asarray(q)
        res = torch_dtype(probe_dtype(on_one_element, a, fn, q_probe))
        qt, scalar = _q_tensor(q, scale, a.device)
        r = _quantiles(a, qt, axis, keepdims, res)
        return r[0] if scalar else r.reshape(*np.shape(q), *r.shape[1:])

    name = fn.__name__
    return named(backend, name, f"``numpy.{name}`` with the default ``method='linear'``.")


quantile = _quantile_like(np.quantile, 1.0)
percentile = _quantile_like(np.percentile, 100.0)


def median(
    a: torch.Tensor,
    axis: int | Sequence[int] | None = None,
    out: object = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> torch.Tensor:
    """``numpy.median``: the mean of the two middle values for even counts."""
    a = _tensor(a)
    require_default("out", out, None)
    res = torch_dtype(probe_dtype(np.median, a))
    xs = _sorted_slices(a, axis, torch.float32 if res == torch.float16 else res, "median")
    n = xs.shape[-1]
    mid = xs[..., (n - 1) // 2 : n // 2 + 1].mean(dim=-1)
    nan = torch.isnan(xs).any(dim=-1)
    r = torch.where(nan, torch.full_like(mid, float("nan")), mid)
    return (r.reshape(_keepdims_shape(a, axis)) if keepdims else r).to(res)


def sort(
    a: torch.Tensor, axis: int | None = -1, kind: str | None = None, order: object = None, **kw: Any
) -> torch.Tensor:
    """``numpy.sort`` (values do not depend on ``kind``); NaNs last as in NumPy."""
    a = _tensor(a)
    require_default("order", order, None)
    if axis is None:
        return a.reshape(-1).sort().values
    return a.sort(dim=axis).values


def argsort(
    a: torch.Tensor, axis: int | None = -1, kind: str | None = None, order: object = None, **kw: Any
) -> torch.Tensor:
    """``numpy.argsort(kind='stable')``: int64 indices, equal elements in input order."""
    a = _tensor(a)
    require_default("order", order, None)
    if kind not in ("stable", "mergesort") and not kw.get("stable", False):
        raise UnsupportedOperation("argsort needs kind='stable': NumPy's tie order is unspecified")
    x = a.reshape(-1) if axis is None else a
    return torch.argsort(x, dim=-1 if axis is None else axis, stable=True)


def norm(
    x: torch.Tensor, ord: Any = None, axis: Any = None, keepdims: bool = False
) -> torch.Tensor:
    """``numpy.linalg.norm`` for vector norms (ord None/2, 1, inf, -inf, 0, p) and Frobenius."""
    x = computable_tensor(x)
    res = torch_dtype(probe_dtype(on_one_element, x, np.linalg.norm))
    if res == torch.float16:
        raise UnsupportedOperation("float16 norms: NumPy squares and sums in float16 (overflows)")
    work = x.to(res)
    if x.dtype.is_complex:
        raise UnsupportedOperation("complex norms are not supported")
    if axis is None and ord in (None, "fro"):
        r = torch.linalg.vector_norm(work.reshape(-1), 2)
        return (r.reshape((1,) * x.dim()) if keepdims else r).to(res)
    if axis is None and x.dim() == 1:
        axis = 0
    if not isinstance(axis, numbers.Integral):
        raise UnsupportedOperation("only vector norms along one axis (or the Frobenius norm)")
    p = {None: 2.0, np.inf: float("inf"), -np.inf: float("-inf")}.get(ord, ord)
    if not isinstance(p, numbers.Real):
        raise UnsupportedOperation(f"ord={ord!r} is not a vector norm")
    r = torch.linalg.vector_norm(work, float(p), dim=int(axis), keepdim=keepdims)
    return r.to(res)


# -- declared checks ---------------------------------------------------------------------------


def _order_input(a: Any, name: str) -> np.ndarray:
    refuse(not isinstance(a, np.ndarray), f"a {type(a).__name__} stays in NumPy")
    operands(a, real=True, name=name)
    refuse(a.ndim == 0 or a.dtype == np.bool_, f"{name} of 0-d or bool arrays")
    no_repeated_view(a, name)
    return a


@declared
def _check_quantile(
    fn: object,
    scale: float,
    a: object,
    q: object,
    axis: object = None,
    out: object = None,
    overwrite_input: bool = False,
    method: str = "linear",
    keepdims: bool = False,
    *,
    weights: object = None,
    interpolation: object = None,
) -> None:
    a = _order_input(a, "quantiles")
    refuse(a.dtype == np.float16, "float16 quantiles: NumPy interpolates in float16")
    refuse(method != "linear" or interpolation is not None, f"method={method!r}")
    refuse(weights is not None, "weights= is not reproduced")
    dims = axes(a, axis)
    refuse(0 in reduced_sizes(a, dims), "quantiles of an empty slice: NumPy raises")
    qs = np.asarray(q)
    refuse(qs.dtype.kind not in "iuf", f"q={q!r}")
    refuse(((qs < 0) | (qs > scale)).any(), f"q={q!r} out of range: NumPy raises")


def check_quantile(a: object, q: object, *args: Any, **kwargs: Any) -> str | None:
    """Real arrays (not float16), q in [0, 1], method 'linear', no weights, non-empty slices."""
    return _check_quantile(np.quantile, 1.0, a, q, *args, **kwargs)


def check_percentile(a: object, q: object, *args: Any, **kwargs: Any) -> str | None:
    """As quantile, q in [0, 100]."""
    return _check_quantile(np.percentile, 100.0, a, q, *args, **kwargs)


@declared
def check_median(
    a: object,
    axis: object = None,
    out: object = None,
    overwrite_input: bool = False,
    keepdims: bool = False,
) -> None:
    """Real arrays of at least one dimension, non-empty slices."""
    a = _order_input(a, "median")
    refuse(0 in reduced_sizes(a, axes(a, axis)), "median of an empty slice")


@declared
def check_sort(
    a: object, axis: object = -1, kind: object = None, order: object = None, **kw: Any
) -> None:
    """Real arrays of at least one dimension, no structured ``order``."""
    a = _order_input(a, "sorting")
    refuse(order is not None, "order= (structured arrays) is not reproduced")
    axes(a, axis, single=True)


@declared
def check_argsort(
    a: object, axis: object = -1, kind: object = None, order: object = None, **kw: Any
) -> None:
    """As sort, with ``kind='stable'``: NumPy's default quicksort orders ties its own way."""
    a = _order_input(a, "sorting")
    refuse(order is not None, "order= (structured arrays) is not reproduced")
    stable = kind in ("stable", "mergesort") or kw.get("stable") is True
    refuse(not stable, "argsort without kind='stable': NumPy's tie order is unspecified")
    axes(a, axis, single=True)


@declared
def check_norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> None:
    """Real arrays (not float16): vector norms along one axis, or the Frobenius norm."""
    refuse(not isinstance(x, np.ndarray) or x.ndim == 0, "a 0-d array or scalar")
    operands(x, real=True, name="numpy.linalg.norm")
    refuse(x.dtype == np.float16, "float16 norms: NumPy squares and sums in float16")
    if axis is None and ord in (None, "fro"):
        return
    if axis is None:
        refuse(x.ndim != 1, "matrix norms are not reproduced")
    else:
        refuse(not isinstance(axis, numbers.Integral), "matrix norms are not reproduced")
        axes(x, axis, single=True)
    refuse(not isinstance(ord, numbers.Real | type(None)), f"ord={ord!r} is not a vector norm")


BACKENDS: dict[str, Callable[..., Any]] = {
    "numpy.argsort": argsort,
    "numpy.linalg.norm": norm,
    "numpy.median": median,
    "numpy.percentile": percentile,
    "numpy.quantile": quantile,
    "numpy.sort": sort,
    "numpy.ndarray.argsort": argsort,
}

# Sorting is exact (no tolerance).
ORDER = Tolerance(
    rtol=1e-6,
    atol=2e-5,
    note="interpolation between sorted neighbours in float64 where NumPy mixes float32 and "
    "float64 operands: a float32 ulp or two of the neighbours, which is absolute (atol) when "
    "neighbours of opposite sign cancel to a small result; integer and NaN cases are exact",
)
OPS = ops_of(
    BACKENDS,
    {
        "median": {"check": check_median, "tolerance": ORDER},
        "percentile": {"check": check_percentile, "tolerance": ORDER},
        "quantile": {"check": check_quantile, "tolerance": ORDER},
        "norm": {
            "check": check_norm,
            "tolerance": Tolerance(
                rtol=1e-5,
                note="sum of squares in another order (BLAS dot vs torch): a few float32 ulp",
            ),
        },
        "sort": {"check": check_sort},
        "argsort": {"check": check_argsort},
    },
)
