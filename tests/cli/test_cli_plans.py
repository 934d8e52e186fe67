"""``codedag plans list|show|clear``: the stored plans, listed, printed and removed, and hostile
files in the plans folder refused without a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_inputs import assert_one_line_error, run_cli
from plan_sections import count_plan_validations
from run_scripts import write_train_script

from codedag.cli.main import main
from codedag.integrations import plan_store
from codedag.integrations.plan_store import (
    drop_plan,
    load_plan,
    plan_inputs,
    plan_key,
    plans_folder,
    save_plan,
)


class Flips:
    """A dataset class for the key and the recorded pipeline."""


class Loader:
    dataset = Flips()


PLAN: dict[str, Any] = {
    "schema_version": 2,
    "context_device_map": {"ds.get/cv2.flip#0": "cpu"},
    "calls": [
        {"function": "cv2.flip", "migrate": True, "context_keys": ["ds.get/cv2.flip#0"]},
        {"function": "numpy.clip", "migrate": False, "context_keys": ["ds.get/numpy.clip#0"]},
    ],
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _stored(device: str = "cpu") -> str:
    key = plan_key(Loader(), device)
    assert save_plan(key, PLAN, plan_inputs(Loader(), device)) is not None
    return key


def _listed(capsys: pytest.CaptureFixture[str], *extra: Any) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "plans", "list", "--json", *extra)
    assert code == 0, err
    listed: dict[str, Any] = json.loads(out)
    return listed


def test_list_show_and_clear_a_stored_plan(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = _stored()
    (plans_folder() / "notes.txt").write_text("keep me")
    [row] = _listed(capsys)["plans"]
    assert row["key"] == key and row["problem"] == ""
    assert row["pipeline"] == f"{__name__}.Flips" and row["device"] == "cpu"
    assert row["sections"] == {
        "calls": 2,
        "moved": 1,
        "batched": 0,
        "cached": 0,
        "tables": 0,
        "loader": False,
    }
    assert row["size_bytes"] == (plans_folder() / f"{key}.json").stat().st_size
    code, out, _ = run_cli(capsys, "plans", "list")
    assert code == 0 and key[:12] in out and "Flips" in out
    code, out, err = run_cli(capsys, "plans", "show", key[:6])
    assert code == 0, err
    assert f"pipeline: {__name__}.Flips" in out and "device: cpu" in out
    assert "versions: codedag " in out and "cv2.flip" in out and "numpy.clip" in out
    code, out, err = run_cli(capsys, "plans", "clear")
    assert code == 0, err
    assert out.startswith(f"removed 1 plan from {plans_folder()}") and "KB freed" in out
    assert sorted(p.name for p in plans_folder().iterdir()) == ["notes.txt"]
    code, out, _ = run_cli(capsys, "plans", "list")
    assert code == 0 and out.strip() == f"no plans stored in {plans_folder()}"


def test_an_empty_store_says_where_it_looked(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "plans", "list")
    assert (code, out.strip()) == (0, f"no plans stored in {cache / 'plans'}")
    other = tmp_path / "other"
    code, out, _ = run_cli(capsys, "plans", "list", "--dir", other)
    assert (code, out.strip()) == (0, f"no plans stored in {other / 'plans'}")
    assert run_cli(capsys, "plans", "clear", "--dir", other)[0] == 0
    assert not other.exists()


def test_dir_points_at_another_cache_folder(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _stored()
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert _listed(capsys)["plans"] == []
    assert [r["key"] for r in _listed(capsys, "--dir", cache)["plans"]] == [key]
    assert run_cli(capsys, "plans", "clear", key, "--dir", cache)[0] == 0
    assert not (cache / "plans" / f"{key}.json").exists()


def test_keys_by_unique_prefix_and_one_line_for_unknown_or_ambiguous(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = plans_folder()
    folder.mkdir(parents=True)
    for key in ("aa11" + "0" * 20, "aa22" + "0" * 20, "bb00" + "0" * 20):
        (folder / f"{key}.json").write_text(json.dumps(PLAN))
    assert_one_line_error(run_cli(capsys, "plans", "show", "aa"), "start of 2 plans", "aa11")
    assert_one_line_error(run_cli(capsys, "plans", "show", "cc"), "no stored plan 'cc'")
    assert_one_line_error(run_cli(capsys, "plans", "clear", "bb", "cc"), "no stored plan 'cc'")
    assert len(list(folder.iterdir())) == 3  # nothing removed when one key is unknown
    code, out, err = run_cli(capsys, "plans", "show", "aa2")
    assert code == 0, err
    assert "not recorded (stored by an earlier codedag)" in out and "cv2.flip" in out
    code, out, err = run_cli(capsys, "plans", "clear", "aa1", "bb")
    assert code == 0, err
    assert out.startswith("removed 2 plans")
    assert [p.name for p in folder.iterdir()] == ["aa22" + "0" * 20 + ".json"]


BAD_FILES = {
    "malformed JSON": ("{not json", "is not JSON"),
    "wrong schema": (json.dumps({"calls": "many"}), "missing 'context_device_map'"),
    "a record of another format": (json.dumps({"stored_plan": 9, "plan": PLAN}), "format 9"),
    "a record with no plan": (json.dumps({"stored_plan": 1}), "expected a JSON object"),
    "a JSON array": ("[1, 2]", "not an object"),
    "a time that is none": (
        json.dumps({"stored_plan": 1, "created": "\x1b[2J", "plan": PLAN}),
        "is no time",
    ),
    "a device with an escape": (
        json.dumps({**PLAN, "context_device_map": {"ds.get/cv2.flip#0": "\x1b]0;x\x07"}}),
        "context_device_map",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_listed_as_unreadable_and_show_is_one_line(
    case: str, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, reason = BAD_FILES[case]
    key = "c0ffee" * 4
    plans_folder().mkdir(parents=True)
    (plans_folder() / f"{key}.json").write_text(text)
    [row] = _listed(capsys)["plans"]
    assert reason in row["problem"] and row["sections"] == {}
    code, out, _ = run_cli(capsys, "plans", "list")
    assert code == 0 and "unreadable" in out
    line = assert_one_line_error(run_cli(capsys, "plans", "show", "c0f"), "unreadable", reason)
    assert "\x1b" not in line and "\x1b" not in out
    warnings: list[str] = []
    monkeypatch.setattr(plan_store.log, "warning", lambda text, *args: warnings.append(text % args))
    assert load_plan(key) is None  # a run plans again, saying why
    assert len(warnings) == 1 and "unreadable" in warnings[0] and reason in warnings[0]


def test_links_are_neither_read_nor_removed(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "precious.json"
    target.write_text(json.dumps(PLAN))
    plans_folder().mkdir(parents=True)
    link = plans_folder() / ("ab" * 12 + ".json")
    link.symlink_to(target)
    [row] = _listed(capsys)["plans"]
    assert "symbolic link" in row["problem"]
    assert_one_line_error(run_cli(capsys, "plans", "show", "ab"), "symbolic link")
    assert load_plan("ab" * 12) is None
    code, out, err = run_cli(capsys, "plans", "clear")
    assert code == 0 and out.startswith("removed 0 plans")
    assert "symbolic link" in err
    assert link.is_symlink() and target.read_text() == json.dumps(PLAN)


def test_a_run_drops_a_stored_plan_as_clear_does(tmp_path: Path, cache: Path) -> None:
    # a stored plan a run finds made for another path through the code: a link stays
    key = _stored()
    assert drop_plan(key) == "" and load_plan(key) is None
    assert drop_plan(key) != ""  # nothing left to remove
    target = tmp_path / "precious.json"
    target.write_text(json.dumps(PLAN))
    link = plans_folder() / ("cd" * 12 + ".json")
    link.symlink_to(target)
    assert "symbolic link" in drop_plan("cd" * 12)
    assert link.is_symlink() and target.read_text() == json.dumps(PLAN)


def test_a_plans_folder_that_is_a_link_is_refused(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ("ab" * 12 + ".json")).write_text(json.dumps(PLAN))
    cache.mkdir()
    (cache / "plans").symlink_to(elsewhere)
    for action in ("list", "clear"):
        assert_one_line_error(run_cli(capsys, "plans", action), "is a link or not a folder")
    assert (elsewhere / ("ab" * 12 + ".json")).exists()
    assert load_plan("ab" * 12) is None


def test_another_users_files_are_unreadable_and_stay(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _stored()
    path = plans_folder() / f"{key}.json"
    if os.getuid() == 0:  # the file alone becomes another user's
        os.chown(path, 4242, 4242)
        [row] = _listed(capsys)["plans"]
        assert "belongs to uid 4242" in row["problem"]
        assert_one_line_error(run_cli(capsys, "plans", "show", key[:4]), "belongs to uid 4242")
        assert run_cli(capsys, "plans", "clear")[0] == 0
        assert path.exists()
        os.chown(path, 0, 0)
    monkeypatch.setattr(os, "getuid", lambda: 4242)  # the whole folder is another user's
    assert_one_line_error(run_cli(capsys, "plans", "list"), "belongs to uid")
    assert_one_line_error(run_cli(capsys, "plans", "clear"), "belongs to uid")
    assert path.exists()


def test_a_run_records_its_pipeline_and_script(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EPOCHS", "2")
    script = write_train_script(tmp_path)
    assert main(["run", "--out", str(tmp_path / "out"), "--", "python", str(script)]) == 0
    capsys.readouterr()
    [row] = _listed(capsys)["plans"]
    assert row["problem"] == ""
    assert row["pipeline"].endswith(".ImageFiles") and Path(row["script"]) == script.resolve()
    assert row["device"] == "cpu" and row["sections"]["calls"] > 0
    code, out, err = run_cli(capsys, "plans", "show", row["key"][:8])
    assert code == 0, err
    assert "ImageFiles" in out and "train.py" in out and "versions: codedag" in out


def test_a_stored_plan_loads_validated_once_with_what_it_was_made_for(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codedag.migrate.api import PipelineMigrator
    from codedag.plan import MigrationPlan

    key = _stored()
    seen = count_plan_validations(monkeypatch)
    stored = load_plan(key)
    assert stored is not None and isinstance(stored.plan, MigrationPlan)
    assert stored.plan.migrated_functions == ["cv2.flip"]
    assert stored.inputs["pipeline"] == f"{__name__}.Flips" and stored.inputs["device"] == "cpu"
    assert stored.data == PLAN
    PipelineMigrator(stored.plan, default_device="cpu", guard=False)
    assert len(seen) == 1  # the migrator takes the validated plan as it is


def test_a_plan_that_applies_nothing_is_read_as_its_decisions_and_checked_where_they_are_not(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.integrations.plan_store import IdlePlan
    from codedag.integrations.run_results import Decision

    key = plan_key(Loader(), "cpu")
    held = IdlePlan(
        [], [Decision("numpy.clip", "calls", "cpu", "2.5x slower through torch, stays")]
    )
    assert save_plan(key, PLAN, plan_inputs(Loader(), "cpu"), held) is not None
    stored = load_plan(key, idle=True)
    assert stored is not None and stored.idle == held and stored.plan is None
    assert stored.inputs["pipeline"] == f"{__name__}.Flips"
    whole = load_plan(key)  # asked for the plan: the plan
    assert whole is not None and whole.idle == held and whole.plan is not None
    path = plans_folder() / f"{key}.json"
    record = json.loads(path.read_text())
    record["idle"]["kept"][0]["section"] = "calls\x1b[2J"  # shown as printable text only
    path.write_text(json.dumps(record))
    from codedag.integrations.run_results import AcceleratedRun
    from codedag.integrations.run_summary import summary_lines

    record["idle"]["reason"] = "nothing\x1b[2J to trace"
    path.write_text(json.dumps(record))
    code, out, _ = run_cli(capsys, "plans", "show", key[:8])
    assert code == 0 and "applies nothing: nothing\\x1b[2J to trace" in out.replace("\n", "")
    code, out, _ = run_cli(capsys, "plans", "list", "--json")
    assert json.loads(out)["plans"][0]["applies_nothing"] == "nothing\x1b[2J to trace"
    shown = load_plan(key, idle=True)
    assert shown is not None and shown.idle is not None
    run = AcceleratedRun(loader_index=0, plan_status="nothing to apply (stored plan)")
    run.moved, run.kept = shown.idle.moved, shown.idle.kept
    assert not any("\x1b" in line for line in summary_lines(run))
    for spoil in ({"reason": 5}, {"reason": "x" * 5000}):  # no string, or one too long
        record["idle"].update(spoil)
        path.write_text(json.dumps(record))
        spoiled = load_plan(key, idle=True)
        assert spoiled is not None and spoiled.idle is None and spoiled.plan is not None
    record["idle"]["reason"] = ""
    record["idle"]["kept"][0]["reason"] = 5  # not a decision of strings: the plan is read
    path.write_text(json.dumps(record))
    spoiled = load_plan(key, idle=True)
    assert spoiled is not None and spoiled.idle is None and spoiled.plan is not None


def _spoil(path: Path, case: str, elsewhere: Path) -> None:
    """Make the stored plan file ``path`` hostile in the way ``case`` names."""
    if case == "a link":
        elsewhere.write_text(path.read_text())
        path.unlink()
        path.symlink_to(elsewhere)
    elif case == "another user's":
        os.chown(path, 4242, 4242)
    elif case == "oversized":
        path.write_text(json.dumps({"stored_plan": 1, "plan": PLAN, "pad": "x" * 4096}))
    elif case == "malformed JSON":
        path.write_text("{not json")
    else:
        path.write_text(json.dumps({"stored_plan": 1, "plan": {"calls": "many"}}))


HOSTILE = {
    "a link": "symbolic link",
    "another user's": "belongs to uid 4242",
    "oversized": "larger than",
    "malformed JSON": "is not JSON",
    "a wrong schema": "context_device_map",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_stored_plan_is_not_loaded_with_one_warning(
    case: str, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case == "another user's" and os.getuid() != 0:
        pytest.skip("giving a file to another user takes root")
    key = _stored()
    monkeypatch.setattr(plan_store, "MAX_PLAN_BYTES", 4096)
    _spoil(plans_folder() / f"{key}.json", case, tmp_path / "elsewhere.json")
    warnings: list[str] = []
    monkeypatch.setattr(plan_store.log, "warning", lambda text, *args: warnings.append(text % args))
    assert load_plan(key) is None
    assert len(warnings) == 1, warnings
    assert "unreadable" in warnings[0] and HOSTILE[case] in warnings[0]
    assert "planning again" in warnings[0]


@pytest.mark.slow
def test_a_run_over_hostile_stored_plans_plans_afresh_with_one_warning_each(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.integrations.run_results import load_run_results

    monkeypatch.setenv("EPOCHS", "1")
    monkeypatch.setattr(plan_store, "MAX_PLAN_BYTES", 2**20)
    script = write_train_script(tmp_path)
    first = tmp_path / "first"
    assert main(["run", "--out", str(first), "--", "python", str(script)]) == 0
    path = Path(load_run_results(first).plan_path)
    good = path.read_text()
    capsys.readouterr()
    cases = [c for c in sorted(HOSTILE) if c != "another user's" or os.getuid() == 0]
    for case in cases:
        path.unlink()
        path.write_text(good)
        if case == "oversized":
            path.write_text(good[:-2] + ', "pad": "' + "x" * 2**20 + '"}')
        else:
            _spoil(path, case, tmp_path / f"{case}.json")
        out = tmp_path / case.replace(" ", "-")
        assert main(["run", "--out", str(out), "--", "python", str(script)]) == 0
        err = " ".join(capsys.readouterr().err.split())  # the log handler wraps long lines
        assert err.count("planning again") == 1 and "could not store" not in err, (case, err)
        assert HOSTILE[case] in err, (case, err)
        results = load_run_results(out)
        assert results.plan_status == "applied", (case, results.plan_reason)  # planned afresh
        if case == "a link":
            assert path.is_symlink()  # neither followed nor replaced
        else:
            assert load_plan(results.plan_key) is not None  # stored again, readable


@pytest.mark.slow
def test_a_stored_plan_that_cannot_be_applied_is_set_aside_and_planned_again(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A readable plan that names a function codedag must not move (edited by hand, or by
    someone else) is rejected at apply; the run then plans as a first run does, once, rather
    than running unmodified in every run after."""
    from codedag.integrations.run_results import load_run_results

    monkeypatch.setenv("EPOCHS", "1")
    script = write_train_script(tmp_path)
    first = tmp_path / "first"
    assert main(["run", "--out", str(first), "--", "python", str(script)]) == 0
    path = Path(load_run_results(first).plan_path)
    stored = json.loads(path.read_text())
    chain = stored["plan"]["cache"]["chains"][0]
    chain["steps"][0], chain["functions"] = "os.system", ["os.system"]
    path.write_text(json.dumps(stored))
    capsys.readouterr()
    for run, warned in (("second", 1), ("third", 0)):
        out = tmp_path / run
        assert main(["run", "--out", str(out), "--", "python", str(script)]) == 0
        err = " ".join(capsys.readouterr().err.split())
        assert err.count("set aside: the plan could not be applied") == warned, err
        assert ("must stay on the CPU: os.system" in err) == bool(warned)
        results = load_run_results(out)
        assert results.plan_status.startswith("applied"), results.plan_reason
    assert "os.system" not in path.read_text()  # the plan made again replaced it
