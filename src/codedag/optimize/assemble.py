"""One migration plan from the passes' typed sections, with each function given one owner.

The passes each return their section of the plan model: placement the calls
(:func:`~codedag.optimize.plan_builder.build_plan`, a plan with no other section yet), the
batched chains (:func:`~codedag.optimize.batched.batched_section`), the prefix cache
(:func:`~codedag.optimize.cache.decide`), the lookup tables
(:func:`~codedag.optimize.tables.find_runs`) and the tuned DataLoader. :func:`assemble` puts them
together and resolves who patches what, on the models: batched chains take their functions from
per-call placement, a batched chain that begins inside a cached prefix begins after its cut
(:mod:`~codedag.optimize.cache_conflicts`), and table runs leave cached producers to the cache
and owned functions to their owner.
"""

from __future__ import annotations

from collections.abc import Sequence

from codedag.optimize.batched import apply_to_plan
from codedag.optimize.cache_conflicts import cached_functions, owned_functions, resolve
from codedag.optimize.tables import restrict
from codedag.plan import BatchedInfo, CacheSection, LoaderSection, MigrationPlan, TablesSection


def assemble(
    placement: MigrationPlan,
    batched: BatchedInfo,
    *,
    batched_note: str = "",
    cache: CacheSection | None = None,
    tables: TablesSection | None = None,
    loader: LoaderSection | None = None,
    notes: Sequence[str] = (),
) -> MigrationPlan:
    """The migration plan of the passes' sections (the sections given are left as they were).

    Args:
        placement: the placement pass's plan (its calls, maps, notes and ``placement``).
        batched: the batched section; its batched chains' functions leave per-call placement.
        batched_note: why no chain was found, for the notes when ``batched`` has none.
        cache: the prefix cache's section, or ``None`` (nothing cached).
        tables: every element-wise run found, or ``None``; runs whose producer is cached or
            owned are dropped, and the section too when no run is left.
        loader: the tuned DataLoader settings the plan applies, or ``None``.
        notes: notes about the plan as a whole, appended last.
    """
    plan = apply_to_plan(placement, batched, batched_note)
    if cache is not None:
        plan = resolve(plan.model_copy(update={"cache": cache}))
    update: dict[str, object] = {}
    if tables is not None:
        kept = restrict(tables, frozenset(cached_functions(plan)), frozenset(owned_functions(plan)))
        if kept.runs:
            update["tables"] = kept
    added = list(notes)
    if loader is not None:
        update["loader"] = loader
        added.insert(
            0,
            f"placement measured with the tuned DataLoader ({loader.chosen.label()}), "
            "which the plan also applies",
        )
    if added:
        update["notes"] = [*plan.notes, *added]
    return plan.model_copy(update=update) if update else plan
