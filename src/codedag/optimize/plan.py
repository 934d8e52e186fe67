"""Placement: partitions onto devices, calls onto the accelerator when it pays, and the plan JSON.

A call is migrated only if (1) its partition runs on an accelerator, (2) ``can_migrate(name)``
says a torch backend exists, and (3) its estimated saving exceeds the launch overhead of its
instances plus the transfer cost of the values that cross the device boundary around it
(host-to-device for inputs produced on the CPU, device-to-host for outputs a CPU call or the
caller uses). Candidates start on the accelerator; the worst net candidate is sent back to the
CPU until every remaining one pays for itself, so a cheap op between two CPU-only ops stays on the
CPU while a chain of migratable ops moves together. A call inside a migrated call is covered by it.

Partitions with a positive net saving of their migratable calls take accelerators, in order of
that saving and round-robin over the accelerators (with more partitions than GPUs, several share
one); the partition with the least saving stays on the CPU (it holds the Python driving the
pipeline). With no GPU and no target device nothing migrates and the notes say why. With
``target_device="cpu"`` the decisions use the same cost model (the accelerator's speedup and
transfer costs) while the migrated calls run through torch on the CPU: a CPU-only machine
rehearses exactly the plan a GPU machine would get.
"""

from __future__ import annotations

import heapq
from typing import Any

from codedag import __version__
from codedag.errors import ConfigError, SchemaError
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.costs import CanMigrate, CostModel, default_can_migrate
from codedag.optimize.partition import Partition

PLAN_SCHEMA_VERSION = 1
PLAN_KEYS = (
    "schema_version",
    "codedag_version",
    "k",
    "gpu_count",
    "target_device",
    "partition_device_map",
    "context_device_map",
    "calls",
    "notes",
)


def _accelerators(gpu_count: int, target_device: str | None) -> list[str]:
    if target_device is not None:
        if target_device != "cpu" and not target_device.startswith("cuda"):
            raise ConfigError(f"target device must be 'cpu' or 'cuda[:i]', got {target_device!r}")
        return [target_device if target_device != "cuda" else "cuda:0"]
    if gpu_count < 0:
        raise ConfigError(f"gpu_count must be >= 0, got {gpu_count}")
    return [f"cuda:{i}" for i in range(gpu_count)]


class _Net:
    """Net saving of candidate calls given which calls are currently migrated."""

    def __init__(self, dag: CoarsenedDAG, cost: CostModel, migrated: set[int]) -> None:
        self.dag, self.cost, self.migrated = dag, cost, migrated

    def transfer_ns(self, call: int) -> int:
        dag, migrated, cost = self.dag, self.migrated, self.cost
        total = 0
        for value in dag.predecessors(call, "uses"):
            producers = dag.predecessors(value, "produces")
            if not any(p in migrated for p in producers):
                total += cost.h2d_ns(dag.nodes[value].nbytes)
        for value in dag.successors(call, "produces"):
            users = dag.successors(value, "uses")
            if not users or any(u not in migrated for u in users):
                total += cost.d2h_ns(dag.nodes[value].nbytes)
        return total

    def gain_ns(self, call: int) -> int:
        node = self.dag.nodes[call]
        return self.cost.saved_ns(node.total_ns) - self.cost.launch_ns(node.instance_count)

    def neighbors(self, call: int) -> set[int]:
        dag = self.dag
        out: set[int] = set()
        for value in dag.predecessors(call, "uses"):
            out.update(dag.predecessors(value, "produces"))
            out.update(dag.successors(value, "uses"))
        for value in dag.successors(call, "produces"):
            out.update(dag.successors(value, "uses"))
        out.discard(call)
        return out


def _eliminate(net: _Net, candidates: set[int]) -> None:
    """Send the worst candidate back to the CPU until every migrated call pays for itself."""
    migrated = net.migrated
    migrated.update(candidates)
    version = dict.fromkeys(candidates, 0)
    heap = [(net.gain_ns(c) - net.transfer_ns(c), c, 0) for c in sorted(candidates)]
    heapq.heapify(heap)
    while heap:
        value, call, ver = heapq.heappop(heap)
        if call not in migrated or ver != version[call]:
            continue
        if value > 0:
            break
        migrated.discard(call)
        for other in net.neighbors(call):
            if other in migrated:
                version[other] += 1
                fresh = net.gain_ns(other) - net.transfer_ns(other)
                heapq.heappush(heap, (fresh, other, version[other]))


def _inside(dag: CoarsenedDAG, call: int, migrated: set[int]) -> int | None:
    """The migrated call that (transitively) calls ``call``, if any."""
    stack = list(dag.predecessors(call, "calls"))
    seen = set(stack)
    while stack:
        parent = stack.pop()
        if parent in migrated:
            return parent
        for grand in dag.predecessors(parent, "calls"):
            if grand not in seen:
                seen.add(grand)
                stack.append(grand)
    return None


def build_plan(
    partitions: list[Partition],
    dag: CoarsenedDAG,
    gpu_count: int,
    target_device: str | None = None,
    cost: CostModel | None = None,
    can_migrate: CanMigrate | None = None,
) -> dict[str, Any]:
    """The migration plan (CONTRACT.md format) of a partitioned coarsened DAG."""
    cost = cost or CostModel()
    can = can_migrate or default_can_migrate()
    accels = _accelerators(gpu_count, target_device)
    notes: list[str] = []
    part_of = {node: p.id for p in partitions for node in p.nodes}
    calls = sorted(dag.calls(), key=lambda n: n.id)
    migratable = {c.id for c in calls if can(c.name)}
    device_of_part = {p.id: "cpu" for p in partitions}
    accel_parts: set[int] = set()
    net = _Net(dag, cost, set())
    if not accels:
        notes.append(
            "no GPU (gpu_count=0) and no target device: every call stays on the CPU; "
            "pass --gpus N or --target-device cpu to plan a migration"
        )
    elif len(partitions) == 1:
        notes.append(
            f"k={len(partitions)}: a single partition stays on the CPU (it runs the Python "
            "that drives the pipeline); use k >= 2 to place work on an accelerator"
        )
    elif partitions:
        score = {p.id: 0 for p in partitions}
        for c in migratable:
            score[part_of[c]] += max(0, net.gain_ns(c))
        ranked = sorted(partitions, key=lambda p: (-score[p.id], p.id))
        for i, p in enumerate(ranked[: len(partitions) - 1]):
            if score[p.id] > 0:
                device_of_part[p.id] = accels[i % len(accels)]
                accel_parts.add(p.id)
    on_accel = {c for c in migratable if part_of[c] in accel_parts}
    _eliminate(net, on_accel)
    migrated = net.migrated
    nested = {c: _inside(dag, c, migrated) for c in sorted(migrated)}
    for c, parent in nested.items():
        if parent is not None:
            migrated.discard(c)
    if target_device == "cpu" and accels:
        notes.append(
            "target device cpu: calls are chosen with the accelerator cost model "
            f"(speedup {cost.accelerator_speedup}x, {cost.h2d_bandwidth_gbps} GB/s H2D) and run "
            "through torch on the CPU; expect no speedup there"
        )
    notes.append(
        f"estimates: saving = measured time x (1 - 1/{cost.accelerator_speedup}); launch {cost.launch_overhead_ns} ns per instance; transfers "
        f"at {cost.h2d_bandwidth_gbps} GB/s H2D, {cost.d2h_bandwidth_gbps} GB/s D2H"
    )
    entries: list[dict[str, Any]] = []
    context_map: dict[str, str] = {}
    for node in calls:
        p = part_of.get(node.id)
        if p is None:
            raise ConfigError(f"call {node.id} ({node.name}) is in no partition")
        device = device_of_part[p]
        keys = dag.context_keys(node.id)
        gain = net.gain_ns(node.id) if node.id in migratable else 0
        transfer = net.transfer_ns(node.id) if node.id in migratable else 0
        migrate = node.id in migrated
        if migrate:
            reason = (
                f"saves {gain} ns net of launches > {transfer} ns of transfers "
                f"(partition {p} on {device})"
            )
            for key in keys:
                context_map[key] = device
        elif node.id not in migratable:
            reason = f"no accelerator backend for {node.name}"
        elif not accels:
            reason = "no accelerator (gpu_count=0, no target device)"
        elif p not in accel_parts:
            reason = f"partition {p} runs on the CPU"
        elif nested.get(node.id) is not None:
            reason = f"runs inside migrated call {dag.nodes[nested[node.id]].name}"  # type: ignore[index]
        else:
            reason = (
                f"saving {gain} ns does not exceed {transfer} ns of transfers to and from "
                "CPU-side neighbours"
                if gain > 0
                else f"launch overhead exceeds the saving ({node.instance_count} instances)"
            )
        entries.append(
            {
                "function": node.name,
                "context_keys": keys,
                "instance_count": node.instance_count,
                "device": device if migrate else "cpu",
                "migrate": migrate,
                "measured_ns": node.total_ns,
                "estimated_gain_ns": gain,
                "transfer_cost_ns": transfer,
                "reason": reason,
            }
        )
    entries.sort(key=lambda e: (-e["measured_ns"], e["context_keys"][:1]))
    if accels and not context_map and migratable:
        notes.append("no migratable call saves more than its launch and transfer costs")
    elif accels and calls and not migratable:
        notes.append("no traced call has an accelerator backend")
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "codedag_version": __version__,
        "k": len(partitions),
        "gpu_count": gpu_count,
        "target_device": accels[0] if accels else None,
        "partition_device_map": {str(p.id): device_of_part[p.id] for p in partitions},
        "context_device_map": context_map,
        "calls": entries,
        "notes": notes,
    }


def validate_plan(plan: Any) -> dict[str, Any]:
    """Check a loaded plan's shape and version; raise :class:`SchemaError` if it is unusable."""
    if not isinstance(plan, dict):
        raise SchemaError(f"migration plan: expected a JSON object, got {type(plan).__name__}")
    version = plan.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError(f"migration plan: expected an integer schema_version, got {version!r}")
    if version > PLAN_SCHEMA_VERSION:
        raise SchemaError(
            f"migration plan: schema_version {version} is newer than this codedag reads "
            f"(<= {PLAN_SCHEMA_VERSION}); upgrade codedag"
        )
    missing = [key for key in ("context_device_map", "calls") if key not in plan]
    if missing:
        raise SchemaError(f"migration plan: missing {', '.join(missing)}")
    if not isinstance(plan["context_device_map"], dict) or not isinstance(plan["calls"], list):
        raise SchemaError("migration plan: expected context_device_map object and calls list")
    for i, call in enumerate(plan["calls"]):
        if not isinstance(call, dict) or "function" not in call:
            raise SchemaError(f"migration plan: calls[{i}] has no 'function'")
    return plan
