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
import platform
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from codedag.backends.contract import Tolerance
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_DEFAULT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
    CV_8U,
    CV_16S,
    CV_32F,
    CV_64F,
    DEPTH_TO_DTYPE,
    as_nhwc,
    border_reason,
    border_type_base,
    channels_of,
    check_image,
    finite,
    int_pair,
    is_int,
    is_number,
    like_input,
    pad_nhwc,
    saturate,
)
from codedag.errors import UnsupportedOperation

_FILTER_BORDERS = (BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_REFLECT_101)
_DTYPES = (torch.uint8, torch.float32, torch.float64)  # the dtypes tested against cv2
_SMALL_GAUSSIAN = {
    1: [1.0],
    3: [0.25, 0.5, 0.25],
    5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
    7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125],
    9: [v / 256 for v in (4, 13, 30, 51, 60, 51, 30, 13, 4)],  # cv2 5's table
}


def gaussian_kernel(ksize: int, sigma: float) -> np.ndarray:
    """``cv2.getGaussianKernel(ksize, sigma)`` as float64."""
    if ksize % 2 == 1 and ksize <= 9 and sigma <= 0:
        return np.array(_SMALL_GAUSSIAN[ksize])
    sigma_x = sigma if sigma > 0 else ((ksize - 1) * 0.5 - 1) * 0.3 + 0.8
    x = np.arange(ksize) - (ksize - 1) * 0.5
    k = np.exp(-0.5 / (sigma_x * sigma_x) * x * x)
    return k / k.sum()


def deriv_kernel(order: int, ksize: int) -> np.ndarray:
    """One axis of ``cv2.getDerivKernels`` (Sobel; ksize -1 is Scharr)."""
    if ksize == -1:
        return np.array([3.0, 10.0, 3.0]) if order == 0 else np.array([-1.0, 0.0, 1.0])
    if ksize == 1 and order > 0:
        ksize = 3
    if ksize <= order:
        raise UnsupportedOperation(f"Sobel: ksize {ksize} must exceed the derivative order {order}")
    return _deriv_exact(order, ksize)


def gaussian_kernel_u8(ksize: int, sigma: float) -> np.ndarray:
    """cv2's bit-exact uint8 Gaussian kernel: 8 fraction bits, error diffusion, sum exactly 256."""
    if ksize % 2 == 1 and ksize <= 9 and sigma <= 0:
        return np.round(np.array(_SMALL_GAUSSIAN[ksize]) * 256)
    sigma_x = sigma if sigma > 0 else ksize * 0.15 + 0.35
    scale2x = -0.125 / (sigma_x * sigma_x)
    half = (ksize - 1) // 2
    vals = np.zeros(ksize)
    for i, x in enumerate(range(1 - ksize, 1 - ksize + 2 * half, 2)):
        vals[i] = math.exp(x * x * scale2x)
    total = 2 * vals[:half].sum()
    if ksize % 2 == 1:
        vals[half] = 1.0
        total += 1.0
    vals[: half + 1] /= total
    out = np.zeros(ksize)
    err, acc = 0.0, 0
    for i in range(half):
        adj = vals[i] * 256 + err
        v0 = int(np.rint(adj))
        err = adj - v0
        out[i] = out[ksize - 1 - i] = v0
        acc += v0
    out[half] = 256 - 2 * acc
    return out


def _deriv_exact(order: int, ksize: int) -> np.ndarray:
    ker = [0] * (ksize + 1)
    ker[0] = 1
    for _ in range(ksize - order - 1):
        old = ker[0]
        for j in range(1, ksize + 1):
            new = ker[j] + ker[j - 1]
            ker[j - 1] = old
            old = new
    for _ in range(order):
        old = -ker[0]
        for j in range(1, ksize + 1):
            new = ker[j - 1] - ker[j]
            ker[j - 1] = old
            old = new
    return np.array(ker[:ksize], dtype=np.float64)


def _out_dtype(src: torch.Tensor, ddepth: int) -> torch.dtype:
    if int(ddepth) < 0:
        return src.dtype
    if int(ddepth) not in DEPTH_TO_DTYPE:
        raise UnsupportedOperation(f"ddepth {ddepth} unknown")
    return DEPTH_TO_DTYPE[int(ddepth)]


def _anchor(anchor: Any, kw: int, kh: int) -> tuple[int, int]:
    ax, ay = (-1, -1) if anchor is None else (int(anchor[0]), int(anchor[1]))
    ax = kw // 2 if ax < 0 else ax
    ay = kh // 2 if ay < 0 else ay
    if not (0 <= ax < kw and 0 <= ay < kh):
        raise UnsupportedOperation(f"anchor {anchor} outside a {kw}x{kh} kernel")
    return ax, ay


def _correlate(
    src: torch.Tensor,
    kx: np.ndarray | None,
    ky: np.ndarray | None,
    k2d: np.ndarray | None,
    anchor: tuple[int, int],
    border: int,
    out_dtype: torch.dtype,
    delta: Any = 0.0,
) -> torch.Tensor:
    """Correlate every channel with a separable (kx, ky) or full 2-D kernel, cv2-style borders."""
    wdt = torch.float64 if torch.float64 in (src.dtype, out_dtype) else torch.float32
    x = as_nhwc(src)
    if k2d is not None:
        kh, kw = k2d.shape
    else:
        assert kx is not None and ky is not None
        kh, kw = len(ky), len(kx)
    ax, ay = anchor
    xp = pad_nhwc(x.to(wdt), ay, kh - 1 - ay, ax, kw - 1 - ax, border, [0.0] * x.shape[3])
    c = x.shape[3]
    t = xp.permute(0, 3, 1, 2)
    if k2d is not None:
        w = torch.as_tensor(k2d, dtype=wdt, device=src.device).expand(c, 1, kh, kw)
        t = F.conv2d(t, w.contiguous(), groups=c)
    else:
        wx = torch.as_tensor(kx, dtype=wdt, device=src.device).view(1, 1, 1, kw).expand(c, 1, 1, kw)
        wy = torch.as_tensor(ky, dtype=wdt, device=src.device).view(1, 1, kh, 1).expand(c, 1, kh, 1)
        t = F.conv2d(t, wx.contiguous(), groups=c)
        t = F.conv2d(t, wy.contiguous(), groups=c)
    if isinstance(delta, torch.Tensor):
        t = t + delta.to(wdt).reshape(-1, 1, 1, 1)
    elif delta:
        t = t + delta
    out = saturate(t.permute(0, 2, 3, 1), out_dtype)
    return like_input(out.contiguous(), src)


def _correlate_int(
    src: torch.Tensor, kx: np.ndarray, ky: np.ndarray, anchor: tuple[int, int], border: int
) -> torch.Tensor:
    """Separable correlation of uint8 images with integer kernels, in int32: each tap one
    in-place add of a shifted view (rows of whole pixels are contiguous: no strided passes)."""
    x = as_nhwc(src)
    kh, kw = len(ky), len(kx)
    ax, ay = anchor
    h, w = int(x.shape[1]), int(x.shape[2])
    xp = pad_nhwc(x, ay, kh - 1 - ay, ax, kw - 1 - ax, border).to(torch.int32)
    rows = _taps(xp, kx, 2, w)
    return like_input(_taps(rows, ky, 1, h), src)


def _taps(x: torch.Tensor, kernel: np.ndarray, dim: int, size: int) -> torch.Tensor:
    out: torch.Tensor | None = None
    for offset, weight in enumerate(int(k) for k in kernel):
        if weight == 0:
            continue
        view = x.narrow(dim, offset, size)
        if out is None:
            out = view * weight
        else:
            out.add_(view, alpha=weight)
    assert out is not None
    return out


def gaussian_size(
    ksize: tuple[int, int], sigma_x: float, sigma_y: float, u8: bool
) -> tuple[int, int, float, float]:
    """cv2's kernel size and sigmas of a GaussianBlur call (a size of 0 from sigma, by depth)."""
    kw, kh = ksize
    sx = max(float(sigma_x), 0.0)
    sy = max(float(sigma_y), 0.0)
    if sy <= 0:
        sy = sx
    mult = 3 if u8 else 4
    if kw <= 0 and sx > 0:
        kw = int(np.rint(sx * mult * 2 + 1)) | 1
    if kh <= 0 and sy > 0:
        kh = int(np.rint(sy * mult * 2 + 1)) | 1
    return kw, kh, sx, sy


def _ksize(ksize: Any) -> tuple[int, int]:
    if isinstance(ksize, int | np.integer):
        return int(ksize), int(ksize)
    kw, kh = (int(v) for v in ksize)
    return kw, kh


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
    check_image(src, dtypes=_DTYPES)
    if dst is not None:
        raise UnsupportedOperation("GaussianBlur: an output array dst is not supported")
    border = border_type_base(borderType, _FILTER_BORDERS)
    kw, kh, sx, sy = gaussian_size(_ksize(ksize), sigmaX, sigmaY, src.dtype == torch.uint8)
    if kw <= 0 or kh <= 0 or kw % 2 == 0 or kh % 2 == 0:
        raise UnsupportedOperation(f"GaussianBlur: ksize must be odd and positive, got {(kw, kh)}")
    if kw == 1 and kh == 1:
        return src.clone()
    anchor = (kw // 2, kh // 2)
    if src.dtype == torch.uint8 and kw % 2 == 1 and kh % 2 == 1:
        # cv2's fixed-point path: integer kernels (sum 256 each), exact sums, round half up.
        kx, ky = gaussian_kernel_u8(kw, sx), gaussian_kernel_u8(kh, sy)
        acc = _correlate_int(src, kx, ky, anchor, border)
        acc += 32768
        acc >>= 16
        return acc.to(torch.uint8)  # sums of 65536 * bytes at most: no saturation needed
    kx, ky = gaussian_kernel(kw, sx), gaussian_kernel(kh, sy)
    return _correlate(src, kx, ky, None, anchor, border, src.dtype)


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
    check_image(src, dtypes=_DTYPES)
    if dst is not None:
        raise UnsupportedOperation("boxFilter: an output array dst is not supported")
    border = border_type_base(borderType, _FILTER_BORDERS)
    kw, kh = _ksize(ksize)
    if kw <= 0 or kh <= 0:
        raise UnsupportedOperation(f"boxFilter: ksize must be positive, got {(kw, kh)}")
    out_dtype = _out_dtype(src, ddepth)
    anc = _anchor(anchor, kw, kh)
    ones_x, ones_y = np.ones(kw), np.ones(kh)
    if normalize and not out_dtype.is_floating_point:
        # Exact integer sums, then cv2's integer division of its column filter (below).
        wdt = torch.float64 if src.dtype == torch.float64 else torch.float32
        acc = _correlate(src, ones_x, ones_y, None, anc, border, wdt).double()
        area = kw * kh
        if area == 1:
            return saturate(acc, out_dtype)
        if src.dtype == torch.uint8 and out_dtype == torch.uint8 and area <= 256:
            return _fixed_point_mean_u8(acc, area, src)
        return _scaled_sum(acc, area, out_dtype, src)
    kx = ones_x / kw if normalize else ones_x
    ky = ones_y / kh if normalize else ones_y
    return _correlate(src, kx, ky, None, anc, border, out_dtype)


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
    check_image(src, dtypes=_DTYPES)
    if dst is not None:
        raise UnsupportedOperation("filter2D: an output array dst is not supported")
    border = border_type_base(borderType, _FILTER_BORDERS)
    k = filter_kernel(kernel)
    kh, kw = k.shape
    out_dtype = _out_dtype(src, ddepth)
    anc = _anchor(anchor, kw, kh)
    d = _per_sample(delta, src)
    dft = uses_dft(src.dtype, out_dtype, kw, kh)
    if dft and not out_dtype.is_floating_point:
        raise UnsupportedOperation(dft_integer_reason(kw, kh))
    exact = src.dtype in (torch.uint8, torch.float32) and out_dtype != torch.float64
    if exact and not dft:
        return _fma_taps(src, k, anc, border, out_dtype, d)
    return _correlate(src, None, None, k, anc, border, out_dtype, d)


def _per_sample(value: Any, src: torch.Tensor) -> Any:
    """A number, or one per sample (a tensor [N]) as (N, 1, 1, 1) float64."""
    if isinstance(value, torch.Tensor):
        return value.to(device=src.device, dtype=torch.float64).reshape(-1, 1, 1, 1)
    return float(value)


def filter_kernel(kernel: object) -> np.ndarray:
    """A filter2D kernel as a 2-D float64 array (a 1-D one is a column, as cv2 sees it)."""
    if isinstance(kernel, torch.Tensor):
        kernel = kernel.detach().cpu().numpy()
    k = np.asarray(kernel, dtype=np.float64)
    return k[:, None] if k.ndim == 1 else k


_SSE3 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
"""cv2's ``checkHardwareSupport(CV_CPU_SSE3)``: every x86 CPU cv2 wheels run on has it; ARM
and other machines have no SSE3, so their threshold is 50 taps for every depth."""


def uses_dft(sdtype: torch.dtype, ddtype: torch.dtype, kw: int, kh: int) -> bool:
    """Whether cv2's filter2D correlates through a DFT (cv2's ``dftFilter2D``): kernels of
    ``kw * kh >= 130`` taps for uint8 to uint8/int16 and float32 to float32 on a CPU with SSE3,
    of 50 or more otherwise."""
    fast = (sdtype == torch.uint8 and ddtype in (torch.uint8, torch.int16)) or (
        sdtype == ddtype == torch.float32
    )
    return kw * kh >= (130 if fast and _SSE3 else 50)


def dft_integer_reason(kw: int, kh: int) -> str:
    """Why a kernel cv2 correlates through its DFT into an integer output is not reproduced."""
    return (
        f"a {kw}x{kh} kernel into an integer output: cv2 correlates it through a float32 DFT "
        "whose rounding noise decides exact halves (a normalized line kernel gives 1-2% of them)"
    )


def _fma_taps(
    src: torch.Tensor,
    k: np.ndarray,
    anchor: tuple[int, int],
    border: int,
    out_dtype: torch.dtype,
    delta: Any,
) -> torch.Tensor:
    """cv2's ``Filter2D`` accumulation: float32 ``acc = fma(k, x, acc)`` over the non-zero taps in
    row-major order from ``delta``, emulated exactly through float64 (a float32 times a uint8 or
    float32 value is exact there, and the sum is rounded once to float32)."""
    x = as_nhwc(src)
    kh, kw = k.shape
    ax, ay = anchor
    n, h, w, c = x.shape
    xp = pad_nhwc(x, ay, kh - 1 - ay, ax, kw - 1 - ax, border, [0.0] * c)
    if isinstance(delta, torch.Tensor):
        acc = delta.float().expand(n, h, w, c).contiguous()
    else:
        acc = torch.full((n, h, w, c), float(np.float32(delta)), dtype=torch.float32)
        acc = acc.to(x.device)
    k32 = k.astype(np.float32)
    for i in range(kh):
        for j in range(kw):
            tap = float(k32[i, j])
            if tap == 0.0:
                continue
            window = xp[:, i : i + h, j : j + w].double()
            acc = (acc.double() + tap * window).float()
    return like_input(saturate(acc, out_dtype).contiguous(), src)


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
    check_image(src, dtypes=_DTYPES)
    if dst is not None:
        raise UnsupportedOperation("Sobel: an output array dst is not supported")
    border = border_type_base(borderType, _FILTER_BORDERS)
    dx, dy, ksize = int(dx), int(dy), int(ksize)
    if ksize == -1 and (dx < 0 or dy < 0 or dx + dy != 1):
        raise UnsupportedOperation(f"Scharr needs dx + dy == 1, got {dx=}, {dy=}")
    if ksize not in (-1, 1, 3, 5, 7):
        raise UnsupportedOperation(f"Sobel: ksize {ksize} unsupported; expected -1, 1, 3, 5 or 7")
    kx, ky = deriv_kernel(dx, ksize), deriv_kernel(dy, ksize) * float(scale)
    anchor = (len(kx) // 2, len(ky) // 2)
    return _correlate(src, kx, ky, None, anchor, border, _out_dtype(src, ddepth), float(delta))


def medianBlur(src: torch.Tensor, ksize: int, dst: object = None) -> torch.Tensor:
    """``cv2.medianBlur`` (replicated border); float32 for ksize 3 and 5 as in cv2."""
    check_image(src, dtypes=(torch.uint8, torch.float32))
    if dst is not None:
        raise UnsupportedOperation("medianBlur: an output array dst is not supported")
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


# -- declared checks ---------------------------------------------------------------------------

# (source dtype, ddepth) pairs cv2's filter engine has, ddepth -1 meaning the source's.
_DEPTHS = {
    "uint8": (-1, CV_8U, CV_16S, CV_32F, CV_64F),
    "float32": (-1, CV_32F, CV_64F),
    "float64": (-1, CV_64F),
}
_NONFINITE = "non-finite values: cv2's SIMD filters skip zero taps, so NaN and inf spread otherwise"


def _common_reason(src: Any, ddepth: Any, border_type: Any, finite_only: bool = True) -> str | None:
    if not is_int(ddepth) or int(ddepth) not in _DEPTHS.get(src.dtype.name, ()):
        return f"ddepth {ddepth!r} for {src.dtype} images is not reproduced"
    reason = border_reason(border_type, _FILTER_BORDERS)
    if reason is None and finite_only and not finite(src):
        return _NONFINITE
    return reason


def _anchor_reason(anchor: object, kw: int, kh: int) -> str | None:
    if anchor is None:
        return None
    pair = int_pair(anchor)
    if pair is None:
        return f"anchor {anchor!r} is not a point"
    ax, ay = pair
    if not (-1 <= ax < kw and -1 <= ay < kh):
        return f"anchor {anchor!r} outside a {kw}x{kh} kernel"
    return None


def check_gaussian_blur(
    src: Any,
    ksize: Any,
    sigmaX: Any,
    dst: Any = None,
    sigmaY: Any = 0,
    borderType: Any = BORDER_DEFAULT,
    hint: Any = None,
) -> str | None:
    """Odd kernel sizes (or 0 with a positive sigma), finite values, filter borders."""
    size = int_pair(ksize)
    if size is None or not (is_number(sigmaX) and is_number(sigmaY)):
        return f"ksize {ksize!r} and sigmas {(sigmaX, sigmaY)!r}: expected a size and numbers"
    if hint not in (None, 0):
        return f"hint {hint!r}: only the default algorithm is reproduced"
    kw, kh, _sx, _sy = gaussian_size(size, sigmaX, sigmaY, src.dtype == np.uint8)
    if kw <= 0 or kh <= 0 or kw % 2 == 0 or kh % 2 == 0:
        return f"kernel size {(kw, kh)} is not odd and positive"
    return _common_reason(src, -1, borderType)


def check_box_filter(
    src: object,
    ddepth: object,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    normalize: object = True,
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """Positive kernel sizes, an anchor inside, a depth the filter engine has."""
    size = int_pair(ksize)
    if size is None or min(size) <= 0:
        return f"ksize {ksize!r} is not a positive size"
    if not isinstance(normalize, bool | int):
        return f"normalize {normalize!r} is not a bool"
    return _anchor_reason(anchor, *size) or _common_reason(src, ddepth, borderType)


def check_blur(
    src: object,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """As boxFilter, normalized, in the source's depth."""
    return check_box_filter(src, -1, ksize, dst, anchor, True, borderType)


def check_filter2d(
    src: object,
    ddepth: object,
    kernel: object,
    dst: object = None,
    anchor: object = (-1, -1),
    delta: object = 0,
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """A real 1-D or 2-D kernel, an anchor inside, a numeric delta; finite values (always for
    kernels cv2 correlates through its DFT); no integer output of a kernel cv2 correlates through
    its DFT (:func:`uses_dft`)."""
    if not isinstance(kernel, np.ndarray) or kernel.dtype.kind not in "iuf" or kernel.ndim > 2:
        return f"kernel {type(kernel).__name__}: expected a 1-D or 2-D real array"
    if kernel.size == 0 or not np.isfinite(kernel).all():
        return "an empty or non-finite kernel"
    if not is_number(delta):
        return f"delta {delta!r} is not a number"
    kh, kw = kernel.shape if kernel.ndim == 2 else (kernel.shape[0], 1)
    reason = _anchor_reason(anchor, kw, kh) or _common_reason(src, ddepth, borderType)
    if reason is not None:
        return reason
    sdtype = getattr(torch, np.asarray(src).dtype.name)
    depth = int(ddepth)  # type: ignore[call-overload]  # checked by _common_reason
    ddtype = sdtype if depth < 0 else DEPTH_TO_DTYPE[depth]
    if uses_dft(sdtype, ddtype, kw, kh) and not ddtype.is_floating_point:
        return dft_integer_reason(kw, kh)
    return None


def check_sobel(
    src: Any,
    ddepth: Any,
    dx: Any,
    dy: Any,
    dst: Any = None,
    ksize: Any = 3,
    scale: Any = 1,
    delta: Any = 0,
    borderType: Any = BORDER_DEFAULT,
) -> str | None:
    """Derivative orders below the aperture (1, 3, 5, 7; -1: Scharr, first order)."""
    if not (is_int(dx) and is_int(dy) and is_int(ksize)):
        return f"dx, dy, ksize {(dx, dy, ksize)!r} are not integers"
    dx, dy, ksize = int(dx), int(dy), int(ksize)
    if dx < 0 or dy < 0 or dx + dy == 0:
        return f"derivative orders {(dx, dy)} (cv2 needs dx, dy >= 0 and dx + dy > 0)"
    if ksize == -1:
        if dx + dy != 1:
            return f"Scharr needs dx + dy == 1, got {(dx, dy)}"
    elif ksize not in (1, 3, 5, 7) or max(dx, dy) >= max(ksize, 3):
        return f"ksize {ksize} for orders {(dx, dy)}: expected 1, 3, 5 or 7 above the orders"
    if not (is_number(scale) and is_number(delta)):
        return f"scale, delta {(scale, delta)!r} are not numbers"
    return _common_reason(src, ddepth, borderType)


def check_median_blur(src: Any, ksize: Any, dst: Any = None) -> str | None:
    """An odd aperture; apertures above 5 on uint8 images of 1, 3 or 4 channels only, as cv2;
    finite values."""
    if not is_int(ksize) or int(ksize) < 1 or int(ksize) % 2 == 0:
        return f"ksize {ksize!r} is not odd and positive"
    if src.dtype != np.uint8 and int(ksize) > 5:
        return f"ksize {ksize} on {src.dtype}: cv2 takes 3 or 5 only"
    if int(ksize) > 5 and channels_of(src) not in (1, 3, 4):
        return f"ksize {ksize} on {channels_of(src)} channels: cv2 takes 1, 3 or 4 (it raises)"
    if not finite(src):
        return "non-finite values: cv2's sorting network orders NaN its own way"
    return None


_FILTER_BORDER_MODES = "borders constant/replicate/reflect/reflect101"
_FILTER = frozenset({"uint8", "float32", "float64"})
_F32_SUM = "float results differ from cv2 by float32 summation order only"
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
        tolerance=Tolerance(atol=1e-3, rtol=1e-5, note=f"integer outputs exact; {_F32_SUM}"),
    ),
    op(
        "cv2.boxFilter",
        boxFilter,
        reproduces=f"ddepth, ksize, anchor, normalize, {_FILTER_BORDER_MODES}",
        check=check_box_filter,
        dtypes=_FILTER,
        tolerance=Tolerance(atol=1e-3, rtol=1e-5, note=f"integer outputs exact; {_F32_SUM}"),
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
