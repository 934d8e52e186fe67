"""The console output of ``codedag profile``: stats, top ops, diagnosis, scenarios compared."""

from __future__ import annotations

import io

from rich.console import Console

import codedag.cli._profile_render as render
from codedag.profile.config import ProfileConfig
from codedag.profile.diagnosis import Diagnosis, Finding, StepFigures
from codedag.profile.events import StepCounts
from codedag.profile.result import ProfileResult, TopOp


def _result(device: str = "cpu", scenario: str = "dataloader") -> ProfileResult:
    cuda = device == "cuda"
    figures = StepFigures(
        device=device, avg_step_time_s=0.02, avg_dataloader_wait_s=0.005, data_wait_share=0.25,
        ops_per_step=120.0, mean_op_time_us=15.0, scalar_reads_per_step=0.0, syncs_per_step=2.0,
        allocations_per_step=40.0, allocated_bytes_per_step=3 * 2**20, launch_share=0.1,
        alloc_time_share=0.0,
        kernels_per_step=80.0 if cuda else None, device_idle_share=0.4 if cuda else None,
    )  # fmt: skip
    findings = [
        Finding("data-bound", 0.25, True, ["25% of wall time waiting"], ["more workers"]),
        Finding("sync-bound", 0.05, False, ["2 syncs per step"], ["avoid .item()"]),
        Finding("alloc-bound", 0.3, True, ["many allocations"], ["reuse buffers"]),
        Finding("compute-bound", 0.5, False, ["busy"], ["a bigger model"]),
    ]
    return ProfileResult(
        config=ProfileConfig(scenario=scenario, device=device),
        figures=figures,
        counts=StepCounts(5, 120.0, 15.0, 0.0, 0.0, 0.0, 0.0, 0.0, 40.0, 0.0),
        diagnosis=Diagnosis("data-bound", findings),
        top_ops=[TopOp("aten::conv2d", 2.0, 0.004, 0.005, 40.0)],
        timings={"p50_step_time_s": 0.019, "p95_step_time_s": 0.03, "p50_dataloader_wait_s": 0.004,
                 "p95_dataloader_wait_s": 0.01, "wall_time_per_step_s": 0.021},
        trace_path="/tmp/trace.json",
    )  # fmt: skip


def _text(*printables: object) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    for item in printables:
        console.print(item)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_formatters_say_n_a_for_missing_figures() -> None:
    assert render._ms(0.0125) == "12.50" and render._ms(None) == "n/a"
    assert render._num(2.345, 2) == "2.35" and render._num(None) == "n/a"
    assert render._pct(0.256) == "26%" and render._pct(None) == "n/a"


def test_cpu_stats_leave_out_the_gpu_rows() -> None:
    text = _text(render.stats_table(_result("cpu")))
    assert "dataloader on cpu" in text
    assert "step time (ms)" in text and "20.00" in text and "19.00" in text and "30.00" in text
    assert "host reads of tensor values per step" in text
    assert "MiB allocated per step" in text and "3.0" in text
    assert "GPU idle" not in text and "kernels per step" not in text


def test_cuda_stats_add_the_device_rows() -> None:
    text = _text(render.stats_table(_result("cuda")))
    assert "step time, CUDA events (ms)" in text
    assert "GPU idle between steps" in text and "40%" in text
    assert "blocking syncs per step" in text and "cudaMalloc segments per step" in text


def test_top_ops_per_step() -> None:
    text = _text(render.top_ops_table(_result()))
    assert "top ops by self CPU time (per step)" in text
    assert "aten::conv2d" in text and "4.000" in text and "40.0%" in text


def test_diagnosis_prints_the_verdict_then_other_findings_that_matter() -> None:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render.print_diagnosis(console, _result())
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[:3] == [
        "diagnosis: data-bound",
        "  evidence: 25% of wall time waiting",
        "  next: more workers",
    ]
    assert "  also alloc-bound: many allocations" in lines
    assert "  note: 2 syncs per step" in lines  # sync-bound not firing, but syncs happen
    assert not any("compute-bound" in line for line in lines)


def test_comparison_has_one_row_per_scenario() -> None:
    text = _text(render.comparison_table([_result(), _result(scenario="sync")]))
    assert "ops/step" in text and "kernels/step" not in text
    rows = [line for line in text.splitlines() if "data-bound" in line]
    assert len(rows) == 2 and "sync" in rows[1]
