"""The CPU frequency governor on fake sysfs trees: read, set and restored, or unavailable."""

from __future__ import annotations

from pathlib import Path

import pytest

from codedag.devices.governor import (
    UNAVAILABLE_NO_CPUFREQ,
    check_governor,
    governor_applied,
    governor_status,
)
from codedag.errors import ConfigError


def test_governor_missing_cpufreq(tmp_path: Path) -> None:
    (tmp_path / "cpu0").mkdir()
    status = governor_status(tmp_path)
    assert not status.settable and status.in_effect == "unavailable"
    assert "no cpufreq" in status.detail


def test_governor_read(tmp_path: Path) -> None:
    for cpu, governor in (("cpu0", "powersave"), ("cpu1", "performance")):
        folder = tmp_path / cpu / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
        (folder / "scaling_available_governors").write_text("performance powersave\n")
    status = governor_status(tmp_path)
    assert status.current == ["powersave", "performance"]
    assert status.available == ["performance", "powersave"]
    assert status.in_effect == "mixed(performance,powersave)"


def fake_cpufreq(root: Path, governor: str = "powersave") -> list[Path]:
    files = []
    for cpu in ("cpu0", "cpu1"):
        folder = root / cpu / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
        (folder / "scaling_available_governors").write_text("performance powersave\n")
        files.append(folder / "scaling_governor")
    return files


def test_governor_is_set_and_restored(tmp_path: Path) -> None:
    files = fake_cpufreq(tmp_path)
    with pytest.raises(RuntimeError), governor_applied("performance", tmp_path) as governor:
        assert governor == "performance"
        assert all(f.read_text().strip() == "performance" for f in files)
        raise RuntimeError("an error inside the session")
    assert all(f.read_text().strip() == "powersave" for f in files)
    with (
        pytest.raises(ConfigError, match="available: performance, powersave"),
        governor_applied("turbo", tmp_path),
    ):
        pass


def test_governor_without_cpufreq_is_recorded_as_unavailable(tmp_path: Path) -> None:
    with governor_applied("performance", tmp_path) as governor:
        assert governor == UNAVAILABLE_NO_CPUFREQ == "unavailable: no cpufreq"


def test_a_governor_is_checked_against_the_offered_ones(tmp_path: Path) -> None:
    fake_cpufreq(tmp_path)
    status = governor_status(tmp_path)
    assert status.settable and status.in_effect == "powersave"
    check_governor("performance", status)
    check_governor(None, status)
    with pytest.raises(ConfigError, match="'turbo' is not offered here"):
        check_governor("turbo", status)
    check_governor("turbo", governor_status(tmp_path / "nothing"))  # nothing offered: no check


def test_without_a_wanted_governor_the_one_in_effect_is_recorded(tmp_path: Path) -> None:
    files = fake_cpufreq(tmp_path, governor="performance")
    with governor_applied(None, tmp_path) as governor:
        assert governor == "performance"
    assert all(f.read_text().strip() == "performance" for f in files)
