"""The migration plan of a partitioned, coarsened DAG: every call with its device and the reason.

Whether a call leaves the CPU is decided by :mod:`codedag.optimize.placement` from measurements
(calibration on the target device), never from an assumed speedup unless the user asks for that
what-if. Partitions spread the placed calls over several accelerators: partitions holding placed
calls take the accelerators in order of what they save, round-robin; with one accelerator every
placed call runs on it. With no target device nothing moves and the notes say why.

DataLoader workers never use CUDA (a forked CUDA context is unusable and each spawned worker that
touches CUDA costs 300-500 MB): when the traced loader has workers, calls migrated one by one run
through torch on the CPU there, so they are measured and placed for the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codedag.errors import ConfigError
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.costs import CanMigrate, CostModel, default_can_migrate
from codedag.optimize.partition import Partition
from codedag.optimize.placement import Decision, PlacementSettings, Placer, blocked_reason
from codedag.plan import PLAN_SCHEMA_VERSION, MigrationPlan, check_device
from codedag.plan.model import Basis, PlacementInfo, PlannedCall
from codedag.version import __version__


def accelerators(gpu_count: int, target_device: str | None) -> list[str]:
    """The devices placed calls may run on: the target device, else ``cuda:0..gpu_count-1``."""
    if target_device is not None:
        try:
            check_device(target_device)
        except ValueError as e:
            raise ConfigError(f"target device: {e}") from None
        return [target_device if target_device != "cuda" else "cuda:0"]
    if gpu_count < 0:
        raise ConfigError(f"gpu_count must be >= 0, got {gpu_count}")
    return [f"cuda:{i}" for i in range(gpu_count)]


def loader_workers(dag: CoarsenedDAG) -> int:
    """``num_workers`` of the traced DataLoader (0 when the trace was not of a DataLoader)."""
    info = getattr(dag.source, "metadata", {}).get("dataloader") or {}
    try:
        return max(0, int(info.get("num_workers", 0)))
    except (TypeError, ValueError):
        return 0


def placement_device(accels: list[str], workers: int) -> str | None:
    """Where calls migrated one by one actually run: the CPU inside DataLoader workers."""
    if not accels:
        return None
    return "cpu" if workers > 0 else accels[0]


def _inside(dag: CoarsenedDAG, call: int, placed: set[int]) -> int | None:
    """The placed call that (transitively) calls ``call``, if any."""
    stack = list(dag.predecessors(call, "calls"))
    seen = set(stack)
    while stack:
        parent = stack.pop()
        if parent in placed:
            return parent
        for grand in dag.predecessors(parent, "calls"):
            if grand not in seen:
                seen.add(grand)
                stack.append(grand)
    return None


def _keys(dag: CoarsenedDAG, node_id: int) -> list[str]:
    """The usable context keys of a call (files from hand-built or old DAGs may hold empty ones)."""
    return [key for key in dag.context_keys(node_id) if key.strip("/")]


def _default_blocker() -> Callable[[str], str | None]:
    from codedag.backends.placement_blockers import placement_blocker

    return placement_blocker


def _default_positional() -> Callable[[str], tuple[str, ...]]:
    from codedag.backends.registry import default_registry

    registry = default_registry()

    def positional(name: str) -> tuple[str, ...]:
        spec = registry.get(name)
        return tuple(spec.positional_names) if spec is not None else ()

    return positional


def _screen_all(
    dag: CoarsenedDAG,
    calls: list[Any],
    part_of: dict[int, int],
    rules: _Rules,
    device: str | None,
) -> tuple[dict[int, Decision], dict[int, Decision]]:
    """Every call's decision after screening (refused, or undecided) and the undecided ones."""
    decisions: dict[int, Decision] = {}
    candidates: dict[int, Decision] = {}
    for node in calls:
        if node.id not in part_of:
            raise ConfigError(f"call {node.id} ({node.name}) is in no partition")
        refused = _screen(dag, node, rules, device)
        decisions[node.id] = refused or Decision()
        if refused is None:
            candidates[node.id] = decisions[node.id]
    return decisions, candidates


def build_plan(
    partitions: list[Partition],
    dag: CoarsenedDAG,
    gpu_count: int,
    target_device: str | None = None,
    cost: CostModel | None = None,
    can_migrate: CanMigrate | None = None,
    *,
    calibration: Any | None = None,
    settings: PlacementSettings | None = None,
    blocker: Callable[[str], str | None] | None = None,
    positional: Callable[[str], tuple[str, ...]] | None = None,
    workers: int | None = None,
) -> MigrationPlan:
    """The placement pass: every call of ``dag`` with its device and the reason (the plan's
    calls, maps, notes and ``placement``; the other sections are added by
    :func:`~codedag.optimize.assemble.assemble`).

    Args:
        partitions: the refined partitions of ``dag``.
        dag: the coarsened DAG.
        gpu_count: accelerators available.
        target_device: force the device (``cpu`` runs migrated calls through torch on the CPU).
        cost: the what-if cost model (used with ``settings.assume_speedup`` only).
        can_migrate: ``name -> bool`` (default: the migration registry).
        calibration: measured figures of the calls on the placement device.
        settings: margin, ``only``/``exclude`` and the what-if speedup.
        blocker: ``name -> reason`` for functions never placed without opt-in (random draws,
            backends that differ); default: the registry's.
        positional: ``name -> positional parameter names`` (finds ``dst``/``out`` buffers).
        workers: DataLoader workers the calls run in (default: the traced loader's).
    """
    settings = settings or PlacementSettings()
    rules = _Rules(
        can=can_migrate or default_can_migrate(),
        blocker=blocker or _default_blocker(),
        positional=positional or _default_positional(),
        settings=settings,
    )
    accels = accelerators(gpu_count, target_device)
    workers = loader_workers(dag) if workers is None else workers
    device = placement_device(accels, workers)
    part_of = {node: p.id for p in partitions for node in p.nodes}
    calls = sorted(dag.calls(), key=lambda n: n.id)
    decisions, candidates = _screen_all(dag, calls, part_of, rules, device)
    basis: Basis = "none"
    if device is not None and candidates:
        basis, figures = _decide(dag, candidates, device, settings, calibration, cost)
        decisions.update(figures)
    placed = _demote_nested(dag, decisions)
    device_of_part = _partition_devices(partitions, part_of, placed, decisions, accels, device)
    devices = {n.id: device_of_part[part_of[n.id]] for n in calls if decisions[n.id].migrate}
    entries, context_map = _entries(dag, calls, decisions, devices, rules.can)
    return MigrationPlan(
        schema_version=PLAN_SCHEMA_VERSION,
        codedag_version=__version__,
        k=max(1, len(partitions)),
        gpu_count=gpu_count,
        target_device=device,
        partition_device_map={str(p.id): device_of_part[p.id] for p in partitions},
        context_device_map=context_map,
        calls=entries,
        notes=_notes(accels, device, workers, basis, calls, candidates, placed, settings),
        placement=_placement_info(basis, device, calibration, settings),
    )


@dataclass(frozen=True)
class _Rules:
    """What keeps a call on the CPU before anything is measured."""

    can: CanMigrate
    blocker: Callable[[str], str | None]
    positional: Callable[[str], tuple[str, ...]]
    settings: PlacementSettings


def _screen(dag: CoarsenedDAG, node: Any, rules: _Rules, device: str | None) -> Decision | None:
    """The decision keeping ``node`` on the CPU whatever it measures, or ``None`` (a candidate)."""
    if not rules.can(node.name):
        return Decision(reason=f"no torch backend for {node.name}")
    if not _keys(dag, node.id):
        return Decision(
            reason="the trace recorded no context key for it: it cannot be addressed at run time"
        )
    args = getattr(dag.source.nodes.get(node.representative_id), "args", None)
    blocked = blocked_reason(
        node.name, args, rules.positional(node.name), rules.settings, rules.blocker
    )
    if blocked is not None:
        return Decision(reason=blocked, blocked=True)
    if device is None:
        return Decision(reason="no target device (no GPU, no --target-device)")
    return None


def _decide(
    dag: CoarsenedDAG,
    candidates: dict[int, Decision],
    device: str,
    settings: PlacementSettings,
    calibration: Any | None,
    cost: CostModel | None,
) -> tuple[Basis, dict[int, Decision]]:
    """The basis of the placement and each candidate's decision (measured, assumed or neither)."""
    placer = Placer(dag, settings, calibration, cost or CostModel(), not device.startswith("cpu"))
    basis: Basis
    if settings.assume_speedup is not None:
        basis = "assumed"
        figures = {i: placer._assumed(i) for i in candidates}
    elif calibration is not None:
        basis = "measured"
        figures = {i: placer._measured(i) for i in candidates}
    else:
        basis = "none"
        figures = {
            i: Decision(reason=f"not measured on {device}: calibrate to place calls")
            for i in candidates
        }
    placer.decide(figures, lambda _i: device)
    return basis, figures


def _demote_nested(dag: CoarsenedDAG, decisions: dict[int, Decision]) -> set[int]:
    """Unplace calls that run inside another placed call; the placed calls left."""
    placed = {i for i, d in decisions.items() if d.migrate}
    for node_id in sorted(placed):
        parent = _inside(dag, node_id, placed)
        if parent is not None:
            d = decisions[node_id]
            d.migrate = False
            d.reason = f"runs inside placed call {dag.nodes[parent].name}"
    return {i for i, d in decisions.items() if d.migrate}


def _planned_call(node: Any, keys: list[str], device: str, d: Decision) -> PlannedCall:
    """The plan's row of one call; the figures per instance, the saving over all of them."""
    per = max(1, node.instance_count)
    return PlannedCall(
        function=node.name,
        context_keys=keys,
        instance_count=node.instance_count,
        device=device,
        migrate=d.migrate,
        measured_ns=node.total_ns,
        original_ns=None if d.original_ns is None else d.original_ns // per,
        backend_ns=None if d.backend_ns is None else d.backend_ns // per,
        transfer_ns=d.transfer_ns // per,
        spread_ns=d.spread_ns // per,
        saving_ns=d.saving_ns,
        basis=d.basis,
        reason=d.reason,
        estimated_gain_ns=d.saving_ns,
        transfer_cost_ns=d.transfer_ns,
    )


def _entries(
    dag: CoarsenedDAG,
    calls: list[Any],
    decisions: dict[int, Decision],
    devices: dict[int, str],
    can: CanMigrate,
) -> tuple[list[PlannedCall], dict[str, str]]:
    """The plan's calls, placed first, and the context keys of the placed ones with their
    devices (``devices``: of each placed call); one entry for all the calls of a function with
    no torch backend."""
    context_map: dict[str, str] = {}
    entries: list[PlannedCall] = []
    unplaceable: dict[str, PlannedCall] = {}
    for node in calls:
        d = decisions[node.id]
        call_device = devices.get(node.id, "cpu")
        keys = _keys(dag, node.id)
        if d.migrate:
            context_map.update(dict.fromkeys(keys, call_device))
        entry = _planned_call(node, keys, call_device, d)
        if can(node.name):
            entries.append(entry)
        elif node.name in unplaceable:
            _merge_unplaceable(unplaceable[node.name], entry)
        else:
            entry.context_keys = entry.context_keys[:UNPLACEABLE_KEYS]
            unplaceable[node.name] = entry
            entries.append(entry)
    entries.sort(key=lambda e: (not e.migrate, -e.measured_ns, e.context_keys[:1]))
    return entries, context_map


UNPLACEABLE_KEYS = 8
"""Context keys an entry of a function with no torch backend keeps: nothing patches it, so its
one entry (all its calls) only says where it ran, and a loop of 40,000 ``mask[lo:hi] = 1`` in a
sample keeps the plan small (every instance an entry made it 27 MB, and slow to store, read and
check at each run)."""


def _merge_unplaceable(into: PlannedCall, entry: PlannedCall) -> None:
    """Add ``entry``'s calls of a function with no torch backend to the function's one entry."""
    into.instance_count += entry.instance_count
    into.measured_ns += entry.measured_ns
    room = UNPLACEABLE_KEYS - len(into.context_keys)
    if room > 0:
        into.context_keys.extend(entry.context_keys[:room])


def _placement_info(
    basis: Basis, device: str | None, calibration: Any | None, settings: PlacementSettings
) -> PlacementInfo:
    """How the placement was decided: its basis, device, settings and dispatch costs."""
    dispatch = getattr(calibration, "dispatch", None)
    return PlacementInfo(
        basis=basis,
        device=device,
        device_name=getattr(calibration, "device_name", "") if basis == "measured" else "",
        margin_pct=settings.margin_pct,
        assumed_speedup=settings.assume_speedup,
        only=sorted(settings.only),
        exclude=sorted(settings.exclude),
        calibration_cache=getattr(calibration, "cache_path", None),
        dispatch_ns=int(getattr(dispatch, "migrated_ns", 0)),
        passthrough_ns=int(getattr(dispatch, "passthrough_ns", 0)),
    )


def _partition_devices(
    partitions: list[Partition],
    part_of: dict[int, int],
    placed: set[int],
    decisions: dict[int, Decision],
    accels: list[str],
    device: str | None,
) -> dict[int, str]:
    """Partitions with placed calls take the accelerators by saving, round-robin; others the CPU."""
    saving = {p.id: 0 for p in partitions}
    for node_id in placed:
        saving[part_of[node_id]] += decisions[node_id].saving_ns
    out = {p.id: "cpu" for p in partitions}
    if device is None:
        return out
    pool = accels if device != "cpu" else ["cpu"]
    ranked = sorted((p for p in partitions if saving[p.id] > 0), key=lambda p: -saving[p.id])
    for i, p in enumerate(ranked):
        out[p.id] = pool[i % len(pool)]
    return out


def _notes(
    accels: list[str],
    device: str | None,
    workers: int,
    basis: str,
    calls: list[Any],
    candidates: dict[int, Decision],
    placed: set[int],
    settings: PlacementSettings,
) -> list[str]:
    notes = []
    if device is None:
        notes.append(
            "no GPU and no target device: every call stays on the CPU; pass --gpus N or "
            "--target-device cpu|cuda:i to plan a migration"
        )
        return notes
    if workers and accels[0] != "cpu":
        notes.append(
            f"the DataLoader runs {workers} worker process(es), where CUDA is never used: calls "
            "migrated one by one run through torch on the CPU there, so they were measured and "
            "placed for the CPU"
        )
    if basis == "measured":
        notes.append(
            f"placement measured on {device}: a call moves only when it saves more than "
            f"{settings.margin_pct:g} % of its time and more than the measurement spread"
        )
    elif basis == "assumed":
        notes.append(
            f"ASSUMPTION: placement uses a what-if speedup of {settings.assume_speedup:g}x, not "
            "measurements; calibrate (the default) to decide from measured times"
        )
    if calls and not candidates:
        notes.append("no traced call can be placed (no backend, or kept on the CPU on purpose)")
    elif candidates and not placed:
        notes.append(
            f"every candidate call is faster with its library on {device} than through torch: "
            "nothing moves, so the pipeline runs exactly as before"
        )
    return notes
