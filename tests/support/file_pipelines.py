"""Data sets that read their samples from files, written the way training code writes them.

A module of its own so the tracer's filter sees it as user code. :func:`write_files` makes the
files on the fly: PNG images written with Pillow, 22,050 Hz WAV clips written with soundfile,
``.npy`` volumes written with ``np.save``, CSV tables written with ``np.savetxt``, 4-band
16-bit TIFF tiles written with tifffile and MATLAB files written with SciPy.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from prefix_support import FileDataset
from scipy import ndimage

SAMPLE_RATE = 16_000
CLIP = 8_000
"""Samples of the random crop of each clip (half a second at :data:`SAMPLE_RATE`)."""


@dataclass
class Files:
    """Paths of the files :func:`write_files` wrote, by kind."""

    images: list[str]
    clips: list[str]
    volumes: list[str]
    tables: list[str]
    tiles: list[str]
    mats: list[str]


def write_files(folder: Path, n: int = 8, seed: int = 0) -> Files:
    """``n`` files of each kind in ``folder``, of random content."""
    import soundfile
    import tifffile
    from PIL import Image
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = Files([], [], [], [], [], [])
    for i in range(n):
        image = folder / f"photo{i}.png"
        Image.fromarray(rng.integers(0, 255, (72, 90, 3), dtype=np.uint8)).save(image)
        clip = folder / f"clip{i}.wav"
        seconds = 0.6 + 0.1 * (i % 4)  # some shorter than the crop after padding: np.pad pads
        wave = 0.3 * rng.standard_normal(int(22_050 * seconds))
        soundfile.write(clip, wave.astype(np.float32), 22_050)
        volume = folder / f"volume{i}.npy"
        np.save(volume, rng.integers(0, 4000, (8, 24, 24), dtype=np.int16))
        table = folder / f"table{i}.csv"
        np.savetxt(table, rng.standard_normal((16, 4)), delimiter=",")
        files.images.append(str(image))
        files.clips.append(str(clip))
        files.volumes.append(str(volume))
        files.tables.append(str(table))
        tile = folder / f"tile{i}.tif"
        tifffile.imwrite(tile, rng.integers(0, 10_000, (4, 40, 40), dtype=np.uint16))
        files.tiles.append(str(tile))
        mat = folder / f"recording{i}.mat"
        savemat(mat, {"signal": rng.standard_normal((3, 1_200)), "rate": 200.0})
        files.mats.append(str(mat))
    return files


class Photos(FileDataset):
    """``with Image.open(path) as im``, RGB, resized, to an array, flipped at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        with Image.open(self.paths[index]) as im:
            im = im.convert("RGB").resize((64, 64))
        image = np.asarray(im)
        if random.random() < 0.5:
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image)), index


class PhotoBytes(FileDataset):
    """A validation transform: the file's bytes in an ``io.BytesIO``, decoded by PIL, resized,
    scaled and permuted to a CHW tensor with tensor methods; nothing drawn at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import io

        from PIL import Image

        with open(self.paths[index], "rb") as handle:
            data = handle.read()
        image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize((48, 40)))
        return torch.from_numpy(image.astype(np.float32) / 255.0).permute(2, 0, 1), index


class Buffered(FileDataset):
    """PIL on a buffered reader over the file's bytes: a stream with no name nor position a
    key can use, so no epoch can cache its prefix."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import io

        from PIL import Image

        with open(self.paths[index], "rb") as handle:
            stream = io.BufferedReader(io.BytesIO(handle.read()))  # type: ignore[arg-type]
        image = np.asarray(Image.open(stream).convert("RGB").resize((32, 24)))
        return torch.from_numpy(image.astype(np.float32)), index


class Decoded(FileDataset):
    """``cv2.imdecode(np.fromfile(path))`` (paths of any characters), resized, then tensor
    methods to CHW floats (``.to(torch.float32)``, ``.div``, ``.clamp``) and a normalization in
    place (``.sub_(0.5).div_(0.5)``: a method writing into the tensor, which ends the chain)."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imdecode(np.fromfile(self.paths[index], np.uint8), cv2.IMREAD_COLOR)
        image = cv2.resize(image, (40, 32), interpolation=cv2.INTER_AREA)
        tensor = torch.from_numpy(image).permute(2, 0, 1).to(torch.float32).div(255.0)
        return tensor.clamp(0.0, 1.0).sub_(0.5).div_(0.5), index


class Segmented(FileDataset):
    """An image and its mask from two files, as segmentation data sets read them: the image
    converted to RGB and resized, the mask (the next file) read in grayscale and resized with
    nearest neighbours, both flipped by one random draw."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imread(self.paths[index])
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        mask = cv2.imread(self.paths[(index + 1) % len(self.paths)], cv2.IMREAD_GRAYSCALE)
        image = cv2.resize(image, (40, 32))
        mask = cv2.resize(mask, (40, 32), interpolation=cv2.INTER_NEAREST)
        if random.random() < 0.5:
            image, mask = image[:, ::-1], mask[:, ::-1]
        both = np.concatenate([image, mask[:, :, None]], axis=2)
        return torch.from_numpy(np.ascontiguousarray(both)), index


class Clips(FileDataset):
    """Load resampled to 16 kHz, pad to a second, random crop, log-mel spectrogram."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import librosa

        y, _ = librosa.load(self.paths[index], sr=SAMPLE_RATE)
        y = np.pad(y, (0, max(0, SAMPLE_RATE - len(y))))
        start = np.random.randint(0, len(y) - CLIP + 1)
        y = y[start : start + CLIP]
        mel = librosa.feature.melspectrogram(
            y=y, sr=SAMPLE_RATE, n_fft=512, hop_length=128, n_mels=32
        )
        db = librosa.power_to_db(mel, ref=np.max)
        return torch.from_numpy(db.astype(np.float32)), index


class MelClips(FileDataset):
    """The log-mel spectrogram of the whole clip first (``power_to_db(mel, ref=np.max)``), each
    clip standardised by its own mean and deviation, then a random crop of its frames."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import librosa

        y, _ = librosa.load(self.paths[index], sr=SAMPLE_RATE)
        mel = librosa.feature.melspectrogram(
            y=y, sr=SAMPLE_RATE, n_fft=512, hop_length=128, n_mels=32
        )
        mel = librosa.power_to_db(mel, ref=np.max)
        mel = (mel - mel.mean()) / (mel.std() + 1e-6)
        start = random.randint(0, mel.shape[1] - 48)
        return torch.from_numpy(mel[:, start : start + 48].astype(np.float32)), index


class SoundfileClips(FileDataset):
    """``soundfile.read`` (its rate is the file's: the call runs every epoch), resampled to
    16 kHz with librosa and padded to a second: the resampling is what a hit skips."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import librosa
        import soundfile

        y, rate = soundfile.read(self.paths[index], dtype="float32")
        y = librosa.resample(y, orig_sr=rate, target_sr=SAMPLE_RATE)
        y = np.pad(y, (0, max(0, SAMPLE_RATE - len(y))))
        return torch.from_numpy(y[:SAMPLE_RATE]), index


class MonoClips(FileDataset):
    """``soundfile.read`` as two channels made mono with ``.mean(axis=1)``, resampled, then a
    random crop and gain: the read, the mean and the resampling are what a hit skips."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import librosa
        import soundfile

        y, rate = soundfile.read(self.paths[index], dtype="float32", always_2d=True)
        y = librosa.resample(y.mean(axis=1), orig_sr=rate, target_sr=SAMPLE_RATE)
        start = random.randint(0, max(0, len(y) - SAMPLE_RATE // 4))
        y = y[start : start + SAMPLE_RATE // 4] * random.uniform(0.8, 1.2)
        return torch.from_numpy(np.pad(y, (0, SAMPLE_RATE // 4 - len(y)))), index


class WavfileClips(FileDataset):
    """``scipy.io.wavfile.read`` (its rate is the file's: the call runs every epoch), made
    floats and resampled to 16 kHz by ``scipy.signal.resample_poly``, padded to a second: the
    resampling is what a hit skips."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from scipy.io import wavfile
        from scipy.signal import resample_poly

        rate, y = wavfile.read(self.paths[index])
        y = resample_poly(y.astype(np.float32), SAMPLE_RATE, rate)
        y = np.pad(y, (0, max(0, SAMPLE_RATE - len(y))))
        return torch.from_numpy(y[:SAMPLE_RATE].astype(np.float32)), index


class SkimageImages(FileDataset):
    """``skimage.io.imread`` (which scikit-image wraps in a decorator it shares with other
    functions), its RGB channels, an anti-aliased ``skimage.transform.resize``, scaled, flipped
    at random: the resize is what a hit skips."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from skimage.io import imread
        from skimage.transform import resize

        image = imread(self.paths[index])[:, :, :3]
        image = resize(image, (32, 32), preserve_range=True).astype(np.float32) / 255
        if random.random() < 0.5:
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image)), index


class SkimageSegmented(FileDataset):
    """:class:`Segmented` read with scikit-image: ``imread`` of the image and of its mask (the
    next file, as grey), both through the decorator scikit-image wraps ``imread`` in, the image
    resized with interpolation and the mask with ``order=0``."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from skimage.io import imread
        from skimage.transform import resize

        image = imread(self.paths[index])[:, :, :3]
        mask = imread(self.paths[(index + 1) % len(self.paths)], as_gray=True)
        image = resize(image, (32, 40), preserve_range=True)
        mask = resize(mask, (32, 40), order=0) > 0.5
        if random.random() < 0.5:
            image, mask = image[:, ::-1], mask[:, ::-1]
        both = np.concatenate([image, mask[:, :, None]], axis=2).astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(both)), index


class ImageioImages(FileDataset):
    """``imageio.v3.imread`` and NumPy only: a crop, every other pixel, scaled."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import imageio.v3 as iio

        image = iio.imread(self.paths[index])[:64, :64]
        image = image[::2, ::2].astype(np.float32) / 255.0
        return torch.from_numpy(np.ascontiguousarray(image)), index


class TiffTiles(FileDataset):
    """Multi-band 16-bit tiles: ``tifffile.imread``, each band standardised, a random crop."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import tifffile

        tile = tifffile.imread(self.paths[index]).astype(np.float32)
        tile = (tile - 5_000.0) / 2_900.0
        y, x = random.randint(0, 8), random.randint(0, 8)
        return torch.from_numpy(np.ascontiguousarray(tile[:, y : y + 32, x : x + 32])), index


class Windowed(FileDataset):
    """Intensity windowing as scans are read: the 1st and 99th percentiles of the decoded image
    (unpacked from one call), the image clipped between them, resized, flipped at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imread(self.paths[index], cv2.IMREAD_UNCHANGED).astype(np.float32)
        lo, hi = np.percentile(image, (1, 99))
        image = np.clip((image - lo) / (hi - lo + 1e-6), 0, 1).astype(np.float32)
        image = cv2.resize(image, (40, 32), interpolation=cv2.INTER_AREA)
        if random.random() < 0.5:
            image = image[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(image)), index


class Clipped(FileDataset):
    """The image clipped between its own 2nd and 98th percentiles (``np.clip(image, lo, hi)``,
    the call where the branches meet taking three values of the chain), a random crop."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imread(self.paths[index], cv2.IMREAD_UNCHANGED).astype(np.float32)
        lo, hi = np.percentile(image, (2, 98))
        image = np.clip(image, lo, hi)
        y, x = random.randint(0, 8), random.randint(0, 8)
        return torch.from_numpy(np.ascontiguousarray(image[y : y + 48, x : x + 64])), index


MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class Normalized(FileDataset):
    """A Kaggle notebook's normalization in one statement with module-level arrays, after a
    decode and a resize, then a flip drawn at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        img = cv2.imread(self.paths[index])
        img = cv2.resize(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), (24, 20))
        img = (img / 255.0 - MEAN) / STD
        if random.random() < 0.5:
            img = np.fliplr(img)
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), index


class Thresholded(FileDataset):
    """A scanned page's binarisation: Otsu's threshold (its level and image unpacked from the
    call's tuple), a morphological opening, a resize, a dilation drawn at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imread(self.paths[index], cv2.IMREAD_GRAYSCALE)
        _, binary = cv2.threshold(image, 0, 255, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
        binary = cv2.morphologyEx(binary, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        binary = cv2.resize(binary, (40, 32), interpolation=cv2.INTER_AREA)
        if random.random() < 0.5:
            binary = cv2.dilate(binary, np.ones((3, 3), np.uint8))
        return torch.from_numpy(binary), index


class Sharpened(FileDataset):
    """An unsharp mask (the image and its blur weighed together), a min-max scaling, each band
    standardised by its own mean and deviation, a random crop."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.imread(self.paths[index]).astype(np.float32)
        blur = cv2.GaussianBlur(image, (0, 0), 2)
        image = cv2.addWeighted(image, 1.5, blur, -0.5, 0)
        image = (image - image.min()) / (image.max() - image.min() + 1e-6)
        mean = image.mean(axis=(0, 1), keepdims=True)
        image = (image - mean) / (image.std(axis=(0, 1), keepdims=True) + 1e-6)
        y, x = random.randint(0, 8), random.randint(0, 8)
        return torch.from_numpy(np.ascontiguousarray(image[y : y + 48, x : x + 64])), index


class EdgesStacked(FileDataset):
    """Edges stacked onto the image as a fourth band (``np.dstack([image, edges])``), then an
    ImageNet normalization whose constants the sample itself computes (``np.array([...]) *
    255``), to a CHW tensor."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.resize(cv2.imread(self.paths[index]), (40, 32))
        edges = cv2.Canny(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), 50, 150)
        image = np.dstack([image, edges]).astype(np.float32)
        mean = np.array([0.485, 0.456, 0.406, 0.5]) * 255
        std = np.array([0.229, 0.224, 0.225, 0.5]) * 255
        image = (image - mean) / std
        return torch.from_numpy(image.transpose(2, 0, 1).astype(np.float32)), index


class RawClips(FileDataset):
    """``soundfile.read`` followed by a random crop at once: its rate is the file's, so no value
    stands in for the call, and nothing comes after it before the draw."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import soundfile

        y, _rate = soundfile.read(self.paths[index], dtype="float32")
        start = random.randint(0, len(y) - 4000)
        return torch.from_numpy(y[start : start + 4000].copy()), index


class Volumes(FileDataset):
    """A ``.npy`` volume, windowed and scaled to floats."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        volume = np.load(self.paths[index])
        volume = np.clip(volume, 0, 3000).astype(np.float32) / 3000.0
        return torch.from_numpy(volume), index


class SliceResized(FileDataset):
    """A volume resized slice by slice in a loop (each slice a branch of the loaded value, 24
    calls on them before ``np.stack`` takes them back together), scaled, flipped at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        volume = np.load(self.paths[index])
        slices = []
        for z in range(volume.shape[0]):
            plane = volume[z].astype(np.float32)
            slices.append(cv2.resize(plane, (32, 32), interpolation=cv2.INTER_LINEAR))
        stack = np.stack(slices) / 4000.0
        if random.random() < 0.5:
            stack = stack[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(stack)), index


class SlicesIterated(FileDataset):
    """A volume's slices resized in a comprehension over it (``for plane in volume``: the items
    are views NumPy makes as it iterates), stacked, scaled, flipped at random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        volume = np.load(self.paths[index]).astype(np.float32)
        stack = np.stack([cv2.resize(plane, (32, 32)) for plane in volume]) / 4000.0
        if random.random() < 0.5:
            stack = stack[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(stack)), index


class SavedTensors(FileDataset):
    """Features saved one tensor per file (``torch.save``, written beside each volume once),
    read by ``torch.load`` and scaled with torch: the load is what a hit skips."""

    def __init__(self, paths: list[str]) -> None:
        saved = [f"{path}.pt" for path in paths]
        for volume, path in zip(paths, saved, strict=True):
            if not os.path.exists(path):
                torch.save(torch.from_numpy(np.load(volume).astype(np.float32)), path)
        super().__init__(saved)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        features = torch.load(self.paths[index], map_location="cpu")
        return torch.clamp(features, 0, 3000) / 3000.0, index


class ZoomedVolumes(FileDataset):
    """A ``.npy`` volume resampled to a fixed size by ``scipy.ndimage.zoom`` (its factors read
    from the volume's shape), then windowed: a medical pipeline's usual first steps."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        volume = np.load(self.paths[index])
        volume = ndimage.zoom(volume, (8 / volume.shape[0], 12 / volume.shape[1], 1), order=1)
        return torch.from_numpy(np.clip(volume, 0, 3000).astype(np.float32)), index


class PointClouds(FileDataset):
    """A point cloud's rows read with ``np.loadtxt``, centred and scaled into the unit sphere
    (by a number a name holds: ``scale = np.max(np.linalg.norm(pts, axis=1))``), jittered at
    random."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        points = np.loadtxt(self.paths[index], delimiter=",", dtype=np.float32)[:, :3]
        points = points - points.mean(axis=0)
        scale = np.max(np.linalg.norm(points, axis=1))
        points = points / scale
        points = points + np.random.normal(0, 0.01, points.shape).astype(np.float32)
        return torch.from_numpy(points), index


class Recordings(FileDataset):
    """EEG-style recordings: a MATLAB file's variable (``loadmat(path)["signal"]``), halved in
    rate, a random window."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from scipy.io import loadmat
        from scipy.signal import resample_poly

        signal = loadmat(self.paths[index])["signal"].astype(np.float32)
        signal = resample_poly(signal, 1, 2, axis=-1)
        start = random.randint(0, signal.shape[1] - 256)
        return torch.from_numpy(np.ascontiguousarray(signal[:, start : start + 256])), index


class ImageSizes(FileDataset):
    """Each image's size read with ``imageio.v3.improps`` (its properties, without decoding
    it), which no library declares a file source: a blank image of that size."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import imageio.v3 as iio

        height, width = iio.improps(self.paths[index]).shape[:2]
        return torch.zeros(height, width), index
