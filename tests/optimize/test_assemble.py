"""Assembling the passes' typed sections into one plan, with one owner for each function."""

from __future__ import annotations

from test_prefix_conflicts import _decode_plan

from codedag.optimize.assemble import assemble
from codedag.plan import (
    BatchedInfo,
    LoaderSection,
    LoaderSettings,
    MigrationPlan,
    PlannedCall,
    TableRun,
    TablesSection,
)


def _sections() -> tuple[MigrationPlan, BatchedInfo, MigrationPlan]:
    """A placement with warpAffine placed, a batched chain of it, and a cached imread > resize."""
    whole = MigrationPlan.from_dict(_decode_plan(["cv2.warpAffine", "operator.truediv"]))
    call = PlannedCall(
        function="cv2.warpAffine",
        context_keys=["s#0/cv2.warpAffine#0"],
        migrate=True,
        device="cpu",
        reason="measured: saves",
    )
    placement = MigrationPlan(
        context_device_map={"s#0/cv2.warpAffine#0": "cpu"}, calls=[call], notes=["placed"]
    )
    return placement, whole.batched, whole


def _tables() -> TablesSection:
    runs = [TableRun(producer=p, calls=["operator.truediv"]) for p in ("cv2.resize", "cv2.flip")]
    runs.append(TableRun(producer="cv2.warpAffine", calls=["operator.truediv"]))
    return TablesSection(runs=runs, guards=["cv2.flip", "cv2.warpAffine", "torch.from_numpy"])


def test_each_function_has_one_owner_and_the_sections_given_are_kept() -> None:
    placement, batched, whole = _sections()
    tables = _tables()
    given = [m.model_copy(deep=True) for m in (placement, batched, tables)]
    plan = assemble(placement, batched, cache=whole.cache, tables=tables, notes=["k=3 is larger"])
    (call,) = plan.calls
    assert not call.migrate and "batched chain0" in call.reason  # the chain owns warpAffine
    assert plan.context_device_map == {}
    assert plan.cache == whole.cache and plan.batched.chains[0].batched
    assert plan.tables is not None
    assert [r.producer for r in plan.tables.runs] == ["cv2.flip"]  # resize: cached; warp: owned
    assert plan.tables.guards == ["cv2.flip", "torch.from_numpy"]
    assert plan.notes[0] == "placed" and plan.notes[-1] == "k=3 is larger"
    assert [placement, batched, tables] == given
    assert MigrationPlan.from_dict(plan.to_dict()) == plan


def test_no_run_left_means_no_tables_section_and_the_loader_is_noted() -> None:
    placement, batched, _ = _sections()
    owned = TablesSection(runs=[TableRun(producer="cv2.warpAffine")])
    chosen = LoaderSettings(num_workers=2, threads=1)
    loader = LoaderSection(chosen=chosen, yours=LoaderSettings(), changed=["num_workers"])
    plan = assemble(placement, batched, tables=owned, loader=loader, notes=["last"])
    assert plan.tables is None and plan.cache is None
    assert plan.loader == loader
    assert "tuned DataLoader" in plan.notes[-2] and plan.notes[-1] == "last"
