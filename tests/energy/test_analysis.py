"""Session analysis: Pareto front and plots of energy against hyperparameters and quality."""

from __future__ import annotations

import json
from pathlib import Path

from codedag.cli.main import main
from codedag.energy.analysis import pareto_front


def test_pareto_front() -> None:
    points = [(10.0, 0.9), (5.0, 0.8), (7.0, 0.7), (12.0, 0.95), (5.0, 0.6), (20.0, 0.95)]
    assert pareto_front(points) == [1, 0, 3]
    losses = [(1.0, 3.0), (2.0, 1.0), (3.0, 2.0)]
    assert pareto_front(losses, maximize=False) == [0, 1]


def write_session(folder: Path) -> None:
    for i, (lr, cpu, gpu, acc) in enumerate(
        [(0.01, 10.0, 100.0, 80.0), (0.1, 12.0, 90.0, 85.0), (0.05, 20.0, 150.0, 70.0)], 1
    ):
        exp = folder / f"toy_m_{i:03d}"
        exp.mkdir(parents=True)
        record = {
            "experiment_id": exp.name,
            "repository": "toy",
            "model": "m",
            "training_success": True,
            "duration_seconds": 1.0 + i,
            "hyperparameters": {"learning_rate": lr, "epochs": 2},
            "mutated_hyperparameters": ["learning_rate"],
            "performance_metrics": {"accuracy": acc, "loss": 1.0 / acc},
            "energy_metrics": {"cpu_energy_total_joules": cpu, "gpu_energy_total_joules": gpu},
        }
        (exp / "experiment.json").write_text(json.dumps(record))
    failed = folder / "toy_m_004"
    failed.mkdir()
    (failed / "experiment.json").write_text(json.dumps({**record, "training_success": False}))


def test_report_plots_and_front(tmp_path: Path, capsys) -> None:
    session = tmp_path / "run_1"
    write_session(session)
    assert main(["mutate", "--report", str(session), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["experiments_plotted"] == 3
    assert summary["energy_axis"] == "energy CPU+GPU (J)"
    assert summary["metric"] == "accuracy" and summary["pareto_front"] == ["toy_m_002"]
    names = sorted(Path(f).name for f in summary["files"])
    assert names == ["energy_vs_accuracy.png", "energy_vs_learning_rate.png"]
    assert all(Path(f).stat().st_size > 1000 for f in summary["files"])
    assert main(["mutate", "--report", str(session), "--metric", "nope"]) == 2
