"""The steps of ``codedag demo``: device choice, loader, monitored training, checks, figures."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from codedag.errors import ConfigError
from codedag.experiments.demo_settings import (
    DemoSettings,
    EpochSummary,
    Equivalence,
    ModeSummary,
    PlacementRow,
)
from codedag.monitor.model import RunResults
from codedag.plan import MigrationPlan

Progress = Callable[[str, int, int], None]


def build_loader(settings: DemoSettings) -> Any:
    """The demo's Dataset and DataLoader for the task, seeded so every run sees the same order."""
    import torch
    from torch.utils.data import DataLoader

    from codedag.experiments import demo_data

    count = settings.dataset_len
    if settings.task == "image":
        samples = demo_data.make_image_samples(
            count, source_size=settings.source_size, seed=settings.seed
        )
        dataset: Any = demo_data.ImageDemoDataset(samples, settings.image_size, settings.seed)
    else:
        try:
            import librosa  # noqa: F401
        except ImportError as e:
            raise ConfigError("the audio demo needs librosa: pip install 'codedag[audio]'") from e
        dataset = demo_data.AudioDemoDataset(
            demo_data.make_audio_samples(count, seed=settings.seed)
        )
    generator = torch.Generator().manual_seed(settings.seed)
    return DataLoader(
        dataset,
        batch_size=settings.batch_size,
        shuffle=True,
        num_workers=settings.workers,
        generator=generator,
        drop_last=False,
    )


def _batches(
    loader: Any, limit: int, first: Any | None = None
) -> Generator[tuple[int, int, Any, Any], None, None]:
    """Yield ``(index, epoch, inputs, targets)`` for up to ``limit`` batches, cycling the loader
    (``epoch`` counts from 0).

    ``first`` is the first epoch's iterator when it was started beforehand.
    """
    done = 0
    number = 0
    epoch = first if first is not None else iter(loader)
    while done < limit:
        for inputs, targets in epoch:
            yield done, number, inputs, targets
            done += 1
            if done == limit:
                return
        number += 1
        epoch = iter(loader)


class _EpochClock:
    """Each epoch's batches, samples, time and data wait, from the training loop's marks."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.epochs: list[EpochSummary] = []
        self.mark = time.perf_counter()

    def arrived(self, epoch: int) -> float:
        """A batch of ``epoch`` (from 0) arrived; returns its data wait."""
        now = time.perf_counter()
        if len(self.epochs) <= epoch:
            self.epochs.append(EpochSummary(self.mode, epoch + 1, 0, 0, 0.0, 0.0))
        wait = now - self.mark
        self.epochs[epoch].data_wait_s += wait
        self.epochs[epoch].seconds += wait
        self.mark = now
        return wait

    def done(self, epoch: int, samples: int) -> None:
        """The batch's training step ended."""
        now = time.perf_counter()
        summary = self.epochs[epoch]
        summary.seconds += now - self.mark
        summary.batches += 1
        summary.samples += samples
        self.mark = now


def train(
    mode: str,
    loader: Any,
    settings: DemoSettings,
    device: str,
    monitor: Any,
    progress: Progress,
    keep: int,
    epochs: list[EpochSummary] | None = None,
) -> list[Any]:
    """Train a fresh model for ``settings.batches`` batches under ``monitor``.

    The monitor measures each batch and its data wait; the summary is read from it. Each
    epoch's figures are appended to ``epochs`` when given.

    Returns:
        The first ``keep`` input batches of every epoch with their labels (CPU copies).
    """
    import torch

    from codedag.experiments.demo_data import SmallCNN
    from codedag.util.seeding import seed_everything
    from codedag.util.signals import interruption_name

    seed_everything(settings.seed, deterministic=False)
    # One untimed sample first: imports, JIT compilation (librosa's numba) and backend set-up
    # would otherwise land in the first measured batch of whichever mode runs first.
    loader.dataset[0]
    if getattr(loader, "generator", None) is not None:
        loader.generator.manual_seed(settings.seed)  # the same sample order in every mode
    # The first epoch starts here, untimed: DataLoader workers start (a run with persistent
    # workers pays this once), in every mode alike.
    first_epoch = iter(loader)
    in_channels = 3 if settings.task == "image" else 1
    model = SmallCNN(in_channels).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = torch.nn.CrossEntropyLoss()
    kept: list[Any] = []
    correct = total = 0
    monitor.start_mode(mode, config=settings.to_dict() | {"device": device})
    batches = _batches(loader, settings.batches, first_epoch)
    clock = _EpochClock(mode)
    per_epoch: dict[int, int] = {}
    status, error = "completed", None
    try:
        for index, epoch, inputs, targets in batches:
            clock.arrived(epoch)
            monitor.start_batch()
            if per_epoch.get(epoch, 0) < keep:
                per_epoch[epoch] = per_epoch.get(epoch, 0) + 1
                kept.append((inputs.detach().cpu().clone(), targets.detach().cpu().clone()))
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            loss_value = loss.item()  # synchronizes: the step's work is done
            monitor.end_batch(n_samples=int(targets.numel()))
            clock.done(epoch, int(targets.numel()))
            correct += int((outputs.argmax(1) == targets).sum().item())
            total += int(targets.numel())
            monitor.log_loss(epoch, index, loss_value)
            monitor.log_accuracy(epoch, index, correct / total)
            progress(mode, index + 1, settings.batches)
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM/SIGHUP under the CLI
        status, error = "interrupted", interruption_name(stop)
        raise
    except BaseException as failure:
        status, error = "failed", f"{type(failure).__name__}: {failure}"
        raise
    finally:
        if epochs is not None:
            epochs.extend(clock.epochs)
        try:
            monitor.stop_mode(status, error)  # every measured batch is saved
        finally:
            batches.close()  # DataLoader workers end now, not when the iterator is collected
    return kept


def check_equivalence(baseline: list[Any], migrated: list[Any], task: str) -> Equivalence:
    """Compare kept batches; the tolerance is two uint8 levels after normalization (images)."""
    import torch

    from codedag.experiments.demo_data import IMAGENET_STD

    tolerance = 2.0 / 255.0 / float(IMAGENET_STD.min()) if task == "image" else 1e-3
    max_diff = 0.0
    mean_diffs = []
    labels_equal = True
    beyond = 0
    elements = 0
    for (x0, y0), (x1, y1) in zip(baseline, migrated):
        labels_equal &= bool(torch.equal(y0, y1))
        if x0.shape != x1.shape or x0.dtype != x1.dtype:
            return Equivalence(
                passed=False,
                reason=f"shape/dtype differ: {tuple(x0.shape)} {x0.dtype} vs "
                f"{tuple(x1.shape)} {x1.dtype}",
            )
        diff = (x0.double() - x1.double()).abs()
        max_diff = max(max_diff, float(diff.max()))
        mean_diffs.append(float(diff.mean()))
        beyond += int((diff > tolerance).sum())
        elements += diff.numel()
    compared = min(len(baseline), len(migrated))
    return Equivalence(
        passed=labels_equal and compared > 0 and max_diff <= tolerance,
        batches_compared=compared,
        labels_equal=labels_equal,
        max_abs_diff=max_diff,
        mean_abs_diff=float(np.mean(mean_diffs)) if mean_diffs else 0.0,
        elements_beyond_tolerance=beyond,
        elements=elements,
        tolerance=tolerance,
    )


def summarize(results: RunResults) -> tuple[list[ModeSummary], dict[str, Any] | None]:
    """Per-mode figures from the monitor's results (steady state: the warm-up batches left out),
    and the optimized mode's row of :func:`~codedag.monitor.compare.compare_modes` (``speedup``,
    ``speedup_spread``, ``difference``), ``None`` when it did not run."""
    from codedag.monitor.compare import compare_modes

    rows = compare_modes(results, "baseline")
    summaries = [
        ModeSummary(
            mode=row["mode"],
            batches=row["num_batches"] or 0,
            mean_step_s=row["step_mean_s"] or 0.0,
            p50_batch_s=row["batch_p50_s"] or 0.0,
            p95_batch_s=row["batch_p95_s"] or 0.0,
            data_wait_share=(row["data_wait_share_pct"] or 0.0) / 100.0,
            throughput_samples_s=row["samples_per_s"] or 0.0,
            final_loss=row["final_loss"],
            step_std_s=row["step_std_s"] or 0.0,
            warmup_batches=row["warmup_batches"],
        )
        for row in rows
    ]
    optimized = next((r for r in rows if r["mode"] == "optimization"), None)
    return summaries, optimized


def placement_rows(plan: MigrationPlan) -> list[PlacementRow]:
    """The calls the plan measured, one row per function (slowest first) with its decision."""
    rows: dict[str, PlacementRow] = {}
    for call in plan.calls:
        if call.basis == "none" and not call.migrate:
            continue
        row = rows.setdefault(
            call.function, PlacementRow(function=call.function, reason=call.reason)
        )
        n = call.instance_count or 1
        row.calls += n
        row.placed += n if call.migrate else 0
        row.library_ns += (call.original_ns or 0) * n
        row.torch_ns += (call.backend_ns or 0) * n
    for row in rows.values():
        row.speedup = row.library_ns / row.torch_ns if row.torch_ns else None
    return sorted(rows.values(), key=lambda r: -r.library_ns)
