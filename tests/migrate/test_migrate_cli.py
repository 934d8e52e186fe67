"""``codedag migrate PLAN -- python script.py``: in-process run, restore, counters, exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from migrate_support import plan_for

from codedag.cli.main import main
from codedag.cli.migrate import parse_command
from codedag.errors import UsageError

SCRIPT = """
import sys
import numpy as np

def main():
    x = np.linspace(-1, 2, 30, dtype=np.float32)
    y = np.clip(x, 0.0, 1.0)
    assert type(y) is np.ndarray and y.dtype == np.float32
    print("ARGV", sys.argv[1:], float(y.sum()))
    sys.exit(int(sys.argv[1]))

if __name__ == "__main__":
    main()
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_for({"__main__.main#0/numpy.clip#0": "cpu"})))
    return plan, script


def test_runs_the_script_with_the_plan_and_restores(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, script = files
    original = np.clip
    stats_file = tmp_path / "stats.json"
    code = main(
        ["migrate", str(plan), "--stats-out", str(stats_file), "--", "python", str(script), "3"]
    )
    assert code == 3  # the script's exit code
    out = capsys.readouterr()
    assert "ARGV ['3']" in out.out
    assert "numpy.clip" in out.err  # the counters table
    assert np.clip is original
    stats = json.loads(stats_file.read_text())
    assert stats["functions"]["numpy.clip"]["migrated"] == 1
    assert stats["functions"]["numpy.clip"]["match_levels"] == {"name": 1}


def test_json_output_and_module_form(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, script = files
    monkeypatch.chdir(script.parent)
    assert main(["migrate", str(plan), "--json", "--", sys.executable, "-m", "train", "0"]) == 0
    printed = capsys.readouterr().out
    stats = json.loads(printed[printed.index("{") :])
    assert stats["totals"]["migrated"] == 1 and not stats["applied"]


def test_bad_input_is_one_line_and_exit_2(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, script = files
    assert main(["migrate", str(tmp_path / "none.json"), "--", "python", str(script)]) == 2
    assert "none.json: no such file" in capsys.readouterr().err
    assert main(["migrate", str(plan)]) == 2
    assert "expected a command after --" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"context_device_map": {"a#0/numpy.clip#0": 7}}))
    assert main(["migrate", str(broken), "--", "python", str(script), "0"]) == 2
    assert "malformed migration plan" in capsys.readouterr().err


def test_parse_command() -> None:
    assert parse_command(["--", "python", "-m", "pkg.train", "-x"]) == (
        "module",
        "pkg.train",
        ["pkg.train", "-x"],
    )
    with pytest.raises(UsageError, match="not a Python script"):
        parse_command(["--", "torchrun", "--nproc_per_node=2", "train.py"])
    with pytest.raises(UsageError, match="does not exist"):
        parse_command(["missing_script.py"])


def test_help_and_options_before_the_plan(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    plan, script = files
    with pytest.raises(SystemExit) as done:
        main(["migrate", "--help"])
    assert done.value.code == 0
    assert "python train.py" in capsys.readouterr().out
    assert main(["migrate", "--json", "--device", "cpu", str(plan), str(script), "0"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{") :])["device_map"] == {"cpu": "cpu"}
