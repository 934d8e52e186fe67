"""MonitorCallback driven as a Lightning Trainer calls its hooks (no lightning import)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from codedag.monitor.callback import MonitorCallback
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.results import load_results


class FakeTrainer:
    """The attributes of lightning.pytorch.Trainer the callback reads."""

    def __init__(self) -> None:
        self.current_epoch = 0
        self.max_epochs = 2
        self.callback_metrics: dict[str, Any] = {}


def fit(
    callback: MonitorCallback,
    epochs: int = 2,
    batches: int = 4,
    load_s: float = 0.0,
    validate_s: float = 0.0,
    fail_at: int | None = None,
) -> None:
    """Call the hooks in the order Lightning's fit loop does."""
    trainer = FakeTrainer()
    module = SimpleNamespace(hparams={"lr": 0.1})
    model = torch.nn.Linear(4, 2)
    model(torch.randn(8, 4)).sum().backward()  # warm-up, as Lightning's sanity check does
    callbacks = [callback]

    def call(hook: str, *args: Any) -> None:
        for cb in callbacks:  # Lightning: getattr(callback, hook)(trainer, pl_module, ...)
            getattr(cb, hook)(trainer, module, *args)

    call("setup", "fit")
    call("on_fit_start")
    call("on_train_start")
    try:
        for epoch in range(epochs):
            trainer.current_epoch = epoch
            call("on_train_epoch_start")
            for batch_idx in range(batches):
                time.sleep(load_s)  # the DataLoader producing the batch
                batch = (torch.randn(8, 4), torch.zeros(8, dtype=torch.long))
                call("on_train_batch_start", batch, batch_idx)
                if fail_at == epoch * batches + batch_idx:
                    raise RuntimeError("CUDA error: device-side assert triggered")
                loss = torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
                loss.backward()
                trainer.callback_metrics = {"train_acc": torch.tensor(0.5 + 0.1 * batch_idx)}
                call("on_train_batch_end", {"loss": loss.detach()}, batch, batch_idx)
            call("on_validation_start")
            time.sleep(validate_s)
            call("on_validation_end")
            call("on_train_epoch_end")
        call("on_train_end")
    except BaseException as exc:
        call("on_exception", exc)
        raise
    finally:
        call("on_fit_end")
        call("teardown", "fit")


def test_callback_records_batches_losses_accuracies_and_saves(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    fit(MonitorCallback(monitor, "baseline", resource_interval=None), validate_s=0.05)
    mode = load_results(monitor.results_path)["modes"]["baseline"]
    assert mode["status"] == "completed"
    assert mode["config"] == {"max_epochs": 2, "hparams": {"lr": 0.1}}
    summary = mode["summary"]
    assert summary["num_batches"] == 8 and summary["throughput"]["samples_per_s"] > 0
    losses = mode["metrics"]["losses"]
    assert [p[:2] for p in losses] == [[e, b] for e in range(2) for b in range(4)]
    assert mode["metrics"]["accuracies"][3] == [0, 3, pytest.approx(0.8)]
    # the 50 ms of validation before epoch 1 is not counted as waiting for data
    assert summary["data_wait"]["max"] < 0.05


def test_callback_data_wait_is_the_loading_time(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    fit(MonitorCallback(monitor, resource_interval=None), epochs=1, batches=3, load_s=0.02)
    wait = monitor.to_dict()["modes"]["baseline"]["summary"]["data_wait"]
    assert wait["min"] >= 0.02 and wait["total"] >= 3 * 0.02  # every batch waited for its load


def test_exception_in_training_is_recorded_as_failed(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    callback = MonitorCallback(monitor, "optimization", resource_interval=None, log_every_n_steps=2)
    with pytest.raises(RuntimeError):
        fit(callback, fail_at=5)
    mode = load_results(monitor.results_path)["modes"]["optimization"]
    assert mode["status"] == "failed" and "device-side assert" in mode["error"]
    assert mode["summary"]["num_batches"] == 5  # the failing batch is not recorded
    assert [p[1] for p in mode["metrics"]["losses"]] == [0, 2, 0]  # every 2nd batch_idx
    assert monitor.current_mode is None


def test_two_callbacks_record_two_modes_and_unknown_attributes_still_fail(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    base = MonitorCallback(monitor, "baseline", resource_interval=None)
    opt = MonitorCallback(monitor, "optimization", resource_interval=None)
    fit(base, epochs=1)
    fit(opt, epochs=1)
    assert list(monitor.to_dict()["modes"]) == ["baseline", "optimization"]
    assert base.state_key != opt.state_key and base.state_dict() == {}
    assert base.on_save_checkpoint(None, None, {}) is None  # any other hook is a no-op
    with pytest.raises(AttributeError):
        base.not_a_hook  # noqa: B018


def test_for_lightning_subclasses_lightnings_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    class Callback:  # stands in for lightning.pytorch.Callback: every hook a no-op method
        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            return None

        @property
        def state_key(self) -> str:
            return "Callback"

    package = types.ModuleType("lightning")
    module = types.ModuleType("lightning.pytorch")
    module.Callback = Callback  # type: ignore[attr-defined]
    package.pytorch = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning", package)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", module)
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    callback = MonitorCallback.for_lightning(monitor, "baseline", resource_interval=None)
    assert isinstance(callback, Callback) and isinstance(callback, MonitorCallback)
    assert callback.state_key == "MonitorCallback[baseline]"  # ours, not Lightning's
    fit(callback, epochs=1, batches=2)
    assert monitor.to_dict()["modes"]["baseline"]["summary"]["num_batches"] == 2


def test_for_lightning_without_lightning_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    from codedag.errors import ConfigError

    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    monitor = ExperimentMonitor("lit", run_dir=tmp_path, stream_to_disk=False)
    with pytest.raises(ConfigError, match="pip install lightning"):
        MonitorCallback.for_lightning(monitor)
