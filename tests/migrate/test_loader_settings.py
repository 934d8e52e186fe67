"""A plan's loader section applied to DataLoaders: defaults set, explicit settings kept, threads
read back inside workers, the program's worker_init_fn kept, everything restored."""

from __future__ import annotations

import logging
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from loader_support import FreeDataset, ThreadReport, user_init
from torch.utils.data import DataLoader

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.loader_settings import LoaderSettingsPatch
from codedag.migrate.worker_threads import WorkerThreads
from codedag.plan import LoaderSection, LoaderSettings

ORIGINAL_INIT = DataLoader.__init__


def _section(
    dataset: type | None = None, draws: list[str] | None = None, **chosen: Any
) -> LoaderSection:
    """A section changing ``chosen``; its samples draw nothing unless ``draws`` says so."""
    settings = LoaderSettings(**chosen)
    changed = list(settings.differences(LoaderSettings()))
    name = None if dataset is None else f"{dataset.__module__}.{dataset.__qualname__}"
    return LoaderSection(
        chosen=settings,
        yours=LoaderSettings(),
        changed=changed,
        dataset=name,
        draws=[] if draws is None else draws,
    )


def _plan(section: LoaderSection) -> dict[str, Any]:
    return {"schema_version": 2, "context_device_map": {}, "loader": section.model_dump()}


def test_settings_the_program_left_out_are_set_and_restore_puts_init_back() -> None:
    patch = LoaderSettingsPatch(
        _section(num_workers=2, threads=1, prefetch_factor=4, persistent_workers=True),
        cuda_available=False,
    )
    patch.apply()
    try:
        assert DataLoader.__init__ is not ORIGINAL_INIT
        loader = DataLoader(FreeDataset(), batch_size=8)
        assert loader.num_workers == 2
        assert loader.prefetch_factor == 4 and loader.persistent_workers
        assert isinstance(loader.worker_init_fn, WorkerThreads)
        assert loader.worker_init_fn.threads == 1
    finally:
        patch.restore()
    assert DataLoader.__init__ is ORIGINAL_INIT
    assert DataLoader(FreeDataset()).num_workers == 0
    assert patch.stats()["applied"] == 1 and not patch.is_applied()


def test_explicit_settings_win_where_samples_draw_and_a_warning_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    section = _section(num_workers=2, threads=1, draws=["numpy.random"])
    section.allow_changed_draws = False
    patch = LoaderSettingsPatch(section, cuda_available=False)
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.loader_settings"):
        patch.apply()
        try:
            explicit = DataLoader(FreeDataset(), batch_size=8, num_workers=0)
            positional = DataLoader(FreeDataset(), 8, False, None, None, 1)
        finally:
            patch.restore()
    assert explicit.num_workers == 0
    assert explicit.worker_init_fn is None  # no workers: nothing to initialize
    assert positional.num_workers == 1  # given positionally: still explicit
    assert isinstance(positional.worker_init_fn, WorkerThreads)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("num_workers=0 kept" in w and "--override num_workers" in w for w in warnings)
    assert any("num_workers=1 kept" in w for w in warnings)
    assert all("the gain forgone: tuned 2 workers x 1 thread" in w for w in warnings)
    assert patch.stats()["kept_explicit"] == {"num_workers": 2}


def test_explicit_settings_are_replaced_where_no_sample_draws(
    caplog: pytest.LogCaptureFixture,
) -> None:
    patch = LoaderSettingsPatch(_section(num_workers=2, threads=1), cuda_available=False)
    with caplog.at_level(logging.INFO, logger="codedag.migrate.loader_settings"):
        patch.apply()
        try:
            loader = DataLoader(FreeDataset(), batch_size=8, num_workers=0)
        finally:
            patch.restore()
    assert loader.num_workers == 2
    assert isinstance(loader.worker_init_fn, WorkerThreads)
    assert "replaced by the plan's measured 2" in caplog.text
    assert patch.stats()["overridden"] == {"num_workers": 1}


def test_override_replaces_an_explicit_setting(caplog: pytest.LogCaptureFixture) -> None:
    section = _section(num_workers=2, draws=["numpy.random"])
    section.override = ["num_workers"]
    section.allow_changed_draws = True  # another worker count changes the draws
    patch = LoaderSettingsPatch(section, cuda_available=False)
    with caplog.at_level(logging.INFO, logger="codedag.migrate.loader_settings"):
        patch.apply()
        try:
            loader = DataLoader(FreeDataset(), batch_size=8, num_workers=0)
        finally:
            patch.restore()
    assert loader.num_workers == 2
    assert "replaced by the plan's measured 2" in caplog.text


def _busy_main_process() -> None:
    """Use OpenCV's and torch's thread pools here, as a training script does before workers
    fork: a forked worker that resized them naively would hang."""
    image = np.zeros((1500, 1500, 3), np.uint8)
    for _ in range(3):
        cv2.GaussianBlur(image, (9, 9), 0)
        (torch.ones(600, 600) @ torch.ones(600, 600)).sum()


@pytest.mark.timeout(120)
def test_thread_counts_reach_forked_workers_and_the_programs_init_still_runs() -> None:
    _busy_main_process()
    patch = LoaderSettingsPatch(_section(num_workers=2, threads=2), cuda_available=False)
    patch.apply()
    try:
        # worker_init_fn passed positionally, as the 11th argument: wrapped, not dropped.
        loader = DataLoader(
            ThreadReport(), 1, False, None, None, 2, None, False, False, 0, user_init
        )
    finally:
        patch.restore()
    assert isinstance(loader.worker_init_fn, WorkerThreads)
    assert loader.worker_init_fn.user_init is user_init
    for _epoch in range(2):  # workers forked twice, the main process busy in between
        rows = list(loader)
        _busy_main_process()
    assert len(rows) == 8
    for row in rows:
        assert int(row["worker"]) in (0, 1)
        assert int(row["cv2"]) == 2
        assert int(row["blas"]) in (2, -1)  # -1: no BLAS library reported by threadpoolctl
        # GNU OpenMP is not fork-safe: a forked worker keeps torch at one thread
        assert int(row["torch"]) == 1
        assert row["marker"][0] == f"user-init-{int(row['worker'])}"


@pytest.mark.timeout(180)
def test_spawned_workers_get_every_thread_count() -> None:
    patch = LoaderSettingsPatch(_section(num_workers=1, threads=2), cuda_available=False)
    patch.apply()
    try:
        loader = DataLoader(ThreadReport(), batch_size=None, multiprocessing_context="spawn")
    finally:
        patch.restore()
    rows = list(loader)
    assert {(r["torch"], r["cv2"]) for r in rows} == {(2, 2)}
    assert {r["marker"] for r in rows} == {"none"}  # no program init: none was given


@pytest.mark.timeout(120)
def test_one_thread_per_worker_is_read_back_too() -> None:
    _busy_main_process()
    patch = LoaderSettingsPatch(_section(num_workers=1, threads=1), cuda_available=False)
    patch.apply()
    try:
        loader = DataLoader(ThreadReport(), batch_size=None)
    finally:
        patch.restore()
    rows = list(loader)
    assert {int(r["cv2"]) for r in rows} == {1}
    assert {int(r["torch"]) for r in rows} == {1}


def test_other_datasets_and_codedags_own_loaders_are_left_alone() -> None:
    patch = LoaderSettingsPatch(_section(ThreadReport, num_workers=2), cuda_available=False)
    patch.apply()
    try:
        other = DataLoader(FreeDataset())
        mine = DataLoader(ThreadReport())
        from codedag.tune.variants import build_variant

        internal = build_variant(mine, LoaderSettings(num_workers=0), endless=False)
    finally:
        patch.restore()
    assert other.num_workers == 0 and mine.num_workers == 2
    assert internal.num_workers == 0
    stats = patch.stats()
    assert stats["skipped"].get("created by codedag") == 1
    assert any(key.startswith("dataset ") for key in stats["skipped"])


def test_pin_memory_needs_cuda_and_prefetch_needs_workers() -> None:
    patch = LoaderSettingsPatch(
        _section(num_workers=2, pin_memory=True, prefetch_factor=4, draws=["random"]),
        cuda_available=False,
    )
    patch.apply()
    try:
        loader = DataLoader(FreeDataset(), num_workers=0)
    finally:
        patch.restore()
    assert loader.pin_memory is False and loader.num_workers == 0
    assert loader.prefetch_factor is None


def test_the_migrator_applies_restores_and_reports_the_loader_section() -> None:
    plan = _plan(_section(num_workers=2, threads=1))
    migrator = PipelineMigrator.from_plan(plan, default_device="cpu")
    with migrator:
        assert DataLoader(FreeDataset()).num_workers == 2
    assert DataLoader.__init__ is ORIGINAL_INIT
    stats = migrator.get_stats()["loader"]
    assert stats["applied"] == 1 and stats["settings"]["num_workers"] == 2
    plain = PipelineMigrator.from_plan({"context_device_map": {}}, default_device="cpu")
    with plain:
        assert DataLoader.__init__ is ORIGINAL_INIT
    assert plain.get_stats()["loader"] is None


def test_a_section_that_keeps_your_settings_patches_nothing() -> None:
    section = LoaderSection(chosen=LoaderSettings(), yours=LoaderSettings())
    assert LoaderSettingsPatch.from_plan({"loader": section.model_dump()}) is None
    assert torch.utils.data.DataLoader.__init__ is ORIGINAL_INIT


# ----------------------------------------------------------------- a plan from elsewhere


@pytest.mark.parametrize(
    ("key", "value", "limit"),
    [("num_workers", 1_000_000, 1024), ("threads", 10**9, 1024), ("prefetch_factor", 10**9, 64)],
)
def test_a_plan_asking_for_absurd_loader_settings_is_refused_with_the_limit(
    key: str, value: int, limit: int
) -> None:
    from codedag.errors import SchemaError

    section = _section(num_workers=2).model_dump()
    section["chosen"][key] = value
    with pytest.raises(SchemaError, match=f"loader.chosen.{key}: .*less than or equal to {limit}"):
        PipelineMigrator.from_plan({"context_device_map": {}, "loader": section})


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_and_threads_past_the_cpu_limit_are_lowered_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    patch = LoaderSettingsPatch(
        _section(num_workers=1000, threads=64), cuda_available=False, cpus=2.0
    )
    with caplog.at_level(logging.WARNING, logger="codedag"):
        patch.apply()
        try:
            loader = DataLoader(FreeDataset(), batch_size=8)
        finally:
            patch.restore()
    assert loader.num_workers == 8  # 4 per CPU
    assert loader.worker_init_fn.threads == 2  # one per CPU
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert (
        "num_workers=1000 lowered to 8" in warnings[0] and "threads=64 lowered to 2" in warnings[0]
    )
    assert patch.stats()["settings"]["num_workers"] == 8


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_the_cpu_limit_comes_from_the_container(monkeypatch: pytest.MonkeyPatch) -> None:
    import codedag.migrate.loader_settings as module

    monkeypatch.setattr(module, "container_cpus", lambda: (1.5, "cgroup CPU quota 1.5"))
    patch = LoaderSettingsPatch(_section(num_workers=9), cuda_available=False)
    patch.apply()
    try:
        assert DataLoader(FreeDataset()).num_workers == 4
    finally:
        patch.restore()
