"""cv2 per-pixel arithmetic on torch, batch-first: add, subtract, multiply, absdiff, addWeighted,
convertScaleAbs, normalize, LUT.

Plain torch: these are elementwise, so the only work is cv2's number rules, measured on cv2 5:
integer results round half to even and saturate; a scalar operand of add/subtract is rounded to an
integer first (``cv2.add(u8, 2.5)`` adds 2); a plain number applies to every channel, a tuple gives
per-channel values (missing ones 0); scaled results (addWeighted, convertScaleAbs, normalize) are
float32 fused multiply-adds as in cv2's SIMD code (emulated exactly through float64), float64 data
in float64. ``normalize`` computes its norms per image of the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._arith_checks import (
    ARITH_DTYPES,
    NORM_INF,
    NORM_L1,
    NORM_L2,
    NORM_MINMAX,
    check_absdiff,
    check_add,
    check_add_weighted,
    check_convert_scale_abs,
    check_lut,
    check_multiply,
    check_normalize,
)
from codedag.backends.ops.cv2._common import (
    DEPTH_TO_DTYPE,
    as_nhwc,
    channels,
    check_image,
    no_output,
    saturate,
    scalar_values,
)
from codedag.errors import UnsupportedOperation

_TESTED = (torch.uint8, torch.float32, torch.float64)  # the input dtypes tested against cv2


def _f32(v: float) -> float:
    """A Python float rounded to float32, as cv2 stores scale factors for float32 arithmetic."""
    return float(np.float32(v))


def _fma32(x: torch.Tensor, m: float | torch.Tensor, c: float | torch.Tensor) -> torch.Tensor:
    """float32 ``x * m + c`` with one rounding (cv2's SIMD fused multiply-add), via float64."""
    return (x.double() * m + c).float()


def _no_extras(name: str, dst: object = None, mask: object = None) -> None:
    no_output(name, dst)
    if mask is not None:
        raise UnsupportedOperation(f"{name}: a mask is not supported")


def _result_dtype(name: str, a: torch.Tensor, b: object, dtype: int) -> torch.dtype:
    if isinstance(b, torch.Tensor) and b.dtype != a.dtype and int(dtype) < 0:
        raise UnsupportedOperation(f"{name}: operands of {a.dtype} and {b.dtype} need dtype")
    if int(dtype) < 0:
        return a.dtype
    if int(dtype) not in DEPTH_TO_DTYPE:
        raise UnsupportedOperation(f"{name}: dtype {dtype} unknown")
    return DEPTH_TO_DTYPE[int(dtype)]


def _operand(
    name: str, a: torch.Tensor, b: object, wdt: torch.dtype, round_scalar: bool
) -> torch.Tensor:
    """The second operand as a tensor broadcastable to ``a``: an image, a Scalar (per channel),
    or per-sample Scalars (a tensor [N] or [N, k], k <= 4 values per sample)."""
    if isinstance(b, torch.Tensor) and b.dim() >= 3:
        if b.shape != a.shape:
            raise UnsupportedOperation(
                f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ"
            )
        return b.to(wdt)
    if isinstance(b, torch.Tensor):
        vals = per_sample_scalars(b, a)
    else:
        vals = torch.tensor(scalar_values(b, channels(a), broadcast=True), dtype=torch.float64)
        vals = vals if a.dim() == 4 else vals.reshape(())
    if round_scalar and not a.dtype.is_floating_point:
        vals = torch.round(vals)
    return vals.to(wdt).to(a.device)


def per_sample_scalars(values: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Per-sample Scalars ([N]: one value for every channel; [N, k]: per channel, missing ones
    0) as float64 broadcastable to the batch ``a``."""
    n, cn = a.shape[0], channels(a)
    v = values.to(torch.float64).reshape(n, -1)
    if v.shape[1] == 1:
        v = v.expand(n, cn)
    elif v.shape[1] < cn:
        v = torch.cat([v, v.new_zeros(n, cn - v.shape[1])], dim=1)
    v = v[:, :cn]
    return v.reshape(n, 1, 1, cn) if a.dim() == 4 else v.reshape(n, 1, 1)


def factor(value: Any, a: torch.Tensor) -> Any:
    """A scalar factor, or one per sample (a tensor [N]) shaped to broadcast over ``a``."""
    if isinstance(value, torch.Tensor):
        return value.to(device=a.device, dtype=torch.float64).reshape(
            (a.shape[0],) + (1,) * (a.dim() - 1)
        )
    return float(value)


def _binary(name: str, src1: Any, src2: Any, dtype: int, op: str) -> torch.Tensor:
    if not isinstance(src1, torch.Tensor) and isinstance(src2, torch.Tensor) and op == "add":
        src1, src2 = src2, src1
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype(name, src1, src2, dtype)
    if src1.dtype == out_dtype == torch.uint8 and not (
        isinstance(src2, torch.Tensor) and src2.dim() < 3
    ):
        # Integer fast path: exact in int16, a quarter of float32's memory traffic.
        a16 = src1.to(torch.int16)
        if isinstance(src2, torch.Tensor) and src2.dim() >= 3:
            b16 = _operand(name, src1, src2, torch.int16, round_scalar=False)
        else:
            vals = torch.round(
                torch.tensor(
                    scalar_values(src2, channels(src1), broadcast=True), dtype=torch.float64
                )
            )
            b16 = vals.clamp(-1024, 1024).to(torch.int16).to(src1.device)
            b16 = b16 if src1.dim() == 4 else b16.reshape(())
        r16 = a16 + b16 if op == "add" else a16 - b16 if op == "sub" else (a16 - b16).abs()
        return r16.clamp(0, 255).to(torch.uint8)
    wdt = torch.float64 if torch.float64 in (src1.dtype, out_dtype) else torch.float32
    a = src1.to(wdt)
    b = _operand(name, src1, src2, wdt, round_scalar=True)
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    else:
        r = (a - b).abs()
    return saturate(r, out_dtype)


def add(
    src1: object, src2: object, dst: object = None, mask: object = None, dtype: int = -1
) -> torch.Tensor:
    """``cv2.add`` with saturation."""
    _no_extras("add", dst, mask)
    return _binary("add", src1, src2, dtype, "add")


def subtract(
    src1: object, src2: object, dst: object = None, mask: object = None, dtype: int = -1
) -> torch.Tensor:
    """``cv2.subtract`` with saturation."""
    _no_extras("subtract", dst, mask)
    return _binary("subtract", src1, src2, dtype, "sub")


def absdiff(src1: object, src2: object, dst: object = None) -> torch.Tensor:
    """``cv2.absdiff``."""
    _no_extras("absdiff", dst)
    return _binary("absdiff", src1, src2, -1, "absdiff")


def _f32f(value: object, a: torch.Tensor) -> Any:
    """A factor rounded to float32 as cv2 stores it (per sample: a [N] tensor)."""
    f = factor(value, a)
    return f.float().double() if isinstance(f, torch.Tensor) else _f32(f)


def multiply(
    src1: Any, src2: Any, dst: Any = None, scale: Any = 1, dtype: int = -1
) -> torch.Tensor:
    """``cv2.multiply``: saturate(src1 * src2 * scale), in float32 (float64 for float64 data);
    ``scale`` may be one factor per sample (a tensor [N])."""
    _no_extras("multiply", dst)
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype("multiply", src1, src2, dtype)
    wdt = torch.float64 if torch.float64 in (src1.dtype, out_dtype) else torch.float32
    if not src1.dtype.is_floating_point and isinstance(src2, torch.Tensor):
        wdt = torch.float64  # integer products are exact in cv2
    b = _operand("multiply", src1, src2, wdt, round_scalar=False)
    r = src1.to(wdt) * b
    k = factor(scale, src1)
    if isinstance(k, torch.Tensor) or k != 1.0:
        r = r * (k.to(wdt) if isinstance(k, torch.Tensor) else k)
    return saturate(r, out_dtype)


def addWeighted(
    src1: torch.Tensor,
    alpha: object,
    src2: torch.Tensor,
    beta: object,
    gamma: object,
    dst: object = None,
    dtype: int = -1,
) -> torch.Tensor:
    """``cv2.addWeighted``: saturate(src1 * alpha + src2 * beta + gamma); the factors may be one
    per sample (tensors [N])."""
    _no_extras("addWeighted", dst)
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype("addWeighted", src1, src2, dtype)
    wdt = torch.float64 if torch.float64 in (src1.dtype, out_dtype) else torch.float32
    b = _operand("addWeighted", src1, src2, wdt, round_scalar=False)
    if wdt == torch.float64:
        a, bb, g = factor(alpha, src1), factor(beta, src1), factor(gamma, src1)
        return saturate(src1.double() * a + b * bb + g, out_dtype)
    inner = _fma32(b, _f32f(beta, src1), _f32f(gamma, src1))
    return saturate(_fma32(src1, _f32f(alpha, src1), inner.double()), out_dtype)


def convertScaleAbs(
    src: torch.Tensor, dst: object = None, alpha: object = 1, beta: object = 0
) -> torch.Tensor:
    """``cv2.convertScaleAbs``: uint8 saturate(|src * alpha + beta|); per-sample factors too."""
    _no_extras("convertScaleAbs", dst)
    check_image(src, dtypes=_TESTED)
    if src.dtype == torch.float64:
        return saturate((src * factor(alpha, src) + factor(beta, src)).abs(), torch.uint8)
    return saturate(_fma32(src, _f32f(alpha, src), _f32f(beta, src)).abs(), torch.uint8)


def normalize(
    src: torch.Tensor,
    dst: object = None,
    alpha: object = 1,
    beta: object = 0,
    norm_type: int = NORM_L2,
    dtype: int = -1,
    mask: object = None,
) -> torch.Tensor:
    """``cv2.normalize`` per image: NORM_MINMAX to [min(alpha,beta), max(alpha,beta)], or scale so
    that the INF/L1/L2 norm equals alpha; the result is converted to ``dtype`` as cv2 does.
    ``alpha`` and ``beta`` may be one value per sample (tensors [N])."""
    _no_extras("normalize", dst, mask)
    check_image(src, dtypes=_TESTED)
    out_dtype = src.dtype if int(dtype) < 0 else DEPTH_TO_DTYPE.get(int(dtype))
    if out_dtype is None:
        raise UnsupportedOperation(f"normalize: dtype {dtype} unknown")
    n = src.shape[0]
    flat = src.reshape(n, -1).double()
    nt = int(norm_type)
    eps = 2.220446049250313e-16
    a = torch.as_tensor(alpha, dtype=torch.float64, device=src.device).reshape(-1).expand(n)
    b = torch.as_tensor(beta, dtype=torch.float64, device=src.device).reshape(-1).expand(n)
    if nt == NORM_MINMAX:
        smin, smax = flat.min(dim=1).values, flat.max(dim=1).values
        dmin, dmax = torch.minimum(a, b), torch.maximum(a, b)
        rng = smax - smin
        scale = (dmax - dmin) * torch.where(rng > eps, 1.0 / torch.where(rng > eps, rng, 1.0), 0.0)
        shift = dmin - smin * scale
    elif nt in (NORM_INF, NORM_L1, NORM_L2):
        if nt == NORM_INF:
            norm = flat.abs().max(dim=1).values
        elif nt == NORM_L1:
            norm = flat.abs().sum(dim=1)
        else:
            norm = flat.pow(2).sum(dim=1).sqrt()
        scale = torch.where(norm > eps, a / torch.where(norm > eps, norm, 1.0), 0.0)
        shift = torch.zeros_like(scale)
    else:
        raise UnsupportedOperation(f"normalize: norm_type {norm_type} unsupported")
    shape = (n,) + (1,) * (src.dim() - 1)
    if torch.float64 in (src.dtype, out_dtype):
        return saturate(src.double() * scale.view(shape) + shift.view(shape), out_dtype)
    scale32, shift32 = scale.float().double().view(shape), shift.float().double().view(shape)
    return saturate(_fma32(src, scale32, shift32), out_dtype)


def LUT(src: torch.Tensor, lut: object, dst: object = None) -> torch.Tensor:
    """``cv2.LUT`` for uint8 images: a 256-entry table, shared or one per channel; per sample a
    tensor [N, 256] or [N, 256, C]."""
    _no_extras("LUT", dst)
    check_image(src, dtypes=(torch.uint8,))
    if not isinstance(lut, torch.Tensor):
        raise UnsupportedOperation(f"LUT: expected a tensor table, got {type(lut).__name__}")
    table = lut.to(src.device)
    n, cn = src.shape[0], channels(src)
    if table.dim() >= 2 and table.shape[0] == n and table.shape[1] == 256:
        t = table.reshape(n, 256, -1)
    elif table.numel() == 256:
        return table.reshape(256)[src.long()]
    elif table.numel() == 256 * cn:
        t = table.reshape(1, 256, cn)
    else:
        raise UnsupportedOperation(f"LUT: table of shape {tuple(lut.shape)} for {cn} channels")
    x = as_nhwc(src).long()
    chan = torch.arange(cn, device=src.device).view(1, 1, 1, cn) if t.shape[2] > 1 else 0
    batch = torch.arange(t.shape[0], device=src.device).view(-1, 1, 1, 1)
    out = t[batch, x, chan]
    return out[..., 0] if src.dim() == 3 else out


_OPERANDS = "arrays or Scalars (a number applies to every channel, a tuple per channel)"
_FACTORS = {"alpha": "[N]", "beta": "[N]", "gamma": "[N]"}
_SCALARS = "[N] or [N,k] Scalars"


def _ties(note: str, atol: float = 0.0, rtol: float = 0.0) -> Tolerance:
    """A tolerance that lets up to 1% of the values round a .5 tie the other way (by 1)."""
    return Tolerance(atol=atol, rtol=rtol, max_mismatch_frac=0.01, mismatch_atol=1.0, note=note)


OPS = [
    *(
        op(
            f"cv2.{backend.__name__}",
            backend,
            reproduces=f"{_OPERANDS}, `dtype`; no mask",
            check=check_add,
            dtypes=ARITH_DTYPES,
            per_sample={"src2": _SCALARS},
            tolerance=Tolerance(note="exact (scalars rounded to integers first, as cv2)"),
        )
        for backend in (add, subtract)
    ),
    op(
        "cv2.absdiff",
        absdiff,
        reproduces=_OPERANDS,
        check=check_absdiff,
        dtypes=ARITH_DTYPES,
        per_sample={"src2": _SCALARS},
        tolerance=Tolerance(note="exact"),
    ),
    op(
        "cv2.multiply",
        multiply,
        reproduces=f"{_OPERANDS}, `scale`, `dtype`",
        check=check_multiply,
        dtypes=ARITH_DTYPES,
        per_sample={"src2": _SCALARS, "scale": "[N]"},
        tolerance=_ties(
            "float: product order; uint8 with a fractional scale: rare .5 ties",
            atol=1e-6,
            rtol=1e-6,
        ),
    ),
    op(
        "cv2.addWeighted",
        addWeighted,
        reproduces="alpha, beta, gamma, `dtype`",
        check=check_add_weighted,
        dtypes=ARITH_DTYPES,
        per_sample=_FACTORS,
        tolerance=_ties(
            "cv2's float32 fused multiply-adds are emulated exactly; margin for float32 rounding",
            atol=1e-4,
            rtol=1e-6,
        ),
    ),
    op(
        "cv2.convertScaleAbs",
        convertScaleAbs,
        reproduces="alpha, beta",
        check=check_convert_scale_abs,
        dtypes=ARITH_DTYPES,
        per_sample={"alpha": "[N]", "beta": "[N]"},
        tolerance=_ties(
            "cv2's float32 fused multiply-add is emulated exactly; margin for rare .5 ties"
        ),
    ),
    op(
        "cv2.normalize",
        normalize,
        reproduces="NORM_MINMAX, NORM_INF, NORM_L1, NORM_L2, alpha/beta, dtype",
        check=check_normalize,
        dtypes=ARITH_DTYPES,
        per_sample={"alpha": "[N]", "beta": "[N]"},
        tolerance=_ties(
            "norms in float64 per image; integer outputs may round a .5 tie the other way",
            atol=1e-5,
            rtol=1e-5,
        ),
    ),
    op(
        "cv2.LUT",
        LUT,
        reproduces="256-entry table shared or per channel, any table dtype",
        check=check_lut,
        dtypes=frozenset({"uint8"}),
        per_sample={"lut": "[N,256] or [N,256,C]"},
        tolerance=Tolerance(note="exact"),
    ),
]
