"""Trace and plan a DataLoader the running script uses, without changing what the script sees.

:func:`plan_loader` traces :data:`TRACED_SAMPLES` samples of the loader (``trace_first_batch`` on
the same object: when the indices of the warm-up batch the script fetched already are given,
samples that batch did not fetch, whose code is warm and whose values the data set cannot have
kept; else a new epoch's first batch) and plans them
(``OptimizerManager(k=2, cache="auto")``) on the device the script trains on, inside a time
budget; samples that give a plan nothing to act on (:func:`nothing_to_plan`) are not planned,
and the planner is not imported for them. Every random generator the script's next batches
depend on is saved before and put back after: Python's, NumPy's and torch's global ones, CUDA's
when CUDA is initialized, the loader's and its sampler's generators and those the dataset holds
(``RandomSnapshot``), so the next epoch draws exactly what it would have drawn without codedag.

The budget is checked between measurements (the optimizer's progress callback), so a plan stops
at most one measurement past it. Log records of a failed attempt are dropped: the caller reports
the one reason.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codedag.errors import CodeDAGError

if TYPE_CHECKING:
    from codedag.graph.model import ExecutionDAG
    from codedag.graph.nodes import CallNode

log = logging.getLogger(__name__)


TRACED_SAMPLES = 8
"""Samples of the batch traced (its first ones): a traced sample costs several untraced ones,
and the plan's per-sample figures and batched calibrations (which cycle the traced samples to
the loader's batch size) need only a few."""


class PlanBudgetExceeded(CodeDAGError):
    """Tracing and planning took longer than the budget they were given."""


@dataclass
class PlanOutcome:
    """What :func:`plan_loader` produced: a plan dict, or ``None`` and the reason; ``idle``
    when the reason is that no plan could change anything (:func:`nothing_to_plan`);
    ``functions``: the qualified names of the functions the traced samples ran
    (:func:`traced_functions`)."""

    plan: dict[str, Any] | None
    reason: str = ""
    trace_s: float = 0.0
    plan_s: float = 0.0
    idle: bool = False
    functions: frozenset[str] = frozenset()


_LOADER_CODE = "torch.utils.data."
"""The DataLoader's own code (fetching, collation): a plan never changes it, nor what it calls."""


def nothing_to_plan(dag: ExecutionDAG) -> str | None:
    """Why no section of a plan could act on the traced samples, or ``None`` when one might.

    A plan acts only on calls and values of the libraries codedag knows (``facts.py``): a call
    of one, a value of one's types, a file source, or a torch function the samples' own code
    calls (one the DataLoader's collation calls stays as it is). A pipeline with none of them
    (one that slices tensors in memory) is not planned: the planner's imports and measurements
    would cost a short run more than a tenth of a second and change nothing.
    """
    from codedag.backends.libraries import library_facts
    from codedag.backends.sources import file_source

    known = library_facts()
    others = [f for f in known if "torch" not in f.modules]
    torch_spaces = {s for f in known if "torch" in f.modules for s in f.namespaces}
    for value in dag.values():
        if any(f.owns(value.type_name) for f in others):
            return None
    for call in dag.calls():
        if any(f.owns(call.name) for f in others) or file_source(call.name) is not None:
            return None
        if call.name.rpartition(".")[0] in torch_spaces and not _under_loader_code(call):
            return None
    return "the traced samples call no function and hold no value of a library codedag accelerates"


def traced_functions(dag: ExecutionDAG) -> frozenset[str]:
    """The qualified names of every function the traced samples ran that made a traced call:
    the segments of the calls' context keys (the pipeline's own functions among them)."""
    from codedag.util.context_keys import split_segment

    return frozenset(
        split_segment(segment)[0]
        for call in dag.calls()
        for segment in call.context_key.split("/")
        if segment
    )


def _under_loader_code(call: CallNode) -> bool:
    """Whether the DataLoader's own code (collation) made ``call``: its caller is in it."""
    segments = call.context_key.split("/")
    return len(segments) > 1 and segments[-2].startswith(_LOADER_CODE)


def script_device() -> str:
    """``cuda`` when the script has initialized CUDA (its model or batches live there), else
    ``cpu``. codedag never initializes CUDA to find out."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "cpu"
    try:
        return "cuda" if torch.cuda.is_initialized() else "cpu"
    except Exception:  # a torch build without CUDA support
        return "cpu"


class _RandomState:
    """Every generator the script's batches draw from, saved now and put back by restore()."""

    def __init__(self, loader: Any) -> None:
        from codedag.trace.replay import RandomSnapshot

        sampler = getattr(loader, "sampler", None)
        self._snapshot = RandomSnapshot(
            generators=(getattr(loader, "generator", None), getattr(sampler, "generator", None)),
            holders=(getattr(loader, "dataset", None), sampler),
        )
        self._cuda: list[Any] | None = None
        torch = sys.modules.get("torch")
        if torch is not None and script_device() == "cuda":
            self._cuda = torch.cuda.get_rng_state_all()

    def restore(self) -> None:
        self._snapshot.restore()
        if self._cuda is not None:
            import torch

            torch.cuda.set_rng_state_all(self._cuda)


@contextlib.contextmanager
def preserved_random_state(loader: Any) -> Iterator[None]:
    """Put back every generator ``loader``'s batches draw from when the block ends."""
    state = _RandomState(loader)
    try:
        yield
    finally:
        state.restore()


def plan_loader(
    loader: Any, budget_s: float, device: str | None = None, indices: Any = None
) -> PlanOutcome:
    """Trace one batch of ``loader`` and plan it within ``budget_s`` seconds.

    Args:
        loader: the script's ``torch.utils.data.DataLoader`` (its next epoch is unchanged).
        budget_s: seconds tracing and planning may take together (0: do not plan).
        device: the device to calibrate on (default: :func:`script_device`).
        indices: the batch sampler's indices of a batch this process fetched already (the
            warm-up batch): samples that batch did not fetch are traced, without an untraced
            run first (their code is warm). Default: the first batch of a new epoch, after one
            untraced run of it.

    Returns:
        The plan, or ``None`` with the reason when tracing or planning failed or ran out of time.
    """
    if budget_s <= 0:
        return PlanOutcome(None, f"the plan budget is {budget_s:g} s")
    from codedag.util.logs import held_logs

    device = device or script_device()
    start = time.perf_counter()
    deadline = start + budget_s
    outcome = PlanOutcome(None)
    try:
        with preserved_random_state(loader), held_logs():
            outcome = _trace_and_plan(loader, device, start, deadline, indices)
    except PlanBudgetExceeded as error:
        outcome.reason = str(error)
    except Exception as error:  # user code or codedag failing on it: the script runs unmodified
        outcome.reason = f"{type(error).__name__}: {error}"
    if outcome.plan is None and not outcome.reason:
        outcome.reason = "nothing was planned"
    return outcome


def _trace_and_plan(
    loader: Any, device: str, start: float, deadline: float, indices: Any
) -> PlanOutcome:
    from codedag.trace.dataloader import trace_first_batch, unfetched_indices
    from codedag.trace.tracer import EnhancedTracer

    tracer = EnhancedTracer()
    if indices is None:
        trace_first_batch(loader, tracer, samples=TRACED_SAMPLES)
    else:
        fresh = unfetched_indices(loader, indices, TRACED_SAMPLES)
        trace_first_batch(loader, tracer, warmup=0, indices=fresh, samples=TRACED_SAMPLES)
    traced = time.perf_counter()
    budget_s = deadline - start
    if traced > deadline:
        raise PlanBudgetExceeded(
            f"tracing one batch took {traced - start:.1f} s, over the {budget_s:g} s plan budget"
        )

    def within_budget(done: int, total: int, what: str) -> None:
        if time.perf_counter() > deadline:
            raise PlanBudgetExceeded(
                f"planning ran past the {budget_s:g} s plan budget (measuring {what or 'calls'}, "
                f"{done} of {total})"
            )

    functions = traced_functions(tracer.dag)
    idle = nothing_to_plan(tracer.dag)
    if idle is not None:
        plan_s = time.perf_counter() - traced
        return PlanOutcome(None, idle, traced - start, plan_s, idle=True, functions=functions)
    from codedag.optimize.manager import OptimizerManager

    manager = OptimizerManager(k=2, target_device=device, cache="auto", progress=within_budget)
    plan = dict(manager.optimize(tracer.dag)["migration_plan"])
    plan.pop("loader", None)  # the loader exists already: its settings are the script's
    return PlanOutcome(plan, "", traced - start, time.perf_counter() - traced, functions=functions)
