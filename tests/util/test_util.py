"""Shared utilities: logging set-up, seeding, atomic writes."""

from __future__ import annotations

import io
import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from codedag.errors import ConfigError
from codedag.util.io import atomic_write_json, atomic_write_text
from codedag.util.logs import setup_logging
from codedag.util.seeding import seed_everything


def test_logging_is_plain_when_piped() -> None:
    stream = io.StringIO()
    logger = setup_logging(0, stream=stream)
    logging.getLogger("codedag.something").info("hello %s", "world")
    logging.getLogger("codedag.something").debug("hidden")
    text = stream.getvalue()
    assert "hello world" in text and "hidden" not in text
    assert "\x1b[" not in text  # no colors
    setup_logging(0, stream=stream)
    assert len([h for h in logger.handlers if h.get_name() == "codedag-cli"]) == 1


def test_logged_uris_lose_their_credentials() -> None:
    stream = io.StringIO()
    setup_logging(0, stream=stream)
    logging.getLogger("codedag.something").warning("cannot reach %s", "http://me:hunter2@host")
    text = stream.getvalue()
    assert "http://me:***@host" in text and "hunter2" not in text


LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS")


@pytest.mark.parametrize(
    "launch",
    [
        {"RANK": "3", "WORLD_SIZE": "4"},
        {"RANK": "3"},
        {"SLURM_PROCID": "1", "SLURM_NTASKS": "2"},
    ],
)
def test_only_rank_zero_logs(monkeypatch: pytest.MonkeyPatch, launch: dict[str, str]) -> None:
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    setup_logging(1, stream=stream)
    logging.getLogger("codedag.x").info("from another rank")
    logging.getLogger("codedag.x").error("errors still show")
    assert "from another rank" not in stream.getvalue()
    assert "errors still show" in stream.getvalue()
    for name in launch:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LOCAL_RANK", "0")
    setup_logging(1, stream=stream)
    logging.getLogger("codedag.x").info("from rank 0")
    assert "from rank 0" in stream.getvalue()


def test_seed_everything_reproduces_all_generators() -> None:
    def draw() -> tuple[float, float, float]:
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    seed_everything(7)
    first = draw()
    seed_everything(7)
    assert draw() == first
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    seed_everything(8, deterministic=False)
    assert draw() != first
    torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_seed_everything_rejects_bad_seeds(bad: object) -> None:
    with pytest.raises(ConfigError, match="non-negative integer"):
        seed_everything(bad)  # type: ignore[arg-type]


def test_atomic_write_replaces_and_keeps_old_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "results.json"
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    with pytest.raises(ValueError):
        atomic_write_json(target, {"a": float("nan")})
    assert json.loads(target.read_text()) == {"a": 1}  # the old file survives
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]  # no temp left
    atomic_write_text(target, "x")
    assert target.read_text() == "x"


def test_atomic_json_handles_numpy_and_paths(tmp_path: Path) -> None:
    target = atomic_write_json(tmp_path / "r.json", {"v": np.float32(1.5), "p": Path("/x")})
    assert json.loads(target.read_text()) == {"v": 1.5, "p": "/x"}


def test_atomic_files_get_ordinary_permissions(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o022)
    try:
        target = atomic_write_text(tmp_path / "dag.svg", "<svg/>")
    finally:
        os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o644


def test_codedags_modules_and_first_log_record_draw_no_random_number() -> None:
    # rich.style draws a number from Python's random when imported: the first warning a run
    # logged (after the script seeded) changed every flip of the data set's later samples
    import subprocess
    import sys

    script = (
        "import logging, random\n"
        "import numpy as np, torch\n"
        "random.seed(0); np.random.seed(0); torch.manual_seed(0)\n"
        "states = lambda: (random.getstate(), repr(np.random.get_state()), "
        "torch.get_rng_state().tolist())\n"
        "before = states()\n"
        "import codedag.integrations.accelerate, codedag.integrations.watch\n"
        "import codedag.integrations.autoplan, codedag.migrate.api, codedag.optimize.assemble\n"
        "import codedag.trace.tracer\n"
        "from codedag.util.logs import setup_logging\n"
        "setup_logging(0)\n"
        "logging.getLogger('codedag.test').warning('a warning')\n"
        "assert 'rich.style' in __import__('sys').modules\n"
        "assert states() == before, 'a random generator moved'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
