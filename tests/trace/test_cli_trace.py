"""``codedag trace``: outputs, summary and one-line errors with exit code 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.graph import ExecutionDAG

HERE = Path(__file__).parent
DATASETS = HERE.parent / "support" / "trace_datasets.py"


def test_traces_a_script_function_and_writes_every_format(tmp_path, capsys) -> None:
    code = main(["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--json", "--top", "100"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    dag = ExecutionDAG.load(tmp_path / "dag.json")
    dag.self_check()
    names = {c["name"] for c in summary["calls"]}
    assert any(n.endswith("ImageDataset.__getitem__") for n in names)
    assert "cv2.resize" in names
    assert summary["stats"]["calls"] == len(list(dag.calls()))
    dot = (tmp_path / "dag.dot").read_text()
    assert dot.startswith("digraph codedag {") and "rank=same" in dot and 'label="produces"' in dot
    svg = tmp_path / "dag.svg"
    written = {Path(p).name for p in summary["written"]}
    assert "dag.svg" in written or "dag.dot" in written
    if svg.exists():
        assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_dataloader_factory_with_tables(tmp_path, capsys) -> None:
    code = main(
        [
            "trace",
            "--dataloader",
            f"{DATASETS}:loader_two_workers",
            "--out",
            str(tmp_path),
            "--format",
            "json",
            "--no-memory",
            "--max-depth",
            "3",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "Calls by self time" in out and "Values by size" in out
    dag = ExecutionDAG.load(tmp_path / "dag.json")
    assert dag.metadata["dataloader"]["reproduced_in_process"] is True
    assert max(c.depth for c in dag.calls()) <= 2
    assert not (tmp_path / "dag.dot").exists()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_xyz:main", "module 'no_such_module_xyz' not found"),
        (f"{HERE}/missing.py:main", "does not exist"),
        (f"{DATASETS}:nothing_here", "has no attribute 'nothing_here'"),
        (f"{DATASETS}:NOT_CALLABLE", "is a int, not callable"),
        (f"{DATASETS}:needs_args", "requires arguments ['x']"),
        (f"{DATASETS}:broken", "raised RuntimeError: decoder exploded"),
        ("no_colon", "names no function"),
    ],
)
def test_bad_targets_give_one_line_and_exit_2(tmp_path, capsys, target, message) -> None:
    code = main(["trace", target, "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("codedag trace: error: ") and message in err


def test_raising_target_keeps_the_partial_dag(tmp_path, capsys) -> None:
    assert main(["trace", f"{DATASETS}:broken", "--out", str(tmp_path), "--format", "dot"]) == 2
    dag = ExecutionDAG.load(tmp_path / "dag.json")
    assert [c.name.rsplit(".", 1)[-1] for c in dag.calls()] == ["broken"]


def test_usage_errors(tmp_path, capsys) -> None:
    assert main(["trace", "--out", str(tmp_path)]) == 2
    assert "exactly one of TARGET or --dataloader" in capsys.readouterr().err
    assert main(["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--format", "png"]) == 2
    assert "--format 'png'" in capsys.readouterr().err


def test_exclude_and_include_prefixes(tmp_path, capsys) -> None:
    args = ["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--format", "json"]
    assert main([*args, "--exclude", "cv2,torch.utils.data.dataloader"]) == 0
    names = {c.name for c in ExecutionDAG.load(tmp_path / "dag.json").calls()}
    assert not any(n.startswith("cv2.") for n in names)
    assert not any(n.startswith("torch.utils.data.dataloader.") for n in names)
    assert any(n.endswith("ImageDataset.__getitem__") for n in names)
    assert main([*args, "--include", "torch.utils.data"]) == 0
    names = [c.name for c in ExecutionDAG.load(tmp_path / "dag.json").calls()]
    # torch.utils.data recorded as user code: its internals (fetch) appear too
    assert any(n.startswith("torch.utils.data._utils.fetch.") for n in names)


def test_warmup_and_line_level_options(tmp_path, capsys) -> None:
    args = ["trace", "--dataloader", f"{DATASETS}:loader_two_workers", "--format", "json"]
    assert main([*args, "--out", str(tmp_path / "a"), "--warmup", "3"]) == 0
    dag = ExecutionDAG.load(tmp_path / "a" / "dag.json")
    assert dag.metadata["dataloader"]["warmup"] == 3
    assert dag.metadata["tracer"]["line_level"] is True
    assert main([*args, "--out", str(tmp_path / "b"), "--no-lines", "--warmup", "0"]) == 0
    dag = ExecutionDAG.load(tmp_path / "b" / "dag.json")
    assert dag.metadata["tracer"]["line_level"] is False
    assert dag.metadata["dataloader"]["warmup"] == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([*args, "--out", str(tmp_path / "c"), "--warmup", "-2"])
    assert exited.value.code == 2
    assert "argument --warmup: must be >= 0 and <= 1000, got -2" in capsys.readouterr().err


def test_a_target_is_warmed_up_before_it_is_traced(tmp_path, capsys, monkeypatch) -> None:
    calls = []
    import trace_datasets

    monkeypatch.setattr(trace_datasets, "counted", lambda: calls.append(1), raising=False)
    code = main(["trace", "trace_datasets:counted", "--out", str(tmp_path), "--format", "json"])
    assert code == 0 and len(calls) == 2  # one warm-up run, one traced


def _trace_coarsened(tmp_path: Path, *extra: str) -> int:
    return main(
        ["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path), "--svg-max-nodes", "5", *extra]
    )


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_a_dag_over_svg_max_nodes_is_drawn_coarsened_and_said_once(tmp_path, capsys) -> None:
    assert _trace_coarsened(tmp_path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (tmp_path / "dag.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    notes = [line for line in lines if line.startswith("dag.svg is coarsened")]
    assert len(notes) == 1
    assert f"the DAG node by node is in {tmp_path / 'dag.dot'}" in notes[0]
    wrote = [line for line in lines if line.startswith("wrote ")]
    assert sorted(wrote) == sorted(set(wrote))
    assert {line.rsplit("/", 1)[-1] for line in wrote} == {"dag.json", "dag.dot", "dag.svg"}
    assert not (tmp_path / "dag.coarsened.dot").exists()


def test_without_dot_the_coarsened_drawing_is_kept_as_dot(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))
    assert _trace_coarsened(tmp_path / "out", "--json") == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    out = tmp_path / "out"
    assert summary["drawing"]["coarsened"] is True
    assert summary["drawing"]["nodes"] <= 5 < summary["drawing"]["dag_nodes"]
    assert summary["drawing"]["full_dot"] == str(out / "dag.dot")
    written = [Path(p).name for p in summary["written"]]
    assert sorted(written) == ["dag.coarsened.dot", "dag.dot", "dag.json"]
    assert not (out / "dag.svg").exists()
    assert "coarsened:" in (out / "dag.coarsened.dot").read_text()
    assert "rank=same" in (out / "dag.dot").read_text()  # the full DAG, node by node
    assert "dot -Tsvg" in captured.err and "dag.coarsened.dot" in captured.err


def test_svg_only_writes_the_full_dot_beside_a_coarsened_drawing(tmp_path, capsys) -> None:
    assert _trace_coarsened(tmp_path, "--format", "svg", "--json") == 0
    written = [Path(p).name for p in json.loads(capsys.readouterr().out)["written"]]
    assert written.count("dag.dot") == 1 and "dag.json" not in written
    assert (tmp_path / "dag.dot").is_file()
