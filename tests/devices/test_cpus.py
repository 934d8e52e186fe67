"""CPU counts and the CPU model."""

from __future__ import annotations

import os
import platform

import pytest

from codedag.devices import cpus


def test_usable_cpus_follow_the_affinity_mask() -> None:
    assert cpus.usable_cpu_count() == len(os.sched_getaffinity(0))
    assert 1 <= cpus.usable_cpu_count() <= cpus.logical_cpu_count()


def test_without_an_affinity_call_usable_cpus_are_the_logical_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert cpus.usable_cpu_count() == 12
    assert cpus.logical_cpu_count() == 12
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpus.usable_cpu_count() == 1 and cpus.logical_cpu_count() == 1


def test_cpu_model_reads_cpuinfo_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    cpus.cpu_model.cache_clear()
    try:
        model = cpus.cpu_model()
        assert model and model == cpus.cpu_model()
        cpus.cpu_model.cache_clear()

        def no_file(*_args: object, **_kwargs: object) -> None:
            raise OSError("no /proc here")

        monkeypatch.setattr("builtins.open", no_file)
        monkeypatch.setattr(platform, "processor", lambda: "")
        monkeypatch.setattr(platform, "machine", lambda: "riscv64")
        assert cpus.cpu_model() == "riscv64"
        cpus.cpu_model.cache_clear()
        monkeypatch.setattr(platform, "machine", lambda: "")
        assert cpus.cpu_model() == "cpu"
    finally:
        cpus.cpu_model.cache_clear()
