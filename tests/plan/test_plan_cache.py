"""The plan's optional ``cache`` section: old plans load without it, new ones round-trip."""

from __future__ import annotations

from codedag.plan import CacheChain, CacheCut, CacheSection, MigrationPlan


def test_a_plan_without_a_cache_section_loads_and_is_written_as_before() -> None:
    plan = MigrationPlan.from_dict({"context_device_map": {}, "schema_version": 2})
    assert plan.cache is None
    assert "cache" not in plan.to_dict()


def test_a_cache_section_round_trips_and_names_its_cached_chains() -> None:
    cut = CacheCut(step="cv2.resize", bytes_per_sample=100, prefix_ns=5, read_ns=1, saved_ns=4)
    cached = CacheChain(id="prefix0", source_function="cv2.imread", cut=cut, cached=True)
    section = CacheSection(
        budget_bytes=1 << 20, chains=[cached, CacheChain(id="prefix1", source_function="x.y")]
    )
    plan = MigrationPlan(context_device_map={}, cache=section)
    again = MigrationPlan.from_dict(plan.to_dict())
    assert again.cache == section
    assert [c.id for c in again.cache.cached_chains] == ["prefix0"]
    off = section.model_copy(update={"mode": "off"})
    assert off.cached_chains == []


def test_a_budget_past_the_bound_is_a_schema_error_naming_it() -> None:
    import pytest

    from codedag.errors import SchemaError
    from codedag.plan.cache import MAX_BUDGET_BYTES

    section = {"budget_bytes": MAX_BUDGET_BYTES}
    assert MigrationPlan.from_dict({"context_device_map": {}, "cache": section}).cache
    for budget in (MAX_BUDGET_BYTES + 1, 10**30, -1):
        plan = {"context_device_map": {}, "cache": {"budget_bytes": budget}}
        with pytest.raises(SchemaError, match=r"cache\.budget_bytes") as info:
            MigrationPlan.from_dict(plan, source="plan 'p.json'")
        assert "\n" not in str(info.value)
