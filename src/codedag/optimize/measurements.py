"""What a plan is made from, measured once per DAG: one frozen value passed to the passes.

:meth:`OptimizerManager.optimize <codedag.optimize.manager.OptimizerManager.optimize>` measures
the DAG it plans (the candidate calls, the sample chains, the prefix cache's store) into one
:class:`PlanMeasurements` and hands it to the passes explicitly; the manager itself keeps only
its settings, so planning another DAG with it never reuses these figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codedag.calibrate.chains import ChainMeasurement
    from codedag.calibrate.measurement import Calibration
    from codedag.calibrate.store_costs import StoreCosts


def _no_chains() -> Mapping[str, ChainMeasurement]:
    return MappingProxyType({})


@dataclass(frozen=True)
class PlanMeasurements:
    """The measurements one plan is made from (read-only).

    Attributes:
        calibration: the candidate calls timed on the placement device, or ``None`` (nothing
            measured: no target device, an assumed speedup, calibration switched off).
        chains: chain id -> each sample chain timed batched against per sample (``auto`` only).
        store: the prefix cache store's measured costs by value size, or ``None``.
        problem: why nothing could be measured where a measurement was wanted (a plan note).
    """

    calibration: Calibration | None = None
    chains: Mapping[str, ChainMeasurement] = field(default_factory=_no_chains)
    store: StoreCosts | None = None
    problem: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.chains, MappingProxyType):
            object.__setattr__(self, "chains", MappingProxyType(dict(self.chains)))
