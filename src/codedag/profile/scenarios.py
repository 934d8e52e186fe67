"""The four controlled bottlenecks of the profiler demo, as step programs.

Every scenario trains the same SimpleCNN with AdamW on synthetic images; each adds one pressure:

- ``dataloader``: CPU work and simulated I/O latency in ``Dataset.__getitem__``;
- ``sync``: forced ``.item()`` reads every step (a NaN guard after each stage and the logged loss);
- ``tiny_ops``: a TinyOpsBlock, a long chain of tiny element-wise ops on the pooled features;
- ``memory_churn``: many temporary tensors of varying sizes per step, held until the step ends.

AdamW is the fused implementation where torch has one: it needs no host reads of its step counters
and lets GradScaler skip its own ``found_inf`` read, so the baseline step has no synchronization and
the ``sync`` scenario's reads are the only ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from codedag.profile.config import ProfileConfig
from codedag.profile.program import StepProgram

TINY_OPS_DEPTH = 128  # in-place (mul_, add_) pairs in the TinyOpsBlock chain
CHURN_TEMPORARIES = 256  # temporary tensors created per step by memory_churn
SYNC_SCALAR_READS = 4  # .item() reads per step in sync: one per CNN stage and the loss


def _cpu_work(iterations: int, seed: int) -> float:
    """Pure-Python arithmetic standing in for per-sample decoding and augmentation."""
    x = float(seed % 997) + 0.5
    for i in range(iterations):
        x = (x * 1.000001 + i) % 1013.0
    return x


@dataclasses.dataclass(eq=False)
class SlowCPUDataset(Dataset):
    """Synthetic uint8 RGB images normalized on the CPU, with tunable CPU work and I/O latency."""

    size: int
    image_size_px: int
    num_classes: int
    cpu_work: int
    io_sleep_ms: float
    seed: int = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.io_sleep_ms > 0:
            time.sleep(self.io_sleep_ms / 1000.0)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        side = self.image_size_px
        raw = torch.randint(0, 256, (3, side, side), dtype=torch.uint8, generator=generator)
        jitter = 1.0 + 1e-3 * (_cpu_work(self.cpu_work, index) / 1013.0 - 0.5)
        image = raw.float().mul_(jitter / 255.0).sub_(0.5).div_(0.25)
        return image, index % self.num_classes


def _conv_stage(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SimpleCNN(nn.Module):
    """Three strided conv-BN-ReLU stages, global average pooling and a linear head."""

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            [
                _conv_stage(3, width),
                _conv_stage(width, 2 * width),
                _conv_stage(2 * width, 4 * width),
            ]
        )
        self.head = nn.Linear(4 * width, num_classes)
        self.feature_dim = 4 * width

    def features(self, x: torch.Tensor, after_stage: Callable[[torch.Tensor], None] | None = None):
        """Pooled features [N, feature_dim]; ``after_stage`` sees each stage's output."""
        for stage in self.stages:
            x = stage(x)
            if after_stage is not None:
                after_stage(x)
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class TinyOpsBlock(nn.Module):
    """A learned affine map followed by a long chain of tiny in-place element-wise ops.

    Each op touches only [N, features] values: on a GPU every one is a separate kernel launch that
    finishes long before the next one is issued, the pattern fusion or ``torch.compile`` removes.
    The ops are in place and their constants are views of one buffer, so the chain launches many
    kernels but allocates little.
    """

    def __init__(self, features: int, depth: int = TINY_OPS_DEPTH) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.depth = depth
        sign = torch.tensor([1.0 if i % 2 else -1.0 for i in range(depth)])
        self.register_buffer("scales", 1.0 + 1e-3 * sign, persistent=False)
        self.register_buffer("shifts", 1e-4 * sign, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.gain + self.bias
        scales = torch.as_tensor(self.scales).to(y.dtype).unbind()
        shifts = torch.as_tensor(self.shifts).to(y.dtype).unbind()
        for scale, shift in zip(scales, shifts):
            y.mul_(scale).add_(shift)
        return y


def churn_temporaries(like: torch.Tensor, count: int, step_index: int) -> list[torch.Tensor]:
    """Create ``count`` zero-filled temporaries of varying sizes, as per-step scratch buffers do.

    Sizes run from 1/64 to 1/8 of ``like``'s element count and shift every step, so freed blocks
    rarely fit the next request: the pattern that fragments a caching allocator.
    """
    base = max(64, like.numel() // 64)
    return [
        torch.zeros(base * (1 + (i + step_index) % 8), device=like.device, dtype=like.dtype)
        for i in range(count)
    ]


def _adamw(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    try:
        return torch.optim.AdamW(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # pragma: no cover - older torch or device
        return torch.optim.AdamW(params, lr=lr)


def _grad_scaler(device_type: str, enabled: bool) -> Any:
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)  # pragma: no cover - torch < 2.3


def build_scenario(config: ProfileConfig) -> StepProgram:
    """Build the dataset, loader, model, optimizer and step function of ``config.scenario``."""
    device = torch.device(config.device)
    cuda = device.type == "cuda"
    cpu_work, io_sleep_ms = config.data_pressure()
    dataset = SlowCPUDataset(
        config.dataset_size,
        config.image_size_px,
        config.num_classes,
        cpu_work,
        io_sleep_ms,
        config.seed,
    )
    workers = config.num_workers
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=True,
        num_workers=workers,
        pin_memory=config.pin_memory and cuda,
        drop_last=True,
        persistent_workers=config.persistent_workers if workers > 0 else False,
        prefetch_factor=config.prefetch_factor if workers > 0 else None,
        generator=torch.Generator().manual_seed(config.seed),
    )
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model = SimpleCNN(config.num_classes).to(device)
    model = model.to(memory_format=memory_format)  # type: ignore[call-overload]
    tiny = TinyOpsBlock(model.feature_dim).to(device)
    optimizer = _adamw([*model.parameters(), *tiny.parameters()], config.lr)
    scaler = _grad_scaler(device.type, enabled=config.amp and cuda)
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    non_blocking = config.pin_memory and cuda
    scenario = config.scenario
    counter = {"step": 0}

    def read_scalar(x: torch.Tensor) -> None:
        if not math.isfinite(x.detach().float().abs().amax().item()):
            raise FloatingPointError("non-finite activation")

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        images = images.to(device, non_blocking=non_blocking).contiguous(
            memory_format=memory_format
        )
        labels = labels.to(device, non_blocking=non_blocking)
        optimizer.zero_grad(set_to_none=True)
        temporaries: list[torch.Tensor] = []
        autocast = torch.autocast(device.type, dtype=amp_dtype, enabled=config.amp)
        with autocast if config.amp else contextlib.nullcontext():
            hook = read_scalar if scenario == "sync" else None
            features = model.features(images, after_stage=hook)
            if scenario == "tiny_ops":
                features = tiny(features)
            if scenario == "memory_churn":
                temporaries = churn_temporaries(images, CHURN_TEMPORARIES, counter["step"])
            loss = F.cross_entropy(model.head(features), labels)
        if scenario == "sync":
            loss.item()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        del temporaries
        counter["step"] += 1

    info = {
        "model": "SimpleCNN" + (" + TinyOpsBlock" if scenario == "tiny_ops" else ""),
        "parameters": sum(p.numel() for p in model.parameters()),
        "optimizer": "AdamW (fused)" if optimizer.defaults.get("fused") else "AdamW",
        "cpu_work": cpu_work,
        "io_sleep_ms": io_sleep_ms,
    }
    return StepProgram(step=step, batches=loader, name=scenario, info=info)
