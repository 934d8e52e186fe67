"""The Lightning AccelerateCallback: a ``Trainer.fit`` on the CPU gets the same batches (the same
losses) with the callback, planned after the first batch (0 workers) and applied from the second."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError
from codedag.integrations import lightning_accelerate as integration
from codedag.integrations import lightning_base
from codedag.integrations.run_results import load_run_results

pl = pytest.importorskip(
    "lightning.pytorch", reason="lightning is not installed (codedag[lightning])"
)

EPOCHS = 3


class FlipFiles(Dataset):  # type: ignore[type-arg]
    """Decode a PNG with cv2, resize, flip at random (NumPy's global generator)."""

    def __init__(self, files: list[str]) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Any:
        img = cv2.imread(self.files[i])
        img = cv2.resize(img, (12, 12))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        x = torch.from_numpy(img.astype(np.float32) / 255.0).permute(2, 0, 1)
        return x, i % 2


def _files(folder: Path, n: int = 12) -> list[str]:
    """PNGs of noise that take about 0.15 ms to decode: the prefix cache's cut after the resize
    saves several times what storing it costs, so the plan caches it however busy the machine
    is (a 16x14 PNG decodes in about the time storing takes: a coin toss under load)."""
    rng = np.random.default_rng(1)
    paths = []
    for i in range(n):
        path = folder / f"{i:02d}.png"
        cv2.imwrite(str(path), rng.integers(0, 255, (192, 168, 3), dtype=np.uint8))
        paths.append(str(path))
    return paths


class Model(pl.LightningModule):
    """A tiny classifier that records every training loss (and reads a validation loader)."""

    def __init__(self, files: list[str]) -> None:
        super().__init__()
        self.files = files
        self.layer = torch.nn.Linear(3 * 12 * 12, 2)
        self.losses: list[float] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.layer(x.flatten(1)), y)
        self.losses.append(float(loss.item()))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        x, _y = batch
        self.layer(x.flatten(1))

    def train_dataloader(self) -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(FlipFiles(self.files), batch_size=4, shuffle=True)

    def val_dataloader(self) -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(FlipFiles(self.files[:4]), batch_size=4)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(root: Path, files: list[str], callbacks: list[Any]) -> list[float]:
    """Seeded 3-epoch fit; the training losses in order."""
    torch.manual_seed(0)
    np.random.seed(0)
    model = Model(files)
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        devices=1,
        logger=False,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(root),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loader's workers, the small dataset
        trainer.fit(model)
    return model.losses


@pytest.mark.slow
def test_same_losses_and_a_plan_from_the_first_epochs_second_batch(tmp_path: Path) -> None:
    files = _files(tmp_path)
    plain = fit(tmp_path / "plain", files, [])
    callback = integration.AccelerateCallback(store_plans=False)
    accelerated = fit(tmp_path / "fit", files, [callback])
    assert len(plain) == EPOCHS * 3
    assert accelerated == plain  # bit for bit: the same batches
    results = callback.results
    assert results is not None
    assert results.plan_status == "applied", results.plan_reason
    assert results.dataset == "FlipFiles"  # the training loader, not validation's
    assert [(e.planned, e.plan_from_batch) for e in results.epochs] == [
        (True, 2),
        (True, None),
        (True, None),
    ]
    assert [e.samples for e in results.epochs] == [12, 12, 12]
    assert results.moved or results.kept
    # without a logger, trainer.log_dir is default_root_dir
    saved = load_run_results(tmp_path / "fit")
    assert saved.epochs == results.epochs


@pytest.mark.slow
def test_a_fit_that_raises_restores_and_writes_its_results(tmp_path: Path) -> None:
    files = _files(tmp_path)

    class Failing(pl.Callback):  # type: ignore[misc]
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if trainer.current_epoch == 1:
                raise RuntimeError("stopped in epoch 2")

    callback = integration.AccelerateCallback(tmp_path / "out", store_plans=False)
    with pytest.raises(RuntimeError, match="stopped in epoch 2"):
        fit(tmp_path / "fit", files, [callback, Failing()])
    saved = load_run_results(tmp_path / "out")
    assert saved.exit_code == 1
    assert [(e.planned, e.plan_from_batch) for e in saved.epochs] == [(True, 2), (True, None)]
    # the autouse fixture fails the test if DataLoader.__iter__ or the plan's patches remain


def test_is_train_loader_finds_loaders_in_lists_and_dicts() -> None:
    a, b, c = object(), object(), object()

    class Trainer:
        def __init__(self) -> None:
            self.train_dataloader = {"x": [a], "y": (b,)}

    assert integration.is_train_loader(Trainer(), a)
    assert integration.is_train_loader(Trainer(), b)
    assert not integration.is_train_loader(Trainer(), c)
    assert not integration.is_train_loader(object(), a)


def test_without_lightning_the_callback_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lightning_base, "Callback", None)
    with pytest.raises(
        ConfigError, match=r"AccelerateCallback needs lightning: .*codedag\[lightning\]"
    ):
        integration.AccelerateCallback()
