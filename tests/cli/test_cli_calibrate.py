"""``codedag calibrate`` and calibration through ``codedag optimize``: tables, cache, errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from torch.utils.data import DataLoader, Dataset

from codedag.cli.main import main
from codedag.trace import trace_dataloader


class _Letterbox(Dataset):
    """Decode-free letterbox: resize keeping the aspect ratio, pad, BGR->RGB, blur."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> np.ndarray:
        img = np.full((90 + 10 * i, 120, 3), i * 20, np.uint8)
        return letterbox(img)


def letterbox(img: np.ndarray, size: int = 64) -> np.ndarray:
    h, w = img.shape[:2]
    r = size / max(h, w)
    resized = cv2.resize(img, (round(w * r), round(h * r)), interpolation=cv2.INTER_LINEAR)
    dh, dw = size - resized.shape[0], size - resized.shape[1]
    padded = cv2.copyMakeBorder(
        resized, dh // 2, dh - dh // 2, dw // 2, dw - dw // 2, cv2.BORDER_CONSTANT,
        value=(114, 114, 114),
    )  # fmt: skip
    rgb = cv2.cvtColor(padded, cv2.COLOR_BGR2RGB)
    return cv2.GaussianBlur(rgb, (3, 3), 0)


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    tracer, _ = trace_dataloader(DataLoader(_Letterbox(), batch_size=4))
    return tracer.dag.save(tmp_path / "dag.json")


def test_calibrate_prints_the_table_and_fills_the_cache(
    dag_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    assert main(["calibrate", str(dag_file), "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    for name in ("cv2.resize", "cv2.copyMakeBorder", "cv2.cvtColor", "cv2.GaussianBlur"):
        assert name in out
    assert "library ms" in out and "torch ms" in out and "none cached" in out
    assert (cache / "calibration.json").is_file()
    assert main(["calibrate", str(dag_file), "--cache-dir", str(cache), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["measurements"]
    assert {r["function"] for r in rows} >= {"cv2.resize", "cv2.cvtColor"}
    assert all(r["original"]["median_ns"] > 0 for r in rows if r["error"] is None)
    assert main(["calibrate", str(dag_file), "--cache-dir", str(cache)]) == 0
    assert "0 measured" in capsys.readouterr().out


def test_optimize_measures_records_the_figures_and_explains_them(
    dag_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    args = ["optimize", str(dag_file), "--target-device", "cpu", "--out", str(out)]
    assert main([*args, "--cache-dir", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr().out
    assert "decided from measurements on" in printed
    plan = json.loads((out / "migration_plan.json").read_text())
    assert plan["placement"]["basis"] == "measured"
    measured = [c for c in plan["calls"] if c["function"] == "cv2.resize"]
    assert measured and all(c["original_ns"] and c["backend_ns"] for c in measured)
    assert all(c["basis"] == "measured" and "measured" in c["reason"] for c in measured)
    assert main(["plan", "explain", str(out / "migration_plan.json")]) == 0
    explained = capsys.readouterr().out
    assert "library ms/call" in explained and "torch ms/call" in explained
    assert main([*args, "--exclude", "cv2.resize", "--cache-dir", str(tmp_path / "c")]) == 0
    plan = json.loads((out / "migration_plan.json").read_text())
    resize = next(c for c in plan["calls"] if c["function"] == "cv2.resize")
    assert "excluded by the user" in resize["reason"] and plan["placement"]["exclude"] == [
        "cv2.resize"
    ]


def test_five_traces_of_the_same_pipeline_give_the_same_placed_set(tmp_path: Path) -> None:
    from codedag.calibrate import CalibrationCache
    from codedag.optimize.manager import OptimizerManager

    cache = CalibrationCache(tmp_path / "calibration.json")
    placed_sets = []
    for _ in range(5):
        tracer, _ = trace_dataloader(DataLoader(_Letterbox(), batch_size=4))
        plan = OptimizerManager(
            k=2, target_device="cpu", calibration_options={"cache": cache}
        ).optimize(tracer.dag)["migration_plan"]
        placed_sets.append(frozenset(c["function"] for c in plan["calls"] if c["migrate"]))
    assert len(set(placed_sets)) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cuda:-1"], "--device"),
        (["--device", "tpu"], "--device"),
    ],
)
def test_bad_calibrate_input_is_one_line(
    dag_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["calibrate", str(dag_file), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_calibrate_on_a_missing_gpu_is_one_line(
    dag_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA exists here")
    assert main(["calibrate", str(dag_file), "--device", "cuda:0"]) == 2
    assert "does not exist here" in capsys.readouterr().err
