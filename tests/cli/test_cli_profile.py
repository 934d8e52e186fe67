"""``codedag profile`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codedag.cli.main import build_parser, main

SMALL = [
    "--device",
    "cpu",
    "--batch-size",
    "8",
    "--image_size",
    "32",
    "--dataset-size",
    "32",
    "--warmup_steps",
    "1",
    "--profile-steps",
    "2",
    "--timed_steps",
    "2",
]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_both_spellings_and_defaults() -> None:
    parser = build_parser()
    args = parser.parse_args(["profile"])
    assert (args.scenario, args.device, args.batch_size, args.num_workers) == (None, "cuda", 64, 2)
    assert (args.warmup_steps, args.profile_steps, args.image_size) == (10, 8, 224)
    assert args.output_json == "results/metrics_demo.json"
    assert args.persistent_workers is True
    underscore = parser.parse_args(["profile", "--batch_size", "4", "--pin_memory", "--with_stack"])
    dashed = parser.parse_args(["profile", "--batch-size", "4", "--pin-memory", "--with-stack"])
    for args in (underscore, dashed):
        assert args.batch_size == 4 and args.pin_memory and args.with_stack
    assert parser.parse_args(["profile", "--no-persistent-workers"]).persistent_workers is False


@pytest.mark.skipif(_cuda(), reason="checks the message shown without CUDA")
def test_cuda_default_without_cuda_is_one_line_and_exit_2(capsys: pytest.CaptureFixture) -> None:
    assert main(["profile", "--scenario", "sync"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("codedag profile: error: --device cuda")
    assert "--device cpu" in err[0]


def test_scenario_and_target_together_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["profile", "--scenario", "sync", "--target", "m:f", "--device", "cpu"]) == 2
    assert "either --scenario or --target" in capsys.readouterr().err


def test_bad_value_is_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["profile", *SMALL, "--batch-size", "0", "--trace-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "argument --batch_size/--batch-size: must be >= 1 and <= 65536, got 0" in line


def test_dataloader_with_workers_writes_trace_json_and_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out_json = tmp_path / "metrics.json"
    code = main(
        [
            "profile",
            "--scenario",
            "dataloader",
            *SMALL,
            "--num-workers",
            "2",
            "--trace_dir",
            str(tmp_path / "traces"),
            "--output-json",
            str(out_json),
        ]
    )
    assert code == 0
    stdout = capsys.readouterr().out
    assert "diagnosis:" in stdout and "top ops by self CPU time" in stdout
    document = json.loads(out_json.read_text())
    for field in ("scenario", "batch_size", "num_workers", "pin_memory", "amp", "trace_dir"):
        assert field in document
    assert document["num_workers"] == 2
    assert document["avg_dataloader_wait_s"] >= 0 and document["avg_step_time_s"] > 0
    assert document["config"]["persistent_workers"] is True
    assert Path(document["trace_path"]).is_file()


def test_json_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(
        [
            "profile",
            "--scenario",
            "sync",
            *SMALL,
            "--num_workers",
            "0",
            "--trace-dir",
            str(tmp_path),
            "--output-json",
            "",
            "--json",
            "--tensorboard",
        ]
    )
    assert code == 0
    # the trace, and a copy under the name TensorBoard's profiler plugin reads
    assert len(list(tmp_path.glob("*.pt.trace.json"))) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["scenario"] == "sync"
    assert document["figures"]["syncs_per_step"] == 4
    assert not list(tmp_path.glob("*.json.tmp"))


@pytest.mark.slow
def test_all_scenarios_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out_json = tmp_path / "all.json"
    tiny = ["--batch-size", "4", "--image-size", "16", "--dataset-size", "16", "--num-workers", "0"]
    steps = ["--warmup-steps", "1", "--profile-steps", "1", "--timed-steps", "1"]
    paths = ["--trace-dir", str(tmp_path), "--output-json", str(out_json)]
    code = main(["profile", "--scenario", "all", "--device", "cpu", *tiny, *steps, *paths])
    assert code == 0
    assert "scenarios side by side" in capsys.readouterr().out
    runs = json.loads(out_json.read_text())["runs"]
    assert [r["scenario"] for r in runs] == ["dataloader", "sync", "tiny_ops", "memory_churn"]
    assert len(list(tmp_path.glob("*.cpu.pt.trace.json"))) == 4


def test_target_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import sys

    (tmp_path / "cli_user_step.py").write_text(
        "import torch\n"
        "def make():\n"
        "    x = torch.randn(32, 32)\n"
        "    return lambda: (x @ x).sum().item()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cli_user_step", raising=False)
    code = main(["profile", "--target", "cli_user_step:make", *SMALL, "--trace-dir", "t", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["target"] == "cli_user_step:make"
    assert document["figures"]["syncs_per_step"] == 1
    assert Path("results/metrics_demo.json").is_file()  # the seed's default path, in tmp_path
