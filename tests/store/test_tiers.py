"""The prefix store's settings: budgets are bounded before LMDB sees them."""

from __future__ import annotations

import pytest

from codedag.errors import ConfigError
from codedag.plan.cache import MAX_BUDGET_BYTES
from codedag.store.tiers import StoreSettings


@pytest.mark.parametrize("budget", [10**20, MAX_BUDGET_BYTES + 1, -1, float("nan"), True, "1G"])
@pytest.mark.parametrize("name", ["ram_budget_bytes", "disk_budget_bytes"])
def test_a_budget_out_of_bounds_is_one_clear_error(name: str, budget: object) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a number of bytes") as info:
        StoreSettings(**{name: budget})  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_budgets_within_bounds_and_defaults_are_accepted() -> None:
    settings = StoreSettings(ram_budget_bytes=MAX_BUDGET_BYTES, disk_budget_bytes=0)
    assert settings.ram_budget_bytes == MAX_BUDGET_BYTES
    assert StoreSettings().ram_budget_bytes is None


def test_a_plan_budget_that_settings_would_refuse_never_reaches_the_store() -> None:
    import dataclasses

    with pytest.raises(ConfigError):
        dataclasses.replace(StoreSettings(), ram_budget_bytes=10**30)
