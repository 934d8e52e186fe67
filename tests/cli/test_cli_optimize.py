"""``codedag optimize`` and ``codedag plan explain``: files, tables, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.graph.model import ExecutionDAG
from codedag.optimize.synthetic import trace_shaped_dag
from codedag.plan import LoaderSection


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    return trace_shaped_dag(300, batch_size=8).save(tmp_path / "dag.json")


def test_optimize_writes_the_stage_files_and_explains(
    dag_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["optimize", str(dag_file), "-k", "2", "--gpus", "1", "--assume-speedup", "8"]
    assert main([*args, "--out", str(out), "--explain"]) == 0
    printed = capsys.readouterr().out
    assert "cv2.resize" in printed and "cuda:0" in printed and "ASSUMED" in printed
    plan = json.loads((out / "migration_plan.json").read_text())
    assert plan["gpu_count"] == 1 and plan["context_device_map"]
    assert main(["plan", "explain", str(out / "migration_plan.json"), "--all"]) == 0
    assert "reason" in capsys.readouterr().out


def test_optimize_target_device_cpu(dag_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "cpu"
    args = ["optimize", str(dag_file), "--gpus", "0", "--target-device", "cpu", "--out", str(out)]
    assert main([*args, "--assume-speedup", "8", "--json"]) == 0
    plan = json.loads((out / "migration_plan.json").read_text())
    assert set(plan["context_device_map"].values()) == {"cpu"}


def test_cost_options_change_the_plan(dag_file: Path, tmp_path: Path) -> None:
    slow = tmp_path / "slow"
    args = ["optimize", str(dag_file), "--gpus", "1", "--assume-speedup", "8"]
    fast = tmp_path / "fast"
    assert main([*args, "--out", str(fast)]) == 0
    assert json.loads((fast / "migration_plan.json").read_text())["context_device_map"]
    args += ["--bandwidth-gbps", "0.001"]
    assert main([*args, "--out", str(slow)]) == 0
    assert json.loads((slow / "migration_plan.json").read_text())["context_device_map"] == {}
    with pytest.raises(SystemExit):
        main(["optimize", str(dag_file), "--speedup", "fast"])
    assert main(["optimize", str(dag_file), "--speedup", "0", "--out", str(slow)]) == 2
    assert main(["optimize", str(dag_file), "--assume-speedup", "nan", "--out", str(slow)]) == 2
    assert main(["optimize", str(dag_file), "--margin", "-1", "--out", str(slow)]) == 2


def test_k_larger_than_the_graph_is_clamped(tmp_path: Path) -> None:
    dag = ExecutionDAG()
    dag.add_call(name="pkg.a", context_key="pkg.a#0", total_ns=10, self_ns=10)
    path = dag.save(tmp_path / "tiny.json")
    assert (
        main(["optimize", str(path), "-k", "4", "--gpus", "0", "--out", str(tmp_path / "o")]) == 0
    )
    plan = json.loads((tmp_path / "o" / "migration_plan.json").read_text())
    assert plan["k"] == 1 and any("k=4" in note for note in plan["notes"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "is not JSON: Expecting value at line 1 column 1"),
        ('{"schema_version": 99, "nodes": [], "edges": []}', "newer"),
        ('{"schema_version": 1, "nodes": [{"kind": "call"}], "edges": []}', "malformed"),
        (
            '{"schema_version": 1, "nodes": ['
            '{"kind": "call", "id": 0, "name": "a"}, {"kind": "call", "id": 1, "name": "b"}],'
            ' "edges": [[0, 1, "calls"], [1, 0, "calls"]]}',
            "cycl",
        ),
    ],
)
def test_bad_dag_input_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["optimize", str(path), "--gpus", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codedag optimize: error:") and message in err
    assert "Traceback" not in err and err.count("error:") == 1


def test_k_below_one_and_bad_plan_are_errors(
    dag_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["optimize", str(dag_file), "-k", "0"]) == 2
    assert "-k must be >= 1" in capsys.readouterr().err
    bad = tmp_path / "plan.json"
    bad.write_text('{"schema_version": 1}')
    assert main(["plan", "explain", str(bad)]) == 2
    assert "missing" in capsys.readouterr().err
    bad.write_text('{"schema_version": -1, "context_device_map": {}}')
    assert main(["plan", "explain", str(bad)]) == 2
    assert "positive integer" in capsys.readouterr().err
    assert main(["optimize", str(dag_file), "--target-device", "cuda:-1"]) == 2
    assert "cuda:-1" in capsys.readouterr().err


DEMO_LOADER = "codedag.experiments.pipelines.demo_image:make_loader"
QUICK_TUNE = [
    *("--tune-batches", "2", "--tune-rounds", "1", "--tune-trial-s", "1"),
    *("--tune-budget-s", "5", "--tune-max-workers", "1"),
]


@pytest.mark.slow  # 4-11 s on 2 shared CPUs: a trace, two loader settings, CPU calibration
def test_optimize_tune_traces_tunes_and_plans_every_section_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    args = ["optimize", "--tune", "--dataloader", DEMO_LOADER, "--target-device", "cpu"]
    assert main([*args, "--out", str(out), *QUICK_TUNE]) == 0
    assert (out / "dag.json").exists()  # traced, since no dag.json was given
    plan = json.loads((out / "migration_plan.json").read_text())
    loader = plan["loader"]
    assert {t["settings"]["num_workers"] for t in loader["trials"]} == {0, 1}
    assert all(t["batches"] < 12 for t in loader["trials"])  # fewer than tune's default
    assert plan["calls"] and plan["placement"]["basis"] == "measured"
    assert plan["batched"]["chains"] and plan["cache"]["chains"] and plan["tables"]["runs"]
    assert any("tuned DataLoader" in note for note in plan["notes"])
    printed = capsys.readouterr().out
    sections = [line.split(":", 1)[0] for line in printed.splitlines()]
    for name in ("placement", "batched", "cache", "tables", "loader"):
        assert sections.count(name) == 1, name
    chosen = LoaderSection.model_validate(loader).chosen.label()
    assert f"loader: kept: your settings ({chosen}" in printed or (
        f"loader: applied: {chosen}" in printed
    )
    assert "migration plan:" in printed and "edge cut" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tune"], "--tune needs --dataloader MODULE:FACTORY"),
        (["dag.json", "--tune"], "--tune needs --dataloader MODULE:FACTORY"),
        ([], "give dag.json (from `codedag trace`), or --dataloader"),
        (["--dataloader", DEMO_LOADER, "--tune-rounds", "2"], "--tune-rounds goes with --tune"),
        (["--tune", "--dataloader", DEMO_LOADER, "--loader", "p.json"], "not both"),
        (["--tune", "--dataloader", "no_such_module_xyz:make"], "module 'no_such_module_xyz'"),
    ],
)
def test_optimize_tune_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["optimize", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codedag optimize: error:") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
