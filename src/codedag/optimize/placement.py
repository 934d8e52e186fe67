"""The placement rule: a call leaves the CPU only when a measurement says it wins.

For each call of the coarsened DAG (a cluster stands for its instances):

1. **Semantics first.** It stays when it has no backend; when its result is not a function of its
   arguments (random draws) or its backend is declared to differ from the library, unless the
   user names it (``only``); when the call site passes an output buffer (``dst=``/``out=``),
   whatever the user says; when the user excludes it.
2. **Measured saving.** Calibration gives, per instance, the library's median time and the
   migrated path's (values in, backend, values out) on the target device, plus the wrapper's own
   measured dispatch cost. On a GPU, an input produced by another placed call is already on the
   device: its measured upload is saved. ``saving = original - (migrated path + dispatch)``.
3. **Margin.** The call moves only when the saving exceeds both ``margin_pct`` of its time and the
   measurement spread (the half-width of the saving's 95 % interval): the rule of
   :func:`codedag.measure.statistic.verdict`, so noise never flips a decision.
4. **Patching has a price.** A patched function's unplaced calls pay the measured pass-through
   cost; when that outweighs what its placed calls save, none of its calls is placed.
5. A call inside a placed call is covered by it.

With ``assume_speedup`` (a what-if the user asks for) the backend time is the traced time divided
by that speedup, and every decision says it rests on an assumption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codedag.measure.statistic import Verdict, verdict
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.costs import CostModel
from codedag.plan.model import Basis

OUTPUT_BUFFER_PARAMS = ("dst", "out")


@dataclass(frozen=True)
class PlacementSettings:
    """What the user asked of placement.

    Attributes:
        margin_pct: a call moves only when it saves more than this share of its time.
        only: place nothing but these functions (naming a blocked function opts it in).
        exclude: never place these functions.
        assume_speedup: what-if: the backend runs this many times faster than the traced time
            (no measurement; the plan says so).
        batched: sample chains run once per batch: ``auto`` (where calibration measures it
            faster), ``always`` or ``never`` (:mod:`codedag.optimize.batched`).
    """

    margin_pct: float = 10.0
    only: frozenset[str] = frozenset()
    exclude: frozenset[str] = frozenset()
    assume_speedup: float | None = None
    batched: str = "auto"


@dataclass
class Decision:
    """Where one (cluster) call goes and the figures behind it (all instances, ns)."""

    migrate: bool = False
    basis: Basis = "none"
    original_ns: int | None = None
    backend_ns: int | None = None
    transfer_ns: int = 0
    spread_ns: int = 0
    saving_ns: int = 0
    reason: str = ""
    blocked: bool = False
    notes: list[str] = field(default_factory=list)


def _ms(ns: float) -> str:
    value = ns / 1e6
    return f"{value:.3g} ms" if abs(value) >= 0.01 else f"{ns / 1e3:.3g} us"


def blocked_reason(
    name: str,
    args: list[dict[str, Any]] | None,
    positional: tuple[str, ...],
    settings: PlacementSettings,
    blocker: Callable[[str], str | None],
) -> str | None:
    """Why a call must stay on the CPU whatever it measures, or ``None``."""
    for entry in args or ():
        label = str(entry.get("name", ""))
        param = (
            positional[int(label)] if label.isdigit() and int(label) < len(positional) else label
        )
        if param in OUTPUT_BUFFER_PARAMS and not (
            entry.get("kind") == "scalar" and entry.get("value") is None
        ):
            return f"the call passes an output buffer ({param}=): it can never migrate"
    if name in settings.exclude:
        return "excluded by the user (--exclude)"
    if settings.only and name not in settings.only:
        return "not among the functions named with --only"
    semantic = blocker(name)
    if semantic is not None and name not in settings.only:
        return f"{semantic}; name it with --only to opt in"
    return None


@dataclass(eq=False, repr=False)  # the repr would hold the whole DAG
class Placer:
    """Decides every call of a coarsened DAG (see the module docstring).

    Args:
        dag: the coarsened DAG.
        settings: the user's wishes.
        calibration: measured figures (``codedag.calibrate.Calibration``); ``None`` without one.
        cost: the what-if cost model (transfer bandwidths for ``assume_speedup``).
        on_gpu: whether placed calls run on a GPU (uploads between placed calls are saved).
    """

    dag: CoarsenedDAG
    settings: PlacementSettings
    calibration: Any | None
    cost: CostModel
    on_gpu: bool
    dispatch_ns: int = field(init=False)
    passthrough_ns: int = field(init=False)

    def __post_init__(self) -> None:
        dispatch = getattr(self.calibration, "dispatch", None)
        self.dispatch_ns = int(getattr(dispatch, "migrated_ns", 0))
        self.passthrough_ns = int(getattr(dispatch, "passthrough_ns", 0))

    # ------------------------------------------------------------------ per call
    def _measured(self, node_id: int) -> Decision:
        """Figures of a call from calibration (all instances)."""
        node = self.dag.nodes[node_id]
        assert self.calibration is not None
        estimates = [self.calibration.estimate(i) for i in node.original_ids]
        known = [e for e in estimates if e is not None]
        if not known:
            return Decision(reason="not calibrated: the trace recorded no arguments for it")
        failed = next((e for e in known if not e.measurement.ok), None)
        if failed is not None:
            return Decision(basis="measured", reason=str(failed.measurement.error))
        factor = len(estimates) / len(known)  # instances without arguments: like the others
        original = int(sum(e.original_ns for e in known) * factor)
        backend = int(sum(e.backend_ns for e in known) * factor)
        backend += self.dispatch_ns * node.instance_count
        spread = int(sum(e.spread_ns for e in known) * factor)
        upload = int(sum(e.h2d_ns for e in known) * factor)
        return Decision(
            basis="measured",
            original_ns=original,
            backend_ns=backend,
            spread_ns=spread,
            transfer_ns=upload if self.on_gpu else 0,
        )

    def _assumed(self, node_id: int) -> Decision:
        node = self.dag.nodes[node_id]
        speedup = float(self.settings.assume_speedup or 1.0)
        original = int(node.total_ns)
        nbytes = sum(self.dag.nodes[v].nbytes for v in self.dag.predecessors(node_id, "uses"))
        nbytes_out = sum(self.dag.nodes[v].nbytes for v in self.dag.successors(node_id, "produces"))
        transfer = self.cost.h2d_ns(nbytes) + self.cost.d2h_ns(nbytes_out) if self.on_gpu else 0
        return Decision(
            basis="assumed",
            original_ns=original,
            backend_ns=int(original / speedup) + transfer,
            transfer_ns=self.cost.h2d_ns(nbytes) if self.on_gpu else 0,
        )

    def _judge(self, d: Decision, saved_upload_ns: int, device: str, calls: int = 1) -> None:
        assert d.original_ns is not None and d.backend_ns is not None
        d.saving_ns = d.original_ns - d.backend_ns + saved_upload_ns
        margin = self.settings.margin_pct / 100.0 * d.original_ns
        label = "assumed" if d.basis == "assumed" else "measured"
        figures = (
            f"{label} {_ms(d.original_ns)} with the library vs {_ms(d.backend_ns)} through "
            f"torch on {device}"
        )
        if calls > 1:  # the figures are the traced calls' sum, the plan's entry one call's
            figures += f" over its {calls} traced calls"
        if saved_upload_ns:
            figures += f" ({_ms(saved_upload_ns)} of uploads saved by placed producers)"
        if d.basis == "assumed":
            figures += f" (ASSUMED {self.settings.assume_speedup:g}x speedup, not measured)"
        d.migrate = verdict(d.saving_ns, d.spread_ns, margin) is Verdict.FASTER
        if d.migrate:
            d.reason = f"{figures}: saves {_ms(d.saving_ns)}"
        elif d.saving_ns <= 0:
            ratio = d.backend_ns / max(1, d.original_ns)
            d.reason = f"{figures}: {ratio:.2g}x slower through torch, stays"
        elif margin >= d.spread_ns:
            d.reason = (
                f"{figures}: saving {_ms(d.saving_ns)} is within the "
                f"{self.settings.margin_pct:g} % margin, stays"
            )
        else:
            d.reason = (
                f"{figures}: saving {_ms(d.saving_ns)} is within the measurement spread "
                f"{_ms(d.spread_ns)}, stays"
            )

    # ------------------------------------------------------------------ all calls
    def decide(
        self,
        candidates: dict[int, Decision],
        device_of: Callable[[int], str],
    ) -> dict[int, Decision]:
        """Judge the candidates (calls with figures), fixpoint over saved uploads on a GPU."""
        placed: set[int] = set()
        changed = True
        while changed:
            changed = False
            for node_id in sorted(candidates):
                d = candidates[node_id]
                if d.original_ns is None or d.backend_ns is None:
                    continue
                saved = self._saved_upload(node_id, d, placed)
                was = d.migrate
                calls = int(getattr(self.dag.nodes[node_id], "instance_count", 1) or 1)
                self._judge(d, saved, device_of(node_id), calls)
                if d.migrate and node_id not in placed:
                    placed.add(node_id)
                    changed = True
                elif not d.migrate and was:
                    placed.discard(node_id)
                    changed = True
        self._charge_passthrough(candidates)
        return candidates

    def _saved_upload(self, node_id: int, d: Decision, placed: set[int]) -> int:
        """Uploads a GPU placement skips: inputs whose producer is placed too."""
        if not self.on_gpu or not d.transfer_ns:
            return 0
        inputs = self.dag.predecessors(node_id, "uses")
        if not inputs:
            return 0
        fed = sum(
            1 for v in inputs if any(p in placed for p in self.dag.predecessors(v, "produces"))
        )
        return int(d.transfer_ns * fed / len(inputs))

    def _charge_passthrough(self, decisions: dict[int, Decision]) -> None:
        """Unplace a function whose unplaced calls lose more to the wrapper than it saves."""
        if not self.passthrough_ns:
            return
        by_function: dict[str, list[int]] = {}
        for node in self.dag.calls():
            by_function.setdefault(node.name, []).append(node.id)
        for name, ids in by_function.items():
            placed = [i for i in ids if decisions.get(i) is not None and decisions[i].migrate]
            if not placed:
                continue
            others = sum(self.dag.nodes[i].instance_count for i in ids if i not in placed)
            cost = others * self.passthrough_ns
            saved = sum(decisions[i].saving_ns for i in placed)
            if others and cost >= saved:
                for i in placed:
                    d = decisions[i]
                    d.migrate = False
                    d.reason += (
                        f"; but patching {name} adds {_ms(self.passthrough_ns)} to each of its "
                        f"{others} other calls ({_ms(cost)}), more than the {_ms(saved)} saved, "
                        "so it stays"
                    )
