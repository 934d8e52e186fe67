"""numpy.fft backends against NumPy: 1-d and n-d transforms, norms, sizes, shifts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import PROPS, assert_matches, device_fixture, random_array, to_dev  # noqa: F401

from codedag.backends.ops.numpy import BACKENDS
from codedag.errors import UnsupportedOperation


@PROPS
@given(
    name=st.sampled_from(["fft", "ifft", "rfft", "irfft"]),
    dt=st.sampled_from([np.float32, np.float64, np.int16, np.complex64, np.complex128]),
    length=st.integers(1, 40),
    n=st.one_of(st.none(), st.integers(2, 48)),
    norm=st.sampled_from([None, "backward", "ortho", "forward"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_fft_1d(device, name, dt, length, n, norm, seed):
    a = random_array(seed, (3, length), np.float64).astype(dt)
    if np.dtype(dt).kind == "c":
        a = a + 1j * random_array(seed + 1, (3, length), np.float64).astype(dt)
    fn = BACKENDS[f"numpy.fft.{name}"]
    try:
        expected = getattr(np.fft, name)(a, n=n, norm=norm)
    except Exception:
        with pytest.raises(Exception):  # noqa: B017
            fn(to_dev(a, device), n=n, norm=norm)
        return
    if name == "rfft" and a.dtype.kind == "c":
        with pytest.raises(UnsupportedOperation):
            fn(to_dev(a, device), n=n, norm=norm)
        return
    assert_matches(fn(to_dev(a, device), n=n, norm=norm), expected, f"numpy.fft.{name}")


@PROPS
@given(
    name=st.sampled_from(["fft2", "ifft2", "rfft2", "fftn", "ifftn"]),
    dt=st.sampled_from([np.float32, np.float64]),
    shape=st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 4)),
    seed=st.integers(0, 2**32 - 1),
)
def test_fft_nd_and_shift(device, name, dt, shape, seed):
    a = random_array(seed, shape, dt)
    got = BACKENDS[f"numpy.fft.{name}"](to_dev(a, device))
    assert_matches(got, getattr(np.fft, name)(a), f"numpy.fft.{name}")
    for shift in ("fftshift", "ifftshift"):
        for axes in (None, 0, (0, 2)):
            got = BACKENDS[f"numpy.fft.{shift}"](to_dev(a, device), axes)
            assert_matches(got, getattr(np.fft, shift)(a, axes), f"numpy.fft.{shift}")
