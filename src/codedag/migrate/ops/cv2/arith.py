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

from codedag.errors import UnsupportedOperation
from codedag.migrate.contract import Fidelity
from codedag.migrate.ops.cv2._adapter import op
from codedag.migrate.ops.cv2._common import (
    DEPTH_TO_DTYPE,
    as_nhwc,
    channels,
    check_image,
    saturate,
    scalar_values,
)

NORM_INF, NORM_L1, NORM_L2, NORM_MINMAX = 1, 2, 4, 32
_TESTED = (torch.uint8, torch.float32, torch.float64)  # the input dtypes tested against cv2


def _f32(v: float) -> float:
    """A Python float rounded to float32, as cv2 stores scale factors for float32 arithmetic."""
    return float(np.float32(v))


def _fma32(x: torch.Tensor, m: float | torch.Tensor, c: float | torch.Tensor) -> torch.Tensor:
    """float32 ``x * m + c`` with one rounding (cv2's SIMD fused multiply-add), via float64."""
    return (x.double() * m + c).float()


def _no_extras(name: str, dst: Any = None, mask: Any = None) -> None:
    if dst is not None:
        raise UnsupportedOperation(f"{name}: an output array dst is not supported")
    if mask is not None:
        raise UnsupportedOperation(f"{name}: a mask is not supported")


def _result_dtype(name: str, a: torch.Tensor, b: Any, dtype: int) -> torch.dtype:
    if isinstance(b, torch.Tensor) and b.dtype != a.dtype and int(dtype) < 0:
        raise UnsupportedOperation(f"{name}: operands of {a.dtype} and {b.dtype} need dtype")
    if int(dtype) < 0:
        return a.dtype
    if int(dtype) not in DEPTH_TO_DTYPE:
        raise UnsupportedOperation(f"{name}: dtype {dtype} unknown")
    return DEPTH_TO_DTYPE[int(dtype)]


def _operand(
    name: str, a: torch.Tensor, b: Any, wdt: torch.dtype, round_scalar: bool
) -> torch.Tensor:
    """The second operand as a tensor broadcastable to ``a`` (a Scalar becomes per-channel)."""
    if isinstance(b, torch.Tensor) and b.dim() >= 3:
        if b.shape != a.shape:
            raise UnsupportedOperation(
                f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ"
            )
        return b.to(wdt)
    vals = torch.tensor(scalar_values(b, channels(a), broadcast=True), dtype=torch.float64)
    if round_scalar and not a.dtype.is_floating_point:
        vals = torch.round(vals)
    vals = vals.to(wdt).to(a.device)
    return vals if a.dim() == 4 else vals.reshape(())


def _binary(name: str, src1: Any, src2: Any, dtype: int, op: str) -> torch.Tensor:
    if not isinstance(src1, torch.Tensor) and isinstance(src2, torch.Tensor) and op == "add":
        src1, src2 = src2, src1
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype(name, src1, src2, dtype)
    if src1.dtype == out_dtype == torch.uint8:
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


def add(src1: Any, src2: Any, dst: Any = None, mask: Any = None, dtype: int = -1) -> torch.Tensor:
    """``cv2.add`` with saturation."""
    _no_extras("add", dst, mask)
    return _binary("add", src1, src2, dtype, "add")


def subtract(
    src1: Any, src2: Any, dst: Any = None, mask: Any = None, dtype: int = -1
) -> torch.Tensor:
    """``cv2.subtract`` with saturation."""
    _no_extras("subtract", dst, mask)
    return _binary("subtract", src1, src2, dtype, "sub")


def absdiff(src1: Any, src2: Any, dst: Any = None) -> torch.Tensor:
    """``cv2.absdiff``."""
    _no_extras("absdiff", dst)
    return _binary("absdiff", src1, src2, -1, "absdiff")


def multiply(
    src1: Any, src2: Any, dst: Any = None, scale: float = 1, dtype: int = -1
) -> torch.Tensor:
    """``cv2.multiply``: saturate(src1 * src2 * scale), in float32 (float64 for float64 data)."""
    _no_extras("multiply", dst)
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype("multiply", src1, src2, dtype)
    wdt = torch.float64 if torch.float64 in (src1.dtype, out_dtype) else torch.float32
    if not src1.dtype.is_floating_point and isinstance(src2, torch.Tensor):
        wdt = torch.float64  # integer products are exact in cv2
    b = _operand("multiply", src1, src2, wdt, round_scalar=False)
    r = src1.to(wdt) * b
    if float(scale) != 1.0:
        r = r * float(scale)
    return saturate(r, out_dtype)


def addWeighted(
    src1: torch.Tensor,
    alpha: float,
    src2: torch.Tensor,
    beta: float,
    gamma: float,
    dst: Any = None,
    dtype: int = -1,
) -> torch.Tensor:
    """``cv2.addWeighted``: saturate(src1 * alpha + src2 * beta + gamma)."""
    _no_extras("addWeighted", dst)
    check_image(src1, "src1", dtypes=_TESTED)
    out_dtype = _result_dtype("addWeighted", src1, src2, dtype)
    wdt = torch.float64 if torch.float64 in (src1.dtype, out_dtype) else torch.float32
    b = _operand("addWeighted", src1, src2, wdt, round_scalar=False)
    if wdt == torch.float64:
        return saturate(src1.double() * alpha + b * beta + gamma, out_dtype)
    inner = _fma32(b, _f32(beta), _f32(gamma))
    return saturate(_fma32(src1, _f32(alpha), inner.double()), out_dtype)


def convertScaleAbs(
    src: torch.Tensor, dst: Any = None, alpha: float = 1, beta: float = 0
) -> torch.Tensor:
    """``cv2.convertScaleAbs``: uint8 saturate(|src * alpha + beta|)."""
    _no_extras("convertScaleAbs", dst)
    check_image(src, dtypes=_TESTED)
    if src.dtype == torch.float64:
        return saturate((src * float(alpha) + float(beta)).abs(), torch.uint8)
    return saturate(_fma32(src, _f32(alpha), _f32(beta)).abs(), torch.uint8)


def normalize(
    src: torch.Tensor,
    dst: Any = None,
    alpha: float = 1,
    beta: float = 0,
    norm_type: int = NORM_L2,
    dtype: int = -1,
    mask: Any = None,
) -> torch.Tensor:
    """``cv2.normalize`` per image: NORM_MINMAX to [min(alpha,beta), max(alpha,beta)], or scale so
    that the INF/L1/L2 norm equals alpha; the result is converted to ``dtype`` as cv2 does."""
    _no_extras("normalize", dst, mask)
    check_image(src, dtypes=_TESTED)
    out_dtype = src.dtype if int(dtype) < 0 else DEPTH_TO_DTYPE.get(int(dtype))
    if out_dtype is None:
        raise UnsupportedOperation(f"normalize: dtype {dtype} unknown")
    n = src.shape[0]
    flat = src.reshape(n, -1).double()
    nt = int(norm_type)
    eps = 2.220446049250313e-16
    if nt == NORM_MINMAX:
        smin, smax = flat.min(dim=1).values, flat.max(dim=1).values
        dmin, dmax = min(float(alpha), float(beta)), max(float(alpha), float(beta))
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
        scale = torch.where(norm > eps, float(alpha) / torch.where(norm > eps, norm, 1.0), 0.0)
        shift = torch.zeros_like(scale)
    else:
        raise UnsupportedOperation(f"normalize: norm_type {norm_type} unsupported")
    shape = (n,) + (1,) * (src.dim() - 1)
    if torch.float64 in (src.dtype, out_dtype):
        return saturate(src.double() * scale.view(shape) + shift.view(shape), out_dtype)
    scale32, shift32 = scale.float().double().view(shape), shift.float().double().view(shape)
    return saturate(_fma32(src, scale32, shift32), out_dtype)


def LUT(src: torch.Tensor, lut: Any, dst: Any = None) -> torch.Tensor:
    """``cv2.LUT`` for uint8 images: a 256-entry table, shared or one per channel."""
    _no_extras("LUT", dst)
    check_image(src, dtypes=(torch.uint8,))
    if not isinstance(lut, torch.Tensor):
        raise UnsupportedOperation(f"LUT: expected a tensor table, got {type(lut).__name__}")
    table = lut.to(src.device)
    if table.numel() == 256:
        return table.reshape(256)[src.long()]
    cn = channels(src)
    if table.numel() != 256 * cn or table.shape[-1] != cn:
        raise UnsupportedOperation(f"LUT: table of shape {tuple(lut.shape)} for {cn} channels")
    t = table.reshape(256, cn)
    x = as_nhwc(src).long()
    chan = torch.arange(cn, device=src.device).expand_as(x)
    return t[x, chan]


_ARITH = frozenset({"uint8", "float32", "float64"})
OPS = [
    op("cv2.add", add, dtypes=_ARITH, fidelity=Fidelity.EXACT),
    op("cv2.subtract", subtract, dtypes=_ARITH, fidelity=Fidelity.EXACT),
    op("cv2.absdiff", absdiff, dtypes=_ARITH, fidelity=Fidelity.EXACT),
    op("cv2.multiply", multiply, dtypes=_ARITH, fidelity=Fidelity.TOLERANCE),
    op("cv2.addWeighted", addWeighted, dtypes=_ARITH, fidelity=Fidelity.TOLERANCE),
    op("cv2.convertScaleAbs", convertScaleAbs, dtypes=_ARITH, fidelity=Fidelity.TOLERANCE),
    op("cv2.normalize", normalize, dtypes=_ARITH, fidelity=Fidelity.TOLERANCE),
    op("cv2.LUT", LUT, dtypes=frozenset({"uint8"}), fidelity=Fidelity.EXACT),
]
