"""Tracing one DataLoader batch with 0 and 2 workers."""

from __future__ import annotations

import functools

import cv2
import numpy as np
import pytest
import torch
import trace_datasets
from cv2 import cvtColor as bound_at_import  # as user code binds a library function
from torch.utils.data import DataLoader, Dataset

from codedag.trace import EnhancedTracer, trace_dataloader

GETITEM = "trace_datasets.ImageDataset.__getitem__"


def check_batch_dag(dag, batch) -> None:
    dag.self_check()
    getitems = [n for n in dag.calls() if n.name == GETITEM]
    assert len(getitems) == 4
    (nxt,) = [n for n in dag.calls() if n.depth == 0]
    assert nxt.name.startswith("torch.utils.data.dataloader.") and nxt.name.endswith("__next__")
    assert all(g.depth == 1 and g.context_key.startswith(nxt.context_key + "/") for g in getitems)
    assert getitems[2].context_key.endswith(f"/{GETITEM}#2")
    children = [dag.nodes[c].name for c in dag.successors(getitems[0].id, "calls")]
    assert children == [
        "trace_datasets.ImageDataset.load",
        "cv2.resize",
        "cv2.cvtColor",
        "cv2.normalize",
    ]
    (collate,) = [n for n in dag.calls() if n.name.endswith("collate.default_collate")]
    # every sample tuple __getitem__ returned flows into collate
    consumers = {c for g in getitems for c in dag.dataflow_successors(g.id)}
    assert consumers == {collate.id}
    outs = [dag.nodes[v] for v in dag.successors(collate.id, "produces")]
    assert [v.type_name for v in outs] == ["builtins.list", "torch.Tensor", "torch.Tensor"]
    assert outs[1].shape == [4, 24, 24, 3] and outs[1].dtype == "float32"
    assert isinstance(batch[0], torch.Tensor) and batch[0].shape == (4, 24, 24, 3)


def test_zero_workers_traces_the_real_batch() -> None:
    tracer, batch = trace_dataloader(trace_datasets.loader(num_workers=0))
    check_batch_dag(tracer.dag, batch)
    info = tracer.dag.metadata["dataloader"]
    assert info["num_workers"] == 0 and info["reproduced_in_process"] is False


@pytest.mark.timeout(120)
def test_two_workers_reproduce_the_first_batch_in_process() -> None:
    loader = trace_datasets.loader(num_workers=2)
    tracer = EnhancedTracer()
    batch = tracer.trace_dataloader(loader)
    check_batch_dag(tracer.dag, batch)
    info = tracer.dag.metadata["dataloader"]
    assert info["num_workers"] == 2 and info["reproduced_in_process"] is True
    assert info["batch_indices"] == [0, 1, 2, 3]
    # same batch as the workers produce
    real = next(iter(loader))
    assert torch.equal(real[0], batch[0]) and torch.equal(real[1], batch[1])


def test_shuffled_loader_uses_the_sampler_indices() -> None:
    torch.manual_seed(0)
    loader = trace_datasets.loader(num_workers=2, shuffle=True)
    tracer, batch = trace_dataloader(loader)
    indices = tracer.dag.metadata["dataloader"]["batch_indices"]
    assert sorted(batch[1].tolist()) == sorted(i % 3 for i in indices)
    assert len(set(indices)) == 4


def test_multi_worker_next_inside_a_window_records_the_main_process_side() -> None:
    loader = trace_datasets.loader(num_workers=2)
    iterator = iter(loader)
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        batch = next(iterator)
    del iterator
    names = [n.name for n in tracer.dag.calls()]
    assert names[0].endswith("__next__") and GETITEM not in names
    assert batch[0].shape == (4, 24, 24, 3)


def test_numpy_indices_from_a_custom_batch_sampler_are_plain_ints() -> None:
    import numpy as np
    from torch.utils.data import DataLoader

    sampler = [np.array([5, 1], dtype=np.int64)]
    loader = DataLoader(trace_datasets.ImageDataset(), batch_sampler=sampler, num_workers=2)
    tracer, batch = trace_dataloader(loader)
    assert tracer.dag.metadata["dataloader"]["batch_indices"] == [5, 1]
    assert batch[1].tolist() == [5 % 3, 1 % 3]


def _assert_same_batch(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y), (x, y)


def _random_states():
    import random

    import numpy as np

    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state().tolist()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("init", [False, True])
def test_replay_under_random_augmentation_equals_the_workers_batch(init) -> None:
    torch.manual_seed(123)
    loader = trace_datasets.augmented_loader(num_workers=2, init=init)
    before = _random_states()
    tracer, traced = trace_dataloader(loader, warmup=2)
    assert _random_states() == before  # tracing leaves the process's random state as it was
    info = tracer.dag.metadata["dataloader"]
    assert info["reproduced_in_process"] and info["worker_id"] == 0 and info["warmup"] == 2
    assert info["worker_init_fn_run"] is init
    torch.manual_seed(123)
    real = next(iter(trace_datasets.augmented_loader(num_workers=2, init=init)))
    _assert_same_batch(traced, real)
    assert traced[4].tolist() == [0, 0, 0, 0]  # get_worker_info() said worker 0
    # the augmentation ran under the tracer: warpAffine per sample, a flip step where drawn
    dag = tracer.dag
    assert len([n for n in dag.calls() if n.name == "cv2.warpAffine"]) == 4
    assert torch.get_num_threads() >= 1


def test_zero_workers_warm_up_replays_the_first_batch() -> None:
    torch.manual_seed(5)
    loader = trace_datasets.augmented_loader(num_workers=0)
    tracer, traced = trace_dataloader(loader, warmup=1)
    real = next(iter(loader))  # same state as before tracing: the same first batch
    _assert_same_batch(traced, real)
    assert tracer.dag.metadata["dataloader"]["reproduced_in_process"] is False
    assert traced[4].tolist() == [-1, -1, -1, -1]


def test_warmup_must_be_a_count() -> None:
    from codedag.errors import ConfigError

    with pytest.raises(ConfigError, match="warmup must be an integer >= 0, got -1"):
        trace_dataloader(trace_datasets.loader(), warmup=-1)


class PartialSteps(Dataset):
    """Transforms as projects write them: a partial of a library function, a lambda calling a
    name bound at import."""

    def __init__(self) -> None:
        self.steps = [
            functools.partial(cv2.resize, dsize=(8, 8), interpolation=cv2.INTER_AREA),
            lambda image: bound_at_import(image, cv2.COLOR_BGR2RGB),
        ]

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        image = np.full((16, 16, 3), (i, 2 * i, 3 * i), np.uint8)
        for step in self.steps:
            image = step(image)
        return torch.from_numpy(image)


def test_calls_through_a_partial_or_a_name_bound_at_import_are_recorded_with_arguments() -> None:
    dataset = PartialSteps()
    tracer, batch = trace_dataloader(DataLoader(dataset, batch_size=4))
    for name in ("cv2.resize", "cv2.cvtColor"):
        calls = [n for n in tracer.dag.calls() if n.name == name]
        assert len(calls) == 4 and all(n.args is not None for n in calls), name
    assert batch.shape == (4, 8, 8, 3) and batch[1, 0, 0].tolist() == [3, 2, 1]
    assert dataset.steps[0].func is cv2.resize  # put back after the window
    assert bound_at_import is cv2.cvtColor
