"""On a CUDA machine (``pytest -m gpu``): CUDA event timing and NVML sampling of real GPUs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.timer import Timer

pytestmark = pytest.mark.gpu


def _spin(torch, ms: float) -> None:
    """Keep the GPU busy about ``ms`` milliseconds without the host waiting."""
    props = torch.cuda.get_device_properties(0)
    rate_khz = getattr(props, "clock_rate", None) or 1_500_000  # cycles per ms
    torch.cuda._sleep(int(ms * rate_khz))


def test_events_time_gpu_work_that_the_host_clock_misses() -> None:
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    timers = {mode: Timer(mode) for mode in ("events", "sync", "none")}
    for timer in timers.values():
        timer.start()
        for _ in range(5):
            time.sleep(0.05)  # the host loads the next batch; the GPU idles once its 20 ms are done
            timer.start_batch()
            _spin(torch, 20.0)
            timer.end_batch()
        timer.stop()
        torch.cuda.synchronize()
    events = timers["events"].summary()
    sync = timers["sync"].summary()
    host = timers["none"].summary()
    assert events["timing"]["cuda_timing"] == "events" and events["num_batches"] == 5
    # events and sync both see the kernel; the bare host clock sees only the launch
    assert events["batch_time"]["mean"] > 0.5 * sync["batch_time"]["mean"]
    assert host["batch_time"]["mean"] < 0.5 * sync["batch_time"]["mean"]
    # with events, the wait is the GPU's idle gap: the 50 ms sleep minus the 20 ms kernel
    assert events["data_wait"]["min"] > 0.01


def test_auto_timing_synchronizes_once_cuda_is_used_and_gpus_are_sampled(tmp_path: Path) -> None:
    import torch

    x = torch.randn(2048, 2048, device="cuda")
    monitor = ExperimentMonitor("cuda", run_dir=tmp_path)
    monitor.start_mode("baseline", resource_interval=0.05)
    for _ in range(10):
        monitor.start_batch()
        for _ in range(10):
            x = (x @ x).tanh()
        monitor.end_batch()
    time.sleep(0.2)
    summary = monitor.stop_mode()
    data = monitor.to_dict()
    assert summary["timing"]["cuda_timing"] == "sync"
    usage = data["modes"]["baseline"]["resource_usage"]
    assert "0" in usage["gpu_usage"] and "0" in usage["gpu_memory"]
    assert all(0.0 <= p[1] <= 100.0 for p in usage["gpu_usage"]["0"])
    assert max(p[1] for p in usage["gpu_memory"]["0"]) > 0
    env = data["environment"]
    assert env["cuda_in_use"] and env["gpu_source"] == "nvml" and env["gpus"]
