"""The migration plan model shared by the optimizer (writer) and the migrator (reader).

* :mod:`.cache`: The ``cache`` section of a migration plan: each sample's deterministic prefix and
  where the prefix cache cuts it
* :mod:`.context`: Matching a runtime call against the plan's context keys
* :mod:`.files`: Reading a migration plan file: the one reader, which validates the plan once
* :mod:`.loader`: The ``loader`` section of a migration plan: DataLoader settings chosen by
  measurement
* :mod:`.model`: The migration plan: one model for the file ``codedag optimize`` writes and
  everything that reads it
* :mod:`.names`: Which fields of a plan name library functions, and every name a plan would use
* :mod:`.tables`: The ``tables`` section of a migration plan: where element-wise runs on uint8
  arrays start
"""

from codedag.plan.cache import CacheChain, CacheCut, CacheSection
from codedag.plan.files import read_plan
from codedag.plan.loader import LoaderSection, LoaderSettings, LoaderTrial, WarmLoader
from codedag.plan.model import (
    PLAN_SCHEMA_VERSION,
    BatchedChain,
    BatchedInfo,
    MigrationPlan,
    PlacementInfo,
    PlannedCall,
    check_device,
)
from codedag.plan.tables import TableRun, TablesSection

__all__ = [
    "PLAN_SCHEMA_VERSION",
    "BatchedChain",
    "BatchedInfo",
    "CacheChain",
    "CacheCut",
    "CacheSection",
    "LoaderSection",
    "LoaderSettings",
    "LoaderTrial",
    "MigrationPlan",
    "PlacementInfo",
    "PlannedCall",
    "TableRun",
    "TablesSection",
    "WarmLoader",
    "check_device",
    "read_plan",
]
