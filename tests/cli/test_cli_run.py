"""``codedag run -- python train.py``: real scripts, unmodified, with their batches unchanged."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.support.run_scripts import codedag_run, run_python, write_train_script

from codedag.cli.main import main
from codedag.integrations.run_results import load_run_results


def _losses(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("epoch ")]


def _side_by_side(tmp_path: Path, **script: Any) -> tuple[Any, Any, Path]:
    """The training script (``script``: :func:`write_train_script`'s options) run plainly and
    under ``codedag run --no-store`` at once, each with its own images; both processes and the
    run's output folder."""
    write_train_script(tmp_path, **script)
    (tmp_path / "plain").mkdir()
    write_train_script(tmp_path / "plain", **script)  # its own images: the runs start together
    out = tmp_path / "out"
    with ThreadPoolExecutor(2) as pool:
        started = pool.submit(run_python, ["train.py"], tmp_path / "plain")
        ran = codedag_run(["--no-store", "--out", str(out)], ["train.py"], tmp_path)
        plain = started.result()
    assert plain.returncode == 0, plain.stderr
    assert ran.returncode == 0, ran.stderr
    return plain, ran, out


@pytest.mark.slow
def test_same_losses_as_plain_python_and_plan_applies_from_the_second_batch(tmp_path: Path) -> None:
    plain, ran, out = _side_by_side(tmp_path)
    assert _losses(ran.stdout) == _losses(plain.stdout)
    assert len(_losses(plain.stdout)) == 3
    results = load_run_results(out)
    assert results.plan_status == "applied", results.plan_reason
    assert [(e.planned, e.plan_from_batch) for e in results.epochs] == [
        (True, 2),
        (True, None),
        (True, None),
    ]
    assert [e.samples for e in results.epochs] == [16, 16, 16]
    assert all(e.complete for e in results.epochs)
    assert results.exit_code == 0
    assert "codedag run: DataLoader #0 over ImageFiles, plan applied" in ran.stderr
    assert f"codedag run: report in {out / 'report.html'}" in ran.stderr
    assert "Samples per second, by epoch" in (out / "report.html").read_text()


@pytest.mark.slow
def test_spawned_workers_of_a_script_cache_its_own_data_set_with_the_same_losses(
    tmp_path: Path,
) -> None:
    """The data set is the script's own class, which a spawned worker imports as
    ``__mp_main__``: its persistent worker applies the plan posted in epoch 1 (after the first
    batch, once the planner's import in the background ended; at the epoch's end at the
    latest), caches the files it fetches from then on and the rest in epoch 2, reads every one
    back in epoch 3, and the script prints the losses it prints without codedag."""
    options = 'num_workers=1, multiprocessing_context="spawn", persistent_workers=True'
    plain, ran, out = _side_by_side(tmp_path, loader_options=options)
    assert _losses(ran.stdout) == _losses(plain.stdout) and len(_losses(plain.stdout)) == 3
    results = load_run_results(out)
    assert results.plan_status == "applied (spawn workers apply it themselves)"
    assert 16 <= results.cache["hits"] <= 16 + 12  # counted in the worker
    assert results.cache["stored"] == 16


@pytest.mark.slow
def test_a_stored_plan_spawned_workers_do_not_receive_is_kept_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16 small images: the plan saves a spawned worker less than applying it costs, so only
    # the script's process applies it, and fetches nothing; the plan is not "for another path"
    # (in subprocesses: spawn leaves a resource tracker running beside the process that used it)
    monkeypatch.setenv("EPOCHS", "2")
    options = 'num_workers=2, multiprocessing_context="spawn"'
    script = _edited_script(tmp_path, monkeypatch, ("shuffle=True", f"shuffle=True, {options}"))
    for name in ("first", "second"):
        ran = codedag_run(["--out", str(tmp_path / name)], [script.name], tmp_path)
        assert ran.returncode == 0, ran.stderr
    first, second = (load_run_results(tmp_path / name) for name in ("first", "second"))
    assert first.plan_status.startswith("applied in this process only (spawn workers:")
    assert second.plan_status.endswith("(stored plan)") and second.plan_reason == ""


@pytest.mark.slow
def test_a_script_that_raises_keeps_its_traceback_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_train_script(tmp_path, ending='raise ValueError("broken after training")')
    code = main(["run", "--no-store", "--out", str(tmp_path / "out"), "--", "python", str(script)])
    assert code == 1
    err = capsys.readouterr().err
    assert "ValueError: broken after training" in err
    assert 'train.py", line' in err
    assert "codedag/cli" not in err  # the script's traceback, not codedag's
    assert load_run_results(tmp_path / "out").exit_code == 1


@pytest.mark.slow
def test_python_dash_m_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_train_script(package, "train.py")
    ran = codedag_run(["--no-store", "--out", str(tmp_path / "out")], ["-m", "pkg.train"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert len(_losses(ran.stdout)) == 3
    assert load_run_results(tmp_path / "out").plan_status == "applied"


def test_exit_code_of_sys_exit_passes_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_train_script(tmp_path, ending="sys.exit(3)")
    monkeypatch.setenv("EPOCHS", "1")
    code = main(["run", "--no-store", "--out", str(tmp_path / "out"), "--", "python", str(script)])
    assert code == 3
    results = load_run_results(tmp_path / "out")
    assert results.exit_code == 3
    assert len(results.epochs) == 1
    assert "epoch 0 loss" in capsys.readouterr().out


def test_a_script_named_by_a_relative_path_sees_what_python_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An absolute ``__file__`` (a script that changes folder, then finds its files beside
    itself, still finds them), ``sys.argv`` as typed, its folder first on ``sys.path``."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "train.py").write_text(
        "import os, sys\n"
        "os.chdir('elsewhere')\n"
        "print(os.path.isfile(__file__), os.path.isabs(__file__), sys.argv, sys.path[0])\n"
    )
    monkeypatch.chdir(tmp_path)
    code = main(
        ["run", "--no-store", "--out", str(tmp_path / "out"), "--", "python", "train.py", "a"]
    )
    assert code == 0
    printed = capsys.readouterr().out.splitlines()[0]
    assert printed == f"True True ['train.py', 'a'] {tmp_path}"


def test_two_loaders_plan_the_one_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_train_script(tmp_path, validation=True)
    monkeypatch.setenv("EPOCHS", "2")
    out = tmp_path / "out"
    args = ["run", "--no-store", "--loader", "1", "--out", str(out), "--", "python", str(script)]
    assert main(args) == 0
    results = load_run_results(out)
    assert results.loaders_seen == 2
    assert results.loader_index == 1
    assert [e.samples for e in results.epochs] == [8, 8]  # the validation loader's 8 images
    assert results.plan_status == "applied"
    assert len([line for line in capsys.readouterr().out.splitlines() if " val " in line]) == 2


def test_a_pipeline_that_cannot_be_traced_runs_unmodified_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codedag.errors import TraceError
    from codedag.trace import dataloader

    def fails(*_args: object, **_kwargs: object) -> None:
        raise TraceError("the data set cannot be read outside its loop")

    monkeypatch.setattr(dataloader, "trace_first_batch", fails)
    script = write_train_script(tmp_path)
    monkeypatch.setenv("EPOCHS", "2")
    out = tmp_path / "out"
    assert main(["run", "--no-store", "--out", str(out), "--", "python", str(script)]) == 0
    captured = capsys.readouterr()
    assert len(_losses(captured.out)) == 2
    warnings = [line for line in captured.err.splitlines() if "planning skipped" in line]
    assert len(warnings) == 1
    assert "the data set cannot be read outside its loop" in warnings[0]
    results = load_run_results(out)
    assert results.plan_status == "skipped"
    assert [e.planned for e in results.epochs] == [False, False]


@pytest.mark.parametrize("refusing", ["read_once", "original_only"])
def test_data_sets_that_refuse_other_reads_are_planned_and_read_as_the_script_reads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    refusing: str,
) -> None:
    """``read_once``: the data set refuses a second read of an index in one epoch, so tracing
    and storing read copies of it, and the script's reads are its own. ``original_only``: its
    ``__getstate__`` drops what ``__getitem__`` reads (as data sets that reopen a file in a
    ``worker_init_fn`` do), so tracing and storing read the data set itself."""
    script = write_train_script(tmp_path, **{refusing: True})
    monkeypatch.setenv("EPOCHS", "2")
    out = tmp_path / "out"
    assert main(["run", "--no-store", "--out", str(out), "--", "python", str(script)]) == 0
    assert len(_losses(capsys.readouterr().out)) == 2
    results = load_run_results(out)
    assert results.plan_status == "applied", results.plan_reason
    assert [e.planned for e in results.epochs] == [True, True]


def test_zero_budget_skips_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_train_script(tmp_path)
    monkeypatch.setenv("EPOCHS", "2")
    out = tmp_path / "out"
    args = ["run", "--no-store", "--plan-budget-s", "0", "--out", str(out), "--", str(script)]
    assert main(args) == 0
    assert "plan budget is 0 s" in load_run_results(out).plan_reason
    assert "planning skipped" in capsys.readouterr().err


def test_a_rank_but_the_first_says_no_warning_and_keeps_its_reason_in_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_train_script(tmp_path)
    monkeypatch.setenv("EPOCHS", "2")
    for key, value in _launch_env(tmp_path, 1).items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "out"
    args = ["run", "--no-store", "--plan-budget-s", "0", "--out", str(out), "--", str(script)]
    codedag_log = logging.getLogger("codedag")
    level = codedag_log.level
    try:
        assert main(args) == 0
    finally:
        codedag_log.setLevel(level)  # the next tests' warnings are rank 0's
    err = capsys.readouterr().err
    assert "planning skipped" not in err  # rank 0 says it, once for the launch
    assert "codedag run (rank 1 of 2): results in" in err
    assert "plan budget is 0 s" in load_run_results(out / "results.rank1.json").plan_reason


def test_a_stored_plan_applies_from_the_first_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EPOCHS", "2")
    script = write_train_script(tmp_path)
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    assert main(["run", "--out", str(first), "--", "python", str(script)]) == 0
    assert main(["run", "--out", str(second), "--", "python", str(script)]) == 0
    assert main(["run", "--replan", "--out", str(third), "--", "python", str(script)]) == 0
    runs = [load_run_results(folder) for folder in (first, second, third)]
    assert [r.plan_status for r in runs] == ["applied", "applied (stored plan)", "applied"]
    assert [e.planned for e in runs[1].epochs] == [True, True]
    assert runs[0].plan_key == runs[1].plan_key
    assert Path(runs[1].plan_path).is_file()
    losses = _losses(capsys.readouterr().out)
    assert len(losses) == 6
    assert losses[0:2] == losses[2:4] == losses[4:6]  # a stored plan changes no batch


def _edited_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *edits: tuple[str, str]
) -> Path:
    """The training script with each ``(old, new)`` of ``edits`` made, run with a plan store and
    a prefix cache of the test's own."""
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "prefix-cache"))
    script = write_train_script(tmp_path)
    text = script.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    script.write_text(text)
    return script


def test_a_stored_plan_for_another_path_through_the_code_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the script reads its images through a helper or not, by an environment variable: the same
    # code, the same key, but the plan stored by one way caches nothing the other way
    monkeypatch.setenv("EPOCHS", "3")
    script = _edited_script(
        tmp_path,
        monkeypatch,
        (
            "        img = cv2.imread(self.files[i])\n",
            '        img = read(self.files[i]) if os.environ.get("VIA_HELPER") else cv2.imread(self.files[i])\n',
        ),
        (
            "class ImageFiles(",
            "def read(path):\n    return cv2.imread(path)\n\n\nclass ImageFiles(",
        ),
    )
    runs = []
    for name, helper in (("helper", "1"), ("direct", ""), ("again", "")):
        monkeypatch.setenv("VIA_HELPER", helper)
        assert main(["run", "--out", str(tmp_path / name), "--", "python", str(script)]) == 0
        runs.append(load_run_results(tmp_path / name))
    stored, replanned, again = runs
    assert stored.plan_status == "applied" and stored.cache["hits"] > 0
    assert replanned.plan_status == "applied"
    assert replanned.plan_reason == (
        "planned again: the stored plan's cached chains met none of their source calls in epoch 1"
    )
    assert [e.plan_from_batch for e in replanned.epochs] == [None, 2, None]
    assert again.plan_status == "applied (stored plan)" and again.cache["hits"] == 3 * 16
    losses = _losses(capsys.readouterr().out)
    assert losses[0:3] == losses[3:6] == losses[6:9]  # no batch changed


def test_transforms_bound_by_functools_partial_are_cached_with_the_same_losses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a transform list of partials, as Compose-style code builds it: the calls in them are
    # traced with their arguments and reach the cache's replacements at run time
    script = _edited_script(
        tmp_path,
        monkeypatch,
        (
            "        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)\n        img = cv2.resize(img, (16, 16))\n",
            "        for step in self.steps:\n            img = step(img)\n",
        ),
        (
            "        self.files = files\n",
            "        self.files = files\n        self.steps = [\n"
            "            functools.partial(cv2.cvtColor, code=cv2.COLOR_BGR2RGB),\n"
            "            functools.partial(cv2.resize, dsize=(16, 16)),\n        ]\n",
        ),
        ("import glob, os, sys", "import functools, glob, os, sys"),
    )
    plain = run_python([str(script)], tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert main(["run", "--out", str(tmp_path / "out"), "--", "python", str(script)]) == 0
    results = load_run_results(tmp_path / "out")
    (cached,) = [d for d in results.moved if d.section == "cache"]
    assert cached.what == "cv2.imread -> cv2.cvtColor -> cv2.resize", cached
    assert results.cache["hits"] == 2 * 16
    assert results.cache["hit_bytes"] == 2 * 16 * 16 * 16 * 3  # the resized image, not the file's
    assert _losses(capsys.readouterr().out) == _losses(plain.stdout)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "expected a command after --"),
        (["python", "missing.py"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], message: str
) -> None:
    code = main(["run", "--out", str(tmp_path / "out"), "--", *command])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert message in err[0]
    assert err[0].startswith("codedag run: error:")


def test_a_run_that_iterates_no_loader_imports_no_model_logging_or_other_command(
    tmp_path: Path,
) -> None:
    """What only planning, logging or another subcommand needs stays unimported, and torch too
    when the script never imports it: the run costs no more than its start and its results."""
    script = tmp_path / "quiet.py"
    script.write_text("print('done')\n")
    out = tmp_path / "out"
    probe = (
        "import json, sys\n"
        "from codedag.cli.main import main\n"
        f"code = main(['run', '--out', {str(out)!r}, '--', 'python', {str(script)!r}])\n"
        "names = ('torch', 'pydantic', 'rich', 'codedag.plan', 'codedag.trace', "
        "'codedag.migrate', 'codedag.cli.demo', 'codedag.cli.plans')\n"
        "print(json.dumps([code, sorted(n for n in names if n in sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, []]
    assert done.stdout.startswith("done\n")
    assert "nothing planned" in done.stderr
    results = load_run_results(out)  # written without pydantic, read with it
    assert (results.exit_code, results.loaders_seen, results.epochs) == (0, 0, [])


_SLICES = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self):
        self.x = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return self.x[i, :6]


for epoch in range(2):
    print("epoch", epoch, float(sum(b.sum() for b in DataLoader(Rows(), batch_size=8))))
"""


def test_samples_with_nothing_to_plan_import_no_plan_model_and_are_traced_once(
    tmp_path: Path,
) -> None:
    """A pipeline that only slices tensors costs its first run one traced batch, and the
    next runs of the same code nothing but reading that it plans nothing."""
    script = tmp_path / "slices.py"
    script.write_text(_SLICES)
    env = {**os.environ, "CODEDAG_CACHE_DIR": str(tmp_path / "cache")}
    seen = []
    for run in ("first", "second"):
        out = tmp_path / run
        probe = (
            "import json, sys\n"
            "from codedag.cli.main import main\n"
            f"code = main(['run', '--out', {str(out)!r}, '--', 'python', {str(script)!r}])\n"
            "names = ('pydantic', 'codedag.plan', 'codedag.trace.tracer')\n"
            "print(json.dumps([code, sorted(n for n in names if n in sys.modules)]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout.strip().splitlines()[-1]))
        results = load_run_results(out)
        assert "call no function" in results.plan_reason, results.plan_reason
        seen.append(results.plan_status)
    assert seen == [
        [0, ["codedag.trace.tracer"]],
        "nothing to apply",
        [0, []],  # nothing traced
        "nothing to apply (stored plan)",
    ]


def _launch_env(tmp_path: Path, rank: int) -> dict[str, str]:
    """What torchrun gives rank ``rank`` of 2 on one machine, with the user folders in
    ``tmp_path``."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": "launch-a",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29511",
        "CODEDAG_DATA_DIR": str(tmp_path / "data"),
        "CODEDAG_CACHE_DIR": str(tmp_path / "cache"),
        "CODEDAG_PREFIX_CACHE_DIR": str(tmp_path / "prefix-cache"),
    }


def test_ranks_of_one_launch_share_one_default_folder_and_another_launch_gets_its_own(
    tmp_path: Path,
) -> None:
    from codedag.cli.run import default_out

    first, second = (default_out(_launch_env(tmp_path, rank)) for rank in (0, 1))
    assert first == second
    assert first.parent == tmp_path / "data" / "runs"
    other = default_out({**_launch_env(tmp_path, 0), "TORCHELASTIC_RUN_ID": "launch-b"})
    assert other != first
    alone = default_out({"CODEDAG_DATA_DIR": str(tmp_path / "data")})
    assert alone.parent == first.parent and alone != first


@pytest.mark.slow
def test_ranks_of_a_launch_write_their_own_results_and_rank_zero_prints_the_summary(
    tmp_path: Path,
) -> None:
    write_train_script(tmp_path)
    run_python(["train.py"], tmp_path)  # writes the images once, before the ranks start
    plain = run_python(["train.py"], tmp_path)
    argv = ["-m", "codedag", "run", "--", "python", "train.py"]
    with ThreadPoolExecutor(2) as pool:
        started = [
            pool.submit(run_python, argv, tmp_path, 180, _launch_env(tmp_path, rank))
            for rank in (0, 1)
        ]
        ranks = [future.result() for future in started]
    for rank, ran in enumerate(ranks):
        assert ran.returncode == 0, ran.stderr
        assert _losses(ran.stdout) == _losses(plain.stdout)
        assert f"codedag run (rank {rank} of 2): results in" in ran.stderr
    assert "codedag run (rank 0 of 2): DataLoader #0 over ImageFiles, plan" in ranks[0].stderr
    assert "DataLoader #0" not in ranks[1].stderr  # one summary on the screen
    (folder,) = (tmp_path / "data" / "runs").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        "report.rank0.html",
        "report.rank1.html",
        "results.rank0.json",
        "results.rank1.json",
    ]
    for rank in (0, 1):
        results = load_run_results(folder / f"results.rank{rank}.json")
        assert results.plan_status.startswith("applied"), results.plan_reason
        assert [e.samples for e in results.epochs] == [16, 16, 16]
