"""The Lightning callback: a ``Trainer.fit`` on the CPU records what a monitored loop records."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest
import torch
from monitor_helpers import RecordingSink

from codedag.errors import ConfigError
from codedag.integrations import lightning as integration
from codedag.integrations import lightning_base
from codedag.monitor.experiment import ExperimentMonitor

pl = pytest.importorskip(
    "lightning.pytorch", reason="lightning is not installed (codedag[lightning])"
)

BATCHES, BATCH_SIZE = 6, 8


def data() -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES * BATCH_SIZE, 5, generator=generator)
    y = (x.sum(1, keepdim=True) > 0).float()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH_SIZE)


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(5, 1)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.binary_cross_entropy_with_logits(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(tmp_path: Path, callback: integration.CodedagCallback, logger: object = False) -> None:
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=logger,
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        log_every_n_steps=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loader's workers, the small dataset
        trainer.fit(Model(), data())


def monitored_loop(tmp_path: Path, sink: RecordingSink) -> None:
    """The same training as a hand-written loop under ExperimentMonitor."""
    model = Model()
    optimizer = model.configure_optimizers()
    monitor = ExperimentMonitor("loop", run_dir=tmp_path, sinks=[sink])
    with monitor.mode("baseline", resource_interval=None):
        for index, batch in enumerate(monitor.track(data())):
            optimizer.zero_grad()
            loss = model.training_step(batch, index)
            loss.backward()
            optimizer.step()
            monitor.log_loss(0, index, loss.item())
    monitor.close()


@pytest.mark.slow
def test_fit_records_what_the_monitored_loop_records(tmp_path: Path) -> None:
    in_fit, in_loop = RecordingSink(), RecordingSink()
    monitor = ExperimentMonitor("fit", run_dir=tmp_path / "fit", sinks=[in_fit])
    fit(tmp_path, integration.CodedagCallback(monitor, resource_interval=None))
    monitored_loop(tmp_path / "loop", in_loop)
    for sink in (in_fit, in_loop):
        assert [m.name for m in sink.modes] == ["baseline"]
        assert [e.status for e in sink.ends] == ["completed"]
    fit_steps, loop_steps = in_fit.steps["baseline"], in_loop.steps["baseline"]
    assert [s.step for s in fit_steps] == [s.step for s in loop_steps] == list(range(BATCHES))
    assert [s.samples for s in fit_steps] == [s.samples for s in loop_steps] == [BATCH_SIZE] * 6
    fit_losses = [(m.step, m.value) for m in in_fit.metrics["baseline"] if m.name == "loss"]
    loop_losses = [(m.step, m.value) for m in in_loop.metrics["baseline"] if m.name == "loss"]
    assert [s for s, _ in fit_losses] == [s for s, _ in loop_losses]
    assert [v for _, v in fit_losses] == pytest.approx([v for _, v in loop_losses], rel=1e-6)
    assert set(in_fit.ends[0].figures) == set(in_loop.ends[0].figures)
    assert (tmp_path / "fit" / "results.json").is_file()


@pytest.mark.slow
def test_the_callback_makes_its_monitor_and_feeds_the_trainers_loggers(tmp_path: Path) -> None:
    logger = pl.loggers.CSVLogger(str(tmp_path), name="csv")
    fit(tmp_path, integration.CodedagCallback(resource_interval=0.05), logger)
    results = list((tmp_path / "codedag").glob("Model_*/results.json"))
    assert len(results) == 1
    with open(Path(logger.log_dir) / "metrics.csv") as fh:
        columns = next(csv.reader(fh))
    assert "codedag/step/data_wait_share_pct" in columns
    assert "codedag/summary/step_time_mean_s" in columns


def test_without_lightning_the_callback_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lightning_base, "Callback", None)
    with pytest.raises(ConfigError, match=r"codedag\[lightning\]"):
        integration.CodedagCallback()
