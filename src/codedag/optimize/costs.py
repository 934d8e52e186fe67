"""The cost model of placement and the question "can this call run on the accelerator?".

Times are nanoseconds and bandwidths GB/s (which is bytes per nanosecond), so a transfer of
``nbytes`` costs ``nbytes / bandwidth_gbps`` ns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from codedag.errors import ConfigError

log = logging.getLogger(__name__)

CanMigrate = Callable[[str], bool]


def default_can_migrate() -> CanMigrate:
    """Whether a call has a torch backend: the op library's ``is_migratable``."""
    from codedag.backends.registry import is_migratable

    return is_migratable


@dataclass(frozen=True, slots=True)
class CostModel:
    """A what-if model of the accelerator: weights for partitioning, and the assumptions of
    ``--assume-speedup`` plans and of the scheduling benchmark.

    Placement never uses it to decide: plans are made from calibration (measured times on the
    target device); only a plan made with an explicit assumed speedup reads the speedup and the
    bandwidths here, and says so in its notes.

    Attributes:
        accelerator_speedup: what-if CPU time / accelerator time of a migratable call (the
            scheduling benchmark's model; plans use ``PlacementSettings.assume_speedup``).
        h2d_bandwidth_gbps: host-to-device copy bandwidth; pinned copies reach 35-50 GB/s on
            an H100, 25 is a conservative default for pageable memory.
        d2h_bandwidth_gbps: device-to-host copy bandwidth.
        launch_overhead_ns: fixed cost per migrated call instance (conversion, kernel launches,
            synchronization): why per-sample calls on small inputs stay on the CPU.
        memory_weight: weight of the memory term in a node's partitioning weight; a node's weight
            is ``self_ns + memory_weight * bytes / h2d_bandwidth_gbps``.
    """

    accelerator_speedup: float = 8.0
    h2d_bandwidth_gbps: float = 25.0
    d2h_bandwidth_gbps: float = 25.0
    launch_overhead_ns: int = 20_000
    memory_weight: float = 0.1

    def __post_init__(self) -> None:
        if self.accelerator_speedup <= 0:
            raise ConfigError(f"accelerator_speedup must be > 0, got {self.accelerator_speedup}")
        for name in ("h2d_bandwidth_gbps", "d2h_bandwidth_gbps"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0 GB/s, got {getattr(self, name)}")
        if self.launch_overhead_ns < 0 or self.memory_weight < 0:
            raise ConfigError(
                "launch_overhead_ns and memory_weight must be >= 0, got "
                f"{self.launch_overhead_ns} and {self.memory_weight}"
            )

    def saved_ns(self, measured_ns: int) -> int:
        """Time saved by running ``measured_ns`` of CPU work on the accelerator."""
        return int(measured_ns * (1.0 - 1.0 / self.accelerator_speedup))

    def launch_ns(self, instance_count: int) -> int:
        """Fixed overhead of ``instance_count`` migrated calls."""
        return int(self.launch_overhead_ns * instance_count)

    def h2d_ns(self, nbytes: int) -> int:
        """Host-to-device copy time of ``nbytes``."""
        return int(nbytes / self.h2d_bandwidth_gbps)

    def d2h_ns(self, nbytes: int) -> int:
        """Device-to-host copy time of ``nbytes``."""
        return int(nbytes / self.d2h_bandwidth_gbps)

    def node_weight(self, self_ns: float, nbytes: float) -> float:
        """Partitioning weight of a node: its time plus the memory term, in ns."""
        time_ns = max(0.0, float(self_ns))  # a negative measurement counts as nothing
        return time_ns + self.memory_weight * max(0.0, float(nbytes)) / self.h2d_bandwidth_gbps

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)
