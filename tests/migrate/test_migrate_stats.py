"""get_stats() as one model, read as attributes or as the dict it dumps to."""

from __future__ import annotations

import json

import pytest

from codedag.migrate.stats import CallTotals, GuardSummary, MigrationStats, Off


def test_the_model_reads_as_its_dict_and_dumps_to_json() -> None:
    stats = MigrationStats(totals=CallTotals(migrated=3), guard=GuardSummary(calls=4, margin=1.0))
    assert stats.totals.migrated == stats["totals"]["migrated"] == 3
    assert stats.get("nothing", 7) == 7 and "cache" in stats and "nothing" not in stats
    assert stats["cache"] == {"enabled": False} and stats["guard"]["kept"] == []
    assert MigrationStats().guard == {"enabled": False}  # a check switched off
    dumped = json.loads(json.dumps(stats.model_dump(mode="json")))
    assert set(dumped) == set(stats.keys()) and dumped["totals"]["migrated"] == 3
    with pytest.raises(KeyError):
        stats["nothing"]


def test_a_field_not_declared_is_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        MigrationStats(unknown=1)  # type: ignore[call-arg]
    assert Off() != GuardSummary(calls=1, margin=0.0)
