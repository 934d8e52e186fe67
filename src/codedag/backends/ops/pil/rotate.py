"""Torch backend of ``PIL.Image.Image.rotate``: Pillow's affine transform, bit for bit.

The matrix and output size follow ``Image.rotate``'s own Python arithmetic; sampling follows
Pillow's Geometry.c: NEAREST in 16.16 fixed point (or its exact scaling path), BILINEAR and
BICUBIC in double with truncation to uint8 and Pillow's edge clamping, LA/RGBA premultiplied by
alpha around the transform, ``fillcolor`` written raw outside the source.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import torch

from codedag.backends.ops.pil._adapter import op
from codedag.backends.ops.pil._batch import (
    BICUBIC,
    BILINEAR,
    NEAREST,
    ROTATE_90,
    ROTATE_180,
    ROTATE_270,
    PILBatch,
    _batch,
    _premultiply,
    _unpremultiply,
    ink,
)
from codedag.backends.ops.pil.image import transpose
from codedag.errors import UnsupportedOperation


def _rotation_matrix(
    w: int, h: int, angle: float, expand: bool, center: Any, translate: Any
) -> tuple[list[float], int, int]:
    """The affine matrix and output size of ``Image.rotate`` (Pillow's own Python arithmetic)."""
    post_trans = (0, 0) if translate is None else translate
    if center is None:
        center = (w / 2, h / 2)
    rad = -math.radians(angle)
    matrix = [
        round(math.cos(rad), 15),
        round(math.sin(rad), 15),
        0.0,
        round(-math.sin(rad), 15),
        round(math.cos(rad), 15),
        0.0,
    ]

    def transform(x: float, y: float, m: list[float]) -> tuple[float, float]:
        a, b, c, d, e, f = m
        return a * x + b * y + c, d * x + e * y + f

    matrix[2], matrix[5] = transform(-center[0] - post_trans[0], -center[1] - post_trans[1], matrix)
    matrix[2] += center[0]
    matrix[5] += center[1]
    if expand:
        xx, yy = [], []
        for x, y in ((0, 0), (w, 0), (w, h), (0, h)):
            tx, ty = transform(x, y, matrix)
            xx.append(tx)
            yy.append(ty)
        nw = math.ceil(max(xx)) - math.floor(min(xx))
        nh = math.ceil(max(yy)) - math.floor(min(yy))
        matrix[2], matrix[5] = transform(-(nw - w) / 2.0, -(nh - h) / 2.0, matrix)
        w, h = nw, nh
    return matrix, w, h


def _affine(x: torch.Tensor, m: list[float], out_w: int, out_h: int, resample: int) -> Any:
    """Pillow's affine sampling of (N, H, W, C) uint8: values and a mask of pixels inside."""
    h, w = x.shape[1], x.shape[2]
    dev = x.device
    xs = torch.arange(out_w, dtype=torch.float64, device=dev) + 0.5
    ys = torch.arange(out_h, dtype=torch.float64, device=dev) + 0.5
    xin = m[0] * xs[None, :] + m[1] * ys[:, None] + m[2]
    yin = m[3] * xs[None, :] + m[4] * ys[:, None] + m[5]
    inside = (xin >= 0) & (xin < w) & (yin >= 0) & (yin < h)
    if resample == NEAREST:
        xi, yi = _nearest_affine(m, out_w, out_h, dev)
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        return x[:, yi.clamp(0, h - 1), xi.clamp(0, w - 1)], inside
    xf, yf = xin - 0.5, yin - 0.5
    x0, y0 = torch.floor(xf), torch.floor(yf)
    dx, dy = (xf - x0)[None, :, :, None], (yf - y0)[None, :, :, None]
    x0, y0 = x0.long(), y0.long()
    img = x.to(torch.float64)

    def row(yy: torch.Tensor, offsets: range) -> list[torch.Tensor]:
        yc = yy.clamp(0, h - 1)
        return [img[:, yc, (x0 + o).clamp(0, w - 1)] for o in offsets]

    if resample == BILINEAR:
        rows = []
        for k in range(2):
            a, b = row(y0 + k, range(2))
            rows.append(a + (b - a) * dx)
        valid1 = ((y0 + 1 >= 0) & (y0 + 1 < h))[None, :, :, None]
        v2 = torch.where(valid1, rows[1], rows[0])
        v = rows[0] + (v2 - rows[0]) * dy
        return torch.floor(v).clamp(0, 255).to(torch.uint8), inside  # (UINT8) v truncates

    def cubic(v1: Any, v2: Any, v3: Any, v4: Any, d: torch.Tensor) -> torch.Tensor:
        p2 = -v1 + v3
        p3 = 2 * (v1 - v2) + v3 - v4
        p4 = -v1 + v2 - v3 + v4
        return v2 + d * (p2 + d * (p3 + d * p4))

    ystart = y0 - 1
    vals: list[torch.Tensor] = []
    for k in range(4):
        v1, v2, v3, v4 = row(ystart + k, range(-1, 3))
        v = cubic(v1, v2, v3, v4, dx)
        if k > 0:
            valid = ((ystart + k >= 0) & (ystart + k < h))[None, :, :, None]
            v = torch.where(valid, v, vals[-1])
        vals.append(v)
    out = cubic(vals[0], vals[1], vals[2], vals[3], dy)
    return torch.floor(out).clamp(0, 255).to(torch.uint8), inside  # clipped, then truncated


def _fixed_point_fits(m: list[float], out_w: int, out_h: int) -> bool:
    """Whether Pillow's 16.16 nearest affine reaches every corner without overflowing."""
    corners = ((0, 0), (out_w, out_h), (0, out_h), (out_w, 0))
    return all(
        abs(px * m[0] + py * m[1] + m[2]) < 32768.0 and abs(px * m[3] + py * m[4] + m[5]) < 32768.0
        for px, py in corners
    )


def _nearest_affine(m: list[float], out_w: int, out_h: int, dev: Any) -> Any:
    """Source indices of Pillow's nearest affine: exact scaling path or 16.16 fixed point."""
    xs = torch.arange(out_w, dtype=torch.int64, device=dev)[None, :]
    ys = torch.arange(out_h, dtype=torch.int64, device=dev)[:, None]
    if m[1] == 0 and m[3] == 0:  # ImagingScaleAffine: (int) of an exactly accumulated double
        xo = m[2] + m[0] * 0.5 + m[0] * xs.double()
        yo = m[5] + m[4] * 0.5 + m[4] * ys.double()
        xi = torch.where(xo < 0, -1, xo.long())
        yi = torch.where(yo < 0, -1, yo.long())
        return xi.expand(out_h, out_w), yi.expand(out_h, out_w)

    if not _fixed_point_fits(m, out_w, out_h):
        raise UnsupportedOperation("images beyond Pillow's 16.16 fixed-point range")

    def fix(v: float) -> int:
        return math.floor(v * 65536.0 + 0.5)

    a0, a1, a3, a4 = fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4])
    a2 = fix(m[2] + m[0] * 0.5 + m[1] * 0.5)
    a5 = fix(m[5] + m[3] * 0.5 + m[4] * 0.5)
    return (a2 + ys * a1 + xs * a0) >> 16, (a5 + ys * a4 + xs * a3) >> 16


def _fill(fillcolor: Any, mode: str, device: Any) -> torch.Tensor:
    values = ink(fillcolor, mode)
    if isinstance(values, str):
        raise UnsupportedOperation(values)
    return torch.tensor(values, dtype=torch.uint8, device=device)


def rotate(
    self: PILBatch,
    angle: float,
    resample: int = NEAREST,
    expand: int | bool = 0,
    center: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    fillcolor: object = None,
) -> PILBatch:
    """``PIL.Image.Image.rotate`` (counter-clockwise degrees) with NEAREST, BILINEAR or BICUBIC."""
    img = _batch(self)
    resample = int(resample)
    if resample not in (NEAREST, BILINEAR, BICUBIC):
        raise UnsupportedOperation(f"rotate resample={resample}; expected NEAREST/BILINEAR/BICUBIC")
    angle = angle % 360.0
    w, h = img.size
    if not (center or translate):
        if angle == 0:
            return PILBatch(img.data.clone(), img.mode)
        if angle == 180:
            return transpose(img, ROTATE_180)
        if angle in (90, 270) and (expand or w == h):
            return transpose(img, ROTATE_90 if angle == 90 else ROTATE_270)
    matrix, out_w, out_h = _rotation_matrix(w, h, angle, bool(expand), center, translate)
    x = img.bands()
    premult = img.mode in ("LA", "RGBA") and resample != NEAREST
    if premult:
        x = _premultiply(x)
    vals, inside = _affine(x, matrix, out_w, out_h, resample)
    fill = _fill(fillcolor, img.mode, x.device)  # written raw, also into RGBa, as Pillow does
    out = torch.where(inside[None, :, :, None], vals, fill)
    if premult:
        out = _unpremultiply(out)
    return img.with_bands(out)


def _rotate_check(
    self: Any,
    angle: Any,
    resample: Any = NEAREST,
    expand: Any = 0,
    center: Any = None,
    translate: Any = None,
    fillcolor: Any = None,
) -> str | None:
    try:
        resample = operator.index(resample)
    except TypeError:
        return f"resample {resample!r}: expected a Resampling value"
    if resample not in (NEAREST, BILINEAR, BICUBIC):
        return f"rotate resample={resample}; expected NEAREST, BILINEAR or BICUBIC (Pillow raises)"
    values = ink(fillcolor, self.mode)
    if isinstance(values, str):
        return values
    angle = float(angle) % 360.0
    transposed = not (center or translate) and angle in (0.0, 90.0, 180.0, 270.0)
    if resample == NEAREST and not transposed:
        width, height = self.size
        matrix, out_w, out_h = _rotation_matrix(
            width, height, angle, bool(expand), center, translate
        )
        scaling = matrix[1] == 0 and matrix[3] == 0
        if not scaling and not _fixed_point_fits(matrix, out_w, out_h):
            return "a nearest rotation beyond Pillow's 16.16 fixed-point range"
    return None


OPS = [op("PIL.Image.Image.rotate", rotate, check=_rotate_check)]
