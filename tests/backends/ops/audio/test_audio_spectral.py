"""librosa spectral backends against librosa: stft, melspectrogram, power/amplitude_to_db, mfcc,
normalize."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import (  # noqa: F401
    FEW,
    PROPS,
    assert_matches,
    audio_signal,
    device_fixture,
    refusal,
    to_dev,
)

from codedag.backends.ops.audio import BACKENDS, mel_filterbank
from codedag.backends.probe import migrated_call
from codedag.errors import UnsupportedOperation

librosa = pytest.importorskip("librosa")


@PROPS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3),
    length=st.integers(600, 4000),
    n_fft=st.sampled_from([256, 512, 1024]),
    hop=st.one_of(st.none(), st.integers(64, 400)),
    win_frac=st.sampled_from([None, 0.5, 0.75]),
    center=st.booleans(),
    pad_mode=st.sampled_from(["constant", "reflect", "edge"]),
    window=st.sampled_from(["hann", "hamming"]),
)
def test_stft(device, seed, n, length, n_fft, hop, win_frac, center, pad_mode, window):
    y = audio_signal(seed, n, length)
    kw = dict(n_fft=n_fft, hop_length=hop, center=center, pad_mode=pad_mode, window=window)
    kw["win_length"] = None if win_frac is None else int(n_fft * win_frac)
    if not center and n_fft > length:
        with pytest.raises(UnsupportedOperation):  # librosa raises ParameterError here
            BACKENDS["librosa.stft"](to_dev(y, device), **kw)
        return
    got = BACKENDS["librosa.stft"](to_dev(y, device), **kw)
    assert_matches(got, librosa.stft(y, **kw), "librosa.stft")


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3),
    length=st.integers(2000, 6000),
    sr=st.sampled_from([8000, 16000, 22050, 32000]),
    n_fft=st.sampled_from([512, 1024, 2048]),
    hop=st.sampled_from([128, 256, 512]),
    n_mels=st.sampled_from([32, 64, 128]),
    power=st.sampled_from([1.0, 2.0]),
    htk=st.booleans(),
    fmax_frac=st.sampled_from([None, 0.8]),
)
def test_melspectrogram(device, seed, n, length, sr, n_fft, hop, n_mels, power, htk, fmax_frac):
    y = audio_signal(seed, n, length)
    kw = dict(sr=sr, n_fft=n_fft, hop_length=hop, n_mels=n_mels, power=power, htk=htk)
    kw["fmax"] = None if fmax_frac is None else sr / 2 * fmax_frac
    got = BACKENDS["librosa.feature.melspectrogram"](y=to_dev(y, device), **kw)
    name = "librosa.feature.melspectrogram"
    assert_matches(got, librosa.feature.melspectrogram(y=y, **kw), name)
    spec = np.abs(librosa.stft(y, n_fft=n_fft, hop_length=hop)) ** power
    kw.pop("power")
    from_s = BACKENDS[name](S=to_dev(spec, device), **{k: v for k, v in kw.items() if k != "n_fft"})
    assert_matches(from_s, librosa.feature.melspectrogram(S=spec, **kw), name)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"htk": True},
        {"norm": None},
        {"norm": 1.0},
        {"fmin": 300.0, "fmax": 5000.0, "n_mels": 40},
    ],
)
def test_mel_filterbank_is_librosas(kw):
    ours = mel_filterbank(16000.0, 1024, **kw)
    ref = librosa.filters.mel(sr=16000, n_fft=1024, **kw)
    assert ours.dtype == ref.dtype == np.float32
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-9)


@PROPS
@given(
    seed=st.integers(0, 2**32 - 1),
    ref=st.sampled_from([1.0, 0.5, "max", "mean", "tensor"]),
    amin=st.sampled_from([1e-10, 1e-5]),
    top_db=st.sampled_from([None, 80.0, 40.0, 0.0]),
    amplitude=st.booleans(),
)
def test_db_conversions_are_per_sample(device, seed, ref, amin, top_db, amplitude):
    rng = np.random.default_rng(seed)
    spec = (rng.exponential(1.0, (3, 16, 20)) ** 4).astype(np.float32)
    spec[1] *= 1e-6  # samples of very different levels: top_db must be per sample
    spec[2, :, :5] = 0.0
    name = "librosa.amplitude_to_db" if amplitude else "librosa.power_to_db"
    lib = librosa.amplitude_to_db if amplitude else librosa.power_to_db
    refs = {"max": np.max, "mean": np.mean}
    lib_ref = refs.get(ref, 2.0 if ref == "tensor" else ref)
    got = BACKENDS[name](
        to_dev(spec, device),
        ref=torch.tensor(2.0) if ref == "tensor" else refs.get(ref, ref),
        amin=amin,
        top_db=top_db,
    )
    expected = np.stack([lib(s, ref=lib_ref, amin=amin, top_db=top_db) for s in spec])
    assert_matches(got, expected, name)


@FEW
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 2),
    sr=st.sampled_from([16000, 22050]),
    n_mfcc=st.sampled_from([13, 20, 40]),
    n_mels=st.sampled_from([40, 64, 128]),
    lifter=st.sampled_from([0, 22]),
    norm=st.sampled_from(["ortho", None]),
)
def test_mfcc(device, seed, n, sr, n_mfcc, n_mels, lifter, norm):
    y = audio_signal(seed, n, 4000)
    kw = dict(sr=sr, n_mfcc=n_mfcc, n_mels=n_mels, lifter=lifter, norm=norm, n_fft=1024)
    got = BACKENDS["librosa.feature.mfcc"](y=to_dev(y, device), **kw)
    expected = np.stack([librosa.feature.mfcc(y=s, **kw) for s in y])  # top_db per call
    assert_matches(got, expected, "librosa.feature.mfcc")


def test_unsupported_parameters_fall_back(device):
    y = to_dev(audio_signal(0, 1, 2000), device)
    with pytest.raises(UnsupportedOperation, match="soxr_hq"):
        BACKENDS["librosa.resample"](y, orig_sr=22050, target_sr=16000)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["librosa.stft"](y, window="kaiser")
    with pytest.raises(UnsupportedOperation):
        BACKENDS["librosa.stft"](y[0])  # not batch-first
    with pytest.raises(UnsupportedOperation):
        BACKENDS["librosa.feature.mfcc"](y=y, dct_type=3)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["librosa.power_to_db"](y, ref=np.median)


@PROPS
@given(
    seed=st.integers(0, 2**32 - 1),
    ref=st.sampled_from([1.0, 0.5, 3.0]),
    norm=st.sampled_from([np.inf, -np.inf, 0, 1, 2, 3.5, None]),
    axis=st.sampled_from([0, 1, -1, None]),
    fill=st.sampled_from([None, False]),
)
def test_db_inverse_and_normalize(device, seed, ref, norm, axis, fill):
    rng = np.random.default_rng(seed)
    s_db = rng.uniform(-80, 20, (2, 12, 9)).astype(np.float32)
    t = to_dev(s_db, device)
    got = BACKENDS["librosa.db_to_power"](t, ref=ref)
    assert_matches(got, librosa.db_to_power(s_db, ref=ref), "librosa.db_to_power")
    got = BACKENDS["librosa.db_to_amplitude"](t, ref=ref)
    assert_matches(got, librosa.db_to_amplitude(s_db, ref=ref), "librosa.db_to_amplitude")
    spec = librosa.db_to_power(s_db) - 1.0  # signed values
    spec[1, :3] = 0.0  # all-zero frames: below the threshold
    got = BACKENDS["librosa.util.normalize"](to_dev(spec, device), norm=norm, axis=axis, fill=fill)
    expected = np.stack([librosa.util.normalize(s, norm=norm, axis=axis, fill=fill) for s in spec])
    assert_matches(got, expected, "librosa.util.normalize")


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"pad_mode": "wrap"}, "pad_mode='wrap'"),  # librosa raises; the backend padded
        ({"hop_length": 0}, "hop_length=0"),  # librosa raises; the backend used win // 4
        ({"n_fft": 64, "win_length": 128}, "win_length=128"),
    ],
)
def test_stft_refuses_what_librosa_rejects(kwargs, why):
    y = audio_signal(0, 1, 2000)[0]
    with pytest.raises(librosa.util.exceptions.ParameterError):
        librosa.stft(y, **kwargs)
    reason = refusal("librosa.core.spectrum.stft", y, **kwargs)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "name",
    ["librosa.core.spectrum.stft", "librosa.feature.spectral.mfcc", "librosa.core.audio.resample"],
)
def test_non_finite_signals_are_librosas(name):
    y = audio_signal(0, 1, 2000)[0]
    y[5] = np.nan
    kwargs = {"orig_sr": 8000, "target_sr": 4000, "res_type": "fft"} if "resample" in name else {}
    args = (y,) if "mfcc" not in name else ()
    if "mfcc" in name:
        kwargs["y"] = y
    reason = refusal(name, *args, **kwargs)
    assert reason is not None and "non-finite" in reason


def test_db_to_power_float16_rounds_the_factors_as_numpy():
    s_db = np.random.default_rng(0).uniform(-80, 0, (33, 12)).astype(np.float16)
    for name in ("librosa.core.spectrum.db_to_power", "librosa.core.spectrum.db_to_amplitude"):
        got = migrated_call(name)(s_db)
        want = getattr(librosa, name.rsplit(".", 1)[-1])(s_db)
        assert got.dtype == want.dtype == np.float16
        np.testing.assert_array_equal(got, want)  # 0.1 * S_db was 1 half-ulp off on 19%


def test_melspectrogram_of_s_keeps_an_odd_n_fft():
    s = np.abs(librosa.stft(audio_signal(1, 1, 2000)[0], n_fft=101)) ** 2
    got = migrated_call("librosa.feature.spectral.melspectrogram")(S=s, sr=8000, n_fft=101)
    want = librosa.feature.melspectrogram(S=s, sr=8000, n_fft=101)
    assert_matches(got, want, "librosa.feature.melspectrogram")  # was the n_fft=100 filterbank


@pytest.mark.parametrize("dtype", [np.int16, np.complex64, np.float32])
@pytest.mark.parametrize("fill", [None, True])
def test_normalize_keeps_librosas_dtype_and_fill(dtype, fill):
    s = np.random.default_rng(2).uniform(-3, 3, (12, 9))
    s[:, 2] = 0  # a column below the threshold: filled
    s = (s * 100).astype(dtype) if dtype == np.int16 else s.astype(dtype)
    got = migrated_call("librosa.util.utils.normalize")(s, norm=2, fill=fill)
    want = librosa.util.normalize(s, norm=2, fill=fill)
    assert_matches(got, want, "librosa.util.normalize")


def test_mfcc_with_more_coefficients_than_mel_bands():
    y = audio_signal(3, 1, 2000)[0]
    kw = {"y": y, "sr": 8000, "n_fft": 256, "n_mels": 10, "n_mfcc": 20}
    got = migrated_call("librosa.feature.spectral.mfcc")(**kw)
    assert_matches(got, librosa.feature.mfcc(**kw), "librosa.feature.mfcc")
