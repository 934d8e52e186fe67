"""``codedag optimize --batched`` and the chains in ``codedag plan explain``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.experiments import pipelines
from codedag.trace import trace_dataloader


@pytest.fixture(scope="module")
def dag_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    loader = pipelines.make_loader(
        "letterbox", batch_size=3, n=3, seed=0, img_size=32, min_size=24, max_size=40
    )
    tracer, _ = trace_dataloader(loader)
    return tracer.dag.save(tmp_path_factory.mktemp("dag") / "dag.json")


def test_batched_auto_measures_and_explain_shows_the_figures(
    dag_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no call's overhead bounded: its calls' calibration never rules the chain out on the CPU
    monkeypatch.setattr("codedag.calibrate.chains.CALL_OVERHEAD_NS", 10**15)
    out = tmp_path / "auto"
    args = ["optimize", str(dag_file), "-k", "1", "--target-device", "cpu", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "batched execution (auto, on cpu)" in printed
    plan = json.loads((out / "migration_plan.json").read_text())
    (chain,) = plan["batched"]["chains"]
    assert chain["basis"] == "measured" and chain["original_ns"] and chain["batched_ns"]
    assert chain["functions"] == [
        "cv2.GaussianBlur",
        "cv2.copyMakeBorder",
        "cv2.cvtColor",
        "cv2.resize",
    ]
    assert main(["plan", "explain", str(out / "migration_plan.json")]) == 0
    shown = capsys.readouterr().out
    assert "chain0" in shown and "resize > copyMakeBorder" in shown
    assert "measured" in shown and ("slower" in shown or "faster" in shown)


def test_a_chain_its_calls_rule_out_on_the_cpu_is_not_timed_and_explain_says_why(
    dag_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from codedag.calibrate.chains import CALL_OVERHEAD_NS
    from codedag.calibrate.measurement import CallEstimate

    # each call calibrated a hundred times slower through torch, whatever this machine reads
    # (where its calls happen to calibrate close to the libraries, the chain is timed)
    slower = property(lambda estimate: 100 * estimate.original_ns + CALL_OVERHEAD_NS)
    monkeypatch.setattr(CallEstimate, "backend_ns", slower)
    out = tmp_path / "auto"
    args = ["optimize", str(dag_file), "-k", "1", "--target-device", "cpu", "--out", str(out)]
    assert main(args) == 0
    capsys.readouterr()
    (chain,) = json.loads((out / "migration_plan.json").read_text())["batched"]["chains"]
    assert not chain["batched"] and chain["batched_ns"] is None
    assert chain["reason"].startswith("stays per sample: not measured batched: its calls compute")
    assert main(["plan", "explain", str(out / "migration_plan.json")]) == 0
    shown = capsys.readouterr().out  # the reason's column folds it over lines
    assert "chain0" in shown and "not" in shown and "thread(s)" in shown


@pytest.mark.parametrize("mode", ["always", "never"])
def test_batched_forced_is_labelled_assumed(dag_file: Path, tmp_path: Path, mode: str) -> None:
    out = tmp_path / mode
    args = ["optimize", str(dag_file), "-k", "1", "--target-device", "cpu", "--no-calibrate"]
    assert main([*args, "--batched", mode, "--out", str(out)]) == 0
    plan = json.loads((out / "migration_plan.json").read_text())
    assert plan["batched"]["mode"] == mode
    (chain,) = plan["batched"]["chains"]
    assert chain["basis"] == "assumed" and chain["batched"] is (mode == "always")


def test_a_bad_batched_mode_is_a_usage_error(dag_file: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["optimize", str(dag_file), "--batched", "sometimes", "--out", str(tmp_path)])
    assert exited.value.code == 2
