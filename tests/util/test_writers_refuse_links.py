"""No writer follows a link planted at a path it writes: the link's target stays as it was.

Each test plants a symbolic link (to a victim file) where a writer of codedag puts a file whose
name anyone can predict, runs that writer, and checks that the victim is unchanged and that the
writer either wrote its file or refused with one line.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from codedag.errors import WriteError
from codedag.util.io import atomic_write_with, exclusive_lock, own_file

KEEP = b"the victim's own bytes\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_bytes(KEEP)
    return path


def _plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def _refused(error: pytest.ExceptionInfo[BaseException], victim: Path) -> None:
    assert "symbolic link" in str(error.value) and "\n" not in str(error.value)
    assert victim.read_bytes() == KEEP


# --------------------------------------------------------------------------- the helpers


def test_atomic_write_with_lets_a_library_write_by_name(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "trace.json"
    assert atomic_write_with(out, lambda draft: draft.write_text("{}")) == out
    assert out.read_text() == "{}"
    link = _plant(tmp_path / "again.json", victim)
    with pytest.raises(WriteError) as error:
        atomic_write_with(link, lambda draft: draft.write_text("{}"))
    _refused(error, victim)
    assert link.is_symlink()


def test_atomic_write_with_leaves_no_draft_when_the_library_fails(tmp_path: Path) -> None:
    def broken(draft: Path) -> None:
        draft.write_text("half")
        raise ValueError("encoder failed")

    with pytest.raises(ValueError, match="encoder failed"):
        atomic_write_with(tmp_path / "clip.wav", broken)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink"])
def test_own_file_refuses_links(tmp_path: Path, victim: Path, kind: str) -> None:
    path = tmp_path / "results.sqlite"
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "made-through-the-link")
    else:
        os.link(victim, path)
    with pytest.raises(WriteError, match=r"symbolic link|hard links"):
        own_file(path)
    assert victim.read_bytes() == KEEP
    assert not (tmp_path / "made-through-the-link").exists()


def test_own_file_makes_an_empty_file_and_keeps_one_there(tmp_path: Path) -> None:
    path = tmp_path / "results.sqlite"
    assert own_file(path) == path and path.read_bytes() == b""
    path.write_bytes(b"kept")
    own_file(path)
    assert path.read_bytes() == b"kept"


# --------------------------------------------------------------------------- energy


def test_exclusive_lock_refuses_a_link_or_runs_unlocked_when_allowed(
    tmp_path: Path, victim: Path
) -> None:
    link = _plant(tmp_path / "ram.lock", victim)
    with pytest.raises(WriteError) as error, exclusive_lock(link):
        pass
    _refused(error, victim)
    with exclusive_lock(link, required=False) as held:
        assert held is False
    assert victim.read_bytes() == KEEP and link.is_symlink()
    with exclusive_lock(tmp_path / "new" / "ram.lock") as held:
        assert held and (tmp_path / "new").stat().st_mode & 0o077 == 0


def test_exclusive_lock_makes_a_second_process_wait(tmp_path: Path) -> None:
    import fcntl

    lock = tmp_path / "ram.lock"
    with exclusive_lock(lock):
        other = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # flock is per open file: as another process
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with the block
    finally:
        os.close(other)


def test_results_database_is_never_opened_through_a_link(tmp_path: Path, victim: Path) -> None:
    from codedag.energy.store import DB_NAME, ResultsDB

    victim.write_bytes(b"")  # an empty file is one SQLite would happily make a database of
    _plant(tmp_path / "results" / DB_NAME, victim)
    with pytest.raises(WriteError) as error:
        ResultsDB(tmp_path / "results")
    assert "symbolic link" in str(error.value)
    assert victim.read_bytes() == b""


def test_node_cooldown_stamp_is_never_written_through_a_link(
    tmp_path: Path, victim: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from codedag.energy.ray_node import FileCooldown

    cooldown = FileCooldown(tmp_path / "state")
    _plant(tmp_path / "state" / "cooldown-GPU-1.stamp", victim)
    with caplog.at_level(logging.WARNING, logger="codedag.energy.ray_node"):
        cooldown.mark("GPU-1")  # advice only: one warning, the experiment's result stands
    assert victim.read_bytes() == KEEP
    assert "cooldown not recorded" in caplog.text and "symbolic link" in caplog.text
    cooldown.mark("GPU-2")
    assert float((tmp_path / "state" / "cooldown-GPU-2.stamp").read_text()) > 0
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [
        "cooldown-GPU-1.stamp",
        "cooldown-GPU-2.stamp",
    ]


def test_energy_windows_write_whole_files_of_their_own(tmp_path: Path) -> None:
    from codedag.energy.ray_node import EnergyWindows

    windows = EnergyWindows(tmp_path)
    window = windows.begin()
    assert not windows.end(window)
    assert [p.name for p in tmp_path.iterdir()] == [f"{window}.json"]  # no draft left behind


# --------------------------------------------------------------------------- profile


class _Profiler:
    """What the trace handler uses of torch's profiler: an export that writes by name."""

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:  # as torch does: follows links
            handle.write('{"traceEvents": []}')


def test_profiler_trace_is_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    from codedag.profile.config import ProfileConfig
    from codedag.profile.measure import _trace_handler

    config = ProfileConfig(tensorboard=True)
    trace = tmp_path / "traces" / "demo.cpu.pt.trace.json"
    _plant(trace, victim)
    with pytest.raises(WriteError) as error:
        _trace_handler(config, trace)(_Profiler())
    _refused(error, victim)
    trace.unlink()
    _trace_handler(config, trace)(_Profiler())
    files = sorted(p.name for p in trace.parent.iterdir())
    assert trace.read_text() == '{"traceEvents": []}' and len(files) == 2  # and its copy


# --------------------------------------------------------------------------- experiments


def test_image_files_are_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    from codedag.experiments.pipelines.pil_recipe import write_files

    folder = tmp_path / "shared"
    _plant(folder / "0-00001-32-48.jpg", victim)
    with pytest.raises(WriteError) as error:
        write_files(folder, 2, 0, 32, 48)
    _refused(error, victim)


def test_yolo_labels_are_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    from codedag.experiments.pipelines.pil_recipe import write_files
    from codedag.experiments.pipelines.yolo_files import write_dataset

    folder = tmp_path / "shared"
    images = write_files(folder, 2, 0, 32, 48)
    made = tmp_path / "made-through-the-link"
    _plant(images[1].with_suffix(".txt"), made)  # a label file already there is kept as it is
    with pytest.raises(WriteError) as error:
        write_dataset(folder, 2, 0, 32, 48)
    assert "symbolic link" in str(error.value) and not made.exists()
    assert images[0].with_suffix(".txt").is_file() and victim.read_bytes() == KEEP


def test_volumes_are_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    import numpy as np

    from codedag.experiments.pipelines.volume import write_volumes

    folder = tmp_path / "shared"
    _plant(folder / "0-0001-8.npy", victim)
    with pytest.raises(WriteError) as error:
        write_volumes(folder, 2, 0, 8)
    _refused(error, victim)
    assert np.load(folder / "0-0000-8.npy").shape == (8, 8, 8)


def test_audio_clips_are_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    soundfile = pytest.importorskip("soundfile")
    from codedag.experiments.pipelines.audio_files import write_clips

    folder = tmp_path / "shared"
    _plant(folder / "0-8000-0.1-0.2-00001.wav", victim)
    with pytest.raises(WriteError) as error:
        write_clips(folder, 2, 0, 8000, 0.1, 0.2)
    _refused(error, victim)
    assert soundfile.info(str(folder / "0-8000-0.1-0.2-00000.wav")).samplerate == 8000
    assert not list(folder.glob(".*"))  # no draft left behind


def test_demo_out_folder_probe_never_goes_through_a_link(tmp_path: Path, victim: Path) -> None:
    from codedag.experiments.demo import _prepare_out_dir

    out = tmp_path / "out"
    _plant(out / ".codedag-write-test", victim)  # the name the probe once had
    assert _prepare_out_dir(out) == out
    assert victim.read_bytes() == KEEP
    assert [p.name for p in out.iterdir()] == [".codedag-write-test"]


@pytest.mark.parametrize("name", ["kaggle_demo1/baseline.py", "docker/Dockerfile.pytorch"])
def test_scaffold_never_writes_through_a_link(tmp_path: Path, victim: Path, name: str) -> None:
    from codedag.experiments.scaffold import new_experiment

    _plant(tmp_path / name, victim)
    with pytest.raises(WriteError) as error:
        new_experiment("demo1", "pytorch", tmp_path, force=True)
    _refused(error, victim)


def test_scaffold_cli_refuses_a_link_in_one_line(tmp_path: Path, victim: Path) -> None:
    import subprocess
    import sys

    _plant(tmp_path / "experiments" / "kaggle_demo1" / "optimization.py", victim)
    done = subprocess.run(
        [sys.executable, "-m", "codedag", "experiment", "new", "demo1", "--force"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "symbolic link" in done.stderr
    assert victim.read_bytes() == KEEP


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_scaffolded_scripts_write_their_results_atomically(tmp_path: Path, framework: str) -> None:
    from codedag.experiments.scaffold import new_experiment

    scaffold = new_experiment("demo1", framework, tmp_path)
    script = (scaffold.folder / "optimization.py").read_text()
    assert "atomic_write_text(" in script
    assert ".write_text(" not in script and "open(" not in script
