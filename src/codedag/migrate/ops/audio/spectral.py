"""Torch backends of librosa: stft, melspectrogram, power/amplitude_to_db, mfcc (no torchaudio).

Batch convention: the first dimension of every signal or spectrogram is the batch, one library call
per sample: ``y`` is (N, T) (a library call on a (T,) signal is a batch of one, (1, T)) or
(N, C, T) for multichannel calls; spectrograms are (N, ..., F, frames). Reductions that librosa
makes over its whole input (``top_db``'s maximum, a callable ``ref`` such as ``numpy.max``) are
made per sample, i.e. per library call.

Numerics: ``torch.stft`` in the signal's dtype with librosa's periodic window (SciPy's
``get_window(..., fftbins=True)``) centred in ``n_fft``, and librosa's ``n_fft // 2`` padding;
librosa multiplies frames by a float64 window and casts the FFT to complex64, so float32 results
differ by float32 FFT rounding only (see TOLERANCES). The mel filterbank is computed here in
float64 exactly as ``librosa.filters.mel`` does (Slaney or HTK scale, Slaney or p-norm area
normalization) and rounded to float32 as librosa stores it.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.contract import Fidelity
from codedag.migrate.ops.audio._adapter import op

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _signal(y: Any) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise UnsupportedOperation(f"received {type(y).__name__}; expected a (N, T) tensor")
    if y.dim() < 2:
        raise UnsupportedOperation(
            f"expected a batch (N, T) or (N, C, T); got shape {tuple(y.shape)}"
        )
    if y.dtype not in (torch.float32, torch.float64):
        raise UnsupportedOperation(f"expected a float32 or float64 signal, got {y.dtype}")
    return y


def _window(window: Any, win_length: int, dtype: torch.dtype, device: torch.device) -> Any:
    if isinstance(window, torch.Tensor):
        if window.shape != (win_length,):
            raise UnsupportedOperation(f"window of shape {tuple(window.shape)} != ({win_length},)")
        return window.to(device=device, dtype=dtype)
    name = window[0] if isinstance(window, tuple) and len(window) == 1 else window
    makers = {
        "hann": torch.hann_window,
        "hamming": torch.hamming_window,
        "blackman": torch.blackman_window,
    }
    if name in ("boxcar", "ones", "rectangular"):
        return torch.ones(win_length, dtype=dtype, device=device)
    if name not in makers:
        raise UnsupportedOperation(f"window {window!r}; expected hann, hamming, blackman or boxcar")
    return makers[name](win_length, periodic=True, dtype=dtype, device=device)


def stft(
    y: torch.Tensor,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    pad_mode: str = "constant",
    out: Any = None,
) -> torch.Tensor:
    """``librosa.stft``: complex (N, ..., 1 + n_fft // 2, frames)."""
    y = _signal(y)
    if out is not None or dtype is not None:
        raise UnsupportedOperation("stft's out= and dtype= are not supported")
    win_length = win_length or n_fft
    hop_length = hop_length or win_length // 4
    if win_length > n_fft or hop_length <= 0:
        raise UnsupportedOperation(f"win_length={win_length} > n_fft={n_fft} or bad hop")
    if pad_mode not in _PAD_MODES:
        raise UnsupportedOperation(f"pad_mode={pad_mode!r}; expected one of {sorted(_PAD_MODES)}")
    length = y.shape[-1]
    if center and pad_mode != "constant" and n_fft // 2 >= length:
        raise UnsupportedOperation(f"pad_mode={pad_mode!r} needs a signal longer than n_fft // 2")
    if not center and n_fft > length:
        raise UnsupportedOperation(f"n_fft={n_fft} > signal length {length} with center=False")
    lead = y.shape[:-1]
    win = _window(window, win_length, y.dtype, y.device)
    spec = torch.stft(
        y.reshape(-1, length),
        n_fft,
        hop_length=hop_length,
        win_length=win_length,
        window=win,
        center=center,
        pad_mode=_PAD_MODES[pad_mode],
        return_complex=True,
    )
    return spec.reshape(*lead, *spec.shape[-2:])


def _hz_to_mel(f: np.ndarray, htk: bool) -> np.ndarray:
    f = np.asanyarray(f, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    mels = f / f_sp
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    log_t = f >= min_log_hz
    mels = np.where(log_t, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, mels)
    return mels


def _mel_to_hz(m: np.ndarray, htk: bool) -> np.ndarray:
    m = np.asanyarray(m, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    freqs = f_sp * m
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


@functools.lru_cache(maxsize=64)
def mel_filterbank(
    sr: float,
    n_fft: int,
    n_mels: int = 128,
    fmin: float = 0.0,
    fmax: float | None = None,
    htk: bool = False,
    norm: Any = "slaney",
) -> np.ndarray:
    """``librosa.filters.mel`` (float32, (n_mels, 1 + n_fft // 2)), computed as librosa does."""
    fmax = float(sr) / 2 if fmax is None else fmax
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin, htk), _hz_to_mel(fmax, htk), n_mels + 2), htk)
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    if norm == "slaney":
        enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
        weights *= enorm[:, np.newaxis]
    elif isinstance(norm, numbers.Number):
        if norm == np.inf:
            length = np.max(np.abs(weights), axis=-1, keepdims=True)
        elif norm > 0:
            length = np.sum(np.abs(weights) ** norm, axis=-1, keepdims=True) ** (1.0 / norm)
        else:
            raise UnsupportedOperation(f"mel norm={norm!r}")
        small = length < np.finfo(weights.dtype).tiny
        weights = weights / np.where(small, 1.0, length).astype(weights.dtype)
    elif norm is not None:
        raise UnsupportedOperation(f"mel norm={norm!r}; expected None, 'slaney' or a number")
    weights.setflags(write=False)
    return weights


def _mel_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    allowed = {"n_mels", "fmin", "fmax", "htk", "norm", "dtype"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise UnsupportedOperation(f"melspectrogram arguments {sorted(unknown)} are not supported")
    dtype = kwargs.pop("dtype", np.float32)
    if np.dtype(dtype) != np.float32:
        raise UnsupportedOperation(f"mel filterbank dtype {dtype!r}; only float32 is supported")
    return kwargs


def melspectrogram(
    *,
    y: torch.Tensor | None = None,
    sr: float = 22050,
    S: torch.Tensor | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    pad_mode: str = "constant",
    power: float = 2.0,
    **kwargs: Any,
) -> torch.Tensor:
    """``librosa.feature.melspectrogram``: (N, ..., n_mels, frames) in the signal's dtype."""
    mel_kw = _mel_kwargs(dict(kwargs))
    if S is not None:
        if not isinstance(S, torch.Tensor) or S.dim() < 3:
            raise UnsupportedOperation("S must be a (N, ..., F, frames) tensor")
        spec, n_fft = S, 2 * (S.shape[-2] - 1)
    elif y is not None:
        z = stft(
            y,
            n_fft=n_fft,
            hop_length=hop_length,
            win_length=win_length,
            window=window,
            center=center,
            pad_mode=pad_mode,
        )
        spec = z.abs() ** power if power != 1 else z.abs()
    else:
        raise UnsupportedOperation("melspectrogram needs y or S")
    basis = mel_filterbank(float(sr), int(n_fft), **mel_kw)
    if basis.shape[-1] != spec.shape[-2]:
        raise UnsupportedOperation(f"S has {spec.shape[-2]} bins; expected {basis.shape[-1]}")
    real = spec.real if spec.is_complex() else spec
    mel = torch.tensor(basis, device=real.device, dtype=real.dtype)
    return torch.matmul(mel, real)


def _per_sample(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    flat = x.reshape(x.shape[0], -1)
    return fn(flat).reshape((x.shape[0],) + (1,) * (x.dim() - 1))


def _ref_value(ref: Any, magnitude: torch.Tensor) -> Any:
    if callable(ref):
        reducers: dict[Any, Callable[[torch.Tensor], torch.Tensor]] = {
            np.max: lambda f: f.amax(dim=1),
            np.amax: lambda f: f.amax(dim=1),
            np.min: lambda f: f.amin(dim=1),
            np.amin: lambda f: f.amin(dim=1),
            np.mean: lambda f: f.mean(dim=1),
        }
        if ref not in reducers:
            raise UnsupportedOperation(f"ref={ref!r}; expected a number, np.max, np.min or np.mean")
        return _per_sample(magnitude, reducers[ref])
    if isinstance(ref, torch.Tensor):
        return ref.abs().to(magnitude.dtype)
    if isinstance(ref, numbers.Real):
        return abs(float(ref))
    raise UnsupportedOperation(f"ref of type {type(ref).__name__}")


def _to_db(magnitude: torch.Tensor, ref_value: Any, amin: float, top_db: float | None) -> Any:
    if amin <= 0:
        raise UnsupportedOperation("amin must be strictly positive")
    log_spec = 10.0 * torch.log10(torch.clamp(magnitude, min=amin))
    if isinstance(ref_value, torch.Tensor):
        log_spec = log_spec - 10.0 * torch.log10(torch.clamp(ref_value, min=amin))
    else:
        log_spec = log_spec - float(10.0 * np.log10(np.maximum(amin, ref_value)))
    if top_db is not None:
        if top_db < 0:
            raise UnsupportedOperation("top_db must be non-negative")
        floor = _per_sample(log_spec, lambda f: f.amax(dim=1)) - top_db
        log_spec = torch.maximum(log_spec, floor.to(log_spec.dtype))
    return log_spec


def _spectrogram_input(S: Any) -> torch.Tensor:
    if not isinstance(S, torch.Tensor) or S.dim() < 1:
        raise UnsupportedOperation("expected a batch-first spectrogram tensor")
    if S.is_complex():
        raise UnsupportedOperation("complex input: librosa warns and discards the phase")
    if S.dtype not in (torch.float32, torch.float64, torch.float16):
        raise UnsupportedOperation(f"spectrogram dtype {S.dtype}")
    return S


def power_to_db(
    S: torch.Tensor,
    *,
    ref: Any = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
) -> torch.Tensor:
    """``librosa.power_to_db``; ``top_db`` and a callable ``ref`` act per sample (per call)."""
    S = _spectrogram_input(S)
    return _to_db(S, _ref_value(ref, S), amin, top_db)


def amplitude_to_db(
    S: torch.Tensor,
    *,
    ref: Any = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
) -> torch.Tensor:
    """``librosa.amplitude_to_db``: ``power_to_db(S**2, ref=ref**2, amin=amin**2)`` per sample."""
    magnitude = _spectrogram_input(S).abs()
    ref_value = _ref_value(ref, magnitude)
    power = torch.square(magnitude)
    return _to_db(power, ref_value**2, amin**2, top_db)


def db_to_power(S_db: torch.Tensor, *, ref: float = 1.0) -> torch.Tensor:
    """``librosa.db_to_power``: ``ref * 10 ** (0.1 * S_db)``."""
    x = _spectrogram_input(S_db)
    return float(ref) * torch.pow(10.0, x * 0.1)


def db_to_amplitude(S_db: torch.Tensor, *, ref: float = 1.0) -> torch.Tensor:
    """``librosa.db_to_amplitude``: ``db_to_power(S_db, ref=ref**2) ** 0.5``."""
    return db_to_power(S_db, ref=float(ref) ** 2) ** 0.5


def normalize(
    S: torch.Tensor,
    *,
    norm: float | None = np.inf,
    axis: int | None = 0,
    threshold: float | None = None,
    fill: bool | None = None,
) -> torch.Tensor:
    """``librosa.util.normalize`` per sample: ``axis`` counts the axes of one call (batch excluded).

    Norms inf, -inf, 0 and p > 0 with ``fill`` None or False; lengths in float64 as librosa does.
    """
    x = _spectrogram_input(S)
    if fill is True:
        raise UnsupportedOperation("normalize(fill=True) is not supported")
    if norm is None:
        return x
    if threshold is None:
        threshold = float(torch.finfo(x.dtype).tiny)
    elif threshold <= 0:
        raise UnsupportedOperation("threshold must be strictly positive")
    if not bool(torch.isfinite(x).all()):
        raise UnsupportedOperation("librosa refuses non-finite input")
    call_dims = x.dim() - 1
    if axis is None:
        dims: tuple[int, ...] = tuple(range(1, x.dim()))
    elif -call_dims <= axis < call_dims:
        dims = (axis % call_dims + 1,)
    else:
        raise UnsupportedOperation(f"axis {axis} out of range for {call_dims}-d calls")
    mag = x.abs().to(torch.float64)
    if norm == np.inf:
        length = mag.amax(dim=dims, keepdim=True)
    elif norm == -np.inf:
        length = mag.amin(dim=dims, keepdim=True)
    elif norm == 0:
        length = (mag > 0).to(torch.float64).sum(dim=dims, keepdim=True)
    elif isinstance(norm, numbers.Real) and norm > 0:
        length = (mag**norm).sum(dim=dims, keepdim=True) ** (1.0 / norm)
    else:
        raise UnsupportedOperation(f"norm={norm!r}")
    small = length < threshold
    length = torch.where(small, torch.full_like(length, 1.0 if fill is None else np.inf), length)
    return (x.to(torch.float64) / length).to(x.dtype)


@functools.lru_cache(maxsize=32)
def _dct_matrix(n_in: int, n_out: int, norm: str | None) -> np.ndarray:
    """Rows of ``scipy.fftpack.dct(type=2)`` (ortho or unnormalized) as a (n_out, n_in) matrix."""
    n = np.arange(n_in)
    k = np.arange(n_out)[:, None]
    basis = np.cos(np.pi * k * (2 * n + 1) / (2 * n_in))
    if norm == "ortho":
        basis *= np.sqrt(2.0 / n_in)
        basis[0] *= 1.0 / np.sqrt(2.0)
    else:
        basis *= 2.0
    return basis


def mfcc(
    *,
    y: torch.Tensor | None = None,
    sr: float = 22050,
    S: torch.Tensor | None = None,
    n_mfcc: int = 20,
    dct_type: int = 2,
    norm: str | None = "ortho",
    lifter: float = 0,
    mel_norm: Any = "slaney",
    **kwargs: Any,
) -> torch.Tensor:
    """``librosa.feature.mfcc``: DCT-II of the dB mel spectrogram (per-sample ``top_db``)."""
    if dct_type != 2 or norm not in ("ortho", None):
        raise UnsupportedOperation(f"dct_type={dct_type}, norm={norm!r}; expected 2 and ortho/None")
    if lifter < 0:
        raise UnsupportedOperation("lifter must be non-negative")
    if S is None:
        if y is None:
            raise UnsupportedOperation("mfcc needs y or S")
        S = power_to_db(melspectrogram(y=y, sr=sr, norm=mel_norm, **kwargs))
    elif not isinstance(S, torch.Tensor) or S.dim() < 3:
        raise UnsupportedOperation("S must be a (N, ..., n_mels, frames) tensor")
    n_mels = S.shape[-2]
    if n_mfcc > n_mels:
        raise UnsupportedOperation(f"n_mfcc={n_mfcc} > n_mels={n_mels}")
    basis = torch.from_numpy(_dct_matrix(n_mels, n_mfcc, norm)).to(S.device, torch.float64)
    out = torch.matmul(basis.to(S.dtype), S)
    if lifter > 0:
        li = torch.sin(
            math.pi * torch.arange(1, 1 + n_mfcc, dtype=S.dtype, device=S.device) / lifter
        )
        out = out * (1 + (lifter / 2) * li)[:, None]
    return out


_FLOAT = frozenset({"float32", "float64"})
OPS = [
    # Public paths; the registry resolves them to the canonical names of the function objects
    # (``librosa.core.spectrum.stft``), which the tracer reports.
    op("librosa.stft", stft, dtypes=_FLOAT, order="F", fidelity=Fidelity.TOLERANCE),
    op(
        "librosa.feature.melspectrogram",
        melspectrogram,
        dtypes=_FLOAT,
        fidelity=Fidelity.TOLERANCE,
    ),
    op("librosa.power_to_db", power_to_db, fidelity=Fidelity.TOLERANCE),
    op("librosa.amplitude_to_db", amplitude_to_db, fidelity=Fidelity.TOLERANCE),
    op("librosa.db_to_amplitude", db_to_amplitude, fidelity=Fidelity.TOLERANCE),
    op("librosa.db_to_power", db_to_power, fidelity=Fidelity.TOLERANCE),
    op("librosa.util.normalize", normalize, fidelity=Fidelity.TOLERANCE),
    op("librosa.feature.mfcc", mfcc, dtypes=_FLOAT, fidelity=Fidelity.TOLERANCE),
]
