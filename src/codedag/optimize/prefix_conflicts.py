"""The prefix cache against placement and batched chains (a pure pass over the plan).

The prefix cache hands the calls before each cut values of its own (placeholders of what a hit
skips). Two other parts of a plan replace functions too:

* **a batched chain** that begins with steps of a cached prefix begins after the cut instead:
  the value read back (or computed and stored) at the cut is its input, so a hit skips the decode
  and the chain still runs once per batch. Where both replace a function anyway (a step after the
  cut, a guard), the runtime nests their replacements (:mod:`codedag.migrate.dispatch`);
* **a placed call** of a function the cache replaces is not nested (the placement's wrapper
  counts and checks every call itself): the plan keeps whichever saves more per sample over
  :data:`codedag.optimize.prefix.EPOCHS` epochs, from the figures already measured: the cache
  ``share * (EPOCHS - 1) * saved_ns - write_ns`` (a hit saves the prefix minus the read from the
  second epoch on; the first epoch stores, for the share of the data set the budget holds),
  placement ``EPOCHS * (original_ns - backend_ns - transfer_ns)`` for each of the chain's calls it
  places. The loser is switched off with the reason, and the plan gets a note. A cached chain's
  *guards* (other functions of its libraries, patched only to take its values as computed
  arrays) yield to a placement that patches them: they are dropped from the chain.
"""

from __future__ import annotations

from typing import Any

from codedag.optimize.prefix import EPOCHS


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3g} ms"


def cache_value_ns(chain: dict[str, Any]) -> float:
    """What a cached chain saves per source over :data:`EPOCHS` epochs."""
    cut = chain.get("cut") or {}
    share = float(chain.get("share", 1.0))
    return share * (EPOCHS - 1) * cut.get("saved_ns", 0) - cut.get("write_ns", 0)


def _placed_value_ns(call: dict[str, Any], sources: int) -> float:
    original, backend = call.get("original_ns"), call.get("backend_ns")
    if original is None or backend is None:
        return 0.0
    per_call = max(0, original - backend - int(call.get("transfer_ns") or 0))
    calls = max(1, int(call.get("instance_count", 1) or 1)) / max(1, sources)
    return EPOCHS * per_call * calls


def resolve(plan: dict[str, Any]) -> None:
    """Give each function patched by a cached chain one owner (see the module docstring)."""
    section = plan.get("cache") or {}
    for chain in section.get("chains", []):
        if not chain.get("cached") or not chain.get("cut"):
            continue
        cut = chain["cut"]
        covered = chain.get("steps", [])[: int(cut.get("position", 0)) + 1]
        for entry in (plan.get("batched") or {}).get("chains", []):
            if entry.get("batched"):
                _feed(plan, chain, set(covered), entry)
        patched = set(chain.get("functions", [])) | set(covered) | {chain["source_function"]}
        calls = [c for c in plan.get("calls", []) if c.get("migrate") and c["function"] in patched]
        if not calls:
            continue
        sources = int(chain.get("sources", 1) or 1)
        other = sum(_placed_value_ns(c, sources) for c in calls)
        mine = cache_value_ns(chain)
        names = [c["function"] for c in calls]
        if mine >= other:
            _unplace(plan, chain["id"], calls, [], mine, other)
        else:
            _uncache(section, chain, names, mine, other)
        plan.setdefault("notes", []).append(
            f"prefix cache: {chain['id']} and {', '.join(names)} patch the same functions; "
            f"kept the {'cache' if mine >= other else 'placement'} ({_ms(max(mine, other))} vs "
            f"{_ms(min(mine, other))} saved per sample over {EPOCHS} epochs)"
        )
    _release_guards(plan)


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
    first = next((s for s in rest if s in functions), None)
    parents = {key.rpartition("/")[0] for key in entry.get("entries", [])}
    keys = sorted(
        key
        for call in plan.get("calls", [])
        if call["function"] == first
        for key in call.get("context_keys", [])
        if key.rpartition("/")[0] in parents
    )
    cut = chain["cut"]["step"]
    if first is None or not keys:
        entry["batched"] = False
        entry["reason"] = (
            f"{entry.get('reason', '')}; its steps up to {cut} are the cached prefix of "
            f"{chain['id']}, and no library call after them starts a chain: not batched"
        )
        return
    entry.update(steps=rest, functions=functions, entries=keys, entry_functions=[first])
    entry["reason"] = (
        f"{entry.get('reason', '')}; starts at {first}, after the cut at {cut}: the prefix "
        f"cache's {chain['id']} gives its input"
    )
    plan.setdefault("notes", []).append(
        f"prefix cache: {chain['id']} feeds batched {entry['id']}, which starts at {first}"
    )


def owned_functions(plan: dict[str, Any]) -> set[str]:
    """The functions a placement or a batched chain of ``plan`` patches."""
    owned = {c["function"] for c in plan.get("calls", []) if c.get("migrate")}
    for entry in (plan.get("batched") or {}).get("chains", []):
        if entry.get("batched"):
            owned.update(entry.get("functions", []))
    return owned


def _release_guards(plan: dict[str, Any]) -> None:
    """Drop from the cached chains' guards the functions a placement patches (a batched
    chain's replacements are nested inside the cache's: they share them)."""
    owned = {c["function"] for c in plan.get("calls", []) if c.get("migrate")}
    for chain in (plan.get("cache") or {}).get("chains", []):
        if chain.get("guards"):
            chain["guards"] = [g for g in chain["guards"] if g not in owned]


def _unplace(
    plan: dict[str, Any],
    chain_id: str,
    calls: list[dict[str, Any]],
    batched: list[dict[str, Any]],
    mine: float,
    other: float,
) -> None:
    why = (
        f"the prefix cache keeps the result of {chain_id}, which saves more ({_ms(mine)} vs "
        f"{_ms(other)} per sample over {EPOCHS} epochs)"
    )
    for call in calls:
        for key in call.get("context_keys", []):
            plan.get("context_device_map", {}).pop(key, None)
        call["migrate"] = False
        call["device"] = "cpu"
        call["reason"] = f"{call.get('reason', '')}; {why}"
    for entry in batched:
        entry["batched"] = False
        entry["reason"] = f"{entry.get('reason', '')}; {why}"


def _uncache(
    section: dict[str, Any], chain: dict[str, Any], names: list[str], mine: float, other: float
) -> None:
    share = float(chain.get("share", 1.0))
    cut = chain["cut"]
    samples = max(1, int(section.get("samples", 0) or chain.get("samples", 1) or 1))
    per_sample = int(chain.get("sources", 1) or 1) / samples
    section["saved_ns_per_sample"] -= int(share * cut.get("saved_ns", 0) * per_sample)
    section["write_ns_per_sample"] = max(
        0, section["write_ns_per_sample"] - int(share * cut.get("write_ns", 0) * per_sample)
    )
    distinct = section.get("dataset_len") or int(chain.get("sources", 1) or 1)
    section["bytes_total"] = max(
        0, section["bytes_total"] - int(share * cut.get("bytes_per_sample", 0) * distinct)
    )
    chain["cached"] = False
    chain["reason"] = (
        f"{', '.join(names)} also patch its functions and save more ({_ms(other)} vs "
        f"{_ms(mine)} per sample over {EPOCHS} epochs): not cached"
    )
