"""The prefix cache on data sets that read files as projects write them: PIL in a ``with``
block or on a file's bytes in an ``io.BytesIO``, ``cv2.imdecode(np.fromfile(path))``, librosa
resampling a WAV file (and SciPy reading and resampling one), ``np.load`` of a volume (and
resampled by ``scipy.ndimage.zoom``), ``torch.load`` of a saved tensor, scikit-image's,
imageio's and tifffile's readers (and scikit-image's resize), an image and its mask read
by two lines, and prefixes that read the decoded image twice (percentile windowing, an unsharp
mask, min-max scaling, per-band standardisation, edges stacked onto it, a log-mel spectrogram
standardised) or take constants the sample computes (an inline ImageNet mean and std) or a
NumPy function (``power_to_db(mel, ref=np.max)``). Traced, optimized with the store's measured costs and migrated, for two epochs with
0 and 2 workers: the second epoch reads every prefix back and every batch equals the uncached run
bit for bit. A file that disappears, shrinks or turns unreadable gives the error it gives without
codedag."""

from __future__ import annotations

import copy
import os
import random
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import file_pipelines
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, Subset

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.store.tiers import StoreSettings

Make = Callable[[file_pipelines.Files], Dataset]
FP = file_pipelines
PIPELINES: dict[str, tuple[Make, str]] = {
    "pil-with": (lambda f: FP.Photos(f.images), "PIL.Image.open"),
    "librosa-load": (lambda f: FP.Clips(f.clips), "librosa.core.audio.load"),
    "numpy-load": (lambda f: FP.Volumes(f.volumes), "numpy.load"),
    "scipy-zoom": (lambda f: FP.ZoomedVolumes(f.volumes), "numpy.load"),
    "slices-looped": (lambda f: FP.SliceResized(f.volumes), "numpy.load"),
    "slices-iterated": (lambda f: FP.SlicesIterated(f.volumes), "numpy.load"),
    "pil-bytes": (lambda f: FP.PhotoBytes(f.images), "PIL.Image.open"),
    "cv2-fromfile": (lambda f: FP.Decoded(f.images), "numpy.fromfile"),
    "soundfile-read": (lambda f: FP.SoundfileClips(f.clips), "soundfile.read"),
    "soundfile-mono": (lambda f: FP.MonoClips(f.clips), "soundfile.read"),
    "torch-load": (lambda f: FP.SavedTensors(f.volumes), "torch.serialization.load"),
    "wavfile-read": (lambda f: FP.WavfileClips(f.clips), "scipy.io.wavfile.read"),
    "skimage-imread": (lambda f: FP.SkimageImages(f.images), "skimage.io.imread"),
    "imageio-v3": (lambda f: FP.ImageioImages(f.images), "imageio.v3.imread"),
    "tifffile-imread": (lambda f: FP.TiffTiles(f.tiles), "tifffile.imread"),
    "percentile-window": (lambda f: FP.Windowed(f.images), "cv2.imread"),
    "unsharp-standardise": (lambda f: FP.Sharpened(f.images), "cv2.imread"),
    "percentile-clip": (lambda f: FP.Clipped(f.images), "cv2.imread"),
    "edges-stacked": (lambda f: FP.EdgesStacked(f.images), "cv2.imread"),
    "otsu-threshold": (lambda f: FP.Thresholded(f.images), "cv2.imread"),
    "librosa-mel": (lambda f: FP.MelClips(f.clips), "librosa.core.audio.load"),
    "numpy-loadtxt": (lambda f: FP.PointClouds(f.tables), "numpy.loadtxt"),
    "scipy-loadmat": (lambda f: FP.Recordings(f.mats), "scipy.io.loadmat"),
}
"""Each pipeline's data set and the function reading the file its chain starts at."""


@dataclass(frozen=True)
class Planned:
    """What a pipeline's chain is planned as: its steps (the first of them, or all where
    ``whole``), its cut and why it ends."""

    steps: tuple[str, ...] = ()
    whole: bool = True
    cut: str | tuple[str, ...] | None = None  # a tuple: any of them
    occurrence: int | None = None
    stop: str | None = None

    def check(self, chain: dict[str, Any]) -> None:
        found = chain["steps"] if self.whole else chain["steps"][: len(self.steps)]
        assert not self.steps or found == list(self.steps), chain["steps"]
        cuts = (self.cut,) if isinstance(self.cut, str) else self.cut
        assert cuts is None or chain["cut"]["step"] in cuts, chain["cut"]
        assert self.occurrence is None or chain["cut"]["occurrence"] == self.occurrence
        assert self.stop is None or chain["stop"] == self.stop, chain["stop"]


PLANNED: dict[str, Planned] = {
    # the random crop ends the chain: the load and the pad are kept
    "librosa-load": Planned(("librosa.core.audio.load", "numpy.pad")),
    # .mean(axis=1) is a step; the crop's slice is not traced, so the gain after the draw, its
    # arguments unrecorded, ends the chain
    "soundfile-mono": Planned(
        ("soundfile.read", "numpy.ndarray.mean", "librosa.core.audio.resample"),
        stop="cut ends before operator.mul: it follows a random draw "
        "(random.randint; its arguments were not recorded)",
    ),
    # under SciPy's public names, resampling the read's data
    "wavfile-read": Planned(
        ("scipy.io.wavfile.read", "numpy.ndarray.astype", "scipy.signal.resample_poly"),
        whole=False,
    ),
    # named through the decorator's shared wrapper, resized
    "skimage-imread": Planned(
        ("skimage.io.imread", "operator.getitem", "skimage.transform.resize"), whole=False
    ),
    # eight slices, each taken, cast and resized, meet again in np.stack: the cut is the stack
    # or its scaling (of one size: which, the timings decide), past all 24 calls on branches
    "slices-looped": Planned(
        ("numpy.load", "operator.getitem", "numpy.ndarray.astype", "cv2.resize"),
        whole=False,
        cut=("numpy.stack", "operator.truediv"),
    ),
    # the comprehension's items are taken from the volume by subscripts (the trace makes them
    # steps, a prefix value iterated makes them at run time): the cut is past the stack
    "slices-iterated": Planned(
        ("numpy.load", "numpy.ndarray.astype", "operator.getitem", "cv2.resize"),
        whole=False,
        cut=("numpy.stack", "operator.truediv"),
    ),
    # the threshold's tuple unpacks into steps at run time
    "otsu-threshold": Planned(
        ("cv2.imread", "cv2.threshold", "cv2.morphologyEx", "cv2.resize"), cut="cv2.resize"
    ),
    # the percentiles' branch meets the image again in the division: the cut is after the
    # resize, past the values it reads twice
    "percentile-window": Planned(
        (
            "cv2.imread",
            "numpy.ndarray.astype",
            "numpy.percentile",
            "operator.truediv",
            "numpy.clip",
            "numpy.ndarray.astype",
            "cv2.resize",
        ),
        whole=False,
        cut="cv2.resize",
    ),
    # the cut is where the branches meet: a hit unpacks the percentiles from their stored
    # header, so nothing before the cut is computed
    "percentile-clip": Planned(cut="numpy.clip"),
    # three branches, each meeting again: the cut is last
    "unsharp-standardise": Planned(
        (
            "cv2.imread",
            "numpy.ndarray.astype",
            "cv2.GaussianBlur",
            "cv2.addWeighted",
            "numpy.ndarray.min",
            "numpy.ndarray.max",
            "numpy.ndarray.min",
            "operator.truediv",
            "numpy.ndarray.mean",
            "numpy.ndarray.std",
        ),
        whole=False,
        cut="operator.truediv",
        occurrence=1,
    ),
    # the edges' branch meets the image in the list np.dstack takes; the sample's own
    # constants (mean, std) are no values of the sample's data
    "edges-stacked": Planned(
        (
            "cv2.imread",
            "cv2.resize",
            "cv2.cvtColor",
            "cv2.Canny",
            "numpy.dstack",
            "numpy.ndarray.astype",
            "operator.truediv",
            "numpy.ndarray.transpose",
            "numpy.ndarray.astype",
            "torch.from_numpy",
        ),
        cut="torch.from_numpy",
    ),
    # ref=np.max keyed by its name; standardised, then cropped
    "librosa-mel": Planned(
        (
            "librosa.core.audio.load",
            "librosa.feature.spectral.melspectrogram",
            "librosa.core.spectrum.power_to_db",
            "numpy.ndarray.mean",
            "numpy.ndarray.std",
            "operator.truediv",
        ),
        cut="operator.truediv",
    ),
    # the table parsed, centred and scaled into the unit sphere (the scale a number np.max
    # returns), then jittered: the cut is the scaled table
    "numpy-loadtxt": Planned(
        (
            "numpy.loadtxt",
            "operator.getitem",
            "numpy.ndarray.mean",
            "operator.sub",
            "numpy.linalg.norm",
            "numpy.max",
            "operator.truediv",
        ),
        cut="operator.truediv",
    ),
    # the variable read by its name, resampled
    "scipy-loadmat": Planned(
        (
            "scipy.io.loadmat",
            "operator.getitem",
            "numpy.ndarray.astype",
            "scipy.signal.resample_poly",
        ),
        whole=False,
    ),
    # .to(torch.float32) and .clamp are steps; the methods writing in place, chained (each
    # returns the tensor it wrote into), end the chain
    "cv2-fromfile": Planned(
        cut="torch._C.TensorBase.clamp",
        stop="its value goes to 2 operations (torch._C.TensorBase.sub_, torch._C.TensorBase.div_)",
    ),
}
"""What the planner makes of the pipelines whose chain is not just cached."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> file_pipelines.Files:
    return file_pipelines.write_files(tmp_path_factory.mktemp("files"), n=8)


def _epochs(dataset: Dataset, workers: int, count: int = 2) -> list[list[torch.Tensor]]:
    """Every batch of ``count`` epochs, each epoch's random state seeded."""
    loader = DataLoader(dataset, batch_size=4, shuffle=False, num_workers=workers)
    out = []
    for epoch in range(count):
        random.seed(epoch)
        np.random.seed(epoch)
        torch.manual_seed(epoch)
        out.append([batch.clone() for batch, _ in loader])
    return out


_PLANS: dict[str, dict[str, Any]] = {}


def _plan(name: str, files: file_pipelines.Files, make: Make | None = None) -> dict[str, Any]:
    """The optimizer's plan for a pipeline (``make``: its data set, when not one of
    :data:`PIPELINES`), the store's costs measured (once per module)."""
    if name not in _PLANS:
        from codedag.optimize.manager import OptimizerManager
        from codedag.trace import trace_dataloader

        make = make or PIPELINES[name][0]
        loader = DataLoader(make(files), batch_size=4, shuffle=False)
        # Python's random is not traced: the cut stays before a random flip only when the traced
        # samples differ (with seed 0 some flip and some do not in every batch)
        random.seed(0)
        np.random.seed(0)
        tracer, _ = trace_dataloader(loader)
        manager = OptimizerManager(k=1, target_device="cpu", cache="auto")
        plan = manager.optimize(tracer.dag)["migration_plan"]
        # the cache alone: a call placed through torch (librosa's melspectrogram, where the
        # machine measures it faster) is equal within its tolerance only, not bit for bit
        plan["context_device_map"] = {}
        plan["calls"] = [{**c, "migrate": False, "device": "cpu"} for c in plan["calls"]]
        _PLANS[name] = plan
    return _PLANS[name]


def _migrator(plan: dict[str, Any], folder: Path) -> PipelineMigrator:
    store = StoreSettings(folder=folder, ram_budget_bytes=16 << 20)
    return PipelineMigrator(plan, guard=False, cache=CacheSettings(store=store, judge_after=0))


def _cached_epochs(
    plan: dict[str, Any], dataset: Dataset, workers: int, folder: Path, count: int = 2
) -> dict[str, Any]:
    """``count`` epochs of ``dataset`` with ``plan`` applied, each batch equal to the uncached
    run's bit for bit; the cache's statistics."""
    own = _epochs(dataset, workers, count)
    with _migrator(plan, folder) as migrator:
        got = _epochs(dataset, workers, count)
        stats: dict[str, Any] = migrator.get_stats()["cache"]
    for epoch, (mine, theirs) in enumerate(zip(got, own, strict=True)):
        for batch, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert torch.equal(a, b), f"epoch {epoch + 1}, batch {batch} differs"
    return stats


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", list(PIPELINES))
def test_a_file_sources_prefix_is_cached_and_read_back_bit_for_bit(
    name: str, workers: int, files: file_pipelines.Files, tmp_path: Path
) -> None:
    make, source = PIPELINES[name]
    plan = _plan(name, files)
    (chain,) = plan["cache"]["chains"]
    assert chain["source_function"] == source and chain["source_kind"] == "file"
    assert chain["cached"], chain["reason"]
    expected = PLANNED.get(name)
    if expected is not None:
        expected.check(chain)
    if name == "percentile-window":  # no cut at the percentiles the division reads again
        assert "numpy.percentile" not in {c["step"] for c in chain["candidates"]}
    if name == "scipy-zoom":  # SciPy is a library the cache patches: the zoom is a step
        assert [s.rsplit(".", 1)[-1] for s in chain["steps"][:2]] == ["load", "zoom"]
    if name in ("pil-bytes", "cv2-fromfile"):  # nothing random: the cut is the tensor's last
        assert chain["cut"]["step"].startswith("torch._C.TensorBase.")  # method, never patched
        assert not any(f.startswith("torch._C.") for f in chain["functions"])
    # a third epoch where the sample writes into what it received (``.sub_``): the values read
    # back in the second are not the store's own
    count = 3 if name == "cv2-fromfile" else 2
    stats = _cached_epochs(plan, make(files), workers, tmp_path / "cache", count)
    assert stats["misses"] == {"new": len(files.images)}, stats["diverged"]
    assert stats["hits"] == (count - 1) * len(files.images)  # later epochs read every one back


def test_a_statement_of_several_operations_is_cut_after_its_last(
    files: file_pipelines.Files, tmp_path: Path
) -> None:
    """``(img / 255.0 - MEAN) / STD`` is one step to the trace and three calls at run time: its
    cut is the second division, and a hit hands the whole normalization back."""
    name = "normalized-expression"
    plan = copy.deepcopy(_plan(name, files, lambda f: file_pipelines.Normalized(f.images)))
    (chain,) = plan["cache"]["chains"]
    assert chain["steps"][:4] == [
        "cv2.imread", "cv2.cvtColor", "cv2.resize", "operator.truediv",
    ]  # fmt: skip
    (division,) = [c for c in chain["candidates"] if c["step"] == "operator.truediv"]
    assert division["occurrence"] == 1 and division["shape"] == [20, 24, 3]
    chain["cut"], chain["cached"] = division, True  # whichever the timings chose
    for workers in (0, 2):
        stats = _cached_epochs(
            plan, file_pipelines.Normalized(files.images), workers, tmp_path / f"w{workers}"
        )
        n = len(files.images)
        assert stats["hits"] == n and stats["misses"] == {"new": n}, stats["diverged"]
        assert stats["hit_bytes"] == n * 20 * 24 * 3 * 8  # float64: the normalized image


def test_a_source_whose_other_results_come_from_the_file_is_not_a_cut(
    files: file_pipelines.Files,
) -> None:
    plan = _plan("soundfile-raw", files, lambda f: file_pipelines.RawClips(f.clips))
    (chain,) = plan["cache"]["chains"]
    assert not chain["cached"] and chain["candidates"] == []
    assert chain["reason"] == (
        "soundfile.read's other results come from the file, so the call runs in every epoch, "
        "and the chain has no value after it; cut ends before operator.getitem: it follows a "
        "random draw (random.randint; its arguments differ between samples)"
    )


def _error(dataset: Dataset, index: int) -> tuple[type, str]:
    try:
        dataset[index]
    except Exception as error:
        return type(error), str(error)
    return type(None), ""


@pytest.mark.parametrize("name", ["pil-with", "librosa-load", "numpy-load"])
@pytest.mark.parametrize("change", ["removed", "shrunk", "unreadable"])
def test_a_changed_source_file_gives_the_uncached_error_and_nothing_stale(
    name: str, change: str, files: file_pipelines.Files, tmp_path: Path
) -> None:
    make = PIPELINES[name][0]
    mine = file_pipelines.write_files(tmp_path / "files", n=4, seed=1)
    dataset = make(mine)
    plan = _plan(name, files)
    with _migrator(plan, tmp_path / "cache") as migrator:
        first = _epochs(dataset, 0, count=1)
        path = dataset.paths[0]
        if change == "removed":
            os.remove(path)
        elif change == "shrunk":
            with open(path, "r+b") as handle:
                handle.truncate(os.path.getsize(path) // 3)
        else:
            os.chmod(path, 0)
        cached = [_error(dataset, 0), _error(dataset, 1)]
        second = None if cached[0][0] is not type(None) else _epochs(dataset, 0, count=1)
        stats = migrator.get_stats()["cache"]
    assert stats["hits"] >= 1  # the unchanged file was read back
    plain = [_error(dataset, 0), _error(dataset, 1)]
    assert cached == plain
    if second is not None:  # the file is still readable (as root): its value is recomputed
        plain_epoch = _epochs(dataset, 0, count=1)[0]
        assert all(torch.equal(a, b) for a, b in zip(second[0], plain_epoch, strict=True))
    assert first


def test_a_chain_no_epoch_can_cache_is_given_up_with_one_warning(
    files: file_pipelines.Files, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from codedag.migrate.cache.session import NEVER_CACHED_AFTER

    paths = files.images * 3  # more samples than are tried
    assert len(paths) > NEVER_CACHED_AFTER
    loader = DataLoader(file_pipelines.Buffered(paths), batch_size=4)
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    tracer, _ = trace_dataloader(loader)
    plan = OptimizerManager(k=1, target_device="cpu", cache="auto").optimize(tracer.dag)
    plan = plan["migration_plan"]
    (chain,) = plan["cache"]["chains"]
    assert chain["cached"] and chain["source_function"] == "PIL.Image.open"
    own = [batch for batch, _ in loader]
    with caplog.at_level("WARNING"), _migrator(plan, tmp_path / "cache") as migrator:
        got = [batch for epoch in range(2) for batch, _ in loader]
        stats = migrator.get_stats()["cache"]
    assert all(torch.equal(a, b) for a, b in zip(got, own * 2, strict=True))
    warnings = [r.getMessage() for r in caplog.records if "can be cached" in r.getMessage()]
    assert len(warnings) == 1
    assert f"none of its first {NEVER_CACHED_AFTER} samples" in warnings[0]
    assert "has no stable identity" in warnings[0]
    assert stats["misses"] == {"source": NEVER_CACHED_AFTER} and stats["stored"] == 0


def _row_reversed(row: np.ndarray) -> np.ndarray:
    return row[::-1]


class _Filtered(Dataset):
    """Grey, smoothed by a filter class PIL names (``ImageFilter.SMOOTH``), then each row
    reversed by the script's own function through ``np.apply_along_axis``, or not."""

    def __init__(self, paths: list[str], reversed_rows: bool) -> None:
        self.paths, self.reversed_rows = paths, reversed_rows

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image, ImageFilter

        im = Image.open(self.paths[index]).convert("L").filter(ImageFilter.SMOOTH)
        image = np.asarray(im)
        if self.reversed_rows:
            image = np.apply_along_axis(_row_reversed, 1, image)
        return torch.from_numpy(image.copy()), index


def _filtered_plan(dataset: Dataset) -> dict[str, Any]:
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4))
    plan = OptimizerManager(k=1, target_device="cpu", cache="auto").optimize(tracer.dag)
    return plan["migration_plan"]


def test_a_step_taking_a_library_class_is_keyed_by_its_name(
    files: file_pipelines.Files, tmp_path: Path
) -> None:
    dataset = _Filtered(files.images, reversed_rows=False)
    plan = _filtered_plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert chain["cached"] and "PIL.Image.Image.filter" in chain["steps"], chain["reason"]
    stats = _cached_epochs(plan, dataset, 0, tmp_path / "cache")
    assert stats["hits"] == len(files.images), stats["misses"]


def test_a_step_whose_arguments_no_key_holds_gives_its_chain_up_with_one_warning(
    files: file_pipelines.Files, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from codedag.migrate.cache.session import NEVER_CACHED_AFTER

    dataset = _Filtered(files.images * 3, reversed_rows=True)  # more samples than are tried
    assert len(dataset) > NEVER_CACHED_AFTER
    plan = _filtered_plan(dataset)
    (chain,) = plan["cache"]["chains"]
    # the per-row Python loop is most of a sample: the cut is after it
    assert chain["cached"], chain["reason"]
    assert chain["steps"].index("numpy.apply_along_axis") <= chain["cut"]["position"]
    with caplog.at_level("WARNING"):
        stats = _cached_epochs(plan, dataset, 0, tmp_path / "cache")
    warnings = [r.getMessage() for r in caplog.records if "can be cached" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "numpy.apply_along_axis's arguments: an argument of type function" in warnings[0]
    assert stats["misses"] == {"arguments": NEVER_CACHED_AFTER}, stats
    assert stats["stored"] == 0


class _Resized(Dataset):
    """``cv2.imread`` then a resize to ``size``: two of them are the same pipeline before and
    after its code was edited."""

    def __init__(self, paths: list[str], size: int) -> None:
        self.paths, self.size = paths, size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        image = cv2.resize(cv2.imread(self.paths[index]), (self.size, self.size))
        return torch.from_numpy(image), index


def test_an_edited_pipeline_over_the_same_files_is_cached_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import cv2

    from codedag.migrate.cache.session import UNFOUND_AFTER
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    rng = np.random.default_rng(0)
    paths = [str(tmp_path / f"{i}.png") for i in range(UNFOUND_AFTER + 4)]
    for path in paths:  # more files than the misses after which a chain would be given up
        # noise that takes several times longer to decode than its resized value takes to
        # store: the plan caches it however busy the machine is
        cv2.imwrite(path, rng.integers(0, 255, (160, 192, 3), dtype=np.uint8))
    store = tmp_path / "cache"
    for run, size in enumerate((24, 40)):  # the second run: the resize size edited
        loader = DataLoader(_Resized(paths, size), batch_size=4)
        tracer, _ = trace_dataloader(loader)
        plan = OptimizerManager(k=1, target_device="cpu", cache="auto").optimize(tracer.dag)
        plan = plan["migration_plan"]
        own = [batch for batch, _ in loader]
        with caplog.at_level("WARNING"), _migrator(plan, store) as migrator:
            got = [batch for _epoch in range(2) for batch, _ in loader]
            stats = migrator.get_stats()["cache"]
        assert all(torch.equal(a, b) for a, b in zip(got, own * 2, strict=True))
        # the first run's headers of the same files are an earlier run's: not this chain's
        assert stats["hits"] == len(paths), (run, stats["misses"])
    assert not [r for r in caplog.records if "did not find their value" in r.getMessage()]


def test_two_source_calls_of_one_file_have_two_keys(files: file_pipelines.Files) -> None:
    from codedag.migrate.cache.keys import source_key

    path = files.images[0]
    assert source_key("prefix0", "cv2.imread", path) != source_key(
        "prefix0", "PIL.Image.open", path
    )
    assert source_key("prefix0", "cv2.imread", path) == source_key("prefix0", "cv2.imread", path)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_image_and_its_mask_read_by_two_lines_are_two_chains(
    workers: int, files: file_pipelines.Files, tmp_path: Path
) -> None:
    # one caller reads both with cv2.imread: grouped by function alone, the chains shared only
    # the read (the image is converted before its resize, the mask is not), and the cut was the
    # decoded file, three times the resized value's bytes
    make: Make = lambda f: file_pipelines.Segmented(f.images)  # noqa: E731
    plan = copy.deepcopy(_plan("segmented", files, make))
    chains = plan["cache"]["chains"]
    assert [c["steps"] for c in chains] == [
        ["cv2.imread", "cv2.cvtColor", "cv2.resize"],
        ["cv2.imread", "cv2.resize"],
    ]
    lines = [c["lines"] for c in chains]
    assert all(len(found) == 1 for found in lines) and lines[0] != lines[1]
    for chain in chains:  # where the cut goes is measured (the mask's resize takes microseconds)
        assert chain["candidates"][-1]["step"] == "cv2.resize"
        chain.update(cut=chain["candidates"][-1], cached=True, share=1.0)
    stats = _cached_epochs(plan, make(files), workers, tmp_path / "cache")
    assert stats["hits"] == 2 * len(files.images), stats["diverged"]


def test_reads_through_a_decorators_shared_wrapper_are_chains_of_their_own_lines(
    files: file_pipelines.Files, tmp_path: Path
) -> None:
    # the frame that makes scikit-image's imread call is its decorator's wrapper, the same for
    # both reads: the calls are made where the wrapper was called, on two lines
    make: Make = lambda f: file_pipelines.SkimageSegmented(f.images)  # noqa: E731
    plan = _plan("skimage-segmented", files, make)
    chains = plan["cache"]["chains"]
    assert [c["steps"][:2] for c in chains] == [
        ["skimage.io.imread", "operator.getitem"],
        ["skimage.io.imread", "skimage.transform.resize"],
    ]
    lines = [c["lines"] for c in chains]
    assert all(len(found) == 1 for found in lines) and lines[0] != lines[1]
    assert all(c["cached"] for c in chains), [c["reason"] for c in chains]
    stats = _cached_epochs(plan, make(files), 0, tmp_path / "cache")
    assert stats["hits"] == 2 * len(files.images), stats["diverged"]


def test_a_miss_after_a_source_that_ran_for_its_other_items_is_new(
    files: file_pipelines.Files, tmp_path: Path
) -> None:
    """``soundfile.read`` runs for its rate where the store holds values of the chain, so the
    header of its data is computed, not read: a miss at a cut right after it is a new value,
    not one seen before and not stored (counted so whenever another worker had stored a value
    of the chain first)."""
    plan = _plan("soundfile-mono", files)
    (chain,) = plan["cache"]["chains"]
    # librosa.resample's value is new to the sample, though its last call (made inside it)
    # returns the array it was given: the resampled clip is the cut
    assert chain["cut"]["step"] == "librosa.core.audio.resample", chain["reason"]
    dataset = file_pipelines.MonoClips(files.clips)
    with _migrator(plan, tmp_path / "cache") as migrator:
        for _ in DataLoader(torch.utils.data.Subset(dataset, [0]), batch_size=1):
            pass  # one value stored: the chain is no longer cold
        migrator.cache.session.writer.flush()
        for _ in DataLoader(dataset, batch_size=4):
            pass
        stats = migrator.get_stats()["cache"]
    assert stats["hits"] == 1
    assert stats["misses"] == {"new": len(files.clips)}, stats["misses"]


class Labelled(Dataset):  # type: ignore[type-arg]
    """An image, its depth (smoothed) and its label in one ``.npz`` archive each, read by key;
    ``in_memory``: the archive's bytes read first and loaded from an ``io.BytesIO`` (no file to
    key it by); ``closed``: the image read in a ``with`` block, which closes the archive before
    anything is computed from it."""

    def __init__(self, paths: list[Path], in_memory: bool = False, closed: bool = False) -> None:
        self.paths = paths
        self.in_memory = in_memory
        self.closed = closed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import io

        import cv2

        path = self.paths[index]
        if self.closed:
            with np.load(path) as archive:
                image = archive["image"]
            image = cv2.resize(image, (20, 24)).astype(np.float32) / 255.0
            return torch.from_numpy(image), index
        archive = np.load(io.BytesIO(path.read_bytes()) if self.in_memory else path)
        image = archive["image"].astype(np.float32) / 255.0
        image = (image - 0.5) * image.std()
        # smoothed: computing it must clearly cost more than storing it and reading it back,
        # which the plan measures (a division alone came within 3 % of that on a busy machine)
        depth = cv2.GaussianBlur(archive["depth"], (7, 7), 0).astype(np.float32) / 255.0
        return torch.from_numpy(image + depth), int(archive["label"])


def _archives(folder: Path, n: int = 8) -> list[Path]:
    folder.mkdir()
    rng = np.random.default_rng(3)
    paths = [folder / f"{i}.npz" for i in range(n)]
    for i, path in enumerate(paths):
        np.savez(
            path,
            image=rng.integers(0, 255, (48, 40, 3), dtype=np.uint8),
            depth=rng.integers(0, 255, (48, 40, 3), dtype=np.uint8),
            label=np.array(i),
        )
    return paths


@pytest.mark.parametrize("workers", [0, 2])
def test_arrays_read_by_key_from_an_archive_are_cached_each(workers: int, tmp_path: Path) -> None:
    """Each ``archive[key]`` starts a chain, keyed by the archive's file and the key: the
    image's and the depth's normalisation are read back in the second epoch, and the label (a
    0-d array) is too where storing it pays (reading a tiny array costs about what storing it
    does: the measured costs decide)."""
    paths = _archives(tmp_path / "archives")
    plan = _plan(
        "numpy-npz", file_pipelines.Files([], [], [], [], [], []), lambda f: Labelled(paths)
    )
    reads = [c for c in plan["cache"]["chains"] if c["source_function"].endswith("__getitem__")]
    assert len(reads) == 3
    arrays = [c for c in reads if "truediv" in " ".join(c["steps"])]
    assert len(arrays) == 2 and all(c["cached"] for c in arrays), [c["reason"] for c in arrays]
    cached = sum(c["cached"] for c in reads)
    stats = _cached_epochs(plan, Labelled(paths), workers, tmp_path / "cache")
    assert stats["misses"] == {"new": cached * len(paths)}, stats["diverged"]
    assert stats["hits"] == cached * len(paths)


def test_an_archive_loaded_from_bytes_is_read_as_it_is(tmp_path: Path) -> None:
    """An archive opened from an ``io.BytesIO`` holds no file: nothing keys its arrays, and the
    samples are computed as without the cache."""
    paths = _archives(tmp_path / "archives")
    plan = _plan(
        "numpy-npz", file_pipelines.Files([], [], [], [], [], []), lambda f: Labelled(paths)
    )
    stats = _cached_epochs(plan, Labelled(paths, in_memory=True), 0, tmp_path / "cache")
    assert stats["hits"] == 0 and stats["stored"] == 0


@pytest.mark.parametrize("workers", [0, 2])
def test_an_array_read_from_an_archive_closed_before_the_cut_is_read_back(
    workers: int, tmp_path: Path
) -> None:
    """``with np.load(path) as archive: image = archive["image"]``, resized after the block:
    the read runs at once, while the archive is open (a read waiting for the cut found it
    closed, the sample failed and ran again without the cache, and the chain was given up),
    and the calls after it are read back in the second epoch."""
    paths = _archives(tmp_path / "archives")
    plan = _plan(
        "numpy-npz-closed",
        file_pipelines.Files([], [], [], [], [], []),
        lambda f: Labelled(paths, closed=True),
    )
    (chain,) = [c for c in plan["cache"]["chains"] if c["cached"]]
    assert chain["source_function"].endswith("NpzFile.__getitem__")
    assert chain["steps"][1] == "cv2.resize", chain["steps"]
    stats = _cached_epochs(plan, Labelled(paths, closed=True), workers, tmp_path / "cache")
    assert stats["misses"] == {"new": len(paths)}, stats["diverged"]
    assert stats["hits"] == len(paths)


@pytest.mark.parametrize("closed", [False, True])
def test_an_archives_array_is_read_at_a_miss_only_even_after_its_archive_closed(
    closed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An array read by key waits for its chain's cut: a hit opens no member of the archive,
    and a miss with a warm store reads the array then, from the archive opened again from its
    path where the sample's ``with`` block closed it first. A first epoch over half the
    archives, then two over all of them, each batch the uncached run's bit for bit."""
    paths = _archives(tmp_path / "archives")
    name = "numpy-npz-closed" if closed else "numpy-npz"
    files = file_pipelines.Files([], [], [], [], [], [])
    plan = _plan(name, files, lambda f: Labelled(paths, closed=closed))
    dataset = Labelled(paths, closed=closed)
    loaders = [DataLoader(d, batch_size=4) for d in (Subset(dataset, range(4)), dataset, dataset)]
    own = [[batch.clone() for batch, _ in loader] for loader in loaders]
    opened: list[Counter[str]] = []
    open_member = zipfile.ZipFile.open

    def counted(archive: zipfile.ZipFile, member: Any, *args: Any, **kwargs: Any) -> Any:
        opened[-1][str(member)] += 1
        return open_member(archive, member, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", counted)
    with _migrator(plan, tmp_path / "cache") as migrator:
        got = []
        for loader in loaders:
            opened.append(Counter())
            got.append([batch.clone() for batch, _ in loader])
        tables = migrator.get_stats()["tables"]
    for mine, theirs in zip(got, own, strict=True):
        assert all(map(torch.equal, mine, theirs))
    assert [reads["image.npy"] for reads in opened] == [4, 4, 0]
    # a cut ending a table run (``(image - 0.5) * image.std()``) stores the run's value computed
    assert tables.get("errors", 0) == 0, tables


class Boxes(Dataset):  # type: ignore[type-arg]
    """Two crops of every image, each its own sample (boxes from a table, as detection data
    sets give them): consecutive samples share their source file."""

    def __init__(self, paths: list[str]) -> None:
        self.rows = [(p, (2 * k, 3 * k, 16 + 2 * k, 20 + k)) for p in paths for k in (0, 1)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        path, (x1, y1, x2, y2) = self.rows[index]
        image = cv2.imread(path)
        crop = cv2.resize(image[y1:y2, x1:x2], (12, 12)).astype(np.float32) / 255.0
        return torch.from_numpy(crop), index


def test_samples_sharing_a_source_file_are_cached_each(tmp_path: Path) -> None:
    """A crop whose image another sample of the epoch read first finds that image's header
    stored, and its own value not (a different crop): that is no sign of a key that changes
    from epoch to epoch, so the chain is not given up in the first epoch and the second reads
    every crop back."""
    import cv2

    paths = []
    for i in range(18):  # more pairs than the samples it takes to give a chain up
        path = tmp_path / f"{i}.png"
        cv2.imwrite(str(path), np.full((40, 48, 3), 10 * i, np.uint8))
        paths.append(str(path))
    plan = _plan("boxes", file_pipelines.Files([], [], [], [], [], []), lambda f: Boxes(paths))
    (chain,) = [c for c in plan["cache"]["chains"] if c["cached"]]
    assert chain["source_function"] == "cv2.imread"
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    dataset = Boxes(paths)
    own = _epochs(dataset, 0)
    # judge_after=0: storing is never judged against its measured cost (on a busy machine
    # storing these small crops may measure dearer than computing them); the rule for values
    # not found still applies
    settings = CacheSettings(store=store, judge_after=0)
    with PipelineMigrator(plan, guard=False, cache=settings) as migrator:
        got = _epochs(dataset, 0)
        stats = migrator.get_stats()["cache"]
    assert all(torch.equal(a, b) for e, f in zip(got, own) for a, b in zip(e, f))
    assert stats["unpaid"] == 0
    assert stats["hits"] == len(dataset), stats["misses"]
