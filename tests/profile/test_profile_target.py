"""A user's own step function, given as module:function, with the same measurements."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from codedag.errors import ConfigError, ExperimentError
from codedag.profile.api import load_target, profile_target
from codedag.profile.config import ProfileConfig

USER_MODULE = """
import time
import torch
from torch import nn

def make_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]

    class SlowBatches:
        def __iter__(self):
            for batch in batches:
                time.sleep(0.004)
                yield batch

    def step(batch):
        x, y = batch
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # a logged loss: one read per step

    return step, SlowBatches()

def make_plain():
    x = torch.randn(64, 64)
    return lambda: (x @ x).sum()

def make_nothing():
    return 42

def make_failing_step():
    def step():
        raise ValueError("shape mismatch in user code")
    return step

def make_broken():
    raise RuntimeError("no data here")

not_callable = 3
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "codedag_user_step_module"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _config(tmp_path: Path) -> ProfileConfig:
    return ProfileConfig(
        scenario="target",
        device="cpu",
        warmup_steps=2,
        profile_steps=3,
        timed_steps=3,
        trace_dir=str(tmp_path / "traces"),
        output_json="",
    )


def test_step_and_batches(user_module: str, tmp_path: Path, one_torch_thread: None) -> None:
    result = profile_target(f"{user_module}:make_step", _config(tmp_path))
    f = result.figures
    assert f.avg_dataloader_wait_s >= 0.003  # the sleep in the user's iterator is the data wait
    assert f.syncs_per_step == 1
    assert result.counts.op_counts["aten::linear"] == 2
    assert result.program_info["iterator_restarts"] >= 2  # 3 batches, 10 steps
    assert result.config.extra["target"] == f"{user_module}:make_step"
    assert Path(result.trace_path).is_file()
    document = result.to_dict()
    assert document["scenario"] == "target"
    assert document["target"] == f"{user_module}:make_step"
    assert document["num_workers"] is None  # the scenario settings do not apply to a target
    assert result.figures.num_workers is None  # no scenario loader to advise about


def test_step_without_batches(user_module: str, tmp_path: Path, one_torch_thread: None) -> None:
    result = profile_target(f"{user_module}:make_plain", _config(tmp_path))
    assert result.figures.avg_dataloader_wait_s < 0.001
    assert result.figures.data_wait_share == 0.0
    assert result.counts.op_counts["aten::matmul"] == 1


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ("no_colon_here", ConfigError, "package.module:function"),
        ("codedag_missing_module_xyz:f", ConfigError, "not found"),
        ("{mod}:absent", ConfigError, "no attribute"),
        ("{mod}:not_callable", ConfigError, "expected a function"),
        ("{mod}:make_nothing", ConfigError, "expected step, \\(step, batches\\)"),
        ("{mod}:make_broken", ExperimentError, "no data here"),
    ],
)
def test_bad_targets(user_module: str, spec: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        load_target(spec.format(mod=user_module))


def test_a_failing_step_is_one_error(user_module: str, tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(ExperimentError, match="ValueError: shape mismatch in user code"):
        profile_target(f"{user_module}:make_failing_step", config)
    assert config.scenario == "target" and "target" not in config.extra  # caller's config kept
