"""PIL.Image.Image.filter against Pillow (bit-exact): box and Gaussian blurs, unsharp masks, kernel
and rank filters; kernel filters as a FactoryOp, built once per configuration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import (  # noqa: F401
    PROPS,
    assert_pil_matches,
    device_fixture,
    pil_images,
    pil_kernels,
    plan_for,
)
from PIL import Image, ImageFilter

from codedag.backends.ops.pil import BACKENDS, from_pil
from codedag.backends.ops.pil.filter import OPS
from codedag.backends.registry import Registry
from codedag.errors import UnsupportedOperation
from codedag.migrate.api import PipelineMigrator


def _registry() -> Registry:
    registry = Registry()
    for spec in OPS:
        registry.register(spec)
    return registry


@pytest.mark.parametrize(("mode", "channels"), [("L", 0), ("RGB", 3), ("RGBA", 4)])
def test_kernel_filters_are_bit_exact(mode: str, channels: int) -> None:
    rng = np.random.default_rng(channels)
    shape = (23, 31, channels) if channels else (23, 31)
    image = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8))
    custom = [
        ImageFilter.Kernel((3, 3), [1, 2, 3, 4, 5, 6, 7, 8, 9], scale=7, offset=3),
        ImageFilter.Kernel((5, 5), list(rng.uniform(-1, 2, 25)), offset=1.5),
    ]
    filters = pil_kernels() + custom
    expected = [np.asarray(image.filter(f)) for f in filters]
    plan = plan_for({"app.f#0/PIL.Image.Image.filter#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=_registry(), guard=False) as migrator:
        got = [image.filter(f) for f in filters]
        again = image.filter(ImageFilter.BLUR)  # same configuration: the cached transform
    for f, g, want in zip(filters, got, expected):
        assert isinstance(g, Image.Image) and g.mode == mode and g.size == image.size
        np.testing.assert_array_equal(np.asarray(g), want, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(again), expected[0])
    stats = migrator.get_stats()["functions"]["PIL.Image.Image.filter"]
    assert stats["strategy"] == "FactoryOp"
    assert stats["migrated"] == len(filters) + 1 and stats["fell_back"] == 0
    wrapper = migrator._injector.wrappers["PIL.Image.Image.filter"]  # type: ignore[union-attr]
    assert len(wrapper.executor.factories) == len(filters)  # one transform per configuration


def test_other_filters_use_the_pil_backend_or_fall_back() -> None:
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (12, 14, 3), np.uint8))
    blurs = [ImageFilter.GaussianBlur(2), ImageFilter.GaussianBlur(2), ImageFilter.BoxBlur(1)]
    expected = [np.asarray(image.filter(b)) for b in blurs]
    plan = plan_for({"app.f#0/PIL.Image.Image.filter#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=_registry(), guard=False) as migrator:
        got = [image.filter(b) for b in blurs]
        with pytest.raises(ValueError, match="palette"):  # Pillow's own error reaches the caller
            image.convert("P").filter(ImageFilter.SHARPEN)
    for g, want in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(g), want)
    stats = migrator.get_stats()["functions"]["PIL.Image.Image.filter"]
    assert stats["migrated"] == 3 and stats["fell_back"] == 1
    wrapper = migrator._injector.wrappers["PIL.Image.Image.filter"]  # type: ignore[union-attr]
    kinds = [key[1][0] for key in wrapper.executor.factories]
    assert kinds.count("GaussianBlur") == 1  # equal configurations share one transform


@PROPS
@given(
    ims=pil_images(),
    kind=st.sampled_from(["box", "gauss", "unsharp"]),
    radius=st.one_of(
        st.floats(0, 12, allow_nan=False),
        st.tuples(st.floats(0, 6, allow_nan=False), st.floats(0, 6, allow_nan=False)),
    ),
)
def test_box_and_gaussian_blur(device, ims, kind, radius):
    flt = ImageFilter.BoxBlur(radius) if kind == "box" else ImageFilter.GaussianBlur(radius)
    if kind == "unsharp":
        r = radius if isinstance(radius, float) else radius[0]
        flt = ImageFilter.UnsharpMask(r, percent=int(r * 40), threshold=int(r) % 4)
    got = BACKENDS["PIL.Image.Image.filter"](from_pil(ims, device), flt)
    assert_pil_matches(got, [im.filter(flt) for im in ims], "PIL.Image.Image.filter")


@PROPS
@given(
    ims=pil_images(max_side=24),
    flt=st.one_of(
        st.sampled_from(pil_kernels()),
        st.sampled_from([3, 5]).map(ImageFilter.MedianFilter),
        st.sampled_from([3, 5]).map(ImageFilter.MinFilter),
        st.sampled_from([3, 5]).map(ImageFilter.MaxFilter),
    ),
)
def test_kernel_and_rank_filters(device, ims, flt):
    got = BACKENDS["PIL.Image.Image.filter"](from_pil(ims, device), flt)
    assert_pil_matches(got, [im.filter(flt) for im in ims], "PIL.Image.Image.filter")


def test_custom_kernel_and_refusals(device):
    im = Image.fromarray(np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8))
    kernel = ImageFilter.Kernel((3, 3), [1, -2, 1, 0, 3, 0, 1, 2, -1], scale=3, offset=10)
    got = BACKENDS["PIL.Image.Image.filter"](from_pil([im], device), kernel)
    assert_pil_matches(got, [im.filter(kernel)], "PIL.Image.Image.filter")
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.Image.Image.filter"](from_pil([im], device), ImageFilter.ModeFilter(3))
    rgba = from_pil([im.convert("RGBA")], device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.ImageOps.invert"](rgba)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.ImageOps.autocontrast"](from_pil([im], device), cutoff=2)


def test_numpy_radii_are_left_to_pillow() -> None:
    """Pillow compares a blur's radius with ``(0, 0)``: a NumPy radius raises ValueError there."""
    from migrate_support import refusal

    im = Image.fromarray(np.zeros((8, 8), np.uint8))
    for blur in (ImageFilter.GaussianBlur(np.float64(0.2)), ImageFilter.BoxBlur(np.float32(1))):
        with pytest.raises(ValueError):
            im.filter(blur)
        assert "NumPy" in str(refusal("PIL.Image.Image.filter", im, blur))
    assert refusal("PIL.Image.Image.filter", im, ImageFilter.GaussianBlur(0.2)) is None
