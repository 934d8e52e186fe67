"""Each library package's adapter and declaration helper: how that library's values reach a
backend and come back (cv2 images, NumPy arrays, librosa signals, PIL images)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from codedag.backends.contract import Strategy
from codedag.backends.device_values import ValueConverter
from codedag.backends.executor import Executor
from codedag.backends.ops.audio._adapter import AUDIO
from codedag.backends.ops.audio._adapter import op as audio_op
from codedag.backends.ops.cv2._adapter import CV2
from codedag.backends.ops.cv2._adapter import op as cv2_op
from codedag.backends.ops.numpy._adapter import op as numpy_op
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.pil._adapter import PIL as PIL_ADAPTER
from codedag.backends.ops.pil._adapter import op as pil_op
from codedag.backends.ops.pil._batch import PILBatch

Image = pytest.importorskip("PIL.Image")


def _run(spec: Any, *args: Any, **kwargs: Any) -> Any:
    return Executor(spec, lambda *a, **k: None, {"cpu": ValueConverter("cpu")}).run(
        args, kwargs, "cpu"
    )


def test_cv2_images_reach_the_backend_as_batches_of_one_and_come_back_as_cv2_returns_them() -> None:
    seen: list[tuple[int, ...]] = []

    def backend(src: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(src.shape))
        return src + 1

    spec = cv2_op("cv2.demo", backend)
    one_channel = _run(spec, np.zeros((4, 5, 1), np.uint8))
    assert seen[-1][0] == 1 and one_channel.shape == (4, 5)  # (H, W, 1) is the (H, W) image
    colour = _run(spec, np.zeros((4, 5, 3), np.uint8))
    assert colour.shape == (4, 5, 3) and colour.flags.c_contiguous and int(colour.max()) == 1
    summed = cv2_op("cv2.demo_sum", lambda src: src.sum(dim=(1, 2), dtype=torch.float64))
    total = _run(summed, np.ones((2, 2)))
    assert type(total) is float and total == 4.0  # 0-d results are Python floats, as cv2's retval
    assert CV2.refuse(spec, (np.zeros((1, 4, 4, 3), np.uint8),), {}) is not None


def test_numpy_ops_take_the_device_only_when_the_backend_asks_for_it() -> None:
    def moved(a: torch.Tensor) -> torch.Tensor:
        return a * 2

    def placed(shape: Any, *, device: torch.device) -> torch.Tensor:
        return torch.zeros(shape, device=device)

    assert numpy_op("numpy.demo", moved).strategy is Strategy.MOVE_ONLY
    assert numpy_op("numpy.demo", placed).strategy is Strategy.STANDARD_OP
    assert numpy_op("numpy.demo", moved).quirks.empty  # empty arrays are fine for NumPy
    specs = ops_of({"numpy.a": moved, "numpy.b": moved}, {"b": {"empty": False}})
    assert [s.quirks.empty for s in specs] == [True, False]
    doubled = _run(numpy_op("numpy.demo", moved), np.asfortranarray(np.ones((2, 3))))
    assert isinstance(doubled, np.ndarray) and float(doubled.sum()) == 12.0


def test_librosa_signals_gain_and_lose_a_batch_axis_of_one() -> None:
    shapes: list[tuple[int, ...]] = []

    def backend(y: torch.Tensor) -> torch.Tensor:
        shapes.append(tuple(y.shape))
        return y * 0.5

    out = _run(audio_op("librosa.demo", backend), np.ones(16, np.float32))
    assert shapes == [(1, 16)] and out.shape == (16,) and float(out[0]) == 0.5
    assert AUDIO.refuse(audio_op("librosa.demo", backend), (np.ones((2, 2, 2, 2, 2)),), {})


def test_pil_images_cross_as_pil_batches_and_come_back_in_their_mode() -> None:
    modes: list[str] = []

    def backend(self: PILBatch) -> PILBatch:
        modes.append(self.mode)
        return PILBatch(255 - self.data, self.mode)

    spec = pil_op("PIL.Image.Image.demo", backend)
    pixels = np.random.default_rng(0).integers(0, 256, (6, 7, 3), dtype=np.uint8)
    out = _run(spec, Image.fromarray(pixels))
    assert modes == ["RGB"] and out.mode == "RGB"
    assert np.array_equal(np.asarray(out), 255 - pixels)


def test_pil_adapter_refuses_what_is_not_a_supported_image() -> None:
    spec = pil_op("PIL.Image.Image.demo", lambda self: self, dtypes=frozenset({"L"}))
    refuse = PIL_ADAPTER.refuse
    assert "expected a PIL image" in (refuse(spec, (np.zeros((2, 2)),), {}) or "")
    assert "mode 'RGB'" in (refuse(spec, (Image.new("RGB", (2, 2)),), {}) or "")
    assert "empty image" in (refuse(spec, (Image.new("L", (0, 3)),), {}) or "")
    assert refuse(spec, (Image.new("L", (2, 2)),), {}) is None
