"""Detection augmentation helpers in YOLO's style: box formats, random perspective, HSV jitter.

Boxes are rows of ``class, x1, y1, x2, y2`` in pixels while the image is being warped, and
``class, x_center, y_center, width, height`` normalized to the image size before and after.
Every helper returns what it computes.
"""

from __future__ import annotations

import math
import random

import cv2
import numpy as np

FILL_VALUE = 114


def xywhn2xyxy(
    x: np.ndarray, w: float, h: float, padw: float = 0.0, padh: float = 0.0
) -> np.ndarray:
    """Normalized center boxes (n, 4) to pixel corners in an image of ``w`` x ``h`` offset by pads."""
    y = np.empty_like(x)
    y[:, 0] = w * (x[:, 0] - x[:, 2] / 2) + padw
    y[:, 1] = h * (x[:, 1] - x[:, 3] / 2) + padh
    y[:, 2] = w * (x[:, 0] + x[:, 2] / 2) + padw
    y[:, 3] = h * (x[:, 1] + x[:, 3] / 2) + padh
    return y


def xyxy2xywhn(x: np.ndarray, w: float, h: float, clip: bool = False) -> np.ndarray:
    """Pixel corner boxes (n, 4) to centers and sizes normalized to ``w`` x ``h``."""
    if clip:
        x = x.copy()
        x[:, [0, 2]] = x[:, [0, 2]].clip(0, w)
        x[:, [1, 3]] = x[:, [1, 3]].clip(0, h)
    y = np.empty_like(x)
    y[:, 0] = ((x[:, 0] + x[:, 2]) / 2) / w
    y[:, 1] = ((x[:, 1] + x[:, 3]) / 2) / h
    y[:, 2] = (x[:, 2] - x[:, 0]) / w
    y[:, 3] = (x[:, 3] - x[:, 1]) / h
    return y


def random_warp_matrix(
    in_shape: tuple[int, int],
    out_shape: tuple[int, int],
    degrees: float = 0.0,
    translate: float = 0.0,
    scale: float = 0.0,
    shear: float = 0.0,
    perspective: float = 0.0,
) -> tuple[np.ndarray, float]:
    """A random 3x3 warp from an ``in_shape`` image to an ``out_shape`` one, and its scale.

    The image center goes to the origin, then perspective, rotation and scale, shear, and a
    translation to the output center give or take ``translate`` of the output size.
    """
    center = np.eye(3)
    center[0, 2] = -in_shape[1] / 2
    center[1, 2] = -in_shape[0] / 2
    persp = np.eye(3)
    persp[2, 0] = random.uniform(-perspective, perspective)
    persp[2, 1] = random.uniform(-perspective, perspective)
    rotation = np.eye(3)
    angle = random.uniform(-degrees, degrees)
    zoom = random.uniform(1 - scale, 1 + scale)
    rotation[:2] = cv2.getRotationMatrix2D(center=(0, 0), angle=angle, scale=zoom)
    shearing = np.eye(3)
    shearing[0, 1] = math.tan(random.uniform(-shear, shear) * math.pi / 180)
    shearing[1, 0] = math.tan(random.uniform(-shear, shear) * math.pi / 180)
    translation = np.eye(3)
    translation[0, 2] = random.uniform(0.5 - translate, 0.5 + translate) * out_shape[1]
    translation[1, 2] = random.uniform(0.5 - translate, 0.5 + translate) * out_shape[0]
    return translation @ shearing @ rotation @ persp @ center, zoom


def warp_boxes(
    boxes: np.ndarray, matrix: np.ndarray, width: int, height: int, perspective: bool
) -> np.ndarray:
    """The pixel boxes (n, 4) enclosing ``boxes``' warped corners, clipped to the output."""
    n = len(boxes)
    corners = np.ones((n * 4, 3))
    corners[:, :2] = boxes[:, [0, 1, 2, 3, 0, 3, 2, 1]].reshape(n * 4, 2)
    corners = corners @ matrix.T
    if perspective:
        xy = (corners[:, :2] / corners[:, 2:3]).reshape(n, 8)
    else:
        xy = corners[:, :2].reshape(n, 8)
    xs, ys = xy[:, [0, 2, 4, 6]], xy[:, [1, 3, 5, 7]]
    new = np.stack((xs.min(1), ys.min(1), xs.max(1), ys.max(1)), axis=1)
    new[:, [0, 2]] = new[:, [0, 2]].clip(0, width)
    new[:, [1, 3]] = new[:, [1, 3]].clip(0, height)
    return new


def box_candidates(
    before: np.ndarray,
    after: np.ndarray,
    wh_thr: float = 2,
    ar_thr: float = 20,
    area_thr: float = 0.1,
    eps: float = 1e-16,
) -> np.ndarray:
    """Which warped boxes to keep: wide and tall enough, not too thin, not mostly cut away.

    ``before`` and ``after`` are (n, 4) pixel boxes, ``before`` already scaled by the warp's zoom.
    """
    w1, h1 = before[:, 2] - before[:, 0], before[:, 3] - before[:, 1]
    w2, h2 = after[:, 2] - after[:, 0], after[:, 3] - after[:, 1]
    aspect = np.maximum(w2 / (h2 + eps), h2 / (w2 + eps))
    kept_area = w2 * h2 / (w1 * h1 + eps)
    return (w2 > wh_thr) & (h2 > wh_thr) & (kept_area > area_thr) & (aspect < ar_thr)


def random_perspective(
    img: np.ndarray,
    targets: np.ndarray,
    degrees: float = 10.0,
    translate: float = 0.1,
    scale: float = 0.1,
    shear: float = 10.0,
    perspective: float = 0.0,
    border: tuple[int, int] = (0, 0),
) -> tuple[np.ndarray, np.ndarray]:
    """Warp ``img`` and its ``targets`` (class, x1, y1, x2, y2 pixel rows) by a random matrix.

    ``border`` grows (positive) or shrinks (negative) each side of the output: a mosaic canvas
    of 2s x 2s with ``border=(-s // 2, -s // 2)`` comes out s x s. The warp is affine
    (``cv2.warpAffine``) unless ``perspective`` is non-zero (``cv2.warpPerspective``). Boxes
    mostly cut away or squeezed by the warp are dropped.
    """
    height = img.shape[0] + border[0] * 2
    width = img.shape[1] + border[1] * 2
    matrix, zoom = random_warp_matrix(
        img.shape[:2], (height, width), degrees, translate, scale, shear, perspective
    )
    fill = (FILL_VALUE, FILL_VALUE, FILL_VALUE)
    if border[0] != 0 or border[1] != 0 or (matrix != np.eye(3)).any():
        if perspective:
            img = cv2.warpPerspective(img, matrix, dsize=(width, height), borderValue=fill)
        else:
            img = cv2.warpAffine(img, matrix[:2], dsize=(width, height), borderValue=fill)
    if len(targets):
        new = warp_boxes(targets[:, 1:5], matrix, width, height, perspective != 0)
        keep = box_candidates(targets[:, 1:5] * zoom, new, area_thr=0.10)
        targets = targets[keep]
        targets[:, 1:5] = new[keep]
    return img, targets


def augment_hsv(
    img: np.ndarray, hgain: float = 0.5, sgain: float = 0.5, vgain: float = 0.5
) -> np.ndarray:
    """Randomly scale hue, saturation and value of a BGR uint8 image through LUTs."""
    if not (hgain or sgain or vgain):
        return img
    gains = np.random.uniform(-1, 1, 3) * [hgain, sgain, vgain] + 1
    hue, sat, val = cv2.split(cv2.cvtColor(img, cv2.COLOR_BGR2HSV))
    x = np.arange(0, 256, dtype=gains.dtype)
    lut_hue = ((x * gains[0]) % 180).astype(np.uint8)
    lut_sat = np.clip(x * gains[1], 0, 255).astype(np.uint8)
    lut_val = np.clip(x * gains[2], 0, 255).astype(np.uint8)
    hsv = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
