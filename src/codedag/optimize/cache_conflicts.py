"""The prefix cache beside placement and batched chains (a pure pass over the plan).

The prefix cache hands the calls before each cut values of its own (placeholders of what a hit
skips). At run time its replacements are the outermost of every function several parts replace
(:mod:`codedag.migrate.dispatch`): a placed call or a batched step it shares runs inside it, on a
miss and after the cut, so neither gives way to the other. One thing the plan itself must say: a
batched chain that begins with steps of a cached prefix begins after the cut instead. The value
read back (or computed and stored) at the cut is its input, so a hit skips the decode and the
chain still runs once per batch.
"""

from __future__ import annotations

from codedag.plan import BatchedChain, CacheChain, CacheCut, MigrationPlan, PlannedCall


def resolve(plan: MigrationPlan) -> MigrationPlan:
    """``plan`` with each batched chain that begins inside a cached prefix started after the
    prefix's cut (``plan`` itself is left as it was)."""
    if plan.cache is None:
        return plan
    entries = list(plan.batched.chains)
    notes = list(plan.notes)
    for chain in plan.cache.chains:
        if not chain.cached or chain.cut is None:
            continue
        for index, entry in enumerate(entries):
            if entry.batched:
                entries[index], note = _feed(plan.calls, chain, chain.cut, entry)
                notes.extend(note)
    if entries == plan.batched.chains:
        return plan
    batched = plan.batched.model_copy(update={"chains": entries})
    return plan.model_copy(update={"batched": batched, "notes": notes})


def _feed(
    calls: list[PlannedCall], chain: CacheChain, cut: CacheCut, entry: BatchedChain
) -> tuple[BatchedChain, list[str]]:
    """A batched chain that begins with steps of a cached prefix begins after its cut instead:
    the cached value is its input (its calls are neither computed nor deferred on a hit). The
    chain as it runs, and the plan's note about it (none when it is left as it was)."""
    covered = set(chain.steps[: cut.position + 1])
    steps = entry.steps
    skipped = 0
    while skipped < len(steps) and steps[skipped] in covered:
        skipped += 1
    if not skipped:
        return entry, []  # it does not begin inside the prefix: both replace what they share
    rest = steps[skipped:]
    functions = [f for f in entry.functions if f in rest]
    # A sample starts the chain at whichever of its calls comes first after the cut (a random
    # branch may skip the first step): every call of the chain's functions in its samples may
    # start it; a call whose input is deferred already records on it instead.
    parents = {key.rpartition("/")[0] for key in entry.entries}
    keys = sorted(
        key
        for call in calls
        if call.function in functions
        for key in call.context_keys
        if key.rpartition("/")[0] in parents
    )
    starts = sorted({key.rpartition("/")[2].rpartition("#")[0] for key in keys})
    if not keys:
        reason = (
            f"{entry.reason}; its steps up to {cut.step} are the cached prefix of "
            f"{chain.id}, and no library call after them starts a chain: not batched"
        )
        return entry.model_copy(update={"batched": False, "reason": reason}), []
    reason = (
        f"{entry.reason}; starts after the cut at {cut.step}: the prefix cache's "
        f"{chain.id} gives its input"
    )
    fed = entry.model_copy(
        update={
            "steps": rest,
            "functions": functions,
            "entries": keys,
            "entry_functions": starts,
            "reason": reason,
        }
    )
    return fed, [
        f"prefix cache: {chain.id} feeds batched {entry.id}, which starts after {cut.step}"
    ]


def owned_functions(plan: MigrationPlan) -> set[str]:
    """The functions a placement or a batched chain of ``plan`` patches."""
    owned = {c.function for c in plan.calls if c.migrate}
    for entry in plan.batched.chains:
        if entry.batched:
            owned.update(entry.functions)
    return owned


def cached_functions(plan: MigrationPlan) -> set[str]:
    """The functions of the chains ``plan``'s prefix cache caches."""
    chains = plan.cache.chains if plan.cache is not None else []
    return {f for c in chains if c.cached for f in c.functions}
