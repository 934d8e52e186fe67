"""Torch backend of ``librosa.resample`` for ``res_type`` 'polyphase', 'fft' and 'scipy'.

librosa's default ``res_type='soxr_hq'`` (and the soxr, resampy and samplerate types) use filters
this module does not reproduce: they raise UnsupportedOperation, and the original runs. Pass
``res_type='polyphase'`` (``scipy.signal.resample_poly``: Kaiser(5.0) windowed-sinc FIR designed
with ``scipy.signal.firwin`` exactly as SciPy does, applied as a polyphase filter) or
``res_type='fft'``/``'scipy'`` (``scipy.signal.resample``: rfft, truncate or zero-pad the spectrum
with SciPy's Nyquist-bin rule, irfft) to run on the device. Both compute in the signal's dtype as
SciPy does; results differ by float rounding in another summation order (see TOLERANCES).
Signals are batch-first, (N, T) or (N, C, T); resampling runs along the last axis.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.audio._adapter import op
from codedag.errors import UnsupportedOperation

_CHUNK_ELEMENTS = (
    1 << 25
)  # bound on the gathered (batch, outputs, taps) block of the polyphase path


@functools.lru_cache(maxsize=32)
def _polyphase_filter(up: int, down: int) -> tuple[np.ndarray, int]:
    """SciPy's resample_poly filter, zero-padded as SciPy pads it, and its leading removal."""
    from scipy.signal import firwin  # scipy comes with librosa, whose calls this backend replaces

    max_rate = max(up, down)
    half_len = 10 * max_rate
    h = firwin(2 * half_len + 1, 1.0 / max_rate, window=("kaiser", 5.0))
    n_pre_pad = down - half_len % down
    n_pre_remove = (half_len + n_pre_pad) // down
    return np.concatenate([np.zeros(n_pre_pad), h]), n_pre_remove


def _resample_poly(x: torch.Tensor, up: int, down: int) -> torch.Tensor:
    """``scipy.signal.resample_poly`` along the last axis, in its layout: the outputs kept of
    the whole filtered signal, a view of each row of a C-ordered (..., filtered) array (the rest
    is zeros here)."""
    g = math.gcd(up, down)
    up, down = up // g, down // g
    if up == down == 1:
        return x.clone()
    h64, n_pre_remove = _polyphase_filter(up, down)
    n_in = x.shape[-1]
    n_out = -(-n_in * up // down)
    # upfirdn's output length (SciPy pads the filter's end until it holds the outputs kept)
    n_full = max(((n_in - 1) * up + len(h64) - 1) // down + 1, n_pre_remove + n_out)
    # Polyphase form of upfirdn: y[m] = sum_j h[p + j*up] * x[b - j], t = m*down = b*up + p.
    taps = -(-len(h64) // up)
    hp = np.zeros(taps * up)
    hp[: len(h64)] = h64
    h = torch.from_numpy(hp.reshape(taps, up).T.copy()).to(x.device, x.dtype) * up
    batch = x.reshape(-1, n_in)
    full = torch.zeros(batch.shape[0], n_full, dtype=x.dtype, device=x.device)
    out = full[:, n_pre_remove : n_pre_remove + n_out]
    j = torch.arange(taps, device=x.device)
    step = max(1, _CHUNK_ELEMENTS // max(1, batch.shape[0] * taps))
    for start in range(0, n_out, step):
        m = torch.arange(start, min(n_out, start + step), device=x.device) + n_pre_remove
        t = m * down
        idx = (t // up)[:, None] - j[None, :]
        valid = (idx >= 0) & (idx < n_in)
        gathered = batch[:, idx.clamp(0, n_in - 1)] * valid
        out[:, start : start + len(m)] = (gathered * h[t % up]).sum(-1)
    return full.reshape(*x.shape[:-1], n_full)[..., n_pre_remove : n_pre_remove + n_out]


def _resample_fft(x: torch.Tensor, num: int) -> torch.Tensor:
    n_x = x.shape[-1]
    m = min(num, n_x)
    spec = torch.fft.rfft(x)[..., : m // 2 + 1]
    if m % 2 == 0 and num != n_x:
        factor = torch.ones(spec.shape[-1], dtype=x.dtype, device=x.device)
        factor[m // 2] = 2.0 if num < n_x else 0.5
        spec = spec * factor
    # scipy.signal.resample returns C order, whatever the signal's
    return torch.fft.irfft(spec / (n_x / num), n=num).contiguous()


def resample(
    y: torch.Tensor,
    *,
    orig_sr: float,
    target_sr: float,
    res_type: str = "soxr_hq",
    fix: bool = True,
    scale: bool = False,
    axis: int = -1,
    **kwargs: Any,
) -> torch.Tensor:
    """``librosa.resample`` with ``res_type`` 'polyphase', 'fft' or 'scipy' on (N, ..., T)."""
    if not isinstance(y, torch.Tensor) or y.dim() < 2:
        raise UnsupportedOperation("expected a batch-first (N, T) or (N, C, T) tensor")
    reason = _resample_refusal(y.dim() - 1, orig_sr, target_sr, res_type, axis, kwargs)
    if reason is not None:
        raise UnsupportedOperation(reason)
    if orig_sr == target_sr:  # librosa returns the signal itself: a copy in its memory order
        return y.clone(memory_format=torch.preserve_format)
    ratio = float(target_sr) / orig_sr
    n_samples = math.ceil(y.shape[-1] * ratio)
    if res_type in ("fft", "scipy"):
        y_hat = _resample_fft(y, n_samples)
    else:
        y_hat = _resample_poly(y, int(target_sr), int(orig_sr))
    if fix and y_hat.shape[-1] != n_samples:
        if y_hat.shape[-1] > n_samples:
            y_hat = y_hat[..., :n_samples]
        else:
            y_hat = torch.nn.functional.pad(y_hat, (0, n_samples - y_hat.shape[-1]))
    if scale:  # in place, as librosa divides: a strided result stays the same view
        y_hat = y_hat.div_(math.sqrt(ratio))
    return y_hat.to(y.dtype)


def _resample_refusal(
    ndim: int, orig_sr: Any, target_sr: Any, res_type: Any, axis: Any, kwargs: Any
) -> str | None:
    """Why ``librosa.resample`` with these parameters on ``ndim``-d signals is left to librosa."""
    if res_type not in ("fft", "scipy", "polyphase"):
        return f"res_type={res_type!r} is not reproduced on torch; use 'polyphase' or 'fft'"
    if not isinstance(axis, int) or axis not in (-1, ndim - 1):
        return f"axis={axis!r}; computed: the last axis"
    if kwargs:
        return f"fix_length arguments {sorted(kwargs)} are left to librosa"
    rates = (orig_sr, target_sr)
    if not all(isinstance(r, numbers.Real) and float(r) > 0 for r in rates):
        return f"sample rates {orig_sr!r} -> {target_sr!r} must be positive"
    if res_type == "polyphase" and any(int(r) != r for r in rates):
        return "polyphase needs integer sample rates (librosa raises ParameterError)"
    return None


def _resample_check(
    y: object,
    *,
    orig_sr: object,
    target_sr: object,
    res_type: object = "soxr_hq",
    fix: object = True,
    scale: object = False,
    axis: object = -1,
    **kwargs: Any,
) -> str | None:
    if isinstance(y, np.ndarray) and y.dtype.kind == "f" and not np.isfinite(y).all():
        return "y: non-finite samples (librosa raises ParameterError)"
    ndim = y.ndim if isinstance(y, np.ndarray) else 0
    return _resample_refusal(ndim, orig_sr, target_sr, res_type, axis, kwargs)


OPS = [
    op(
        "librosa.resample",
        resample,
        dtypes=frozenset({"float32", "float64"}),
        check=_resample_check,
        tolerance=Tolerance(
            atol=2e-6, note="float32 filter sums (polyphase) or FFTs in another order than SciPy's"
        ),
    )
]
