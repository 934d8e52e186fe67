"""The example pipelines: documented batches, reproducible seeds, workers, and their helpers."""

from __future__ import annotations

import functools
import importlib
import inspect
import random
import sys
from collections import Counter
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from codedag.errors import ConfigError
from codedag.experiments import pipelines
from codedag.experiments.pipelines import letterbox as letterbox_mod
from codedag.experiments.pipelines import loaders, mel, synthetic, transforms, yolo_mosaic
from codedag.experiments.pipelines.yolo_augment import (
    random_perspective,
    xywhn2xyxy,
    xyxy2xywhn,
)

AUDIO = ("mel", "demo_audio", "audio_files")
SMALL: dict[str, dict[str, Any]] = {
    "letterbox": {"img_size": 64, "min_size": 40, "max_size": 96},
    "compose": {"img_size": 48, "min_size": 40, "max_size": 96},
    "yolo_mosaic": {"img_size": 64, "min_size": 40, "max_size": 96},
    "mel": {
        "sample_rate": 8000,
        "duration_s": 1.0,
        "min_seconds": 0.5,
        "max_seconds": 1.5,
        "n_fft": 256,
        "hop_length": 64,
        "n_mels": 32,
        "out_height": 32,
        "out_width": 48,
    },
    "demo_image": {"image_size": 32, "source_size": 48},
    "demo_audio": {
        "sample_rate": 8000,
        "seconds": 1.0,
        "n_fft": 256,
        "hop_length": 64,
        "n_mels": 16,
    },
    "pil_recipe": {"resize": 40, "crop": 32, "min_size": 40, "max_size": 96},
    "volume": {"size": 24, "patch": 16},
    "pil_with": {"size": 32, "min_size": 40, "max_size": 96},
    "audio_files": {
        "file_sample_rate": 8000,
        "sample_rate": 4000,
        "duration_s": 1.0,
        "min_seconds": 0.5,
        "max_seconds": 1.5,
        "n_fft": 256,
        "hop_length": 64,
        "n_mels": 16,
    },
    "yolo_files": {"img_size": 64, "min_size": 40, "max_size": 96},
}
# name -> (shape of the first batch element, its dtype) for a batch of 4; labels are (4,) int64
BATCH = 4
SHAPES: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "letterbox": ((BATCH, 3, 64, 64), torch.float32),
    "compose": ((BATCH, 3, 48, 48), torch.float32),
    "yolo_mosaic": ((BATCH, 3, 64, 64), torch.uint8),
    "mel": ((BATCH, 1, 32, 48), torch.float32),
    "demo_image": ((BATCH, 3, 32, 32), torch.float32),
    "demo_audio": ((BATCH, 1, 16, 1 + 8000 // 64), torch.float32),
    "pil_recipe": ((BATCH, 3, 32, 32), torch.float32),
    "volume": ((BATCH, 1, 16, 16, 16), torch.float32),
    "pil_with": ((BATCH, 3, 32, 32), torch.float32),
    "audio_files": ((BATCH, 1, 16, 1 + 4000 // 64), torch.float32),
    "yolo_files": ((BATCH, 3, 64, 64), torch.uint8),
}
YOLO = ("yolo_mosaic", "yolo_files")


def needs(name: str) -> None:
    if name in AUDIO:
        pytest.importorskip("librosa")


def small_loader(name: str, **kwargs: Any) -> Any:
    options = {"batch_size": BATCH, "n": 8, **SMALL[name], **kwargs}
    return pipelines.make_loader(name, **options)


def batches(loader: Any, count: int = 2) -> list[Any]:
    iterator = iter(loader)
    return [next(iterator) for _ in range(count)]


def assert_same(a: Any, b: Any) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            assert u.dtype == v.dtype and u.shape == v.shape
            assert torch.equal(u, v)


# ---- the registry ------------------------------------------------------------------------------


def test_every_pipeline_has_the_factory_interface() -> None:
    assert pipelines.pipeline_names() == [
        "letterbox",
        "compose",
        "yolo_mosaic",
        "mel",
        "demo_image",
        "demo_audio",
        "pil_recipe",
        "volume",
        "pil_with",
        "audio_files",
        "yolo_files",
    ]
    for name, module in pipelines.PIPELINES.items():
        assert pipelines.pipeline(name) is module
        assert pipelines.describe(name) == module.DESCRIPTION and len(module.DESCRIPTION) > 40
        assert all(isinstance(call, str) for call in module.CALLS)
        for factory in (module.make_loader, module.make_dataset):
            required = [
                p
                for p in inspect.signature(factory).parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            ]
            assert required == [], (name, factory.__name__)
        assert {"n", "seed"} <= set(inspect.signature(module.make_dataset).parameters)
        assert {"batch_size", "num_workers", "seed"} <= set(
            inspect.signature(module.make_loader).parameters
        )


def test_unknown_pipeline_and_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown pipeline 'nope'; known: letterbox, compose"):
        pipelines.make_loader("nope")
    with pytest.raises(ConfigError, match=r"unknown option\(s\) imgsize; accepted: .*img_size"):
        pipelines.make_loader("letterbox", imgsize=64)
    with pytest.raises(ConfigError, match="batch_size must be an integer >= 1, got 0"):
        pipelines.make_loader("compose", batch_size=0)
    with pytest.raises(ConfigError, match="persistent_workers=True needs num_workers > 0"):
        pipelines.make_loader("letterbox", persistent_workers=True)
    with pytest.raises(ConfigError, match="min_size must be <= max_size"):
        pipelines.make_dataset("letterbox", n=2, min_size=100, max_size=50)
    with pytest.raises(ConfigError, match="image_format must be one of"):
        pipelines.make_dataset("compose", n=2, image_format="bmp")
    with pytest.raises(ConfigError, match="img_size must be even"):
        pipelines.make_dataset("yolo_mosaic", n=2, img_size=63)
    with pytest.raises(ConfigError, match="unknown hyperparameter"):
        pipelines.make_dataset("yolo_mosaic", n=2, hyp={"mosaic_prob": 1.0})
    with pytest.raises(ConfigError, match="blur_ksize must be odd"):
        pipelines.make_dataset("letterbox", n=2, blur_ksize=4)


# ---- batches, seeds, workers ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SHAPES))
def test_batches_have_the_documented_shapes_and_dtypes(name: str) -> None:
    needs(name)
    images, labels = next(iter(small_loader(name)))
    shape, dtype = SHAPES[name]
    assert tuple(images.shape) == shape and images.dtype == dtype
    assert torch.isfinite(images.float()).all()
    if name in YOLO:
        assert labels.dtype == torch.float32 and labels.ndim == 2 and labels.shape[1] == 6
        assert set(labels[:, 0].tolist()) <= set(range(BATCH))
        assert ((labels[:, 2:] >= 0) & (labels[:, 2:] <= 1)).all()
    else:
        assert labels.dtype == torch.int64 and tuple(labels.shape) == (BATCH,)
    if name in ("mel", "audio_files"):
        assert images.min() >= 0 and images.max() <= 1 and images.std() > 0.05
    if name in (
        "letterbox",
        "compose",
        "pil_with",
    ):  # normalized: about zero-centered, not saturated
        assert -3 < float(images.mean()) < 3 and float(images.std()) > 0.1


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_same_seed_gives_bit_identical_batches(name: str, workers: int) -> None:
    needs(name)
    if name in AUDIO and workers:
        pipelines.make_dataset(name, n=1, **SMALL[name])[0]  # librosa's lazy imports, once
    first = batches(small_loader(name, num_workers=workers, seed=3))
    second = batches(small_loader(name, num_workers=workers, seed=3))
    assert_same(first, second)
    other = batches(small_loader(name, num_workers=workers, seed=4), 1)
    assert not torch.equal(first[0][0], other[0][0])


@pytest.mark.parametrize("name", ["compose", "yolo_mosaic"])
def test_two_workers_load_every_sample_once_and_draw_different_streams(name: str) -> None:
    loader = small_loader(name, num_workers=2, n=8, seed=1, shuffle=False)
    dataset = loader.dataset
    images = torch.cat([b[0] for b in loader])
    assert images.shape[0] == 8
    if name == "compose":
        assert torch.cat([b[1] for b in loader]).tolist() == [s.label for s in dataset.samples]
    # each worker seeds NumPy and random from its own torch seed: no two batches share draws
    loader0 = small_loader(name, num_workers=0, n=8, seed=1, shuffle=False)
    assert not torch.equal(images, torch.cat([b[0] for b in loader0]))


def test_seed_worker_seeds_numpy_and_random_from_the_torch_worker_seed() -> None:
    draws = []
    for torch_seed in (11, 11, 12):
        torch.manual_seed(torch_seed)
        loaders.seed_worker(0)
        draws.append((np.random.random(), random.random()))
    assert draws[0] == draws[1] and draws[0] != draws[2]
    torch.manual_seed(11)
    assert draws[0] == (np.random.RandomState(11).random_sample(), random.Random(11).random())


def test_a_loader_without_workers_seeds_the_process_like_seed_everything() -> None:
    pipelines.make_loader("letterbox", n=1, seed=9, **SMALL["letterbox"])
    assert np.random.random() == np.random.RandomState(9).random_sample()
    assert random.random() == random.Random(9).random()
    drawn = torch.rand(3)  # torchvision-style transforms draw from torch's global state
    assert torch.equal(drawn, torch.rand(3, generator=torch.Generator().manual_seed(9)))


# ---- the calls each pipeline documents ---------------------------------------------------------


def _owner(qualified: str) -> tuple[Any, str]:
    """The module or class holding ``qualified``'s last name (``PIL.Image.Image.resize``)."""
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        return owner, parts[-1]
    raise AssertionError(f"no module in {qualified}")


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_pipeline_makes_the_library_calls_it_documents(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs(name)
    counts: Counter[str] = Counter()

    def counting(qualified: str, original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[qualified] += 1
            return original(*args, **kwargs)

        return wrapper

    documented = set(pipelines.pipeline(name).CALLS)
    for qualified in pipelines.pipeline(name).CALLS:
        owner, attr = _owner(qualified)
        try:
            monkeypatch.setattr(owner, attr, counting(qualified, getattr(owner, attr)))
        except TypeError:  # a method of a C type (numpy.ndarray.astype) cannot be replaced
            documented.discard(qualified)
    variants: list[dict[str, Any]] = [{}]
    if name == "yolo_mosaic":  # affine and perspective warps, the mosaic and the letterbox path
        variants = [{"hyp": {"mosaic": 0.5}}, {"hyp": {"perspective": 0.0005}}]
    for options in variants:
        for _ in small_loader(name, n=48, batch_size=8, **options):
            pass
    assert documented - set(counts) == set()


@pytest.mark.parametrize("name", ["letterbox", "compose", "yolo_mosaic", "yolo_files"])
def test_a_traced_batch_records_the_pipelines_cv2_calls(name: str) -> None:
    from codedag.trace.tracer import EnhancedTracer, trace_dataloader

    options = {"hyp": {"mosaic": 0.5}} if name == "yolo_mosaic" else {}
    loader = small_loader(name, n=16, batch_size=16, **options)
    tracer, batch = trace_dataloader(loader, EnhancedTracer(track_memory=False))
    traced = {node.name for node in tracer.dag.nodes.values()}
    expected = {c for c in pipelines.pipeline(name).CALLS if c.startswith("cv2.")}
    expected -= {"cv2.warpPerspective", "cv2.line", "cv2.filter2D", "cv2.blur"}  # not drawn here
    assert expected - traced == set()
    assert len(batch[0]) == 16


# ---- letterbox ---------------------------------------------------------------------------------


def test_letterbox_keeps_the_aspect_ratio_and_pads_evenly() -> None:
    img = np.random.default_rng(0).integers(0, 255, size=(45, 100, 3), dtype=np.uint8)
    out, ratio, (dw, dh) = letterbox_mod.letterbox(img, 64)
    assert out.shape == (64, 64, 3) and ratio == pytest.approx(0.64)
    assert (dw, dh) == (0.0, 17.5)  # resized to 64x29: 35 rows of padding, 17 above, 18 below
    assert (out[:17] == 114).all() and (out[17 + 29 :] == 114).all()
    resized = cv2.resize(img, (64, 29), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(out[17 : 17 + 29], resized)


def test_letterbox_without_scaleup_only_pads_and_takes_rectangular_shapes() -> None:
    img = np.arange(20 * 10 * 3, dtype=np.uint8).reshape(20, 10, 3)
    out, ratio, (dw, dh) = letterbox_mod.letterbox(img, (48, 64), color=(0, 0, 0), scaleup=False)
    assert out.shape == (48, 64, 3) and ratio == 1.0 and (dw, dh) == (27.0, 14.0)
    assert np.array_equal(out[14:34, 27:37], img) and out.sum() == img.sum()


def test_normalize_is_mean_std_scaling_in_float32() -> None:
    img = np.random.default_rng(1).integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    x = letterbox_mod.normalize(img)
    expected = (img / 255.0 - letterbox_mod.MEAN_RGB) / letterbox_mod.STD_RGB
    assert x.dtype == np.float32 and np.allclose(x, expected, atol=1e-6)


# ---- transforms --------------------------------------------------------------------------------

IMG = np.random.default_rng(2).integers(0, 256, size=(40, 50, 3), dtype=np.uint8)


def test_transforms_apply_with_their_probability_and_compose_in_order() -> None:
    never = transforms.HorizontalFlip(p=0.0)
    assert never(IMG) is IMG
    composed = transforms.Compose(
        [transforms.Resize(30, 20), transforms.HorizontalFlip(p=1.0), transforms.ToTensor()]
    )
    out = composed(IMG)
    expected = cv2.resize(IMG, (20, 30))[:, ::-1]
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (3, 30, 20)
    assert np.array_equal(out.numpy().transpose(1, 2, 0), expected)
    with pytest.raises(ConfigError, match="p must be in"):
        transforms.Blur(p=1.5)


def test_random_crop_is_a_view_of_the_drawn_window() -> None:
    crop = transforms.RandomCrop(16, 24)
    params = crop.get_params(IMG)
    out = crop.apply(IMG, **params)
    y, x = params["y"], params["x"]
    assert out.shape == (16, 24, 3) and np.shares_memory(out, IMG)
    assert np.array_equal(out, IMG[y : y + 16, x : x + 24])
    with pytest.raises(ConfigError, match="needs an image at least that large"):
        transforms.RandomCrop(64, 64).get_params(IMG)


def test_affine_brightness_and_hsv_are_identities_at_neutral_parameters() -> None:
    assert np.array_equal(transforms.Affine().apply(IMG), IMG)
    assert np.array_equal(transforms.RandomBrightnessContrast().apply(IMG), IMG)
    roundtrip = cv2.cvtColor(cv2.cvtColor(IMG, cv2.COLOR_RGB2HSV), cv2.COLOR_HSV2RGB)
    assert np.array_equal(transforms.HueSaturationValue().apply(IMG), roundtrip)


def test_brightness_contrast_saturates_and_uses_the_image_mean() -> None:
    doubled = transforms.RandomBrightnessContrast().apply(IMG, alpha=2.0, beta=0.0)
    assert np.array_equal(doubled, np.clip(IMG.astype(np.int32) * 2, 0, 255).astype(np.uint8))
    shifted = transforms.RandomBrightnessContrast().apply(IMG, alpha=1.0, beta=0.1)
    lut = np.clip(np.arange(256, dtype=np.float32) + 0.1 * np.mean(IMG), 0, 255).astype(np.uint8)
    assert np.array_equal(shifted, lut[IMG])
    gray = transforms.HueSaturationValue().apply(IMG, sat_shift=-255)
    assert (gray.max(axis=2) - gray.min(axis=2) <= 1).all()


def test_motion_blur_kernel_sums_to_one_and_one_of_picks_by_weight() -> None:
    random.seed(0)
    kernel = transforms.MotionBlur(7).get_params(IMG)["kernel"]
    assert kernel.shape in ((3, 3), (5, 5), (7, 7)) and kernel.sum() == pytest.approx(1.0)
    one_of = transforms.OneOf([transforms.Blur(p=3.0 / 4), transforms.MedianBlur(p=1.0 / 4)], p=1)
    assert one_of.weights.tolist() == [0.75, 0.25]
    np.random.seed(0)
    out = one_of(IMG)
    assert out.shape == IMG.shape and not np.array_equal(out, IMG)


def test_coarse_dropout_fills_holes_in_a_copy_and_normalize_matches_its_formula() -> None:
    dropout = transforms.CoarseDropout(fill_value=7)
    holes = [(1, 2, 5, 9), (20, 30, 22, 33)]
    out = dropout.apply(IMG, holes=holes)
    assert (out[1:5, 2:9] == 7).all() and (out[20:22, 30:33] == 7).all()
    assert not np.shares_memory(out, IMG) and (IMG[1:5, 2:9] != 7).any()
    normalized = transforms.Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)).apply(IMG)
    assert normalized.dtype == np.float32
    assert np.allclose(normalized, (IMG / 255.0 - 0.5) / 0.25, atol=1e-5)


# ---- YOLO mosaic -------------------------------------------------------------------------------


def test_box_format_conversions_round_trip() -> None:
    boxes = np.array([[0.5, 0.5, 0.2, 0.4], [0.1, 0.9, 0.2, 0.2]], dtype=np.float32)
    pixels = xywhn2xyxy(boxes, w=100, h=50, padw=10, padh=-5)
    assert np.allclose(pixels[0], [50, 10, 70, 30]) and np.allclose(pixels[1], [10, 35, 30, 45])
    back = xyxy2xywhn(pixels - [10, -5, 10, -5], w=100, h=50)
    assert np.allclose(back, boxes)


def test_random_perspective_with_neutral_parameters_changes_nothing() -> None:
    targets = np.array([[1, 5, 6, 30, 20], [2, 10, 12, 40, 39]], dtype=np.float32)
    img, out = random_perspective(IMG, targets.copy(), 0, 0.0, 0.0, 0, 0.0)
    assert np.array_equal(img, IMG) and np.allclose(out, targets)


def _color_at_box_centers(
    img_bgr: np.ndarray, labels: np.ndarray, min_side: float = 8.0
) -> list[int]:
    """Max channel difference between each inner box's center pixel and its class color."""
    height, width = img_bgr.shape[:2]
    errors = []
    for cls, x1, y1, x2, y2 in labels:
        if min(x2 - x1, y2 - y1) < min_side or x1 <= 1 or y1 <= 1:
            continue
        if x2 >= width - 1 or y2 >= height - 1:
            continue
        pixel = img_bgr[int((y1 + y2) / 2), int((x1 + x2) / 2)].astype(int)
        color = np.array(synthetic.CLASS_COLORS_BGR[int(cls)])
        errors.append(int(np.abs(pixel - color).max()))
    return errors


def _rectangle_edges_match(img_bgr: np.ndarray, labels: np.ndarray) -> int:
    """Check that axis-aligned rectangle boxes (even classes) hug their objects; return how many.

    Two pixels inside each corner have the class color; two pixels outside each edge do not.
    """
    height, width = img_bgr.shape[:2]
    checked = 0
    for cls, x1, y1, x2, y2 in labels:
        inside = (x1 > 4) & (y1 > 4) & (x2 < width - 4) & (y2 < height - 4)
        if int(cls) % 2 or not inside or min(x2 - x1, y2 - y1) < 8:
            continue
        color = np.array(synthetic.CLASS_COLORS_BGR[int(cls)])
        xc, yc = int((x1 + x2) / 2), int((y1 + y2) / 2)
        left, top, right, bottom = int(np.ceil(x1)), int(np.ceil(y1)), int(x2), int(y2)
        for y, x in ((top + 1, left + 1), (bottom - 2, right - 2), (top + 1, right - 2)):
            assert np.abs(img_bgr[y, x].astype(int) - color).max() <= 2, (cls, x1, y1, x2, y2)
        for y, x in ((yc, left - 3), (yc, right + 2), (top - 3, xc), (bottom + 2, xc)):
            assert np.abs(img_bgr[y, x].astype(int) - color).max() > 20, (cls, x1, y1, x2, y2)
        checked += 1
    return checked


def test_mosaic_places_four_images_and_their_boxes_on_a_114_canvas() -> None:
    dataset = yolo_mosaic.make_dataset(
        n=6, seed=5, img_size=128, min_size=96, max_size=160, image_format="png"
    )
    errors: list[int] = []
    rectangles = 0
    for index in range(6):
        random.seed(index)
        img4, labels4 = dataset.load_mosaic(index)
        assert img4.shape == (256, 256, 3) and img4.dtype == np.uint8
        assert (img4 == 114).all(axis=2).any()  # the unfilled canvas shows
        assert (
            labels4.shape[1] == 5 and (labels4[:, 1:] >= 0).all() and (labels4[:, 1:] <= 256).all()
        )
        errors += _color_at_box_centers(img4, labels4)
        rectangles += _rectangle_edges_match(img4, labels4)
        warped, labels = random_perspective(img4, labels4.copy(), 10, 0.1, 0.3, 2, 0.0, (-64, -64))
        assert warped.shape == (128, 128, 3)
        assert (labels[:, 1:] >= 0).all() and (labels[:, 1:] <= 128).all()
        errors += _color_at_box_centers(warped, labels)
    assert len(errors) >= 20 and max(errors) <= 2, errors
    assert rectangles >= 8


@pytest.mark.parametrize("mosaic", [1.0, 0.0])
def test_yolo_samples_keep_labels_on_their_objects(mosaic: float) -> None:
    hyp = {"mosaic": mosaic, "hsv_h": 0.0, "hsv_s": 0.0, "hsv_v": 0.0, "flipud": 0.5}
    dataset = yolo_mosaic.make_dataset(
        n=16, seed=2, img_size=128, min_size=96, max_size=160, image_format="png", hyp=hyp
    )
    errors: list[int] = []
    for index in range(16):
        random.seed(index)
        np.random.seed(index)
        image, labels = dataset[index]
        assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 128, 128)
        assert image.is_contiguous() and labels.shape[1] == 6 and (labels[:, 0] == 0).all()
        assert ((labels[:, 2:] >= 0) & (labels[:, 2:] <= 1)).all()
        bgr = image.numpy().transpose(1, 2, 0)[:, :, ::-1]
        pixels = xywhn2xyxy(labels[:, 2:].numpy(), 128, 128)
        errors += _color_at_box_centers(bgr, np.column_stack([labels[:, 1].numpy(), pixels]))
    assert len(errors) >= 8 and max(errors) <= 3, errors


def test_yolo_collate_stacks_images_and_numbers_label_rows_by_image() -> None:
    samples = [
        (torch.zeros(3, 4, 4, dtype=torch.uint8), torch.ones(2, 6)),
        (torch.ones(3, 4, 4, dtype=torch.uint8), torch.zeros(0, 6)),
        (torch.ones(3, 4, 4, dtype=torch.uint8), torch.ones(1, 6)),
    ]
    images, labels = yolo_mosaic.collate_fn(samples)
    assert tuple(images.shape) == (3, 3, 4, 4) and tuple(labels.shape) == (3, 6)
    assert labels[:, 0].tolist() == [0, 0, 2] and (labels[:, 1:] == 1).all()


# ---- mel ---------------------------------------------------------------------------------------


def test_crop_or_pad_slices_a_window_or_embeds_in_zeros() -> None:
    y = np.arange(1, 101, dtype=np.float32)
    np.random.seed(0)
    window = mel.crop_or_pad(y, 30)
    start = int(window[0]) - 1
    assert window.shape == (30,) and np.array_equal(window, y[start : start + 30])
    padded = mel.crop_or_pad(y, 150)
    offset = int(np.flatnonzero(padded)[0])
    assert padded.shape == (150,) and padded.dtype == np.float32
    assert np.array_equal(padded[offset : offset + 100], y) and padded.sum() == y.sum()
    assert np.array_equal(mel.crop_or_pad(y, 100), y)


def test_mel_without_librosa_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "librosa", None)
    with pytest.raises(ConfigError, match=r"pip install 'codedag\[audio\]'"):
        pipelines.make_dataset("mel", n=2)
    with pytest.raises(ConfigError, match=r"codedag\[audio\]"):
        pipelines.make_loader("demo_audio", n=2)


def test_synthetic_images_are_drawn_once_and_shared_read_only() -> None:
    first = synthetic.make_images(5, seed=3, min_size=32, max_size=48)
    first.pop()  # the caller's list is its own
    again = synthetic.make_images(5, seed=3, min_size=32, max_size=48)
    assert len(again) == 5 and again[0] is first[0]
    with pytest.raises(ValueError, match="read-only"):
        again[0].boxes[0, 0] = 7
    other = synthetic.make_images(5, seed=4, min_size=32, max_size=48)
    assert other[0].data != again[0].data


def test_synthetic_images_are_ragged_and_reproducible() -> None:
    first = synthetic.make_images(6, seed=1, min_size=32, max_size=64, image_format="mixed")
    synthetic._encoded_images.cache_clear()
    again = synthetic.make_images(6, seed=1, min_size=32, max_size=64, image_format="mixed")
    assert first[0] is not again[0]
    assert [s.data for s in first] == [s.data for s in again]
    assert len({(s.height, s.width) for s in first}) > 1
    assert first[0].data[:2] == b"\xff\xd8" and first[1].data[:4] == b"\x89PNG"
    for sample in first:
        decoded = cv2.imdecode(np.frombuffer(sample.data, np.uint8), cv2.IMREAD_COLOR)
        assert decoded.shape == (sample.height, sample.width, 3)
        assert (
            sample.boxes.shape[1] == 5
            and ((sample.boxes[:, 1:] > 0) & (sample.boxes[:, 1:] <= 1)).all()
        )
    clips = synthetic.make_clips(4, seed=1, sample_rate=8000, min_seconds=0.5, max_seconds=2.0)
    assert len({c.waveform.size for c in clips}) == 4 and all(
        c.waveform.dtype == np.float32 for c in clips
    )
