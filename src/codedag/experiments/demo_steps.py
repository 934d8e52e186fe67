"""The steps of ``codedag demo``: device choice, loader, monitored training, checks, figures."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import numpy as np

from codedag.errors import ConfigError
from codedag.experiments.demo_settings import DemoSettings, ModeSummary

Progress = Callable[[str, int, int], None]


def resolve_device(requested: str | None) -> str:
    """``cuda:0`` when CUDA exists and nothing else was asked, else what was asked (or cpu)."""
    import torch

    if requested is None:
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        from codedag.errors import DeviceError

        raise DeviceError(f"--device {requested} was asked for but CUDA is not available here")
    return "cuda:0" if requested == "cuda" else requested


def build_loader(settings: DemoSettings) -> Any:
    """The demo's Dataset and DataLoader for the task, seeded so every run sees the same order."""
    import torch
    from torch.utils.data import DataLoader

    from codedag.experiments import demo_data

    count = settings.samples or settings.batches * settings.batch_size
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


def _batches(loader: Any, limit: int) -> Iterator[tuple[int, Any, Any, float]]:
    """Yield ``(index, inputs, targets, data_wait_s)`` for up to ``limit`` batches, cycling."""
    done = 0
    while done < limit:
        iterator = iter(loader)
        while done < limit:
            start = time.perf_counter()
            try:
                inputs, targets = next(iterator)
            except StopIteration:
                break
            yield done, inputs, targets, time.perf_counter() - start
            done += 1


def train(
    mode: str,
    loader: Any,
    settings: DemoSettings,
    device: str,
    monitor: Any,
    progress: Progress,
    keep: int,
) -> tuple[list[Any], list[float], list[float], list[float]]:
    """Train a fresh model for ``settings.batches`` batches under ``monitor``.

    Returns:
        The first ``keep`` input batches (CPU copies), per-batch data wait, compute and losses.
    """
    import torch

    from codedag.experiments.demo_data import SmallCNN
    from codedag.util.seeding import seed_everything

    seed_everything(settings.seed, deterministic=False)
    # One untimed sample first: imports, JIT compilation (librosa's numba) and backend set-up
    # would otherwise land in the first measured batch of whichever mode runs first.
    loader.dataset[0]
    if getattr(loader, "generator", None) is not None:
        loader.generator.manual_seed(settings.seed)  # the same sample order in every mode
    in_channels = 3 if settings.task == "image" else 1
    model = SmallCNN(in_channels).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = torch.nn.CrossEntropyLoss()
    kept: list[Any] = []
    waits: list[float] = []
    computes: list[float] = []
    losses: list[float] = []
    correct = total = 0
    monitor.start_mode(
        mode, config=asdict(settings) | {"device": device, "out_dir": str(settings.out_dir)}
    )
    try:
        for index, inputs, targets, wait_s in _batches(loader, settings.batches):
            monitor.start_batch()
            start = time.perf_counter()
            if len(kept) < keep:
                kept.append((inputs.detach().cpu().clone(), targets.detach().cpu().clone()))
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            loss_value = loss.item()  # synchronizes: the step's work is done
            monitor.end_batch()
            computes.append(time.perf_counter() - start)
            waits.append(wait_s)
            losses.append(loss_value)
            correct += int((outputs.argmax(1) == targets).sum().item())
            total += int(targets.numel())
            monitor.log_loss(0, index, loss_value)
            monitor.log_accuracy(0, index, correct / total)
            progress(mode, index + 1, settings.batches)
    finally:
        monitor.stop_mode()
    return kept, waits, computes, losses


def check_equivalence(baseline: list[Any], migrated: list[Any], task: str) -> dict[str, Any]:
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
            return {
                "passed": False,
                "reason": f"shape/dtype differ: {tuple(x0.shape)} {x0.dtype} vs "
                f"{tuple(x1.shape)} {x1.dtype}",
            }
        diff = (x0.double() - x1.double()).abs()
        max_diff = max(max_diff, float(diff.max()))
        mean_diffs.append(float(diff.mean()))
        beyond += int((diff > tolerance).sum())
        elements += diff.numel()
    compared = min(len(baseline), len(migrated))
    return {
        "passed": labels_equal and compared > 0 and max_diff <= tolerance,
        "batches_compared": compared,
        "labels_equal": labels_equal,
        "max_abs_diff": max_diff,
        "mean_abs_diff": float(np.mean(mean_diffs)) if mean_diffs else 0.0,
        "elements_beyond_tolerance": beyond,
        "elements": elements,
        "tolerance": tolerance,
    }


def summarize(
    mode: str, waits: list[float], computes: list[float], losses: list[float], batch_size: int
) -> ModeSummary:
    """Mean/p50/p95 batch time (data wait + compute), data-wait share and throughput."""
    totals = np.asarray(waits) + np.asarray(computes)
    wall = float(totals.sum())
    return ModeSummary(
        mode=mode,
        batches=len(totals),
        mean_batch_s=float(totals.mean()),
        p50_batch_s=float(np.percentile(totals, 50)),
        p95_batch_s=float(np.percentile(totals, 95)),
        data_wait_share=float(np.sum(waits) / wall) if wall > 0 else 0.0,
        throughput_samples_s=len(totals) * batch_size / wall if wall > 0 else 0.0,
        final_loss=losses[-1] if losses else None,
    )
