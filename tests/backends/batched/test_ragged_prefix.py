"""Ragged prefixes (a resize and a constant border of images of different sizes) run as one
padded gather, bit for bit cv2's, with a fixed number of aten ops whatever the sizes."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from batched_counts import chain_records, count, reference

from codedag.backends.batched.executor import BatchExecutor

SIZE = 24


def _letterbox(img: np.ndarray, fill: tuple[int, ...], interpolation: int) -> np.ndarray:
    h, w = img.shape[:2]
    ratio = min(SIZE / h, SIZE / w)
    rw, rh = round(w * ratio), round(h * ratio)
    if (rw, rh) != (w, h):
        img = cv2.resize(img, (rw, rh), interpolation=interpolation)
    dw, dh = (SIZE - rw) / 2, (SIZE - rh) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    return cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=fill)


def _sample(channels: int, interpolation: int = cv2.INTER_LINEAR, flips: bool = False) -> Any:
    def make(i: int) -> np.ndarray:
        rng = np.random.default_rng(i)
        # upscales, downscales, an exact 2x shrink (cv2 runs it as INTER_AREA) and one already
        # at the size (no resize: the border only)
        h, w = [(48, 40), (SIZE, 20), (12, 7), (30, 61)][i % 4] if i % 3 else rng.integers(5, 70, 2)
        shape = (h, w) if channels == 1 else (h, w, channels)
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        fill = tuple(int(v) for v in rng.integers(0, 256, channels))
        out = _letterbox(img, fill, interpolation)
        if flips and i % 2:
            out = cv2.flip(out, 1)
        return cv2.GaussianBlur(out, (3, 3), 0)

    return make


@pytest.mark.timeout(120)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_ragged_letterbox_batches_equal_cv2_in_one_gather(channels: int) -> None:
    functions = ["cv2.resize", "cv2.copyMakeBorder", "cv2.GaussianBlur"]
    batch_records = chain_records(functions, _sample(channels), batches=3, batch_size=8)
    counts = count(batch_records)
    assert counts.steady_syncs == 0, counts.sync_names
    assert len(set(counts.ops_per_batch[1:])) == 1  # the same ops whatever the sizes
    for record, out in zip(batch_records, counts.outputs, strict=True):
        assert np.array_equal(out.numpy(), reference(record))
        outcome = BatchExecutor("cpu", chunk_bytes=0, sync_free=True).run(record)
        assert outcome.backend_calls == 2  # the prefix, then the blur
        assert not outcome.failed


def test_prefixes_cv2_runs_otherwise_keep_their_groups() -> None:
    functions = ["cv2.resize", "cv2.copyMakeBorder", "cv2.GaussianBlur"]
    batch_records = chain_records(functions, _sample(3, cv2.INTER_CUBIC), batches=1, batch_size=8)
    record = batch_records[0]
    outcome = BatchExecutor("cpu", chunk_bytes=0, sync_free=True).run(record)
    assert outcome.backend_calls > 2
    assert np.allclose(outcome.tensor.numpy(), reference(record), atol=1)


def test_samples_whose_later_steps_differ_share_the_ragged_prefix() -> None:
    functions = ["cv2.resize", "cv2.copyMakeBorder", "cv2.flip", "cv2.GaussianBlur"]
    batch_records = chain_records(functions, _sample(3, flips=True), batches=2, batch_size=8)
    for record in batch_records:
        outcome = BatchExecutor("cpu", chunk_bytes=0, sync_free=True).run(record)
        assert outcome.backend_calls == 3  # the prefix, the flip of half, the blur of all
        assert np.array_equal(outcome.tensor.numpy(), reference(record))
