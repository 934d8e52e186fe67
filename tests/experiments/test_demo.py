"""codedag demo end to end with small settings, and its bad-input errors."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from codedag.errors import ConfigError
from codedag.experiments.demo import run_demo
from codedag.experiments.demo_settings import DemoSettings
from codedag.plan import read_plan


def small(task: str, out: Path, tune: bool = True) -> DemoSettings:
    return DemoSettings(
        tune=tune,
        task=task,
        batches=2,
        batch_size=4,
        image_size=48,
        source_size=96,
        out_dir=out,
        check_batches=2,
        device="cpu",
    )


def _consistent(result: object) -> None:
    """Every measured function's decision agrees with what ran and with the verdict."""
    rows = result.placement  # type: ignore[attr-defined]
    migrated = result.migrated_calls  # type: ignore[attr-defined]
    for row in rows:
        if row.placed:
            assert migrated.get(row.function, 0) > 0, row
            assert row.library_ns > row.torch_ns > 0, row
        else:
            assert migrated.get(row.function, 0) == 0, row
    placed = [r.function for r in rows if r.placed]
    verdict = result.verdict  # type: ignore[attr-defined]
    guard = result.guard  # type: ignore[attr-defined]
    switched_off = set(guard.switched_off if guard.enabled else {})
    cache, batched = result.cache, result.batched  # type: ignore[attr-defined]
    if placed and set(placed) <= switched_off:  # the run-time check measured them slower
        assert "switched it back" in verdict and "faster." not in verdict
        assert all(name in verdict for name in placed)
    elif placed:
        assert "The plan moves" in verdict and all(name in verdict for name in placed)
    elif cache is not None and cache.stats is not None and cache.stats.hits:
        assert "prefix cache" in verdict and "same code" not in verdict
        assert "epoch 1 ran" in verdict and "epoch 2" in verdict
    elif batched is not None and batched.stats is not None and batched.stats.batches:
        assert "ran once per batch" in verdict and "same code" not in verdict
    else:
        assert "same code" in verdict and sum(migrated.values()) == 0


@pytest.mark.slow
def test_image_demo_measures_places_and_matches_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import codedag.experiments.demo as demo_module

    written: list[str] = []
    write = demo_module.atomic_write_json

    def recording_write(path: Path, data: object) -> Path:
        written.append(Path(path).name)
        return write(path, data)

    monkeypatch.setattr(demo_module, "atomic_write_json", recording_write)
    stages: list[str] = []
    result = run_demo(small("image", tmp_path), lambda s, d, t: stages.append(s))
    assert written.count("migration_plan.json") == 1  # once, with the warm loader settings
    assert result.equivalence.passed, result.equivalence
    assert result.equivalence.labels_equal and result.equivalence.batches_compared == 2
    measured = {row.function for row in result.placement}
    assert {"cv2.resize", "cv2.warpAffine", "cv2.cvtColor"} <= measured
    (chain,) = result.batched.chains  # resize > cvtColor > [flip] > warpAffine > astype
    assert chain.steps[:2] == ["cv2.resize", "cv2.cvtColor"]
    for row in result.placement:
        if row.function.startswith("cv2."):
            assert row.library_ns > 0 and row.torch_ns > 0  # both timed
    _consistent(result)
    assert [m.mode for m in result.modes] == ["baseline", "optimization"]
    assert set(stages) == {
        "baseline", "trace", "tune", "optimize", "warm", "optimization", "check", "report"
    }  # fmt: skip
    for name in ("results.json", "dag.json", "migration_plan.json", "report.html"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "dag.svg").is_file() or (tmp_path / "dag.dot").is_file()
    assert list((tmp_path / "plots").glob("*.png"))
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["modes"]) == {"baseline", "optimization"}
    text = (tmp_path / "migration_plan.json").read_text()
    plan = json.loads(text)
    assert (
        text == json.dumps(read_plan(tmp_path / "migration_plan.json").to_dict(), indent=2) + "\n"
    )
    assert plan["placement"]["basis"] == "measured" and plan["target_device"] == "cpu"
    assert set(plan["context_device_map"].values()) <= {"cpu"}
    summary = json.loads((tmp_path / "demo_summary.json").read_text())
    assert summary["equivalence"]["passed"] is True and summary["verdict"] == result.verdict
    written = json.loads(json.dumps(result.to_dict()))  # the typed result, as written
    assert {k: v for k, v in summary.items() if k != "files"} == {
        k: v for k, v in written.items() if k != "files"
    }  # files: the summary names itself only after it is written
    assert summary["settings"]["task"] == "image" and summary["placement"][0]["function"]
    assert set(summary["plan_summary"]) == {"contexts_to_migrate", "functions", "notes"}
    assert summary["guard"]["enabled"] in (True, False) and summary["loader"]["chosen"]
    html = (tmp_path / "report.html").read_text()
    assert "library ms/call" in html and result.verdict.split(",")[0] in html
    assert 'class="cv-samples"' in html and "cv2.warpAffine" in html  # the chain view
    assert "first 1 batch(es) of each mode" in html  # warm-up left out, and said
    # the DataLoader was tuned; the plan carries its section and the report shows it
    assert result.loader is not None and plan["loader"]["trials"]
    assert "DataLoader settings" in html and "batches/s" in html
    if plan["loader"]["changed"]:
        assert "the tuned DataLoader" in result.verdict
    # and measured again with the prefix cache warm, for the epochs it serves
    warm = plan["loader"]["warm"]
    assert warm["reason"] and "Epochs the prefix cache serves" in html
    if plan["loader"]["chosen"].get("num_workers"):
        assert warm["hit_rate"] > 0.5 and len(warm["trials"]) == 2
    _batched_consistent(result, plan)
    _cache_consistent(result, tmp_path, html, summary)


def _cache_consistent(result: object, out: Path, html: str, summary: dict) -> None:
    """Two epochs per mode, shown apart; the cache stored in epoch 1, read back in epoch 2, and
    left nothing in shared memory."""
    from codedag.store.tiers import ram_folder

    epochs = [(e.mode, e.epoch) for e in result.epochs]  # type: ignore[attr-defined]
    assert epochs == [("baseline", 1), ("baseline", 2), ("optimization", 1), ("optimization", 2)]
    assert [e["epoch"] for e in summary["epochs"]] == [1, 2, 1, 2]
    assert all(e["samples_per_s"] > 0 for e in summary["epochs"])
    cache = result.cache  # type: ignore[attr-defined]
    (chain,) = [c for c in cache.chains if c.cached]
    assert chain.cut == "cv2.cvtColor" and chain.steps[0] == "numpy.frombuffer"
    stats = cache.stats
    samples = summary["epochs"][2]["samples"]
    # the untimed warm-up sample (``dataset[0]`` before epoch 1) goes through the cache as well:
    # computed and stored first, it is read back in epoch 1. Every new value is stored, or left
    # for epoch 2 by a paced first epoch (docs/cache.md; how many depends on this machine's times)
    later = stats.not_stored_later
    assert later == 0 or cache.first_epoch.startswith("the first epoch stores values while")
    assert stats.hits + sum(stats.misses.values()) == 2 * samples + 1
    assert set(stats.misses) == {"new"} and stats.misses["new"] == stats.stored + later
    assert stats.hits >= samples + 1 - later
    assert "<h2>Epochs</h2>" in html and "<h2>Prefix cache</h2>" in html
    assert "misses: new" in html and "cut after" in html
    tier = ram_folder(out / "prefix-cache")
    assert tier is None or not tier.exists()


def _batched_consistent(result: object, plan: dict) -> None:
    """The demo reports each sample chain's decision; stats exactly when a chain runs batched."""
    batched = result.batched  # type: ignore[attr-defined]
    assert batched.mode == "auto"
    chains = batched.chains
    assert [c.id for c in chains] == [c["id"] for c in plan["batched"]["chains"]]
    for chain in chains:
        assert chain.basis == "measured" and chain.reason, chain
    if any(c.batched for c in chains):
        assert batched.stats.batches > 0 and batched.stats.backend_calls > 0
    else:
        assert batched.stats is None


@pytest.mark.slow
def test_audio_demo_measures_the_librosa_calls(tmp_path: Path) -> None:
    pytest.importorskip("librosa")
    result = run_demo(small("audio", tmp_path, tune=False))
    assert result.equivalence.passed, result.equivalence
    rows = {row.function: row for row in result.placement}
    mel = next(r for name, r in rows.items() if "melspectrogram" in name)
    assert mel.library_ns > 0 and mel.torch_ns > 0, mel
    _consistent(result)
    plan = json.loads((tmp_path / "migration_plan.json").read_text())
    _batched_consistent(result, plan)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"task": "video"}, "task must be"),
        ({"batches": 0}, "batches"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_settings(tmp_path: Path, changes: dict, match: str) -> None:
    settings = small("image", tmp_path)
    for key, value in changes.items():
        setattr(settings, key, value)
    with pytest.raises(ConfigError, match=match):
        settings.validate()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "video"], "task must be one of image, audio"),
        (["--out", "/proc/no-such-place/out"], "cannot write into --out"),
        (["--batches", "0"], "--batches: must be >= 1"),
        (["--sink", "wandb"], "unknown sink 'wandb'"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "codedag", "demo", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_image_demo_with_batched_always_runs_the_chain_batched_and_reports_its_stats(
    tmp_path: Path,
) -> None:
    settings = dataclasses.replace(
        small("image", tmp_path, tune=False), batched="always", sinks=("tensorboard",)
    )
    result = run_demo(settings)
    if importlib.util.find_spec("tensorboard") is not None:  # codedag[tensorboard]
        for mode in ("baseline", "optimization"):
            assert list((tmp_path / "tensorboard" / mode).glob("events.out.tfevents.*")), mode
    assert result.equivalence.passed, result.equivalence  # the verified batched batches
    assert result.batched is not None and result.batched.stats is not None
    (chain,) = result.batched.chains
    assert chain.batched and chain.basis == "assumed"
    stats = result.batched.stats
    assert stats.batches > 0 and stats.samples == stats.batches * settings.batch_size
    steps = len(chain.steps)
    assert 0 < stats.backend_calls <= stats.batches * steps * max(1, stats.groups)


def test_demo_settings_refuse_an_unknown_batched_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="batched must be auto, always or never"):
        dataclasses.replace(small("image", tmp_path), batched="sometimes").validate()


def test_demo_settings_record_sink_uris_without_credentials(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        small("image", tmp_path), sinks=("mlflow:http://me:hunter2@tracking:5000", "tensorboard")
    )
    recorded = settings.to_dict()  # what results.json, demo_summary.json and MLflow get
    assert recorded["sinks"] == ["mlflow:http://me:***@tracking:5000", "tensorboard"]
    assert "hunter2" not in json.dumps(recorded)
    assert recorded["out_dir"] == str(tmp_path)


def test_the_demo_draws_a_coarsened_dag_too_large_for_graphviz_by_its_outer_calls(
    tmp_path, monkeypatch
) -> None:
    from optimize_helpers import add_call, add_value

    from codedag.experiments.demo import draw_dag
    from codedag.graph.model import ExecutionDAG
    from codedag.optimize.coarsen import GraphCoarsening
    from codedag.trace import dot as dot_module

    dag = ExecutionDAG()
    root = add_call(dag, "pkg.load", None, "root", 100, 0)
    for k in range(6):
        step = add_call(dag, f"cv2.step{k}", root, f"root/step{k}", 10, 1)
        add_value(dag, step, 64)
    coarse = GraphCoarsening().coarsen(dag)
    result = {"coarsened_dag": coarse, "optimized_partitions": []}
    drawn: list[str] = []
    monkeypatch.setattr(dot_module, "render_svg", lambda text: drawn.append(text))

    path, svg, dot_text = draw_dag(result, tmp_path, max_nodes=len(coarse.nodes))
    assert path == tmp_path / "dag.dot" and svg is None and drawn == [dot_text]
    assert dot_text.startswith("digraph coarsened") and dot_text.count("ellipse") == 6

    path, svg, dot_text = draw_dag(result, tmp_path, max_nodes=len(coarse.nodes) - 1)
    assert drawn[-1] == dot_text and path.read_text() == dot_text
    assert "calls down to depth 1" in dot_text and "ellipse" not in dot_text
    assert dot_text.count(" [label=") == 7  # the root and its six steps, no values
