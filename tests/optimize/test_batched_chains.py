"""Finding each sample's chain of deferrable calls in traced DataLoader batches."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.experiments import pipelines
from codedag.optimize.chains import (
    ELEMENTWISE,
    LIBRARY,
    TENSOR,
    VIEW,
    find_chains,
    step_kind,
)
from codedag.trace import trace_dataloader

MEAN = np.array([0.5, 0.4, 0.3], dtype=np.float32)


def _scale(img: np.ndarray) -> np.ndarray:
    """A helper returning what it computes, as training code writes it."""
    return img.astype(np.float32) / 255.0


class Flipping(Dataset):
    """resize, BGR->RGB, a flip for even indices only, operators, CHW, torch."""

    def __init__(self, n: int = 4, force: bool = False, draw: bool = False) -> None:
        rng = np.random.default_rng(0)
        self.images = [rng.integers(0, 256, (20, 28, 3), dtype=np.uint8) for _ in range(n)]
        self.force = force
        self.draw = draw

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.resize(self.images[index], (16, 16), interpolation=cv2.INTER_LINEAR)
        if self.draw:
            cv2.rectangle(img, (1, 1), (5, 5), (255, 0, 0), 1)  # no backend: the chain starts after
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if index % 2 == 0:
            img = cv2.flip(img, 1)
        x = _scale(img)
        if self.force:
            x = cv2.rectangle(x, (0, 0), (2, 2), (1.0, 0.0, 0.0), 1)  # forces the value
        x = (x - MEAN) * 2.0
        x = np.ascontiguousarray(x.transpose(2, 0, 1))
        return torch.from_numpy(x), index


def _trace(dataset: Dataset) -> Any:
    loader = DataLoader(dataset, batch_size=len(dataset), shuffle=False)
    tracer, _ = trace_dataloader(loader)
    return tracer.dag


def test_step_kinds_follow_what_a_deferred_value_records() -> None:
    def library(name: str) -> bool:
        return name == "cv2.resize"

    assert step_kind("cv2.resize", library) == LIBRARY
    assert step_kind("cv2.imdecode", library) is None
    assert step_kind("operator.truediv", library) == ELEMENTWISE
    assert step_kind("numpy.exp", library) == ELEMENTWISE
    assert step_kind("numpy.ndarray.astype", library) == VIEW
    assert step_kind("operator.getitem", library) == VIEW
    assert step_kind("torch.from_numpy", library) == TENSOR
    assert step_kind("torch.Tensor.permute", library) == TENSOR
    assert step_kind("operator.setitem", library) is None  # a write through the value
    assert step_kind("numpy.ndarray.mean", library) is None  # a reduction read as a number


def test_one_chain_per_entry_grouped_across_samples_with_optional_steps() -> None:
    found = find_chains(_trace(Flipping()))
    assert found.samples == 4
    assert len(found.candidates) == 1
    chain = found.candidates[0]
    assert chain.entry_function == "cv2.resize"
    assert len(chain.samples) == 4
    assert chain.functions == ["cv2.cvtColor", "cv2.flip", "cv2.resize"]
    # the flip only some samples take is in the merged steps, after cvtColor
    steps = chain.steps
    assert steps[:3] == ["cv2.resize", "cv2.cvtColor", "cv2.flip"]
    assert "torch.from_numpy" in steps
    names = [s.names for s in chain.samples]
    assert sum("cv2.flip" in n for n in names) == 2
    assert all(k.endswith("cv2.resize#0") for k in chain.entries)
    assert len(chain.entries) == 4
    first = chain.samples[0].steps
    assert first[0].data_slot == "0" and first[0].args is not None
    assert first[1].data_slot == "0"  # cvtColor received the resized image


class TensorMethods(Dataset):
    """resize, then a validation transform written with tensor methods (torch's C base class
    defines them: the trace names them ``torch._C.TensorBase.<method>``)."""

    def __init__(self, n: int = 4) -> None:
        rng = np.random.default_rng(1)
        self.images = [rng.integers(0, 256, (20, 28, 3), dtype=np.uint8) for _ in range(n)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.resize(self.images[index], (16, 16), interpolation=cv2.INTER_LINEAR)
        return torch.from_numpy(img).permute(2, 0, 1).float().div(255.0), index


def test_a_chain_goes_on_through_tensor_methods() -> None:
    assert step_kind("torch._C.TensorBase.permute", lambda name: False) == TENSOR
    (chain,) = find_chains(_trace(TensorMethods())).candidates
    names = chain.steps
    assert names[:2] == ["cv2.resize", "torch.from_numpy"]
    assert "torch.Tensor.permute" in names and "torch.Tensor.float" in names  # as batched
    assert not any(name.startswith("torch._C.") for name in names)  # execution names them


def test_a_call_without_a_backend_on_the_value_cuts_the_chain() -> None:
    found = find_chains(_trace(Flipping(draw=True)))
    (chain,) = found.candidates
    # resize's image is drawn on in place by cv2.rectangle: the chain starts at cvtColor
    assert chain.entry_function == "cv2.cvtColor"
    assert "cv2.resize" not in chain.functions


def test_a_forcing_consumer_keeps_only_the_suffix_after_it() -> None:
    found = find_chains(_trace(Flipping(force=True)))
    for chain in found.candidates:
        assert "cv2.resize" not in chain.functions
        assert "cv2.cvtColor" not in chain.functions


def test_placement_rules_exclude_calls_from_chains() -> None:
    dag = _trace(Flipping())
    found = find_chains(dag, allowed=lambda node: node.name != "cv2.resize")
    (chain,) = found.candidates
    assert chain.entry_function == "cv2.cvtColor"


def test_a_trace_without_samples_has_no_chains() -> None:
    from codedag.graph.model import ExecutionDAG

    found = find_chains(ExecutionDAG())
    assert found.candidates == [] and found.samples == 0
    assert "__getitem__" in found.note


@pytest.mark.parametrize("name", ["letterbox", "demo_image"])
def test_realistic_pipelines_have_their_image_chain(name: str) -> None:
    sizes: dict[str, Any] = (
        {"img_size": 32, "min_size": 24, "max_size": 40}
        if name == "letterbox"
        else {"image_size": 16, "source_size": 32}
    )
    loader = pipelines.make_loader(name, batch_size=3, n=3, seed=0, **sizes)
    tracer, _ = trace_dataloader(loader)
    found = find_chains(tracer.dag)
    assert found.samples == 3
    (chain,) = found.candidates
    assert chain.entry_function == "cv2.resize"
    assert {"cv2.resize", "cv2.cvtColor"} <= set(chain.functions)
    assert len(chain.samples) == 3
