"""Conformance corpus of the cv2 ops: each op's parameter sets (degenerate ones included) crossed
with image shapes, dtypes, layouts and NaN/inf (see ``conformance_corpus``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
from hypothesis import strategies as st
from migrate_support import ALL_DTYPES, LAYOUTS, Args, Labeled, Params, array

H, W = 12, 16

Cv2Params = Callable[[np.ndarray], Params]


def _rotation(angle: float = 45.0, scale: float = 1.0) -> np.ndarray:
    return cv2.getRotationMatrix2D((W / 2, H / 2), angle, scale)


_CV2: dict[str, tuple[Cv2Params, dict[str, Any]]] = {}


def _cv2(name: str, **options: Any) -> Callable[[Cv2Params], Cv2Params]:
    def register(params: Cv2Params) -> Cv2Params:
        _CV2[name] = (params, options)
        return params

    return register


def _other(img: np.ndarray, seed: int = 1) -> np.ndarray:
    """A second image like ``img`` (shape, dtype, layout kind)."""
    if img.dtype == np.bool_:
        return np.ones_like(img)
    out = np.asarray(img)[::-1].copy()
    return out


@_cv2("cv2.resize")
def _resize(img: np.ndarray) -> Params:
    out: Params = [
        ("linear 5x4", ((5, 4),), {}),
        ("linear 23x17", ((23, 17),), {}),
        ("fx fy", (None,), {"fx": 0.5, "fy": 0.75}),
        ("fx 2", ((0, 0),), {"fx": 2.0, "fy": 2.0}),
        ("same size", ((W, H),), {}),
        ("half area", ((W // 2, H // 2),), {"interpolation": cv2.INTER_AREA}),
        ("float dsize", ((20.0, 15.0),), {}),
        ("huge", ((2**31, 1),), {}),
        ("no size", ((0, 0),), {}),
        ("negative", ((-3, 4),), {}),
    ]
    for mode in range(7):
        out.append((f"mode {mode}", ((9, 7),), {"interpolation": mode}))
    out.append(("cubic up", ((37, 29),), {"interpolation": cv2.INTER_CUBIC}))
    return out


_COLOR_CODES = {
    "BGR2GRAY": cv2.COLOR_BGR2GRAY,
    "GRAY2BGR": cv2.COLOR_GRAY2BGR,
    "GRAY2BGRA": cv2.COLOR_GRAY2BGRA,
    "BGR2RGB": cv2.COLOR_BGR2RGB,
    "BGR2BGRA": cv2.COLOR_BGR2BGRA,
    "BGRA2BGR": cv2.COLOR_BGRA2BGR,
    "BGR2HSV": cv2.COLOR_BGR2HSV,
    "HSV2BGR": cv2.COLOR_HSV2BGR,
    "HSV2RGB": cv2.COLOR_HSV2RGB,
    "BGR2HLS": cv2.COLOR_BGR2HLS,
    "HLS2RGB": cv2.COLOR_HLS2RGB,
    "BGR2HSV_FULL": cv2.COLOR_BGR2HSV_FULL,
    "HSV2BGR_FULL": cv2.COLOR_HSV2BGR_FULL,
    "BGR2YCrCb": cv2.COLOR_BGR2YCrCb,
    "YCrCb2BGR": cv2.COLOR_YCrCb2BGR,
    "BGR2YUV": cv2.COLOR_BGR2YUV,
    "BGR2XYZ": cv2.COLOR_BGR2XYZ,
    "XYZ2BGR": cv2.COLOR_XYZ2BGR,
    "BGR2Lab": cv2.COLOR_BGR2Lab,
    "Lab2BGR": cv2.COLOR_Lab2BGR,
}


@_cv2("cv2.cvtColor", scale=1.0)
def _cvt(img: np.ndarray) -> Params:
    out: Params = [(code, (value,), {}) for code, value in _COLOR_CODES.items()]
    out += [
        ("BGR2RGB dstCn=4", (cv2.COLOR_BGR2RGB,), {"dstCn": 4}),
        ("BGR2GRAY dstCn=1", (cv2.COLOR_BGR2GRAY,), {"dstCn": 1}),
        ("unknown code", (9999,), {}),
    ]
    return out


def _hue_image(dtype: str, hue_max: float, seed: int = 3) -> np.ndarray:
    """HSV/HLS images: hue in 0..hue_max (out of range beyond cv2's nominal one), S, V/L in 0..1."""
    rng = np.random.default_rng(seed)
    img = rng.random((H, W, 3))
    img[..., 0] = rng.uniform(-hue_max * 0.25, hue_max * 1.25, (H, W))
    if dtype == "uint8":
        img = np.clip(img * [1, 255, 255], 0, 255).astype(np.uint8)
        img[..., 0] = rng.integers(0, 256, (H, W))
    return img.astype(dtype)


def _cvt_extra() -> Labeled:
    cases: Labeled = []
    for code in ("HSV2BGR", "HSV2RGB", "HLS2RGB", "HSV2BGR_FULL"):
        for dtype, hue in (("uint8", 180.0), ("float32", 360.0)):
            cases.append(
                (
                    f"{code} {dtype} hue out of range",
                    lambda code=code, dtype=dtype, hue=hue: (
                        (_hue_image(dtype, hue), _COLOR_CODES[code]),
                        {},
                    ),
                )
            )
    cases.append(
        (
            "HSV2RGB uint8 full range",
            lambda: ((array((64, 64, 3), "uint8", seed=5), cv2.COLOR_HSV2RGB), {}),
        )
    )
    return cases


@_cv2("cv2.GaussianBlur")
def _gauss(img: np.ndarray) -> Params:
    return [
        ("3x3", ((3, 3), 0), {}),
        ("5x5 sigma", ((5, 5), 1.2), {}),
        ("sigma only", ((0, 0), 2.0), {}),
        ("3x5 sigmas", ((3, 5), 0), {"sigmaY": 1.5}),
        ("reflect", ((5, 5), 0), {"borderType": cv2.BORDER_REFLECT}),
        ("constant", ((3, 3), 1.0), {"borderType": cv2.BORDER_CONSTANT}),
        ("replicate 7", ((7, 7), 0), {"borderType": cv2.BORDER_REPLICATE}),
        ("1x1", ((1, 1), 0), {}),
        ("even ksize", ((4, 4), 0), {}),
        ("no size", ((0, 0), 0), {}),
    ]


@_cv2("cv2.blur")
def _blur(img: np.ndarray) -> Params:
    return [
        ("3x3", ((3, 3),), {}),
        ("5x1", ((5, 1),), {}),
        ("4x4", ((4, 4),), {}),
        ("1x2", ((1, 2),), {}),
        ("17x17", ((17, 17),), {}),
        ("anchor", ((3, 3),), {"anchor": (0, 0)}),
        ("constant", ((5, 5),), {"borderType": cv2.BORDER_CONSTANT}),
        ("wrap", ((3, 3),), {"borderType": cv2.BORDER_WRAP}),
    ]


@_cv2("cv2.boxFilter")
def _box(img: np.ndarray) -> Params:
    return [
        ("3x3", (-1, (3, 3)), {}),
        ("sum", (-1, (3, 3)), {"normalize": False}),
        ("float", (cv2.CV_32F, (5, 3)), {}),
        ("16S sum", (cv2.CV_16S, (3, 3)), {"normalize": False}),
        ("16S mean", (cv2.CV_16S, (2, 2)), {}),
    ]


def _kernel(size: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (size, size)).astype(np.float32)


@_cv2("cv2.filter2D")
def _filter2d(img: np.ndarray) -> Params:
    return [
        ("box 3x3", (-1, np.ones((3, 3), np.float32) / 9), {}),
        ("random 5x5", (-1, _kernel(5)), {}),
        ("random 17x17", (-1, _kernel(17) / 17), {}),
        ("float out", (cv2.CV_32F, _kernel(3)), {}),
        ("delta", (-1, np.ones((3, 3), np.float32) / 9), {"delta": 10.5}),
        ("anchor", (-1, _kernel(3)), {"anchor": (0, 2)}),
        ("1x5 kernel", (-1, np.ones((1, 5), np.float32) / 5), {}),
        ("ringing 13x13", (-1, _sinc_kernel(13, 1.4)), {}),
        ("motion blur 13x13", (-1, _motion_kernel(13, 10)), {}),  # DFT-sized: left to cv2
        ("motion blur 13x13 float out", (cv2.CV_32F, _motion_kernel(13, 10)), {}),
        ("motion blur 11x11", (-1, _motion_kernel(11, 10)), {}),
    ]


def _motion_kernel(size: int, taps: int) -> np.ndarray:
    """A MotionBlur kernel: a line of ``taps`` ones in a size x size kernel, normalized (ten taps
    of 0.1 put a tenth of uint8 sums on exact halves)."""
    kernel = np.zeros((size, size), np.float32)
    kernel[size // 2, :taps] = 1.0
    return kernel / kernel.sum()


def _sinc_kernel(size: int, cutoff: float) -> np.ndarray:
    """A normalized 2-D sinc kernel with negative lobes (ringing-overshoot filters): its sums
    near .5 are where a large kernel's accumulation order shows (cv2 filters kernels of 130+
    taps through a DFT)."""
    c = (size - 1) / 2
    r = np.hypot(*np.meshgrid(np.arange(size) - c, np.arange(size) - c))
    with np.errstate(divide="ignore", invalid="ignore"):
        kernel = np.where(r > 0, np.sinc(cutoff * r / np.pi), 1.0) * np.exp(-((r / c) ** 2))
    return (kernel / kernel.sum()).astype(np.float32)


@_cv2("cv2.Sobel")
def _sobel(img: np.ndarray) -> Params:
    return [
        ("dx", (-1, 1, 0), {}),
        ("16S dx", (cv2.CV_16S, 1, 0), {}),
        ("32F dy 5", (cv2.CV_32F, 0, 1), {"ksize": 5}),
        ("scharr", (cv2.CV_32F, 1, 0), {"ksize": -1}),
        ("scale delta", (cv2.CV_32F, 1, 1), {"scale": 0.5, "delta": 3}),
    ]


@_cv2("cv2.medianBlur")
def _median(img: np.ndarray) -> Params:
    return [("3", (3,), {}), ("5", (5,), {}), ("7", (7,), {}), ("even", (4,), {})]


@_cv2("cv2.Canny")
def _canny(img: np.ndarray) -> Params:
    return [
        ("10 20", (10, 20), {}),
        ("50 150 L2", (50, 150), {"L2gradient": True}),
        ("aperture 5", (100, 300), {"apertureSize": 5}),
        ("aperture 4", (10, 20), {"apertureSize": 4}),
    ]


@_cv2("cv2.flip")
def _flip(img: np.ndarray) -> Params:
    return [("0", (0,), {}), ("1", (1,), {}), ("-1", (-1,), {}), ("5", (5,), {})]


@_cv2("cv2.transpose")
def _transpose(img: np.ndarray) -> Params:
    return [("", (), {})]


@_cv2("cv2.rotate")
def _rotate(img: np.ndarray) -> Params:
    return [("90", (0,), {}), ("180", (1,), {}), ("270", (2,), {}), ("bad code", (3,), {})]


@_cv2("cv2.copyMakeBorder")
def _border(img: np.ndarray) -> Params:
    return [
        ("constant", (1, 2, 3, 4, cv2.BORDER_CONSTANT), {"value": (9, 8, 7, 6)}),
        ("zero borders", (0, 0, 0, 0, cv2.BORDER_CONSTANT), {}),
        ("zero reflect", (0, 0, 0, 0, cv2.BORDER_REFLECT), {}),
        ("reflect", (2, 2, 2, 2, cv2.BORDER_REFLECT), {}),
        ("reflect101 wide", (20, 1, 1, 25, cv2.BORDER_REFLECT_101), {}),
        ("wrap", (3, 0, 5, 1, cv2.BORDER_WRAP), {}),
        ("replicate", (4, 4, 4, 4, cv2.BORDER_REPLICATE), {}),
        ("negative", (-1, 0, 0, 0, cv2.BORDER_CONSTANT), {}),
    ]


def _perspective() -> np.ndarray:
    return np.array([[0.533, 0, 0], [0, 1.133, 0], [-0.0467, 0.0133, 1]])


@_cv2("cv2.warpAffine")
def _warp_affine(img: np.ndarray) -> Params:
    m = _rotation()
    out: Params = [
        (f"rotate mode {mode}", (m, (W, H)), {"flags": mode}) for mode in (0, 1, 2, 3, 4)
    ]
    out += [
        ("inverse", (m, (W, H)), {"flags": cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP}),
        ("reflect", (_rotation(30, 1.3), (W, H)), {"borderMode": cv2.BORDER_REFLECT}),
        ("wrap", (_rotation(10), (20, 9)), {"borderMode": cv2.BORDER_WRAP}),
        ("replicate", (_rotation(-20), (W, H)), {"borderMode": cv2.BORDER_REPLICATE}),
        ("value", (m, (W, H)), {"borderValue": (10, 20, 30, 40)}),
        ("transparent", (m, (W, H)), {"borderMode": cv2.BORDER_TRANSPARENT}),
        ("singular", (np.zeros((2, 3)), (W, H)), {}),
        ("float32 M", (m.astype(np.float32), (W, H)), {}),
        ("bad shape M", (np.eye(3), (W, H)), {}),
        ("no size", (m, (0, 0)), {}),
    ]
    return out


@_cv2("cv2.warpPerspective")
def _warp_persp(img: np.ndarray) -> Params:
    m = _perspective()
    out: Params = [(f"mode {mode}", (m, (W, H)), {"flags": mode}) for mode in (0, 1, 2, 4)]
    out += [
        ("inverse", (m, (W, H)), {"flags": cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP}),
        ("singular", (np.zeros((3, 3)), (W, H)), {}),
        ("singular nonzero", (np.array([[1.0, 2, 0], [2, 4, 0], [0, 0, 1]]), (W, H)), {}),
        ("mild", (np.array([[1.0, 0.1, 1], [0.05, 1, 2], [1e-3, 2e-3, 1]]), (W, H)), {}),
        # the horizon (third row 0) crosses the output: infinite and NaN coordinates there
        ("horizon", (np.array([[1.0, 0, 0], [0, 1, 0], [0.125, 0, -1]]), (W, H)), {}),
        (
            "horizon reflect",
            (np.array([[1.0, 0.1, 0], [0, 1, 0], [0.1, 0.05, -1]]), (W, H)),
            {
                "borderMode": cv2.BORDER_REFLECT_101,
                "flags": cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            },
        ),
        ("reflect", (m, (W, H)), {"borderMode": cv2.BORDER_REFLECT_101}),
        ("value", (m, (W, H)), {"borderValue": 7}),
    ]
    # source x exactly halfway between two pixels, decided by a term far below its last bit:
    # the float32 fma of the warp kernels (rounded once) and the float64 blocks of the remap
    tiny = 2.2204460492503132e-17
    ties = (
        ("tie fma", np.array([[9 / 14, tiny, 0], [0, 0.5, 0], [-1 / 14, 0, 1]])),
        ("tie blocks", np.array([[25 / 28, tiny, 0], [0, 30 / 28, 0], [-1 / 28, 1 / 140, 1]])),
    )
    out += [
        (f"{name} mode {mode}", (t, (W, H)), {"flags": mode}) for name, t in ties for mode in (0, 1)
    ]
    return out


def _binary_params(name: str) -> Cv2Params:
    def params(img: np.ndarray) -> Params:
        other = _other(img)
        out: Params = [
            ("array", (other,), {}),
            ("scalar int", (3,), {}),
            ("scalar 2.5", (2.5,), {}),
            ("tuple", ((1.0, 2.0, 3.0, 4.0),), {}),
            ("other dtype", (other.real.astype(np.float64),), {}),
        ]
        if name != "cv2.absdiff":
            out += [
                ("dtype 32F", (other,), {"dtype": cv2.CV_32F}),
                ("mask", (other,), {"mask": np.ones(img.shape[:2], np.uint8)}),
            ]
        if name == "cv2.multiply":
            out.append(("scale", (other,), {"scale": 1 / 255}))
        return out

    return params


for _name in ("cv2.add", "cv2.subtract", "cv2.absdiff", "cv2.multiply"):
    _CV2[_name] = (_binary_params(_name), {})


@_cv2("cv2.addWeighted")
def _add_weighted(img: np.ndarray) -> Params:
    other = _other(img)
    return [
        ("halves", (0.5, other, 0.5, 0), {}),
        ("gamma", (0.3, other, 0.7, 2.0), {}),
        ("negative", (-1.5, other, 2.5, -3.0), {}),
        ("dtype", (0.5, other, 0.5, 0), {"dtype": cv2.CV_32F}),
    ]


@_cv2("cv2.convertScaleAbs")
def _convert_scale_abs(img: np.ndarray) -> Params:
    return [
        ("default", (), {}),
        ("alpha beta", (), {"alpha": 1.3, "beta": -20}),
        ("negative", (), {"alpha": -0.7, "beta": 3}),
    ]


@_cv2("cv2.normalize")
def _normalize(img: np.ndarray) -> Params:
    return [
        ("minmax", (None, 0, 255, cv2.NORM_MINMAX), {}),
        ("minmax 32F", (None, 0, 1, cv2.NORM_MINMAX, cv2.CV_32F), {}),
        ("l2", (None, 1.0, 0, cv2.NORM_L2, cv2.CV_32F), {}),
        ("inf", (None, 100, 0, cv2.NORM_INF), {}),
        ("l1", (None, 1000, 0, cv2.NORM_L1, cv2.CV_64F), {}),
    ]


@_cv2("cv2.LUT")
def _lut(img: np.ndarray) -> Params:
    rng = np.random.default_rng(11)
    return [
        ("uint8 table", (rng.integers(0, 256, 256).astype(np.uint8),), {}),
        ("float table", (rng.random(256).astype(np.float32),), {}),
        ("per channel", (rng.integers(0, 256, (256, 1, 3)).astype(np.uint8),), {}),
        ("short table", (np.arange(128, dtype=np.uint8),), {}),
    ]


@_cv2("cv2.threshold")
def _threshold(img: np.ndarray) -> Params:
    return [(f"type {kind}", (127.5, 200, kind), {}) for kind in range(5)] + [
        ("otsu", (0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU), {}),
        ("triangle", (0, 255, cv2.THRESH_BINARY | cv2.THRESH_TRIANGLE), {}),
        ("negative", (-5, 255, cv2.THRESH_BINARY), {}),
    ]


@_cv2("cv2.equalizeHist")
def _equalize(img: np.ndarray) -> Params:
    return [("", (), {})]


CV2_SHAPES = (
    (H, W),
    (H, W, 1),
    (H, W, 2),
    (H, W, 3),
    (H, W, 4),
    (H, W, 5),
    (1, 1, 3),
    (1, 1),
    (0, 0),
    (0, W, 3),
    # rows of 13 x C values: cv2's vector loops leave a scalar tail (width % 16, % 8, % 4)
    (9, 13),
    (9, 13, 3),
    (2, 37, 4),
)


def _cv2_case(
    name: str,
    params: Cv2Params,
    index: int,
    shape: tuple[int, ...],
    dtype: str,
    layout: str,
    scale: float,
    special: bool = False,
) -> Callable[[], Args]:
    def build() -> Args:
        img = array(shape, dtype, layout, scale=scale, special=special)
        _label, args, kwargs = params(img)[index]
        return (img, *args), dict(kwargs)

    return build


def cases(name: str) -> Labeled:
    """The fixed corpus of a cv2 function."""
    params, options = _CV2[name]
    scale = options.get("scale", 255.0)
    base = array((H, W, 3))
    labels = [label for label, _a, _k in params(base)]
    out: Labeled = []

    def add(
        label: str,
        index: int,
        shape: tuple[int, ...],
        dtype: str,
        layout: str = "C",
        special: bool = False,
    ) -> None:
        out.append(
            (
                f"{labels[index]} {dtype} {shape} {layout}{' nan/inf' if special else ''}",
                _cv2_case(name, params, index, shape, dtype, layout, scale, special),
            )
        )

    for index in range(len(labels)):
        add("main", index, (H, W, 3), "uint8")
        add("float", index, (H, W, 3), "float32")
        add("gray", index, (H, W), "uint8")
    for dtype in ALL_DTYPES:
        add("dtype", 0, (H, W, 3), dtype)
    for shape in CV2_SHAPES:
        for dtype in ("uint8", "float32"):
            add("shape", 0, shape, dtype)
    for layout in LAYOUTS:
        add("layout", 0, (H, W, 3), "uint8", layout)
        add("layout", 0, (H, W), "float32", layout)
    for dtype in ("float32", "float64"):
        for index in range(min(3, len(labels))):
            add("special", index, (H, W, 3), dtype, special=True)
    if name == "cv2.cvtColor":
        out += _cvt_extra()
    return out


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """Random combinations of a cv2 op's parameters, shapes, dtypes, layouts, NaN/inf."""
    params, options = _CV2[name]
    n_params = len(params(array((H, W, 3))))
    return st.builds(
        lambda index, shape, dtype, layout, special: (
            f"{name} #{index} {dtype} {shape} {layout}",
            _cv2_case(
                name, params, index, shape, dtype, layout, options.get("scale", 255.0), special
            ),
        ),
        st.integers(0, n_params - 1),
        st.sampled_from(CV2_SHAPES),
        st.sampled_from(("uint8", "float32", "float64", "int16", "uint16")),
        st.sampled_from(LAYOUTS),
        st.booleans(),
    )


NAMES = frozenset(_CV2)
