"""``codedag tune``: the table, the choice, the plan written (new and existing), errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from codedag.cli.main import main

PIPELINE = textwrap.dedent(
    """
    import time

    import torch
    from torch.utils.data import DataLoader, Dataset


    class Sleepy(Dataset):
        def __len__(self):
            return 256

        def __getitem__(self, index):
            time.sleep(0.003)
            return torch.full((2,), float(index))


    def make_loader():
        return DataLoader(Sleepy(), batch_size=4)


    def train():
        for _batch in make_loader():
            break
        return "done"


    def nothing():
        return 42
    """
)

QUICK = ["--batches", "6", "--rounds", "2", "--trial-s", "1", "--max-workers", "1"]


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "sleepy_pipeline.py"
    path.write_text(PIPELINE)
    return path


def test_tune_prints_the_table_and_writes_a_new_plan(
    pipeline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    code = main(["tune", "--dataloader", f"{pipeline}:make_loader", "--plan", str(plan), *QUICK])
    assert code == 0
    out = capsys.readouterr().out
    assert "DataLoader settings measured" in out and "batches/s" in out
    assert "in-process (0 workers)" in out and "1 worker x 1 thread" in out
    assert "choice:" in out and "reason:" in out and "CPU limit" in out
    assert "(new plan)" in out
    data = json.loads(plan.read_text())
    assert data["context_device_map"] == {}
    assert data["loader"]["trials"] and data["loader"]["yours"]["num_workers"] == 0
    assert data["loader"]["draws"] == []  # the samples were probed: they draw nothing


@pytest.mark.slow
def test_tune_a_target_updates_an_existing_plan_and_prints_json(
    pipeline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    existing = {
        "schema_version": 2,
        "context_device_map": {"f/cv2.resize#0": "cpu"},
        "calls": [{"function": "cv2.resize", "context_keys": ["f/cv2.resize#0"]}],
        "notes": ["kept"],
    }
    plan.write_text(json.dumps(existing))
    args = ["tune", f"{pipeline}:train", "--plan", str(plan), "--json", "--step-ms", "10"]
    assert main([*args, *QUICK, "--fix", "prefetch_factor", "--override", "num_workers"]) == 0
    section = json.loads(capsys.readouterr().out)
    assert section["step_ms"] == pytest.approx(10.0) and section["step_source"] == "--step-ms"
    assert section["fixed"] == ["prefetch_factor"] and section["override"] == ["num_workers"]
    written = json.loads(plan.read_text())
    assert written["context_device_map"] == existing["context_device_map"]
    assert written["notes"] == ["kept"] and written["loader"] == section


@pytest.mark.slow
def test_the_step_time_can_come_from_a_monitored_run(
    pipeline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            {
                "experiment_name": "x",
                "modes": {"baseline": {"summary": {"batch_time": {"p50": 0.008}}}},
            }
        )
    )
    args = ["tune", "--dataloader", f"{pipeline}:make_loader", "--no-write", "--json"]
    assert main([*args, "--step-from", str(results), *QUICK]) == 0
    section = json.loads(capsys.readouterr().out)
    assert section["step_ms"] == pytest.approx(8.0)
    assert "baseline" in section["step_source"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "exactly one of TARGET or --dataloader"),
        (["--dataloader", "{p}:nothing"], "created no DataLoader"),
        (["--dataloader", "{p}:make_loader", "--fix", "workers=2"], "unknown setting"),
        (["--dataloader", "{p}:make_loader", "--batches", "0"], "--batches must be >= 1"),
        (["--dataloader", "{p}:make_loader", "--step-ms", "-3"], "--step-ms must be"),
        (["--dataloader", "{p}:make_loader", "--device", "cuda:7"], "--device cuda:7"),
        (["--dataloader", "{p}:make_loader", "--device", "bogus"], "'bogus' is not a device"),
        (["--dataloader", "{p}:make_loader", "--max-workers", "1000000"], "the limit here"),
        (["--dataloader", "{p}:make_loader", "--fix", "num_workers=1000000"], "<= 1024"),
        (["--dataloader", "{p}:make_loader", "--fix", "num_workers=999"], "4 per CPU"),
        (["--dataloader", "{p}:make_loader", "--fix", "threads=999"], "one thread per CPU"),
        (["--dataloader", "{p}:make_loader", "--fix", "prefetch_factor=10**9"], "an integer"),
        (["--dataloader", "{p}:make_loader", "--fix", "prefetch_factor=1000"], "<= 64"),
        (["--dataloader", "{p}:make_loader", "--plan", "{bad}"], "malformed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    pipeline: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    bad = tmp_path / "bad_plan.json"
    bad.write_text(json.dumps({"context_device_map": {"k": "gpu"}}))
    words = [w.format(p=pipeline, bad=bad) for w in extra]
    assert main(["tune", *words, "--no-write" if "--plan" not in words else "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert json.loads(bad.read_text()) == {"context_device_map": {"k": "gpu"}}  # untouched


def test_codedag_migrate_applies_the_loader_section_to_the_scripts_dataloaders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.plan import LoaderSection, LoaderSettings

    script = tmp_path / "train.py"
    out = tmp_path / "seen.json"
    script.write_text(
        textwrap.dedent(
            f"""
            import json
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            data = TensorDataset(torch.arange(8.0))
            default = DataLoader(data, batch_size=2)
            explicit = DataLoader(data, batch_size=2, num_workers=0)
            total = sum(float(b[0].sum()) for b in default)
            json.dump(
                {{"default": default.num_workers, "explicit": explicit.num_workers,
                  "total": total}},
                open({str(out)!r}, "w"),
            )
            """
        )
    )
    section = LoaderSection(
        chosen=LoaderSettings(num_workers=1, threads=1),
        yours=LoaderSettings(),
        changed=["num_workers", "threads"],
        dataset="torch.utils.data.dataset.TensorDataset",
        draws=[],  # no sample draws: the explicit worker count is replaced too
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"context_device_map": {}, "loader": section.model_dump()}))
    stats = tmp_path / "stats.json"
    code = main(["migrate", str(plan), "--stats-out", str(stats), "--", "python", str(script)])
    assert code == 0
    seen = json.loads(out.read_text())
    assert seen == {"default": 1, "explicit": 1, "total": 28.0}
    loader_stats = json.loads(stats.read_text())["loader"]
    assert loader_stats["applied"] == 2 and loader_stats["overridden"] == {"num_workers": 1}


def test_plan_explain_shows_the_loader_choice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.plan import LoaderSection, LoaderSettings

    section = LoaderSection(
        chosen=LoaderSettings(num_workers=2, threads=1),
        yours=LoaderSettings(),
        changed=["num_workers", "threads"],
        reason="measured 2.1x",
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"context_device_map": {}, "loader": section.model_dump()}))
    assert main(["plan", "explain", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "loader: 2 workers x 1 thread: measured 2.1x" in out
    # a plan written before the draws were probed: the worker count is kept, and explain says so
    assert "warning: loader: not applied: num_workers stay as your DataLoader sets them" in out


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_plan_that_caches_gets_settings_measured_with_the_cache_warm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefix_support import cache_section, write_images

    images = write_images(tmp_path / "images", n=16)
    pipeline = tmp_path / "cached_pipeline.py"
    pipeline.write_text(
        "from prefix_support import FileImages\n"
        "from torch.utils.data import DataLoader\n\n"
        f"def make_loader():\n    return DataLoader(FileImages({images!r}), batch_size=4)\n"
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"context_device_map": {}, "cache": cache_section()}))
    args = ["tune", "--dataloader", f"{pipeline}:make_loader", "--plan", str(plan), *QUICK]
    assert main([*args, "--fix", "num_workers=1"]) == 0
    assert "epochs the prefix cache serves:" in capsys.readouterr().out
    warm = json.loads(plan.read_text())["loader"]["warm"]
    assert [t["settings"]["num_workers"] for t in warm["trials"]] == [1, 0]
    assert warm["batches"] == 4 and "with the cache warm" in warm["reason"]
    assert main([*args, "--fix", "num_workers=1", "--no-warm"]) == 0
    assert json.loads(plan.read_text())["loader"]["warm"] is None
