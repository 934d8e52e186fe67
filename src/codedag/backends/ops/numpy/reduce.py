"""Torch backends of NumPy reductions: sum, prod, mean, std, var, min, max, argmax, argmin, ...

Result dtypes are NumPy's (asked from NumPy on a 0-d probe): ``sum`` of uint8 is uint64, ``mean``
of any integer is float64, ``mean`` of float16 is float16 (accumulated in float32 as NumPy does).
Integer sums accumulate in int64 and are then cast, which is exact modulo 2**64 as NumPy's are.
Reductions over all axes return a 0-d tensor where NumPy returns a NumPy scalar.

A broadcast view (``numpy.broadcast_to``: axes of stride 0, which reach a backend as an expanded
tensor) is reduced over its distinct values only, never expanded: an axis that repeats one value
changes no ``max``, ``min``, ``any``, ``all`` or ``mean``, and multiplies a ``sum`` by its length.
``np.max`` of ``broadcast_to(arange(3.0), (4000, 4000, 3))`` reads 3 values, not 48 million.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Check, Tolerance
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._checks import (
    axes,
    computable,
    declared,
    no_repeated_view,
    operands,
    probe,
    reduced_sizes,
    refuse,
)
from codedag.backends.ops.numpy._common import (
    cast,
    computable_tensor,
    named,
    norm_axes,
    on_one_element,
    probe_dtype,
    require_default,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation

Axis = int | Sequence[int] | None


def _prepare(a: object, axis: Axis, out: object, where: object = True) -> tuple[int, ...] | None:
    a = computable_tensor(a)
    require_default("out", out, None)
    if where is not True:
        raise UnsupportedOperation(f"where={where!r} is not supported; expected True")
    if a.dtype.is_complex:
        raise UnsupportedOperation("complex reductions are not supported")
    dims = norm_axes(axis, a.dim())
    if dims == ():
        raise UnsupportedOperation("axis=() (a reduction over no axis) is not supported")
    if a.dim() == 0:
        raise UnsupportedOperation("reductions of 0-d arrays are not supported")
    return dims


def _repeated_axes(a: torch.Tensor) -> tuple[int, ...]:
    """Axes along which ``a`` repeats one value (longer than 1, stride 0): a broadcast view's."""
    return tuple(d for d, (n, st) in enumerate(zip(a.shape, a.stride())) if n > 1 and st == 0)


def _over_distinct(
    a: torch.Tensor,
    dims: tuple[int, ...] | None,
    keepdims: bool,
    reduce: Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor],
) -> tuple[torch.Tensor, int] | None:
    """``reduce(x, dims)`` (with ``keepdim=True``) of a broadcast view's distinct values ``x``,
    shaped as the reduction of the whole view, and how many times each reduced value repeats
    (the product of the reduced repeated axes' lengths); ``None`` when ``a`` repeats nothing.

    Axes kept by the reduction that repeat are written out in the result (a new tensor).
    """
    repeated = _repeated_axes(a)
    if not repeated:
        return None
    reduced = dims if dims is not None else tuple(range(a.dim()))
    x = a
    for d in repeated:
        x = x.narrow(d, 0, 1)
    r = reduce(x, reduced)
    # a result of its own, as NumPy's is: kept repeated axes are written out, never aliased
    r = r.expand([1 if d in reduced else n for d, n in enumerate(a.shape)]).contiguous()
    if not keepdims:
        r = r.squeeze(reduced)
    count = 1
    for d in repeated:
        if d in reduced:
            count *= a.shape[d]
    return r, count


def _reduced(
    a: torch.Tensor,
    dims: tuple[int, ...] | None,
    keepdims: bool,
    reduce: Callable[[torch.Tensor, tuple[int, ...], bool], torch.Tensor],
) -> torch.Tensor:
    """``reduce(a, dims, keepdims)`` (``dims`` None: every axis), over a broadcast view's
    distinct values only: for reductions that a repeated value does not change."""
    distinct = _over_distinct(a, dims, keepdims, lambda x, d: reduce(x, d, True))
    if distinct is not None:
        return distinct[0]
    return reduce(a, dims if dims is not None else tuple(range(a.dim())), keepdims)


def _accumulate_dtype(res: torch.dtype) -> torch.dtype:
    if res in (torch.uint64, torch.uint32, torch.uint16) or not res.is_floating_point:
        return torch.int64 if res != torch.bool else torch.bool
    return torch.float32 if res == torch.float16 else res


def _sum_like(name: str, op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    np_fn = getattr(np, name)

    def backend(
        a: torch.Tensor,
        axis: Axis = None,
        dtype: object = None,
        out: object = None,
        keepdims: bool = False,
        initial: object = None,
        where: object = True,
    ) -> torch.Tensor:
        dims = _prepare(a, axis, out, where)
        require_default("initial", initial, None)
        res = torch_dtype(probe_dtype(np_fn, a, dtype=dtype))
        if res == torch.float16:
            # NumPy rounds float16 partial results in an order that depends on the memory
            # layout (pairwise along contiguous axes, step by step across others).
            raise UnsupportedOperation(f"numpy.{name} in float16 follows NumPy's layout order")
        acc = _accumulate_dtype(res)
        if name == "sum":
            distinct = _over_distinct(a, dims, keepdims, lambda x, d: op(x.to(acc), d, True))
            if distinct is not None:
                r, count = distinct
                return cast(r if count == 1 or acc == torch.bool else r * count, res)
        x = a.to(acc)
        if dims is None:
            r = op(x)  # over every element, without reshape(-1): a broadcast view stays a view
            r = r.reshape((1,) * a.dim()) if keepdims else r
        elif name == "sum":
            r = op(x, dim=dims, keepdim=keepdims)
        else:  # prod reduces one dim at a time
            r = x
            for d in sorted(dims, reverse=True):
                r = op(r, dim=d, keepdim=keepdims)
        return cast(r, res)

    return named(backend, name, f"``numpy.{name}`` with NumPy's accumulator dtype.")


def _float_dtypes(
    np_fn: Callable[..., Any], a: torch.Tensor, dtype: object
) -> tuple[torch.dtype, torch.dtype]:
    """NumPy's result dtype of ``np_fn`` (a mean, variance or deviation), refused unless a float,
    and the dtype to accumulate in (float32 for float16, as NumPy's)."""
    res = torch_dtype(probe_dtype(np_fn, a, dtype=dtype))
    acc = torch.float32 if res == torch.float16 else res
    if not acc.is_floating_point:
        raise UnsupportedOperation(f"{np_fn.__name__} with an integer dtype {res} is not supported")
    return res, acc


def mean(
    a: torch.Tensor,
    axis: Axis = None,
    dtype: object = None,
    out: object = None,
    keepdims: bool = False,
    *,
    where: object = True,
) -> torch.Tensor:
    """``numpy.mean``: float64 for integers, float32 accumulation for float16."""
    dims = _prepare(a, axis, out, where)
    res, acc = _float_dtypes(np.mean, a, dtype)
    distinct = _over_distinct(a, dims, keepdims, lambda x, d: torch.mean(cast(x, acc), d, True))
    if distinct is not None:  # every value repeats equally often: the mean of the distinct ones
        return cast(distinct[0], res)
    return cast(torch.mean(cast(a, acc), dim=dims, keepdim=keepdims), res)


def _var_like(name: str) -> Callable[..., torch.Tensor]:
    np_fn = getattr(np, name)

    def backend(
        a: torch.Tensor,
        axis: Axis = None,
        dtype: Any = None,
        out: Any = None,
        ddof: float = 0,
        keepdims: bool = False,
        *,
        where: Any = True,
        mean: Any = None,
        correction: Any = None,
    ) -> torch.Tensor:
        dims = _prepare(a, axis, out, where)
        require_default("mean", mean, None)
        if correction is not None:
            ddof = correction
        res, acc = _float_dtypes(np_fn, a, dtype)
        fn = torch.var if name == "var" else torch.std
        return cast(fn(cast(a, acc), dim=dims, correction=ddof, keepdim=keepdims), res)

    return named(
        backend, name, f"``numpy.{name}`` with ``ddof`` (``correction``); float64 for integers."
    )


def _minmax(name: str, op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def backend(
        a: torch.Tensor,
        axis: Axis = None,
        out: object = None,
        keepdims: bool = False,
        initial: object = None,
        where: object = True,
    ) -> torch.Tensor:
        dims = _prepare(a, axis, out, where)
        require_default("initial", initial, None)

        def extremum(x: torch.Tensor, d: tuple[int, ...], keep: bool) -> torch.Tensor:
            x = x.to(torch.uint8) if x.dtype == torch.bool else x
            return op(x, dim=d, keepdim=keep).to(a.dtype)

        return _reduced(a, dims, keepdims, extremum)

    return named(backend, name, f"``numpy.{name}``: NaN propagates as in NumPy.")


def _arg(name: str, op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def backend(
        a: torch.Tensor, axis: int | None = None, out: object = None, *, keepdims: bool = False
    ) -> torch.Tensor:
        dims = _prepare(a, axis, out)
        x = a.to(torch.uint8) if a.dtype == torch.bool else a
        if dims is None:
            r = op(x.reshape(-1))
            return r.reshape((1,) * a.dim()) if keepdims else r
        return op(x, dim=dims[0], keepdim=keepdims)

    return named(backend, name, f"``numpy.{name}``: int64 indices, first occurrence on ties.")


def _logical(name: str) -> Callable[..., torch.Tensor]:
    def backend(
        a: torch.Tensor,
        axis: Axis = None,
        out: object = None,
        keepdims: bool = False,
        *,
        where: object = True,
    ) -> torch.Tensor:
        dims = _prepare(a, axis, out, where)
        fn = torch.any if name == "any" else torch.all  # empty reductions: False and True

        def truth(x: torch.Tensor, d: tuple[int, ...], keep: bool) -> torch.Tensor:
            return fn(x != 0, dim=d, keepdim=keep)

        return _reduced(a, dims, keepdims, truth)

    return named(backend, name, f"``numpy.{name}``: truth of nonzero elements.")


def cumsum(
    a: torch.Tensor, axis: int | None = None, dtype: object = None, out: object = None
) -> Any:
    """``numpy.cumsum``: flattens when ``axis`` is None; integer sums in NumPy's dtype."""
    dims = _prepare(a, axis, out)
    res = torch_dtype(probe_dtype(np.cumsum, a, dtype=dtype))
    if res == torch.float16:
        raise UnsupportedOperation("NumPy accumulates float16 step by step in float16")
    x = a.to(_accumulate_dtype(res))
    if dims is None:
        return torch.cumsum(x.reshape(-1), dim=0).to(res)
    # NumPy keeps the input's layout (a Fortran-ordered array gives a Fortran-ordered result)
    return torch.empty_like(a, dtype=res).copy_(torch.cumsum(x, dim=dims[0]))


# -- declared checks ---------------------------------------------------------------------------


def _reduce_check(name: str) -> Check:
    np_fn = getattr(np, name)
    arg = name in ("argmax", "argmin")
    extremum = name in ("min", "max", "amin", "amax", "argmax", "argmin")

    @declared
    def check(a: Any, *args: Any, **kwargs: Any) -> None:
        refuse(not isinstance(a, np.ndarray), f"a {type(a).__name__} stays in NumPy")
        operands(a, real=True, name=f"numpy.{name}")
        refuse(a.ndim == 0, "reductions of 0-d arrays stay in NumPy")
        bound = _bind(name, args, kwargs)
        refuse(bound is None, "arguments do not match the signature")
        assert bound is not None
        refuse(bound.get("where", True) is not True, "where= masks are not reproduced")
        refuse(bound.get("initial") is not None, "initial= is not reproduced")
        dims = axes(a, bound.get("axis"), single=arg or name == "cumsum")
        if arg or name == "cumsum":
            no_repeated_view(a, f"numpy.{name}")
        refuse(dims == (), "axis=() is not reproduced")
        if extremum:
            refuse(0 in reduced_sizes(a, dims), "an empty reduction: NumPy raises")
        dtype = bound.get("dtype")
        result = probe(on_one_element, a, np_fn, **({"dtype": dtype} if dtype else {}))
        refuse(not computable(result), "a {} result", result)
        if name in ("sum", "prod", "cumsum"):
            refuse(result == np.float16, f"float16 numpy.{name}: NumPy's order depends on layout")
        if name in ("mean", "var", "std"):
            refuse(result.kind not in "fc", f"numpy.{name} with an integer dtype")

    return check


_SIGNATURES = {
    "sum": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "prod": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "mean": ("axis", "dtype", "out", "keepdims"),
    "var": ("axis", "dtype", "out", "ddof", "keepdims"),
    "std": ("axis", "dtype", "out", "ddof", "keepdims"),
    "min": ("axis", "out", "keepdims", "initial", "where"),
    "max": ("axis", "out", "keepdims", "initial", "where"),
    "argmax": ("axis", "out"),
    "argmin": ("axis", "out"),
    "all": ("axis", "out", "keepdims"),
    "any": ("axis", "out", "keepdims"),
    "cumsum": ("axis", "dtype", "out"),
}
_KEYWORDS = {"where", "keepdims", "mean", "correction"}


def _bind(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    params = _SIGNATURES[name.replace("amin", "min").replace("amax", "max")]
    if len(args) > len(params):
        return None
    bound = dict(zip(params, args))
    for key, value in kwargs.items():
        if key in bound or (key not in params and key not in _KEYWORDS):
            return None
        bound[key] = value
    return bound


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sum": _sum_like("sum", torch.sum),
    "prod": _sum_like("prod", torch.prod),
    "mean": mean,
    "var": _var_like("var"),
    "std": _var_like("std"),
    "min": _minmax("min", torch.amin),
    "max": _minmax("max", torch.amax),
    "argmax": _arg("argmax", torch.argmax),
    "argmin": _arg("argmin", torch.argmin),
    "all": _logical("all"),
    "any": _logical("any"),
    "cumsum": cumsum,
}
BACKENDS: dict[str, Callable[..., Any]] = {
    f"{prefix}.{name}": fn
    for prefix in ("numpy", "numpy.ndarray")
    for name, fn in _FUNCTIONS.items()
}
BACKENDS["numpy.amin"] = _FUNCTIONS["min"]
BACKENDS["numpy.amax"] = _FUNCTIONS["max"]

_SUMS = ("cumsum", "mean", "prod", "std", "sum", "var")
# min/max/arg and integer reductions are exact (no tolerance).
SUMS = Tolerance(
    atol=1e-6,
    rtol=2e-3,
    note="float sums in another order (NumPy pairwise, torch cascade): ~1 ulp of float16 results "
    "(9.8e-4), a few ulp of float32/float64 ones; integer sums are exact",
)
_QUIRKS: dict[str, dict[str, Any]] = {
    n: {"check": _reduce_check(n)} for n in [*_FUNCTIONS, "amin", "amax"]
}
for _name in _SUMS:
    _QUIRKS[_name]["tolerance"] = SUMS
OPS = ops_of(BACKENDS, _QUIRKS)
