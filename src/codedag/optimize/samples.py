"""The traced samples of a DataLoader batch: which calls of the trace each sample made.

Samples are the ``__getitem__`` calls of the traced batch (each index of a batched
``__getitems__`` that calls one method per index, or the resumptions of an iterable data set's
generator). Where the dataset's code was not recorded (its module is excluded from tracing) the
operations directly under the DataLoader's ``__next__`` are split into samples by their dataflow.
The passes that look for work inside samples (batched chains, cached prefixes, lookup tables)
read them here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from codedag.graph.model import ExecutionDAG


def is_operation(node: Any) -> bool:
    """A call that computes (library call, C function, step) rather than user code around it."""
    return bool(node.is_builtin) or node.args is not None


def _sample_roots(dag: ExecutionDAG, resumptions: bool = False) -> list[Any]:
    """The outermost ``__getitem__`` calls: one per traced sample (none when not recorded);
    ``resumptions``: for an iterable data set, its ``__iter__`` generator's resumptions
    instead (:func:`_resumptions`)."""
    roots = [
        n
        for n in sorted(dag.calls(), key=lambda n: n.id)
        if n.name.rsplit(".", 1)[-1] in ("__getitem__", "__getitems__")
        and not any(_ancestor_named(dag, n.id, "__getitem__"))
    ]
    # a batched fetch calling self[i] holds __getitem__ roots of its own: each sample once
    by_id = {sample.id: sample for n in roots for sample in _per_index(dag, n)}
    roots = [by_id[i] for i in sorted(by_id)]
    return roots if roots or not resumptions else _resumptions(dag)


def _per_index(dag: ExecutionDAG, root: Any) -> list[Any]:
    """A batched fetch's samples: where ``__getitems__`` makes the batch by calling one method
    or function of the pipeline's once per index (``self[i]``, a ``load(i)`` helper), each of
    those calls is a sample; otherwise (and for ``__getitem__``) the fetch is one."""
    if not root.name.endswith(".__getitems__"):
        return [root]
    children = _calls_through_comprehensions(dag, root.id)
    own = Counter(c.name for c in children if not is_operation(c))
    if not own:
        return [root]
    name, count = own.most_common(1)[0]
    return [c for c in children if c.name == name] if count >= 2 else [root]


_COMPREHENSIONS = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>")


def _calls_through_comprehensions(dag: ExecutionDAG, node_id: int) -> list[Any]:
    """The calls ``node_id`` makes, those of a comprehension it runs included (before Python
    3.12 a comprehension is a function of its own: ``[self.load(i) for i in indices]``)."""
    out = []
    for child_id in sorted(dag.successors(node_id, "calls")):
        child = dag.nodes[child_id]
        if child.name.endswith(_COMPREHENSIONS):
            out.extend(_calls_through_comprehensions(dag, child_id))
        else:
            out.append(child)
    return out


def _resumptions(dag: ExecutionDAG) -> list[Any]:
    """The resumptions of an iterable data set's generator by the DataLoader's ``__next__``:
    the tracer records each as a call of its own, which runs from one ``yield`` to the next, so
    each makes one sample. The generator is the data set's ``__iter__`` or another method of its
    class that ``__iter__`` hands the work to (none for a map-style data set, or a generator
    that is not the data set's own)."""
    info = (getattr(dag, "metadata", {}) or {}).get("dataloader") or {}
    dataset = info.get("dataset")
    if not info.get("iterable") or not isinstance(dataset, str) or not dataset:
        return []
    owner = f".{dataset}"
    return [
        n
        for n in sorted(dag.calls(), key=lambda n: n.id)
        if n.name.rsplit(".", 1)[0].endswith(owner)
        and any(
            dag.nodes[p].name.endswith("_BaseDataLoaderIter.__next__")
            for p in dag.predecessors(n.id, "calls")
        )
    ]


def _loader_samples(dag: ExecutionDAG) -> list[list[Any]]:
    """Operations directly under the DataLoader's ``__next__``, split by dataflow."""
    fetches = [n for n in sorted(dag.calls(), key=lambda n: n.id)
               if n.name.endswith("_BaseDataLoaderIter.__next__")]  # fmt: skip
    out: list[list[Any]] = []
    for fetch in fetches:
        children = [
            dag.nodes[i]
            for i in sorted(dag.successors(fetch.id, "calls"))
            if is_operation(dag.nodes[i]) and "collate" not in dag.nodes[i].name
        ]
        out.extend(_components(dag, children))
    return out


def traced_samples(dag: ExecutionDAG, resumptions: bool = False) -> list[list[Any]]:
    """The operations of each traced sample (see the module docstring; ``resumptions``: an
    iterable data set's samples are its generator's resumptions, :func:`_resumptions`)."""
    roots = _sample_roots(dag, resumptions)
    if roots:
        return [[dag.nodes[i] for i in _descendants(dag, r.id)] for r in roots]
    return _loader_samples(dag)


def sample_steps(dag: ExecutionDAG) -> list[list[Any]]:
    """Each traced sample's top-level calls, in order: the calls ``__getitem__`` made directly
    (a helper of the dataset counts as one call, its work included). Where the dataset's code was
    not recorded, the operations under the DataLoader's ``__next__`` are cut where the first
    operation comes again, when that gives the batch's sample count (samples are fetched one
    after the other), else split by dataflow."""
    roots = _sample_roots(dag)
    if roots:
        return [[dag.nodes[i] for i in sorted(dag.successors(r.id, "calls"))] for r in roots]
    components = _loader_samples(dag)
    ops = sorted((n for group in components for n in group), key=lambda n: n.id)
    if not ops:
        return components
    cuts = [i for i, n in enumerate(ops) if n.name == ops[0].name]
    if len(cuts) == sample_count(dag, components):
        return [ops[a:b] for a, b in zip(cuts, [*cuts[1:], len(ops)])]
    return components


def _reached(step: Callable[[int, str], Iterable[int]], node_id: int) -> Iterator[int]:
    """Every node reached from ``node_id`` (not itself) through ``calls`` edges, depth first;
    ``step``: ``dag.predecessors`` (callers) or ``dag.successors`` (callees)."""
    stack = list(step(node_id, "calls"))
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        yield node
        stack.extend(step(node, "calls"))


def _ancestor_named(dag: ExecutionDAG, node_id: int, short: str) -> Iterable[int]:
    for parent in _reached(dag.predecessors, node_id):
        if dag.nodes[parent].name.rsplit(".", 1)[-1] == short:
            yield parent


def _descendants(dag: ExecutionDAG, node_id: int) -> list[int]:
    return sorted(_reached(dag.successors, node_id))


def _components(dag: ExecutionDAG, ops: list[Any]) -> list[list[Any]]:
    """Operations split by dataflow (union-find over producer -> consumer)."""
    parent = {n.id: n.id for n in ops}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for node in ops:
        for value in dag.successors(node.id, "produces"):
            for consumer in dag.successors(value, "uses"):
                if consumer in parent:
                    parent[find(consumer)] = find(node.id)
    groups: dict[int, list[Any]] = {}
    for node in ops:
        groups.setdefault(find(node.id), []).append(node)
    return sorted(groups.values(), key=lambda g: g[0].id)


def sample_count(dag: ExecutionDAG, samples: list[list[Any]]) -> int:
    """Samples in the traced batch: ``__getitem__`` calls, else what the DataLoader says."""
    if any(n.name.rsplit(".", 1)[-1] in ("__getitem__", "__getitems__") for n in dag.calls()):
        return len(samples)
    info = (getattr(dag, "metadata", {}) or {}).get("dataloader") or {}
    indices = info.get("batch_indices")
    if isinstance(indices, list) and indices:
        return len(indices)
    size = info.get("batch_size")
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return sum(1 for ops in samples if len(ops) > 1)
