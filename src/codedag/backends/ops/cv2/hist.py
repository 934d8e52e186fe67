"""cv2 ``threshold`` (all five types, Otsu, triangle) and ``equalizeHist`` on torch, batch-first.

Plain torch. Thresholds follow cv2's integer rules for uint8 (the threshold is floored, maxval
rounded); Otsu's and the triangle threshold and the equalization LUT are computed per image from a
batched histogram with cv2's formulas (Otsu replaying cv2's float64 steps, the LUT scale in float32), so results match
cv2 exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    channels_of,
    check_image,
    finite,
    is_int,
    is_number,
    no_output,
    saturate,
)
from codedag.errors import UnsupportedOperation

THRESH_BINARY, THRESH_BINARY_INV, THRESH_TRUNC, THRESH_TOZERO, THRESH_TOZERO_INV = range(5)
THRESH_OTSU, THRESH_TRIANGLE = 8, 16


def _histograms(src: torch.Tensor) -> torch.Tensor:
    """(N, 256) int64 histograms of a uint8 batch."""
    n = src.shape[0]
    flat = src.reshape(n, -1).long()
    offsets = torch.arange(n, device=src.device).unsqueeze(1) * 256
    counts = torch.bincount((flat + offsets).reshape(-1), minlength=n * 256)
    return counts.reshape(n, 256)


def _otsu(hist: torch.Tensor) -> torch.Tensor:
    """cv2's Otsu threshold per histogram (N, 256), float64.

    cv2 accumulates the class means sequentially; near-ties between two thresholds are decided by
    that exact order of float64 operations, so it is replayed here (on the host: 256 steps over
    the N histograms, a few milliseconds) rather than computed from cumulative sums. cv2's x86
    wheels hand uint8 Otsu to Intel IPP, which resolves exact ties (symmetric histograms) its own
    way; those alone may differ by one grey level.
    """
    h = hist.detach().cpu().numpy().astype(np.float64)
    scale = 1.0 / h.sum(axis=1)
    mu = (h * np.arange(256)).sum(axis=1) * scale
    mu1 = np.zeros(len(h))
    q1 = np.zeros(len(h))
    max_sigma = np.zeros(len(h))
    max_val = np.zeros(len(h))
    eps = float(np.finfo(np.float32).eps)
    for i in range(256):
        p_i = h[:, i] * scale
        mu1 = mu1 * q1
        q1 = q1 + p_i
        q2 = 1.0 - q1
        ok = (np.minimum(q1, q2) >= eps) & (np.maximum(q1, q2) <= 1.0 - eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            new_mu1 = (mu1 + i * p_i) / q1
            mu2 = (mu - q1 * new_mu1) / q2
            sigma = q1 * q2 * (new_mu1 - mu2) * (new_mu1 - mu2)
        mu1 = np.where(ok, new_mu1, mu1)  # a skipped step keeps cv2's unnormalized mu1
        better = ok & (sigma > max_sigma)
        max_sigma = np.where(better, sigma, max_sigma)
        max_val = np.where(better, float(i), max_val)
    return torch.as_tensor(max_val, device=hist.device)


def _threshold_u8(src: torch.Tensor, t: int, maxval: int, kind: int) -> torch.Tensor:
    """uint8 thresholding in integers (cv2's rules: floored threshold, rounded maxval)."""
    above = src.to(torch.int16) > min(max(t, -1), 255)  # values are 0..255
    mv = torch.tensor(min(max(t if kind == THRESH_TRUNC else maxval, 0), 255), dtype=torch.uint8)
    mv = mv.to(src.device)
    zero = torch.zeros((), dtype=torch.uint8, device=src.device)
    if kind == THRESH_BINARY:
        return torch.where(above, mv, zero)
    if kind == THRESH_BINARY_INV:
        return torch.where(above, zero, mv)
    if kind == THRESH_TRUNC:
        return torch.where(above, mv, src)
    if kind == THRESH_TOZERO:
        return torch.where(above, src, zero)
    return torch.where(above, zero, src)


def _triangle(hist: torch.Tensor) -> torch.Tensor:
    """cv2's triangle threshold per histogram (N, 256), float64."""
    dev = hist.device
    i = torch.arange(256, device=dev)
    nz = hist > 0
    left = torch.where(nz, i, 256).min(dim=1).values
    left = torch.where(left > 0, left - 1, left)
    right = torch.where(nz & (i > 0), i, 0).max(dim=1).values
    right = torch.where(right < 255, right + 1, right)
    max_ind = hist.argmax(dim=1)  # first maximum, as cv2's strict '>'
    peak = hist.gather(1, max_ind[:, None])[:, 0]
    flipped = (max_ind - left) < (right - max_ind)
    h = torch.where(flipped[:, None], hist.flip(1), hist)
    left = torch.where(flipped, 255 - right, left)
    max_ind = torch.where(flipped, 255 - max_ind, max_ind)
    a, b = peak.double()[:, None], (left - max_ind).double()[:, None]
    dist = a * i.double() + b * h.double()
    span = (i > left[:, None]) & (i <= max_ind[:, None])
    dist = torch.where(span, dist, torch.zeros_like(dist))
    best = dist.max(dim=1, keepdim=True).values
    first = torch.where((dist == best) & (best > 0) & span, i, 256).min(dim=1).values
    thresh = torch.where(first < 256, first, left).double() - 1
    return torch.where(flipped, 255 - thresh, thresh)


def threshold(
    src: torch.Tensor,
    thresh: float,
    maxval: float,
    type: int,
    dst: object = None,
) -> tuple[float | torch.Tensor, torch.Tensor]:
    """``cv2.threshold`` for a batch; returns (threshold, images). With THRESH_OTSU or
    THRESH_TRIANGLE the threshold is per image: a float for a batch of one, else a float64 tensor
    of shape (N,)."""
    check_image(src, dtypes=(torch.uint8, torch.float32, torch.float64))
    no_output("threshold", dst)
    kind, auto = int(type) & 7, int(type) & ~7
    if kind > THRESH_TOZERO_INV or auto not in (0, THRESH_OTSU, THRESH_TRIANGLE):
        raise UnsupportedOperation(f"threshold: type {type} unsupported")
    n = src.shape[0]
    shape = (n,) + (1,) * (src.dim() - 1)
    integer = not src.dtype.is_floating_point
    if auto:
        if src.dtype != torch.uint8 or src.dim() != 3:
            raise UnsupportedOperation("threshold: OTSU/TRIANGLE need single-channel uint8")
        hist = _histograms(src)
        t = _otsu(hist) if auto == THRESH_OTSU else _triangle(hist)
        retval: float | torch.Tensor = float(t[0]) if n == 1 else t
    elif isinstance(thresh, torch.Tensor):  # one threshold per sample
        t = thresh.to(device=src.device, dtype=torch.float64).reshape(n)
        t = torch.floor(t) if integer else t
        retval = t
    else:
        t_val = float(math.floor(float(thresh))) if integer else float(thresh)
        t = torch.full((n,), t_val, dtype=torch.float64, device=src.device)
        retval = t_val
    per_sample = isinstance(thresh, torch.Tensor) or isinstance(maxval, torch.Tensor)
    if integer and auto == 0 and not per_sample:
        return retval, _threshold_u8(src, int(t_val), round(float(maxval)), kind)
    wdt = torch.float64
    x = src.to(wdt)
    tt = t.to(wdt).view(shape)
    if isinstance(maxval, torch.Tensor):
        mv: Any = maxval.to(device=src.device, dtype=wdt).reshape(shape)
        mv = torch.round(mv) if integer else mv
    else:
        mv = float(round(float(maxval))) if integer else float(maxval)
    above = x > tt
    zero = torch.zeros_like(x)
    if kind == THRESH_BINARY:
        out = torch.where(above, mv, zero)
    elif kind == THRESH_BINARY_INV:
        out = torch.where(above, zero, mv)
    elif kind == THRESH_TRUNC:
        out = torch.where(above, tt.expand_as(x), x)
    elif kind == THRESH_TOZERO:
        out = torch.where(above, x, zero)
    else:
        out = torch.where(above, zero, x)
    return retval, saturate(out, src.dtype)


def equalizeHist(src: torch.Tensor, dst: object = None) -> torch.Tensor:
    """``cv2.equalizeHist`` per image of a single-channel uint8 batch (N,H,W)."""
    check_image(src, dtypes=(torch.uint8,))
    no_output("equalizeHist", dst)
    if src.dim() != 3:
        raise UnsupportedOperation(f"equalizeHist: needs (N,H,W), got {tuple(src.shape)}")
    n = src.shape[0]
    hist = _histograms(src)
    total = src.shape[1] * src.shape[2]
    idx = torch.arange(256, device=src.device)
    first = torch.where(hist > 0, idx, 256).min(dim=1, keepdim=True).values  # first nonzero bin
    first_count = torch.gather(hist, 1, first.clamp(max=255))
    denom = (total - first_count).clamp(min=1).double()
    # IEEE float32 quotient and product, as cv2's float arithmetic (exact in float64, then rounded
    # once to float32; torch's vectorized float32 kernels may differ in the last bit).
    scale = (255.0 / denom).float().double()
    cums = torch.cumsum(hist, dim=1) - first_count  # sum of bins after the first nonzero one
    lut = saturate((cums.double() * scale).float(), torch.uint8)
    lut = torch.where(idx.unsqueeze(0) <= first, torch.zeros_like(lut), lut)
    single = first_count == total  # one grey level: cv2 fills the image with that level
    flat = src.reshape(n, -1).long()
    out = torch.gather(lut, 1, flat)
    out = torch.where(single, first.to(torch.uint8).expand_as(out), out)
    return out.reshape(src.shape)


def check_threshold(src: Any, thresh: Any, maxval: Any, type: Any, dst: Any = None) -> str | None:
    """A known type; OTSU and TRIANGLE on one-channel uint8 images, as cv2 requires."""
    if not (is_number(thresh) and is_number(maxval)) or not is_int(type):
        return f"thresh, maxval, type {(thresh, maxval, type)!r}: expected numbers and a type"
    kind, auto = int(type) & 7, int(type) & ~7
    if kind > THRESH_TOZERO_INV or auto not in (0, THRESH_OTSU, THRESH_TRIANGLE):
        return f"threshold type {type} unknown"
    if auto and (src.dtype != np.uint8 or channels_of(src) != 1):
        return "THRESH_OTSU and THRESH_TRIANGLE need a one-channel uint8 image"
    if not finite(src):
        return "non-finite values: cv2's SIMD comparisons order NaN their own way"
    return None


def check_equalize_hist(src: Any, dst: Any = None) -> str | None:
    """One-channel images only (cv2's own rule)."""
    return None if channels_of(src) == 1 else f"{channels_of(src)} channels; cv2 takes one"


OPS = [
    op(
        "cv2.threshold",
        threshold,
        reproduces=(
            "BINARY, BINARY_INV, TRUNC, TOZERO, TOZERO_INV, with OTSU or TRIANGLE (uint8, one "
            "channel)"
        ),
        check=check_threshold,
        dtypes=frozenset({"uint8", "float32", "float64"}),
        per_sample={"thresh": "[N]", "maxval": "[N]"},
        tolerance=Tolerance(
            note="exact, Otsu and triangle thresholds included (except exact Otsu ties, which "
            "cv2's IPP path breaks its own way)"
        ),
    ),
    op(
        "cv2.equalizeHist",
        equalizeHist,
        reproduces="single-channel images",
        check=check_equalize_hist,
        dtypes=frozenset({"uint8"}),
        tolerance=Tolerance(note="exact"),
    ),
]
