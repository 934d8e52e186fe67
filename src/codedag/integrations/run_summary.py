"""The summary an accelerated run prints at its end: epochs against the first, the cache, the plan."""

from __future__ import annotations

from dataclasses import dataclass

from codedag.backends.libraries import is_library_module
from codedag.integrations.run_results import AcceleratedRun, Decision, EpochFigures
from codedag.util.text import printable

_MAX_ROWS = 8


@dataclass(frozen=True)
class EpochRow:
    """One epoch's figures as the summary and the report show them."""

    figures: EpochFigures
    against_first: float | None
    """Samples per second against the first whole epoch's (None when it has none)."""
    wait_share: float | None
    """The share of the epoch spent waiting for data, 0 to 1."""
    plan: str
    """``on``, ``off`` or ``from batch N``, with `` (partial)`` for an epoch left early."""


def epoch_rows(results: AcceleratedRun) -> tuple[int, list[EpochRow]]:
    """The epoch the others are compared with, and every epoch's row."""
    # against the first whole epoch: a script that looks at one batch before training
    # (``next(iter(loader))``) makes a first "epoch" of one batch, tracing included
    base = next((e for e in results.epochs if e.complete), None)
    base = base or (results.epochs[0] if results.epochs else None)
    first = base.samples_per_s if base is not None else 0.0
    rows = []
    for e in results.epochs:
        plan = "on" if e.planned else "off"
        if e.planned and e.plan_from_batch:
            plan = f"from batch {e.plan_from_batch}"
        rows.append(
            EpochRow(
                e,
                e.samples_per_s / first if first > 0 else None,
                e.data_wait_s / e.epoch_s if e.epoch_s > 0 else None,
                plan + ("" if e.complete else " (partial)"),
            )
        )
    return (base.epoch if base is not None else 1), rows


def _epoch_lines(results: AcceleratedRun) -> list[str]:
    base, rows = epoch_rows(results)
    against = f"vs epoch {base}"
    lines = [
        "  epoch  batches  samples   time s  samples/s  "
        f"{against:>10}  data wait s  wait share  plan"
    ]
    for row in rows:
        e = row.figures
        ratio = f"{row.against_first:.2f}x" if row.against_first is not None else "-"
        share = f"{100 * row.wait_share:.0f} %" if row.wait_share is not None else "-"
        lines.append(
            f"  {e.epoch:>5}  {e.batches:>7}  {e.samples:>7}  {e.epoch_s:>7.2f}  "
            f"{e.samples_per_s:>9.1f}  {ratio:>10}  {e.data_wait_s:>11.2f}  {share:>10}  "
            f"{row.plan}"
        )
    return lines


def cache_line(cache: dict[str, object]) -> str:
    if not cache.get("enabled"):
        return "prefix cache: not used"
    hits = int(cache.get("hits", 0) or 0)  # type: ignore[call-overload]
    stored = int(cache.get("stored", 0) or 0)  # type: ignore[call-overload]
    hit_bytes = int(cache.get("hit_bytes", 0) or 0)  # type: ignore[call-overload]
    later = int(cache.get("not_stored_later", 0) or 0)  # type: ignore[call-overload]
    rate = float(cache.get("hit_rate", 0.0) or 0.0)  # type: ignore[arg-type]
    changed = int(cache.get("not_stored_changed", 0) or 0)  # type: ignore[call-overload]
    left = (
        f" ({later:,} left for a later epoch: storing them would have passed the storing share "
        "of the loading time)"
        if later
        else ""
    )
    if changed:
        left += (
            f" ({changed:,} written into by the sample before the writer stored them: stored "
            "when a later epoch computes them, the chain's values copied at the cut from then on)"
        )
    misses = cache.get("misses")
    other = {k: v for k, v in misses.items() if k != "new"} if isinstance(misses, dict) else {}
    computed = (
        "; computed without it: "
        + ", ".join(
            f"{int(n):,} ({_miss_text(reason, cache)})" for reason, n in sorted(other.items())
        )
        if other
        else ""
    )
    return (
        f"prefix cache: {hits:,} hits ({100 * rate:.0f} %), {hit_bytes:,} bytes read back, "
        f"{stored:,} values stored{left}{computed}"
    )


def _miss_text(reason: str, cache: dict[str, object]) -> str:
    """What a miss reason means; for ``diverged``, the most common way chains diverged."""
    from codedag.migrate.cache.reasons import MISS_REASONS

    text = MISS_REASONS.get(reason, reason)
    details = cache.get("diverged")
    if reason == "diverged" and isinstance(details, dict) and details:
        text += f": most often {max(details.items(), key=lambda item: item[1])[0]}"
    return text


_NO_BACKEND = "no torch backend"


def _framing(name: str) -> bool:
    """Whether ``name`` is the pipeline's own code or the DataLoader's, which frame the library
    calls a plan could move: named after them."""
    top = name.split(".")[0]
    return top == "__main__" or name.startswith("torch.utils.data.") or not is_library_module(top)


def grouped_decisions(rows: list[Decision]) -> tuple[list[str], list[Decision]]:
    """The functions with no torch backend (the pipeline's own code and the DataLoader's last),
    and the other decisions."""
    plain = sorted((r.what for r in rows if r.reason.startswith(_NO_BACKEND)), key=_framing)
    return plain, [r for r in rows if not r.reason.startswith(_NO_BACKEND)]


def no_backend_text(plain: list[str], shown: int | None = 4) -> str:
    """``N function(s) with no torch backend: a, b and M more`` (every name where ``shown`` is
    None)."""
    names = ", ".join(printable(n, 60) for n in plain[:shown])
    more = f" and {len(plain) - shown} more" if shown is not None and len(plain) > shown else ""
    return f"{len(plain)} function(s) with {_NO_BACKEND}: {names}{more}"


def _decision_lines(label: str, rows: list[Decision]) -> list[str]:
    lines = []
    plain, rows = grouped_decisions(rows)
    if plain:
        lines.append(f"{label}: {no_backend_text(plain)}")
    for row in rows[:_MAX_ROWS]:
        # a stored plan's record holds them (``idle``): every field is shown as printable text
        where = f" on {printable(row.where, 60)}" if row.where and label == "moved" else ""
        lines.append(
            f"{label}: [{printable(row.section, 20)}] {printable(row.what, 200)}{where}: "
            f"{printable(row.reason, 600)}"
        )
    if len(rows) > _MAX_ROWS:
        lines.append(f"{label}: ... and {len(rows) - _MAX_ROWS} more (results.json lists them all)")
    return lines


def summary_lines(
    results: AcceleratedRun, wanted: int = 0, label: str = "codedag run"
) -> list[str]:
    """The summary as lines of text (no trailing newlines); ``label`` starts the first line."""
    if results.loader_index is None:
        seen = results.loaders_seen
        return [f"{label}: no DataLoader #{wanted} was iterated ({seen} seen): nothing planned"]
    made = f" (made {results.loaders_made} times alike)" if results.loaders_made > 1 else ""
    head = (
        f"{label}: DataLoader #{results.loader_index} over {results.dataset}{made}, "
        f"plan {results.plan_status}"
    )
    if results.device:
        head += f" (device {results.device})"
    if results.plan_reason:
        head += f": {printable(results.plan_reason, 200)}"
    lines = [head]
    if results.trace_s or results.plan_s:
        lines.append(f"  traced in {results.trace_s:.2f} s, planned in {results.plan_s:.2f} s")
    lines.extend(_epoch_lines(results))
    if results.plan_status.startswith("applied"):
        lines.append(cache_line(results.cache))
    if results.plan_status.startswith(("applied", "nothing to apply")):
        lines.extend(_decision_lines("moved", results.moved))
        lines.extend(_decision_lines("kept", results.kept))
    return lines
