"""Conformance corpus of the librosa ops: signals (mono (T,), stereo (2, T), multichannel
(2, 3, T), float32/float64 and the dtypes librosa rejects), lengths (empty, one sample, shorter than n_fft), layouts (Fortran,
strided, reversed, read-only), NaN and inf; spectrograms of every float dtype, complex, integers,
0-d, empty and multichannel ((2, F, frames), (2, 3, F, frames)); and each function's parameters (n_fft, hops, windows, pad modes, centre, power,
mel bands, ref callables, top_db, norms, axes, resampling types and rates)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from migrate_support import Args, Labeled

SR = 8000
SIGNAL_DTYPES = ("float32", "float64", "int16", "float16", "complex64")
SPEC_DTYPES = ("float32", "float64", "float16", "complex64", "int16", "uint8")
LAYOUTS = ("C", "F", "strided", "reversed", "readonly")


def signal(
    length: int = 2000,
    dtype: str = "float32",
    channels: int | tuple[int, ...] = 0,
    layout: str = "C",
    seed: int = 0,
    special: bool = False,
) -> np.ndarray:
    """A sine with noise of amplitude <= 1: (length,), (channels, length) when channels > 0, or
    (*channels, length) for a tuple of channel axes."""
    rng = np.random.default_rng(seed)
    lead = channels if isinstance(channels, tuple) else (channels,) if channels else ()
    shape = (*lead, length)
    t = np.arange(length) / SR
    y = 0.5 * np.sin(2 * np.pi * 440.0 * t) + 0.3 * rng.uniform(-1, 1, shape)
    if layout == "strided":
        y = np.repeat(y, 2, axis=-1)
    dt = np.dtype(dtype)
    a = (y * 32767).astype(dt) if dt.kind in "iu" else y.astype(dt)
    if special and a.size >= 3:
        flat = a.reshape(-1)
        flat[[0, a.size // 2, -1]] = [np.nan, np.inf, -np.inf]
    if layout == "strided":
        a = a[..., ::2]
    elif layout == "F":
        a = np.asfortranarray(a)
    elif layout == "reversed":
        a = a[..., ::-1]
    elif layout == "readonly":
        a.flags.writeable = False
    return a


def spectrogram(
    shape: tuple[int, ...] = (33, 12),
    dtype: str = "float32",
    seed: int = 0,
    special: bool = False,
    layout: str = "C",
    low: float = 0.0,
    high: float = 1.0,
) -> np.ndarray:
    """A spectrogram-like array with values in [low, high) (zeros in a few bins)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, shape)
    if x.size >= 4:
        x.reshape(-1)[:: max(1, x.size // 4)] = 0.0
    dt = np.dtype(dtype)
    if dt.kind == "c":
        a = (x + 1j * rng.uniform(low, high, shape)).astype(dt)
    elif dt.kind in "iu":
        a = (x * 100).astype(dt)
    else:
        a = x.astype(dt)
    if special and a.size >= 3:
        a.reshape(-1)[[1, a.size // 2, -1]] = [np.nan, np.inf, -np.inf]
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "reversed":
        a = a[::-1]
    elif layout == "readonly":
        a.flags.writeable = False
    return a


Params = list[tuple[str, dict[str, Any]]]


def _signals() -> list[tuple[str, Callable[[], np.ndarray]]]:
    out: list[tuple[str, Callable[[], np.ndarray]]] = []
    for dtype in SIGNAL_DTYPES:
        out.append((dtype, lambda dtype=dtype: signal(dtype=dtype)))
    for layout in LAYOUTS[1:]:
        out.append((f"stereo {layout}", lambda layout=layout: signal(channels=2, layout=layout)))
    for length in (0, 1, 100):
        out.append((f"length {length}", lambda length=length: signal(length)))
    out.append(("stereo float64", lambda: signal(dtype="float64", channels=2)))
    for layout in ("C", "F", "reversed"):
        out.append((f"2x3 {layout}", lambda layout=layout: signal(channels=(2, 3), layout=layout)))
    out.append(("2x3 float64", lambda: signal(dtype="float64", channels=(2, 3))))
    out.append(("nan/inf", lambda: signal(special=True)))
    out.append(("0-d", lambda: np.asarray(0.5, dtype=np.float32)))
    out.append(("list", lambda: [0.0, 0.5, -0.5] * 400))
    return out


def _spectrograms() -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for dtype in SPEC_DTYPES:
        out.append((dtype, lambda dtype=dtype: spectrogram(dtype=dtype)))
    for layout in ("F", "reversed", "readonly"):
        out.append((f"float32 {layout}", lambda layout=layout: spectrogram(layout=layout)))
    for shape in ((), (0, 5), (7,), (2, 9, 6), (2, 3, 9, 6)):
        out.append((f"float32 {shape}", lambda shape=shape: spectrogram(shape)))
    for shape in ((2, 9, 6), (2, 3, 9, 6)):
        out.append((f"float32 {shape} F", lambda shape=shape: spectrogram(shape, layout="F")))
    out.append(("complex64 (2, 3, 9, 6)", lambda: spectrogram((2, 3, 9, 6), "complex64")))
    out.append(("nan/inf", lambda: spectrogram(dtype="float64", special=True)))
    out.append(("negative", lambda: spectrogram(low=-1.0)))
    out.append(("zeros", lambda: np.zeros((5, 4), np.float32)))
    out.append(("python float", lambda: 0.25))
    return out


def _dbs() -> list[tuple[str, Callable[[], Any]]]:
    """dB spectrograms (-80..0) in every dtype and shape."""
    out: list[tuple[str, Callable[[], Any]]] = []
    for dtype in ("float32", "float64", "float16", "int16", "complex64"):
        out.append((dtype, lambda dtype=dtype: spectrogram(dtype=dtype, low=-80, high=0)))
    for shape in ((), (0, 5), (2, 9, 6), (2, 3, 9, 6)):
        out.append((f"{shape}", lambda shape=shape: spectrogram(shape, low=-80, high=0)))
    out.append(("(2, 3, 9, 6) F", lambda: spectrogram((2, 3, 9, 6), low=-80, high=0, layout="F")))
    out.append(("nan/inf", lambda: spectrogram(special=True, low=-80, high=0)))
    out.append(("python float", lambda: -20.0))
    return out


_PARAMS: dict[str, Params] = {
    "librosa.core.spectrum.stft": [
        ("n_fft 256", {"n_fft": 256}),
        ("hop win", {"n_fft": 128, "hop_length": 40, "win_length": 100}),
        ("hamming", {"n_fft": 128, "window": "hamming"}),
        ("blackman", {"n_fft": 128, "window": "blackman"}),
        ("boxcar", {"n_fft": 128, "window": "boxcar"}),
        ("kaiser window", {"n_fft": 128, "window": ("kaiser", 4.0)}),
        ("array window", {"n_fft": 64, "window": np.hanning(64)}),
        ("center False", {"n_fft": 128, "center": False}),
        ("reflect", {"n_fft": 128, "pad_mode": "reflect"}),
        ("edge", {"n_fft": 128, "pad_mode": "edge"}),
        ("wrap", {"n_fft": 128, "pad_mode": "wrap"}),
        ("linear_ramp", {"n_fft": 128, "pad_mode": "linear_ramp"}),
        ("dtype", {"n_fft": 128, "dtype": np.complex128}),
        ("win > n_fft", {"n_fft": 64, "win_length": 128}),
        ("hop 0", {"n_fft": 64, "hop_length": 0}),
        ("n_fft > signal", {"n_fft": 4096}),
        ("n_fft > signal no centre", {"n_fft": 4096, "center": False}),
        ("odd n_fft", {"n_fft": 101}),
    ],
    "librosa.feature.spectral.melspectrogram": [
        ("default", {"sr": SR, "n_fft": 256}),
        ("n_mels 40 htk", {"sr": SR, "n_fft": 256, "n_mels": 40, "htk": True}),
        ("fmin fmax", {"sr": SR, "n_fft": 256, "fmin": 100.0, "fmax": 3000.0}),
        ("norm None", {"sr": SR, "n_fft": 256, "norm": None}),
        ("norm 2", {"sr": SR, "n_fft": 256, "norm": 2}),
        ("power 1", {"sr": SR, "n_fft": 256, "power": 1.0}),
        ("hop win", {"sr": SR, "n_fft": 256, "hop_length": 100, "win_length": 200}),
        ("center False", {"sr": SR, "n_fft": 256, "center": False}),
        ("dtype float64", {"sr": SR, "n_fft": 256, "dtype": np.float64}),
        ("unknown kwarg", {"sr": SR, "n_fft": 256, "fancy": 1}),
    ],
    "librosa.feature.spectral.mfcc": [
        ("default", {"sr": SR, "n_fft": 256}),
        ("n_mfcc 13", {"sr": SR, "n_fft": 256, "n_mfcc": 13}),
        ("norm None", {"sr": SR, "n_fft": 256, "norm": None}),
        ("lifter", {"sr": SR, "n_fft": 256, "lifter": 22}),
        ("dct 3", {"sr": SR, "n_fft": 256, "dct_type": 3}),
        ("n_mels 20", {"sr": SR, "n_fft": 256, "n_mels": 20}),
        ("n_mfcc > n_mels", {"sr": SR, "n_fft": 256, "n_mels": 10, "n_mfcc": 20}),
        ("negative lifter", {"sr": SR, "n_fft": 256, "lifter": -1}),
    ],
    "librosa.core.audio.resample": [
        ("fft", {"orig_sr": SR, "target_sr": 4000, "res_type": "fft"}),
        ("scipy up", {"orig_sr": SR, "target_sr": 11025, "res_type": "scipy"}),
        ("polyphase", {"orig_sr": SR, "target_sr": 6000, "res_type": "polyphase"}),
        ("polyphase up", {"orig_sr": 16000, "target_sr": 22050, "res_type": "polyphase"}),
        ("polyphase float", {"orig_sr": 8000.5, "target_sr": 4000, "res_type": "polyphase"}),
        ("same rate", {"orig_sr": SR, "target_sr": SR, "res_type": "fft"}),
        ("scale", {"orig_sr": SR, "target_sr": 4000, "res_type": "fft", "scale": True}),
        ("fix False", {"orig_sr": SR, "target_sr": 6000, "res_type": "polyphase", "fix": False}),
        ("soxr default", {"orig_sr": SR, "target_sr": 4000}),
        ("axis 0", {"orig_sr": SR, "target_sr": 4000, "res_type": "fft", "axis": 0}),
        ("zero rate", {"orig_sr": SR, "target_sr": 0, "res_type": "fft"}),
    ],
}

_SPECTRAL: dict[str, Params] = {
    "librosa.core.spectrum.power_to_db": [
        ("default", {}),
        ("ref max", {"ref": np.max}),
        ("ref mean", {"ref": np.mean}),
        ("ref median", {"ref": np.median}),
        ("ref 0.5", {"ref": 0.5}),
        ("top_db None", {"top_db": None}),
        ("top_db 20", {"top_db": 20.0}),
        ("amin", {"amin": 1e-3}),
        ("amin 0", {"amin": 0.0}),
        ("top_db negative", {"top_db": -1.0}),
    ],
    "librosa.core.spectrum.amplitude_to_db": [
        ("default", {}),
        ("ref max", {"ref": np.max}),
        ("ref min", {"ref": np.min}),
        ("ref 2", {"ref": 2.0}),
        ("top_db None", {"top_db": None}),
        ("amin", {"amin": 1e-2}),
    ],
    "librosa.util.utils.normalize": [
        ("default", {}),
        ("axis None", {"axis": None}),
        ("axis -1", {"axis": -1}),
        ("axis 5", {"axis": 5}),
        ("norm 2", {"norm": 2}),
        ("norm 1 axis 1", {"norm": 1, "axis": 1}),
        ("norm -inf", {"norm": -np.inf}),
        ("norm 0", {"norm": 0}),
        ("norm None", {"norm": None}),
        ("norm -1", {"norm": -1}),
        ("threshold", {"threshold": 0.5}),
        ("threshold 0", {"threshold": 0.0}),
        ("fill False", {"fill": False, "threshold": 0.5}),
        ("fill True", {"fill": True}),
    ],
}

_DB: dict[str, Params] = {
    "librosa.core.spectrum.db_to_power": [("default", {}), ("ref 2", {"ref": 2.0})],
    "librosa.core.spectrum.db_to_amplitude": [("default", {}), ("ref 0.5", {"ref": 0.5})],
}


def _signal_cases(name: str) -> Labeled:
    params = _PARAMS[name]
    keyword = name.split(".")[-1] in ("melspectrogram", "mfcc")
    out: Labeled = []

    def build(make: Callable[[], Any], kwargs: dict[str, Any]) -> Callable[[], Args]:
        if keyword:
            return lambda: ((), {"y": make(), **kwargs})
        return lambda: ((make(),), dict(kwargs))

    for label, kwargs in params:
        out.append((f"{label} float32", build(signal, kwargs)))
        out.append((f"{label} stereo", build(lambda: signal(channels=2), kwargs)))
        out.append((f"{label} 2x3", build(lambda: signal(channels=(2, 3)), kwargs)))
    first = params[0][1]
    for label, make in _signals():
        out.append((f"{params[0][0]} {label}", build(make, first)))
    if keyword:  # from a spectrogram instead of a signal
        for label, make in (
            ("S power", lambda: spectrogram((129, 10))),
            ("S float64", lambda: spectrogram((129, 10), "float64")),
            ("S wrong bins", lambda: spectrogram((33, 10))),
            ("S 2-d mel", lambda: spectrogram((128, 10))),
            ("S stereo", lambda: spectrogram((2, 129, 10))),
            ("S stereo F", lambda: spectrogram((2, 129, 10), layout="F")),
            ("S 2x3", lambda: spectrogram((2, 3, 129, 10))),
            ("S 2x3 mel", lambda: spectrogram((2, 3, 128, 10))),
        ):
            kwargs = {k: v for k, v in first.items() if k != "n_fft"}
            out.append((label, lambda make=make, kwargs=kwargs: ((), {"S": make(), **kwargs})))
        out.append(("neither y nor S", lambda: ((), {"sr": SR})))
    return out


def _array_cases(name: str, params: Params, arrays: list[tuple[str, Callable[[], Any]]]) -> Labeled:
    out: Labeled = []
    for label, kwargs in params:
        for dtype in ("float32", "float64"):
            out.append(
                (
                    f"{label} {dtype}",
                    lambda kwargs=kwargs, dtype=dtype: (
                        (next(make for lab, make in arrays if lab == dtype)(),),
                        dict(kwargs),
                    ),
                )
            )
    for label, make in arrays:
        out.append((f"{params[0][0]} {label}", lambda make=make: ((make(),), dict(params[0][1]))))
    return out


def cases(name: str) -> Labeled:
    """The fixed corpus of a librosa function (canonical name)."""
    if name in _PARAMS:
        return _signal_cases(name)
    if name in _SPECTRAL:
        return _array_cases(name, _SPECTRAL[name], _spectrograms())
    return _array_cases(name, _DB[name], _dbs())


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """Random signals (length, channels, seed) with a random parameter set of the corpus."""
    if name not in _PARAMS:
        return st.sampled_from(cases(name))
    params = _PARAMS[name]
    keyword = name.split(".")[-1] in ("melspectrogram", "mfcc")

    def draw(i: int, length: int, channels: int | tuple[int, ...], dtype: str, seed: int) -> Any:
        label, kwargs = params[i]

        def build() -> Args:
            y = signal(length, dtype, channels, seed=seed)
            return ((), {"y": y, **kwargs}) if keyword else ((y,), dict(kwargs))

        lead = "x".join(map(str, channels)) if isinstance(channels, tuple) else channels
        return f"{label} {dtype} {lead}x{length} #{seed}", build

    return st.builds(
        draw,
        st.integers(0, len(params) - 1),
        st.integers(1, 3000),
        st.sampled_from((0, 1, 2, (2, 3))),
        st.sampled_from(("float32", "float64")),
        st.integers(0, 2**16),
    )


NAMES = frozenset(_PARAMS) | frozenset(_SPECTRAL) | frozenset(_DB)
