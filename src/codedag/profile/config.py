"""Settings of a profiling run: the flags of ``codedag profile`` and their defaults, validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from codedag.errors import ConfigError

SCENARIOS: tuple[str, ...] = ("dataloader", "sync", "tiny_ops", "memory_churn")
DEVICES: tuple[str, ...] = ("cuda", "cpu")

# Data pressure per scenario: (cpu_work iterations, io_sleep_ms) per sample.
DATA_PRESSURE: dict[str, tuple[int, float]] = {"dataloader": (4000, 2.0)}
DEFAULT_DATA_PRESSURE: tuple[int, float] = (200, 0.0)


@dataclass
class ProfileConfig:
    """Everything that shapes a profiling run; recorded verbatim in the JSON output.

    Attributes:
        scenario: one of SCENARIOS, or "target" when profiling a user's step function.
        device: "cuda" (the default; CPU + CUDA activities) or "cpu" (CPU activities only).
        batch_size: samples per batch.
        image_size_px: side of the synthetic square RGB images.
        dataset_size: samples in the synthetic dataset; the iterator restarts when it runs out.
        num_classes: classes of the synthetic labels.
        num_workers: DataLoader worker processes (0 loads in the main process).
        pin_memory: page-locked host batches, copied with ``non_blocking=True``.
        persistent_workers: keep workers alive between epochs (only with num_workers > 0).
        prefetch_factor: batches each worker loads ahead (only with num_workers > 0).
        amp: autocast (float16 on CUDA with a GradScaler, bfloat16 on the CPU).
        channels_last: NHWC memory format for model and inputs.
        with_stack: record Python stacks in the profiler (larger traces).
        warmup_steps: untimed steps before profiling, on the same iterator as the measured ones.
        profile_steps: steps the profiler records (after schedule wait=1, warmup=1).
        timed_steps: unprofiled steps timed after the profiler window (0: time the profiled steps).
        row_limit: rows of the top-ops table.
        lr: AdamW learning rate.
        seed: random seed for data, weights and order.
        trace_dir: folder of the Chrome/Perfetto trace.
        output_json: metrics file ("" writes none).
        tensorboard: also copy the trace under the name tensorboard_trace_handler gives it.
        cpu_work: per-sample CPU work iterations (None: the scenario's value).
        io_sleep_ms: per-sample simulated I/O latency (None: the scenario's value).
        cpu_threads: torch intra-op threads during the run (None: torch's default).
    """

    scenario: str = "dataloader"
    device: str = "cuda"
    batch_size: int = 64
    image_size_px: int = 224
    dataset_size: int = 2048
    num_classes: int = 10
    num_workers: int = 2
    pin_memory: bool = False
    persistent_workers: bool = True
    prefetch_factor: int = 2
    amp: bool = False
    channels_last: bool = False
    with_stack: bool = False
    warmup_steps: int = 10
    profile_steps: int = 8
    timed_steps: int = 8
    row_limit: int = 15
    lr: float = 1e-3
    seed: int = 0
    trace_dir: str = "results/traces/profiler_demo"
    output_json: str = "results/metrics_demo.json"
    tensorboard: bool = False
    cpu_work: int | None = None
    io_sleep_ms: float | None = None
    cpu_threads: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first bad setting, what it was and what is expected."""
        if self.scenario not in (*SCENARIOS, "target"):
            raise ConfigError(
                f"scenario must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}"
            )
        if self.device not in DEVICES:
            raise ConfigError(f"device must be 'cuda' or 'cpu', got {self.device!r}")
        positive = {
            "batch_size": self.batch_size,
            "image_size_px": self.image_size_px,
            "dataset_size": self.dataset_size,
            "num_classes": self.num_classes,
            "profile_steps": self.profile_steps,
            "row_limit": self.row_limit,
            "prefetch_factor": self.prefetch_factor,
        }
        _check_integers(positive, 1, "positive")
        non_negative = {
            "num_workers": self.num_workers,
            "warmup_steps": self.warmup_steps,
            "timed_steps": self.timed_steps,
            "seed": self.seed,
        }
        _check_integers(non_negative, 0, "non-negative")
        if self.image_size_px < 16:
            raise ConfigError(f"image_size_px must be at least 16, got {self.image_size_px}")
        if self.dataset_size < self.batch_size:
            raise ConfigError(
                f"dataset_size ({self.dataset_size}) must hold at least one batch "
                f"(batch_size {self.batch_size})"
            )
        if not self.lr > 0:
            raise ConfigError(f"lr must be positive, got {self.lr!r}")
        if self.cpu_work is not None and self.cpu_work < 0:
            raise ConfigError(f"cpu_work must be >= 0, got {self.cpu_work}")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise ConfigError(f"cpu_threads must be a positive integer, got {self.cpu_threads}")
        if self.io_sleep_ms is not None and self.io_sleep_ms < 0:
            raise ConfigError(f"io_sleep_ms must be >= 0, got {self.io_sleep_ms}")

    def data_pressure(self) -> tuple[int, float]:
        """Return (cpu_work, io_sleep_ms) per sample: explicit values, else the scenario's."""
        cpu_work, io_sleep_ms = DATA_PRESSURE.get(self.scenario, DEFAULT_DATA_PRESSURE)
        if self.cpu_work is not None:
            cpu_work = self.cpu_work
        if self.io_sleep_ms is not None:
            io_sleep_ms = self.io_sleep_ms
        return cpu_work, io_sleep_ms

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data, with the effective per-sample data pressure filled in."""
        data = asdict(self)
        data["cpu_work"], data["io_sleep_ms"] = self.data_pressure()
        return data


def _check_integers(values: Mapping[str, object], minimum: int, kind: str) -> None:
    """Raise ConfigError naming the first value that is not an integer of at least ``minimum``."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"{name} must be a {kind} integer, got {value!r}")
