"""Synthetic execution DAGs shaped like a traced DataLoader, for tests and benchmarks.

One batch is what ``next(iter(dataloader))`` traces: the iterator's ``__next__`` fetches B samples
through ``Dataset.__getitem__`` (imread, resize, cvtColor, a random flip, clip), then collates
them (fan-in to ``numpy.stack``). Larger graphs repeat batches. Times are drawn from log-normal
distributions around plausible medians; everything is deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from collections import Counter

from codedag.graph.model import CallNode, ExecutionDAG

NEXT = "torch.utils.data.dataloader._SingleProcessDataLoaderIter.__next__"
NEXT_INDEX = "torch.utils.data.dataloader._SingleProcessDataLoaderIter._next_index"
FETCH = "torch.utils.data._utils.fetch._MapDatasetFetcher.fetch"
GETITEM = "mypkg.data.Dataset.__getitem__"
LOAD = "mypkg.data.Dataset.load_image"
COLLATE = "torch.utils.data._utils.collate.default_collate"

# (name, median self time in microseconds, output bytes per sample)
_SAMPLE_OPS: tuple[tuple[str, float, int], ...] = (
    ("cv2.resize", 300.0, 224 * 224 * 3),
    ("cv2.cvtColor", 90.0, 224 * 224 * 3),
    ("cv2.flip", 40.0, 224 * 224 * 3),
    ("numpy.clip", 250.0, 224 * 224 * 3 * 4),
)
_RAW_BYTES = 480 * 640 * 3


class _Builder:
    def __init__(self, seed: int) -> None:
        self.dag = ExecutionDAG(metadata={"synthetic": True, "seed": seed})
        self.rng = random.Random(seed)
        self.counts: dict[int | None, Counter[str]] = {}
        self.keys: dict[int, str] = {}

    def time_ns(self, median_us: float) -> int:
        return int(median_us * 1000 * self.rng.lognormvariate(0.0, 0.25))

    def call(self, name: str, parent: int | None, depth: int, self_ns: int, builtin: bool) -> int:
        counter = self.counts.setdefault(parent, Counter())
        segment = f"{name}#{counter[name]}"
        counter[name] += 1
        key = segment if parent is None else f"{self.keys[parent]}/{segment}"
        node = self.dag.add_call(
            name=name,
            context_key=key,
            call_site=f"pipeline.py:{10 + depth}",
            depth=depth,
            total_ns=self_ns,
            self_ns=self_ns,
            is_builtin=builtin,
        )
        self.keys[node] = key
        if parent is not None:
            self.dag.add_edge(parent, node, "calls")
        return node

    def value(self, producer: int, nbytes: int, version: int = 0) -> int:
        node = self.dag.add_value(
            name="ndarray", version=version, type_name="numpy.ndarray", nbytes=nbytes
        )
        self.dag.add_edge(producer, node, "produces")
        return node

    def use(self, value: int, call: int) -> None:
        self.dag.add_edge(value, call, "uses")

    def finish(self, node: int, children: list[int]) -> None:
        """Set a call's total time to its self time plus its callees' totals."""
        nodes = self.dag.nodes
        call = nodes[node]
        assert isinstance(call, CallNode)
        call.total_ns = call.self_ns + sum(getattr(nodes[c], "total_ns", 0) for c in children)


def _sample(b: _Builder, fetch: int, flip_prob: float) -> int:
    get = b.call(GETITEM, fetch, 2, b.time_ns(15.0), False)
    load = b.call(LOAD, get, 3, b.time_ns(10.0), False)
    imread = b.call("cv2.imread", load, 4, b.time_ns(2000.0), True)
    b.value(imread, _RAW_BYTES)
    b.finish(load, [imread])
    loaded = b.value(load, _RAW_BYTES, version=1)
    children = [load]
    current = loaded
    for name, median_us, nbytes in _SAMPLE_OPS:
        if name == "cv2.flip" and b.rng.random() >= flip_prob:
            continue
        op = b.call(name, get, 3, b.time_ns(median_us), True)
        b.use(current, op)
        current = b.value(op, nbytes)
        children.append(op)
    b.finish(get, children)
    return b.value(get, b.dag.nodes[current].nbytes, version=1)  # type: ignore[union-attr]


def trace_shaped_dag(
    n_nodes: int, batch_size: int = 32, seed: int = 0, flip_prob: float = 0.5
) -> ExecutionDAG:
    """A DAG of about ``n_nodes`` nodes (at least one batch) shaped like a DataLoader trace.

    Args:
        n_nodes: wanted node count; whole batches are added until it is reached.
        batch_size: samples per batch (B): per-sample subgraphs repeat B times per batch.
        seed: seed of times and of the random flips.
        flip_prob: chance that a sample's pipeline includes ``cv2.flip`` (structural variety).
    """
    b = _Builder(seed)
    sampler_state: int | None = None
    while True:
        root = b.call(NEXT, None, 0, b.time_ns(30.0), False)
        index = b.call(NEXT_INDEX, root, 1, b.time_ns(20.0), False)
        if sampler_state is not None:  # the sampler iterator flows from batch to batch
            b.use(sampler_state, index)
        indices = b.value(index, 8 * batch_size)
        sampler_state = b.value(index, 64)
        fetch = b.call(FETCH, root, 1, b.time_ns(25.0), False)
        b.use(indices, fetch)
        outputs = [_sample(b, fetch, flip_prob) for _ in range(batch_size)]
        fetch_children = list(b.dag.successors(fetch, "calls"))
        collate = b.call(COLLATE, fetch, 2, b.time_ns(40.0), False)
        stack = b.call("numpy.stack", collate, 3, b.time_ns(30.0 * batch_size), True)
        for out in outputs:
            b.use(out, stack)
        sample_bytes = sum(getattr(b.dag.nodes[o], "nbytes", 0) for o in outputs)
        b.value(stack, sample_bytes)
        b.finish(collate, [stack])
        b.value(collate, sample_bytes, version=1)
        b.finish(fetch, [*fetch_children, collate])
        b.value(fetch, sample_bytes, version=2)
        b.finish(root, [index, fetch])
        b.value(root, sample_bytes, version=3)
        if len(b.dag.nodes) >= n_nodes:
            return b.dag
