"""What :meth:`OptimizerManager.optimize` returns: the passes' outputs as typed fields.

It is also a read-only mapping with string keys (``result['migration_plan']``,
``result['coarsened_dag']``, ...), for code that reads the result as a dict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.measurements import PlanMeasurements
from codedag.optimize.partition import Partition
from codedag.plan import MigrationPlan


@dataclass(frozen=True)
class OptimizeResult(Mapping[str, Any]):
    """The coarsened DAG, both partitionings, the migration plan and the passes' statistics.

    Attributes:
        coarsened_dag: the DAG the partitions and the plan refer to.
        kway_partitions: the k-way partitions before refinement.
        optimized_partitions: the refined partitions.
        plan: the migration plan (the dict key ``migration_plan`` reads its JSON form).
        statistics: ``coarsening``, ``partitioning``, ``edge_cut`` and ``iteration`` figures.
        measurements: what the plan was made from (not one of the dict keys).
    """

    coarsened_dag: CoarsenedDAG
    kway_partitions: list[Partition]
    optimized_partitions: list[Partition]
    plan: MigrationPlan
    statistics: dict[str, Any]
    measurements: PlanMeasurements = field(default_factory=PlanMeasurements)

    @cached_property
    def migration_plan(self) -> dict[str, Any]:
        """The plan in its JSON form (what ``migration_plan.json`` holds; one dict per result)."""
        return self.plan.to_dict()

    def __getitem__(self, key: str) -> Any:
        if key not in _KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_KEYS)

    def __len__(self) -> int:
        return len(_KEYS)


_KEYS = (
    "coarsened_dag",
    "kway_partitions",
    "optimized_partitions",
    "migration_plan",
    "statistics",
)
