"""Torch backends of OpenCV (cv2) functions, batch-first (N,H,W[,C]), keyed by canonical name.

The implementations live in the ``cv2_*`` modules of this package, grouped by kind of operation;
``BACKENDS`` assembles them. Tolerances against cv2 are in ``codedag.migrate.tolerances``.
Every function not listed below keeps running in cv2.
"""

from __future__ import annotations

from collections.abc import Callable

from codedag.migrate.ops.cv2_arith import (
    LUT,
    absdiff,
    add,
    addWeighted,
    convertScaleAbs,
    multiply,
    normalize,
    subtract,
)
from codedag.migrate.ops.cv2_canny import Canny
from codedag.migrate.ops.cv2_color import cvtColor
from codedag.migrate.ops.cv2_filter import (
    GaussianBlur,
    Sobel,
    blur,
    boxFilter,
    filter2D,
    medianBlur,
)
from codedag.migrate.ops.cv2_geometry import copyMakeBorder, flip, rotate, transpose
from codedag.migrate.ops.cv2_hist import equalizeHist, threshold
from codedag.migrate.ops.cv2_resize import resize
from codedag.migrate.ops.cv2_warp import warpAffine, warpPerspective

BACKENDS: dict[str, Callable] = {
    "cv2.Canny": Canny,
    "cv2.GaussianBlur": GaussianBlur,
    "cv2.LUT": LUT,
    "cv2.Sobel": Sobel,
    "cv2.absdiff": absdiff,
    "cv2.add": add,
    "cv2.addWeighted": addWeighted,
    "cv2.blur": blur,
    "cv2.boxFilter": boxFilter,
    "cv2.convertScaleAbs": convertScaleAbs,
    "cv2.copyMakeBorder": copyMakeBorder,
    "cv2.cvtColor": cvtColor,
    "cv2.equalizeHist": equalizeHist,
    "cv2.filter2D": filter2D,
    "cv2.flip": flip,
    "cv2.medianBlur": medianBlur,
    "cv2.multiply": multiply,
    "cv2.normalize": normalize,
    "cv2.resize": resize,
    "cv2.rotate": rotate,
    "cv2.subtract": subtract,
    "cv2.threshold": threshold,
    "cv2.transpose": transpose,
    "cv2.warpAffine": warpAffine,
    "cv2.warpPerspective": warpPerspective,
}
