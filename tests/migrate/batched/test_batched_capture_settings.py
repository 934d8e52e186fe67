"""``BatchedSettings(capture=..., capture_graphs=...)``: carried to the executor's graph cache,
validated, and reported by the runtime (docs/batched.md, CUDA graphs)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import codedag.backends.batched.capture as capture
import codedag.migrate.batched.runtime as runtime
from codedag.backends.batched.capture import GraphCache
from codedag.errors import ConfigError
from codedag.migrate.batched.settings import BatchedSettings, chains_from_plan


class _NoGraphs:
    def capture(self, fn: Any, inputs: Any) -> Any:
        raise AssertionError("not captured in these tests")


def _runtime(settings: BatchedSettings | None = None) -> runtime.BatchedRuntime:
    return runtime.BatchedRuntime(chains_from_plan({"chains": []}), "cpu", settings)


def test_capture_is_asked_for_and_keeps_eight_graphs() -> None:
    settings = BatchedSettings()  # off until its time and memory are measured on a GPU
    assert settings.capture is False and settings.capture_graphs == capture.GRAPHS == 8


@pytest.mark.parametrize(
    "bad",
    [{"capture": 1}, {"capture_graphs": 0}, {"capture_graphs": True}, {"capture_graphs": 2.0}],
)
def test_bad_capture_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        BatchedSettings(**bad)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_runtime_carries_the_settings_to_the_executor(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    asked: list[tuple[torch.device, bool, int]] = []

    def for_device(device: torch.device, on: bool = True, limit: int = 8) -> GraphCache | None:
        asked.append((device, on, limit))
        return GraphCache(_NoGraphs(), limit) if on else None

    monkeypatch.setattr(capture, "for_device", for_device)
    batched = _runtime(BatchedSettings(capture=enabled, capture_graphs=3))
    assert asked == [(torch.device("cpu"), enabled, 3)]
    if enabled:
        assert batched.executor.capture is not None and batched.executor.capture.limit == 3
        assert batched.capture_stats() == {
            "state": "on",
            "graphs": 0,
            **capture.CaptureStats().as_dict(),
        }
    else:
        assert batched.executor.capture is None
        assert batched.capture_stats() == {"state": "off"}


def test_nothing_is_captured_on_the_cpu() -> None:
    batched = _runtime()
    assert batched.executor.capture is None
    assert batched.capture_stats() == {"state": "off"}


def test_get_stats_carries_what_capture_did(monkeypatch: pytest.MonkeyPatch) -> None:
    def for_device(device: torch.device, on: bool = True, limit: int = 8) -> GraphCache | None:
        return GraphCache(_NoGraphs(), limit) if on else None

    monkeypatch.setattr(capture, "for_device", for_device)
    batched = _runtime(BatchedSettings(capture=True))
    assert batched.executor.capture is not None
    batched.executor.capture.stats.replays = 5
    batched.executor.capture.stats.refused["sync"] = 1
    part = batched.stats().capture
    assert (part.state, part.replays, part.refused) == ("on", 5, {"sync": 1})
    assert part.model_dump() == batched.capture_stats()
    assert _runtime().stats().capture.state == "off"
