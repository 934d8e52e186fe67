"""Multichannel librosa calls ((2, T), (2, 3, T) signals; (2, F, t), (2, 3, F, t) spectrograms)
run on torch and come back as librosa returns them: shape, dtype, values and the very strides
(C or Fortran order, or the strided views librosa's einsum, DCT and polyphase filter return)."""

from __future__ import annotations

import numpy as np
import pytest

from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.backends.probe import original_function
from codedag.backends.registry import default_registry

librosa = pytest.importorskip("librosa")

SR = 8000
LEADS = [(), (2,), (2, 3)]


def _signal(lead: tuple[int, ...], order: str, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(len(lead))
    y = (0.5 * rng.uniform(-1, 1, (*lead, 1500))).astype(dtype)
    return np.asfortranarray(y) if order == "F" else y


def _spectrogram(lead: tuple[int, ...], order: str, bins: int = 129) -> np.ndarray:
    s = np.random.default_rng(len(lead)).uniform(0, 1, (*lead, bins, 9)).astype(np.float32)
    return np.asfortranarray(s) if order == "F" else s


SIGNAL_CALLS = {
    "stft": ("librosa.core.spectrum.stft", {"n_fft": 256}),
    "melspectrogram": ("librosa.feature.spectral.melspectrogram", {"sr": SR, "n_fft": 256}),
    "mfcc": ("librosa.feature.spectral.mfcc", {"sr": SR, "n_fft": 256, "n_mfcc": 13}),
    "mfcc lifter": ("librosa.feature.spectral.mfcc", {"sr": SR, "n_fft": 256, "lifter": 22}),
    "resample polyphase": (
        "librosa.core.audio.resample",
        {"orig_sr": SR, "target_sr": 6000, "res_type": "polyphase"},
    ),
    "resample polyphase unfixed scaled": (
        "librosa.core.audio.resample",
        {"orig_sr": SR, "target_sr": 11025, "res_type": "polyphase", "fix": False, "scale": True},
    ),
    "resample same rate": (  # librosa returns the signal itself; a copy in its order here
        "librosa.core.audio.resample",
        {"orig_sr": SR, "target_sr": SR, "res_type": "fft"},
    ),
    "resample fft": (
        "librosa.core.audio.resample",
        {"orig_sr": SR, "target_sr": 4000, "res_type": "fft"},
    ),
}
SPECTROGRAM_CALLS = {
    "melspectrogram S": ("librosa.feature.spectral.melspectrogram", {"sr": SR}),
    "mfcc S": ("librosa.feature.spectral.mfcc", {"sr": SR, "n_mfcc": 13}),
    "power_to_db": ("librosa.core.spectrum.power_to_db", {"ref": np.max}),
    "amplitude_to_db": ("librosa.core.spectrum.amplitude_to_db", {}),
    "db_to_power": ("librosa.core.spectrum.db_to_power", {}),
    "db_to_amplitude": ("librosa.core.spectrum.db_to_amplitude", {"ref": 0.5}),
    "normalize": ("librosa.util.utils.normalize", {"axis": -1}),
}
KEYWORD_DATA = {"librosa.feature.spectral.melspectrogram", "librosa.feature.spectral.mfcc"}


def _same_as_librosa(name: str, data: np.ndarray, kwargs: dict, staged: bool) -> None:
    keyword = "y" if "n_fft" in kwargs or name.endswith("stft") else "S"
    if name in KEYWORD_DATA:
        args, call_kwargs = (), {keyword: data, **kwargs}
    else:
        args, call_kwargs = (data,), dict(kwargs)
    spec = default_registry().get(name)
    converter = ValueConverter("cpu", zero_copy=False) if staged else ValueConverter("cpu")
    executor = Executor(spec, original_function(name), {"cpu": converter})
    assert executor.refusal(args, dict(call_kwargs)) is None  # the call runs on torch
    want = original_function(name)(*args, **call_kwargs)
    got = executor.run(args, dict(call_kwargs), "cpu")
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    assert got.strides == want.strides, f"strides {got.strides}, librosa's {want.strides}"
    scale = float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("staged", [False, True], ids=["cpu", "cpu-staged"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("lead", LEADS, ids=str)
@pytest.mark.parametrize("call", sorted(SIGNAL_CALLS))
def test_signal_ops_keep_librosas_layout(
    call: str, lead: tuple[int, ...], order: str, staged: bool
) -> None:
    name, kwargs = SIGNAL_CALLS[call]
    _same_as_librosa(name, _signal(lead, order), kwargs, staged)


@pytest.mark.parametrize("staged", [False, True], ids=["cpu", "cpu-staged"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("lead", LEADS, ids=str)
@pytest.mark.parametrize("call", sorted(SPECTROGRAM_CALLS))
def test_spectrogram_ops_keep_librosas_layout(
    call: str, lead: tuple[int, ...], order: str, staged: bool
) -> None:
    name, kwargs = SPECTROGRAM_CALLS[call]
    data = _spectrogram(lead, order, bins=40 if call == "mfcc S" else 129)
    if call.startswith("db_to"):
        data = data * -80.0
    _same_as_librosa(name, data, kwargs, staged)
