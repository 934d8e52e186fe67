"""The tuner's statistics, --fix parsing, the loader section in the plan model, CPU limits."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from codedag.devices.cgroups import CgroupReader, discover
from codedag.errors import ConfigError, SchemaError
from codedag.plan import LoaderSection, LoaderSettings, MigrationPlan
from codedag.tune.limits import machine_limits
from codedag.tune.options import parse_fixed, resolve_fixed
from codedag.tune.stats import clearly_faster, clearly_slower, compare, median_s, median_se_s


def test_a_settings_figure_is_the_median_of_its_cycles() -> None:
    cycles = [0.010, 0.011, 0.009, 0.250]  # one cycle disturbed by other work
    assert median_s(cycles) == pytest.approx(0.0105)
    assert 0 < median_se_s(cycles) < 0.1 and median_se_s(cycles[:1]) == float("inf")
    assert median_s([]) != median_s([])  # nan


def test_clearly_slower_needs_evidence_not_a_constant() -> None:
    rng = random.Random(0)
    fast = [0.010 + rng.gauss(0, 0.0005) for _ in range(6)]
    slow = [0.020 + rng.gauss(0, 0.0005) for _ in range(6)]
    assert clearly_slower(slow, fast) is not None
    assert clearly_slower(fast, slow) is None
    assert clearly_slower(slow[:2], fast) is None  # too few cycles to judge
    # 5 % slower but noisy: the t-test does not call it
    noisy_a = [0.0105 + rng.gauss(0, 0.004) for _ in range(4)]
    noisy_b = [0.0100 + rng.gauss(0, 0.004) for _ in range(4)]
    assert clearly_slower(noisy_a, noisy_b) is None
    judged = compare(fast, slow)
    assert judged.b_slower and -judged.saving_ns > judged.spread_ns > 0
    assert "cycles" in (clearly_slower(slow, fast) or "")


def test_clearly_faster_respects_the_margin() -> None:
    base = [0.100, 0.101, 0.099, 0.100, 0.1005, 0.0995]
    three_pct = [x * 0.97 for x in base]
    thirty_pct = [x * 0.7 for x in base]
    assert not clearly_faster(three_pct, base, margin=0.05)
    assert clearly_faster(three_pct, base, margin=0.0)
    assert clearly_faster(thirty_pct, base, margin=0.05)
    assert not clearly_faster(base, thirty_pct, margin=0.0)


def test_fix_parses_values_and_bare_keys() -> None:
    fixed = parse_fixed(["num_workers=4", "pin-memory=false", "threads=default", "prefetch_factor"])
    assert fixed == {
        "num_workers": 4,
        "pin_memory": False,
        "threads": "default",
        "prefetch_factor": None,
    }
    yours = LoaderSettings(num_workers=2, prefetch_factor=3)
    assert resolve_fixed(fixed, yours) == {
        "num_workers": 4,
        "pin_memory": False,
        "threads": None,
        "prefetch_factor": 3,
    }
    for bad in (["workers=2"], ["num_workers=-1"], ["threads=lots"], ["pin_memory=maybe"]):
        with pytest.raises(ConfigError):
            parse_fixed(bad)


def test_settings_compare_as_the_dataloader_sees_them() -> None:
    assert (
        LoaderSettings(num_workers=2, prefetch_factor=2).differences(LoaderSettings(num_workers=2))
        == {}
    )
    # prefetch and persistence mean nothing without workers
    assert LoaderSettings(num_workers=0, persistent_workers=True).normalized() == LoaderSettings()
    changes = LoaderSettings(num_workers=2, threads=1).differences(LoaderSettings())
    assert set(changes) == {"num_workers", "threads"}
    assert LoaderSettings(num_workers=2, threads=1, prefetch_factor=4).label() == (
        "2 workers x 1 thread, prefetch 4"
    )


def test_plans_without_a_loader_section_load_and_write_as_before() -> None:
    old = {"context_device_map": {"a/cv2.resize#0": "cpu"}}  # version 1: no schema_version
    plan = MigrationPlan.from_dict(old)
    assert plan.loader is None and "loader" not in plan.to_dict()


def test_the_loader_section_round_trips_and_is_validated() -> None:
    section = LoaderSection(
        chosen=LoaderSettings(num_workers=2, threads=1),
        yours=LoaderSettings(),
        changed=["num_workers", "threads"],
        reason="measured",
    )
    data = {"schema_version": 2, "context_device_map": {}, "loader": section.model_dump()}
    plan = MigrationPlan.from_dict(data)
    assert plan.loader == section
    assert MigrationPlan.from_dict(plan.to_dict()).loader == section
    bad = dict(data, loader={**section.model_dump(), "changed": ["workers"]})
    with pytest.raises(SchemaError, match="unknown loader setting"):
        MigrationPlan.from_dict(bad)
    negative = dict(data, loader={**section.model_dump(), "chosen": {"num_workers": -1}})
    with pytest.raises(SchemaError, match="num_workers"):
        MigrationPlan.from_dict(negative)


@pytest.mark.parametrize("layout", ["v1", "v2"])
def test_the_cpu_limit_is_the_smallest_of_quota_cpuset_and_affinity(
    cgroup_tree: Callable[..., Path], layout: str
) -> None:
    limited = machine_limits(CgroupReader(discover(cgroup_tree(layout, cpu_quota=(50000, 100000)))))
    assert limited.cpus == 0.5 and limited.max_workers == 1
    assert "quota" in limited.cpu_source
    one_cpu = machine_limits(CgroupReader(discover(cgroup_tree(layout, cpuset="3"))))
    assert one_cpu.cpus == 1 and "cpuset" in one_cpu.cpu_source
    memory = machine_limits(
        CgroupReader(
            discover(
                cgroup_tree(
                    layout,
                    memory_limit_bytes=1 << 30,
                    memory_usage_bytes=300 << 20,
                    inactive_file_bytes=100 << 20,
                )
            )
        )
    )
    assert memory.memory_limit_bytes == 1 << 30
    assert memory.available_bytes == (1 << 30) - (200 << 20)


def test_a_step_function_is_timed_after_its_warm_up() -> None:
    import time

    from codedag.tune.consumer import time_step

    calls: list[float] = []

    def step(delay_s: float) -> None:
        calls.append(delay_s)
        time.sleep(delay_s)

    step_s, source = time_step(step, [0.3, 0.002, 0.002, 0.002])  # the first call is slow
    assert 0.002 <= step_s < 0.1 and len(calls) == 4
    assert (
        source
        == "median of 3 calls of test_a_step_function_is_timed_after_its_warm_up.<locals>.step"
    )
    with pytest.raises(ConfigError, match="more than 1"):
        time_step(step, [0.0])
