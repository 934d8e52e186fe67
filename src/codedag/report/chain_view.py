"""The traced pipeline as a person reads it: one sample's chain of calls, with the batch around it.

A traced batch has hundreds of nodes; what a reader wants from it is the chain of calls every
sample goes through, what each call costs and where it runs. :func:`chain_view` builds that from
a DAG (and, when there is one, a migration plan):

- the **sample chain**: each sample's top-level calls (what ``__getitem__`` calls; see
  :func:`codedag.optimize.samples.sample_steps`), coarsened over the samples: the n-th call of a
  function in one sample lines up with the n-th call of it in the others, so a step only some
  samples take (a random flip) is one box saying how many did. Each box has the mean time per
  sample that ran it, its share of the samples' time, and where it runs: its library, torch on a
  device per call, or batched (the plan's batched chains). A function of the user's code that
  takes a quarter of the samples' time or more and makes calls of its own (a ``Compose`` of
  transforms) is shown, in every sample, as the calls it makes, so only its own time has no box.
  An inherited method is named after the class of its ``self`` (``Resize.__call__``);
- the **batch-level calls** around it: what the DataLoader does before the samples and after
  them (collate), with their share of the batch.

Without recorded samples (a function that is not a DataLoader batch), the traced function's own
calls form the chain of one "sample".
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from codedag.graph.model import CallNode, ExecutionDAG

USER_CODE = "your code"
LIBRARY = "library"


@dataclass(frozen=True)
class Box:
    """One call of the view.

    Attributes:
        name: its name (:func:`display_name`).
        label: the short name shown (the last two parts of the name).
        ms: mean milliseconds per sample that ran it (batch-level boxes: per batch).
        share_pct: its share of the samples' time (batch-level boxes: of the batch's time).
        samples: how many samples ran it (batch-level boxes: 1).
        where: ``library``, ``your code``, ``torch on cuda:0`` or ``batched on cuda:0``.
    """

    name: str
    label: str
    ms: float
    share_pct: float
    samples: int
    where: str


@dataclass
class ChainView:
    """A traced batch as one sample chain between the batch-level calls.

    Attributes:
        batch_name: the call that made the batch (the DataLoader's ``__next__``).
        batch_ms: its time.
        samples: traced samples.
        sample_ms: mean time of one sample (its top-level calls).
        steps: the sample chain, in order.
        before: batch-level calls before the first sample's work.
        after: batch-level calls after it (collate).
        placed: whether a migration plan said where calls run.
    """

    batch_name: str
    batch_ms: float
    samples: int
    sample_ms: float
    steps: list[Box] = field(default_factory=list)
    before: list[Box] = field(default_factory=list)
    after: list[Box] = field(default_factory=list)
    placed: bool = False

    @property
    def samples_share_pct(self) -> float:
        """The samples' share of the batch's time."""
        total = self.sample_ms * self.samples
        return 100.0 * total / self.batch_ms if self.batch_ms > 0 else 0.0


def short_label(name: str, keep: int = 28) -> str:
    """The name when it is short (``numpy.random.default_rng``), else its last two parts
    (``torch.utils.data._utils.collate.default_collate``: ``collate.default_collate``)."""
    parts = name.split(".")
    return name if len(name) <= keep or len(parts) <= 2 else ".".join(parts[-2:])


def _placements(plan: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """Context key -> device of calls placed per call; function -> device of batched chains."""
    if not plan:
        return {}, {}
    per_call = {str(k): str(v) for k, v in (plan.get("context_device_map") or {}).items()}
    section = plan.get("batched") or {}
    device = str(section.get("device") or plan.get("target_device") or "")
    batched = {
        str(step): device
        for chain in section.get("chains") or []
        if chain.get("batched")
        for step in (chain.get("steps") or [])
    }
    return per_call, batched


def _where(
    node: CallNode, per_call: dict[str, str], batched: dict[str, str], is_library: Any
) -> str:
    if node.name in batched:
        return f"batched on {batched[node.name]}"
    device = per_call.get(node.context_key)
    if device is not None:
        return f"torch on {device}"
    return LIBRARY if node.is_builtin or is_library(node.name.split(".", 1)[0]) else USER_CODE


def _batch_root(dag: ExecutionDAG) -> CallNode | None:
    roots = [c for c in dag.calls() if not dag.predecessors(c.id, "calls")]
    return max(roots, key=lambda c: c.total_ns) if roots else None


def _ancestors(dag: ExecutionDAG, ids: set[int]) -> set[int]:
    out: set[int] = set()
    stack = [p for i in ids for p in dag.predecessors(i, "calls")]
    while stack:
        node = stack.pop()
        if node not in out:
            out.add(node)
            stack.extend(dag.predecessors(node, "calls"))
    return out


OPEN_SHARE = 0.25
"""A function of the user's code taking this share of the samples' time or more is shown as the
calls it makes."""


def display_name(node: CallNode) -> str:
    """The name a reader knows a call by: an inherited method under the class of its ``self``
    (``transforms.Resize.__call__`` for ``Transform.__call__`` called on a ``Resize``)."""
    found = re.fullmatch(r"self=<(\w+)>", node.arg_summaries[0]) if node.arg_summaries else None
    parts = node.name.split(".")
    if found is None or len(parts) < 3 or parts[-2] == found.group(1):
        return node.name
    return ".".join([*parts[:-2], found.group(1), parts[-1]])


def _open_big_calls(
    dag: ExecutionDAG, samples: list[list[CallNode]], sample_ns: int, is_library: Any
) -> list[list[CallNode]]:
    """The samples' steps with each big function of the user's code replaced, in every sample,
    by the calls it makes; again for big ones among those (see the module docstring)."""
    for _ in range(8):  # nesting levels opened at most
        spent: dict[str, int] = defaultdict(int)
        for node in (n for steps in samples for n in steps):
            if dag.successors(node.id, "calls") and _where(node, {}, {}, is_library) == USER_CODE:
                spent[display_name(node)] += node.total_ns
        big = {name for name, ns in spent.items() if ns >= OPEN_SHARE * sample_ns}
        if not big:
            break
        samples = [
            [
                dag.call(c)
                for node in steps
                for c in (
                    sorted(dag.successors(node.id, "calls"))
                    if display_name(node) in big and dag.successors(node.id, "calls")
                    else [node.id]
                )
            ]
            for steps in samples
        ]
    return samples


def chain_view(dag: ExecutionDAG, plan: dict[str, Any] | None = None) -> ChainView:
    """The chain view of a traced DAG (see the module docstring)."""
    from codedag.backends.libraries import is_library_module
    from codedag.optimize.samples import sample_steps

    per_call, batched = _placements(plan)
    root = _batch_root(dag)
    samples = sample_steps(dag)
    if not samples and root is not None:
        samples = [[dag.call(i) for i in sorted(dag.successors(root.id, "calls"))]]
    samples = [s for s in samples if s]
    sample_ns = sum(n.total_ns for steps in samples for n in steps)
    samples = _open_big_calls(dag, samples, sample_ns, is_library_module)
    keyed: dict[tuple[str, int], list[CallNode]] = defaultdict(list)
    position: dict[tuple[str, int], list[float]] = defaultdict(list)
    for steps in samples:
        seen: dict[str, int] = defaultdict(int)
        for index, node in enumerate(steps):
            name = display_name(node)
            key = (name, seen[name])
            seen[name] += 1
            keyed[key].append(node)
            position[key].append(index / max(1, len(steps) - 1))
    order = sorted(keyed, key=lambda k: (sum(position[k]) / len(position[k]), k[1]))
    boxes = []
    for key in order:
        nodes = keyed[key]
        spent = sum(n.total_ns for n in nodes)
        boxes.append(
            Box(
                name=key[0],
                label=short_label(key[0]),
                ms=spent / len(nodes) / 1e6,
                share_pct=100.0 * spent / sample_ns if sample_ns else 0.0,
                samples=len(nodes),
                where=_where(nodes[0], per_call, batched, is_library_module),
            )
        )
    view = ChainView(
        batch_name=root.name if root is not None else "",
        batch_ms=root.total_ns / 1e6 if root is not None else sample_ns / 1e6,
        samples=len(samples),
        sample_ms=sample_ns / len(samples) / 1e6 if samples else 0.0,
        steps=boxes,
        placed=plan is not None,
    )
    if root is None or not samples:
        return view
    in_samples = {n.id for steps in samples for n in steps}
    first, last = min(in_samples), max(in_samples)
    framing = _ancestors(dag, in_samples) - {root.id}  # the samples' __getitem__ calls
    for child in sorted(dag.successors(root.id, "calls")):
        node = dag.call(child)
        if node.id in in_samples or node.id in framing or first < node.id < last:
            continue
        box = Box(
            name=node.name,
            label=short_label(node.name),
            ms=node.total_ns / 1e6,
            share_pct=100.0 * node.total_ns / root.total_ns if root.total_ns else 0.0,
            samples=1,
            where=_where(node, per_call, batched, is_library_module),
        )
        (view.before if node.id < first else view.after).append(box)
    return view
