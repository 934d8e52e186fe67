"""The migration plan model shared by the optimizer (writer) and the migrator (reader)."""

from codedag.plan.loader import LoaderSection, LoaderSettings, LoaderTrial
from codedag.plan.model import (
    PLAN_SCHEMA_VERSION,
    MigrationPlan,
    PlacementInfo,
    PlannedCall,
    check_device,
)

__all__ = [
    "PLAN_SCHEMA_VERSION",
    "LoaderSection",
    "LoaderSettings",
    "LoaderTrial",
    "MigrationPlan",
    "PlacementInfo",
    "PlannedCall",
    "check_device",
]
