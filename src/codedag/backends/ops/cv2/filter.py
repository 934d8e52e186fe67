"""cv2 linear and median filters on torch, batch-first: GaussianBlur, blur, boxFilter, filter2D,
Sobel, medianBlur.

Our own torch code around ``conv2d`` rather than kornia's filters:
``kornia.filters.gaussian_blur2d`` matches cv2 exactly on float images for a given sigma with
reflect101 borders (measured), but not cv2's kernel rules (fixed tables for sigma <= 0 and ksize <=
9: 160 levels off; ksize from sigma by depth), nor uint8's 8-bit fixed-point kernel and half-up
rounding, nor BORDER_REFLECT (kornia has no symmetric padding) or pads wider than the image, nor
cv2's box-filter rounding. Here the kernel comes from cv2's
``getGaussianKernel``/``getDerivKernels`` rules, borders are built with cv2's ``borderInterpolate``
(every pad size), and the filter runs as a depthwise convolution in float32 (float64 for float64
data). uint8 results round half to even and saturate, except where cv2 rounds otherwise (noted at
the function).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    BORDER_DEFAULT,
    BORDER_REPLICATE,
    as_nhwc,
    border_type_base,
    check_image,
    like_input,
    no_output,
    pad_nhwc,
    saturate,
)
from codedag.backends.ops.cv2._correlate import (
    FILTER_BORDERS,
    anchor_point,
    correlate,
    correlate_int,
    dft_integer_reason,
    filter_kernel,
    fma_taps,
    output_dtype,
    per_sample_value,
    uses_dft,
)
from codedag.backends.ops.cv2._filter_checks import (
    check_blur,
    check_box_filter,
    check_filter2d,
    check_gaussian_blur,
    check_median_blur,
    check_sobel,
)
from codedag.backends.ops.cv2._filter_kernels import (
    deriv_kernel,
    gaussian_kernel,
    gaussian_kernel_u8,
    gaussian_size,
)
from codedag.errors import UnsupportedOperation

_DTYPES = (torch.uint8, torch.float32, torch.float64)  # the dtypes tested against cv2


def _ksize(ksize: Any) -> tuple[int, int]:
    if isinstance(ksize, int | np.integer):
        return int(ksize), int(ksize)
    kw, kh = (int(v) for v in ksize)
    return kw, kh


def _filter_input(name: str, src: torch.Tensor, dst: object, border_type: int) -> int:
    """Check a filter's image (of a tested dtype) and that no ``dst`` is passed; returns cv2's
    base border type of ``border_type``."""
    check_image(src, dtypes=_DTYPES)
    no_output(name, dst)
    return border_type_base(border_type, FILTER_BORDERS)


def GaussianBlur(
    src: torch.Tensor,
    ksize: object,
    sigmaX: float,
    dst: object = None,
    sigmaY: float = 0,
    borderType: int = BORDER_DEFAULT,
    hint: object = None,
) -> torch.Tensor:
    """``cv2.GaussianBlur`` with cv2's kernel rules (sigma <= 0, ksize 0 from sigma by depth)."""
    border = _filter_input("GaussianBlur", src, dst, borderType)
    kw, kh, sx, sy = gaussian_size(_ksize(ksize), sigmaX, sigmaY, src.dtype == torch.uint8)
    if kw <= 0 or kh <= 0 or kw % 2 == 0 or kh % 2 == 0:
        raise UnsupportedOperation(f"GaussianBlur: ksize must be odd and positive, got {(kw, kh)}")
    if kw == 1 and kh == 1:
        return src.clone()
    anchor = (kw // 2, kh // 2)
    if src.dtype == torch.uint8 and kw % 2 == 1 and kh % 2 == 1:
        # cv2's fixed-point path: integer kernels (sum 256 each), exact sums, round half up.
        kx, ky = gaussian_kernel_u8(kw, sx), gaussian_kernel_u8(kh, sy)
        acc = correlate_int(src, kx, ky, anchor, border)
        acc += 32768
        acc >>= 16
        return acc.to(torch.uint8)  # sums of 65536 * bytes at most: no saturation needed
    kx, ky = gaussian_kernel(kw, sx), gaussian_kernel(kh, sy)
    return correlate(src, kx, ky, None, anchor, border, src.dtype)


def boxFilter(
    src: torch.Tensor,
    ddepth: int,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    normalize: bool = True,
    borderType: int = BORDER_DEFAULT,
) -> torch.Tensor:
    """``cv2.boxFilter`` (normalized or plain sums, any anchor)."""
    border = _filter_input("boxFilter", src, dst, borderType)
    kw, kh = _ksize(ksize)
    if kw <= 0 or kh <= 0:
        raise UnsupportedOperation(f"boxFilter: ksize must be positive, got {(kw, kh)}")
    out_dtype = output_dtype(src, ddepth)
    anc = anchor_point(anchor, kw, kh)
    ones_x, ones_y = np.ones(kw), np.ones(kh)
    if normalize and not out_dtype.is_floating_point:
        # Exact integer sums, then cv2's integer division of its column filter (below).
        wdt = torch.float64 if src.dtype == torch.float64 else torch.float32
        acc = correlate(src, ones_x, ones_y, None, anc, border, wdt).double()
        area = kw * kh
        if area == 1:
            return saturate(acc, out_dtype)
        if src.dtype == torch.uint8 and out_dtype == torch.uint8 and area <= 256:
            return _fixed_point_mean_u8(acc, area, src)
        return _scaled_sum(acc, area, out_dtype, src)
    kx = ones_x / kw if normalize else ones_x
    ky = ones_y / kh if normalize else ones_y
    return correlate(src, kx, ky, None, anc, border, out_dtype)


def _scalar_tail(src: torch.Tensor, lanes: int) -> torch.Tensor:
    """(W, C) mask of the values of each image row that cv2's vector loops leave to their scalar
    tail: the last ``width % lanes`` of the row's ``width`` = columns x channels values."""
    x = as_nhwc(src)
    width = x.shape[2] * x.shape[3]
    index = torch.arange(width, device=src.device).view(x.shape[2], x.shape[3])
    return index >= width - width % lanes


def _fixed_point_mean_u8(acc: torch.Tensor, area: int, src: torch.Tensor) -> torch.Tensor:
    """uint8 box means of up to 256 pixels as cv2's ``ColumnSum<ushort, uchar>`` computes them:
    ``(sum + delta) * scale >> 23`` with cv2's 23-bit reciprocal of the area.

    Only two 255s (area 2) reach 256: cv2's vector loop saturates it to 255, its scalar tail (the
    last ``width % 16`` values of each row) casts it to uchar, which wraps to 0.
    """
    scale_f = float(1 << 23) / area
    scale, delta = math.floor(scale_f), area // 2
    if scale_f - scale < 0.5:
        delta += 1
    else:
        scale += 1
    q = as_nhwc((acc.long() + delta) * scale >> 23)
    out = torch.where(_scalar_tail(src, 16), q & 255, q.clamp(0, 255))
    return like_input(out.to(torch.uint8), src)


def _scaled_sum(
    acc: torch.Tensor, area: int, out_dtype: torch.dtype, src: torch.Tensor
) -> torch.Tensor:
    """Box means into integer outputs as cv2's ``ColumnSum<int, T>`` computes them: the vector
    loop rounds ``float32(sum) * float32(1 / area)`` half to even, the scalar tail (the last
    ``width % 8`` values of each row) ``sum * (1 / area)`` in double."""
    scale = 1.0 / area
    vector = torch.round(acc.float() * torch.tensor(scale, dtype=torch.float32)).double()
    scalar = torch.round(acc * scale)
    tail = _scalar_tail(src, 8)
    out = torch.where(tail, as_nhwc(scalar), as_nhwc(vector))
    return like_input(saturate(out, out_dtype), src)


def blur(
    src: torch.Tensor,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    borderType: int = BORDER_DEFAULT,
) -> torch.Tensor:
    """``cv2.blur``: the normalized box filter."""
    return boxFilter(src, -1, ksize, dst, anchor, True, borderType)


def filter2D(
    src: torch.Tensor,
    ddepth: int,
    kernel: object,
    dst: object = None,
    anchor: object = (-1, -1),
    delta: float = 0,
    borderType: int = BORDER_DEFAULT,
) -> torch.Tensor:
    """``cv2.filter2D``: correlation with one single-channel kernel applied to every channel.

    Below cv2's DFT threshold (:func:`uses_dft`) uint8 and float32 data are correlated as cv2's
    ``Filter2D`` does, bit for bit: starting from ``delta``, one float32 fused multiply-add per
    non-zero kernel tap in row-major order. Larger kernels (cv2 correlates them through a float32
    DFT) and float64 data run as a convolution in float64/float32, except into integer outputs:
    the DFT's rounding noise decides the exact halves (1-2% of the values of a normalized
    motion-blur line), so those calls stay with cv2.
    """
    border = _filter_input("filter2D", src, dst, borderType)
    k = filter_kernel(kernel)
    kh, kw = k.shape
    out_dtype = output_dtype(src, ddepth)
    anc = anchor_point(anchor, kw, kh)
    d = per_sample_value(delta, src)
    dft = uses_dft(src.dtype, out_dtype, kw, kh)
    if dft and not out_dtype.is_floating_point:
        raise UnsupportedOperation(dft_integer_reason(kw, kh))
    exact = src.dtype in (torch.uint8, torch.float32) and out_dtype != torch.float64
    if exact and not dft:
        return fma_taps(src, k, anc, border, out_dtype, d)
    return correlate(src, None, None, k, anc, border, out_dtype, d)


def Sobel(
    src: torch.Tensor,
    ddepth: int,
    dx: int,
    dy: int,
    dst: object = None,
    ksize: int = 3,
    scale: float = 1,
    delta: float = 0,
    borderType: int = BORDER_DEFAULT,
) -> torch.Tensor:
    """``cv2.Sobel`` (ksize 1, 3, 5, 7, or -1 for Scharr) with scale and delta."""
    border = _filter_input("Sobel", src, dst, borderType)
    dx, dy, ksize = int(dx), int(dy), int(ksize)
    if ksize == -1 and (dx < 0 or dy < 0 or dx + dy != 1):
        raise UnsupportedOperation(f"Scharr needs dx + dy == 1, got {dx=}, {dy=}")
    if ksize not in (-1, 1, 3, 5, 7):
        raise UnsupportedOperation(f"Sobel: ksize {ksize} unsupported; expected -1, 1, 3, 5 or 7")
    kx, ky = deriv_kernel(dx, ksize), deriv_kernel(dy, ksize) * float(scale)
    anchor = (len(kx) // 2, len(ky) // 2)
    return correlate(src, kx, ky, None, anchor, border, output_dtype(src, ddepth), float(delta))


def medianBlur(src: torch.Tensor, ksize: int, dst: object = None) -> torch.Tensor:
    """``cv2.medianBlur`` (replicated border); float32 for ksize 3 and 5 as in cv2."""
    check_image(src, dtypes=(torch.uint8, torch.float32))
    no_output("medianBlur", dst)
    k = int(ksize)
    if k < 1 or k % 2 == 0:
        raise UnsupportedOperation(f"medianBlur: ksize must be odd and positive, got {ksize}")
    if k == 1:
        return src.clone()
    if src.dtype != torch.uint8 and k > 5:
        raise UnsupportedOperation(f"medianBlur: ksize {k} > 5 needs uint8 (cv2's own limit)")
    x = as_nhwc(src)
    r = k // 2
    n, h, w, c = x.shape
    per_image = max(1, (h * w * c * k * k))
    chunk = max(1, (1 << 26) // per_image)
    outs = []
    for i in range(0, n, chunk):
        xp = pad_nhwc(x[i : i + chunk], r, r, r, r, BORDER_REPLICATE)
        patches = xp.unfold(1, k, 1).unfold(2, k, 1)  # (n, h, w, c, k, k)
        flat = patches.reshape(*patches.shape[:4], k * k)
        if flat.dtype in (torch.uint8, torch.uint16):
            flat = flat.to(torch.int32)
        outs.append(flat.median(dim=-1).values.to(src.dtype))
    return like_input(torch.cat(outs, dim=0), src)


_FILTER_BORDER_MODES = "borders constant/replicate/reflect/reflect101"
_FILTER = frozenset({"uint8", "float32", "float64"})
_F32_SUM = "float results differ from cv2 by float32 summation order only"
_BOX_SUMS = Tolerance(atol=1e-3, rtol=1e-5, note=f"integer outputs exact; {_F32_SUM}")
OPS = [
    op(
        "cv2.GaussianBlur",
        GaussianBlur,
        reproduces=(
            "ksize (0 = from sigma, 3/4 sigma by depth), sigmaX/sigmaY (0 = from ksize, cv2's "
            f"fixed tables up to 9), {_FILTER_BORDER_MODES}"
        ),
        check=check_gaussian_blur,
        dtypes=_FILTER,
        tolerance=Tolerance(
            atol=1e-3, rtol=1e-5, note=f"uint8 bit-exact (cv2's fixed-point kernel); {_F32_SUM}"
        ),
    ),
    op(
        "cv2.blur",
        blur,
        reproduces=f"ksize, anchor, {_FILTER_BORDER_MODES}",
        check=check_blur,
        dtypes=_FILTER,
        tolerance=_BOX_SUMS,
    ),
    op(
        "cv2.boxFilter",
        boxFilter,
        reproduces=f"ddepth, ksize, anchor, normalize, {_FILTER_BORDER_MODES}",
        check=check_box_filter,
        dtypes=_FILTER,
        tolerance=_BOX_SUMS,
    ),
    op(
        "cv2.filter2D",
        filter2D,
        reproduces=f"any kernel, anchor, delta, ddepth, {_FILTER_BORDER_MODES}",
        check=check_filter2d,
        dtypes=_FILTER,
        per_sample={"delta": "[N]"},
        tolerance=Tolerance(
            atol=1e-2,
            rtol=1e-5,
            note="uint8 bit-exact (cv2's float32 fused multiply-adds in its tap order); float32 "
            "the same except the scalar tail of each row (a float32 ulp); kernels of 130 taps or "
            "more (50 for other depths) go through cv2's float32 DFT: float outputs within 1e-2 "
            "on 0..255, integer outputs left to cv2 (the DFT's noise rounds exact halves)",
        ),
    ),
    op(
        "cv2.Sobel",
        Sobel,
        reproduces=(
            "dx, dy, ksize 1/3/5/7 and -1 (Scharr), scale, delta, ddepth (16S/32F/64F/-1), "
            f"{_FILTER_BORDER_MODES}"
        ),
        check=check_sobel,
        dtypes=_FILTER,
        tolerance=Tolerance(
            atol=2e-2,
            rtol=1e-5,
            note="integer outputs exact; float32 sums of up to ~1e5 (7x7 derivative kernels on "
            "0..255 data) round differently from cv2's, cancelling to ~2e-3 where cv2 gets 0",
        ),
    ),
    op(
        "cv2.medianBlur",
        medianBlur,
        reproduces="ksize (any odd for uint8 images of 1, 3 or 4 channels, 3/5 otherwise, as cv2)",
        check=check_median_blur,
        dtypes=frozenset({"uint8", "float32"}),
        tolerance=Tolerance(note="exact"),
    ),
]
