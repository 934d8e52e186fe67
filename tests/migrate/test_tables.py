"""Element-wise runs through lookup tables at run time: equal to the calls, wherever they go."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from PIL import Image
from prefix_support import FileDataset, cache_section, equal, write_images
from torch.utils.data import DataLoader, Dataset

import codedag.migrate.tables.lookup as lookup
import codedag.migrate.tables.run_values as run_values
import codedag.migrate.tables.runtime as runtime
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.tables.run_values import RunArray, RunValue
from codedag.migrate.tables.runtime import RunSpec, TablesRuntime

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
MATRIX = cv2.getRotationMatrix2D((16.0, 16.0), 10.0, 1.05)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    lookup.reset()
    run_values.reset()
    yield
    lookup.reset()
    run_values.reset()


def _image(seed: int = 0, shape: tuple[int, ...] = (32, 32, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _normalize(image: Any) -> Any:
    return (image.astype(np.float32) / 255.0 - MEAN) / STD


def _same(a: Any, b: np.ndarray) -> bool:
    a = np.asarray(a)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- the values ------------------------------------------------------------------------------


def test_a_run_is_pending_answers_its_header_and_equals_the_calls() -> None:
    image = _image()
    run = _normalize(image.view(RunArray))
    assert type(run) is RunValue
    assert isinstance(run, np.ndarray)  # user code's isinstance checks take the same branch
    assert run.shape == image.shape and run.dtype == np.float32 and run.ndim == 3
    assert run._value is run_values._PENDING  # the header came from the table, nothing computed
    assert _same(np.transpose(run, (2, 0, 1)), np.transpose(_normalize(image), (2, 0, 1)))


def test_runs_are_gathered_once_the_table_is_chosen_and_stay_exact() -> None:
    images = [_image(seed) for seed in range(lookup.TRIALS + 3)]
    for image in images[: lookup.TRIALS]:
        assert _same(_normalize(image.view(RunArray)), _normalize(image))
    for table in lookup._tables.values():
        if table is not None:
            table.use = True  # whatever the trials' timing said: the gather must be exact
    for image in images[lookup.TRIALS :]:
        assert _same(_normalize(image.view(RunArray)), _normalize(image))
    counts = run_values.counts()
    assert counts["trials"] == lookup.TRIALS and counts["mismatches"] == 0
    assert counts["gathered"] == 3 and counts["runs"] == len(images)


@pytest.mark.parametrize(
    "use",
    [
        lambda r: r**2,
        lambda r: r // 2,
        lambda r: np.exp(r),
        lambda r: r.sum(axis=2),
        lambda r: r[4:9, ::2],
        lambda r: r.copy(),
        lambda r: np.clip(r, -1.0, 1.0),
        lambda r: r.astype(np.float64) * 3,
        lambda r: 1.0 - r,
        lambda r: -abs(r) + 2,
    ],
    ids=["pow", "floordiv", "exp", "sum", "slice", "copy", "clip", "astype", "rsub", "unary"],
)
def test_any_use_of_a_run_value_equals_the_calls(use: Any) -> None:
    image = _image(3)
    assert _same(use(_normalize(image.view(RunArray))), use(_normalize(image)))


def test_in_place_operators_write_into_the_computed_value() -> None:
    image = _image(4)
    run = image.view(RunArray).astype(np.float32)
    run /= 255.0
    expected = image.astype(np.float32)
    expected /= 255.0
    assert _same(run, expected)


def test_a_write_into_the_image_after_a_run_started_does_not_reach_the_run() -> None:
    image = _image(5)
    expected = _normalize(image)
    source = image.view(RunArray)
    run = _normalize(source)
    source[:] = 0  # the run keeps its own copy of the uint8 array, as NumPy's result would be
    assert _same(run, expected)


def test_a_run_array_behaves_as_a_plain_array_elsewhere() -> None:
    image = _image(6)
    source = image.view(RunArray)
    assert type(source > 3) is np.ndarray and _same(source > 3, image > 3)
    assert type(pickle.loads(pickle.dumps(source))) is np.ndarray
    assert _same(cv2.flip(source, 1), cv2.flip(image, 1))
    assert _same(source.astype(np.uint8, copy=True) + 1, image + 1)  # a uint8 result, no run


def test_constants_that_vary_across_pixels_are_computed_by_the_calls() -> None:
    image = _image(7)
    ramp = np.linspace(0, 1, image.size, dtype=np.float32).reshape(image.shape)
    result = image.view(RunArray).astype(np.float32) * ramp
    assert type(result) is np.ndarray
    assert _same(result, image.astype(np.float32) * ramp)


def test_division_by_zero_is_left_to_numpy() -> None:
    image = _image(8)
    with np.errstate(all="ignore"):
        assert _same(image.view(RunArray).astype(np.float32) / 0.0, image.astype(np.float32) / 0.0)


# -- in a DataLoader -------------------------------------------------------------------------


class Normalized(Dataset):
    """A warp, then the usual normalization and CHW, each sample from its own seed."""

    def __init__(self, n: int = 12, broken_from: int | None = None) -> None:
        self.n = n
        self.broken_from = broken_from  # samples that blur the float image (an unguarded cv2)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = _image(index)
        image = cv2.warpAffine(image, MATRIX, (32, 32), flags=cv2.INTER_LINEAR)
        noise = float(np.random.random())  # a global draw: a retried batch must redraw it
        image = (image.astype(np.float32) / 255.0 - MEAN) / STD
        if self.broken_from is not None and index >= self.broken_from:
            image = cv2.GaussianBlur(image, (3, 3), 0)
        image = np.transpose(image, (2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(image)) + noise, index


class PilNormalized(FileDataset):
    """A torchvision-style recipe's end: ``np.asarray(image, dtype=np.float32) / 255``."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = Image.open(self.paths[index]).convert("RGB")
        x = np.asarray(image, dtype=np.float32) / 255.0
        x = (x - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1))), index


def _plan(producer: str, caller: str, guards: list[str], cache: bool = False) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "context_device_map": {},
        "tables": {
            "runs": [{"producer": producer, "callers": [caller], "calls": []}],
            "guards": guards,
        },
    }
    if cache:
        plan["cache"] = cache_section()
    return plan


NORMALIZED = _plan("cv2.warpAffine", f"{__name__}.Normalized.__getitem__", ["torch.from_numpy"])


def _epoch(
    dataset: Dataset, workers: int = 0, seed: int = 0, start: str | None = None
) -> list[torch.Tensor]:
    np.random.seed(seed)
    torch.manual_seed(seed)
    loader = DataLoader(
        dataset, batch_size=4, num_workers=workers, shuffle=False, multiprocessing_context=start
    )
    return [images.clone() for images, _ in loader]


@pytest.mark.parametrize(("workers", "start"), [(0, None), (2, None), (1, "spawn")])
def test_a_loader_gives_the_same_batches_with_runs_counted_in_every_process(
    workers: int, start: str | None
) -> None:
    # a spawned worker applies the plan itself and reports its counts through a file
    dataset = Normalized()
    expected = _epoch(dataset, workers)
    migrator = PipelineMigrator(NORMALIZED)
    with migrator:
        got = _epoch(dataset, workers, start=start)
    stats = migrator.get_stats()["tables"]
    assert equal(got, expected)
    assert stats["producers"] == ["cv2.warpAffine"]
    assert stats["runs"] == len(dataset) and stats["errors"] == 0
    assert stats["gathered"] + stats["computed"] == len(dataset)
    assert stats["mismatches"] == 0


def test_outside_the_loader_and_outside_the_caller_nothing_changes() -> None:
    with PipelineMigrator(NORMALIZED):
        warped = cv2.warpAffine(_image(), MATRIX, (32, 32))
        assert type(warped) is np.ndarray
    assert run_values.counts()["runs"] == 0


def test_switched_off_applies_nothing() -> None:
    migrator = PipelineMigrator(NORMALIZED, tables=False)
    with migrator:
        _epoch(Normalized(4))
        assert migrator.get_stats()["tables"] == {"enabled": False}
    assert run_values.counts()["runs"] == 0


def test_a_failing_batch_runs_again_without_tables_and_runs_stop_after_three() -> None:
    dataset = Normalized(n=24, broken_from=8)  # batches 3 to 6 blur a run value
    expected = _epoch(dataset)
    migrator = PipelineMigrator(NORMALIZED)
    with migrator:
        got = _epoch(dataset)
        stats = migrator.get_stats()["tables"]
    assert equal(got, expected)  # the same random draws in the batches that ran again
    assert stats["errors"] == runtime.GIVE_UP_AFTER
    # 8 samples before the failures, and one run per failing batch before it failed
    assert stats["runs"] == 8 + 3 * 1


def test_a_pil_image_converted_with_a_dtype_starts_a_run(tmp_path: Path) -> None:
    dataset = PilNormalized(write_images(tmp_path, n=8))
    expected = _epoch(dataset)
    plan = _plan("numpy.asarray", f"{__name__}.PilNormalized.__getitem__", ["torch.from_numpy"])
    migrator = PipelineMigrator(plan)
    with migrator:
        got = _epoch(dataset)
        stats = migrator.get_stats()["tables"]
    assert equal(got, expected)
    assert stats["runs"] == 8 and stats["errors"] == 0


class WarpedFiles(FileDataset):
    """The demo's shape: a file read, resized and converted (cached), then a random warp and
    the normalization (a run)."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (32, 32), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        angle = float(np.random.uniform(-10, 10))
        matrix = cv2.getRotationMatrix2D((16.0, 16.0), angle, 1.0)
        image = cv2.warpAffine(image, matrix, (32, 32))
        image = (image.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), index


def test_tables_and_the_prefix_cache_share_the_functions_both_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import codedag.migrate.random_states as random_states
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    taken = []
    capture = random_states.capture
    monkeypatch.setattr(random_states, "capture", lambda: taken.append(1) or capture())
    dataset = WarpedFiles(write_images(tmp_path / "images"))
    expected = [_epoch(dataset, seed=epoch) for epoch in range(2)]
    caller = f"{__name__}.WarpedFiles.__getitem__"
    plan = _plan("cv2.warpAffine", caller, ["torch.from_numpy"], cache=True)
    chain = plan["cache"]["chains"][0]
    chain["callers"] = [caller]
    chain["guards"] = ["cv2.getRotationMatrix2D", "cv2.warpAffine"]  # the cache's, and a producer
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=64 << 20)
    migrator = PipelineMigrator(plan, cache=CacheSettings(store=store, judge_after=0))
    with migrator:
        got = [_epoch(dataset, seed=epoch) for epoch in range(2)]
        stats = migrator.get_stats()
    assert all(equal(a, b) for a, b in zip(got, expected))
    assert stats["cache"]["hits"] == len(dataset)  # the second epoch read the prefix back
    assert stats["tables"]["runs"] == 2 * len(dataset) and stats["tables"]["errors"] == 0
    assert len(taken) == 2 * len(dataset) // 4  # the random states, once per batch for both


def test_the_tables_layer_only_what_they_replace() -> None:
    tables = TablesRuntime([RunSpec("cv2.warpAffine", ("x",))], ["torch.from_numpy"])
    assert tables.functions() == ["cv2.warpAffine", "torch.from_numpy"]
    assert tables.hooks() == [runtime.FETCH]
    assert tables.layer("cv2.warpAffine", cv2.warpAffine) is not cv2.warpAffine
    assert tables.layer("cv2.resize", cv2.resize) is cv2.resize


def test_constants_that_compare_equal_but_differ_in_bits_find_their_own_tables() -> None:
    image = _image(9)
    for constant in (0.0, -0.0, np.float32(-0.0), np.float32(0.0), 0, False):
        for _ in range(lookup.TRIALS + 1):
            got = image.view(RunArray).astype(np.float32) * constant
            assert _same(got, image.astype(np.float32) * constant)


def test_a_dtype_given_as_a_type_or_a_dtype_or_a_string_casts_the_same() -> None:
    image = _image(10)
    for dtype in (np.float64, np.dtype("float64"), "float64", np.float16):
        for _ in range(2):
            assert _same(image.view(RunArray).astype(dtype) / 3, image.astype(dtype) / 3)


class ReturnsFloats(Dataset):
    """A sample that returns its normalized array as it is: ``default_collate`` converts it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> np.ndarray:
        image = cv2.warpAffine(_image(index), MATRIX, (32, 32))
        return image.astype(np.float32) / 255.0 - MEAN


def test_a_run_value_returned_by_a_sample_is_collated_as_its_array() -> None:
    from codedag.optimize.tables import ALWAYS_GUARDED

    dataset = ReturnsFloats()
    expected = [b.clone() for b in DataLoader(dataset, batch_size=4)]
    plan = _plan("cv2.warpAffine", f"{__name__}.ReturnsFloats.__getitem__", list(ALWAYS_GUARDED))
    migrator = PipelineMigrator(plan)
    with migrator, warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it builds a tensor element by element
        got = [b.clone() for b in DataLoader(dataset, batch_size=4)]
        stats = migrator.get_stats()["tables"]
    assert equal(got, expected)
    assert stats["runs"] == 8 and stats["errors"] == 0


def test_a_conversion_of_an_array_with_a_dtype_copies_what_user_code_may_write_into() -> None:
    from codedag.migrate.tables.runtime import _converted

    image = _image(11)
    expected = np.asarray(image, dtype=np.float32) / 3
    run_values.state.fetching += 1
    try:
        for call in ((image,), {"dtype": np.float32}), ((image, np.float32), {}):
            run = _converted(np.asarray, *call)
            assert type(run) is RunValue
            result = run / 3
            image_backup = image.copy()
            image[:] = 0  # after the run started, before it is computed
            assert _same(result, expected)
            image[:] = image_backup
        assert _converted(np.asarray, (image,), {"dtype": np.uint8}) is None
        assert _converted(np.asarray, (image,), {"dtype": None}) is None
        assert _converted(np.asarray, (image,), {"order": "C"}) is None
    finally:
        run_values.state.fetching -= 1


def test_a_constant_written_into_after_the_call_does_not_reach_the_run() -> None:
    image = _image(12)
    mean = MEAN.copy()
    expected = image.astype(np.float32) - MEAN
    for _ in range(lookup.TRIALS + 2):  # on trial (the calls run) and gathered alike
        run = image.view(RunArray).astype(np.float32) - mean
        mean[:] = 0
        assert _same(run, expected)
        mean[:] = MEAN


def test_a_write_into_an_earlier_value_of_the_run_does_not_reach_a_later_one() -> None:
    image = _image(13)
    scaled = image.astype(np.float32) / 255.0
    expected = scaled - MEAN
    for _ in range(lookup.TRIALS + 2):
        earlier = image.view(RunArray).astype(np.float32) / 255.0
        later = earlier - MEAN
        earlier[0, 0, 0] = 7.0  # computes the earlier value and writes into it, as NumPy would
        assert float(earlier[0, 0, 0]) == 7.0
        assert _same(later, expected)


def test_a_conversion_that_starts_no_run_converts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from codedag.migrate.tables.runtime import _converted

    floats = np.linspace(0, 1, 12, dtype=np.float64).reshape(2, 2, 3)
    calls: list[Any] = []

    def counting(value: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(value)
        return np.asarray(value, *args, **kwargs)

    converted = _converted(counting, (floats.tolist(),), {"dtype": np.float32})
    assert _same(converted, np.asarray(floats.tolist(), dtype=np.float32))
    assert len(calls) == 2 and isinstance(calls[1], np.ndarray)  # the list is read once


def test_each_plan_applied_counts_only_its_own_runs() -> None:
    dataset = Normalized()
    for _ in range(2):  # the second plan in this process does not count the first's runs
        with PipelineMigrator(NORMALIZED) as migrator:
            _epoch(dataset)
        assert migrator.get_stats()["tables"]["runs"] == len(dataset)


def test_applying_tables_imports_their_gatherer_before_workers_fork() -> None:
    # a NumPy pipeline never imports cv2: each worker started afresh would, at its first table
    code = (
        "import sys\n"
        "from codedag.migrate.tables.runtime import RunSpec, TablesRuntime\n"
        "tables = TablesRuntime([RunSpec('numpy.asarray', ())])\n"
        "assert 'cv2' not in sys.modules\n"
        "tables.apply()\n"
        "try:\n"
        "    assert 'cv2' in sys.modules\n"
        "finally:\n"
        "    tables.restore()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
