"""FactoryOp: PIL kernel filters built once per configuration, bit-exact against Pillow."""

from __future__ import annotations

import numpy as np
import pytest
from migrate_support import plan_for
from PIL import Image, ImageFilter

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.ops.pil.filter import OPS
from codedag.migrate.registry import Registry

FILTERS = [
    ImageFilter.BLUR,
    ImageFilter.CONTOUR,
    ImageFilter.DETAIL,
    ImageFilter.EDGE_ENHANCE,
    ImageFilter.EDGE_ENHANCE_MORE,
    ImageFilter.EMBOSS,
    ImageFilter.FIND_EDGES,
    ImageFilter.SHARPEN,
    ImageFilter.SMOOTH,
    ImageFilter.SMOOTH_MORE,
]


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
    filters = FILTERS + custom
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
