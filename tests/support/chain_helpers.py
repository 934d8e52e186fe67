"""Small traced-batch DAGs for the chain view's tests, built by hand."""

from __future__ import annotations

from codedag.graph.model import ExecutionDAG

ROOT = "torch.utils.data.dataloader._BaseDataLoaderIter.__next__"
GETITEM = "mydata.ImageDataset.__getitem__"
COLLATE = "torch.utils.data._utils.collate.default_collate"


def traced_batch(samples: int = 3, steps: list[str] | None = None) -> ExecutionDAG:
    """A batch: the loader's ``__next__``, a sampler call, ``samples`` ``__getitem__`` calls of
    ``steps`` (a flip in every second sample only), then collate. Times in milliseconds: each
    step ``i`` of a sample takes ``i + 1`` ms."""
    steps = steps or ["cv2.imdecode", "cv2.resize", "cv2.flip", "mydata.normalize"]
    dag = ExecutionDAG(metadata={"dataloader": {"batch_size": samples}})
    per_sample = [s for s in steps]
    total = 0
    root = dag.add_call(name=ROOT, context_key=f"{ROOT}#0", total_ns=0)
    sampler = dag.add_call(name="torch.utils.data.sampler.BatchSampler.__iter__", total_ns=100_000)
    dag.add_edge(root, sampler, "calls")
    for k in range(samples):
        item = dag.add_call(name=GETITEM, context_key=f"{ROOT}#0/{GETITEM}#{k}", depth=1)
        dag.add_edge(root, item, "calls")
        spent = 0
        for i, name in enumerate(per_sample):
            if name == "cv2.flip" and k % 2:
                continue
            ns = (i + 1) * 1_000_000
            call = dag.add_call(
                name=name,
                context_key=f"{ROOT}#0/{GETITEM}#{k}/{name}#0",
                depth=2,
                total_ns=ns,
                self_ns=ns,
                is_builtin=name.startswith("cv2."),
            )
            dag.add_edge(item, call, "calls")
            spent += ns
        dag.nodes[item].total_ns = spent  # type: ignore[union-attr]
        total += spent
    collate = dag.add_call(name=COLLATE, context_key=f"{ROOT}#0/{COLLATE}#0", total_ns=2_000_000)
    dag.add_edge(root, collate, "calls")
    dag.nodes[root].total_ns = total + 2_100_000 + 500_000  # type: ignore[union-attr]
    return dag
