"""cv2.warpAffine and cv2.warpPerspective against cv2: matrices, interpolations, borders, channels."""

from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import CV2_BORDERS, DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.backends.ops import cv2 as ops
from codedag.backends.ops.cv2 import _warp_coords as warp_coords
from codedag.backends.ops.cv2 import warp as warp_module
from codedag.backends.probe import migrated_call


def _random_affine(seed: int, w: int, h: int) -> np.ndarray:
    """A generic rotation/scale/shift (drawn from an RNG: exact .5 ties of nearest-neighbour
    sampling, where cv2's and our float rounding may pick different pixels, have measure zero)."""
    rng = np.random.default_rng(seed)
    m = cv2.getRotationMatrix2D(
        (w / 2, h / 2), float(rng.uniform(-45, 45)), float(rng.uniform(0.6, 1.5))
    )
    m[:, 2] += rng.uniform(-4, 4, 2)
    return m


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=(np.uint8, np.float32, np.float64), min_side=8, max_side=20),
    seed=st.integers(0, 2**32 - 1),
    interpolation=st.sampled_from([0, 1, 2, 3, 4]),
    inverse=st.booleans(),
    border=st.sampled_from(CV2_BORDERS),
    dsize=st.tuples(st.integers(8, 24), st.integers(8, 24)),
)
def test_warp_affine(
    device: str,
    batch: np.ndarray,
    seed: int,
    interpolation: int,
    inverse: bool,
    border: int,
    dsize: tuple[int, int],
) -> None:
    m = _random_affine(seed, batch.shape[2], batch.shape[1])
    flags = interpolation | (cv2.WARP_INVERSE_MAP if inverse else 0)
    if batch.dtype == np.float64 and interpolation == cv2.INTER_CUBIC:
        assert refusal("cv2.warpAffine", batch[0], m, dsize, flags=flags)
        return
    value = (10, 200, 30, 40)
    check_batch(
        "cv2.warpAffine",
        batch,
        lambda im: cv2.warpAffine(im, m, dsize, flags=flags, borderMode=border, borderValue=value),
        lambda t: ops.warpAffine(
            t, torch.from_numpy(m), dsize, flags=flags, borderMode=border, borderValue=value
        ),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(min_side=8, max_side=20),
    seed=st.integers(0, 2**32 - 1),
    interpolation=st.sampled_from([0, 1, 2, 4]),
    inverse=st.booleans(),
    border=st.sampled_from(CV2_BORDERS),
)
def test_warp_perspective(
    device: str, batch: np.ndarray, seed: int, interpolation: int, inverse: bool, border: int
) -> None:
    h, w = batch.shape[1:3]
    persp = np.random.default_rng(seed + 1).uniform(-2e-3, 2e-3, 2)
    m = np.vstack([_random_affine(seed, w, h), [persp[0], persp[1], 1.0]])
    flags = interpolation | (cv2.WARP_INVERSE_MAP if inverse else 0)
    check_batch(
        "cv2.warpPerspective",
        batch,
        lambda im: cv2.warpPerspective(im, m, (w, h), flags=flags, borderMode=border),
        lambda t: ops.warpPerspective(t, m, (w, h), flags=flags, borderMode=border),
        device,
    )


@pytest.mark.parametrize("center", [(50.0, 50.0), (49.5, 49.5), (0.0, 0.0), (31.3, 77.1)])
def test_warp_affine_nearest_rotation_is_exact(center: tuple[float, float]) -> None:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (100, 100), dtype=np.uint8)
    m = cv2.getRotationMatrix2D(center, 45, 1.0)
    want = cv2.warpAffine(img, m, (100, 100), flags=cv2.INTER_NEAREST, borderMode=0)
    got = migrated_call("cv2.warpAffine")(img, m, (100, 100), flags=cv2.INTER_NEAREST, borderMode=0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("channels", [2, 5])
@pytest.mark.parametrize("flags", [cv2.INTER_NEAREST, cv2.INTER_LINEAR])
def test_warp_affine_on_2_and_5_channels_is_exact(channels: int, flags: int) -> None:
    """cv2 warps these through its fixed-point remap (1/32 pixel, 15-bit weights)."""
    rng = np.random.default_rng(channels)
    img = rng.integers(0, 256, (40, 50, channels), dtype=np.uint8)
    for angle in (17.0, 45.0, 71.0):
        m = cv2.getRotationMatrix2D((20.0, 20.0), angle, 1.1)
        want = cv2.warpAffine(img, m, (50, 40), flags=flags)
        np.testing.assert_array_equal(
            migrated_call("cv2.warpAffine")(img, m, (50, 40), flags=flags), want
        )


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
def test_warps_of_inf_give_nan_where_cv2_does(name: str) -> None:
    """cv2 interpolates ``p00 + a * (p01 - p00)``: an inf next to a weight of 0 gives NaN."""
    img = np.random.default_rng(2).random((12, 16)).astype(np.float32)
    img[5, 7] = np.inf
    img[2, 3] = -np.inf
    m = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]])
    if name == "cv2.warpPerspective":
        m = np.vstack([m, [0.0, 0.0, 1.0]])
    want = getattr(cv2, name[4:])(img, m, (16, 12))
    got = migrated_call(name)(img, m, (16, 12))
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_warp_perspective_with_a_zero_divisor_writes_the_border_value() -> None:
    rng = np.random.default_rng(3)
    m = np.array([[0.533, 0, 0], [0, 1.133, 0], [-0.0467, 0.0133, 1]])
    img = rng.integers(0, 256, (30, 30, 3), dtype=np.uint8)
    want = cv2.warpPerspective(img, m, (30, 30))
    np.testing.assert_array_equal(migrated_call("cv2.warpPerspective")(img, m, (30, 30)), want)
    imgf = rng.random((30, 30)).astype(np.float32)
    wantf = cv2.warpPerspective(imgf, m, (30, 30))
    gotf = migrated_call("cv2.warpPerspective")(imgf, m, (30, 30))
    np.testing.assert_array_equal(np.isnan(gotf), np.isnan(wantf))
    np.testing.assert_allclose(gotf[~np.isnan(wantf)], wantf[~np.isnan(wantf)], atol=1e-5)


@pytest.mark.parametrize(
    "m", [np.zeros((3, 3)), np.array([[1.0, 2, 0], [2, 4, 0], [0, 0, 1]])], ids=["zero", "rank2"]
)
def test_warp_perspective_with_a_singular_matrix_warps_like_cv2(m: np.ndarray) -> None:
    """cv2 inverts a singular matrix to zeros and warps with them; no LinAlgError."""
    img = np.random.default_rng(4).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    for flags in (cv2.INTER_NEAREST, cv2.INTER_LINEAR):
        want = cv2.warpPerspective(img, m, (12, 10), flags=flags)
        got = migrated_call("cv2.warpPerspective")(img, m, (12, 10), flags=flags)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
@pytest.mark.parametrize("flags", [cv2.INTER_CUBIC, cv2.INTER_LANCZOS4])
def test_cubic_and_lanczos_warps_of_more_than_4_channels_are_left_to_cv2(
    name: str, flags: int
) -> None:
    """cv2's remap refuses them (an error the backend would hide by returning an image)."""
    img = np.zeros((12, 16, 5), dtype=np.uint8)
    m = np.eye(2, 3) if name == "cv2.warpAffine" else np.eye(3)
    with pytest.raises(cv2.error):
        getattr(cv2, name[4:])(img, m, (16, 12), flags=flags)
    assert "more than 4 channels" in (refusal(name, img, m, (16, 12), flags=flags) or "")
    assert refusal(name, img[..., :4], m, (16, 12), flags=flags) is None
    assert refusal(name, img, m, (16, 12), flags=cv2.INTER_LINEAR) is None


@pytest.mark.parametrize("name", ["cv2.warpAffine", "cv2.warpPerspective"])
@pytest.mark.parametrize("value", [(10, 20, 30, 40), (10, 20, 30), 7])
def test_border_values_of_more_than_4_channels_repeat_every_4_channels(
    name: str, value: object
) -> None:
    """cv2's Scalar has 4 values: channel c of a wider image takes value c % 4."""
    img = np.full((12, 16, 6), 100, np.uint8)
    m = cv2.getRotationMatrix2D((8, 6), 45, 1.0)
    m = m if name == "cv2.warpAffine" else np.vstack([m, [0.0, 0.0, 1.0]])
    want = getattr(cv2, name[4:])(img, m, (16, 12), borderValue=value)
    got = migrated_call(name)(img, m, (16, 12), borderValue=value)
    np.testing.assert_array_equal(got, want)
    assert want[0, 0, 4] == want[0, 0, 0]


@pytest.mark.parametrize(
    "m",
    [
        [[1.0, 0.0, 2.0], [0.0, 1.0, 3.0]],  # a list: cv2 raises "M is not a numpy array"
        ((1.0, 0.0, 2.0), (0.0, 1.0, 3.0)),
        np.array([[1, 0, 2], [0, 1, 3]], dtype=np.int64),  # integers: cv2's assertion fails
    ],
)
def test_a_matrix_cv2_refuses_is_refused_so_the_migrated_call_raises_as_cv2_does(m: object) -> None:
    from codedag.migrate.api import PipelineMigrator

    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(cv2.error):
        cv2.warpAffine(img, m, (8, 8))
    plan = {"context_device_map": {"app.f#0/cv2.warpAffine#0": "cpu"}}
    with PipelineMigrator.from_plan(plan, guard=False), pytest.raises(cv2.error):
        cv2.warpAffine(img, m, (8, 8))


@pytest.mark.parametrize("repeated", [True, False], ids=["one-matrix-repeated", "one-per-sample"])
@pytest.mark.parametrize("flags", [cv2.INTER_LINEAR, cv2.INTER_NEAREST, cv2.INTER_CUBIC])
def test_warp_affine_with_a_matrix_per_sample_is_exact(repeated: bool, flags: int) -> None:
    """Per-sample matrices, all equal (computed once for the batch) or not, warp each image as
    cv2 warps it with its own matrix."""
    rng = np.random.default_rng(11)
    images = rng.integers(0, 256, (4, 23, 29, 3), dtype=np.uint8)
    matrices = [_random_affine(seed, 29, 23) for seed in range(4)]
    if repeated:
        matrices = [matrices[0]] * 4
    got = ops.warpAffine(
        torch.from_numpy(images),
        torch.from_numpy(np.stack(matrices)),
        (31, 19),
        flags=flags,
        borderMode=cv2.BORDER_REFLECT_101,
    ).numpy()
    for image, matrix, out in zip(images, matrices, got, strict=True):
        expected = cv2.warpAffine(
            image, matrix, (31, 19), flags=flags, borderMode=cv2.BORDER_REFLECT_101
        )
        if flags == cv2.INTER_CUBIC:
            assert np.abs(out.astype(int) - expected).max() <= 1
        else:
            assert np.array_equal(out, expected)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("flags", [cv2.INTER_LINEAR, cv2.INTER_NEAREST])
@pytest.mark.parametrize("border", CV2_BORDERS)
def test_warp_affine_without_host_reads_is_exact_and_reads_nothing_back(
    dtype: type, flags: int, border: int
) -> None:
    """Where backends may not read tensor values on the host (a device's batched chain), the
    warp kernels' path decides on the device: every element exact, no data-dependent sync;
    exact halves (a scale of 1/2, every element on a rounding boundary) included."""
    from codedag.backends.host_sync import no_host_sync
    from codedag.measure.launches import LaunchCounter

    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, (4, 23, 29, 3)).astype(dtype)
    matrices = [_random_affine(seed, 29, 23) for seed in range(3)]
    matrices.append(np.array([[0.5, 0.0, 0.25], [0.0, 0.5, 0.75]]))  # exact halves
    value = (3.0, 200.0, 17.0)
    with no_host_sync(), LaunchCounter() as counted:
        got = ops.warpAffine(
            torch.from_numpy(images),
            torch.from_numpy(np.stack(matrices)),
            (31, 19),
            flags=flags,
            borderMode=border,
            borderValue=value,
        )
    assert counted.total_syncs == 0, dict(counted.syncs)
    for image, matrix, out in zip(images, matrices, got.numpy(), strict=True):
        expected = cv2.warpAffine(
            image, matrix, (31, 19), flags=flags, borderMode=border, borderValue=value
        )
        assert np.array_equal(out, expected)


def test_a_warp_reaching_beyond_the_coordinate_bound_is_refused() -> None:
    img = np.zeros((8, 8, 3), np.uint8)
    far = np.array([[1.0, 0.0, 2.0**29], [0.0, 1.0, 0.0]])
    assert "beyond" in (
        warp_module.check_warp_affine(img, far, (8, 8), flags=cv2.WARP_INVERSE_MAP) or ""
    )
    assert warp_module.check_warp_affine(img, np.eye(2, 3), (8, 8)) is None


def test_device_inverse_of_affine_matrices_has_the_host_inverses_bits() -> None:
    rng = np.random.default_rng(1)
    scales = rng.choice([1e-300, 1e-3, 1.0, 1e3, 1e150], size=(400, 1, 1))
    m = rng.normal(size=(400, 2, 3)) * scales
    m[:20, 1] = m[:20, 0] * 2  # singular: zeros
    m[20:30] = 0.0
    m[30:40, :, 2] = -0.0
    m[40:50, 0, 1], m[40:50, 1, 0] = 0.0, -0.0
    with np.errstate(all="ignore"):
        want = warp_module._invert_affine(m)
    got = warp_module._invert_affine_device(torch.tensor(m)).numpy()
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


_TIE = np.array(
    [
        [0.6428571428571428, 2.2204460492503132e-17, 0],
        [0, 1.0714285714285714, 0],
        [-0.03571428571428572, 0.007142857142857144, 1],
    ]
)
"""Source x exactly 12.5 at (26, 12) and 17.5 at (30, 24) in float64: cv2's float32 ``fma``
rounds 12.499999 and 17.499998 there (the 2.2e-17 term decides), its float64 remap ties too."""


@pytest.mark.parametrize(
    ("dtype", "channels"), [(np.uint8, 1), (np.uint8, 2), (np.float64, 1), (np.float32, 3)]
)
@pytest.mark.parametrize("flags", [cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_LANCZOS4])
def test_warp_perspective_at_half_pixel_ties_takes_cv2s_neighbour(
    dtype: type, channels: int, flags: int
) -> None:
    """The warp kernels (uint8, float32) and the fixed-point remap (2 channels, float64)."""
    rng = np.random.default_rng(0)
    shape = (100, 100) if channels == 1 else (100, 100, channels)
    img = (rng.random(shape) * 255).astype(dtype)
    want = cv2.warpPerspective(img, _TIE, (100, 100), flags=flags)
    got = migrated_call("cv2.warpPerspective")(img, _TIE, (100, 100), flags=flags)
    if flags == cv2.INTER_NEAREST or dtype == np.uint8:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=1e-3)


def _float32_of(q: Fraction) -> np.float32:
    """The float32 nearest to ``q``, ties to even."""
    f = np.float32(float(q))
    near = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    return min(near, key=lambda v: (abs(Fraction(float(v)) - q), int(v.view(np.uint32)) & 1))


def test_fma_emulation_rounds_the_exact_sum_once() -> None:
    """A float32 product plus a term below float64's last bit: through float64 alone a sum
    halfway between two float32 values rounds to even, not toward that term, as fma does."""
    rng = np.random.default_rng(7)
    lo = rng.random(200).astype(np.float32) * 64
    mid = (lo.astype(np.float64) + np.nextafter(lo, np.float32(np.inf))) / 2
    products = rng.random(200).astype(np.float32).astype(np.float64) * rng.integers(1, 999, 200)
    p = np.concatenate([mid, mid, products, [float(np.float32(1.5555556)) * 12]])
    tiny = rng.choice([1e-17, 3e-16, 2.0**-70], 600) * rng.choice([-1, 1], 600)
    c = np.concatenate([tiny[:200], -tiny[:200], tiny[400:600], [-8.381772707303158e-16]])
    got = warp_coords.fma_to_f32(torch.tensor(p), torch.tensor(c)).numpy()
    want = np.array([_float32_of(Fraction(a) + Fraction(b)) for a, b in zip(p, c, strict=True)])
    np.testing.assert_array_equal(got, want)
    assert got[-1] == np.float32(18.666666)  # 18.666668 when rounded twice
