"""The box benchmark on the CPU: the process pinned to the box's CPUs while it runs, each row with
its figures and the plan's batches equal to the pipeline's own; and the JPEG decode measurement
without nvJPEG, the cv2 side only."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from bench_loading import load_benchmark

ROW_FIELDS = {
    "pipeline",
    "device",
    "workers_tried",
    "own_workers",
    "own_e1",
    "own_later",
    "plan_e1",
    "plan_later",
    "e1_ratio",
    "later_ratio",
    "gpu_busy_own",
    "gpu_busy_plan",
    "same",
    "same_against",
    "max_abs_diff",
    "tolerance",
    "loader",
    "plan",
    "seconds",
}


def test_the_box_limits_the_cpus_and_restores_them() -> None:
    box = load_benchmark("gpu_box")
    before = os.sched_getaffinity(0)
    with box.limit_cpus(1) as cpus:
        assert len(cpus) == 1 and os.sched_getaffinity(0) == set(cpus)
    assert os.sched_getaffinity(0) == before
    with box.limit_cpus(len(before) + 8) as cpus:
        assert len(cpus) == len(before)  # a box larger than the machine gets the machine
    assert box.worker_counts(4, quick=False) == [0, 2, 4]
    assert box.worker_counts(8, quick=True) == [0, 2]
    assert box.worker_counts(1, quick=False) == [0]


def test_the_quick_path_on_the_cpu_gives_full_rows_with_equal_batches(tmp_path: Path) -> None:
    box = load_benchmark("gpu_box")
    box.QUICK_SIZES["demo_image"] = {"image_size": 32, "source_size": 48}
    out = tmp_path / "box.json"
    argv = ["--device", "cpu", "--quick", "--cpus", "1", "--samples", "8", "--batch-size", "4"]
    args = box.parse_args([*argv, "--pipelines", "demo_image", "--out", str(out)])
    result = box.run(args, echo=lambda _: None)
    assert result["cpus_asked"] == 1 and result["cpus"] == 1 and not result["skipped"]
    (row,) = result["rows"]
    assert set(row) >= ROW_FIELDS
    assert row["same"] in ("bit", "tol"), row  # every batch of the plan against the own loader
    assert row["own_workers"] == 0 and list(row["workers_tried"]) == ["0"]
    assert row["gpu_busy_own"] is None and row["gpu_busy_plan"] is None  # no CUDA here
    assert row["e1_ratio"] == pytest.approx(row["plan_e1"] / row["own_e1"])
    assert row["later_ratio"] == pytest.approx(row["plan_later"] / row["own_later"])
    box.print_row(row)  # the table's line formats every field


def test_the_busy_share_is_the_mean_utilization_nvml_reports_on_cuda_only() -> None:
    from codedag.devices.fake_nvml import FakeGPU, FakeNVML

    box = load_benchmark("gpu_box")
    nvml = FakeNVML([FakeGPU(utilization_pct=30.0), FakeGPU(utilization_pct=80.0)])
    with box.gpu_busy("cuda:1", interval_s=0.01, nvml=nvml) as busy:
        time.sleep(0.05)
    assert busy["share"] == pytest.approx(0.8)
    with box.gpu_busy("cpu", nvml=nvml) as busy:
        pass
    assert busy["share"] is None
    with box.gpu_busy("cuda:0", nvml=FakeNVML(fail_init=True)) as busy:
        pass
    assert busy["share"] is None  # no NVML: n/a


def test_bad_options_exit_2() -> None:
    box = load_benchmark("gpu_box")
    for argv in (["--cpus", "0"], ["--device", "tpu"], ["--device", "nonsense"]):
        with pytest.raises(SystemExit) as exc:
            box.parse_args(argv)
        assert exc.value.code == 2


def test_jpeg_decoding_without_nvjpeg_measures_the_cv2_side(tmp_path: Path) -> None:
    nvjpeg = load_benchmark("nvjpeg_decode")
    out = tmp_path / "nvjpeg.json"
    argv = ["--device", "cpu", "--quick", "--samples", "4", "--pipelines", "demo_image"]
    assert nvjpeg.main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert "the device is cpu" in data["nvjpeg_missing"]
    (row,) = data["rows"]
    assert row["samples"] == 4 and row["cv2_ms_per_sample"] > 0
    assert row["decode_share_epoch1"] > 0 and row["epoch1_s"] > 0
    assert row["nvjpeg_ms_per_sample"] is None and row["max_abs_diff"] is None
    # the comparison against libjpeg: BGR HWC against RGB CHW, one value off by 3
    bgr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    rgb = torch.from_numpy(bgr[..., ::-1].copy()).permute(2, 0, 1).contiguous()
    assert nvjpeg.difference([bgr], [rgb]) == (0, 0.0)
    rgb[0, 1, 2] += 3
    assert nvjpeg.difference([bgr], [rgb]) == (3, 1 / 18)
