"""How far kornia's versions of common cv2 ops are from cv2 (the reason codedag has its own).

Runs kornia and cv2 on the same random 64x80 BGR image (float32 on a 0..255 scale unless noted) and
prints the largest absolute difference per op, next to the codedag backend's on the same input.

    .venv/bin/python benchmarks/kornia_vs_cv2.py
"""

from __future__ import annotations

import cv2
import kornia
import numpy as np
import torch

from codedag.backends.ops.cv2 import BACKENDS as B


def _chw(img: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(img).permute(2, 0, 1)[None]


def _hwc(t: torch.Tensor) -> np.ndarray:
    return t[0].permute(1, 2, 0).numpy()


def main() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (64, 80, 3)).astype(np.uint8)
    f = img.astype(np.float32)
    t, ours_in = _chw(f), torch.from_numpy(f)[None]
    rgb01 = _chw(cv2.cvtColor(f, cv2.COLOR_BGR2RGB) / 255)
    m = cv2.getRotationMatrix2D((40.0, 32.0), 17.0, 1.1)
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    kornia_edges = kornia.filters.canny(
        torch.from_numpy(gray / 255.0).float()[None, None], 0.1, 0.2
    )
    rows = [
        (
            "resize bilinear 80x64 -> 37x29",
            cv2.resize(f, (37, 29)),
            _hwc(kornia.geometry.transform.resize(t, (29, 37), antialias=False)),
            B["cv2.resize"](ours_in, (37, 29))[0].numpy(),
        ),
        (
            "resize bicubic 80x64 -> 37x29",
            cv2.resize(f, (37, 29), interpolation=cv2.INTER_CUBIC),
            _hwc(kornia.geometry.transform.resize(t, (29, 37), interpolation="bicubic")),
            B["cv2.resize"](ours_in, (37, 29), interpolation=cv2.INTER_CUBIC)[0].numpy(),
        ),
        (
            "resize area 80x64 -> 36x29",
            cv2.resize(f, (36, 29), interpolation=cv2.INTER_AREA),
            _hwc(kornia.geometry.transform.resize(t, (29, 36), interpolation="area")),
            B["cv2.resize"](ours_in, (36, 29), interpolation=cv2.INTER_AREA)[0].numpy(),
        ),
        (
            "GaussianBlur 5x5 sigma 1.2",
            cv2.GaussianBlur(f, (5, 5), 1.2),
            _hwc(kornia.filters.gaussian_blur2d(t, (5, 5), (1.2, 1.2), border_type="reflect")),
            B["cv2.GaussianBlur"](ours_in, (5, 5), 1.2)[0].numpy(),
        ),
        (
            "GaussianBlur 5x5 sigma 0 (cv2's table)",
            cv2.GaussianBlur(f, (5, 5), 0),
            _hwc(kornia.filters.gaussian_blur2d(t, (5, 5), (1e-4, 1e-4), border_type="reflect")),
            B["cv2.GaussianBlur"](ours_in, (5, 5), 0)[0].numpy(),
        ),
        (
            "BGR2GRAY",
            cv2.cvtColor(f, cv2.COLOR_BGR2GRAY),
            kornia.color.rgb_to_grayscale(rgb01)[0, 0].numpy() * 255,
            B["cv2.cvtColor"](ours_in, cv2.COLOR_BGR2GRAY)[0].numpy(),
        ),
        (
            "BGR2HSV hue, degrees (0..1 input)",
            cv2.cvtColor(f / 255, cv2.COLOR_BGR2HSV)[..., 0],
            _hwc(kornia.color.rgb_to_hsv(rgb01))[..., 0] * 180 / np.pi,
            B["cv2.cvtColor"](ours_in / 255, cv2.COLOR_BGR2HSV)[0, ..., 0].numpy(),
        ),
        (
            "warpAffine bilinear, zero border",
            cv2.warpAffine(f, m, (80, 64)),
            _hwc(
                kornia.geometry.transform.warp_affine(
                    t, torch.from_numpy(m).float()[None], (64, 80), align_corners=True
                )
            ),
            B["cv2.warpAffine"](ours_in, m, (80, 64))[0].numpy(),
        ),
        (
            "Canny 25/51 (fraction of pixels differing)",
            np.zeros(1),
            np.array([(kornia_edges[1][0, 0].numpy() * 255 != cv2.Canny(gray, 25, 51)).mean()]),
            np.array(
                [
                    (B["cv2.Canny"](torch.from_numpy(gray)[None], 25, 51)[0].numpy() != 0)
                    .__ne__(cv2.Canny(gray, 25, 51) != 0)
                    .mean()
                ]
            ),
        ),
    ]
    print(f"kornia {kornia.__version__}, cv2 {cv2.__version__}; max |x - cv2|, 0..255 scale")
    print(f"{'op':44} {'kornia':>10} {'codedag':>10}")
    for name, ref, theirs, ours in rows:
        dk = float(np.abs(ref.astype(np.float64) - theirs).max())
        do = float(np.abs(ref.astype(np.float64) - ours).max())
        print(f"{name:44} {dk:>10.4f} {do:>10.4f}")


if __name__ == "__main__":
    main()
