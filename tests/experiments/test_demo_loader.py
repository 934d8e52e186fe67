"""The demo trains on a tuned DataLoader (workers, persistent) with the baseline's sample order."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import DataLoader

from codedag.experiments.demo_settings import DemoSettings
from codedag.experiments.demo_steps import build_loader, check_equivalence, train
from codedag.monitor.experiment import ExperimentMonitor


def test_a_tuned_loader_starts_untimed_and_draws_the_baselines_first_epoch(
    tmp_path: Path,
) -> None:
    """Epochs after the first are shuffled differently with persistent workers (PyTorch reuses
    the iterator and skips a draw from the generator): only the first epoch is compared."""
    settings = DemoSettings(
        batches=5, batch_size=4, samples=8, image_size=32, source_size=64, out_dir=tmp_path
    )
    monitor = ExperimentMonitor("demo_loader", save_dir=tmp_path, run_dir=tmp_path)
    baseline = build_loader(settings)
    kept_base = train("baseline", baseline, settings, "cpu", monitor, lambda *a: None, keep=2)
    tuned = DataLoader(
        baseline.dataset,
        batch_size=4,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        generator=torch.Generator(),
    )
    kept_tuned = train("optimization", tuned, settings, "cpu", monitor, lambda *a: None, keep=2)
    result = check_equivalence(kept_base[:2], kept_tuned[:2], "image")  # the first epoch's
    assert result.passed and result.labels_equal and result.batches_compared == 2
    modes = monitor.to_dict()["modes"]
    assert modes["optimization"]["summary"]["num_batches"] == 5  # three epochs ran
