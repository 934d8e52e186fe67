"""The run-overhead benchmark: its scripts are valid Python, and its report says when the losses
of two runs differ."""

from __future__ import annotations

import pytest
from bench_loading import load_benchmark


def test_the_scripts_it_writes_compile() -> None:
    bench = load_benchmark("run_overhead")
    kaggle = bench.KAGGLE.format(
        settings={"input_px": 16, "batch_size": 4, "workers": 0, "epochs": 1}
    )
    slices = bench.SLICES.format(settings={"samples": 8, "batch_size": 4, "epochs": 1})
    compile(kaggle, "train.py", "exec")
    compile(slices, "train.py", "exec")


def test_the_report_compares_epochs_runs_and_losses(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_benchmark("run_overhead")

    def run(wall_s: float, wait_s: float, loss: str) -> object:
        return bench.Run(wall_s, [wait_s, wait_s], [1.0, 1.0], [f"epoch 0 loss {loss}"])

    variants = {
        "plain": bench.Variant("plain", [run(10.0, 1.0, "1.5")]),
        "codedag": bench.Variant("codedag", [run(10.5, 0.5, "1.5")]),
    }
    figures = bench.report("t", variants)
    out = capsys.readouterr().out
    assert figures["losses_equal"] is True
    assert "0.500x" in out  # the data wait against plain
    assert "codedag 1.050x" in out  # the whole run against plain
    assert "a 3 % share of a 17 s run" in out
    variants["codedag"].runs.append(run(10.5, 0.5, "1.25"))
    assert bench.report("t", variants)["losses_equal"] is False
    assert "losses the same in every run: NO" in capsys.readouterr().out
