"""The measured loop on the CPU: warm-up, a profiled window and a timed window of the asked
lengths; data wait timed around ``next()`` only; batches restart at the end of an epoch."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codedag.errors import ExperimentError
from codedag.profile.config import ProfileConfig
from codedag.profile.measure import _BatchSource, _Timer, run_measurement
from codedag.profile.program import StepProgram


class SlowBatches:
    """Two batches an epoch, each taking ``wait_s`` to arrive."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(2):
            time.sleep(self.wait_s)
            yield i


def test_a_batch_source_restarts_epochs_and_counts_the_restarts() -> None:
    source = _BatchSource([1, 2])
    assert [source.next() for _ in range(5)] == [1, 2, 1, 2, 1]
    assert source.restarts == 2
    assert _BatchSource(None).next() is None  # a step that fetches its own data
    with pytest.raises(ExperimentError, match="yields no batch"):
        _BatchSource([]).next()


def test_the_host_timer_separates_data_wait_from_step_time() -> None:
    timer = _Timer(cuda=False)
    timer.start_window()
    source = _BatchSource(SlowBatches(0.06))
    got: list[int] = []
    for _ in range(2):
        timer.run_step(source, lambda b: (got.append(b), time.sleep(0.005)), has_batches=True)
    window = timer.finish_window()
    assert got == [0, 1]
    assert all(w >= 0.059 for w in window.data_wait_s)
    assert all(0.004 <= s < 0.059 for s in window.step_s)  # the wait is not in the step
    assert window.step_s == window.host_step_s and window.device_idle_s == []
    assert window.wall_s >= sum(window.data_wait_s) + sum(window.step_s) * 0.99


@pytest.mark.slow  # the torch profiler's start-up: seconds
def test_the_loop_runs_each_window_for_its_steps_and_writes_the_trace(tmp_path: Path) -> None:
    calls: list[int] = []
    phases: list[str] = []
    program = StepProgram(step=calls.append, batches=[10, 20, 30], name="tiny")
    config = ProfileConfig(
        device="cpu", warmup_steps=1, profile_steps=2, timed_steps=3, trace_dir=str(tmp_path)
    )
    result = run_measurement(program, config, lambda phase, done, total: phases.append(phase))
    assert len(calls) == 1 + 2 + 2 + 3  # warm-up, profiler wait + warm-up, active, timed
    assert len(result.profiled.step_s) == 2 and len(result.timed.step_s) == 3
    assert result.iterator_restarts == 2  # 8 steps over 3-batch epochs
    assert result.trace_path == tmp_path / "tiny.cpu.pt.trace.json"
    assert result.trace_path.is_file() and result.active_steps == 2
    assert phases.count("warm-up") == 1 and phases.count("timed") == 3
    assert result.cuda_memory_delta == {}
