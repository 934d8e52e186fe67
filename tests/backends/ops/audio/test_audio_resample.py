"""librosa.resample against librosa: polyphase and FFT resampling (soxr left to librosa)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import PROPS, assert_matches, audio_signal, device_fixture, to_dev  # noqa: F401

from codedag.backends.ops.audio import BACKENDS

librosa = pytest.importorskip("librosa")


@PROPS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 2),
    length=st.integers(100, 3000),
    rates=st.sampled_from([(22050, 16000), (16000, 22050), (32000, 22050), (44100, 8000), (3, 4)]),
    res_type=st.sampled_from(["polyphase", "fft", "scipy"]),
    scale=st.booleans(),
)
def test_resample(device, seed, n, length, rates, res_type, scale):
    y = audio_signal(seed, n, length)
    orig, target = rates
    kw = dict(orig_sr=orig, target_sr=target, res_type=res_type, scale=scale)
    got = BACKENDS["librosa.resample"](to_dev(y, device), **kw)
    assert_matches(got, librosa.resample(y, **kw), "librosa.resample")
