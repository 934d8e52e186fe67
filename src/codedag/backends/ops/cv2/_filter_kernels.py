"""cv2's filter kernels: ``getGaussianKernel`` (float and uint8 fixed point), ``getDerivKernels``,
and the kernel size ``GaussianBlur`` derives from sigma."""

from __future__ import annotations

import math

import numpy as np

from codedag.errors import UnsupportedOperation

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
