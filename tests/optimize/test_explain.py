"""Explain tables: a library call's internal calls grouped under it, candidates first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from codedag.cli.main import main
from codedag.errors import SchemaError
from codedag.optimize.explain import (
    SECTION_ROWS,
    cache_table,
    chains_table,
    group_calls,
    plan_table,
    random_draw_lines,
    section_lines,
)
from codedag.plan import MigrationPlan

ROOT = "torch.utils.data.dataloader._BaseDataLoaderIter.__next__#0"
SAMPLE = f"{ROOT}/mydata.AudioDataset.__getitem__#0"
MEL = f"{SAMPLE}/librosa.feature.melspectrogram#0"
UA = "scipy.fft._backend._ScipyBackend.__ua_function__"
COLLATE = f"{ROOT}/torch.utils.data._utils.collate.default_collate#0"


def call(key: str, ms: float, **extra: Any) -> dict[str, Any]:
    function = key.rsplit("/", 1)[-1].rsplit("#", 1)[0]
    return {
        "function": function,
        "context_keys": [key],
        "instance_count": 1,
        "device": "cpu",
        "migrate": False,
        "measured_ns": int(ms * 1e6),
        "reason": f"no torch backend for {function}",
        **extra,
    }


def librosa_plan() -> dict[str, Any]:
    calls = [
        call(ROOT, 40.0),
        call(SAMPLE, 30.0),
        call(MEL, 25.0, original_ns=3_000_000, backend_ns=2_000_000, reason="measured"),
        *[call(f"{MEL}/{UA}#{i}", 1.0) for i in range(8)],
        call(f"{MEL}/numpy.pad#0", 0.5, original_ns=40_000, backend_ns=90_000, reason="slower"),
        call(f"{SAMPLE}/librosa.load#0", 4.0),
        call(COLLATE, 2.0),
        call(f"{COLLATE}/torch.stack#0", 1.5),
        call(f"{SAMPLE}/cv2.resize#0", 0.2, migrate=True, device="cuda:0", reason="saves"),
    ]
    return {"calls": calls, "context_device_map": {}, "target_device": "cuda:0"}


def can_migrate(name: str) -> bool:
    return name in {"librosa.feature.melspectrogram", "numpy.pad", "cv2.resize"}


def is_library(top: str) -> bool:
    return top != "mydata"


def test_internal_calls_group_under_the_outermost_library_call() -> None:
    groups = group_calls(MigrationPlan.from_dict(librosa_plan()), can_migrate, is_library)
    names = [g.call.function for g in groups]
    assert names[:2] == ["cv2.resize", "librosa.feature.melspectrogram"]  # placed, candidates
    mel = groups[1]
    assert [c.function for c in mel.inside] == [UA] * 8 + ["numpy.pad"]
    collate = next(g for g in groups if g.call.function.endswith("default_collate"))
    assert [c.function for c in collate.inside] == ["torch.stack"]
    assert UA not in names and "torch.stack" not in names
    # frames (the loader's batch, the dataset's sample) and user code own nothing
    assert "mydata.AudioDataset.__getitem__" in names and "librosa.load" in names
    assert sum(1 + len(g.inside) for g in groups) == len(librosa_plan()["calls"])


def render(table: Any) -> str:
    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()


def test_the_table_shows_groups_and_all_shows_every_row(monkeypatch: Any) -> None:
    import codedag.optimize.explain as explain

    monkeypatch.setattr(
        explain, "group_calls", lambda plan: group_calls(plan, can_migrate, is_library)
    )
    plan = MigrationPlan.from_dict(librosa_plan())
    text = render(plan_table(plan))
    assert text.count(UA) == 1 and f"{UA} x8" in text
    assert "└ numpy.pad" in text  # a candidate inside stays visible
    assert "9 call(s) grouped under" in text  # 8 in the mel, torch.stack in collate
    assert text.index("cv2.resize") < text.index("librosa.feature.melspectrogram")
    everything = render(plan_table(plan, limit=None, show_all=True))
    assert everything.count("└ ") == 10 and "grouped" not in everything  # every call a row


def test_plan_explain_groups_and_all_lists(tmp_path: Path, capsys: Any) -> None:
    plan = librosa_plan()
    plan.update(schema_version=2, k=1)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["plan", "explain", str(path)]) == 0
    grouped = capsys.readouterr().out
    assert main(["plan", "explain", str(path), "--all"]) == 0
    every = capsys.readouterr().out
    assert "8 call(s) inside" in grouped and grouped.count("└ ") == 3  # numpy.pad, two groups
    assert every.count("└ ") == 10 and "call(s) inside" not in every  # every call a row


def test_a_placed_random_draw_is_one_line_unless_opted_in() -> None:
    plan = {
        "context_device_map": {"a.f#0/numpy.random.rand#0": "cpu", "a.f#0/cv2.resize#0": "cpu"},
        "calls": [
            call("a.f#0/numpy.random.rand#0", 1.0, migrate=True),
            call("a.f#0/numpy.random.rand#1", 1.0, migrate=True),
            call("a.f#0/numpy.random.normal#0", 1.0),  # kept on the CPU by the plan
            call("a.f#0/cv2.resize#0", 1.0, migrate=True),
        ],
    }
    lines = random_draw_lines(MigrationPlan.from_dict(plan))
    assert len(lines) == 1 and lines[0].startswith("numpy.random.rand draws random numbers")
    assert "runs it with its library" in lines[0] and "would change the data" in lines[0]
    plan["placement"] = {"only": ["numpy.random.rand"]}
    assert random_draw_lines(MigrationPlan.from_dict(plan)) == []


def test_plan_explain_warns_of_each_placed_random_draw(tmp_path: Path, capsys: Any) -> None:
    key = "a.f#0/numpy.random.Generator.normal#0"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"context_device_map": {key: "cpu"}}))
    assert main(["plan", "explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning: numpy.random.Generator.normal draws random numbers" in out
    assert "runs it with its library" in out


def test_long_section_tables_show_their_first_rows_and_count_the_rest() -> None:
    chains = [{"id": f"chain{i}", "steps": ["cv2.resize"], "batched": False} for i in range(80)]
    cache = {"chains": [c | {"source_function": "cv2.imread"} for c in chains]}
    plan = MigrationPlan.from_dict(
        {"context_device_map": {}, "batched": {"chains": chains}, "cache": cache}
    )
    for make in (chains_table, cache_table):
        text = render(make(plan))
        assert "chain49 " in text and "chain50 " not in text
        assert "... and 30 more chain(s); --all shows every one" in text
        every = render(make(plan, None))
        assert "chain79 " in every and "more chain(s)" not in every
    assert "more chain(s)" not in render(chains_table(plan, 80))  # nothing left out, no line


def test_plan_explain_summarizes_a_long_lookup_table_section(tmp_path: Path, capsys: Any) -> None:
    plan = librosa_plan()
    run = {"producer": "cv2.warpAffine", "calls": ["numpy.add"], "consumer": "numpy.transpose"}
    plan.update(
        schema_version=2,
        k=1,
        tables={"runs": [run | {"traced_ns": 1_000 * (i + 1)} for i in range(SECTION_ROWS + 70)]},
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["plan", "explain", str(path)]) == 0
    shown = capsys.readouterr().out
    assert shown.count("numpy.transpose") == SECTION_ROWS
    assert "... and 70 more run(s); --all shows every one" in shown
    assert main(["plan", "explain", str(path), "--all"]) == 0
    every = capsys.readouterr().out
    assert every.count("numpy.transpose") == SECTION_ROWS + 70 and "more run(s)" not in every


def test_plan_explain_says_why_no_chain_is_cached_one_line_per_candidate(
    tmp_path: Path, capsys: Any
) -> None:
    from codedag.plan.cache import CacheSection

    reason = "the first call numpy.loadtxt takes fname='t.csv', which is not a file"
    plan = librosa_plan()
    plan.update(
        schema_version=2,
        k=1,
        cache={
            "chains": [{"id": "prefix0", "source_function": "cv2.imread", "reason": "too dear"}],
            "skipped": [{"function": "numpy.loadtxt", "caller": "data.T.get", "reason": reason}],
        },
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["plan", "explain", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "prefix cache: " in line]
    assert lines == [
        "prefix cache: prefix0 (cv2.imread): too dear",
        f"prefix cache: in data.T.get: {reason}",
    ]
    # a plan written before the reasons were recorded loads without them
    assert CacheSection.model_validate({"chains": []}).skipped == []


def cached_plan() -> dict[str, Any]:
    plan = librosa_plan()
    chain = {"id": "prefix0", "source_function": "cv2.imread", "cached": True, "reason": "cut"}
    plan.update(
        schema_version=2,
        k=1,
        cache={"chains": [chain], "bytes_total": 3_100_000, "saved_ns_per_sample": 12_800_000},
    )
    return plan


def test_the_prefix_cache_title_gives_the_saving_per_sample_in_ms(
    tmp_path: Path, capsys: Any
) -> None:
    title = render(cache_table(MigrationPlan.from_dict(cached_plan()))).splitlines()[0]
    assert "saves 12.8 ms per sample" in title  # the figure was printed without its unit
    # a section written without the figure loads with 0 (the model has no unmeasured saving)
    unmeasured = MigrationPlan.from_dict({"context_device_map": {}, "cache": {"chains": []}})
    assert "saves 0 ms per sample" in " ".join(render(cache_table(unmeasured)).split())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(cached_plan()))
    assert main(["plan", "explain", str(path)]) == 0
    line = next(t for t in capsys.readouterr().out.splitlines() if "prefix cache (" in t)
    assert "3.1 MB, saves 12.8 ms per sample" in line


def test_one_line_per_section_applied_or_kept_with_its_units() -> None:
    plan = cached_plan()
    plan["context_device_map"] = {MEL: "cuda:0"}
    plan["batched"] = {"chains": [{"id": "chain0", "batched": False}]}
    lines = section_lines(MigrationPlan.from_dict(plan))
    assert [line.split(":", 1)[0] for line in lines] == [
        "placement",
        "batched",
        "cache",
        "tables",
        "loader",
    ]
    assert lines[0] == "placement: applied: 1 call context(s) run on cuda:0"
    assert lines[1].startswith("batched: kept: 1 chain(s) run per sample")
    assert lines[2] == (
        "cache: applied: 1 chain(s) cached, 3.1 MB, saves 12.8 ms per sample from epoch 2"
    )
    assert lines[3].startswith("tables: kept:") and lines[4].startswith("loader: kept: not tuned")
    del plan["cache"]
    assert section_lines(MigrationPlan.from_dict(plan))[2] == "cache: off (--cache off)"


def test_the_passes_line_gives_each_figure_its_unit() -> None:
    from codedag.cli._optimize_summary import passes_line

    stats = {
        "coarsening": {"original_nodes": 464, "coarse_nodes": 46, "clusters": 14},
        "partitioning": {"k": 2, "load_balance": 0.656},
        "iteration": {"load_balance_after": 0.7, "objective_before": 1.3, "objective_after": 1.2},
        "edge_cut": {"optimized": 3},
    }
    line = passes_line(stats)
    assert "load balance (mean/max load) 65.6 % -> 70.0 %" in line
    assert "objective J (score) 1.3000 -> 1.2000" in line and line.endswith("edge cut 3 edges")


def test_chains_of_one_source_function_show_the_line_of_their_source_call() -> None:
    plan = cached_plan()
    chain = plan["cache"]["chains"][0]
    plan["cache"]["chains"] = [chain | {"lines": [14]}, chain | {"id": "prefix1", "lines": [16]}]
    text = " ".join(render(cache_table(MigrationPlan.from_dict(plan))).split())
    assert "cv2.imread (line 14)" in text and "cv2.imread (line 16)" in text
    with pytest.raises(SchemaError, match="greater than or equal to 1"):
        MigrationPlan.from_dict(cached_plan() | {"cache": {"chains": [chain | {"lines": [0]}]}})
