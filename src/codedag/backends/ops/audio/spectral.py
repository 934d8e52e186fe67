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

from codedag.backends.contract import Tolerance
from codedag.backends.ops.audio._adapter import op
from codedag.errors import UnsupportedOperation

# librosa.stft's pad modes computed here (librosa itself raises for wrap, mean, median, ...).
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}
_WINDOWS = frozenset({"hann", "hamming", "blackman", "boxcar", "ones", "rectangular"})


def _signal(y: object) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise UnsupportedOperation(f"received {type(y).__name__}; expected a (N, T) tensor")
    if y.dim() < 2:
        raise UnsupportedOperation(
            f"expected a batch (N, T) or (N, C, T); got shape {tuple(y.shape)}"
        )
    if y.dtype not in (torch.float32, torch.float64):
        raise UnsupportedOperation(f"expected a float32 or float64 signal, got {y.dtype}")
    return y


def _window_name(window: object) -> Any:
    return window[0] if isinstance(window, tuple) and len(window) == 1 else window


def _stft_refusal(
    length: int,
    n_fft: object,
    hop_length: object,
    win_length: object,
    window: object,
    center: object,
    dtype: object,
    pad_mode: object,
    out: object,
) -> str | None:
    """Why ``librosa.stft`` with these parameters on ``length`` samples is left to librosa."""
    if not isinstance(n_fft, int) or n_fft <= 0:
        return f"n_fft={n_fft!r}: expected a positive int"
    win = n_fft if win_length is None else win_length
    if not isinstance(win, int) or not 0 < win <= n_fft:
        return f"win_length={win_length!r} must be in 1..n_fft={n_fft} (librosa raises)"
    if hop_length is not None and not (isinstance(hop_length, int) and hop_length > 0):
        return f"hop_length={hop_length!r} must be a positive int (librosa raises)"
    if (hop_length or win // 4) <= 0:
        return f"win_length={win} gives a hop of 0 (librosa raises)"
    if out is not None or dtype is not None:
        return "stft's out= and dtype= are left to librosa"
    if isinstance(window, np.ndarray | torch.Tensor):
        if tuple(window.shape) != (win,):
            return f"window of shape {tuple(window.shape)} != ({win},) (librosa raises)"
    elif not isinstance(_window_name(window), str) or _window_name(window) not in _WINDOWS:
        return f"window {window!r}; computed: {', '.join(sorted(_WINDOWS))} or an array"
    if center:
        if pad_mode not in _PAD_MODES:
            return f"pad_mode={pad_mode!r}; computed: {', '.join(sorted(_PAD_MODES))}"
        if pad_mode != "constant" and n_fft // 2 >= length:
            return f"pad_mode={pad_mode!r} on a signal of {length} <= n_fft // 2 samples"
    elif n_fft > length:
        return f"n_fft={n_fft} > signal length {length} with center=False (librosa raises)"
    return None


def _finite(name: str, value: object) -> str | None:
    """librosa's ``valid_audio`` refusal of non-finite samples, as a declared reason."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc" and not np.isfinite(value).all():
        return f"{name}: non-finite samples (librosa raises ParameterError)"
    return None


def _length(value: object) -> int:
    return int(value.shape[-1]) if isinstance(value, np.ndarray) and value.ndim else 0


def _stft_check(
    y: object,
    *,
    n_fft: object = 2048,
    hop_length: object = None,
    win_length: object = None,
    window: object = "hann",
    center: object = True,
    dtype: object = None,
    pad_mode: object = "constant",
    out: object = None,
) -> str | None:
    return _finite("y", y) or _stft_refusal(
        _length(y), n_fft, hop_length, win_length, window, center, dtype, pad_mode, out
    )


def _window(window: object, win_length: int, dtype: torch.dtype, device: torch.device) -> Any:
    if isinstance(window, torch.Tensor):
        if window.shape != (win_length,):
            raise UnsupportedOperation(f"window of shape {tuple(window.shape)} != ({win_length},)")
        return window.to(device=device, dtype=dtype)
    name = _window_name(window)
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
    window: object = "hann",
    center: bool = True,
    dtype: object = None,
    pad_mode: str = "constant",
    out: object = None,
) -> torch.Tensor:
    """``librosa.stft``: complex (N, ..., 1 + n_fft // 2, frames)."""
    return _stft(y, n_fft, hop_length, win_length, window, center, dtype, pad_mode, out)


def _stft(
    y: torch.Tensor,
    n_fft: int,
    hop_length: int | None,
    win_length: int | None,
    window: object,
    center: bool,
    dtype: object,
    pad_mode: str,
    out: object,
) -> torch.Tensor:
    """:func:`stft` with its parameters by position (``melspectrogram``'s frames too)."""
    y = _signal(y)
    reason = _stft_refusal(
        y.shape[-1], n_fft, hop_length, win_length, window, center, dtype, pad_mode, out
    )
    if reason is not None:
        raise UnsupportedOperation(reason)
    win_length = win_length or n_fft
    hop_length = hop_length or win_length // 4
    length = y.shape[-1]
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


def _hz_to_mel(f: float | np.ndarray, htk: bool) -> np.ndarray:
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
    norm: object = "slaney",
) -> np.ndarray:
    """``librosa.filters.mel`` (float32, (n_mels, 1 + n_fft // 2)), computed as librosa does."""
    fmax = float(sr) / 2 if fmax is None else fmax
    weights: np.ndarray = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
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
    elif isinstance(norm, numbers.Real):
        if norm == np.inf:
            length = np.max(np.abs(weights), axis=-1, keepdims=True)
        elif float(norm) > 0:
            length = np.sum(np.abs(weights) ** norm, axis=-1, keepdims=True) ** (1.0 / norm)
        else:
            raise UnsupportedOperation(f"mel norm={norm!r}")
        small = length < np.finfo(weights.dtype).tiny
        weights = weights / np.where(small, 1.0, length).astype(weights.dtype)
    elif norm is not None:
        raise UnsupportedOperation(f"mel norm={norm!r}; expected None, 'slaney' or a number")
    weights.setflags(write=False)
    return weights


_MEL_KWARGS = frozenset({"n_mels", "fmin", "fmax", "htk", "norm", "dtype"})


def _mel_refusal(kwargs: dict[str, Any]) -> str | None:
    """Why ``librosa.filters.mel`` keyword arguments are left to librosa, or ``None``."""
    unknown = set(kwargs) - _MEL_KWARGS
    if unknown:
        return f"arguments {sorted(unknown)} (librosa.filters.mel raises TypeError)"
    try:
        dtype = np.dtype(kwargs.get("dtype", np.float32))
    except TypeError:
        return f"mel dtype {kwargs['dtype']!r}"
    if dtype != np.float32:
        return f"mel filterbank dtype {dtype}; computed: float32"
    n_mels = kwargs.get("n_mels", 128)
    if not isinstance(n_mels, int) or n_mels <= 0:
        return f"n_mels={n_mels!r}: expected a positive int"
    norm = kwargs.get("norm", "slaney")
    if not (
        norm is None or norm == "slaney" or (isinstance(norm, numbers.Real) and float(norm) > 0)
    ):
        return f"mel norm={norm!r}; computed: None, 'slaney' or a positive number"
    return None


def _mel_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    reason = _mel_refusal(kwargs)
    if reason is not None:
        raise UnsupportedOperation(reason)
    kwargs.pop("dtype", None)
    return kwargs


def _spectrogram_n_fft(n_fft: int | None, bins: int) -> int:
    """librosa's ``_spectrogram``: ``n_fft`` unless it does not match the bins of ``S``."""
    return 2 * (bins - 1) if n_fft is None or n_fft // 2 + 1 != bins else n_fft


def _melspectrogram_check(
    *,
    y: object = None,
    sr: object = 22050,
    S: object = None,
    n_fft: object = 2048,
    hop_length: object = 512,
    win_length: object = None,
    window: object = "hann",
    center: object = True,
    pad_mode: object = "constant",
    power: object = 2.0,
    **kwargs: Any,
) -> str | None:
    reason = _mel_refusal(kwargs)
    if reason is not None:
        return reason
    if not isinstance(sr, numbers.Real) or sr <= 0:
        return f"sr={sr!r}: expected a positive number"
    if S is not None:
        if not isinstance(S, np.ndarray) or S.ndim < 2:
            return "S: expected a (..., F, frames) array"
        return None
    if y is None:
        return "neither y nor S (librosa raises ParameterError)"
    return _finite("y", y) or _stft_refusal(
        _length(y), n_fft, hop_length, win_length, window, center, None, pad_mode, None
    )


def melspectrogram(
    *,
    y: torch.Tensor | None = None,
    sr: float = 22050,
    S: torch.Tensor | None = None,
    n_fft: int = 2048,
    hop_length: int = 512,
    win_length: int | None = None,
    window: object = "hann",
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
        spec, n_fft = S, _spectrogram_n_fft(n_fft, S.shape[-2])
    elif y is not None:
        z = _stft(y, n_fft, hop_length, win_length, window, center, None, pad_mode, None)
        spec = z.abs() ** power if power != 1 else z.abs()
    else:
        raise UnsupportedOperation("melspectrogram needs y or S")
    basis = mel_filterbank(float(sr), int(n_fft), **mel_kw)
    if basis.shape[-1] != spec.shape[-2]:
        raise UnsupportedOperation(f"S has {spec.shape[-2]} bins; expected {basis.shape[-1]}")
    real = spec.real if spec.is_complex() else spec
    mel = torch.tensor(basis, device=real.device, dtype=real.dtype)
    return _mel_project(mel, real)


def _mel_project(mel: torch.Tensor, spec: torch.Tensor) -> torch.Tensor:
    """``mel @ spec`` over the bins of (N, ..., F, frames) in librosa's layout: its
    ``einsum("...ft,mf->...mt")`` returns a mono call's (n_mels, frames) in C order and a
    multichannel call's as a view of a C-ordered (n_mels, ..., frames) array."""
    if spec.dim() <= 3:
        return torch.matmul(mel, spec)
    n, bins, frames = spec.shape[0], spec.shape[-2], spec.shape[-1]
    lead = spec.shape[1:-2]
    columns = spec.movedim(-2, 1).reshape(n, bins, -1)  # (N, F, channels * frames)
    out = torch.matmul(mel, columns).reshape(n, mel.shape[0], *lead, frames)
    return out.movedim(1, -2)


def _per_sample(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    flat = x.reshape(x.shape[0], -1)
    return fn(flat).reshape((x.shape[0],) + (1,) * (x.dim() - 1))


_REDUCERS: dict[Any, Callable[[torch.Tensor], torch.Tensor]] = {
    np.max: lambda f: f.amax(dim=1),
    np.amax: lambda f: f.amax(dim=1),
    np.min: lambda f: f.amin(dim=1),
    np.amin: lambda f: f.amin(dim=1),
    np.mean: lambda f: f.mean(dim=1),
}


def _ref_value(ref: object, magnitude: torch.Tensor) -> Any:
    if callable(ref):
        if ref not in _REDUCERS:
            raise UnsupportedOperation(f"ref={ref!r}; expected a number, np.max, np.min or np.mean")
        return _per_sample(magnitude, _REDUCERS[ref])
    if isinstance(ref, torch.Tensor):
        return ref.abs().to(magnitude.dtype)
    if isinstance(ref, numbers.Real):
        return abs(float(ref))
    raise UnsupportedOperation(f"ref of type {type(ref).__name__}")


def _to_db(magnitude: torch.Tensor, ref_value: Any, amin: float, top_db: float | None) -> Any:
    log_spec = 10.0 * torch.log10(torch.clamp(magnitude, min=amin))
    if isinstance(ref_value, torch.Tensor):
        log_spec = log_spec - 10.0 * torch.log10(torch.clamp(ref_value, min=amin))
    else:
        log_spec = log_spec - float(10.0 * np.log10(np.maximum(amin, ref_value)))
    if top_db is not None:
        floor = _per_sample(log_spec, lambda f: f.amax(dim=1)) - top_db
        log_spec = torch.maximum(log_spec, floor.to(log_spec.dtype))
    return log_spec


def _tensor(S: object) -> torch.Tensor:
    if not isinstance(S, torch.Tensor) or S.dim() < 1:
        raise UnsupportedOperation("expected a batch-first tensor")
    return S


def _db_refusal(ref: object, amin: object, top_db: object) -> str | None:
    if not isinstance(amin, numbers.Real) or amin <= 0:
        return f"amin={amin!r} must be strictly positive (librosa raises ParameterError)"
    if top_db is not None and (not isinstance(top_db, numbers.Real) or top_db < 0):
        return f"top_db={top_db!r} must be non-negative (librosa raises ParameterError)"
    if callable(ref) and ref not in _REDUCERS:
        return f"ref={getattr(ref, '__name__', ref)!r}; computed: a number, np.max, np.min, np.mean"
    if not callable(ref) and not isinstance(ref, numbers.Real | np.ndarray):
        return f"ref of type {type(ref).__name__}"
    return None


def _power_to_db_check(
    S: object, *, ref: object = 1.0, amin: object = 1e-10, top_db: object = 80.0
) -> str | None:
    return _db_refusal(ref, amin, top_db)


def _amplitude_to_db_check(
    S: object, *, ref: object = 1.0, amin: object = 1e-5, top_db: object = 80.0
) -> str | None:
    # amplitude_to_db passes amin**2 on: a negative amin is as good as its absolute value
    square = amin**2 if isinstance(amin, numbers.Real) else amin
    return _db_refusal(ref, square, top_db)


def power_to_db(
    S: torch.Tensor,
    *,
    ref: object = 1.0,
    amin: float = 1e-10,
    top_db: float | None = 80.0,
) -> torch.Tensor:
    """``librosa.power_to_db``; ``top_db`` and a callable ``ref`` act per sample (per call).

    Complex input counts by its magnitude (librosa warns and drops the phase); integers are
    computed in float64, as NumPy promotes them.
    """
    x = _tensor(S)
    magnitude = x.abs() if x.is_complex() else x
    if not magnitude.is_floating_point():
        magnitude = magnitude.to(torch.float64)
    return _to_db(magnitude, _ref_value(ref, magnitude), amin, top_db)


def amplitude_to_db(
    S: torch.Tensor,
    *,
    ref: object = 1.0,
    amin: float = 1e-5,
    top_db: float | None = 80.0,
) -> torch.Tensor:
    """``librosa.amplitude_to_db``: ``power_to_db(S**2, ref=ref**2, amin=amin**2)`` per sample."""
    magnitude = _tensor(S).abs()
    ref_value = _ref_value(ref, magnitude)
    power = torch.square(magnitude)
    return _to_db(power, ref_value**2, amin**2, top_db)


def db_to_power(S_db: torch.Tensor, *, ref: float = 1.0) -> torch.Tensor:
    """``librosa.db_to_power``: ``ref * 10 ** (0.1 * S_db)``, each factor rounded to the data's
    dtype first as NumPy does with Python scalars (integers: float64)."""
    x = _tensor(S_db)
    if not x.is_floating_point():
        x = x.to(torch.float64)
    tenth = torch.tensor(0.1, dtype=x.dtype, device=x.device)
    factor = torch.tensor(float(ref), dtype=x.dtype, device=x.device)
    exponent = x * tenth
    # out=: in the data's layout (NumPy keeps a Fortran-ordered spectrogram's); pow of a
    # Python base would return C order
    return factor * torch.pow(10.0, exponent, out=torch.empty_like(exponent))


def db_to_amplitude(S_db: torch.Tensor, *, ref: float = 1.0) -> torch.Tensor:
    """``librosa.db_to_amplitude``: ``db_to_power(S_db, ref=ref**2) ** 0.5``."""
    return torch.sqrt(db_to_power(S_db, ref=float(ref) ** 2))


def _normalize_check(
    S: object,
    *,
    norm: object = np.inf,
    axis: object = 0,
    threshold: object = None,
    fill: object = None,
) -> str | None:
    if threshold is not None and (not isinstance(threshold, numbers.Real) or threshold <= 0):
        return f"threshold={threshold!r} must be strictly positive (librosa raises)"
    if fill not in (None, False, True):
        return f"fill={fill!r} must be None or a bool (librosa raises)"
    reason = _finite("S", S)
    if reason is not None:
        return reason
    valid = norm is None or norm in (np.inf, -np.inf, 0)
    if not valid and not (isinstance(norm, numbers.Real) and float(norm) > 0):
        return f"norm={norm!r} (librosa raises ParameterError)"
    if norm == 0 and fill is True:
        return "norm=0 with fill=True (librosa raises ParameterError)"
    ndim = S.ndim if isinstance(S, np.ndarray) else 0
    if axis is not None and not (isinstance(axis, int) and -ndim <= axis < ndim):
        return f"axis {axis!r} out of range for {ndim}-d data (NumPy raises AxisError)"
    return None


def normalize(
    S: torch.Tensor,
    *,
    norm: float | None = np.inf,
    axis: int | None = 0,
    threshold: float | None = None,
    fill: bool | None = None,
) -> torch.Tensor:
    """``librosa.util.normalize`` per sample: ``axis`` counts the axes of one call (batch excluded).

    Norms inf, -inf, 0 and p > 0, every ``fill``; lengths in float64 as librosa does, the result in
    the input's dtype (integers truncated, as NumPy's assignment into ``empty_like(S)``).
    """
    x = _tensor(S)
    if norm is None:
        return x
    if threshold is None:  # librosa's util.tiny: the dtype's, float32's for non-floats
        tiny_dtype = x.dtype if x.is_floating_point() or x.is_complex() else torch.float32
        threshold = float(torch.finfo(tiny_dtype).tiny)
    call_dims = x.dim() - 1
    dims: tuple[int, ...] = (
        tuple(range(1, x.dim())) if axis is None else (int(axis) % call_dims + 1,)
    )
    mag = x.abs().to(torch.float64)
    fill_norm = 1.0
    if norm == np.inf:
        length = mag.amax(dim=dims, keepdim=True)
    elif norm == -np.inf:
        length = mag.amin(dim=dims, keepdim=True)
    elif norm == 0:
        length = (mag > 0).to(torch.float64).sum(dim=dims, keepdim=True)
    else:
        length = (mag**norm).sum(dim=dims, keepdim=True) ** (1.0 / norm)
        size = math.prod(x.shape[d] for d in dims)
        fill_norm = size ** (-1.0 / norm)
    small = length < threshold
    if fill is None:
        length = torch.where(small, torch.ones_like(length), length)
    else:
        length = torch.where(small, torch.full_like(length, math.nan if fill else math.inf), length)
    wide = torch.complex128 if x.is_complex() else torch.float64
    out = x.to(wide) / length
    if fill:
        out = torch.where(torch.isnan(out), torch.full_like(out, fill_norm), out)
    return out.to(x.dtype)


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
    mel_norm: object = "slaney",
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
    n_mfcc = min(n_mfcc, n_mels)  # librosa slices the DCT's n_mels rows
    basis = torch.from_numpy(_dct_matrix(n_mels, n_mfcc, norm)).to(S.device, torch.float64)
    # summed in float64 and rounded once, as scipy's DCT comes within a few ulps of the exact
    # sum: a float32 matmul's rounding grows with n_mels and norm=None's scale (30 ulps seen)
    out = torch.matmul(basis, S.to(torch.float64)).to(S.dtype)
    if lifter > 0:  # NumPy multiplies float32 by its float64 lifter in float64, rounded once
        li = torch.sin(
            math.pi * torch.arange(1, 1 + n_mfcc, dtype=torch.float64, device=S.device) / lifter
        )
        out = (out.to(torch.float64) * (1 + (lifter / 2) * li)[:, None]).to(S.dtype)
    if S.dim() > 3 and n_mfcc < n_mels:
        # librosa returns the first rows of its C-ordered (..., n_mels, frames) DCT: for a
        # multichannel call a strided view, laid out here the same way (the rest is zeros)
        rows = torch.zeros(*S.shape, dtype=out.dtype, device=out.device)
        out = rows[..., :n_mfcc, :].copy_(out)
    return out


def _mfcc_check(
    *,
    y: object = None,
    sr: object = 22050,
    S: object = None,
    n_mfcc: object = 20,
    dct_type: object = 2,
    norm: object = "ortho",
    lifter: object = 0,
    mel_norm: object = "slaney",
    **kwargs: Any,
) -> str | None:
    if dct_type != 2 or norm not in ("ortho", None):
        return f"dct_type={dct_type!r}, norm={norm!r}; computed: DCT-II, 'ortho' or None"
    if not isinstance(n_mfcc, int) or n_mfcc <= 0:
        return f"n_mfcc={n_mfcc!r}: expected a positive int"
    if not isinstance(lifter, numbers.Real) or lifter < 0:
        return f"lifter={lifter!r} must be non-negative (librosa raises ParameterError)"
    if S is None:
        n_mels = kwargs.get("n_mels", 128)
        reason = _melspectrogram_check(y=y, sr=sr, norm=mel_norm, **kwargs)
    elif not isinstance(S, np.ndarray) or S.ndim < 2:
        return "S: expected a (..., n_mels, frames) array"
    else:
        n_mels, reason = S.shape[-2], None
    if reason is None and float(lifter) > 0 and n_mfcc > n_mels:
        reason = f"n_mfcc={n_mfcc} > n_mels={n_mels} with a lifter (librosa raises ValueError)"
    return reason


_FLOAT = frozenset({"float32", "float64"})
# signals of amplitude <= 1
FFT32 = "float32 FFT rounding: librosa multiplies frames by a float64 window before its FFT"
_INTS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})
_FLOATS = frozenset({"float16", "float32", "float64"})
_COMPLEX = frozenset({"complex64", "complex128"})
_DB = Tolerance(atol=1e-4, note="float32 log10 ulps, in dB")
_POW = Tolerance(rtol=1e-5, note="float32 pow ulps")
OPS = [
    # Public paths; the registry resolves them to the canonical names of the function objects
    # (``librosa.core.spectrum.stft``), which the tracer reports.
    op(
        "librosa.stft",
        stft,
        dtypes=_FLOAT,
        check=_stft_check,
        order="F",
        tolerance=Tolerance(atol=2e-5, rtol=1e-5, note=FFT32),
    ),
    op(
        "librosa.feature.melspectrogram",
        melspectrogram,
        dtypes=_FLOAT,
        check=_melspectrogram_check,
        tolerance=Tolerance(atol=1e-5, rtol=1e-5, note=FFT32),
    ),
    op(
        "librosa.power_to_db",
        power_to_db,
        dtypes=_FLOATS | _COMPLEX | _INTS,
        check=_power_to_db_check,
        tolerance=_DB,
        notes="integer spectrograms in float64 as NumPy promotes them",
    ),
    op(
        "librosa.amplitude_to_db",
        amplitude_to_db,
        dtypes=_FLOATS | _COMPLEX,
        check=_amplitude_to_db_check,
        tolerance=_DB,
        notes="integer input is left to librosa (NumPy squares it with wraparound)",
    ),
    op(
        "librosa.db_to_amplitude",
        db_to_amplitude,
        dtypes=_FLOATS | _INTS,
        tolerance=_POW,
    ),
    op(
        "librosa.db_to_power",
        db_to_power,
        dtypes=_FLOATS | _INTS,
        tolerance=_POW,
    ),
    op(
        "librosa.util.normalize",
        normalize,
        dtypes=_FLOATS | _COMPLEX | _INTS | frozenset({"bool"}),
        check=_normalize_check,
        tolerance=Tolerance(rtol=1e-6, note="float64 norms summed in another order"),
    ),
    op(
        "librosa.feature.mfcc",
        mfcc,
        dtypes=_FLOAT,
        check=_mfcc_check,
        tolerance=Tolerance(
            atol=5e-2,
            rtol=1e-5,
            scale_rtol=1e-5,
            note=FFT32
            + "; dB errors of quiet mel bands summed by the DCT: ~1e-4 with norm='ortho', "
            "scaled by 2*sqrt(n_mels/2) with norm=None and by up to 1+lifter/2 with a lifter, "
            "so they follow the output's scale (up to 3.7e-6 of its largest magnitude seen)",
        ),
    ),
]
