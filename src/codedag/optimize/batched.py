"""Deciding which sample chains run batched: measure, then decide (a pure pass).

Each chain found in the trace (:mod:`codedag.optimize.chains`) is judged on its calibration: one
batch per sample with the libraries against the same batch through batched execution on the
device the plan targets (:mod:`codedag.calibrate.chains`). With DataLoader workers the per-sample
chain runs in ``W`` worker processes at once, and so does the recording half of batched
execution, while the batched executor runs in the main process: the comparison is

``original / W``  against  ``record / W + (batched - record)``

(``W = 1`` without workers). A chain runs batched only when that saves more than the placement
margin of its time and more than the measurement spread (the rule of
:func:`codedag.measure.statistic.verdict`); otherwise it stays per sample and its
reason gives both figures. ``mode`` ``always`` and ``never`` force the choice; without a
measurement their decisions are labelled ``assumed``.

On an accelerator both figures end with the batch on the device (the per-sample one copied
there as the training loop copies it; :mod:`codedag.calibrate.chains`): batched execution
delivers there once the loop moves its batches to the device, which training loops do.

Batched chains take their library functions away from per-call placement (the migrator patches
them to record instead): :func:`apply_to_plan` says so in those calls' reasons.

Each decision is the plan model's :class:`~codedag.plan.BatchedChain`, the section its
:class:`~codedag.plan.BatchedInfo`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from codedag.errors import ConfigError
from codedag.graph.model import ExecutionDAG
from codedag.measure.statistic import Verdict, verdict
from codedag.optimize.placement import _ms
from codedag.plan import BatchedChain, BatchedInfo, MigrationPlan
from codedag.plan.model import BatchedMode

MODES = ("auto", "always", "never")


def check_mode(mode: object) -> str:
    """``auto``, ``always`` or ``never``; :class:`ConfigError` otherwise."""
    if mode not in MODES:
        raise ConfigError(f"batched must be 'auto', 'always' or 'never', got {mode!r}")
    return str(mode)


def traced_batch_size(dag: ExecutionDAG, default: int) -> int:
    """Samples per batch of the traced DataLoader (``default`` when the trace does not say)."""
    info = (getattr(getattr(dag, "source", dag), "metadata", {}) or {}).get("dataloader") or {}
    for value in (info.get("batch_size"), len(info.get("batch_indices") or [])):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return max(1, default)


def _figures(m: Any, device: str, workers: int) -> tuple[str, int, int]:
    """The measured figures as text, and the per-batch times placement compares."""
    original, batched = m.original.median_ns, m.batched.median_ns
    if getattr(m, "delivered", "host") == "device":
        text = (
            f"measured per batch of {m.batch_size}, up to the batch on {device}: {_ms(original)} "
            f"sample by sample with the libraries (their batch's copy there, {_ms(m.upload_ns)}, "
            f"included) vs {_ms(batched)} batched through torch on {device} ({m.backend_calls} "
            f"backend calls; delivering it on the host would add {_ms(m.download_ns)})"
        )
    else:
        text = (
            f"measured per batch of {m.batch_size}: {_ms(original)} sample by sample with the "
            f"libraries vs {_ms(batched)} batched through torch on {device} "
            f"({m.backend_calls} backend calls)"
        )
    if workers > 0:
        record = min(m.record_ns, batched)
        effective_original = original // workers
        effective_batched = record // workers + (batched - record)
        text += (
            f"; with {workers} DataLoader workers {_ms(effective_original)} vs "
            f"{_ms(effective_batched)} (recording {_ms(record)} runs in the workers)"
        )
        return text, effective_original, effective_batched
    return text, original, batched


def decide_chain(
    candidate: Any,
    measurement: Any | None,
    mode: str,
    device: str | None,
    margin_pct: float,
    workers: int,
    batch_size: int,
) -> BatchedChain:
    """One chain's entry of the plan's ``batched`` section: its figures and the decision."""
    entry: dict[str, Any] = {
        "id": candidate.id,
        "steps": candidate.steps,
        "functions": candidate.functions,
        "entries": candidate.entries,
        "entry_functions": [candidate.entry_function],
        "samples": len(candidate.samples),
        "batched": False,
        "original_ns": None,
        "batched_ns": None,
        "batch_size": batch_size,
        "backend_calls": None,
        "basis": "none",
        "reason": "",
    }
    if measurement is not None and measurement.ok:
        entry.update(
            original_ns=int(measurement.original.median_ns),
            batched_ns=int(measurement.batched.median_ns),
            backend_calls=int(measurement.backend_calls),
            batch_size=int(measurement.batch_size),
            basis="measured",
        )
    entry.update(_decision(measurement, mode, device, margin_pct, workers))
    return BatchedChain.model_validate(entry)


def _decision(
    measurement: Any | None, mode: str, device: str | None, margin_pct: float, workers: int
) -> dict[str, Any]:
    """The decision's fields of a chain's entry: ``reason``, and ``batched`` and ``basis`` where
    the decision sets them."""
    measured = measurement is not None and measurement.ok
    assumed = {} if measured else {"basis": "assumed"}
    if mode == "never":
        return {"reason": "batched execution switched off (--batched never)", **assumed}
    if device is None:
        if mode == "always":
            reason = "forced with --batched always (not measured): runs batched on cpu"
            return {"batched": True, "basis": "assumed", "reason": reason}
        return {"reason": "no target device (no GPU, no --target-device): nothing measured"}
    if mode == "always":
        reason = _forced_reason(measurement if measured else None, measurement, device, workers)
        return {"batched": True, "reason": reason, **assumed}
    if measurement is None:
        return {"reason": f"not measured on {device}: calibrate to run chains batched"}
    if not measured:
        return {"basis": "measured", "reason": f"stays per sample: {measurement.error}"}
    batched, reason = _measured_choice(measurement, device, margin_pct, workers)
    return {"batched": batched, "reason": reason}


def _forced_reason(measured: Any | None, attempt: Any | None, device: str, workers: int) -> str:
    """Why a chain runs batched under ``--batched always``, with its figures where measured."""
    if measured is None:
        problem = getattr(attempt, "error", None)
        return "forced with --batched always (not measured)" + (
            f"; calibration said: {problem}" if problem else ""
        )
    text, _, _ = _figures(measured, device, workers)
    return f"forced with --batched always; {text}"


def _measured_choice(
    measurement: Any, device: str, margin_pct: float, workers: int
) -> tuple[bool, str]:
    """Whether a measured chain runs batched (faster beyond margin and spread), and why."""
    text, original, batched = _figures(measurement, device, workers)
    saving = original - batched
    margin = margin_pct / 100.0 * original
    spread = measurement.spread_ns
    faster = verdict(saving, spread, margin) is Verdict.FASTER
    if faster:
        reason = f"{text}: {original / max(1, batched):.2g}x faster, runs batched"
    elif saving <= 0:
        reason = f"{text}: {batched / max(1, original):.2g}x slower, stays per sample"
    elif margin >= spread:
        reason = (
            f"{text}: saving {_ms(saving)} is within the {margin_pct:g} % margin, stays per sample"
        )
    else:
        reason = (
            f"{text}: saving {_ms(saving)} is within the measurement spread {_ms(spread)}, "
            "stays per sample"
        )
    stand_ins = measurement.stand_in_steps
    if stand_ins:
        reason += (
            f" ({len(stand_ins)} step(s) replayed with stand-in operands, the trace kept none: "
            f"{', '.join(stand_ins)})"
        )
    if measurement.untimed_steps:
        timed = len(measurement.timed_steps)
        reason += (
            f" (timed {timed} of {timed + len(measurement.untimed_steps)} steps; not "
            f"repeatable from the trace: {', '.join(measurement.untimed_steps)})"
        )
    return faster, reason


def batched_section(
    found: Any,
    measurements: Mapping[str, Any],
    mode: str,
    device: str | None,
    margin_pct: float,
    workers: int,
    batch_size: int,
) -> BatchedInfo:
    """The plan's ``batched`` section for every chain found."""
    chains = [
        decide_chain(c, measurements.get(c.id), mode, device, margin_pct, workers, batch_size)
        for c in found.candidates
    ]
    run_on = device or ("cpu" if any(c.batched for c in chains) else None)
    return BatchedInfo(mode=cast(BatchedMode, check_mode(mode)), device=run_on, chains=chains)


def apply_to_plan(plan: MigrationPlan, section: BatchedInfo, note: str = "") -> MigrationPlan:
    """``plan`` with ``section`` as its batched section: calls of batched chains' functions
    leave per-call placement (``plan`` itself is left as it was)."""
    batched = [c for c in section.chains if c.batched]
    owner = {f: c.id for c in batched for f in c.functions}
    device_map = dict(plan.context_device_map)
    calls = []
    for call in plan.calls:
        chain = owner.get(call.function)
        if chain is None:
            calls.append(call)
            continue
        update: dict[str, Any] = {
            "reason": f"{call.reason}; its calls in samples run in batched {chain}"
        }
        if call.migrate:
            for key in call.context_keys:
                device_map.pop(key, None)
            update.update(migrate=False, device="cpu")
        calls.append(call.model_copy(update=update))
    notes = list(plan.notes)
    if section.chains:
        names = ", ".join(c.id for c in batched) or "none"
        notes.append(
            f"batched execution ({section.mode}): {len(section.chains)} sample chain(s) found, "
            f"batched: {names}"
        )
    elif note:
        notes.append(f"batched execution: {note}")
    update = {"batched": section, "calls": calls, "context_device_map": device_map, "notes": notes}
    return plan.model_copy(update=update)
