"""Settings: the seed's defaults, per-scenario data pressure, validation."""

from __future__ import annotations

import pytest

from codedag.errors import ConfigError
from codedag.profile.config import ProfileConfig


def test_seed_defaults() -> None:
    c = ProfileConfig()
    assert (c.scenario, c.device, c.batch_size, c.image_size_px) == ("dataloader", "cuda", 64, 224)
    assert (c.num_workers, c.warmup_steps, c.profile_steps) == (2, 10, 8)
    assert c.trace_dir == "results/traces/profiler_demo"
    assert c.output_json == "results/metrics_demo.json"
    assert c.persistent_workers and not c.pin_memory and not c.amp


def test_data_pressure_per_scenario() -> None:
    assert ProfileConfig(scenario="dataloader").data_pressure() == (4000, 2.0)
    for scenario in ("sync", "tiny_ops", "memory_churn"):
        assert ProfileConfig(scenario=scenario).data_pressure() == (200, 0.0)
    explicit = ProfileConfig(scenario="sync", cpu_work=10, io_sleep_ms=1.5)
    assert explicit.data_pressure() == (10, 1.5)
    assert explicit.to_dict()["cpu_work"] == 10


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("scenario", "slow", "scenario must be one of"),
        ("device", "tpu", "device must be"),
        ("batch_size", 0, "batch_size must be a positive integer, got 0"),
        ("num_workers", -1, "num_workers must be a non-negative"),
        ("image_size_px", 8, "at least 16"),
        ("dataset_size", 4, "at least one batch"),
        ("lr", 0.0, "lr must be positive"),
        ("io_sleep_ms", -1.0, "io_sleep_ms"),
    ],
)
def test_bad_settings_say_what_was_received(field: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProfileConfig(**{field: value})
