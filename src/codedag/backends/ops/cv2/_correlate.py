"""cv2's filter engine on torch: cv2's borders, anchors and output depths, separable and 2-D
correlation as a depthwise convolution, exact integer taps for uint8 kernels, and ``Filter2D``'s
float32 fused multiply-adds (with the kernel size above which cv2 correlates through a DFT)."""

from __future__ import annotations

import platform
from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from codedag.backends.host_sync import host_sync_allowed
from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
    DEPTH_TO_DTYPE,
    as_nhwc,
    like_input,
    pad_gather_nhwc,
    pad_nhwc,
    saturate,
)
from codedag.errors import UnsupportedOperation

FILTER_BORDERS = (BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_REFLECT_101)
"""The borders cv2's filters take (BORDER_WRAP is not one of them)."""


def output_dtype(src: torch.Tensor, ddepth: int) -> torch.dtype:
    if int(ddepth) < 0:
        return src.dtype
    if int(ddepth) not in DEPTH_TO_DTYPE:
        raise UnsupportedOperation(f"ddepth {ddepth} unknown")
    return DEPTH_TO_DTYPE[int(ddepth)]


def anchor_point(anchor: Any, kw: int, kh: int) -> tuple[int, int]:
    ax, ay = (-1, -1) if anchor is None else (int(anchor[0]), int(anchor[1]))
    ax = kw // 2 if ax < 0 else ax
    ay = kh // 2 if ay < 0 else ay
    if not (0 <= ax < kw and 0 <= ay < kh):
        raise UnsupportedOperation(f"anchor {anchor} outside a {kw}x{kh} kernel")
    return ax, ay


def correlate(
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


def correlate_int(
    src: torch.Tensor, kx: np.ndarray, ky: np.ndarray, anchor: tuple[int, int], border: int
) -> torch.Tensor:
    """Separable correlation of uint8 images with integer kernels, in int32 (exact sums).

    On the CPU each tap is one in-place add of a shifted view (rows of whole pixels are
    contiguous: no strided passes). On a device (no host syncs: where launches cost) a fixed
    number of ops whatever the kernel: the padded image in one gather (a constant border:
    copied into its frame), each pass its taps as a sliding window (a view) weighed and summed.
    """
    x = as_nhwc(src)
    kh, kw = len(ky), len(kx)
    ax, ay = anchor
    pads = (ay, kh - 1 - ay, ax, kw - 1 - ax)
    if host_sync_allowed():
        h, w = int(x.shape[1]), int(x.shape[2])
        xp = pad_nhwc(x, *pads, border).to(torch.int32)
        return like_input(_taps(_taps(xp, kx, 2, w), ky, 1, h), src)
    if border == BORDER_CONSTANT:
        xp = pad_nhwc(x, *pads, border)
    else:
        xp = pad_gather_nhwc(x, *pads, border)
    wx, wy = _int_kernel(tuple(kx), x.device), _int_kernel(tuple(ky), x.device)
    rows = (xp.to(torch.int32).unfold(2, kw, 1) * wx).sum(-1, dtype=torch.int32)
    return like_input((rows.unfold(1, kh, 1) * wy).sum(-1, dtype=torch.int32), src)


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


@lru_cache(maxsize=32)
def _int_kernel(kernel: tuple[float, ...], dev: torch.device) -> torch.Tensor:
    return torch.tensor([int(k) for k in kernel], dtype=torch.int32, device=dev)


def per_sample_value(value: Any, src: torch.Tensor) -> Any:
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


def fma_taps(
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
