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
from codedag.backends.ops.cv2._common import (
    CV_8S,
    CV_16S,
    CV_16U,
    CV_32S,
    DEPTH_TO_DTYPE,
    as_nhwc,
    channels,
    channels_of,
    check_image,
    finite,
    is_int,
    is_number,
    mat_shape,
    saturate,
    scalar_reason,
    scalar_values,
)
from codedag.errors import UnsupportedOperation

NORM_INF, NORM_L1, NORM_L2, NORM_MINMAX = 1, 2, 4, 32
_TESTED = (torch.uint8, torch.float32, torch.float64)  # the input dtypes tested against cv2


def _f32(v: float) -> float:
    """A Python float rounded to float32, as cv2 stores scale factors for float32 arithmetic."""
    return float(np.float32(v))


def _fma32(x: torch.Tensor, m: float | torch.Tensor, c: float | torch.Tensor) -> torch.Tensor:
    """float32 ``x * m + c`` with one rounding (cv2's SIMD fused multiply-add), via float64."""
    return (x.double() * m + c).float()


def _no_extras(name: str, dst: object = None, mask: object = None) -> None:
    if dst is not None:
        raise UnsupportedOperation(f"{name}: an output array dst is not supported")
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


# -- declared checks ---------------------------------------------------------------------------


def _operand_reason(src1: Any, src2: Any, dtype: Any, scalars: bool = True) -> str | None:
    if not is_int(dtype) or (int(dtype) >= 0 and int(dtype) not in _DEPTHS):
        return f"dtype {dtype!r} is not one of cv2's depths {sorted(_DEPTHS)}"
    if isinstance(src2, np.ndarray):
        if mat_shape(src2) != mat_shape(src1):
            return f"operands of shapes {src1.shape} and {src2.shape}"
        if src2.dtype != src1.dtype and int(dtype) < 0:
            return f"operands of dtypes {src1.dtype} and {src2.dtype} without dtype="
        if src2.dtype.name not in _ARITH:
            return f"src2: dtype {src2.dtype} is not supported"
        return None
    if not scalars:
        return f"src2: {type(src2).__name__}; expected an array"
    if channels_of(src1) > 4:
        return f"a Scalar operand with {channels_of(src1)} channels (cv2 takes up to 4)"
    if src1.size <= 4:
        return "an array of at most 4 values with a Scalar: cv2 treats both as Scalars"
    return scalar_reason(src2)


def check_add(
    src1: object, src2: object, dst: object = None, mask: object = None, dtype: object = -1
) -> str | None:
    """Arrays of one shape and dtype (or ``dtype=``), or a Scalar; no mask."""
    if mask is not None:
        return "a mask is not supported"
    return _operand_reason(src1, src2, dtype)


def check_absdiff(src1: object, src2: object, dst: object = None) -> str | None:
    """Arrays of one shape and dtype, or a Scalar."""
    return _operand_reason(src1, src2, -1)


def check_multiply(
    src1: object, src2: object, dst: object = None, scale: object = 1, dtype: object = -1
) -> str | None:
    """As ``add``, with a numeric scale."""
    if not is_number(scale):
        return f"scale {scale!r} is not a number"
    return _operand_reason(src1, src2, dtype)


def check_add_weighted(
    src1: object,
    alpha: object,
    src2: object,
    beta: object,
    gamma: object,
    dst: object = None,
    dtype: object = -1,
) -> str | None:
    """Two arrays of one shape and dtype (or ``dtype=``), numeric factors."""
    if not all(is_number(v) for v in (alpha, beta, gamma)):
        return f"factors {(alpha, beta, gamma)!r} are not numbers"
    return _operand_reason(src1, src2, dtype, scalars=False)


def check_convert_scale_abs(
    src: object, dst: object = None, alpha: object = 1, beta: object = 0
) -> str | None:
    """Numeric factors."""
    if not (is_number(alpha) and is_number(beta)):
        return f"factors {(alpha, beta)!r} are not numbers"
    return None


def check_normalize(
    src: Any,
    dst: Any = None,
    alpha: Any = 1,
    beta: Any = 0,
    norm_type: Any = NORM_L2,
    dtype: Any = -1,
    mask: Any = None,
) -> str | None:
    """MINMAX, INF, L1 or L2 norms to a known depth; no mask."""
    if mask is not None:
        return "a mask is not supported"
    if not (is_number(alpha) and is_number(beta)):
        return f"alpha, beta {(alpha, beta)!r} are not numbers"
    if not is_int(norm_type) or int(norm_type) not in (NORM_INF, NORM_L1, NORM_L2, NORM_MINMAX):
        return f"norm_type {norm_type!r} unsupported; expected NORM_INF, L1, L2 or MINMAX"
    if not is_int(dtype) or (int(dtype) >= 0 and int(dtype) not in _DEPTHS):
        return f"dtype {dtype!r} is not one of cv2's depths {sorted(_DEPTHS)}"
    if src.dtype.kind == "f" and not finite(src):
        return "non-finite values (cv2's norms of NaN and inf are not reproduced)"
    return None


def check_lut(src: Any, lut: Any, dst: Any = None) -> str | None:
    """A table of 256 entries, with 1 or the image's channels."""
    if not isinstance(lut, np.ndarray) or lut.dtype.name not in _LUT_DTYPES:
        return f"lut: {type(lut).__name__} {getattr(lut, 'dtype', '')}; expected a NumPy table"
    cn = int(lut.shape[2]) if lut.ndim == 3 else 1
    total = lut.size // cn
    if total != 256 or cn not in (1, channels_of(src)) or lut.ndim > 3:
        return f"lut of shape {lut.shape} for an image of {channels_of(src)} channels"
    return None


_DEPTHS = frozenset(DEPTH_TO_DTYPE) - {CV_16U, CV_8S, CV_16S, CV_32S}
_LUT_DTYPES = frozenset({"uint8", "int8", "uint16", "int16", "int32", "float32", "float64"})
_OPERANDS = "arrays or Scalars (a number applies to every channel, a tuple per channel)"
_ARITH = frozenset({"uint8", "float32", "float64"})
_FACTORS = {"alpha": "[N]", "beta": "[N]", "gamma": "[N]"}
OPS = [
    op(
        "cv2.add",
        add,
        reproduces=f"{_OPERANDS}, `dtype`; no mask",
        check=check_add,
        dtypes=_ARITH,
        per_sample={"src2": "[N] or [N,k] Scalars"},
        tolerance=Tolerance(note="exact (scalars rounded to integers first, as cv2)"),
    ),
    op(
        "cv2.subtract",
        subtract,
        reproduces=f"{_OPERANDS}, `dtype`; no mask",
        check=check_add,
        dtypes=_ARITH,
        per_sample={"src2": "[N] or [N,k] Scalars"},
        tolerance=Tolerance(note="exact (scalars rounded to integers first, as cv2)"),
    ),
    op(
        "cv2.absdiff",
        absdiff,
        reproduces=_OPERANDS,
        check=check_absdiff,
        dtypes=_ARITH,
        per_sample={"src2": "[N] or [N,k] Scalars"},
        tolerance=Tolerance(note="exact"),
    ),
    op(
        "cv2.multiply",
        multiply,
        reproduces=f"{_OPERANDS}, `scale`, `dtype`",
        check=check_multiply,
        dtypes=_ARITH,
        per_sample={"src2": "[N] or [N,k] Scalars", "scale": "[N]"},
        tolerance=Tolerance(
            atol=1e-6,
            rtol=1e-6,
            max_mismatch_frac=0.01,
            mismatch_atol=1.0,
            note="float: product order; uint8 with a fractional scale: rare .5 ties",
        ),
    ),
    op(
        "cv2.addWeighted",
        addWeighted,
        reproduces="alpha, beta, gamma, `dtype`",
        check=check_add_weighted,
        dtypes=_ARITH,
        per_sample=_FACTORS,
        tolerance=Tolerance(
            atol=1e-4,
            rtol=1e-6,
            max_mismatch_frac=0.01,
            mismatch_atol=1.0,
            note="cv2's float32 fused multiply-adds are emulated exactly; margin for float32 "
            "rounding",
        ),
    ),
    op(
        "cv2.convertScaleAbs",
        convertScaleAbs,
        reproduces="alpha, beta",
        check=check_convert_scale_abs,
        dtypes=_ARITH,
        per_sample={"alpha": "[N]", "beta": "[N]"},
        tolerance=Tolerance(
            max_mismatch_frac=0.01,
            mismatch_atol=1.0,
            note="cv2's float32 fused multiply-add is emulated exactly; margin for rare .5 ties",
        ),
    ),
    op(
        "cv2.normalize",
        normalize,
        reproduces="NORM_MINMAX, NORM_INF, NORM_L1, NORM_L2, alpha/beta, dtype",
        check=check_normalize,
        dtypes=_ARITH,
        per_sample={"alpha": "[N]", "beta": "[N]"},
        tolerance=Tolerance(
            atol=1e-5,
            rtol=1e-5,
            max_mismatch_frac=0.01,
            mismatch_atol=1.0,
            note="norms in float64 per image; integer outputs may round a .5 tie the other way",
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
