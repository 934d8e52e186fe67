"""Finding element-wise runs on uint8 arrays in traced samples, and the plan's section."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
import torch

from codedag.errors import ConfigError
from codedag.experiments import pipelines
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.tables import find_runs
from codedag.plan import MigrationPlan
from codedag.trace.tracer import trace_dataloader


def _dag(name: str) -> Any:
    loader = pipelines.make_loader(name, batch_size=2, num_workers=0, seed=0, n=4)
    tracer, _ = trace_dataloader(loader)
    return tracer.dag


@pytest.fixture(scope="module")
def demo_dag() -> Any:
    return _dag("demo_image")


def test_the_demos_normalization_starts_at_its_warp(demo_dag: Any) -> None:
    section = find_runs(demo_dag)
    (run,) = section.runs
    assert run.producer == "cv2.warpAffine"
    assert run.callers == ["codedag.experiments.demo_data.ImageDemoDataset.__getitem__"]
    assert run.calls[0] == "numpy.ndarray.astype" and len(run.calls) >= 2
    assert run.consumer == "numpy.transpose"
    assert run.samples == 2 and run.traced_ns > 0
    assert "torch.from_numpy" in section.guards and "cv2.resize" in section.guards


def test_a_producer_the_cache_owns_is_left_to_it(demo_dag: Any) -> None:
    section = find_runs(demo_dag, cached=frozenset({"cv2.warpAffine"}))
    assert section.runs == [] and section.note


def test_functions_a_placement_patches_are_neither_producers_nor_guards(demo_dag: Any) -> None:
    section = find_runs(demo_dag, owned=frozenset({"cv2.warpAffine", "cv2.resize"}))
    assert section.runs == []
    assert "cv2.resize" not in section.guards and "cv2.imdecode" in section.guards


def test_what_collate_converts_with_is_always_guarded() -> None:
    guards = find_runs(_dag("pil_recipe")).guards
    assert {"torch.as_tensor", "torch.from_numpy"} <= set(guards)


def test_a_pil_recipes_conversion_with_a_dtype_is_a_producer() -> None:
    (run,) = find_runs(_dag("pil_recipe")).runs
    assert run.producer == "numpy.asarray"
    assert run.calls[0] == "numpy.ndarray.astype"


def test_no_run_without_a_uint8_normalization() -> None:
    assert find_runs(_dag("volume")).runs == []


def test_the_plan_carries_the_section_with_the_cache_or_when_asked(demo_dag: Any) -> None:
    off = OptimizerManager(target_device="cpu", calibrate=False).optimize(demo_dag)
    assert "tables" not in off["migration_plan"]
    manager = OptimizerManager(target_device="cpu", calibrate=False, tables="auto")
    plan = manager.optimize(demo_dag)["migration_plan"]
    model = MigrationPlan.from_dict(plan)
    assert model.tables is not None
    assert [r.producer for r in model.tables.planned] == ["cv2.warpAffine"]
    assert MigrationPlan.from_dict(model.to_dict()).tables == model.tables
    with pytest.raises(ConfigError, match="tables must be"):
        OptimizerManager(tables="sometimes")


class _Permuted(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.resize(np.full((8, 8, 3), index, np.uint8), (4, 4))
        return torch.from_numpy(image).permute(2, 0, 1).float() / 255.0


def test_tensor_methods_are_never_guards() -> None:
    """A tensor's methods (``torch._C.TensorBase.permute``) are attributes of a C type: they
    cannot be patched, and a run value never reaches them (it is an array, not a tensor)."""
    tracer, _ = trace_dataloader(torch.utils.data.DataLoader(_Permuted(), batch_size=2))
    guards = find_runs(tracer.dag).guards
    assert "torch.from_numpy" in guards
    assert not [g for g in guards if g.startswith(("torch._C.", "torch.Tensor."))], guards


class _ReflectedOperator(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        image = cv2.resize(np.full((8, 8, 3), index, np.uint8), (4, 4))
        box = torch.tensor([1.0, 2.0])
        return torch.from_numpy(image), 4 - box  # Tensor.__rsub__, a function made in a function


def test_functions_without_a_path_from_their_module_are_never_guards() -> None:
    """``Tensor.__rsub__`` is traced by its name, ``torch._tensor.<a decorator>.<locals>.
    wrapped``: no module attribute holds it, so applying the plan could only warn that it
    cannot be patched."""
    tracer, _ = trace_dataloader(torch.utils.data.DataLoader(_ReflectedOperator(), batch_size=2))
    assert [n.name for n in tracer.dag.calls() if "<locals>" in n.name]
    guards = find_runs(tracer.dag).guards
    assert "torch.from_numpy" in guards
    assert not [g for g in guards if "<" in g], guards


class _Drawn(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        import random

        image = cv2.resize(np.full((8, 8, 3), index, np.uint8), (4, 4))
        if random.random() < 0.5:
            image = cv2.flip(image, 1)
        image = image[:, :, random.choice([0, 1, 2])]
        return torch.from_numpy(image.astype(np.float32) / 255.0)


def test_pythons_random_draws_are_never_guards() -> None:
    """``random.random`` and ``random.choice`` take Python values (a run value through its
    methods): guarding them would only name, at every apply, functions no registry patches."""
    tracer, _ = trace_dataloader(torch.utils.data.DataLoader(_Drawn(), batch_size=2))
    assert {"random.random", "random.choice"} <= {n.name for n in tracer.dag.calls()}
    guards = find_runs(tracer.dag).guards
    assert "cv2.resize" in guards
    assert not [g for g in guards if g.startswith("random.")], guards


class _FloatConversions(torch.utils.data.Dataset):
    """``np.asarray`` of a float array, then a gain: a conversion, but of no uint8 array."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        wave = np.asarray(np.linspace(0, 1, 64, dtype=np.float64) + index, dtype=np.float32)
        return torch.from_numpy(wave * 0.5 + 0.25)


def test_a_conversion_of_an_array_that_is_not_uint8_starts_no_run() -> None:
    loader = torch.utils.data.DataLoader(_FloatConversions(), batch_size=2)
    tracer, _ = trace_dataloader(loader)
    assert find_runs(tracer.dag).runs == []
