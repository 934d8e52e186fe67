"""A human view of a migration plan: one row per call, with the measured figures behind it.

A library call runs calls of its own (``librosa.feature.melspectrogram`` calls SciPy's FFT
backend eight times, ``default_collate`` calls ``torch.stack``), and the trace records them all.
Listed one by one they bury the few calls a reader looks for, so the table groups every planned
call under the outermost library call it runs inside (:func:`group_calls`), one summary line per
group; calls with a torch backend stay visible as rows of their own. Placed calls come first,
then the candidates (calls with a torch backend), each by traced time; ``--all`` lists every
call. The other tables (sample chains, prefix cache, lookup tables) show their first
:data:`SECTION_ROWS` rows and count the rest, unless ``--all``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from codedag.plan import CacheChain, MigrationPlan, PlannedCall
from codedag.plan.context import function_of
from codedag.util.text import printable, terminal_text

FRAMES = ("__getitem__", "__getitems__", "__next__", "__iter__")
"""Calls that frame user code (a dataset's sample, the loader's batch): never an owner."""

SECTION_ROWS = 50
"""Rows a section table shows before the rest are only counted (``--all``: every row)."""

_Row = TypeVar("_Row")


def first_rows(table: Any, rows: Sequence[_Row], limit: int | None, what: str) -> Sequence[_Row]:
    """The first ``limit`` of ``rows`` (all for ``None``); the rest are counted in ``table``'s
    caption (``... and 99,950 more run(s); --all shows every one``)."""
    if limit is None or len(rows) <= limit:
        return rows
    table.caption = f"... and {len(rows) - limit:,} more {what}; --all shows every one"
    return rows[:limit]


@dataclass
class CallGroup:
    """A planned call and the planned calls that run inside it.

    Attributes:
        call: the outer call (a plan's ``calls`` entry).
        inside: calls made from within it, in plan order.
        candidate: whether the outer call has a torch backend.
    """

    call: PlannedCall
    inside: list[PlannedCall] = field(default_factory=list)
    candidate: bool = False


def _owner_eligible(function: str, is_library: Callable[[str], bool]) -> bool:
    if function.rsplit(".", 1)[-1] in FRAMES:
        return False
    return is_library(function.split(".", 1)[0])


def group_calls(
    plan: MigrationPlan,
    can_migrate: Callable[[str], bool] | None = None,
    is_library: Callable[[str], bool] | None = None,
) -> list[CallGroup]:
    """The plan's calls grouped under the outermost library call each runs inside, ordered for
    a reader: placed first, then calls with a torch backend, each by traced time.

    Args:
        plan: a migration plan.
        can_migrate: ``function -> has a torch backend`` (default: the op library's).
        is_library: ``top-level module -> is library code`` (default: known, standard or
            installed packages).
    """
    if can_migrate is None:
        from codedag.optimize.costs import default_can_migrate

        can_migrate = default_can_migrate()
    if is_library is None:
        from codedag.backends.libraries import is_library_module

        is_library = is_library_module
    calls = plan.calls
    owner_of_key = {
        key: index
        for index, call in enumerate(calls)
        if _owner_eligible(call.function, is_library)
        for key in call.context_keys
    }

    def owner(call: PlannedCall, index: int) -> int | None:
        found: Counter[int] = Counter()
        for key in call.context_keys:
            segments = [s for s in key.split("/") if s]
            for depth in range(2, len(segments)):  # below the root, outermost first
                candidate = owner_of_key.get("/".join(segments[:depth]))
                if candidate is not None and candidate != index:
                    found[candidate] += 1
                    break
        return found.most_common(1)[0][0] if found else None

    owners = {i: owner(call, i) for i, call in enumerate(calls)}
    groups: dict[int, CallGroup] = {}
    for index, call in enumerate(calls):
        if owners[index] is None:
            groups[index] = CallGroup(call, candidate=can_migrate(call.function))
    for index, call in enumerate(calls):
        top = owners[index]
        while top is not None and owners[top] is not None:  # an owner inside another one
            top = owners[top]
        if top is not None:
            groups[top].inside.append(call)
    return sorted(
        groups.values(),
        key=lambda g: (not g.call.migrate, not g.candidate, -g.call.measured_ns),
    )


def _inside_summary(calls: list[PlannedCall], shown: int = 3) -> str:
    counts: Counter[str] = Counter()
    for call in calls:
        counts[call.function] += call.instance_count or 1
    names = [f"{name} x{n}" if n > 1 else name for name, n in counts.most_common(shown)]
    more = len(counts) - shown
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _ms(ns: float | None) -> str:
    if ns is None:
        return "-"
    return f"{ns / 1e6:.3g}"


def _ms_text(ns: float) -> str:
    """``ns`` in milliseconds with its unit (``"12.8 ms"``)."""
    return f"{_ms(ns)} ms"


def _speedup(call: PlannedCall) -> str:
    original, backend = call.original_ns, call.backend_ns
    if not original or not backend:
        return "-"
    return f"{original / backend:.2f}x"


def _shown_inside(call: PlannedCall) -> bool:
    """Whether a call inside another one keeps a row of its own (placed or measured)."""
    return call.migrate or call.original_ns is not None


def _plan_title(plan: MigrationPlan) -> str:
    basis = plan.placement.basis
    where = plan.placement.device_name or plan.target_device or "none"
    return (
        f"migration plan: {len(plan.context_device_map)} context(s) migrate, "
        f"target {plan.target_device or 'none'}, decided from "
        + ("measurements on " + where if basis == "measured" else basis)
    )


def _calls_table(title: str) -> Any:
    """An empty rich Table with the call table's columns."""
    from rich.table import Table

    table = Table(title=terminal_text(title, None), expand=False)
    table.add_column("function", overflow="fold", max_width=48)
    table.add_column("n", justify="right")
    table.add_column("device")
    table.add_column("library ms/call", justify="right")
    table.add_column("torch ms/call", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("saving ms", justify="right")
    table.add_column("reason", overflow="fold", max_width=64)
    return table


def _add_call_row(table: Any, call: PlannedCall, prefix: str = "") -> None:
    table.add_row(
        terminal_text(f"{prefix}{call.function}"),
        str(call.instance_count),
        terminal_text(call.device),
        _ms(call.original_ns),
        _ms(call.backend_ns),
        _speedup(call),
        _ms(call.saving_ns) if call.original_ns is not None else "-",
        terminal_text(call.reason),
        style="green" if call.migrate else ("dim" if prefix else ""),
    )


def _add_group_rows(table: Any, group: CallGroup, show_all: bool) -> int:
    """The group's call, then the calls inside it: every one with ``show_all``, else those
    placed or measured and one summary row for the rest; how many the summary stands for."""
    _add_call_row(table, group.call)
    if show_all:
        for call in group.inside:
            _add_call_row(table, call, "  └ ")
        return 0
    visible = [c for c in group.inside if _shown_inside(c)]
    for call in visible:
        _add_call_row(table, call, "  └ ")
    hidden = [c for c in group.inside if c not in visible]
    if hidden:
        count = sum(c.instance_count or 1 for c in hidden)
        table.add_row(
            f"  └ {count} call(s) inside",
            "", "", "", "", "", "",
            terminal_text(f"{_inside_summary(hidden)}: not placed on their own, "
                          "they run inside the call above"),
            style="dim",
        )  # fmt: skip
    return len(hidden)


def plan_table(
    plan: MigrationPlan,
    limit: int | None = 30,
    measured_only: bool = False,
    show_all: bool = False,
) -> Any:
    """A rich Table of the plan's calls, grouped (see the module docstring).

    Args:
        plan: a migration plan.
        limit: groups shown at most (``None``: all).
        measured_only: only groups whose call was measured or placed (the others have nothing to
            show but "no backend").
        show_all: every call as a row of its own (calls inside another one indented under it).
    """
    groups = group_calls(plan)
    if measured_only:
        groups = [g for g in groups if _shown_inside(g.call)]
    shown = groups if limit is None else groups[:limit]
    table = _calls_table(_plan_title(plan))
    grouped = sum(_add_group_rows(table, group, show_all) for group in shown)
    notes = []
    if len(groups) > len(shown):
        notes.append(f"{len(groups) - len(shown)} more call(s)")
    if grouped:
        notes.append(f"{grouped} call(s) grouped under the library call they run inside")
    if notes:
        table.caption = "; ".join(notes) + "; --all shows every one"
    return table


def chains_table(plan: MigrationPlan, limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's sample chains and their batched decision (``None``: none);
    ``limit`` chains at most, the rest counted."""
    from rich.table import Table

    section = plan.batched
    chains = section.chains
    if not chains:
        return None
    batched = [c.id for c in chains if c.batched]
    table = Table(
        title=terminal_text(
            f"batched execution ({section.mode}, on "
            f"{section.device or 'no device'}): {len(batched)} of {len(chains)} "
            "chain(s) run once per batch",
            None,
        ),
        expand=False,
    )
    table.add_column("chain")
    table.add_column("steps", overflow="fold", max_width=40)
    table.add_column("samples", justify="right")
    table.add_column("batch", justify="right")
    table.add_column("per-sample ms/batch", justify="right")
    table.add_column("batched ms/batch", justify="right")
    table.add_column("backend calls", justify="right")
    table.add_column("batched")
    table.add_column("basis")
    table.add_column("reason", overflow="fold", max_width=60)
    for chain in first_rows(table, chains, limit, "chain(s)"):
        calls = chain.backend_calls
        table.add_row(
            terminal_text(chain.id),
            terminal_text(" > ".join(s.rsplit(".", 1)[-1] for s in chain.steps)),
            str(chain.samples),
            str(chain.batch_size),
            _ms(chain.original_ns),
            _ms(chain.batched_ns),
            "-" if calls is None else str(calls),
            "yes" if chain.batched else "no",
            terminal_text(chain.basis),
            terminal_text(chain.reason),
            style="green" if chain.batched else "",
        )
    return table


def _cache_row(chain: CacheChain) -> list[str]:
    cut = chain.cut
    return [
        chain.id,
        chain.source_function + "".join(f" (line {line})" for line in chain.lines),
        " > ".join(s.rsplit(".", 1)[-1] for s in chain.steps),
        cut.step if cut else "-",
        f"{cut.bytes_per_sample / 1e6:.3g}" if cut else "-",
        _ms(cut.prefix_ns) if cut else "-",
        _ms(cut.read_ns) if cut else "-",
        "yes" if chain.cached else "no",
        chain.reason,
    ]


def _section_table(title: str, columns: Sequence[str], reason: bool = False) -> Any:
    """An empty rich Table: figures (``ms``, ``MB`` columns) right-aligned, and (``reason``) a
    last column of reasons, folded."""
    from rich.table import Table

    table = Table(title=title, expand=False)
    for column in columns:
        table.add_column(column, justify="right" if "ms" in column or "MB" in column else "left")
    if reason:
        table.add_column("reason", overflow="fold", max_width=70)
    return table


def cache_table(plan: MigrationPlan, limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's prefix cache: each chain's cut and figures (``None``: no
    ``cache`` section); ``limit`` chains at most, the rest counted."""
    section = plan.cache
    if section is None:
        return None
    chains = section.chains
    cached = [c for c in chains if c.cached]
    budget = section.budget_bytes / 1e6
    table = _section_table(
        f"prefix cache ({section.mode}, budget {budget:.0f} MB): "
        f"{len(cached)} of {len(chains)} chain(s) cached, {section.bytes_total / 1e6:.1f}"
        f" MB, saves {_ms_text(section.saved_ns_per_sample)} per sample from epoch 2",
        ("chain", "source", "steps", "cut", "MB/sample", "traced ms", "read ms", "cached"),
        reason=True,
    )
    for chain in first_rows(table, chains, limit, "chain(s)"):
        table.add_row(*_cache_row(chain), style="green" if chain.cached else "")
    return table


def cache_lines(plan: MigrationPlan) -> list[str]:
    """Why the plan's prefix cache keeps nothing, one line per candidate: each chain's reason
    and each sample's first call that starts no chain (empty when a chain is cached or the plan
    has no ``cache`` section)."""
    section = plan.cache
    if section is None or any(c.cached for c in section.chains):
        return []
    lines = [f"{c.id} ({c.source_function}): {c.reason}" for c in section.chains]
    for skipped in section.skipped:
        where = skipped.caller or "a DataLoader fetch"
        lines.append(f"in {where}: {skipped.reason}")
    if not lines:
        lines.append(section.note or "no sample reads a source that a chain follows")
    return [terminal_text(line) for line in lines]


def tables_table(plan: MigrationPlan, limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's element-wise runs through lookup tables (``None``: no
    ``tables`` section); ``limit`` runs at most, the rest counted."""
    section = plan.tables
    if section is None:
        return None
    runs = section.runs
    table = _section_table(
        f"lookup tables ({section.mode}): {len(runs)} run(s); each table is "
        "used where it matches the calls bit for bit and is faster, measured on each "
        "process's first samples",
        ("producer", "called from", "calls", "then", "traced ms"),
    )
    for run in first_rows(table, runs, limit, "run(s)"):
        table.add_row(
            run.producer,
            ", ".join(c.rsplit(".", 2)[-2] for c in run.callers) or "anywhere",
            " > ".join(c.rsplit(".", 1)[-1] for c in run.calls),
            run.consumer or "-",
            _ms(run.traced_ns),
        )
    return table


def random_draw_lines(
    plan: MigrationPlan, is_draw: Callable[[str], bool] | None = None
) -> list[str]:
    """One line per random draw the plan places without opting it in (``placement.only``): the
    migrator runs it with its library, since moving it would change the data.

    Args:
        plan: a migration plan.
        is_draw: ``function -> draws random numbers`` (default: the registry's).
    """
    if is_draw is None:
        from codedag.backends.placement_blockers import draws_random_numbers

        is_draw = draws_random_numbers
    only = set(plan.placement.only)
    placed = [c.function for c in plan.calls if c.migrate]
    placed += [function_of(key) for key in plan.context_device_map if key.strip("/")]
    draws = [n for n in dict.fromkeys(placed) if n not in only and is_draw(n)]
    return [
        f"{printable(name, 80)} draws random numbers: `codedag migrate` runs it with its library, "
        "since moving it would change the data (name it with --only to move it anyway)"
        for name in draws
    ]


def _batched_line(plan: MigrationPlan) -> str:
    chains = plan.batched.chains
    batched = sum(1 for c in chains if c.batched)
    if batched:
        return f"batched: applied: {batched} of {len(chains)} chain(s) run once per batch"
    if chains:
        return f"batched: kept: {len(chains)} chain(s) run per sample (the reasons are above)"
    return "batched: kept: no sample chain to run once per batch"


def _cache_line(plan: MigrationPlan) -> str:
    cache = plan.cache
    if cache is None:
        return "cache: off (--cache off)"
    cached = [c for c in cache.chains if c.cached]
    if not cached:
        return "cache: kept: nothing cached (the reasons are above)"
    return (
        f"cache: applied: {len(cached)} chain(s) cached, "
        f"{cache.bytes_total / 1e6:.1f} MB, saves "
        f"{_ms_text(cache.saved_ns_per_sample)} per sample from epoch 2"
        + "".join(_cut_clause(chain) for chain in cached)
    )


def _first_epoch_line(plan: MigrationPlan) -> list[str]:
    """``cache, first epoch: ...``: how the cache's first epoch stores values (none where the
    plan caches nothing, or was written before the plan said)."""
    cache = plan.cache
    if cache is None or not cache.cached_chains or not cache.first_epoch:
        return []
    return [f"cache, first epoch: {cache.first_epoch}"]


def _cut_clause(chain: CacheChain) -> str:
    """``; prefix0 cut after X (2.08 MB float32): not at Y's 4x smaller value ...``: why a
    cached chain's cut sits where it does against its other values (empty where no other value
    saves time at a different size)."""
    from codedag.optimize.cache import EPOCHS, MIN_SAVING
    from codedag.optimize.cache_bytes import bytes_clause

    cut = chain.cut
    clause = bytes_clause(chain.candidates, cut, EPOCHS, MIN_SAVING) if cut else ""
    if cut is None or not clause:
        return ""
    size = f"{cut.bytes_per_sample / 1e6:.3g} MB {cut.dtype}".strip()
    return f"; {chain.id} cut after {cut.step} ({size}): {clause}"


def _loader_line(plan: MigrationPlan) -> str:
    section = plan.loader
    if section is None:
        return "loader: kept: not tuned (--tune --dataloader MODULE:FACTORY, or --loader)"
    rate = section.batches_per_s(section.chosen)
    figure = f", {rate:.1f} batches/s" if rate is not None else ""
    return (
        f"loader: kept: your settings ({section.chosen.label()}{figure})"
        if section.keeps_yours
        else f"loader: applied: {section.chosen.label()}{figure} (changes "
        f"{', '.join(section.changed)})"
    )


def section_lines(plan: MigrationPlan) -> list[str]:
    """One line per section of the plan: applied (what it changes, with its figures), kept
    (present, but nothing in it changes the run) or absent, and why."""
    placed = len(plan.context_device_map)
    runs = plan.tables.runs if plan.tables is not None else []
    lines = [
        f"placement: applied: {placed} call context(s) run on {plan.target_device}"
        if placed
        else "placement: kept: every call runs with its library (the reasons are above)",
        _batched_line(plan),
        _cache_line(plan),
        *_first_epoch_line(plan),
        f"tables: applied where measured exact and faster: {len(runs)} run(s)"
        if runs
        else "tables: kept: no element-wise run on uint8 arrays (or --tables off)",
        _loader_line(plan),
    ]
    return [printable(line) for line in lines]
