"""tune_loader on loaders with known costs: worker counts, the CPU limit, keeping your settings.

The per-sample costs are sleep-dominated, so the gains of workers are large (2x) whatever the
load of this shared machine; assertions are about choices with wide margins, never timings.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loader_fixtures import FreeDataset, SleepyDataset, slow_worker_start
from torch.utils.data import DataLoader

from codedag.devices.cgroups import CgroupReader, discover
from codedag.errors import ConfigError
from codedag.tune import TuneOptions, tune_loader
from codedag.tune.tuner import plan_with_loader

QUICK = {"batches": 8, "trial_s": 3.0, "rounds": 2, "device": "cpu"}


def _reader(cgroup_tree: Callable[..., Path], cpus: float) -> CgroupReader:
    proc = cgroup_tree("v2", cpu_quota=(int(cpus * 100000), 100000))
    return CgroupReader(discover(proc))


@pytest.mark.slow
def test_sleep_dominated_samples_get_one_worker_per_cpu_of_the_limit(
    cgroup_tree: Callable[..., Path],
) -> None:
    reader = _reader(cgroup_tree, 2)
    loader = DataLoader(SleepyDataset(sleep_s=0.012, cpu_s=0.001), batch_size=4)
    section = tune_loader(loader, reader=reader, **QUICK)
    assert section.cpu_limit == 2 and "quota" in section.cpu_limit_source
    assert section.max_workers == 2
    assert max(t.settings.num_workers for t in section.trials) == 2
    assert section.chosen.num_workers == 2
    assert "num_workers" in section.changed and section.yours.num_workers == 0
    assert section.confirmation is not None and section.confirmation.ratio > 1.4
    assert "side by side" in section.reason
    assert f"({section.confirmation.ratio:.2f}x ± " in section.reason  # the noise is shown
    workers = [t for t in section.trials if t.settings.num_workers and t.batches]
    assert all(t.worker_rss_mb > 0 for t in workers)  # the workers' memory was read


@pytest.mark.slow
def test_cpu_quota_of_one_limits_the_search_and_a_step_time_decides_enough(
    cgroup_tree: Callable[..., Path],
) -> None:
    reader = _reader(cgroup_tree, 1)
    loader = DataLoader(SleepyDataset(sleep_s=0.005, cpu_s=0.0005), batch_size=4)
    section = tune_loader(loader, reader=reader, step_s=0.04, **QUICK)
    assert section.max_workers == 1
    assert {t.settings.num_workers for t in section.trials} <= {0, 1}
    # 0 workers: the 40 ms step waits ~22 ms for each batch; 1 worker loads during the step.
    assert section.chosen.num_workers == 1
    assert "keeps a 40.0 ms step fed" in section.reason
    assert section.step_ms == pytest.approx(40.0)
    in_process = next(t for t in section.trials if t.settings.num_workers == 0)
    one = next(t for t in section.trials if t.settings.num_workers == 1 and t.batches)
    assert in_process.wait_ms > 10 > one.wait_ms


def test_your_settings_are_kept_when_nothing_measured_beats_them(
    cgroup_tree: Callable[..., Path],
) -> None:
    loader = DataLoader(FreeDataset(), batch_size=64)
    section = tune_loader(loader, reader=_reader(cgroup_tree, 2), **QUICK)
    assert section.chosen.num_workers == 0
    assert section.keeps_yours and section.changed == []
    assert section.reason.startswith("keep your settings")


@pytest.mark.slow
def test_workers_that_do_not_pay_for_their_start_up_in_a_first_epoch_are_not_taken(
    cgroup_tree: Callable[..., Path],
) -> None:
    # Workers load this data set twice as fast, but start in 0.4 s: in an epoch of two
    # batches (about 0.1 s in this process) that start-up is never won back.
    short = DataLoader(
        SleepyDataset(n=8, sleep_s=0.012, cpu_s=0.001),
        batch_size=4,
        worker_init_fn=slow_worker_start,
    )
    section = tune_loader(short, reader=_reader(cgroup_tree, 2), **QUICK)
    assert section.chosen.num_workers == 0 and section.keeps_yours
    assert "a first epoch of 2 batches, start-up included, in" in section.reason
    assert "faster once running, but not over a first epoch by more than 5 %" in section.reason
    confirmation = section.confirmation
    assert confirmation is not None and confirmation.first_epoch_batches == 2
    assert confirmation.chosen_first_epoch_s > 0.4 > confirmation.yours_first_epoch_s
    assert confirmation.ratio > 1.3  # faster per batch: only the first epoch kept them out


@pytest.mark.slow
def test_fixed_settings_are_never_varied(cgroup_tree: Callable[..., Path]) -> None:
    loader = DataLoader(SleepyDataset(sleep_s=0.004, cpu_s=0.0), batch_size=2)
    section = tune_loader(
        loader,
        reader=_reader(cgroup_tree, 2),
        fixed={"num_workers": 1, "prefetch_factor": None},
        **QUICK,
    )
    searched = [t for t in section.trials if t.phase != "yours"]
    assert searched and all(t.settings.num_workers == 1 for t in searched)
    assert section.fixed == ["num_workers", "prefetch_factor"]
    assert section.chosen.num_workers in (0, 1)  # yours, or the fixed value


def test_the_section_goes_into_a_new_or_existing_plan(cgroup_tree: Callable[..., Path]) -> None:
    loader = DataLoader(SleepyDataset(sleep_s=0.004, cpu_s=0.0), batch_size=2)
    section = tune_loader(loader, reader=_reader(cgroup_tree, 1), max_workers=0, **QUICK)
    assert [t.settings.num_workers for t in section.trials] == [0]
    fresh = plan_with_loader(None, section)
    assert fresh.loader is not None and fresh.context_device_map == {}
    existing = {
        "schema_version": 2,
        "context_device_map": {"f/cv2.resize#0": "cpu"},
        "calls": [{"function": "cv2.resize", "context_keys": ["f/cv2.resize#0"]}],
    }
    merged = plan_with_loader(existing, section)
    assert merged.context_device_map == {"f/cv2.resize#0": "cpu"}
    assert merged.loader is not None and merged.loader.trials[0].batches > 0


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="expected a torch"):
        tune_loader([1, 2, 3])
    with pytest.raises(ConfigError, match="unknown loader setting"):
        tune_loader(DataLoader(FreeDataset()), fixed={"workers": 2})
    with pytest.raises(ConfigError, match="batches must be"):
        tune_loader(DataLoader(FreeDataset()), options=TuneOptions(batches=0))
    with pytest.raises(ConfigError, match="empty"):
        tune_loader(DataLoader(SleepyDataset(n=0)), **QUICK)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"max_workers": 1_000_000}, "max_workers=1000000 is more than 8 workers"),
        ({"fixed": {"num_workers": 9}}, "num_workers=9 is more than 8 workers"),
        ({"fixed": {"threads": 3}}, "threads=3 is more than 2"),
    ],
)
def test_worker_counts_past_the_cpu_limit_start_no_process(
    options: dict[str, Any], problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import codedag.tune.tuner as tuner
    from codedag.tune.limits import MachineLimits

    monkeypatch.setattr(
        tuner, "machine_limits", lambda reader=None: MachineLimits(2.0, "a test", None, 2**30)
    )
    started = multiprocessing.active_children()
    with pytest.raises(ConfigError, match=problem):
        tune_loader(DataLoader(FreeDataset()), **options)
    assert multiprocessing.active_children() == started


@pytest.mark.slow
def test_pin_memory_is_searched_only_when_batches_go_to_a_cuda_device(
    cgroup_tree: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search logic, run on the CPU: the copy to the device is replaced by a no-op."""
    import codedag.tune.tuner as tuner

    copies: list[str] = []
    monkeypatch.setattr(
        tuner, "device_consumer", lambda device, then=None: lambda batch: copies.append(device)
    )
    loader = DataLoader(SleepyDataset(sleep_s=0.004, cpu_s=0.0), batch_size=2)
    options = {**QUICK, "device": "cuda:0", "rounds": 1}
    with pytest.warns(UserWarning, match="pin_memory"):  # torch: no accelerator to pin for
        section = tune_loader(loader, reader=_reader(cgroup_tree, 1), max_workers=1, **options)
    pinned = [t for t in section.trials if t.settings.pin_memory]
    assert [t.phase for t in pinned] == ["pin_memory"] and pinned[0].batches > 0
    assert section.device == "cuda:0"
    assert copies and set(copies) == {"cuda:0"}
    without = tune_loader(loader, reader=_reader(cgroup_tree, 1), max_workers=1, **QUICK)
    assert not [t for t in without.trials if t.phase == "pin_memory"]


@pytest.mark.gpu
def test_pin_memory_is_measured_with_copies_to_the_gpu(cgroup_tree: Callable[..., Path]) -> None:
    loader = DataLoader(SleepyDataset(sleep_s=0.002, cpu_s=0.0), batch_size=64)
    section = tune_loader(
        loader, reader=_reader(cgroup_tree, 2), batches=8, rounds=2, device="cuda:0"
    )
    assert section.device == "cuda:0"
    assert {t.settings.pin_memory for t in section.trials} == {False, True}


def test_a_spent_time_budget_starts_no_new_setting(cgroup_tree: Callable[..., Path]) -> None:
    loader = DataLoader(SleepyDataset(sleep_s=0.002, cpu_s=0.0), batch_size=2)
    section = tune_loader(loader, reader=_reader(cgroup_tree, 2), budget_s=0.001, **QUICK)
    measured = [t for t in section.trials if t.batches]
    assert [t.phase for t in measured] == ["yours"]
    assert all(t.note == "time budget used up" for t in section.trials if not t.batches)
    assert section.keeps_yours and "time budget" in section.reason
