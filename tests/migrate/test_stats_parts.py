"""The run-time parts' figures of get_stats() as models that dump to the keys their dicts had.

A plan with every section (:mod:`plan_sections`) runs two epochs; each part's dumped keys must be
the documented ones (docs/batched.md, docs/cache.md, docs/tables.md, docs/loader-tuning.md), and
a stats file saved before the parts were models (:mod:`stats_support`) still validates.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import json
import sys
from typing import Any

import pytest
from plan_sections import epochs, full_plan
from prefix_support import write_images
from pydantic import BaseModel
from stats_support import saved_stats

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.migrate.stats import (
    BatchedStats,
    CacheStats,
    CaptureSummary,
    LoaderStats,
    MigrationStats,
    Off,
    TablesStats,
)
from codedag.store.tiers import StoreSettings

BATCHED = {
    "enabled", "deferring", "device", "deliver", "delivery", "chains", "batches", "samples",
    "ready_samples", "groups", "backend_calls", "backend_calls_per_batch_max", "h2d_bytes",
    "d2h_bytes", "forced", "forced_sites", "stopped_sites", "stopped_sites_in_workers",
    "retried_samples", "worker_ms", "main_ms", "check", "verify", "capture",
}  # fmt: skip
CACHE = {
    "enabled", "chains", "hits", "misses", "hit_rate", "stored", "not_stored_full",
    "not_stored_changed", "not_stored_dropped", "not_stored_later", "unpaid", "evictions",
    "corrupt", "bytes", "allocated_bytes", "budget_bytes", "tiers", "verify", "read_ms", "write_ms", "queue_ms",
    "hit_bytes", "lookup", "diverged", "problems",
}  # fmt: skip
TABLES = {
    "enabled", "producers", "runs", "gathered", "computed", "trials", "mismatches", "errors",
}  # fmt: skip
LOADER = {
    "settings", "changed", "dataloaders", "applied", "kept_explicit", "kept_for_draws",
    "reseeded_each_epoch", "overridden", "wrapped_worker_init_fn", "skipped", "applied_now",
    "warm",
}  # fmt: skip
NESTED = {
    ("batched", "delivery"): {"mode", "on", "watched", "reason"},
    ("batched", "verify"): {"batches", "mismatches", "max_abs_diff"},
    ("batched", "capture"): {
        "state",
        "graphs",
        "segments",
        "eager",
        "captured",
        "replays",
        "evicted",
        "refused",
        "off",
    },
    ("cache", "verify"): {"checked", "mismatches", "examples"},
    ("cache", "lookup"): {"gathered", "computed", "mismatches"},
}
TIER = {
    "kind", "path", "budget_bytes", "used_bytes", "allocated_bytes", "entries", "metas",
    "generation", "enabled", "problem",
}  # fmt: skip


def _check_keys(dumped: dict[str, Any]) -> None:
    parts = {"batched": BATCHED, "cache": CACHE, "tables": TABLES, "loader": LOADER}
    for part, documented in parts.items():
        assert set(dumped[part]) == documented, part
    for (part, key), documented in NESTED.items():
        assert set(dumped[part][key]) == documented, f"{part}.{key}"
    assert dumped["batched"]["check"] == {"state": "off"}
    assert dumped["cache"]["tiers"] and all(set(t) == TIER for t in dumped["cache"]["tiers"])


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> MigrationStats:
    folder = tmp_path_factory.mktemp("stats")
    paths = write_images(folder / "photos", n=8, size=48)
    store = StoreSettings(folder=folder / "cache", ram_budget_bytes=16 << 20)
    settings = CacheSettings(store=store, judge_after=0)
    with PipelineMigrator(full_plan(paths), guard=False, cache=settings) as migrator:
        epochs(paths, 0)
        return migrator.get_stats()


def test_each_part_of_a_real_run_is_its_model_and_dumps_the_documented_keys(
    applied: MigrationStats,
) -> None:
    assert isinstance(applied.batched, BatchedStats) and isinstance(applied.cache, CacheStats)
    assert isinstance(applied.tables, TablesStats) and isinstance(applied.loader, LoaderStats)
    assert applied.cache.hits == applied["cache"]["hits"] == 8  # epoch 2 read every prefix back
    assert applied.batched.samples == applied["batched"].get("samples") == 16
    dumped = json.loads(json.dumps(applied.model_dump(mode="json")))
    _check_keys(dumped)
    assert MigrationStats.model_validate(dumped) == dumped


def test_a_stats_file_saved_before_the_models_validates_into_them() -> None:
    saved = saved_stats()
    stats = MigrationStats.model_validate(saved)
    assert isinstance(stats.batched, BatchedStats) and isinstance(stats.loader, LoaderStats)
    assert stats.cache.tiers[0].kind == stats["cache"]["tiers"][0]["kind"] == "ram"
    dumped = stats.model_dump(mode="json")
    # files saved before capture was counted read as capture off; nothing else changes
    assert dumped["batched"].pop("capture") == {**CaptureSummary().model_dump(), "state": "off"}
    assert dumped["cache"].pop("not_stored_later") == 0  # saved before values were left for later
    assert dumped == saved
    _check_keys(stats.model_dump(mode="json"))


def test_a_part_switched_off_is_off_and_dumps_as_before() -> None:
    stats = MigrationStats.model_validate({"batched": {"enabled": False}, "loader": None})
    assert isinstance(stats.batched, Off) and stats["cache"] == {"enabled": False}
    assert stats.model_dump()["tables"] == {"enabled": False} and stats.loader is None
    with pytest.raises(ValueError):
        MigrationStats.model_validate({"cache": {"enabled": True, "hits": 1}})


def test_every_figure_is_typed_and_documented() -> None:
    from codedag.migrate import stats as module

    nested = ("Delivery", "CheckOff", "BatchedCheck", "BatchedVerify", "CaptureSummary")
    nested += ("CacheVerify",)
    nested += ("CacheLookup", "TierStats", "WarmStats")
    models = (BatchedStats, CacheStats, TablesStats, LoaderStats)
    for model in models + tuple(getattr(module, name) for name in nested):
        docs = _field_docs(model)
        for name, info in model.model_fields.items():
            doc = docs.get(name, "")
            assert doc and "\n" not in doc, f"{model.__name__}.{name}"
            assert "Any" not in str(info.annotation), f"{model.__name__}.{name}"


def _field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of ``model`` (its own and its bases'), by field name."""
    docs: dict[str, str] = {}
    for kind in reversed(model.__mro__):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            docs.update(_class_field_docs(kind.__module__, kind.__qualname__))
    return {name: docs[name] for name in model.model_fields if name in docs}


@functools.cache
def _class_field_docs(module: str, qualname: str) -> dict[str, str]:
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError):
        return {}
    body: list[ast.stmt] = tree.body
    for part in qualname.split("."):
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == part]
        if not found:
            return {}
        body = found[0].body
    docs = {}
    for stmt, after in itertools.pairwise(body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs
