"""Tolerances of every GPU backend against the library it replaces: the one table tests read.

``atol`` is absolute on the library's output scale (0..255 for uint8 images), ``rtol`` relative;
``max_mismatch_frac`` allows a fraction of elements to differ by more (uint8 rounding at exact
.5 ties, nearest-neighbour index ties), each by at most ``mismatch_atol``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """How close a backend's output must be to the reference."""

    atol: float = 0.0
    rtol: float = 0.0
    max_mismatch_frac: float = 0.0
    mismatch_atol: float = 0.0
    note: str = ""


EXACT = Tolerance()

# Canonical name -> tolerance. Keep grouped by library and sorted within a group.
_F32_SUM = "float results differ from cv2 by float32 summation order only"
TOLERANCES: dict[str, Tolerance] = {
    # cv2 (codedag.backends.ops.cv2); float images are tested on a 0..255 scale.
    "cv2.Canny": Tolerance(note="exact (cv2's integer gradients, tangent tests and hysteresis)"),
    "cv2.GaussianBlur": Tolerance(
        atol=1e-3, rtol=1e-5, note=f"uint8 bit-exact (cv2's fixed-point kernel); {_F32_SUM}"
    ),
    "cv2.LUT": Tolerance(note="exact"),
    "cv2.Sobel": Tolerance(
        atol=2e-2,
        rtol=1e-5,
        note="integer outputs exact; float32 sums of up to ~1e5 (7x7 derivative kernels on "
        "0..255 data) round differently from cv2's, cancelling to ~2e-3 where cv2 gets 0",
    ),
    "cv2.absdiff": Tolerance(note="exact"),
    "cv2.add": Tolerance(note="exact (scalars rounded to integers first, as cv2)"),
    "cv2.addWeighted": Tolerance(
        atol=1e-4,
        rtol=1e-6,
        max_mismatch_frac=0.01,
        mismatch_atol=1.0,
        note="cv2's float32 fused multiply-adds are emulated exactly; margin for float32 rounding",
    ),
    "cv2.blur": Tolerance(atol=1e-3, rtol=1e-5, note=f"integer outputs exact; {_F32_SUM}"),
    "cv2.boxFilter": Tolerance(atol=1e-3, rtol=1e-5, note=f"integer outputs exact; {_F32_SUM}"),
    "cv2.convertScaleAbs": Tolerance(
        max_mismatch_frac=0.01,
        mismatch_atol=1.0,
        note="cv2's float32 fused multiply-add is emulated exactly; margin for rare .5 ties",
    ),
    "cv2.copyMakeBorder": Tolerance(note="exact"),
    "cv2.cvtColor": Tolerance(
        atol=1e-4,
        rtol=1e-5,
        max_mismatch_frac=1e-3,
        mismatch_atol=1.0,
        note="uint8 bit-exact: GRAY (15-bit fixed point), YCrCb, YUV, XYZ, and HSV and HLS both "
        "ways (cv2's SIMD and scalar code emulated pixel by pixel), except an HLS rounding tie "
        "now and then (at most 0.1% of values off by 1); float results within float32 "
        "rounding (hue in degrees)",
    ),
    "cv2.equalizeHist": Tolerance(note="exact"),
    "cv2.filter2D": Tolerance(
        atol=1e-2,
        rtol=1e-5,
        max_mismatch_frac=1e-3,
        mismatch_atol=1.0,
        note="uint8 bit-exact below cv2's DFT threshold (cv2's float32 fused multiply-adds in "
        "its tap order); float32 the same except the scalar tail of each row (a float32 ulp); "
        "kernels of 130 taps or more (50 for other depths) go through cv2's float32 DFT: ~1e-4 "
        "of uint8 values off by 1, floats within 1e-2 on 0..255",
    ),
    "cv2.flip": Tolerance(note="exact"),
    "cv2.medianBlur": Tolerance(note="exact"),
    "cv2.multiply": Tolerance(
        atol=1e-6,
        rtol=1e-6,
        max_mismatch_frac=0.01,
        mismatch_atol=1.0,
        note="float: product order; uint8 with a fractional scale: rare .5 ties",
    ),
    "cv2.normalize": Tolerance(
        atol=1e-5,
        rtol=1e-5,
        max_mismatch_frac=0.01,
        mismatch_atol=1.0,
        note="norms in float64 per image; integer outputs may round a .5 tie the other way",
    ),
    "cv2.resize": Tolerance(
        atol=1e-2,
        rtol=1e-5,
        max_mismatch_frac=1.0,
        mismatch_atol=1.0,
        note="uint8 nearest, linear (cv2's 11-bit fixed point) and area exact; uint8 cubic "
        "differs by 1 in ~5% of values (cv2 runs it through Intel IPP on x86), lanczos4 rarely; float "
        "linear/cubic within 6e-3 on 0..255 at 400 px (cv2 5 accumulates differently), "
        "area/lanczos4 within 2e-4",
    ),
    "cv2.rotate": Tolerance(note="exact"),
    "cv2.subtract": Tolerance(note="exact (scalars rounded to integers first, as cv2)"),
    "cv2.threshold": Tolerance(
        note="exact, Otsu and triangle thresholds included (except exact Otsu ties, which cv2's "
        "IPP path breaks its own way)"
    ),
    "cv2.transpose": Tolerance(note="exact"),
    "cv2.warpAffine": Tolerance(
        atol=5e-2,
        rtol=1e-5,
        max_mismatch_frac=0.02,
        mismatch_atol=1.0,
        note="nearest and linear bit-exact on uint8 and float32 (cv2 5's float32 warp kernels "
        "for 1, 3 and 4 channels, SIMD and scalar coordinates per column; its fixed-point remap "
        "otherwise), uint8 lanczos4 exact; float cubic within 2e-2 on 0..255; uint8 cubic "
        "~0.05% of pixels off by 1",
    ),
    "cv2.warpPerspective": Tolerance(
        atol=5e-2,
        rtol=1e-5,
        max_mismatch_frac=0.02,
        mismatch_atol=1.0,
        note="as cv2.warpAffine",
    ),
}

# --- numpy ------------------------------------------------------------------------------------
# Arithmetic, comparisons, clip, where, rounding, casts, shape functions, min/max/arg and integer
# reductions are exact (no entry): IEEE +, -, * and / are correctly rounded in both. torch.sqrt
# and reciprocal are vectorized and were seen 1 ulp off, so they share the libm tolerance.
_TRANSCENDENTAL = Tolerance(
    atol=1e-5,
    rtol=1e-3,
    note="NumPy's SIMD libm and torch's Sleef differ by a few ulp: 1 float16 ulp is 9.8e-4 "
    "relative; float32 and float64 results agree to a few ulp of their own type",
)
_SUM = Tolerance(
    atol=1e-6,
    rtol=2e-3,
    note="float sums in another order (NumPy pairwise, torch cascade): ~1 ulp of float16 results "
    "(9.8e-4), a few ulp of float32/float64 ones; integer sums are exact",
)
_TRANSCENDENTAL_NAMES = (
    "arccos arccosh arcsin arcsinh arctan arctan2 arctanh cos cosh deg2rad exp exp2 expm1 hypot "
    "log log10 log1p log2 power rad2deg reciprocal sin sinh sqrt tan tanh"
)
_SUM_NAMES = ("cumsum", "mean", "prod", "std", "sum", "var")
_ORDER = Tolerance(
    rtol=1e-6,
    atol=2e-5,
    note="interpolation between sorted neighbours in float64 where NumPy mixes float32 and "
    "float64 operands: a float32 ulp or two of the neighbours, which is absolute (atol) when "
    "neighbours of opposite sign cancel to a small result; integer and NaN cases are exact",
)
TOLERANCES.update({f"numpy.{n}": _ORDER for n in ("median", "percentile", "quantile")})
_COMPLEX = Tolerance(
    rtol=3e-7,
    note="real operands exact; complex results one or two float32 ulp apart (torch's complex "
    "multiply, divide and hypot round otherwise than NumPy's)",
)
TOLERANCES.update({f"numpy.{n}": _COMPLEX for n in ("absolute", "divide", "multiply", "square")})
TOLERANCES["numpy.linalg.norm"] = Tolerance(
    rtol=1e-5, note="sum of squares in another order (BLAS dot vs torch): a few float32 ulp"
)
TOLERANCES.update({f"numpy.{n}": _TRANSCENDENTAL for n in _TRANSCENDENTAL_NAMES.split()})
TOLERANCES.update({f"numpy.{n}": _SUM for n in _SUM_NAMES})
TOLERANCES.update({f"numpy.ndarray.{n}": _SUM for n in _SUM_NAMES})
_PRODUCT = Tolerance(
    atol=1e-3,
    rtol=1e-5,
    note="float32 accumulation in another order (BLAS vs torch): a few float32 ulp of sum(|a*b|), "
    "below 1e-3 for the O(1e3) magnitudes tested; integer products are exact",
)
TOLERANCES.update({n: _PRODUCT for n in ("numpy.dot", "numpy.matmul", "numpy.ndarray.dot")})
_FFT = Tolerance(
    atol=1e-3,
    rtol=1e-5,
    note="NumPy's pocketfft vs torch's FFT (pocketfft/MKL on the CPU, cuFFT): a few float32 ulp "
    "of sum(|x|), below 1e-3 for the O(1e3) magnitudes tested; shifts are exact",
)
TOLERANCES.update(
    {f"numpy.fft.{n}": _FFT for n in ("fft", "fft2", "fftn", "ifft", "ifft2", "ifftn", "irfft")}
)
TOLERANCES.update({f"numpy.fft.{n}": _FFT for n in ("rfft", "rfft2")})


# --- PIL ----------------------------------------------------------------------------------------
# Every PIL backend reproduces Pillow's integer arithmetic bit for bit: no entries.

# --- librosa (signals of amplitude <= 1) -------------------------------------------------------
_FFT32 = "float32 FFT rounding: librosa multiplies frames by a float64 window before its FFT"
TOLERANCES.update(
    {
        "librosa.amplitude_to_db": Tolerance(atol=1e-4, note="float32 log10 ulps, in dB"),
        "librosa.db_to_amplitude": Tolerance(rtol=1e-5, note="float32 pow ulps"),
        "librosa.db_to_power": Tolerance(rtol=1e-5, note="float32 pow ulps"),
        "librosa.feature.melspectrogram": Tolerance(atol=1e-5, rtol=1e-5, note=_FFT32),
        "librosa.feature.mfcc": Tolerance(
            atol=5e-2,
            rtol=1e-5,
            note=_FFT32
            + "; dB errors of quiet mel bands summed by the DCT: ~1e-4 with norm='ortho', "
            "scaled by 2*sqrt(n_mels/2) with norm=None and by up to 1+lifter/2 with a lifter",
        ),
        "librosa.power_to_db": Tolerance(atol=1e-4, note="float32 log10 ulps, in dB"),
        "librosa.resample": Tolerance(
            atol=2e-6, note="float32 filter sums (polyphase) or FFTs in another order than SciPy's"
        ),
        "librosa.stft": Tolerance(atol=2e-5, rtol=1e-5, note=_FFT32),
        "librosa.util.normalize": Tolerance(
            rtol=1e-6, note="float64 norms summed in another order"
        ),
    }
)


# --- torch (MoveOnly: the same function on another device) ---------------------------------------
# On the CPU the original function runs itself: bit-exact. On CUDA, cuDNN, cuBLAS and cuFFT sum in
# another order than the CPU kernels (seen on an H100: up to 1.9e-6 absolute on O(10) float32
# values); pooling and padding are exact.
_DEVICE_KERNELS = Tolerance(
    atol=1e-4,
    rtol=1e-5,
    note="exact on the CPU; on CUDA, float32 sums in cuDNN/cuBLAS/cuFFT order: a few ulp of "
    "sum(|terms|) (TF32 convolutions, where the user enables them, round further and are "
    "switched back by the run-time check)",
)
_KERNEL_SUMS = (
    "torch.conv1d torch.conv2d torch.fft.fft torch.fft.fft2 torch.fft.rfft torch.fft.rfft2 "
    "torch.functional.stft torch.matmul torch.nn.functional.grid_sample "
    "torch.nn.functional.interpolate"
)
TOLERANCES.update({name: _DEVICE_KERNELS for name in _KERNEL_SUMS.split()})


def tolerance_for(name: str) -> Tolerance:
    """Return the tolerance of ``name``; backends without an entry must match exactly."""
    return TOLERANCES.get(name, EXACT)


def difference(name: str, expected: Any, actual: Any) -> str | None:
    """Why ``actual`` (a migrated call's result) is not ``expected`` (the library's) within the
    tolerance of ``name``; ``None`` when it is.

    Compares type, shape, dtype and values (NaN where the library has NaN), elementwise for
    arrays, tensors, NumPy and Python scalars and PIL images, recursively for tuples and lists.
    """
    if isinstance(expected, tuple | list):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            return f"{type(actual).__name__} of {_len(actual)} where the library returns {type(expected).__name__} of {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            problem = difference(name, e, a)
            if problem is not None:
                return f"item {i}: {problem}"
        return None
    if _is_pil(expected) or _is_pil(actual):
        if not (_is_pil(expected) and _is_pil(actual)):
            return f"{type(actual).__name__} where the library returns {type(expected).__name__}"
        if expected.mode != actual.mode or expected.size != actual.size:
            return f"PIL {actual.mode} {actual.size} where the library returns {expected.mode} {expected.size}"
        expected, actual = np.asarray(expected), np.asarray(actual)
    if type(actual) is not type(expected) and not (
        isinstance(expected, np.generic) and isinstance(actual, np.generic)
    ):
        return f"{type(actual).__name__} where the library returns {type(expected).__name__}"
    if not hasattr(expected, "dtype"):  # Python scalars and other plain values
        if isinstance(expected, float) and isinstance(actual, float):
            expected, actual = np.float64(expected), np.float64(actual)
        else:
            return (
                None if actual == expected else f"{actual!r} where the library returns {expected!r}"
            )
    exp = _as_numpy(expected)
    got = _as_numpy(actual)
    if got.shape != exp.shape:
        return f"shape {got.shape} where the library returns {exp.shape}"
    if got.dtype != exp.dtype:
        return f"dtype {got.dtype} where the library returns {exp.dtype}"
    return _value_difference(tolerance_for(name), exp, got)


def _len(value: Any) -> int | str:
    try:
        return len(value)
    except TypeError:
        return "?"


def _is_pil(value: Any) -> bool:
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def _value_difference(tol: Tolerance, exp: np.ndarray, got: np.ndarray) -> str | None:
    if exp.size == 0:
        return None
    if exp.dtype.kind in "bOSUV":
        same = np.asarray(exp == got)
        return None if same.all() else f"{int((~same).sum())} of {exp.size} values differ"
    kind = np.complex128 if exp.dtype.kind == "c" else np.float64
    e, g = exp.astype(kind), got.astype(kind)
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    if (nan_e != nan_g).any():
        return f"NaN at {int((nan_e != nan_g).sum())} positions where the library has none (or the reverse)"
    with np.errstate(invalid="ignore", over="ignore"):
        same = (e == g) | nan_e
        diff = np.where(same, 0.0, np.abs(g - e))
        allowed = tol.atol + tol.rtol * np.abs(np.where(np.isfinite(e), e, 0))
        bad = diff > allowed
    if not bad.any():
        return None
    frac = float(bad.mean())
    worst = float(diff[bad].max())
    if frac <= tol.max_mismatch_frac and worst <= tol.mismatch_atol:
        return None
    return (
        f"{int(bad.sum())} of {bad.size} values ({frac:.2%}) differ, by up to {worst:g} "
        f"(tolerance: atol {tol.atol:g}, rtol {tol.rtol:g}, {tol.max_mismatch_frac:.2%} up to "
        f"{tol.mismatch_atol:g})"
    )
