"""Source coordinates of cv2 5's warp kernels (nearest and linear on uint8 and float32 images of
1, 3 or 4 channels): float32 ``fma`` of the inverse matrix, SIMD blocks and a scalar tail per
row, as cv2 computes them, bit for bit.

An ``fma`` rounds the exact ``M0 * x + c`` once. The product of a float32 and a column index is
exact in float64, the sum there may not be: a ``c`` far below the product's last bit is lost,
and a float64 sum that then lies halfway between two float32 values rounds to even, where cv2
rounds toward ``c`` (a source coordinate of 12.5 in float64 that cv2 rounds to 12.499999).
:func:`fma_to_f32` rounds such sums to odd first; :func:`sums_exact` tells, from the matrix alone,
when every sum is exact in float64, so one plain sum and one rounding do.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from codedag.backends.ops.cv2._common import cv2_own


@lru_cache(maxsize=1)
def warp_block() -> int:
    """Pixels per SIMD step of cv2 5's warp kernels here (twice the float32 lanes; 0: none),
    measured from cv2: at column 3 of row 3 the SIMD and scalar coordinates of this map round
    to different source pixels (7.4999995 and 7.5), so the narrowest output that cv2 converts
    there with SIMD is one block wide."""
    import cv2

    src = np.arange(64, dtype=np.float32)[None, :].repeat(2, axis=0)
    m = np.array([[0.777, -0.777, 7.5], [0.0, 0.0, 0.0]], dtype=np.float32)
    for block in (4, 8, 16, 32, 64):
        flags = cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP
        out = cv2_own("warpAffine")(src, m, (block, 4), flags=flags)
        if out[3, 3] == 7.0:
            return block
    return 0


def f32_coords(
    m: np.ndarray | torch.Tensor, dw: int, dh: int, perspective: bool, dev: torch.device
) -> torch.Tensor:
    """Source coordinates (B, 2, P), an x and a y plane, as cv2 5's warp kernels compute them,
    the inverse matrix in float32: SIMD blocks ``fma(M0, x, (y * M1) + M2)``, the scalar tail of
    each row ``fma(x, M0, y * M1) + M2``, each operation rounded to float32; a perspective
    divides by the third row computed the same way (a zero divisor gives inf or NaN: a pixel
    outside). Every row of the matrix in one pass."""
    f32 = torch.float32
    b, rows = m.shape[0], m.shape[1]
    mm = (
        m.to(dev, f32) if isinstance(m, torch.Tensor) else torch.as_tensor(m, dtype=f32, device=dev)
    )
    ma, mb, mc = mm.view(b, rows, 3, 1, 1).unbind(2)
    x, y = _grid(dw, dh, dev)
    exact = isinstance(m, np.ndarray) and sums_exact(m.astype(np.float32), dw, dh)
    fma = _plain_f32 if exact else fma_to_f32
    block = warp_block()
    head = (dw // block) * block if block else 0
    yb = y * mb
    # fma(M0, x, M_x): the product is exact in float64 (float32 * float64 computes in float64,
    # the float32 operand converted exactly), the sum rounded once to float32
    if head == dw:
        out = fma(ma * x, yb + mc)
    else:
        out = torch.empty((b, rows, dh, dw), dtype=f32, device=dev)
        if head:
            out[..., :head] = fma(ma * x[..., :head], yb + mc)
        out[..., head:] = fma(ma * x[..., head:], yb) + mc
    if perspective:
        out = out[:, :2] / out[:, 2:]
    return out.reshape(b, 2, -1)


def fma_to_f32(p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """float32 of the exact sum of ``p``, float64, and ``c``, float32 or float64, rounded once
    (as ``fma`` rounds ``p``, an exact product, plus ``c``): the float64 sum rounded to odd (its
    error, exact by Knuth's two-sum, moves an even last bit one step toward it), which float32
    then rounds once."""
    s = p + c
    pv = s - c
    err = (p - pv) + (c - (s - pv))
    # step where the last bit is even (0) and the sum inexact (True): 0 < True, one op
    step_toward_err = (s.view(torch.int64) & 1) < (err != 0)
    step = torch.nextafter(s, torch.copysign(_infinity(s.device), err))
    return torch.where(step_toward_err, step, s).float()


@lru_cache(maxsize=8)
def _infinity(dev: torch.device) -> torch.Tensor:
    return torch.tensor(math.inf, dtype=torch.float64, device=dev)


@lru_cache(maxsize=32)
def _grid(dw: int, dh: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Destination columns (float64, (1, 1, 1, dw)) and rows (float32, (1, 1, dh, 1))."""
    x = torch.arange(dw, dtype=torch.float64, device=dev).view(1, 1, 1, dw)
    y = torch.arange(dh, dtype=torch.float32, device=dev).view(1, 1, dh, 1)
    return x, y


def _plain_f32(p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (p + c).float()


def sums_exact(m32: np.ndarray, dw: int, dh: int) -> bool:
    """Whether every ``M0 * x + c`` of :func:`f32_coords` is exact in float64, for float32
    matrices (B, rows, 3): ``c`` is ``y * M1 + M2`` (SIMD) or ``y * M1`` (tail), float32. A
    float32 ``v = f * 2**e`` (``frexp``) is a multiple of ``2**(e - 24)``, so both terms are
    multiples of ``2**q``, q the smaller such exponent, and a sum below ``2**(q + 52)`` is
    exact. Zeros add exactly; NaN and inf answer False (the exact emulation decides)."""
    ma, mb, mc = (m32[..., i : i + 1] for i in range(3))
    yb = np.arange(dh, dtype=np.float32) * mb
    c = np.concatenate([yb + mc, yb], axis=-1)
    with np.errstate(all="ignore"):
        q = np.minimum(np.frexp(ma)[1], np.frexp(c)[1]) - 24
        bound = np.abs(ma).astype(np.float64) * max(dw - 1, 0) + np.abs(c)
        fits = bound < np.ldexp(1.0, q + 52)
    return bool(((ma == 0) | (c == 0) | fits).all())
