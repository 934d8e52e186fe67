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

from codedag.plan.context import function_of
from codedag.plan.tables import TablesSection
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

    call: dict[str, Any]
    inside: list[dict[str, Any]] = field(default_factory=list)
    candidate: bool = False


def _owner_eligible(function: str, is_library: Callable[[str], bool]) -> bool:
    if function.rsplit(".", 1)[-1] in FRAMES:
        return False
    return is_library(function.split(".", 1)[0])


def group_calls(
    plan: dict[str, Any],
    can_migrate: Callable[[str], bool] | None = None,
    is_library: Callable[[str], bool] | None = None,
) -> list[CallGroup]:
    """The plan's calls grouped under the outermost library call each runs inside, ordered for
    a reader: placed first, then calls with a torch backend, each by traced time.

    Args:
        plan: a migration plan dict.
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
    calls = list(plan.get("calls", []))
    owner_of_key = {
        key: index
        for index, call in enumerate(calls)
        if _owner_eligible(str(call.get("function", "")), is_library)
        for key in call.get("context_keys", [])
    }

    def owner(call: dict[str, Any], index: int) -> int | None:
        found: Counter[int] = Counter()
        for key in call.get("context_keys", []):
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
            groups[index] = CallGroup(call, candidate=can_migrate(str(call.get("function", ""))))
    for index, call in enumerate(calls):
        top = owners[index]
        while top is not None and owners[top] is not None:  # an owner inside another one
            top = owners[top]
        if top is not None:
            groups[top].inside.append(call)
    return sorted(
        groups.values(),
        key=lambda g: (
            not g.call.get("migrate"),
            not g.candidate,
            -int(g.call.get("measured_ns", 0) or 0),
        ),
    )


def _inside_summary(calls: list[dict[str, Any]], shown: int = 3) -> str:
    counts: Counter[str] = Counter()
    for call in calls:
        counts[str(call.get("function", "?"))] += int(call.get("instance_count", 1) or 1)
    names = [f"{name} x{n}" if n > 1 else name for name, n in counts.most_common(shown)]
    more = len(counts) - shown
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _ms(ns: Any) -> str:
    if ns is None:
        return "-"
    return f"{ns / 1e6:.3g}"


def _ms_text(ns: Any) -> str:
    """``ns`` in milliseconds with its unit (``"12.8 ms"``), ``"-"`` when not measured."""
    return "-" if ns is None else f"{_ms(ns)} ms"


def _speedup(call: dict[str, Any]) -> str:
    original, backend = call.get("original_ns"), call.get("backend_ns")
    if not original or not backend:
        return "-"
    return f"{original / backend:.2f}x"


def plan_table(
    plan: dict[str, Any],
    limit: int | None = 30,
    measured_only: bool = False,
    show_all: bool = False,
) -> Any:
    """A rich Table of the plan's calls, grouped (see the module docstring).

    Args:
        plan: a migration plan dict.
        limit: groups shown at most (``None``: all).
        measured_only: only groups whose call was measured or placed (the others have nothing to
            show but "no backend").
        show_all: every call as a row of its own (calls inside another one indented under it).
    """
    from rich.table import Table

    groups = group_calls(plan)
    if measured_only:
        groups = [
            g for g in groups if g.call.get("migrate") or g.call.get("original_ns") is not None
        ]
    shown = groups if limit is None else groups[:limit]
    placement = plan.get("placement") or {}
    basis = placement.get("basis", "none")
    where = placement.get("device_name") or plan.get("target_device") or "none"
    title = (
        f"migration plan: {len(plan.get('context_device_map', {}))} context(s) migrate, "
        f"target {plan.get('target_device') or 'none'}, decided from "
        + ("measurements on " + where if basis == "measured" else basis)
    )
    table = Table(title=terminal_text(title, None), expand=False)
    table.add_column("function", overflow="fold", max_width=48)
    table.add_column("n", justify="right")
    table.add_column("device")
    table.add_column("library ms/call", justify="right")
    table.add_column("torch ms/call", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("saving ms", justify="right")
    table.add_column("reason", overflow="fold", max_width=64)

    def row(call: dict[str, Any], prefix: str = "") -> None:
        table.add_row(
            terminal_text(f"{prefix}{call.get('function', '')}"),
            str(call.get("instance_count", len(call.get("context_keys", [])))),
            terminal_text(call.get("device", "cpu")),
            _ms(call.get("original_ns")),
            _ms(call.get("backend_ns")),
            _speedup(call),
            _ms(call.get("saving_ns")) if call.get("original_ns") is not None else "-",
            terminal_text(call.get("reason", "")),
            style="green" if call.get("migrate") else ("dim" if prefix else ""),
        )

    grouped = 0
    for group in shown:
        row(group.call)
        if show_all:
            for call in group.inside:
                row(call, "  └ ")
            continue
        visible = [c for c in group.inside if c.get("migrate") or c.get("original_ns") is not None]
        for call in visible:
            row(call, "  └ ")
        hidden = [c for c in group.inside if c not in visible]
        if hidden:
            grouped += len(hidden)
            count = sum(int(c.get("instance_count", 1) or 1) for c in hidden)
            table.add_row(
                f"  └ {count} call(s) inside",
                "", "", "", "", "", "",
                terminal_text(f"{_inside_summary(hidden)}: not placed on their own, "
                              "they run inside the call above"),
                style="dim",
            )  # fmt: skip
    notes = []
    if len(groups) > len(shown):
        notes.append(f"{len(groups) - len(shown)} more call(s)")
    if grouped:
        notes.append(f"{grouped} call(s) grouped under the library call they run inside")
    if notes:
        table.caption = "; ".join(notes) + "; --all shows every one"
    return table


def chains_table(plan: dict[str, Any], limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's sample chains and their batched decision (``None``: none);
    ``limit`` chains at most, the rest counted."""
    from rich.table import Table

    section = plan.get("batched") or {}
    chains = section.get("chains") or []
    if not chains:
        return None
    batched = [c["id"] for c in chains if c.get("batched")]
    table = Table(
        title=terminal_text(
            f"batched execution ({section.get('mode', 'auto')}, on "
            f"{section.get('device') or 'no device'}): {len(batched)} of {len(chains)} "
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
        calls = chain.get("backend_calls")
        table.add_row(
            terminal_text(chain.get("id", "")),
            terminal_text(" > ".join(str(s).rsplit(".", 1)[-1] for s in chain.get("steps", []))),
            str(chain.get("samples", 0)),
            str(chain.get("batch_size", 0)),
            _ms(chain.get("original_ns")),
            _ms(chain.get("batched_ns")),
            "-" if calls is None else str(calls),
            "yes" if chain.get("batched") else "no",
            terminal_text(chain.get("basis", "none")),
            terminal_text(chain.get("reason", "")),
            style="green" if chain.get("batched") else "",
        )
    return table


def cache_table(plan: dict[str, Any], limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's prefix cache: each chain's cut and figures (``None``: no
    ``cache`` section); ``limit`` chains at most, the rest counted."""
    from rich.table import Table

    section = plan.get("cache")
    if not section:
        return None
    chains = section.get("chains") or []
    cached = [c for c in chains if c.get("cached")]
    budget = section.get("budget_bytes", 0) / 1e6
    table = Table(
        title=(
            f"prefix cache ({section.get('mode', 'auto')}, budget {budget:.0f} MB): "
            f"{len(cached)} of {len(chains)} chain(s) cached, {section.get('bytes_total', 0) / 1e6:.1f}"
            f" MB, saves {_ms_text(section.get('saved_ns_per_sample'))} per sample from epoch 2"
        ),
        expand=False,
    )
    for column in ("chain", "source", "steps", "cut", "MB/sample", "traced ms", "read ms"):
        table.add_column(column, justify="right" if "ms" in column or "MB" in column else "left")
    table.add_column("cached")
    table.add_column("reason", overflow="fold", max_width=70)
    for chain in first_rows(table, chains, limit, "chain(s)"):
        cut = chain.get("cut") or {}
        table.add_row(
            str(chain.get("id", "")),
            str(chain.get("source_function", "")),
            " > ".join(str(s).rsplit(".", 1)[-1] for s in chain.get("steps", [])),
            str(cut.get("step", "-")),
            f"{cut.get('bytes_per_sample', 0) / 1e6:.3g}" if cut else "-",
            _ms(cut.get("prefix_ns")) if cut else "-",
            _ms(cut.get("read_ns")) if cut else "-",
            "yes" if chain.get("cached") else "no",
            str(chain.get("reason", "")),
            style="green" if chain.get("cached") else "",
        )
    return table


def cache_lines(plan: dict[str, Any]) -> list[str]:
    """Why the plan's prefix cache keeps nothing, one line per candidate: each chain's reason
    and each sample's first call that starts no chain (empty when a chain is cached or the plan
    has no ``cache`` section)."""
    section = plan.get("cache")
    if not section or any(c.get("cached") for c in section.get("chains") or []):
        return []
    lines = [
        f"{c.get('id', '')} ({c.get('source_function', '')}): {c.get('reason', '')}"
        for c in section.get("chains") or []
    ]
    for skipped in section.get("skipped") or []:
        where = skipped.get("caller") or "a DataLoader fetch"
        lines.append(f"in {where}: {skipped.get('reason', '')}")
    if not lines:
        lines.append(section.get("note") or "no sample reads a source that a chain follows")
    return [terminal_text(line) for line in lines]


def tables_table(plan: dict[str, Any], limit: int | None = SECTION_ROWS) -> Any | None:
    """A rich Table of the plan's element-wise runs through lookup tables (``None``: no
    ``tables`` section); ``limit`` runs at most, the rest counted."""
    from rich.table import Table

    raw = plan.get("tables")
    if not raw:
        return None
    section = TablesSection.model_validate(raw)
    runs = section.runs
    table = Table(
        title=(
            f"lookup tables ({section.mode}): {len(runs)} run(s); each table is "
            "used where it matches the calls bit for bit and is faster, measured on each "
            "process's first samples"
        ),
        expand=False,
    )
    for column in ("producer", "called from", "calls", "then", "traced ms"):
        table.add_column(column, justify="right" if "ms" in column else "left")
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
    plan: dict[str, Any], is_draw: Callable[[str], bool] | None = None
) -> list[str]:
    """One line per random draw the plan places without opting it in (``placement.only``): the
    migrator runs it with its library, since moving it would change the data.

    Args:
        plan: a migration plan dict.
        is_draw: ``function -> draws random numbers`` (default: the registry's).
    """
    if is_draw is None:
        from codedag.backends.registry import draws_random_numbers

        is_draw = draws_random_numbers
    only = set((plan.get("placement") or {}).get("only") or ())
    placed = [str(c.get("function", "")) for c in plan.get("calls", []) if c.get("migrate")]
    placed += [function_of(key) for key in plan.get("context_device_map", {}) if key.strip("/")]
    draws = [n for n in dict.fromkeys(placed) if n not in only and is_draw(n)]
    return [
        f"{printable(name, 80)} draws random numbers: `codedag migrate` runs it with its library, "
        "since moving it would change the data (name it with --only to move it anyway)"
        for name in draws
    ]


def section_lines(plan: dict[str, Any]) -> list[str]:
    """One line per section of the plan: applied (what it changes, with its figures), kept
    (present, but nothing in it changes the run) or absent, and why."""
    placed = len(plan.get("context_device_map") or {})
    lines = [
        f"placement: applied: {placed} call context(s) run on {plan.get('target_device')}"
        if placed
        else "placement: kept: every call runs with its library (the reasons are above)"
    ]
    chains = (plan.get("batched") or {}).get("chains") or []
    batched = sum(1 for c in chains if c.get("batched"))
    if batched:
        lines.append(f"batched: applied: {batched} of {len(chains)} chain(s) run once per batch")
    elif chains:
        lines.append(
            f"batched: kept: {len(chains)} chain(s) run per sample (the reasons are above)"
        )
    else:
        lines.append("batched: kept: no sample chain to run once per batch")
    cache = plan.get("cache")
    cached = [c for c in (cache or {}).get("chains") or [] if c.get("cached")]
    if not cache:
        lines.append("cache: off (--cache off)")
    elif cached:
        lines.append(
            f"cache: applied: {len(cached)} chain(s) cached, "
            f"{cache.get('bytes_total', 0) / 1e6:.1f} MB, saves "
            f"{_ms_text(cache.get('saved_ns_per_sample'))} per sample from epoch 2"
        )
    else:
        lines.append("cache: kept: nothing cached (the reasons are above)")
    runs = (plan.get("tables") or {}).get("runs") or []
    lines.append(
        f"tables: applied where measured exact and faster: {len(runs)} run(s)"
        if runs
        else "tables: kept: no element-wise run on uint8 arrays (or --tables off)"
    )
    loader = plan.get("loader")
    if not loader:
        lines.append("loader: kept: not tuned (--tune --dataloader MODULE:FACTORY, or --loader)")
    else:
        from codedag.plan import LoaderSection

        section = LoaderSection.model_validate(loader)
        rate = section.batches_per_s(section.chosen)
        figure = f", {rate:.1f} batches/s" if rate is not None else ""
        lines.append(
            f"loader: kept: your settings ({section.chosen.label()}{figure})"
            if section.keeps_yours
            else f"loader: applied: {section.chosen.label()}{figure} (changes "
            f"{', '.join(section.changed)})"
        )
    return [printable(line) for line in lines]
