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

from typing import Any


def resolve(plan: dict[str, Any]) -> None:
    """Start each batched chain that begins inside a cached prefix after the prefix's cut."""
    for chain in (plan.get("cache") or {}).get("chains", []):
        if not chain.get("cached") or not chain.get("cut"):
            continue
        covered = set(chain.get("steps", [])[: int(chain["cut"].get("position", 0)) + 1])
        for entry in (plan.get("batched") or {}).get("chains", []):
            if entry.get("batched"):
                _feed(plan, chain, covered, entry)


def _feed(
    plan: dict[str, Any], chain: dict[str, Any], covered: set[str], entry: dict[str, Any]
) -> None:
    """A batched chain that begins with steps of a cached prefix begins after its cut instead:
    the cached value is its input (its calls are neither computed nor deferred on a hit)."""
    steps = entry.get("steps", [])
    skipped = 0
    while skipped < len(steps) and steps[skipped] in covered:
        skipped += 1
    if not skipped:
        return  # it does not begin inside the prefix: both replace what they share, nested
    rest = steps[skipped:]
    functions = [f for f in entry.get("functions", []) if f in rest]
    # A sample starts the chain at whichever of its calls comes first after the cut (a random
    # branch may skip the first step): every call of the chain's functions in its samples may
    # start it; a call whose input is deferred already records on it instead.
    parents = {key.rpartition("/")[0] for key in entry.get("entries", [])}
    keys = sorted(
        key
        for call in plan.get("calls", [])
        if call["function"] in functions
        for key in call.get("context_keys", [])
        if key.rpartition("/")[0] in parents
    )
    starts = sorted({key.rpartition("/")[2].rpartition("#")[0] for key in keys})
    cut = chain["cut"]["step"]
    if not keys:
        entry["batched"] = False
        entry["reason"] = (
            f"{entry.get('reason', '')}; its steps up to {cut} are the cached prefix of "
            f"{chain['id']}, and no library call after them starts a chain: not batched"
        )
        return
    entry.update(steps=rest, functions=functions, entries=keys, entry_functions=starts)
    entry["reason"] = (
        f"{entry.get('reason', '')}; starts after the cut at {cut}: the prefix cache's "
        f"{chain['id']} gives its input"
    )
    plan.setdefault("notes", []).append(
        f"prefix cache: {chain['id']} feeds batched {entry['id']}, which starts after {cut}"
    )


def owned_functions(plan: dict[str, Any]) -> set[str]:
    """The functions a placement or a batched chain of ``plan`` patches."""
    owned = {c["function"] for c in plan.get("calls", []) if c.get("migrate")}
    for entry in (plan.get("batched") or {}).get("chains", []):
        if entry.get("batched"):
            owned.update(entry.get("functions", []))
    return owned
